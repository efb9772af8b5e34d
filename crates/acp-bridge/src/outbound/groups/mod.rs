//! NIP-29 groups as a member sees them: which groups the bot serves
//! (`--group`), what their relays say of them, and its membership.
//!
//! Owns the groups' settings, the [`GroupDirectory`] the intake asks
//! whether a group mention is to be answered and the turn driver asks how
//! to name the group to the agent, and the start-up [`membership`] task
//! that reads each group's metadata, asks to join where membership is
//! needed and leaves the groups no longer configured. It does not own the
//! relay connections (the relay links do, and every read and write here
//! goes through the same client, which answers NIP-42 challenges), nor
//! the answers in groups (the replier).

mod address;
pub(crate) mod membership;
mod metadata;
pub(crate) mod relay_key;
mod timeline;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use clap::{Args, ValueEnum};
use nostr_sdk::prelude::{Event, PublicKey, RelayUrl, Tag, TagKind};

pub(crate) use address::{GroupAddress, GroupAddressError, same_relay};
pub(crate) use metadata::GroupMetadata;
use timeline::Timelines;

use crate::edge::embedded_relay::RelaySpec;

/// Environment variable that may hold the groups' invite code (a
/// credential: see `process_seal`).
pub(crate) const INVITE_CODE_ENV: &str = "ACP_BRIDGE_GROUP_INVITE_CODE";

/// What to do with a mention in a group that is not configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OtherGroups {
    /// Answer it like a mention in a configured group.
    Answer,
    /// Drop it at intake (reason `unserved_group`).
    Ignore,
}

/// The groups' flags.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Groups")]
pub struct GroupArgs {
    /// NIP-29 groups the bot serves (RELAY'ID)
    ///
    /// NIP-29 groups the bot serves, as `<host>'<group-id>` (a bare host
    /// means wss://host; a ws:// or wss:// URL may stand before the `'`).
    /// Repeatable or comma-separated. The group's relay must be one of the
    /// --relay URLs. The bot reads each group's metadata at start and asks
    /// to join a closed, private or restricted group it is not a member of.
    #[arg(
        long = "group",
        env = "ACP_BRIDGE_GROUPS",
        value_delimiter = ',',
        value_name = "RELAY'ID"
    )]
    pub groups: Vec<String>,

    /// Mentions in other groups: answer or ignore
    ///
    /// Mentions in groups not named by --group: `answer` or `ignore`.
    /// Unset: `ignore` once any --group is given, `answer` otherwise (a
    /// bot configured with relays only answers group mentions there).
    #[arg(long, env = "ACP_BRIDGE_OTHER_GROUPS", value_enum)]
    pub other_groups: Option<OtherGroups>,

    /// Invite code of the bot's join requests (a secret)
    ///
    /// Invite code sent with every join request (NIP-29 `code` tag), for a
    /// group whose admins made one (kind 9009). Unset: none.
    #[arg(long, env = INVITE_CODE_ENV, value_name = "CODE", hide_env_values = true)]
    pub group_invite_code: Option<String>,
}

/// The groups' settings, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSettings {
    pub groups: Vec<GroupAddress>,
    pub other_groups: OtherGroups,
    pub invite_code: Option<String>,
}

impl Default for GroupSettings {
    /// No group configured: every group mention is answered.
    fn default() -> Self {
        GroupSettings {
            groups: Vec::new(),
            other_groups: OtherGroups::Answer,
            invite_code: None,
        }
    }
}

impl GroupSettings {
    /// The ids of the configured groups on `relay`: the chat the relay
    /// link reads whether it tags the bot or not.
    pub fn ids_on(&self, relay: &RelayUrl) -> Vec<String> {
        self.groups
            .iter()
            .filter(|group| same_relay(&group.relay, relay))
            .map(|group| group.id.clone())
            .collect()
    }
}

/// Why the groups' flags were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupSettingsError {
    #[error(transparent)]
    Address(#[from] GroupAddressError),
    #[error(
        "group `{group}` is on {relay}, which the bot does not read: add it to --relay (the bot hears a group only through its relay)"
    )]
    RelayNotRead { group: String, relay: String },
}

impl GroupArgs {
    /// Parses the groups (without duplicates) and checks that the bot reads
    /// each one's relay: adding it to the relays on the quiet would publish
    /// it in the bot's relay list (kind 10002) as a relay where anyone may
    /// mention the bot.
    pub fn validate(&self, relays: &[RelaySpec]) -> Result<GroupSettings, GroupSettingsError> {
        let mut groups: Vec<GroupAddress> = Vec::new();
        for value in self.groups.iter().filter(|value| !value.trim().is_empty()) {
            let group: GroupAddress = value.parse()?;
            let read = relays
                .iter()
                .any(|spec| matches!(spec, RelaySpec::Url(url) if same_relay(url, &group.relay)));
            if !read {
                return Err(GroupSettingsError::RelayNotRead {
                    relay: group.relay.as_str_without_trailing_slash().to_owned(),
                    group: group.to_string(),
                });
            }
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
        let other_groups = self.other_groups.unwrap_or(if groups.is_empty() {
            OtherGroups::Answer
        } else {
            OtherGroups::Ignore
        });
        let invite_code = self
            .group_invite_code
            .as_deref()
            .map(str::trim)
            .filter(|code| !code.is_empty())
            .map(str::to_owned);
        Ok(GroupSettings {
            groups,
            other_groups,
            invite_code,
        })
    }
}

/// The configured groups and what their relays said of them, shared by
/// the intake, the turn drivers, the replier and the membership task.
#[derive(Debug, Clone)]
pub struct GroupDirectory {
    served: Arc<[GroupAddress]>,
    other_groups: OtherGroups,
    metadata: Arc<RwLock<HashMap<GroupAddress, GroupMetadata>>>,
    /// The groups' recent events, for the bot's `previous` tags.
    timelines: Timelines,
}

impl Default for GroupDirectory {
    fn default() -> Self {
        GroupDirectory::new(&GroupSettings::default())
    }
}

impl GroupDirectory {
    pub fn new(settings: &GroupSettings) -> Self {
        GroupDirectory {
            served: settings.groups.clone().into(),
            other_groups: settings.other_groups,
            metadata: Arc::default(),
            timelines: Timelines::default(),
        }
    }

    /// Keeps `event`, heard on `relay`, among its group's recent events
    /// when it is a group event not by `bot` (see `timeline`).
    pub(crate) fn heard(&self, relay: &RelayUrl, event: &Event, bot: &PublicKey) {
        self.timelines.heard(relay, event, bot);
    }

    /// The tags that place an event of the bot in group `id` on `relay`:
    /// its `h` tag and the NIP-29 `previous` tags naming the group's
    /// recent events there (none when `relay` is unknown).
    pub(crate) fn group_tags(&self, relay: Option<&RelayUrl>, id: &str) -> Vec<Tag> {
        let mut tags = vec![Tag::custom(TagKind::h(), [id.to_owned()])];
        if let Some(relay) = relay {
            tags.extend(self.timelines.previous_tags(relay, id));
        }
        tags
    }

    /// [`Self::group_tags`] for an event that may sit in a group room (a
    /// comment carries the room's `h` when its mention did): none outside one.
    pub(crate) fn room_tags(&self, relay: Option<&RelayUrl>, room: Option<&str>) -> Vec<Tag> {
        room.map(|id| self.group_tags(relay, id)).unwrap_or_default()
    }

    /// Whether a mention in group `id` heard on `relay` is to be answered.
    pub fn serves(&self, relay: &RelayUrl, id: &str) -> bool {
        self.other_groups == OtherGroups::Answer || self.served.iter().any(|group| group.is(relay, id))
    }

    /// Keeps what the group's relay said of it, for the prompts.
    pub fn learn(&self, group: &GroupAddress, metadata: GroupMetadata) {
        self.metadata
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(group.clone(), metadata);
    }

    /// What the agent is told of group `id` on `relay` before the mentions
    /// (see `prompt::group_description`); empty when its relay said
    /// nothing of it (not configured, or not read yet).
    pub fn preface(&self, relay: &RelayUrl, id: &str) -> String {
        let metadata = self
            .metadata
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        metadata
            .iter()
            .find(|(group, _)| group.is(relay, id))
            .map(|(group, metadata)| {
                acp_bridge_core::prompt::group_description(
                    &group.relay,
                    &group.id,
                    metadata.name.as_deref(),
                    metadata.about.as_deref(),
                )
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(url: &str) -> RelaySpec {
        RelaySpec::Url(RelayUrl::parse(url).unwrap())
    }

    fn args(groups: &[&str], other_groups: Option<OtherGroups>) -> GroupArgs {
        GroupArgs {
            groups: groups.iter().map(|group| (*group).to_owned()).collect(),
            other_groups,
            group_invite_code: None,
        }
    }

    #[test]
    fn without_groups_every_group_is_answered_and_with_one_only_it() {
        let relays = [relay("wss://groups.example.com")];
        let none = args(&[], None).validate(&relays).unwrap();
        assert_eq!(none.other_groups, OtherGroups::Answer);
        let one = args(&["groups.example.com'pizza", "groups.example.com'pizza"], None)
            .validate(&relays)
            .unwrap();
        assert_eq!(one.groups.len(), 1);
        assert_eq!(one.other_groups, OtherGroups::Ignore);
        let directory = GroupDirectory::new(&one);
        let url = RelayUrl::parse("wss://groups.example.com/").unwrap();
        assert!(directory.serves(&url, "pizza"));
        assert!(!directory.serves(&url, "pasta"));
        let elsewhere = RelayUrl::parse("wss://other.example.com").unwrap();
        assert!(!directory.serves(&elsewhere, "pizza"));

        let answering = args(&["groups.example.com'pizza"], Some(OtherGroups::Answer))
            .validate(&relays)
            .unwrap();
        assert!(GroupDirectory::new(&answering).serves(&elsewhere, "pasta"));
    }

    #[test]
    fn a_group_on_a_relay_the_bot_does_not_read_is_refused() {
        let error = args(&["other.example.com'pizza"], None)
            .validate(&[relay("wss://groups.example.com")])
            .unwrap_err();
        assert!(
            matches!(error, GroupSettingsError::RelayNotRead { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("add it to --relay"));
    }

    #[test]
    fn a_malformed_group_is_refused() {
        let error = args(&["pizza"], None)
            .validate(&[relay("wss://groups.example.com")])
            .unwrap_err();
        assert!(matches!(error, GroupSettingsError::Address(_)), "{error}");
    }
}
