//! `--relay embedded`: an in-process relay on loopback.
//!
//! For the demo, tests and a first try without any external service. Its
//! events live in memory and are gone with the process; a real deployment
//! points `--relay` at a real relay.
//!
//! The relay is rust-nostr's `LocalRelay`, but the listening socket is ours:
//! its own accept loop leaves Nagle's algorithm on, which holds each small
//! message back until the peer's delayed ACK (up to 40 ms per hop on
//! Linux). Accepted connections get `TCP_NODELAY`, answer the websocket
//! upgrade here, and are then handed to the relay.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use nostr_relay_builder::prelude::{LocalRelay, RateLimit, RelayBuilder};
use nostr_sdk::prelude::RelayUrl;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Where to find the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelaySpec {
    Embedded,
    Url(RelayUrl),
}

/// Loose limits: the embedded relay serves one daemon and its own tests,
/// which publish bursts far beyond what a public relay would allow.
const EMBEDDED_MAX_REQS: usize = 1_000;
const EMBEDDED_NOTES_PER_MINUTE: u32 = 1_000_000;
/// Largest websocket upgrade request read.
const MAX_UPGRADE_REQUEST_BYTES: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum EmbeddedRelayError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Relay(#[from] nostr_relay_builder::Error),
}

/// A running embedded relay; it stops with [`EmbeddedRelay::shutdown`].
#[derive(Debug, Clone)]
pub struct EmbeddedRelay {
    relay: LocalRelay,
    url: RelayUrl,
    stop: CancellationToken,
}

impl EmbeddedRelay {
    /// Starts on 127.0.0.1, on `port` or any free port.
    pub async fn start(port: Option<u16>) -> Result<Self, EmbeddedRelayError> {
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port.unwrap_or(0));
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| EmbeddedRelayError::Listen { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| EmbeddedRelayError::Listen { addr, source })?;
        let relay = LocalRelay::new(RelayBuilder::default().rate_limit(RateLimit {
            max_reqs: EMBEDDED_MAX_REQS,
            notes_per_minute: EMBEDDED_NOTES_PER_MINUTE,
        }));
        let url = RelayUrl::parse(&format!("ws://{bound}")).map_err(|error| EmbeddedRelayError::Listen {
            addr: bound,
            source: std::io::Error::other(error),
        })?;
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(listener, relay.clone(), stop.clone()));
        tracing::info!(%url, "embedded relay listening");
        Ok(EmbeddedRelay { relay, url, stop })
    }

    pub fn url(&self) -> &RelayUrl {
        &self.url
    }

    pub fn shutdown(&self) {
        self.stop.cancel();
        self.relay.shutdown();
    }
}

async fn accept_loop(listener: TcpListener, relay: LocalRelay, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, peer)) = accepted else { continue };
        let (relay, stop) = (relay.clone(), stop.clone());
        tokio::spawn(async move {
            let served = async {
                stream.set_nodelay(true)?;
                let stream = upgrade(stream).await?;
                relay
                    .take_connection(stream, peer)
                    .await
                    .map_err(|error| std::io::Error::other(error.to_string()))
            };
            tokio::select! {
                () = stop.cancelled() => {}
                result = served => if let Err(error) = result {
                    tracing::debug!(%peer, %error, "embedded relay connection ended");
                },
            }
        });
    }
}

/// Answers the HTTP/1.1 websocket upgrade (RFC 6455 §4.2). The client waits
/// for the answer before it sends a frame, so nothing is read past the head.
async fn upgrade(mut stream: TcpStream) -> std::io::Result<TcpStream> {
    let mut head = Vec::with_capacity(1024);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_UPGRADE_REQUEST_BYTES || stream.read(&mut byte).await? == 0 {
            return Err(std::io::Error::other("incomplete websocket upgrade request"));
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let key = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("sec-websocket-key")
                .then(|| value.trim().to_owned())
        })
        .ok_or_else(|| std::io::Error::other("not a websocket upgrade"))?;
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    stream.write_all(response.as_bytes()).await?;
    Ok(stream)
}
