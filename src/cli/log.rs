//! Log lines on stderr: text (coloured only for a person at a terminal,
//! never with `NO_COLOR`) or one JSON object per line; the level from
//! `TOOLGATE_LOG` (or, when that is unset or empty, the usual `RUST_LOG`).

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the process's log subscriber. `quiet` lowers the default level
/// to errors (the demo's output is its story).
pub fn init(format: LogFormat, quiet: bool) {
    let filter = ["TOOLGATE_LOG", "RUST_LOG"]
        .into_iter()
        .filter_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        .find_map(|directives| EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| EnvFilter::new(if quiet { "error" } else { "info" }));
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    // Whether another subscriber was installed first (only in tests) does
    // not matter: logging is never a reason to fail.
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Text => builder.with_ansi(colour()).try_init(),
    };
}

/// https://no-color.org: colours only when stderr is a terminal and
/// `NO_COLOR` is unset or empty.
fn colour() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
