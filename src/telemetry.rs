//! Logs: `tracing`, JSON lines when stderr is not a terminal (collectors), readable text when
//! it is. `RUST_LOG` sets the filter (default `info`). Audit records use the target `audit`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; a second call does nothing.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = if std::io::stderr().is_terminal() {
        builder.try_init()
    } else {
        builder.json().flatten_event(true).try_init()
    };
    // Already installed (tests start several servers in one process): keep the first.
    drop(result);
}
