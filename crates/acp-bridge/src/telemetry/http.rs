//! `--metrics-addr`: Prometheus `/metrics` and `/healthz` over HTTP/1.
//!
//! The exposition format is rendered by `metrics-exporter-prometheus`; this
//! module only serves it, next to a health answer for orchestrators: 200
//! while at least one relay is connected and the pool starts agents, 503
//! otherwise (with the reason in the body: no relay, the agent cannot
//! start and why, agents that keep crashing).
//!
//! Whoever reaches the port controls how many connections are open and how
//! slowly they speak, so each is bounded:
//! - at most [`MAX_CONNECTIONS`] are served at once; one more is closed as
//!   soon as it is accepted (its file descriptor is given back at once,
//!   rather than left queued in the kernel), and counted;
//! - a connection waiting for a request's head (its first request, or the
//!   next one on a kept-alive connection) is closed after
//!   [`REQUEST_HEAD_TIMEOUT`]: an idle socket holds a slot for no longer;
//! - no connection lives longer than [`CONNECTION_LIFETIME`] (a client that
//!   sends a request and never reads the answer); a scraper reconnects;
//! - a failed accept (out of file descriptors, EMFILE) waits before the
//!   next one, from [`ACCEPT_BACKOFF_MIN`] doubling to
//!   [`ACCEPT_BACKOFF_MAX`], instead of trying again at once in a loop.
//!
//! The cap keeps the daemon's descriptors safe, not the scraper's access:
//! whoever can open connections can keep the slots busy. Bind the port where
//! only the scraper reaches it (loopback, or a pod IP behind a
//! NetworkPolicy; see `deploy/`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::telemetry::metrics as record;

/// The metrics endpoint's flag.
#[derive(Debug, Clone, clap::Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics and /healthz here (off by default).
    #[arg(long, env = "ACP_BRIDGE_METRICS_ADDR", value_name = "ADDR", value_parser = parse_socket_addr)]
    pub metrics_addr: Option<SocketAddr>,
}

/// Parses an `IP:PORT` listening address.
fn parse_socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse().map_err(|_| {
        format!(
            "`{text}` is not an IP address and port: write e.g. 127.0.0.1:9464 (a host name is not taken)"
        )
    })
}

/// Histogram buckets of mention-to-reply latency, in seconds: agents answer
/// in seconds to minutes.
const LATENCY_BUCKETS_SECS: &[f64] = &[0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0];
/// How often histograms are compacted.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);
/// Connections served at once. A scraper needs one (two while a scrape
/// overlaps a health probe); the rest is headroom for people with curl.
pub(crate) const MAX_CONNECTIONS: usize = 32;
/// How long a connection may take to send a request's head, and how long a
/// kept-alive connection may sit idle before its next one.
pub(crate) const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a connection lives, whatever it does.
pub(crate) const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// The first wait after a failed accept.
pub(crate) const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// The longest wait after failed accepts in a row.
pub(crate) const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What `/healthz` asks of the agent pool. A trait, so that telemetry
/// (which the pool records its metrics through) does not import the pool.
pub(crate) trait AgentCircuit: std::fmt::Debug + Send + Sync {
    /// Why agents are not started now (the agent cannot start, or keeps
    /// crashing), or `None` while they are.
    fn unhealthy(&self) -> Option<String>;
}

/// What `/healthz` looks at.
#[derive(Debug, Clone)]
pub(crate) struct Health {
    pub relays_connected: Vec<watch::Receiver<bool>>,
    /// The agent pool.
    pub agents: Arc<dyn AgentCircuit>,
    /// False while the remote signer does not sign (NIP-46).
    pub signer_answering: watch::Receiver<bool>,
}

impl Health {
    /// `Ok` when healthy, else why not.
    pub(crate) fn check(&self) -> Result<(), String> {
        if !self.relays_connected.iter().any(|connected| *connected.borrow()) {
            return Err("no relay connected".to_owned());
        }
        if !*self.signer_answering.borrow() {
            return Err("the remote signer does not sign: answers and DMs wait for it".to_owned());
        }
        match self.agents.unhealthy() {
            Some(reason) => Err(reason),
            None => Ok(()),
        }
    }
}

/// Installs the process-wide Prometheus recorder.
pub(crate) fn install_recorder() -> Result<PrometheusHandle, String> {
    let handle = PrometheusBuilder::new()
        .set_buckets(LATENCY_BUCKETS_SECS)
        .map_err(|error| error.to_string())?
        .install_recorder()
        .map_err(|error| error.to_string())?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// Binds `addr` now (so a bad address fails start-up) and serves until `stop`.
pub(crate) async fn bind(
    addr: SocketAddr,
    metrics: PrometheusHandle,
    health: Health,
    stop: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await?;
    // The bound address: with port 0 the kernel picks one, and this says which.
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "serving /metrics and /healthz");
    Ok(tokio::spawn(serve(listener, metrics, health, stop)))
}

async fn serve(listener: TcpListener, metrics: PrometheusHandle, health: Health, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut backoff = AcceptBackoff::default();
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff.reset();
                stream
            }
            Err(error) => {
                let wait = backoff.next_wait();
                tracing::warn!(%error, backoff_ms = wait.as_millis() as u64, "metrics endpoint: accept failed, waiting before the next");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(wait) => continue,
                }
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            // Dropped: closed at once, the descriptor given back. Counted,
            // not logged: whoever floods the port would flood the log.
            record::metrics_connection_refused();
            continue;
        };
        tokio::spawn(serve_connection(stream, slot, metrics.clone(), health.clone()));
    }
}

/// Serves one connection within its bounds; the slot is freed when it ends.
async fn serve_connection(
    stream: TcpStream,
    slot: OwnedSemaphorePermit,
    metrics: PrometheusHandle,
    health: Health,
) {
    let service = service_fn(move |request| {
        let response = respond(&request, &metrics, &health);
        async move { Ok::<_, Infallible>(response) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(REQUEST_HEAD_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(CONNECTION_LIFETIME, connection).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::debug!(%error, "metrics connection ended with an error"),
        Err(_) => tracing::debug!(
            lifetime_secs = CONNECTION_LIFETIME.as_secs(),
            "metrics connection closed at the end of its lifetime"
        ),
    }
    drop(slot);
}

/// The wait after failed accepts in a row: doubling from
/// [`ACCEPT_BACKOFF_MIN`] to [`ACCEPT_BACKOFF_MAX`], back to none after a
/// success. The MCP server's listener waits the same way.
#[derive(Debug, Default)]
pub(crate) struct AcceptBackoff {
    last: Option<Duration>,
}

impl AcceptBackoff {
    pub(crate) fn next_wait(&mut self) -> Duration {
        let wait = self
            .last
            .map_or(ACCEPT_BACKOFF_MIN, |last| (last * 2).min(ACCEPT_BACKOFF_MAX));
        self.last = Some(wait);
        wait
    }

    pub(crate) fn reset(&mut self) {
        self.last = None;
    }
}

fn respond(
    request: &Request<Incoming>,
    metrics: &PrometheusHandle,
    health: &Health,
) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => (StatusCode::OK, "text/plain; version=0.0.4", metrics.render()),
        (&Method::GET, "/healthz") => match health.check() {
            Ok(()) => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
            Err(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("{reason}\n"),
            ),
        },
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found\n".to_owned()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_backoff_doubles_to_its_bound_and_restarts_after_a_success() {
        let mut backoff = AcceptBackoff::default();
        let waits: Vec<Duration> = (0..10).map(|_| backoff.next_wait()).collect();
        assert_eq!(waits[0], ACCEPT_BACKOFF_MIN);
        assert_eq!(waits[1], ACCEPT_BACKOFF_MIN * 2);
        assert!(waits.windows(2).all(|pair| pair[0] <= pair[1]));
        assert_eq!(waits[9], ACCEPT_BACKOFF_MAX);
        backoff.reset();
        assert_eq!(backoff.next_wait(), ACCEPT_BACKOFF_MIN);
    }
}
