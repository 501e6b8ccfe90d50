//! Reloads on a change of the configuration's files or on SIGHUP: which files, how they are
//! watched, and the signal loop.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Running, reload};
use crate::config::Config;

/// Watches `files` (a change of any of them reloads, as SIGHUP does), or logs why it cannot.
pub(super) fn watcher_for(
    files: &[PathBuf],
    changed: &tokio::sync::mpsc::Sender<()>,
) -> Option<notify::RecommendedWatcher> {
    match watch_files(files, changed.clone()) {
        Ok(w) => {
            tracing::info!(
                files = files.len(),
                "watching the configuration's files for changes"
            );
            Some(w)
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch the configuration's files; SIGHUP still reloads");
            None
        }
    }
}

/// The file watch: where it sends, what it reads, the watcher (held, not read: dropping it
/// stops the watch).
pub(super) type Changes = (
    tokio::sync::mpsc::Sender<()>,
    tokio::sync::mpsc::Receiver<()>,
);

/// The signals the service stops (SIGTERM, SIGINT) and reopens its log on (SIGHUP), taken
/// before any listener answers: a SIGTERM right after the start is a clean stop (the audit
/// log's last checkpoint written), not the default action's kill.
#[cfg(unix)]
pub(super) struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

#[cfg(not(unix))]
pub(super) struct Signals;

/// Takes the signals ([`Signals`]); `None` when the handlers cannot be installed (then
/// only Ctrl-C stops the service, said in the log).
#[cfg(unix)]
pub(super) fn take_signals() -> Option<Signals> {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(term), Ok(int), Ok(hup)) => Some(Signals { term, int, hup }),
        _ => None,
    }
}

#[cfg(not(unix))]
pub(super) fn take_signals() -> Option<Signals> {
    Some(Signals)
}

#[cfg(unix)]
pub(super) async fn wait_for_signals(
    config_path: &Path,
    running: &Running,
    (changed_tx, mut changed): Changes,
    watcher: Option<notify::RecommendedWatcher>,
    signals: Option<Signals>,
) {
    let Some(Signals {
        mut term,
        mut int,
        mut hup,
    }) = signals
    else {
        tracing::error!("cannot install signal handlers; stopping on Ctrl-C only");
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    // Held, not read: dropping it stops the watch.
    let mut _watcher = watcher;
    loop {
        let reloaded = tokio::select! {
            _ = term.recv() => return,
            _ = int.recv() => return,
            _ = hup.recv() => {
                // logrotate moved the audit log away: write to a new file, chain unbroken.
                if let Err(e) = crate::telemetry::audit::reopen() {
                    tracing::error!(error = %e, "cannot reopen the audit log");
                }
                reload(config_path, running).await
            }
            Some(()) = changed.recv() => {
                // Debounced: an editor or a deployment writes several files in a burst.
                tokio::time::sleep(CHANGE_DEBOUNCE).await;
                while changed.try_recv().is_ok() {}
                tracing::info!("a configured file changed: reloading");
                reload(config_path, running).await
            }
        };
        // The reloaded configuration may name other files: watch those from now on.
        if let Some(files) = reloaded {
            let next = watcher_for(&files, &changed_tx);
            if next.is_some() {
                _watcher = next;
            }
        }
    }
}

#[cfg(not(unix))]
pub(super) async fn wait_for_signals(
    _config_path: &Path,
    _running: &Running,
    _changes: Changes,
    _watcher: Option<notify::RecommendedWatcher>,
    _signals: Option<Signals>,
) {
    let _ = tokio::signal::ctrl_c().await;
}

/// How long after a file change the reload waits for the rest of a burst of writes.
const CHANGE_DEBOUNCE: Duration = Duration::from_millis(500);

/// The files whose change reloads: the configuration file and every file it names for data
/// that reload applies (trust sources and lists, pinned signers, register files not fetched
/// by the service itself, the FCA key file, the listeners' certificates and keys, the
/// upstream CA). Files the service writes (fetched registers, the trust cache, the history,
/// the audit log) are not watched. Every path is absolute (a relative `--config` makes the
/// paths it names relative, and the watch matches the absolute paths its events carry),
/// sorted, each once.
pub fn watched_files(config_path: &Path, config: &Config) -> Vec<PathBuf> {
    let mut files = vec![config_path.to_owned()];
    for source in config.trust_sources() {
        files.extend(source.issuers.iter().map(|i| i.path.clone()));
        for list in &source.trusted_lists {
            files.push(list.path.clone());
            if let crate::trust::ListSigners::Pinned(signers) = &list.signers {
                files.extend(signers.iter().cloned());
            }
        }
        if let Some(lotl) = &source.lotl {
            files.extend(lotl.signers.iter().cloned());
        }
    }
    for file in config.registers.files.iter().filter(|f| f.url.is_none()) {
        files.push(config.base_dir.join(&file.path));
    }
    if let Some(key) = config
        .registers
        .fca
        .as_ref()
        .and_then(|f| f.key_file.as_ref())
    {
        files.push(config.resolve(key));
    }
    // The listeners' certificates and keys (a reload replaces them: certificate rotation
    // without a restart), and the upstream CA (a reload rebuilds the gateway's client): of
    // `[gateway]` and of every `[[sites]]` entry.
    let gateways = || config.gateway.iter().chain(&config.sites);
    let api_tls = config.api.as_ref().and_then(|a| a.tls.as_ref());
    for tls in api_tls
        .into_iter()
        .chain(gateways().filter_map(|g| g.tls.as_ref()))
    {
        files.push(config.resolve(&tls.cert));
        files.push(config.resolve(&tls.key));
    }
    for ca in gateways().filter_map(|g| g.upstream_ca.as_ref()) {
        files.push(config.resolve(ca));
    }
    let mut files: Vec<PathBuf> = files
        .into_iter()
        .map(|f| std::path::absolute(&f).unwrap_or(f))
        .collect();
    files.sort();
    files.dedup();
    files
}

/// Watches the directories of `files` (editors and deployments replace files by renaming,
/// which a watch on the file itself would lose) and sends on `changed` when one of `files`
/// is written, created, renamed or removed. `files` are absolute ([`watched_files`]); a file
/// reached through symbolic links is also watched where it really is, so that replacing its
/// target (a Kubernetes secret volume swaps a `..data` link to a new directory and removes
/// the old one) is seen too.
fn watch_files(
    files: &[PathBuf],
    changed: tokio::sync::mpsc::Sender<()>,
) -> notify::Result<notify::RecommendedWatcher> {
    use notify::Watcher;
    let mut wanted: std::collections::BTreeSet<PathBuf> = files.iter().cloned().collect();
    wanted.extend(files.iter().filter_map(|f| std::fs::canonicalize(f).ok()));
    let dirs: std::collections::BTreeSet<PathBuf> = wanted
        .iter()
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if event.kind.is_access() {
            return;
        }
        if event.paths.iter().any(|p| wanted.contains(p)) {
            // Full means a reload is already due.
            let _ = changed.try_send(());
        }
    })?;
    let mut watching = 0;
    let mut last_error = None;
    for dir in dirs {
        // One directory that cannot be watched does not stop the watch of the others.
        match watcher.watch(&dir, notify::RecursiveMode::NonRecursive) {
            Ok(()) => watching += 1,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot watch this directory; SIGHUP still reloads");
                last_error = Some(e);
            }
        }
    }
    match last_error {
        Some(e) if watching == 0 => Err(e),
        _ => Ok(watcher),
    }
}
