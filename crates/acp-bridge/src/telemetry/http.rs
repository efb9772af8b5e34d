//! `--metrics-addr`: Prometheus `/metrics` and `/healthz` over HTTP/1.
//!
//! The exposition format is rendered by `metrics-exporter-prometheus`; this
//! module only serves it, next to a health answer for orchestrators: 200
//! while at least one relay is connected and the pool is not circuit-broken,
//! 503 otherwise (with the reason in the body).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::pool::Pool;

/// Histogram buckets of mention-to-reply latency, in seconds: agents answer
/// in seconds to minutes.
const LATENCY_BUCKETS_SECS: &[f64] = &[0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0];
/// How often histograms are compacted.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// What `/healthz` looks at.
#[derive(Debug, Clone)]
pub struct Health {
    pub relays_connected: Vec<watch::Receiver<bool>>,
    pub pool: Pool,
}

impl Health {
    /// `Ok` when healthy, else why not.
    pub fn check(&self) -> Result<(), &'static str> {
        if !self.relays_connected.iter().any(|connected| *connected.borrow()) {
            return Err("no relay connected");
        }
        if self.pool.circuit_open() {
            return Err("agents keep crashing: circuit breaker open");
        }
        Ok(())
    }
}

/// Installs the process-wide Prometheus recorder.
pub fn install_recorder() -> Result<PrometheusHandle, String> {
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
pub async fn bind(
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
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else { continue };
        let (metrics, health) = (metrics.clone(), health.clone());
        let service = service_fn(move |request| {
            let response = respond(&request, &metrics, &health);
            async move { Ok::<_, Infallible>(response) }
        });
        tokio::spawn(async move {
            if let Err(error) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, "metrics connection ended with an error");
            }
        });
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
