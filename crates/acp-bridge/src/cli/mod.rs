//! The operator's tools beside the daemon: `keygen`, `check` and `demo`,
//! and `mcp`, which agents run; and the help pages (`help`). Each is one file with one job; `main.rs`
//! only dispatches to them.

pub mod check;
mod check_groups;
pub mod demo;
pub mod help;
pub mod keygen;
pub mod mcp;

use nostr_sdk::prelude::{Client, ClientOptions, Relay, RelayOptions, RelayUrl};

use crate::edge::signer::BotSigner;

/// A client for one of `check`'s looks at a relay that answers a NIP-42
/// challenge as the bot, as the daemon's own client does.
fn authenticating_client(bot: &BotSigner) -> Client {
    Client::builder()
        .signer(bot.clone())
        .opts(ClientOptions::new().automatic_authentication(true))
        .build()
}

/// `url` added to `client` without reconnection: `check` reports a relay
/// that is down instead of waiting for it. Not connected yet, so that the
/// caller can listen from the relay's first message.
async fn added_relay(client: &Client, url: &RelayUrl) -> Result<Relay, String> {
    client
        .pool()
        .add_relay(url.clone(), RelayOptions::new().reconnect(false))
        .await
        .map_err(|error| error.to_string())?;
    client.relay(url.clone()).await.map_err(|error| error.to_string())
}
