//! Relays for the daemon and the people: the embedded one in the test
//! process, and a forwarder a test can cut.

use std::time::Duration;

use acp_bridge::EmbeddedRelay;
use nostr_sdk::prelude::RelayUrl;

use super::free_port;

/// A relay a scene runs on, listening on loopback: the embedded one, or
/// one written elsewhere.
pub trait RelayServer {
    fn port(&self) -> u16;

    fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port())
    }
}

/// A relay in the test process, restartable on the same port.
#[derive(Debug)]
pub struct TestRelay {
    pub port: u16,
    relay: Option<EmbeddedRelay>,
}

impl RelayServer for TestRelay {
    fn port(&self) -> u16 {
        self.port
    }
}

impl TestRelay {
    /// Starts on a port the kernel picks as it binds (a port picked first
    /// and bound later can be taken by another process in between).
    pub async fn start() -> Self {
        let relay = EmbeddedRelay::start(None).await.expect("relay starts");
        let port = port_of(relay.url());
        TestRelay {
            port,
            relay: Some(relay),
        }
    }

    /// Stops the relay (its events are gone: it keeps them in memory).
    pub fn stop(&mut self) {
        if let Some(relay) = self.relay.take() {
            relay.shutdown();
        }
    }

    /// Starts it again on the same port.
    pub async fn restart(&mut self) {
        self.stop();
        self.relay = Some(rebind(self.port, || EmbeddedRelay::start(Some(self.port))).await);
    }
}

/// How often, and how far apart, a restart tries to bind its port again.
const REBIND_ATTEMPTS: usize = 50;
const REBIND_RETRY: Duration = Duration::from_millis(100);

/// The port of a relay listening on loopback, from its URL.
pub fn port_of(url: &RelayUrl) -> u16 {
    url.as_str_without_trailing_slash()
        .rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .expect("the relay's port")
}

/// A relay started again on `port` by `start`. The relay stopped before
/// lets go of the port on a task of its own, with no event to wait for, so
/// a bind that fails is tried again, a bounded number of times.
pub async fn rebind<R, E, Start>(port: u16, start: impl Fn() -> Start) -> R
where
    Start: Future<Output = Result<R, E>>,
{
    for _ in 0..REBIND_ATTEMPTS {
        if let Ok(relay) = start().await {
            return relay;
        }
        tokio::time::sleep(REBIND_RETRY).await;
    }
    panic!("relay did not restart on port {port}");
}

/// A TCP forwarder between the daemon and a relay that a test can cut, to
/// take the daemon off the relay while everyone else stays on it.
#[derive(Debug)]
pub struct Proxy {
    pub port: u16,
    target: u16,
    stop: tokio_util::sync::CancellationToken,
}

impl Proxy {
    pub async fn start(target: u16) -> Self {
        let mut proxy = Proxy {
            port: free_port(),
            target,
            stop: tokio_util::sync::CancellationToken::new(),
        };
        proxy.open().await;
        proxy
    }

    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    /// Drops every forwarded connection and refuses new ones.
    pub fn cut(&mut self) {
        self.stop.cancel();
    }

    /// Accepts and forwards again.
    pub async fn restore(&mut self) {
        self.open().await;
    }

    /// Accepts again, forwarding to `target` from now on.
    pub async fn restore_to(&mut self, target: u16) {
        self.target = target;
        self.open().await;
    }

    async fn open(&mut self) {
        self.stop = tokio_util::sync::CancellationToken::new();
        let listener = loop {
            match tokio::net::TcpListener::bind(("127.0.0.1", self.port)).await {
                Ok(listener) => break listener,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        let (stop, target) = (self.stop.clone(), self.target);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((mut inbound, _)) = accepted else { continue };
                let stop = stop.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else {
                        return;
                    };
                    tokio::select! {
                        () = stop.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                });
            }
        });
    }
}

pub use test_support::slow_link::SlowLink;
