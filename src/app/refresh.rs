//! The background refreshes: the fetched registers and the LOTL sources' lists, each round
//! followed by a reload of the reference data.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::record_register_history;
use crate::service::{CheckService, DataSources};

/// Fetches the registers that have a `url` every `[registers] refresh_interval_secs`
/// (jittered), then reloads the reference data. A download that fails or does not load
/// leaves the file, and so the register in use, as it was.
pub(super) async fn refresh_registers(
    fetcher: crate::fetch::Fetcher,
    service: Arc<CheckService>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let sources = service.data().sources.clone();
        let wait = crate::fetch::next_wait(
            sources.registers.refresh_interval(),
            None,
            time::OffsetDateTime::now_utc(),
        );
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => return,
        }
        // The configuration may have been reloaded while waiting.
        let sources = service.data().sources.clone();
        let mut stored = 0;
        for file in sources.registers.fetched_files() {
            match crate::register::fetch_eba(
                &fetcher,
                &sources.registers,
                file,
                &sources.base_dir,
                sources.registers.fetch_timeout(),
            )
            .await
            {
                Ok(done) => {
                    stored += 1;
                    crate::telemetry::metrics::Metrics::outcome(
                        &crate::telemetry::metrics::metrics().refreshes,
                        "registers",
                        true,
                    );
                    tracing::info!(path = %done.path.display(), zip = %done.zip_url, entities = done.entities, "register fetched");
                }
                Err(e) => {
                    tracing::warn!(path = %file.path.display(), problem = %e, "register not updated; the current file stays")
                }
            }
        }
        if stored == 0 {
            continue;
        }
        reload_data(&service, sources, "register refresh").await;
    }
}

/// Reloads the reference data from `sources` after a refresh (`after`: which one) on a
/// blocking thread (verifying every list again takes CPU for a while), counted in
/// `psp_gateway_reloads_total`; a failure keeps the data in use.
async fn reload_data(service: &Arc<CheckService>, sources: DataSources, after: &str) {
    let s = service.clone();
    let result =
        tokio::task::spawn_blocking(move || s.reload(&sources).map(|g| (g, sources))).await;
    crate::telemetry::metrics::Metrics::outcome(
        &crate::telemetry::metrics::metrics().reloads,
        "reference-data",
        matches!(result, Ok(Ok(_))),
    );
    match result {
        Ok(Ok((generation, sources))) => {
            tracing::info!(generation, "reference data reloaded after the {after}");
            record_register_history(&sources);
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "reload after the {after} failed; current data kept")
        }
        Err(e) => {
            tracing::error!(error = %e, "reload after the {after} did not finish; current data kept")
        }
    }
}

/// Fetches the LOTL sources' lists on a schedule and reloads the reference data after each
/// round: at once when a list is missing or stale at start, then every refresh interval
/// (jittered) or when the first list reaches its `NextUpdate`, whichever comes first. What
/// does not verify is never stored, so a failed round keeps the last good lists.
pub(super) async fn refresh_trust(
    refresher: crate::trust::refresh::Refresher,
    service: Arc<CheckService>,
    mut shutdown: watch::Receiver<bool>,
) {
    use time::OffsetDateTime;
    let mut first = true;
    loop {
        let data = service.data();
        let now = OffsetDateTime::now_utc();
        let lotl_lists = || {
            data.trust
                .lists()
                .iter()
                .filter(|l| l.role != crate::trust::ListRole::Configured)
        };
        let earliest = lotl_lists()
            .filter_map(|l| l.usable_until)
            .filter(|u| *u > now)
            .min();
        let wait = if first && lotl_lists().any(|l| l.problem_at(now).is_some()) {
            Duration::ZERO
        } else {
            crate::fetch::next_wait(refresher.settings().refresh_interval, earliest, now)
        };
        first = false;
        drop(data);
        tracing::debug!(wait_secs = wait.as_secs(), "next trusted-list refresh");
        // The wall clock is read again every minute: one stepped past NextUpdate brings the
        // round forward (fetch::wait_for_refresh).
        tokio::select! {
            _ = crate::fetch::wait_for_refresh(wait, earliest, OffsetDateTime::now_utc) => {}
            _ = shutdown.changed() => return,
        }
        // The sources in force now: the configuration may have been reloaded while waiting.
        let sources = service.data().sources.clone();
        if !sources.trust.iter().any(|s| s.lotl.is_some()) {
            continue;
        }
        for source in &sources.trust {
            let Some(lotl) = &source.lotl else { continue };
            let mut log_step = |step: crate::trust::refresh::Step<'_>| {
                crate::telemetry::metrics::Metrics::outcome(
                    &crate::telemetry::metrics::metrics().refreshes,
                    "trusted-lists",
                    step.attempt.ok,
                );
                if step.attempt.ok {
                    tracing::info!(source = %source.name, list = step.what, location = step.location, outcome = %step.attempt.message, "trusted list fetched");
                } else {
                    tracing::warn!(source = %source.name, list = step.what, location = step.location, problem = %step.attempt.message, "trusted list not updated; the last good copy stays");
                }
            };
            let fetched = refresher
                .fetch_source(
                    &source.name,
                    lotl,
                    source.next_update_grace,
                    OffsetDateTime::now_utc(),
                    &mut log_step,
                )
                .await;
            match fetched {
                Ok(o) => {
                    tracing::info!(source = %source.name, stored = o.stored, failed = o.failures, "trusted-list refresh done")
                }
                Err(e) => {
                    tracing::error!(source = %source.name, error = %e, "trusted-list refresh failed")
                }
            }
        }
        reload_data(&service, sources, "trusted-list refresh").await;
    }
}
