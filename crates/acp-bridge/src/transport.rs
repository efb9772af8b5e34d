//! The websocket transport to relays, with `TCP_NODELAY`.
//!
//! The SDK's default transport leaves Nagle's algorithm on. Nostr traffic is
//! small messages in quick succession (an `EVENT` right after an `OK`), the
//! pattern where Nagle holds a segment back until the peer's delayed ACK
//! arrives, up to 40 ms on Linux, on every hop. Measured end to end on
//! loopback that was most of the bridge's added latency (BENCHMARKS.md). This
//! transport is the SDK's own, but for one socket option.
//!
//! The read buffer is smaller than tungstenite's default (see
//! [`READ_BUFFER_BYTES`]).
//!
//! Only direct connections: proxies and Tor are not offered by this daemon.
//!
//! The daemon's own relay clients connect through [`TappedTransport`]: the
//! same connection, with each frame offered to the relay tap
//! ([`crate::relay_tap`]) before the SDK reads it.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_wsocket::futures_util::stream::SplitSink;
use async_wsocket::futures_util::{Sink, SinkExt, StreamExt, TryStreamExt, future};
use async_wsocket::{Message, WebSocket};
use nostr_sdk::pool::ConnectionMode;
use nostr_sdk::pool::transport::error::TransportError;
use nostr_sdk::pool::transport::websocket::{WebSocketSink, WebSocketStream, WebSocketTransport};
use nostr_sdk::prelude::{BoxedFuture, RelayUrl, Url};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::relay_tap::RelayTaps;

/// The websocket's read buffer. tungstenite zero-fills the whole buffer
/// before every read from the socket; at its default of 128 KiB that fill
/// was a tenth of the daemon's instructions per answered mention (about
/// 8 reads per mention, BENCHMARKS §8). Relay messages are a few hundred
/// bytes to a few KiB, so 16 KiB still takes a burst of them in one read,
/// and a larger frame grows the buffer for itself.
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// Direct websocket connections with `TCP_NODELAY` set.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDelayTransport;

#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("relay URL has no host or port")]
    Address,
    #[error("connecting timed out")]
    Timeout,
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Websocket(#[from] tokio_tungstenite::tungstenite::Error),
}

impl WebSocketTransport for NoDelayTransport {
    fn support_ping(&self) -> bool {
        true
    }

    fn connect<'a>(
        &'a self,
        url: &'a Url,
        _mode: &'a ConnectionMode,
        timeout: Duration,
    ) -> BoxedFuture<'a, Result<(WebSocketSink, WebSocketStream), TransportError>> {
        Box::pin(async move {
            let (sink, stream) = connect_within(url, timeout).await?;
            Ok((
                sink,
                Box::pin(stream.map_err(TransportError::backend)) as WebSocketStream,
            ))
        })
    }
}

/// [`NoDelayTransport`], with every text frame offered to the relay tap:
/// the frames it routes never reach the SDK.
#[derive(Debug, Clone)]
pub(crate) struct TappedTransport {
    pub(crate) taps: RelayTaps,
}

impl WebSocketTransport for TappedTransport {
    fn support_ping(&self) -> bool {
        true
    }

    fn connect<'a>(
        &'a self,
        url: &'a Url,
        _mode: &'a ConnectionMode,
        timeout: Duration,
    ) -> BoxedFuture<'a, Result<(WebSocketSink, WebSocketStream), TransportError>> {
        Box::pin(async move {
            let (sink, stream) = connect_within(url, timeout).await?;
            let url = RelayUrl::parse(url.as_str()).map_err(TransportError::backend)?;
            let routes = self.taps.relay(&url);
            let stream = stream.filter_map(move |message| {
                future::ready(match message {
                    Ok(Message::Text(frame)) => routes.sift(frame).map(|frame| Ok(Message::Text(frame))),
                    other => Some(other.map_err(TransportError::backend)),
                })
            });
            Ok((sink, Box::pin(stream) as WebSocketStream))
        })
    }
}

/// Connects within `timeout`: the SDK's sink, and the raw stream.
async fn connect_within(
    url: &Url,
    timeout: Duration,
) -> Result<
    (
        WebSocketSink,
        async_wsocket::futures_util::stream::SplitStream<WebSocket>,
    ),
    TransportError,
> {
    let socket = tokio::time::timeout(timeout, connect(url))
        .await
        .map_err(|_| TransportError::backend(ConnectError::Timeout))?
        .map_err(TransportError::backend)?;
    let (sink, stream) = socket.split();
    Ok((Box::new(Outgoing(sink)), stream))
}

async fn connect(url: &Url) -> Result<WebSocket, ConnectError> {
    let host = url.host_str().ok_or(ConnectError::Address)?;
    let port = url.port_or_known_default().ok_or(ConnectError::Address)?;
    let tcp = TcpStream::connect((host, port)).await?;
    tcp.set_nodelay(true)?;
    // Boxed: the handshake future is large.
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER_BYTES);
    let (socket, _) = Box::pin(tokio_tungstenite::client_async_tls_with_config(
        url.as_str(),
        tcp,
        Some(config),
        None,
    ))
    .await?;
    Ok(WebSocket::Tokio(socket))
}

/// The sink half, with the SDK's error type.
struct Outgoing(SplitSink<WebSocket, Message>);

impl Sink<Message> for Outgoing {
    type Error = TransportError;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready_unpin(cx).map_err(TransportError::backend)
    }

    fn start_send(mut self: Pin<&mut Self>, item: Message) -> Result<(), Self::Error> {
        self.0.start_send_unpin(item).map_err(TransportError::backend)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_flush_unpin(cx).map_err(TransportError::backend)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_close_unpin(cx).map_err(TransportError::backend)
    }
}
