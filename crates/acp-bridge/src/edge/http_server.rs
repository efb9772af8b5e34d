//! The shape both of the daemon's small HTTP/1 servers share (the metrics
//! endpoint and the MCP server): whoever reaches the port controls how many
//! connections are open and how slowly they speak, so each server is
//! bounded by its [`ServerBounds`]:
//! - at most `max_connections` are served at once; one more is closed as
//!   soon as it is accepted (its file descriptor given back at once rather
//!   than left queued in the kernel), and `on_full` is told;
//! - a connection waiting for a request's head (its first request, or the
//!   next one on a kept-alive connection) is closed after `head_timeout`:
//!   an idle socket holds a slot for no longer;
//! - no connection lives longer than `lifetime` (a client that sends a
//!   request and never reads the answer); clients reconnect;
//! - a failed accept (out of file descriptors, EMFILE) waits before the
//!   next one, from [`ACCEPT_BACKOFF_MIN`] doubling to
//!   [`ACCEPT_BACKOFF_MAX`], instead of trying again at once in a loop.
//!
//! Each request carries its connection's two ends ([`ConnectionEnds`]) in
//! its extensions, for a server that asks who connected.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The first wait after a failed accept.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// The longest wait after failed accepts in a row.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What one server allows. See the module doc.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerBounds {
    /// Names the server in its log lines (`metrics endpoint`, `MCP server`).
    pub name: &'static str,
    pub max_connections: usize,
    pub head_timeout: Duration,
    pub lifetime: Duration,
    /// Told of each connection closed at once because every slot is taken.
    pub on_full: fn(),
}

/// The two ends of the connection a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionEnds {
    /// The server's end (the listener's address).
    pub local: SocketAddr,
    /// The client's end.
    pub peer: SocketAddr,
}

/// Serves connections on `listener` with `handle` answering each request,
/// within `bounds`, until `stop`.
pub(crate) async fn serve<H, Fut, B>(
    listener: TcpListener,
    bounds: ServerBounds,
    stop: CancellationToken,
    handle: H,
) where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let slots = Arc::new(Semaphore::new(bounds.max_connections));
    let mut backoff = AcceptBackoff::default();
    let accept = || async { listener.accept().await };
    while let Some((stream, peer)) = backoff.next_connection(bounds.name, &stop, accept).await {
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            (bounds.on_full)();
            continue;
        };
        let Ok(local) = stream.local_addr() else {
            continue;
        };
        let ends = ConnectionEnds { local, peer };
        tokio::spawn(serve_connection(stream, ends, slot, bounds, handle.clone()));
    }
}

/// Serves one connection within its bounds; the slot is freed when it ends.
async fn serve_connection<H, Fut, B>(
    stream: TcpStream,
    ends: ConnectionEnds,
    slot: OwnedSemaphorePermit,
    bounds: ServerBounds,
    handle: H,
) where
    H: Fn(Request<Incoming>) -> Fut + Send + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let service = service_fn(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(ends);
        let response = handle(request);
        async move { Ok::<_, Infallible>(response.await) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.head_timeout)
        .serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(bounds.lifetime, connection).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::debug!(%error, "{}: a connection ended with an error", bounds.name),
        Err(_) => tracing::debug!(
            lifetime_secs = bounds.lifetime.as_secs(),
            "{}: a connection closed at the end of its lifetime",
            bounds.name
        ),
    }
    drop(slot);
}

/// The wait after failed accepts in a row: doubling from
/// [`ACCEPT_BACKOFF_MIN`] to [`ACCEPT_BACKOFF_MAX`], back to none after a
/// success. The MCP server's local socket (`mcp/socket.rs`) waits the same.
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

    /// The next connection `accept` gives, for the listener `name`: a
    /// failed accept (a full descriptor table, say) is logged and waited
    /// out rather than retried at once. `None` once `stop` is cancelled.
    pub(crate) async fn next_connection<S, F>(
        &mut self,
        name: &str,
        stop: &CancellationToken,
        mut accept: impl FnMut() -> F,
    ) -> Option<S>
    where
        F: Future<Output = std::io::Result<S>>,
    {
        loop {
            let accepted = tokio::select! {
                () = stop.cancelled() => return None,
                accepted = accept() => accepted,
            };
            match accepted {
                Ok(stream) => {
                    self.reset();
                    return Some(stream);
                }
                Err(error) => {
                    let wait = self.next_wait();
                    tracing::warn!(%error, backoff_ms = wait.as_millis() as u64, "{name}: accept failed, waiting before the next");
                    tokio::select! {
                        () = stop.cancelled() => return None,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }
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
