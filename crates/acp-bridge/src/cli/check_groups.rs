//! `acp-bridge check`, the groups' part: what each `--group`'s relay says
//! of the group (name, closed/private/restricted), whether it lists the
//! bot as a member, and so whether the daemon would send a join request.
//! Informational, like the identity lines: it reads (authenticating with
//! the bot's keys when the relay asks, as the daemon does) and never
//! publishes.

use std::time::Duration;

use nostr_sdk::prelude::PublicKey;

use crate::config::Settings;
use crate::edge::signer::BotSigner;
use crate::outbound::groups::membership::{GroupState, read_group};
use crate::outbound::groups::relay_key::relay_key;
use crate::outbound::groups::{GroupAddress, GroupMetadata};

use super::{added_relay, authenticating_client};

/// A group relay that does not connect within this is reported unreachable.
const GROUP_RELAY_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Prints one line per configured group.
pub(super) async fn check_groups(settings: &Settings, bot: &BotSigner) {
    for group in &settings.groups.groups {
        let (signer, signed) = match relay_key(&group.relay).await {
            Ok(Some(key)) => (Some(key), "signed by the relay's key (NIP-11)".to_owned()),
            Ok(None) => (
                None,
                "taken as served: the relay's NIP-11 document names no key".to_owned(),
            ),
            Err(error) => (None, format!("taken as served: no NIP-11 document ({error})")),
        };
        match read(bot, group, signer).await {
            Ok(state) => println!("group {group}: {}; metadata {signed}", describe(&state)),
            Err(error) => println!("group {group}: cannot read it: {error}"),
        }
    }
}

async fn read(
    bot: &BotSigner,
    group: &GroupAddress,
    signer: Option<PublicKey>,
) -> Result<GroupState, String> {
    let client = authenticating_client(bot);
    let read = async {
        let relay = added_relay(&client, &group.relay).await?;
        relay
            .try_connect(GROUP_RELAY_CONNECT_TIMEOUT)
            .await
            .map_err(|error| error.to_string())?;
        read_group(&relay, &group.id, &bot.public_key(), signer)
            .await
            .map_err(|error| error.to_string())
    }
    .await;
    client.shutdown().await;
    read
}

/// The group and what the daemon would do about it, in words.
fn describe(state: &GroupState) -> String {
    let group = match &state.metadata {
        Some(metadata) => describe_metadata(metadata),
        None => "the relay shows no metadata for it (a hidden group, or a wrong group id)".to_owned(),
    };
    let membership = if state.member {
        "the bot is a member"
    } else if state.needs_join_request() {
        "the bot is not listed as a member: the daemon would send a join request"
    } else {
        "open to everyone: no join request needed"
    };
    format!("{group}; {membership}")
}

fn describe_metadata(metadata: &GroupMetadata) -> String {
    let flags: Vec<&str> = [
        (metadata.closed, "closed"),
        (metadata.private, "private"),
        (metadata.restricted, "restricted"),
    ]
    .into_iter()
    .filter_map(|(set, flag)| set.then_some(flag))
    .collect();
    let name = metadata
        .name
        .as_deref()
        .map_or_else(|| "no name".to_owned(), |name| format!("{name:?}"));
    if flags.is_empty() {
        name
    } else {
        format!("{name} ({})", flags.join(", "))
    }
}
