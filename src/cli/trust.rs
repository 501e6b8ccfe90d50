//! `psp-gateway trust fetch` and `trust status`.

use std::io::{IsTerminal, Write};
use std::path::Path;

use time::OffsetDateTime;

use crate::config::Config;
use crate::trust::refresh::{Refresher, Step};
use crate::trust::{ListStatus, TrustList};

/// What a command prints on stdout, and whether everything was fine (exit 0) or not
/// (exit 1, the output still printed).
pub(super) struct Outcome {
    pub output: String,
    pub all_good: bool,
}

/// Why a trust command could not run at all.
#[derive(Debug, thiserror::Error)]
pub(super) enum TrustCommandError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("{}: no trust source names a lotl; nothing to fetch", .0.display())]
    NoLotl(std::path::PathBuf),
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Trust(#[from] crate::trust::TrustLoadError),
}

/// Fetches every LOTL source's LOTL and lists into the cache. Not all good when anything
/// failed (what was good is stored all the same). `Err` when nothing could be tried.
pub(super) fn fetch(config_path: &Path) -> Result<Outcome, TrustCommandError> {
    let config = Config::load(config_path)?;
    let sources = config.trust_sources();
    if !sources.iter().any(|s| s.lotl.is_some()) {
        return Err(TrustCommandError::NoLotl(config_path.to_path_buf()));
    }
    let refresher = Refresher::new(config.trust_fetch());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(TrustCommandError::Runtime)?;
    let tty = std::io::stderr().is_terminal();
    let mut lines = Vec::new();
    let mut failures = 0;
    for source in &sources {
        let Some(lotl) = &source.lotl else { continue };
        let mut show = |step: Step<'_>| {
            let mark = if step.attempt.ok { "ok" } else { "FAILED" };
            let total = match step.total {
                0 => "?".to_owned(),
                n => n.to_string(),
            };
            let line = format!(
                "[{:>2}/{total}] {:<5} {mark}: {}",
                step.done, step.what, step.attempt.message
            );
            let mut err = std::io::stderr().lock();
            // On a terminal the progress line is rewritten in place until a failure.
            if tty && step.attempt.ok {
                let _ = write!(err, "\r\x1b[2K{line}");
                if step.done == step.total {
                    let _ = writeln!(err);
                }
                let _ = err.flush();
            } else {
                let _ = writeln!(err, "{}{line}", if tty { "\r\x1b[2K" } else { "" });
            }
        };
        let outcome = runtime.block_on(refresher.fetch_source(
            &source.name,
            lotl,
            source.next_update_grace,
            OffsetDateTime::now_utc(),
            &mut show,
        ))?;
        failures += outcome.failures;
        lines.push(format!(
            "trust source `{}`: {} documents stored, {} failed, in {}",
            source.name,
            outcome.stored,
            outcome.failures,
            lotl.cache(&source.name).dir().display()
        ));
    }
    // What the stored files give when loaded as `serve` would load them now.
    let trust = config.load_trust(OffsetDateTime::now_utc())?;
    lines.push(format!(
        "{} trusted issuers from {} lists in use",
        trust.issuers().len(),
        trust.lists().iter().filter(|l| l.problem.is_none()).count()
    ));
    if failures > 0 {
        lines.push(format!(
            "{failures} documents could not be fetched or were refused (above); the last good copies stay"
        ));
    }
    Ok(Outcome {
        output: lines.join("\n"),
        all_good: failures == 0,
    })
}

/// Every list of every source as `serve` would load it now; not all good when any list is
/// not used.
pub(super) fn status(config_path: &Path, json: bool) -> Result<Outcome, TrustCommandError> {
    let config = Config::load(config_path)?;
    let now = OffsetDateTime::now_utc();
    let trust = config.load_trust(now)?;
    let text = if json {
        render_json(&config, &trust, now)
    } else {
        render_table(&config, &trust, now)
    };
    Ok(Outcome {
        output: text,
        all_good: trust.list_problems(now).is_empty(),
    })
}

fn render_json(config: &Config, trust: &TrustList, now: OffsetDateTime) -> String {
    let lists: Vec<serde_json::Value> = trust
        .lists()
        .iter()
        .map(|l| {
            let mut v = serde_json::to_value(l).unwrap_or_default();
            v["problem"] = serde_json::json!(l.problem_at(now));
            v["lastFetch"] = serde_json::json!(last_fetch(config, l));
            v
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({ "lists": lists })).unwrap_or_default()
}

fn render_table(config: &Config, trust: &TrustList, now: OffsetDateTime) -> String {
    let mut out = String::new();
    let date = |t: Option<OffsetDateTime>| {
        t.map(|t| t.date().to_string())
            .unwrap_or_else(|| "-".to_owned())
    };
    out.push_str(&format!(
        "{:<12} {:<4} {:<10} {:>6} {:<10} {:<10} {:>8} {:>7}  verdict\n",
        "source", "list", "role", "seq", "issued", "next", "services", "issuers"
    ));
    for l in trust.lists() {
        let verdict = match l.problem_at(now) {
            Some(p) => format!("NOT USED: {p}"),
            None => "used".to_owned(),
        };
        out.push_str(&format!(
            "{:<12} {:<4} {:<10} {:>6} {:<10} {:<10} {:>8} {:>7}  {verdict}\n",
            l.source,
            l.territory.as_deref().unwrap_or("-"),
            format!("{:?}", l.role).to_lowercase(),
            l.sequence_number
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".to_owned()),
            date(l.issue_date),
            date(l.next_update),
            l.services,
            l.issuers,
        ));
        if let Some(signer) = &l.signer {
            out.push_str(&format!("{:<17} signer: {signer}\n", ""));
        }
        if let Some(fetch) = last_fetch(config, l) {
            out.push_str(&format!("{:<17} last fetch: {fetch}\n", ""));
        }
    }
    out.push_str(&format!(
        "{} trusted issuers; {} of {} lists used",
        trust.issuers().len(),
        trust.lists().len() - trust.list_problems(now).len(),
        trust.lists().len()
    ));
    out
}

/// The fetch log's line for a LOTL source's list, if any.
fn last_fetch(config: &Config, l: &ListStatus) -> Option<String> {
    let spec = config
        .trust_sources()
        .into_iter()
        .find(|s| s.name == l.source)?
        .lotl?;
    let log = spec.cache(&l.source).read_log();
    let attempt = match l.role {
        crate::trust::ListRole::Lotl => log.lotl?,
        crate::trust::ListRole::National => log.lists.get(l.territory.as_deref()?)?.clone(),
        crate::trust::ListRole::Configured => return None,
    };
    Some(format!(
        "{} {}: {}",
        crate::trust::rfc3339(attempt.at),
        if attempt.ok { "ok" } else { "failed" },
        attempt.message
    ))
}
