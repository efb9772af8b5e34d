//! `--metrics-addr`: Prometheus `/metrics` and `/healthz` over HTTP/1.
//!
//! The exposition format is rendered by `metrics-exporter-prometheus`; this
//! module only serves it, next to a health answer for orchestrators: 200
//! while at least one relay is connected and the pool starts agents, 503
//! otherwise (with the reason in the body: no relay, the agent cannot
//! start and why, agents that keep crashing).
//!
//! Whoever reaches the port controls how many connections are open and how
//! slowly they speak, so it is bounded as `http_server` says: at most
//! [`MAX_CONNECTIONS`] at once (one more closed at once and counted),
//! [`REQUEST_HEAD_TIMEOUT`] for a request's head, [`CONNECTION_LIFETIME`]
//! for a connection, and a backoff after failed accepts.
//!
//! The cap keeps the daemon's descriptors safe, not the scraper's access:
//! whoever can open connections can keep the slots busy. Bind the port where
//! only the scraper reaches it (loopback, or a pod IP behind a
//! NetworkPolicy; see `deploy/`).
//!
//! It sits with the other sockets (the `edge` wing), apart from
//! `telemetry`, which everything records into: the relay tap and the
//! signer count into `telemetry` and this serves what they counted, so
//! neither side imports the other's wing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::edge::http_server::{self, ServerBounds};
use crate::telemetry::AgentCircuit;
use crate::telemetry::metrics as record;

/// The metrics endpoint's flag.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Telemetry")]
pub struct MetricsArgs {
    /// Serve Prometheus metrics and /healthz here
    ///
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

/// The endpoint's bounds (see the module doc).
const BOUNDS: ServerBounds = ServerBounds {
    name: "metrics endpoint",
    max_connections: MAX_CONNECTIONS,
    head_timeout: REQUEST_HEAD_TIMEOUT,
    lifetime: CONNECTION_LIFETIME,
    // Counted, not logged: whoever floods the port would flood the log.
    on_full: record::metrics_connection_refused,
};

async fn serve(listener: TcpListener, metrics: PrometheusHandle, health: Health, stop: CancellationToken) {
    let answer = move |request: Request<Incoming>| std::future::ready(respond(&request, &metrics, &health));
    http_server::serve(listener, BOUNDS, stop, answer).await;
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
