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
//! The daemon's own relay clients connect through a tapped one
//! ([`NoDelayTransport::tapped`]): the same connection, with each frame
//! offered to the relay tap ([`crate::relay_tap`]) before the SDK reads it.

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
#[derive(Debug, Clone, Default)]
pub struct NoDelayTransport {
    /// Every text frame goes by the tap first; the frames it routes never
    /// reach the SDK.
    taps: Option<RelayTaps>,
}

impl NoDelayTransport {
    pub(crate) fn tapped(taps: RelayTaps) -> Self {
        NoDelayTransport { taps: Some(taps) }
    }
}

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
            let socket = tokio::time::timeout(timeout, connect(url))
                .await
                .map_err(|_| TransportError::backend(ConnectError::Timeout))?
                .map_err(TransportError::backend)?;
            let (sink, stream) = socket.split();
            let sink: WebSocketSink = Box::new(Outgoing(sink));
            let stream = stream.map_err(TransportError::backend);
            let Some(taps) = &self.taps else {
                return Ok((sink, Box::pin(stream) as WebSocketStream));
            };
            let routes = taps.relay(&RelayUrl::parse(url.as_str()).map_err(TransportError::backend)?);
            let stream = stream.filter_map(move |message| {
                future::ready(match message {
                    Ok(Message::Text(frame)) => routes.sift(frame).map(|frame| Ok(Message::Text(frame))),
                    other => Some(other),
                })
            });
            Ok((sink, Box::pin(stream) as WebSocketStream))
        })
    }
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

#[cfg(test)]
mod tests {
    //! The tap in the transport, over a real relay and the SDK's own
    //! connection.

    use std::time::Duration;

    use nostr_sdk::prelude::{
        Event, EventBuilder, Filter, Keys, Kind, RelayMessage, RelayPoolNotification, SubscriptionId,
    };

    use super::*;
    use crate::embedded_relay::EmbeddedRelay;
    use crate::relay_tap::{Received, RouteSpec, Subscriptions, Tapped, fetch_once};

    fn note(author: &Keys, text: &str) -> Event {
        EventBuilder::text_note(text)
            .sign_with_keys(author)
            .expect("sign")
    }

    async fn next(receiver: &mut crate::relay_tap::TapReceiver) -> Received {
        tokio::time::timeout(Duration::from_secs(5), receiver.recv())
            .await
            .expect("a frame was routed")
    }

    /// A client of `relay` that reads through the tap.
    async fn tapped_client(relay: &EmbeddedRelay, taps: &RelayTaps) -> nostr_sdk::Client {
        let client = nostr_sdk::Client::builder()
            .websocket_transport(NoDelayTransport::tapped(taps.clone()))
            .build();
        client
            .add_relay(relay.url().clone())
            .await
            .expect("add the relay");
        client
            .try_connect_relay(relay.url().clone(), Duration::from_secs(5))
            .await
            .expect("connect");
        client
    }

    /// Publishes `events` on `relay` (each signed by its own author).
    async fn stored(relay: &EmbeddedRelay, events: &[&Event]) {
        let client = nostr_sdk::Client::builder()
            .websocket_transport(NoDelayTransport::default())
            .build();
        client
            .add_relay(relay.url().clone())
            .await
            .expect("add the relay");
        client.connect().await;
        for event in events {
            client.send_event(event).await.expect("publish");
        }
        client.disconnect().await;
    }

    #[tokio::test]
    async fn over_a_real_relay_routed_events_bypass_the_sdk_and_the_bots_own_reach_neither() {
        let relay = EmbeddedRelay::start(None).await.expect("relay");
        let (bot, author) = (Keys::generate(), Keys::generate());
        let (theirs, own) = (note(&author, "a mention"), note(&bot, "the bot's answer"));
        stored(&relay, &[&theirs, &own]).await;
        let taps = RelayTaps::default();
        let client = tapped_client(&relay, &taps).await;
        let (mut receiver, _guard) = taps.route(
            relay.url(),
            RouteSpec {
                subscriptions: vec![Subscriptions::Exactly("mentions".to_owned())],
                capacity: 8,
                drop_authored_by: Some(bot.public_key()),
                sdk_registered: true,
                intake: true,
            },
        );
        let mut sdk = client.notifications();
        client
            .subscribe_with_id(
                SubscriptionId::new("mentions"),
                Filter::new().kind(Kind::TextNote),
                None,
            )
            .await
            .expect("subscribe");
        assert!(matches!(next(&mut receiver).await, Received::Frame(Tapped::Event(read)) if *read == theirs));
        assert!(
            matches!(next(&mut receiver).await, Received::Frame(Tapped::EndOfStored(_))),
            "the bot's own event was dropped: the EOSE comes next"
        );
        // The SDK hears of the EOSE too, and of no event before it.
        loop {
            let notification = tokio::time::timeout(Duration::from_secs(5), sdk.recv())
                .await
                .expect("the SDK hears of the EOSE")
                .expect("notifications");
            match notification {
                RelayPoolNotification::Event { event, .. } => panic!("the SDK read {}", event.id),
                RelayPoolNotification::Message {
                    message: RelayMessage::Event { event, .. },
                    ..
                } => panic!("the SDK read {}", event.id),
                RelayPoolNotification::Message {
                    message: RelayMessage::EndOfStoredEvents(id),
                    ..
                } if id.as_str() == "mentions" => break,
                _ => {}
            }
        }
        relay.shutdown();
    }

    #[tokio::test]
    async fn a_one_shot_read_returns_what_the_relay_holds_but_the_bots_own() {
        let relay = EmbeddedRelay::start(None).await.expect("relay");
        let (bot, author) = (Keys::generate(), Keys::generate());
        let (first, own, second) = (note(&author, "one"), note(&bot, "mine"), note(&author, "two"));
        stored(&relay, &[&first, &own, &second]).await;
        let taps = RelayTaps::default();
        let client = tapped_client(&relay, &taps).await;
        let on_relay = client.relay(relay.url().clone()).await.expect("the relay");
        let mut read = fetch_once(
            &taps,
            &on_relay,
            vec![Filter::new().kind(Kind::TextNote).limit(10)],
            Duration::from_secs(5),
            Some(bot.public_key()),
        )
        .await
        .expect("the read");
        read.sort_by_key(|event| event.content.clone());
        assert_eq!(read, vec![first, second]);
        // The route is gone with the read: the next read has its own.
        assert_eq!(taps.relay(relay.url()).routes_held(), 0);
        relay.shutdown();
    }
}
