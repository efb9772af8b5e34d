//! Logs and metrics.
//!
//! Logs go to stderr through `tracing`: pretty on a terminal, JSON
//! otherwise (systemd's journal and container runtimes keep one JSON object
//! per line), filtered like `RUST_LOG`. Span fields (conversation, event id,
//! author, session, run id, turn id) ride along on every line of a turn.
//! Records of the nostr crates are bounded in length ([`bounded`]): they
//! may quote whatever a relay sent.

mod bounded;
pub(crate) mod http;
pub(crate) mod metrics;

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt;

use bounded::BoundSdkRecords;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Pretty,
    Json,
}

/// Installs the global subscriber. `RUST_LOG`, when set, wins over `level`.
pub fn init_logging(format: Option<LogFormat>, level: &str) {
    let format = format.unwrap_or(if std::io::stderr().is_terminal() {
        LogFormat::Pretty
    } else {
        LogFormat::Json
    });
    let installed = subscriber(format, level, BoundSdkRecords(std::io::stderr)).try_init();
    if installed.is_err() {
        // Already installed (tests, embedding): keep the existing one.
    }
}

/// The subscriber [`init_logging`] installs, writing to `writer`.
fn subscriber<W>(format: LogFormat, level: &str, writer: W) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
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
