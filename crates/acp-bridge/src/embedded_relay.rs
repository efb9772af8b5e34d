//! `--relay embedded`: an in-process relay on loopback.
//!
//! For the demo, tests and a first try without any external service. Its
//! events live in memory and are gone with the process; a real deployment
//! points `--relay` at a real relay.

use std::net::{IpAddr, Ipv4Addr};

use nostr_relay_builder::prelude::{LocalRelay, RateLimit, RelayBuilder};
use nostr_sdk::prelude::RelayUrl;

/// Loose limits: the embedded relay serves one daemon and its own tests,
/// which publish bursts far beyond what a public relay would allow.
const EMBEDDED_MAX_REQS: usize = 1_000;
const EMBEDDED_NOTES_PER_MINUTE: u32 = 1_000_000;

/// A running embedded relay; it stops when dropped.
#[derive(Debug, Clone)]
pub struct EmbeddedRelay {
    relay: LocalRelay,
    url: RelayUrl,
}

impl EmbeddedRelay {
    /// Starts on 127.0.0.1, on `port` or any free port.
    pub async fn start(port: Option<u16>) -> Result<Self, nostr_relay_builder::Error> {
        let mut builder = RelayBuilder::default()
            .addr(IpAddr::V4(Ipv4Addr::LOCALHOST))
            .rate_limit(RateLimit {
                max_reqs: EMBEDDED_MAX_REQS,
                notes_per_minute: EMBEDDED_NOTES_PER_MINUTE,
            });
        if let Some(port) = port {
            builder = builder.port(port);
        }
        let relay = LocalRelay::new(builder);
        relay.run().await?;
        let url = relay.url().await;
        tracing::info!(%url, "embedded relay listening");
        Ok(EmbeddedRelay { relay, url })
    }

    pub fn url(&self) -> &RelayUrl {
        &self.url
    }

    pub fn shutdown(&self) {
        self.relay.shutdown();
    }
}
