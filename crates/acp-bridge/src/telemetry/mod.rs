//! Logs and metrics.
//!
//! Logs go to stderr through `tracing`: pretty on a terminal, JSON
//! otherwise (systemd's journal and container runtimes keep one JSON object
//! per line), filtered like `RUST_LOG`. Span fields (conversation, event id,
//! author, session, run id, turn id) ride along on every line of a turn.
//! Records of the nostr crates are bounded in length ([`bounded`]): they
//! may quote whatever a relay sent.
//!
//! This is the recording side only, below every stage that counts: the
//! endpoint that serves the metrics is `metrics_endpoint`, with the other
//! sockets.

mod bounded;
mod health;
mod info_when;
mod log_filter;
pub(crate) mod metrics;

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt;

use bounded::BoundSdkRecords;
pub(crate) use health::AgentCircuit;
pub(crate) use info_when::info_when;
pub use log_filter::{LogFilter, LogFilterError, RUST_LOG_ENV, RustLogError};

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Pretty,
    Json,
}

/// The logging flags, taken by every subcommand.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Telemetry")]
pub struct LogArgs {
    /// Log format: pretty or json
    ///
    /// Log format: pretty (default on a terminal) or json (default otherwise).
    #[arg(long, env = "ACP_BRIDGE_LOG_FORMAT", value_enum, global = true)]
    pub log_format: Option<LogFormat>,

    /// Log filter: levels or target=level (RUST_LOG wins)
    ///
    /// Log filter: comma-separated levels (off, error, warn, info, debug,
    /// trace) or target=level (`info,acp_bridge=debug,agent_stderr=warn`).
    /// RUST_LOG itself wins when set.
    #[arg(long, env = "ACP_BRIDGE_LOG_LEVEL", default_value = "info", global = true)]
    pub log_level: LogFilter,
}

/// Installs the global subscriber with `filter` (see
/// [`LogFilter::in_force`] for `RUST_LOG`).
pub fn init_logging(format: Option<LogFormat>, filter: &LogFilter) {
    let format = format.unwrap_or(if std::io::stderr().is_terminal() {
        LogFormat::Pretty
    } else {
        LogFormat::Json
    });
    let installed = subscriber(format, filter, BoundSdkRecords(std::io::stderr)).try_init();
    if installed.is_err() {
        // Already installed (tests, embedding): keep the existing one.
    }
}

/// Targets logged at `warn` unless the filter names them: rmcp (the MCP
/// server, `mcp`) logs three `info` lines for every request it serves.
const QUIET_TARGETS: [&str; 1] = ["rmcp"];

/// `filter`, with [`QUIET_TARGETS`] it does not name set to `warn`.
fn with_quiet_dependencies(filter: &str) -> String {
    QUIET_TARGETS
        .iter()
        .filter(|target| !filter.contains(*target))
        .fold(filter.to_owned(), |filter, target| {
            format!("{filter},{target}=warn")
        })
}

/// The subscriber [`init_logging`] installs, writing to `writer`.
fn subscriber<W>(
    format: LogFormat,
    filter: &LogFilter,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    // Checked when parsed: nothing of it is dropped here.
    let filter = EnvFilter::new(with_quiet_dependencies(filter.as_str()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        LogFormat::Pretty => Box::new(builder.with_target(true).finish()),
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .finish(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmcp_is_quiet_unless_the_filter_names_it() {
        assert_eq!(with_quiet_dependencies("info"), "info,rmcp=warn");
        assert_eq!(
            with_quiet_dependencies("info,acp_bridge=debug"),
            "info,acp_bridge=debug,rmcp=warn"
        );
        assert_eq!(with_quiet_dependencies("info,rmcp=debug"), "info,rmcp=debug");
    }
}
