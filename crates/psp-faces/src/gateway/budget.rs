//! The upstream's budget of calls in flight, in total and per PSP (Envoy's circuit breakers
//! `max_requests` and `max_connections` are the model). Without it, one PSP with 20 HTTP/2
//! connections of 100 streams each made the gateway hold 1,867 connections to the bank's
//! API: each HTTP/1.1 call in flight holds an upstream connection of its own.
//!
//! A call past either budget is refused at once (503 `upstream_overloaded`), never queued: a
//! queue would hold the client's stream and memory for as long as the upstream is slow. A
//! ticket is taken after the access rule permitted the call and held until the response body
//! has been streamed back (or dropped), since the upstream connection is busy until then.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::dialect::OverloadScope;

/// Calls in flight, all PSPs together and per PSP.
#[derive(Debug)]
pub(super) struct UpstreamBudget {
    total: usize,
    per_psp: usize,
    state: Mutex<InFlight>,
}

#[derive(Debug, Default)]
struct InFlight {
    total: usize,
    /// Only PSPs with a call in flight: at most `total` entries.
    by_psp: HashMap<String, usize>,
}

/// One call in flight; given back when dropped.
#[derive(Debug)]
pub(super) struct Ticket {
    budget: Arc<UpstreamBudget>,
    psp: String,
}

impl UpstreamBudget {
    pub(super) fn new(total: usize, per_psp: usize) -> UpstreamBudget {
        UpstreamBudget {
            total,
            per_psp,
            state: Mutex::default(),
        }
    }

    /// The budget's settings, to keep the counts across a reload that leaves them unchanged.
    pub(super) fn settings(&self) -> (usize, usize) {
        (self.total, self.per_psp)
    }

    /// A ticket for one more call of `psp`, or the budget that is spent.
    pub(super) fn take(self: &Arc<Self>, psp: &str) -> Result<Ticket, OverloadScope> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let refused = if state.total >= self.total {
            Some(OverloadScope::Total)
        } else if state.by_psp.get(psp).copied().unwrap_or(0) >= self.per_psp {
            Some(OverloadScope::Psp)
        } else {
            None
        };
        if let Some(scope) = refused {
            // Counted by the request's logging phase (gateway::record).
            return Err(scope);
        }
        state.total += 1;
        *state.by_psp.entry(psp.to_owned()).or_insert(0) += 1;
        publish(state.total);
        Ok(Ticket {
            budget: Arc::clone(self),
            psp: psp.to_owned(),
        })
    }

    /// Calls in flight now: in total, and of `psp`.
    #[cfg(test)]
    fn in_flight(&self, psp: &str) -> (usize, usize) {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        (state.total, state.by_psp.get(psp).copied().unwrap_or(0))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self
            .budget
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.total = state.total.saturating_sub(1);
        if let Some(n) = state.by_psp.get_mut(&self.psp) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                state.by_psp.remove(&self.psp);
            }
        }
        publish(state.total);
    }
}

fn publish(total: usize) {
    crate::telemetry::metrics::metrics()
        .upstream_in_flight
        .set(i64::try_from(total).unwrap_or(i64::MAX));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_psp_cannot_take_more_than_its_share_and_others_still_get_in() {
        let budget = Arc::new(UpstreamBudget::new(5, 2));
        let a1 = budget.take("A").expect("first");
        let _a2 = budget.take("A").expect("second");
        assert_eq!(budget.take("A").err(), Some(OverloadScope::Psp));
        let _b1 = budget.take("B").expect("B is not A");
        drop(a1);
        let _a3 = budget
            .take("A")
            .expect("a ticket given back is taken again");
        assert_eq!(budget.in_flight("A"), (3, 2));
    }

    #[test]
    fn the_total_is_a_bound_for_every_psp_together() {
        let budget = Arc::new(UpstreamBudget::new(3, 2));
        let tickets: Vec<Ticket> = ["A", "B", "C"]
            .iter()
            .map(|p| budget.take(p).expect("under the total"))
            .collect();
        assert_eq!(budget.take("D").err(), Some(OverloadScope::Total));
        drop(tickets);
        assert_eq!(budget.in_flight("A"), (0, 0));
        let state = budget.state.lock().expect("lock");
        assert!(state.by_psp.is_empty(), "no entry outlives its calls");
    }
}
