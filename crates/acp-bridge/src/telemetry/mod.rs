//! Logs and metrics.
//!
//! Logs go to stderr through `tracing`: pretty on a terminal, JSON
//! otherwise (systemd's journal and container runtimes keep one JSON object
//! per line), filtered like `RUST_LOG`. Span fields (conversation, event id,
//! author, session, run id, turn id) ride along on every line of a turn.

pub mod http;
pub mod metrics;

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Pretty,
    Json,
}

/// Installs the global subscriber. `RUST_LOG`, when set, wins over `level`.
pub fn init_logging(format: Option<LogFormat>, level: &str) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let format = format.unwrap_or(if std::io::stderr().is_terminal() {
        LogFormat::Pretty
    } else {
        LogFormat::Json
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Pretty => builder.with_target(true).try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
    if installed.is_err() {
        // Already installed (tests, embedding): keep the existing one.
    }
}
