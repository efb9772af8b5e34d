//! The relays' flags (the bot's relays, its DM inbox relays, directory
//! relays, the buffer per relay) and their validation into
//! [`RelaySettings`]: where the bot listens, and where it publishes
//! besides.

use clap::Args;
use nostr_sdk::prelude::RelayUrl;

use crate::base::flags::{ConfigError, at_least_one, flag_defaults, refuse};
use crate::edge::embedded_relay::RelaySpec;
use crate::edge::public_address::PrivateAddresses;
use crate::edge::transport::StrangersRelays;

/// The relays' flags.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Relays")]
pub struct RelayArgs {
    /// Relay URLs to listen and answer on (`embedded`: one in-process)
    ///
    /// Relay URL (repeatable or comma-separated). `embedded` starts an
    /// in-process relay on loopback and uses it.
    #[arg(
        long = "relay",
        env = "ACP_BRIDGE_RELAY",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub relays: Vec<String>,

    /// Relay messages buffered per relay, at most
    ///
    /// Relay messages buffered per relay, and events queued for the intake,
    /// at most; past it the daemon is behind and fetches again from its
    /// watermark (each time it falls behind, a relay's queue may hold twice
    /// as many, up to eight times this).
    #[arg(long, env = "ACP_BRIDGE_RELAY_BUFFER", default_value_t = 4096)]
    pub relay_buffer: usize,

    /// The bot's DM inbox relays (unset: its relays)
    ///
    /// The bot's DM inbox relays (NIP-17, kind 10050; repeatable or
    /// comma-separated). Unset: the relays it listens on.
    #[arg(long, env = "ACP_BRIDGE_DM_RELAYS", value_delimiter = ',', value_name = "URL")]
    pub dm_relays: Vec<String>,

    /// Indexer relays the bot's lists are also published to
    ///
    /// Directory relays (indexers such as wss://purplepag.es; repeatable or
    /// comma-separated): the bot's profile and relay lists are published
    /// there too, and people's relay lists are looked up there too, since
    /// that is where clients look for them. Unset: the bot's relays only.
    #[arg(
        long,
        env = "ACP_BRIDGE_DIRECTORY_RELAYS",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub directory_relays: Vec<String>,

    /// Reach relays from others' lists over ws:// too
    ///
    /// Connect to relays that other people's relay lists (kinds 10002 and
    /// 10050) name over ws:// too. Off: only wss:// (the relays named by
    /// --relay, --dm-relays and --directory-relays are always reached).
    #[arg(long, env = "ACP_BRIDGE_ALLOW_INSECURE_RELAYS")]
    pub allow_insecure_relays: bool,

    /// Reach relays from others' lists on private addresses too
    ///
    /// Connect to relays that other people's relay lists name on loopback,
    /// private, link-local and other non-public addresses too. Off: such a
    /// relay is refused (the address checked is the one connected to), so
    /// a list cannot point the daemon at its own host or network.
    #[arg(long, env = "ACP_BRIDGE_ALLOW_PRIVATE_RELAYS")]
    pub allow_private_relays: bool,
}

impl Default for RelayArgs {
    fn default() -> Self {
        flag_defaults()
    }
}

/// Where the bot listens and publishes: [`RelayArgs`], checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelaySettings {
    /// `--relay`: the bot's relays, in order, at least one.
    pub bot: Vec<RelaySpec>,
    /// `--relay-buffer`: relay messages buffered per relay, and events
    /// queued for the intake, at most.
    pub buffer: usize,
    /// `--dm-relays`: the DM inbox relays (empty: the bot's own relays).
    pub dm_inbox: Vec<RelayUrl>,
    /// `--directory-relays`: where identities are published and looked up
    /// besides the bot's relays.
    pub directory: Vec<RelayUrl>,
    /// `--allow-insecure-relays`: others' relays over ws:// too.
    pub insecure_others: bool,
    /// `--allow-private-relays`: others' relays at non-public addresses too.
    pub private_others: PrivateAddresses,
}

impl RelaySettings {
    /// The one relay `relay`, with the flags' defaults for the rest.
    pub(crate) fn local(relay: RelayUrl) -> RelaySettings {
        RelaySettings {
            bot: vec![RelaySpec::Url(relay)],
            buffer: RelayArgs::default().relay_buffer,
            dm_inbox: Vec::new(),
            directory: Vec::new(),
            insecure_others: false,
            private_others: PrivateAddresses::Refused,
        }
    }
}

impl RelaySettings {
    /// Which relays the outbound connections may reach: the operator's own
    /// (`bot`: the `--relay` URLs, the embedded one's resolved; the DM
    /// inbox and directory relays) always, others as the flags allow.
    pub(crate) fn strangers(&self, bot: &[RelayUrl]) -> StrangersRelays {
        let mut operators = bot.to_vec();
        operators.extend(self.dm_inbox.iter().cloned());
        operators.extend(self.directory.iter().cloned());
        StrangersRelays {
            operators,
            plain_websockets: self.insecure_others,
            private: self.private_others,
        }
    }
}

impl RelayArgs {
    pub(crate) fn validate(&self) -> Result<RelaySettings, ConfigError> {
        Ok(RelaySettings {
            bot: parse_relays(&self.relays)?,
            buffer: at_least_one("--relay-buffer", self.relay_buffer)?,
            dm_inbox: parse_relay_urls("--dm-relays", &self.dm_relays)?,
            directory: parse_relay_urls("--directory-relays", &self.directory_relays)?,
            insecure_others: self.allow_insecure_relays,
            private_others: match self.allow_private_relays {
                true => PrivateAddresses::Allowed,
                false => PrivateAddresses::Refused,
            },
        })
    }
}

fn parse_relays(values: &[String]) -> Result<Vec<RelaySpec>, ConfigError> {
    let mut relays = Vec::new();
    for value in values
        .iter()
        .map(|value| value.trim())
        .filter(|value| !value.is_empty())
    {
        let relay = if value == "embedded" {
            RelaySpec::Embedded
        } else {
            RelaySpec::Url(relay_url("--relay", value)?)
        };
        if !relays.contains(&relay) {
            relays.push(relay);
        }
    }
    if relays.is_empty() {
        return Err(refuse(
            "--relay",
            "at least one relay is required (a ws:// or wss:// URL, or `embedded`)",
        ));
    }
    Ok(relays)
}

/// A list of relay URLs (`--dm-relays`, `--directory-relays`), in order,
/// without duplicates.
fn parse_relay_urls(flag: &'static str, values: &[String]) -> Result<Vec<RelayUrl>, ConfigError> {
    let mut relays = Vec::new();
    for value in values
        .iter()
        .map(|value| value.trim())
        .filter(|value| !value.is_empty())
    {
        let relay = relay_url(flag, value)?;
        if !relays.contains(&relay) {
            relays.push(relay);
        }
    }
    Ok(relays)
}

/// One relay URL of `flag`; a refusal says what a relay URL looks like.
fn relay_url(flag: &'static str, value: &str) -> Result<RelayUrl, ConfigError> {
    RelayUrl::parse(value).map_err(|error| {
        refuse(
            flag,
            format!(
                "`{value}` is not a relay URL ({}): use a ws:// or wss:// URL, e.g. wss://relay.example.com",
                error.to_string().to_lowercase()
            ),
        )
    })
}
