//! The one decision every face calls: the certificate checks (cached) and then the site's
//! access rule, from what any face can supply. The gateway proxy calls it per request; a
//! face that only reports (the check endpoint) calls [`CheckService::check`], its first half.

use std::sync::Arc;
use std::time::{Duration, Instant};

use time::OffsetDateTime;

use super::{CheckService, Checked};
use crate::cert::PspCertificate;
use crate::policy::{self, Permit, Policy, Rejection};
use crate::register::ServiceSet;

/// Where calls are decided: a bank site's access rule (its jurisdiction is the rule's).
#[derive(Debug, Clone)]
pub struct Site {
    pub policy: Policy,
    /// `danger.gateway_report_only`: a refusal is recorded, not enforced.
    pub report_only: bool,
}

/// One call to decide, as any face can supply it: the client's certificate (from the TLS
/// handshake, a trusted proxy's header, or an external-authorisation request), the other
/// certificates presented with it, the services the route needs, and the time.
#[derive(Debug, Clone)]
pub struct Call {
    pub certificate: Arc<PspCertificate>,
    pub intermediates: Arc<Vec<PspCertificate>>,
    /// The payment services the called route needs (its route rule).
    pub required: ServiceSet,
    pub now: OffsetDateTime,
}

/// What was decided: the check's result, the rule's answer, and how long the check took.
#[derive(Debug)]
pub struct Decision {
    pub checked: Arc<Checked>,
    /// A permit (in report-only mode, one that carries the refusal it did not enforce), or
    /// the refusal.
    pub outcome: Result<Permit<Checked>, Rejection>,
    /// The time the check took (a cache hit, or the whole check on a miss).
    pub check_time: Duration,
}

impl CheckService {
    /// Decides `call` at `site`: the four certificate checks with revocation and the
    /// registers (cached, [`CheckService::check`]), then the access rule
    /// ([`policy::decide`], or [`policy::decide_report_only`] when the site only reports).
    pub async fn decide(&self, site: &Site, call: Call) -> Decision {
        let started = Instant::now();
        let checked = self
            .check(
                Arc::clone(&call.certificate),
                call.intermediates,
                site.policy.jurisdiction,
                call.now,
            )
            .await;
        let check_time = started.elapsed();
        let outcome = if site.report_only {
            Ok(policy::decide_report_only(
                &site.policy,
                Arc::clone(&checked),
                &call.certificate,
                call.required,
            ))
        } else {
            policy::decide(
                &site.policy,
                Arc::clone(&checked),
                &call.certificate,
                call.required,
            )
        };
        Decision {
            checked,
            outcome,
            check_time,
        }
    }
}
