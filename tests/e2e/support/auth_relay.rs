//! A relay that asks for authentication (NIP-42), restartable on the same
//! port: rust-nostr's `LocalRelay` with its NIP-42 modes, run in the test
//! process. A REQ or EVENT it wants authenticated is answered with an
//! `AUTH` challenge and `CLOSED`/`OK false` `auth-required:`.
//!
//! It is reached through a [`Proxy`] whose port it keeps: a restart cuts
//! every connection there, for certain. `LocalRelay::shutdown` alone wakes
//! only the connection tasks waiting at that instant (`notify_waiters`), so
//! a busy one went on serving the old relay and its old events.

use std::net::{IpAddr, Ipv4Addr};

use nostr_relay_builder::prelude::{
    LocalRelay, RateLimit, RelayBuilder, RelayBuilderNip42, RelayBuilderNip42Mode,
};

use super::relay::{Proxy, RelayServer, port_of};

/// What the relay serves only to an authenticated connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFor {
    /// Every REQ (`Nip42Mode::Read`).
    Reads,
    /// Every EVENT (`Nip42Mode::Write`).
    Writes,
    /// Gift wraps, and those to the authenticated key only, as DM inbox
    /// relays do (`auth_dm`); everything else is open.
    DmsToTheirRecipient,
}

/// Loose limits: one daemon and its test publish in bursts.
const MAX_REQS: usize = 1_000;
const NOTES_PER_MINUTE: u32 = 1_000_000;

#[derive(Debug)]
pub struct AuthRelay {
    proxy: Proxy,
    auth_for: AuthFor,
    relay: Option<LocalRelay>,
}

impl RelayServer for AuthRelay {
    fn port(&self) -> u16 {
        self.proxy.port
    }
}

impl AuthRelay {
    /// Starts on a port the kernel picks as it binds, behind its proxy.
    pub async fn start(auth_for: AuthFor) -> Self {
        let (relay, port) = run(auth_for).await;
        AuthRelay {
            proxy: Proxy::start(port).await,
            auth_for,
            relay: Some(relay),
        }
    }

    /// Stops it (its events are gone with it, and every connection is cut)
    /// and starts it again on the same port: every connection must
    /// authenticate anew.
    pub async fn restart(&mut self) {
        self.proxy.cut();
        if let Some(relay) = self.relay.take() {
            relay.shutdown();
        }
        let (relay, port) = run(self.auth_for).await;
        self.relay = Some(relay);
        self.proxy.restore_to(port).await;
    }
}

/// A relay of `auth_for` on a port the kernel picks; it and its port.
async fn run(auth_for: AuthFor) -> (LocalRelay, u16) {
    let relay = build(auth_for).await.expect("relay starts");
    let port = port_of(&relay.url().await);
    (relay, port)
}

async fn build(auth_for: AuthFor) -> Result<LocalRelay, nostr_relay_builder::Error> {
    let mut builder = RelayBuilder::default()
        .addr(IpAddr::V4(Ipv4Addr::LOCALHOST))
        .rate_limit(RateLimit {
            max_reqs: MAX_REQS,
            notes_per_minute: NOTES_PER_MINUTE,
        });
    builder = match auth_for {
        AuthFor::Reads => builder.nip42(RelayBuilderNip42 {
            mode: RelayBuilderNip42Mode::Read,
        }),
        AuthFor::Writes => builder.nip42(RelayBuilderNip42 {
            mode: RelayBuilderNip42Mode::Write,
        }),
        AuthFor::DmsToTheirRecipient => builder.auth_dm(true),
    };
    let relay = LocalRelay::new(builder);
    relay.run().await?;
    Ok(relay)
}
