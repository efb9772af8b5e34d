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
//! offered to the relay tap ([`crate::edge::relay_tap`]) before the SDK reads it.
//!
//! The client that reaches other people's relays connects through a
//! guarded one ([`NoDelayTransport::guarded`]): a relay the operator did
//! not name is reached over `wss://` only, at a public address only (the
//! address connected to, [`crate::edge::public_address`]), unless the operator
//! allows more ([`StrangersRelays`]). A relay it refused stays refused for
//! a while ([`RelayGuard`]), so that a name found to resolve to a private
//! address counts as unusable, as a private address written in the URL
//! does, and the refusal is logged once, not at every event.
//!
//! A message larger than the SDK's own limit (`MAX_MESSAGE_SIZE`, 5 MB) is
//! refused by the websocket layer as its frames arrive, before it is
//! buffered whole, read by the tap or parsed by the SDK: the connection
//! ends with an error, logged by the SDK.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_wsocket::futures_util::stream::SplitSink;
use async_wsocket::futures_util::{Sink, SinkExt, StreamExt, TryStreamExt, future};
use async_wsocket::{Message, WebSocket};
use nostr_sdk::pool::ConnectionMode;
use nostr_sdk::pool::relay::constants::MAX_MESSAGE_SIZE;
use nostr_sdk::pool::transport::error::TransportError;
use nostr_sdk::pool::transport::websocket::{WebSocketSink, WebSocketStream, WebSocketTransport};
use nostr_sdk::prelude::{BoxedFuture, RelayUrl, Url};
use nostr_sdk::types::url::Host;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::edge::public_address::{self, PrivateAddresses};
use crate::edge::relay_tap::RelayTaps;

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
    /// Which relays it may reach; `None`: any (the operator's own client).
    guard: Option<Arc<RelayGuard>>,
}

impl NoDelayTransport {
    pub(crate) fn tapped(taps: RelayTaps) -> Self {
        NoDelayTransport {
            taps: Some(taps),
            guard: None,
        }
    }

    /// Connections that reach only the relays `guard` allows.
    pub(crate) fn guarded(guard: Arc<RelayGuard>) -> Self {
        NoDelayTransport {
            taps: None,
            guard: Some(guard),
        }
    }
}

/// Which relays other people's lists may send the daemon to: the
/// operator's own always; any other over `wss://` only (unless
/// `plain_websockets`) and at a public address only (unless `private`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StrangersRelays {
    /// The relays the operator named (`--relay`, `--dm-relays`,
    /// `--directory-relays`): always reached.
    pub operators: Vec<RelayUrl>,
    /// `--allow-insecure-relays`: `ws://` too.
    pub plain_websockets: bool,
    /// `--allow-private-relays`: loopback and private addresses too.
    pub private: PrivateAddresses,
}

/// Why a relay is not connected to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RelayRefusal {
    #[error("not wss:// (see --allow-insecure-relays)")]
    Plain,
    #[error("a non-public address, {0} (see --allow-private-relays)")]
    Private(IpAddr),
}

impl StrangersRelays {
    /// What the URL of a relay the operator did not name tells: its scheme,
    /// an address written in it.
    fn check(&self, url: &RelayUrl) -> Result<(), RelayRefusal> {
        let url_of: &Url = url.into();
        let literal = match url.host() {
            Some(Host::Ipv4(address)) => Some(IpAddr::V4(address)),
            Some(Host::Ipv6(address)) => Some(IpAddr::V6(address)),
            _ => None,
        };
        match literal {
            _ if url_of.scheme() != "wss" && !self.plain_websockets => Err(RelayRefusal::Plain),
            Some(address)
                if self.private == PrivateAddresses::Refused && !public_address::is_public(address) =>
            {
                Err(RelayRefusal::Private(address))
            }
            _ => Ok(()),
        }
    }

    /// The addresses a connection to `url` may reach.
    fn private_addresses(&self, url: &RelayUrl) -> PrivateAddresses {
        match self.operators.contains(url) {
            true => PrivateAddresses::Allowed,
            false => self.private,
        }
    }
}

/// How long a relay refused (by its URL, or by the address its name
/// resolved to as it was connected to) stays refused without being tried
/// again, and how often its refusal is logged: a name that resolves to a
/// private address is then unusable for everyone whose list names it, so
/// their events go to the bot's relays as for a literal address.
pub(crate) const REFUSAL_MEMORY: Duration = Duration::from_secs(10 * 60);
/// Refused relays remembered at once, whatever the number of lists read.
const MAX_REMEMBERED_REFUSALS: usize = 1024;

/// [`StrangersRelays`] and the relays it refused lately, shared by the
/// guarded transport (which refuses as it connects) and the outbound
/// connections (which ask before routing to a relay).
#[derive(Debug)]
pub(crate) struct RelayGuard {
    rule: StrangersRelays,
    refused: Mutex<RefusalBook>,
}

impl RelayGuard {
    pub(crate) fn new(rule: StrangersRelays) -> Self {
        RelayGuard {
            rule,
            refused: Mutex::new(RefusalBook::new(MAX_REMEMBERED_REFUSALS, REFUSAL_MEMORY)),
        }
    }

    /// Whether `url` may be tried: the operator's, or neither refused
    /// lately nor refused by its URL. A host name is vetted again as it is
    /// connected to.
    pub(crate) fn vet(&self, url: &RelayUrl) -> Result<(), RelayRefusal> {
        if self.rule.operators.contains(url) {
            return Ok(());
        }
        if let Some(refusal) = self.book().remembered(url, Instant::now()) {
            return Err(refusal);
        }
        self.rule.check(url).map_err(|refusal| self.refuse(url, refusal))
    }

    /// Remembers that `url` was refused, logged once per [`REFUSAL_MEMORY`].
    fn refuse(&self, url: &RelayUrl, refusal: RelayRefusal) -> RelayRefusal {
        if self.book().record(url, refusal.clone(), Instant::now()) {
            tracing::warn!(
                relay = url.as_str_without_trailing_slash(),
                reason = %refusal,
                remembered_secs = REFUSAL_MEMORY.as_secs(),
                "refused to connect to a relay another's list names"
            );
        }
        refusal
    }

    fn book(&self) -> std::sync::MutexGuard<'_, RefusalBook> {
        self.refused
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The relays refused lately and why, each until its memory runs out;
/// bounded. No I/O, no clock of its own, so that it is tested on its own.
#[derive(Debug)]
struct RefusalBook {
    capacity: usize,
    memory: Duration,
    refused: HashMap<RelayUrl, (RelayRefusal, Instant)>,
}

impl RefusalBook {
    fn new(capacity: usize, memory: Duration) -> Self {
        RefusalBook {
            capacity,
            memory,
            refused: HashMap::new(),
        }
    }

    /// Why `url` was refused, if it was within the memory before `now`.
    fn remembered(&mut self, url: &RelayUrl, now: Instant) -> Option<RelayRefusal> {
        match self.refused.get(url) {
            Some((refusal, until)) if *until > now => Some(refusal.clone()),
            Some(_) => {
                self.refused.remove(url);
                None
            }
            None => None,
        }
    }

    /// Remembers `url` refused from `now`; true when it was not already
    /// (the refusal is news, to log). When full, the expired go, and if
    /// none had, the one closest to expiring.
    fn record(&mut self, url: &RelayUrl, refusal: RelayRefusal, now: Instant) -> bool {
        if self.remembered(url, now).is_some() {
            return false;
        }
        if self.refused.len() >= self.capacity {
            self.refused.retain(|_, (_, until)| *until > now);
            if self.refused.len() >= self.capacity
                && let Some(soonest) = self
                    .refused
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(url, _)| url.clone())
            {
                self.refused.remove(&soonest);
            }
        }
        self.refused.insert(url.clone(), (refusal, now + self.memory));
        true
    }
}

#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("relay URL has no host or port")]
    Address,
    #[error("connecting timed out")]
    Timeout,
    #[error(transparent)]
    Refused(#[from] RelayRefusal),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Websocket(#[from] tokio_tungstenite::tungstenite::Error),
}

impl From<public_address::ConnectError> for ConnectError {
    fn from(error: public_address::ConnectError) -> Self {
        match error {
            public_address::ConnectError::Io(error) => ConnectError::Io(error),
            public_address::ConnectError::PrivateAddress(address) => {
                ConnectError::Refused(RelayRefusal::Private(address))
            }
        }
    }
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
            let socket = tokio::time::timeout(timeout, self.connect_guarded(url))
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

impl NoDelayTransport {
    /// Connects to `url` if the guard, if any, allows it.
    async fn connect_guarded(&self, url: &Url) -> Result<WebSocket, ConnectError> {
        let Some(guard) = &self.guard else {
            return connect(url, PrivateAddresses::Allowed).await;
        };
        let relay = RelayUrl::parse(url.as_str()).map_err(|_| ConnectError::Address)?;
        guard.vet(&relay)?;
        match connect(url, guard.rule.private_addresses(&relay)).await {
            Err(ConnectError::Refused(refusal)) => Err(guard.refuse(&relay, refusal).into()),
            connected => connected,
        }
    }
}

/// The websocket's limits: the SDK's message size, enforced on frames as
/// they arrive.
fn websocket_config() -> WebSocketConfig {
    let max_message = MAX_MESSAGE_SIZE as usize;
    WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message))
}

async fn connect(url: &Url, private: PrivateAddresses) -> Result<WebSocket, ConnectError> {
    let host = url.host_str().ok_or(ConnectError::Address)?;
    let port = url.port_or_known_default().ok_or(ConnectError::Address)?;
    // An IPv6 literal is written in brackets in a URL, not to the resolver.
    let bare_host = host.trim_start_matches('[').trim_end_matches(']');
    let tcp = public_address::connect(bare_host, port, private).await?;
    tcp.set_nodelay(true)?;
    // Boxed: the handshake future is large.
    let config = websocket_config();
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
    use crate::edge::embedded_relay::EmbeddedRelay;
    use crate::edge::relay_tap::{Received, RouteSpec, Subscriptions, Tapped, fetch_once};

    fn note(author: &Keys, text: &str) -> Event {
        EventBuilder::text_note(text)
            .sign_with_keys(author)
            .expect("sign")
    }

    async fn next(receiver: &mut crate::edge::relay_tap::TapReceiver) -> Received {
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

    fn guard(operators: Vec<RelayUrl>, plain_websockets: bool) -> Arc<RelayGuard> {
        Arc::new(RelayGuard::new(StrangersRelays {
            operators,
            plain_websockets,
            private: PrivateAddresses::Refused,
        }))
    }

    async fn reach(transport: &NoDelayTransport, url: &RelayUrl) -> Result<(), String> {
        transport
            .connect(url.into(), &ConnectionMode::Direct, Duration::from_secs(5))
            .await
            .map(drop)
            .map_err(|error| error.to_string())
    }

    /// A list naming `ws://`, a loopback address, or a host name that
    /// resolves to one is refused; the operator's own relay is reached.
    #[tokio::test]
    async fn the_guarded_transport_reaches_others_relays_over_wss_at_public_addresses_only() {
        let relay = EmbeddedRelay::start(None).await.expect("relay");
        let port = relay
            .url()
            .as_str()
            .rsplit(':')
            .next()
            .unwrap()
            .trim_end_matches('/')
            .to_owned();
        let by_name = RelayUrl::parse(&format!("ws://localhost:{port}")).unwrap();
        let plain_refused = NoDelayTransport::guarded(guard(Vec::new(), false));
        assert!(
            reach(&plain_refused, relay.url())
                .await
                .unwrap_err()
                .contains("not wss://")
        );
        let rule = guard(Vec::new(), true);
        let private_refused = NoDelayTransport::guarded(Arc::clone(&rule));
        let error = reach(&private_refused, relay.url()).await.unwrap_err();
        assert!(error.contains("non-public address, 127.0.0.1"), "{error}");
        let error = reach(&private_refused, &by_name).await.unwrap_err();
        assert!(
            error.contains("non-public address"),
            "resolved, then refused: {error}"
        );
        assert!(
            matches!(rule.vet(&by_name), Err(RelayRefusal::Private(_))),
            "the name is remembered refused: not tried again"
        );
        let wss_private = RelayUrl::parse("wss://169.254.169.254").unwrap();
        let error = reach(&private_refused, &wss_private).await.unwrap_err();
        assert!(error.contains("169.254.169.254"), "{error}");
        let operators = NoDelayTransport::guarded(guard(vec![relay.url().clone()], false));
        reach(&operators, relay.url())
            .await
            .expect("the operator's relay");
        relay.shutdown();
    }

    /// A refusal is news once per relay per memory: then it is logged
    /// again, and the book stays within its bound.
    #[test]
    fn a_refused_relay_is_remembered_for_its_memory_within_the_bound() {
        let memory = Duration::from_secs(60);
        let mut book = RefusalBook::new(4, memory);
        let start = Instant::now();
        let url = |n: usize| RelayUrl::parse(&format!("wss://relay{n}.example.com")).unwrap();
        let private = RelayRefusal::Private(IpAddr::from([127, 0, 0, 1]));
        assert!(book.record(&url(0), private.clone(), start), "news");
        assert!(!book.record(&url(0), private.clone(), start + Duration::from_secs(59)));
        assert_eq!(
            book.remembered(&url(0), start + Duration::from_secs(59)),
            Some(private.clone())
        );
        assert_eq!(book.remembered(&url(0), start + memory), None, "tried again");
        assert!(
            book.record(&url(0), private.clone(), start + memory),
            "news again"
        );
        for n in 1..100 {
            book.record(
                &url(n),
                RelayRefusal::Plain,
                start + memory + Duration::from_secs(n as u64),
            );
            assert!(book.refused.len() <= 4);
        }
        assert_eq!(
            book.remembered(&url(99), start + memory + Duration::from_secs(99)),
            Some(RelayRefusal::Plain)
        );
    }

    /// A relay's message past the SDK's limit is refused by the websocket
    /// layer as its frames arrive: the stream ends in an error, nothing
    /// of it is handed on.
    #[tokio::test]
    async fn a_message_larger_than_the_sdks_limit_is_refused_before_it_is_read_whole() {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let oversized = MAX_MESSAGE_SIZE as usize + 1;
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut socket = tokio_tungstenite::accept_async(tcp).await.unwrap();
            let frame = format!("[\"NOTICE\",\"{}\"]", "x".repeat(oversized));
            let _ = socket
                .send(tokio_tungstenite::tungstenite::Message::text(frame))
                .await;
            let _ = socket.next().await;
        });
        let url = Url::parse(&format!("ws://127.0.0.1:{port}")).unwrap();
        let (_sink, mut stream) = NoDelayTransport::default()
            .connect(&url, &ConnectionMode::Direct, Duration::from_secs(5))
            .await
            .expect("connected");
        let received = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("the stream answers");
        let error = match received {
            Some(Err(error)) => error.to_string(),
            Some(Ok(message)) => panic!("a message of {} bytes was read", message.len()),
            None => panic!("the stream ended without an error"),
        };
        println!("a {oversized}-byte message: {error}");
        assert!(
            error.contains("Message too long") || error.contains("too long"),
            "{error}"
        );
    }
}
