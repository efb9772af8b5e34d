//! The bot's identity as clients read it: its profile (kind 0, with NIP-24
//! `bot: true`), the relays it reads and writes (kind 10002, NIP-65) and its
//! DM inbox (kind 10050, NIP-17). Without a 10050 a NIP-17 client finds no
//! inbox for the bot and sends it no DM at all. Beside them, what it
//! announces: the NIP-29 groups it is in (NIP-51 kind 10009, the `--group`
//! values: a `group` tag each with its relay, and an `r` tag per relay),
//! and the kinds it answers (NIP-89 kind 31990, `d` [`HANDLER_ID`], a `k`
//! tag per kind the intake listens to, a gift wrap announced as the DM it
//! carries, kind 14; empty content, so clients show the bot's profile), so
//! that clients looking up handlers can offer it. A bot in no group
//! publishes no 10009, unless the relays hold one naming groups it left.
//!
//! Owns deciding what these events should say and handing them to the
//! outbox. It does not own publishing: once the relays connect, [`Identity`]
//! reads the newest copy of each from every relay that answers, and stores
//! a new signed event only for a kind whose copy differs from what the
//! operator configured (or that no relay holds). The event goes into the
//! same outbox as the replies, so the reply publisher sends it, retries it
//! with backoff while no relay accepts it, and sends it after a restart when
//! the daemon stopped before an OK: a relay that is down at start gets it
//! once it is back. A configuration that the relays already hold stores
//! nothing, so a restart causes no event churn.
//!
//! The profile is merged, not replaced: the daemon manages `bot` (always
//! `true`) and the fields set by `--profile-name`, `--profile-about` and
//! `--profile-picture`; every other field of the newest copy (a `website`,
//! a `lud16` set in another client) is kept as it is, and so is a managed
//! field whose flag is unset, and so are all its tags (the owner's `auth`
//! attestation of a sibling bot is one). A bot with no name at all gets
//! [`DEFAULT_PROFILE_NAME`]. `--profile-name` sets `display_name` too, and
//! a profile without one gets its `name`: Amethyst shows `display_name`
//! first, Coracle, Flotilla and 0xchat `name`, and none of them shows the
//! NIP-24 `bot` flag, so the name is what tells people this is a bot. The relay lists are the daemon's alone: 10002
//! names the relays it listens on, each for reading and writing; 10050 the
//! `--dm-relays`, or those same relays.
//!
//! When no relay answers the read, nothing is stored (publishing blind
//! could replace a profile edited elsewhere with one that lost its other
//! fields): the read is tried again with backoff until one answers. The
//! newest copy is taken across the relays that answered; a relay that
//! lacks it while another holds the configured copy is not repaired.

use std::collections::BTreeSet;
use std::time::Duration;

use nostr_sdk::prelude::{
    Alphabet, Client, Event, EventBuilder, Filter, Kind, NostrSigner, PublicKey, RelayUrl, ReqExitPolicy,
    SingleLetterTag, Tag, TagKind, TagStandard, Timestamp, Url,
};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::base::backoff::Backoff;
use crate::base::clock_skew::MAX_FUTURE_SKEW_SECS;
use crate::base::flags::{ConfigError, refuse};
use crate::edge::signer::BotSigner;
use crate::outbound::groups::GroupAddress;
use crate::outbound::reply::publisher::Outlet;
use crate::state::store::Outbox;

/// A relay that has not answered the read of the bot's identity within
/// this is counted as not answering.
pub(crate) const IDENTITY_FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Backoff between reads while no relay answers.
const READ_RETRY_MIN: Duration = Duration::from_secs(1);
const READ_RETRY_MAX: Duration = Duration::from_secs(60);
/// The name of a bot whose profile has none and whose operator set none.
pub(crate) const DEFAULT_PROFILE_NAME: &str = "acp-bridge bot";
/// NIP-89 handler information: what the bot answers.
pub(crate) const HANDLER_INFORMATION: Kind = Kind::Custom(31990);
/// The `d` tag of the bot's handler information: one per bot key, so a
/// constant (the address is the key's).
pub(crate) const HANDLER_ID: &str = "acp-bridge";

#[derive(Debug, thiserror::Error)]
pub(crate) enum IdentityError {
    #[error("no relay answered the read of the bot's identity: {0}")]
    NoRelayAnswered(String),
    #[error("could not sign the kind {kind} event: {reason}")]
    Sign { kind: u16, reason: String },
    #[error(transparent)]
    Store(#[from] crate::state::store::StoreError),
}

/// The profile fields the operator set (`--profile-*`); `None` leaves the
/// field as the relays hold it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileFields {
    pub name: Option<String>,
    pub about: Option<String>,
    pub picture: Option<String>,
}

/// The profile's flags.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Identity")]
pub struct ProfileArgs {
    /// The bot's profile name (kind 0)
    ///
    /// The bot's display name in its profile (kind 0). Unset: the name the
    /// relays hold, or "acp-bridge bot" for a bot that has none.
    #[arg(long, env = "ACP_BRIDGE_PROFILE_NAME", value_name = "NAME")]
    pub profile_name: Option<String>,

    /// The bot's profile text
    ///
    /// The "about" text of the bot's profile. Unset: whatever the relays hold.
    #[arg(long, env = "ACP_BRIDGE_PROFILE_ABOUT", value_name = "TEXT")]
    pub profile_about: Option<String>,

    /// The bot's profile picture URL
    ///
    /// The picture URL of the bot's profile. Unset: whatever the relays hold.
    #[arg(long, env = "ACP_BRIDGE_PROFILE_PICTURE", value_name = "URL")]
    pub profile_picture: Option<String>,
}

impl ProfileArgs {
    pub(crate) fn validate(&self) -> Result<ProfileFields, ConfigError> {
        profile_fields(&self.profile_name, &self.profile_about, &self.profile_picture)
    }
}

/// `--profile-name`, `--profile-about` and `--profile-picture` (blank:
/// unset), as at start and on a reload of the config file.
pub(crate) fn profile_fields(
    name: &Option<String>,
    about: &Option<String>,
    picture: &Option<String>,
) -> Result<ProfileFields, ConfigError> {
    Ok(ProfileFields {
        name: non_empty(name),
        about: non_empty(about),
        picture: picture_url(picture)?,
    })
}

/// `--profile-picture`: an http(s) URL (clients fetch it as an image), or
/// `None` when unset or blank.
fn picture_url(value: &Option<String>) -> Result<Option<String>, ConfigError> {
    let Some(text) = non_empty(value) else {
        return Ok(None);
    };
    match Url::parse(&text) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(Some(text)),
        _ => Err(refuse(
            "--profile-picture",
            format!(
                "`{text}` is not an http(s) URL: give the image's address, e.g. https://example.com/bot.png"
            ),
        )),
    }
}

/// A text flag's value, `None` when unset or blank.
fn non_empty(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|value| !value.is_empty())
        .map(str::to_owned)
}

/// The newest copy of each identity event, as the relays hold them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Held {
    pub profile: Option<Event>,
    pub relay_list: Option<Event>,
    pub inbox: Option<Event>,
    /// The groups list (kind 10009).
    pub groups_list: Option<Event>,
    /// The handler information (kind 31990, `d` [`HANDLER_ID`]).
    pub handler: Option<Event>,
}

impl Held {
    /// The newest event of each kind among `events` (NIP-01: the later
    /// `created_at`, on a tie the lower id) that is the bot's: by `bot`,
    /// its id and signature verified here (the SDK's verification cache is
    /// keyed by id alone, so a relay could resend a known id with other
    /// content), and not dated past `now` by more than the clock skew (a
    /// far-future copy would win every later comparison, and each
    /// republish would be dated after it).
    fn newest_of(bot: PublicKey, events: impl IntoIterator<Item = Event>, now: Timestamp) -> Held {
        let mut held = Held::default();
        let latest = now + MAX_FUTURE_SKEW_SECS;
        let own = events
            .into_iter()
            .filter(|event| event.pubkey == bot && event.created_at <= latest && event.verify().is_ok());
        for event in own {
            let slot = match event.kind {
                Kind::Metadata => &mut held.profile,
                Kind::RelayList => &mut held.relay_list,
                Kind::InboxRelays => &mut held.inbox,
                Kind::SimpleGroups => &mut held.groups_list,
                kind if kind == HANDLER_INFORMATION && event.tags.identifier() == Some(HANDLER_ID) => {
                    &mut held.handler
                }
                _ => continue,
            };
            let newer = slot.as_ref().is_none_or(|current| {
                (event.created_at, std::cmp::Reverse(event.id))
                    > (current.created_at, std::cmp::Reverse(current.id))
            });
            if newer {
                *slot = Some(event);
            }
        }
        held
    }

    /// The held copy of `kind` (one of the kinds read here).
    pub(crate) fn of(&self, kind: Kind) -> Option<&Event> {
        match kind {
            Kind::Metadata => self.profile.as_ref(),
            Kind::RelayList => self.relay_list.as_ref(),
            Kind::SimpleGroups => self.groups_list.as_ref(),
            kind if kind == HANDLER_INFORMATION => self.handler.as_ref(),
            _ => self.inbox.as_ref(),
        }
    }
}

/// What an identity event says, for people: the profile's JSON, or the
/// relays it names.
pub(crate) fn describe(kind: Kind, content: &str, tags: &[Tag]) -> String {
    if kind == Kind::Metadata {
        return content.to_owned();
    }
    let relays: Vec<&str> = tags.iter().filter_map(Tag::content).collect();
    if relays.is_empty() {
        "no relay".to_owned()
    } else {
        relays.join(", ")
    }
}

/// What the daemon publishes for the bot: its configuration.
#[derive(Debug, Clone)]
pub(crate) struct Wanted {
    profile: ProfileFields,
    relays: Vec<RelayUrl>,
    dm_relays: Vec<RelayUrl>,
    /// The groups it is in (`--group`).
    groups: Vec<GroupAddress>,
    /// The kinds its intake listens to (`--kinds`).
    listens_to: Vec<Kind>,
}

/// One identity event as the daemon wants it, and whether the relays hold
/// it already.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    pub kind: Kind,
    pub content: String,
    pub tags: Vec<Tag>,
    /// The newest copy the relays hold says the same: nothing to publish.
    pub up_to_date: bool,
    /// When the newest copy the relays hold was made: a replacement must
    /// be newer (NIP-01 keeps the later `created_at`), even when that copy
    /// was made this very second or on a clock ahead of ours.
    replaces: Option<Timestamp>,
}

impl Planned {
    /// What it says, for people (see [`describe`]).
    pub(crate) fn describe(&self) -> String {
        describe(self.kind, &self.content, &self.tags)
    }

    /// `kind` saying `content` and `tags`, against the copy `held` has.
    fn against(held: &Held, kind: Kind, content: String, tags: Vec<Tag>) -> Planned {
        let copy = held.of(kind);
        Planned {
            up_to_date: copy.is_some_and(|copy| says_the_same(kind, copy, &content, &tags)),
            replaces: copy.map(|copy| copy.created_at),
            kind,
            content,
            tags,
        }
    }

    async fn sign<T: NostrSigner>(&self, signer: &T) -> Result<Event, IdentityError> {
        let now = Timestamp::now();
        let created_at = self.replaces.map_or(now, |held| now.max(held + 1));
        EventBuilder::new(self.kind, &self.content)
            .tags(self.tags.clone())
            .custom_created_at(created_at)
            .sign(signer)
            .await
            .map_err(|error| IdentityError::Sign {
                kind: self.kind.as_u16(),
                reason: error.to_string(),
            })
    }
}

impl Wanted {
    /// The bot on `relays` (the embedded relay's URL when it runs one),
    /// with its DM inbox on `dm_relays` (empty: `relays`).
    pub(crate) fn new(profile: ProfileFields, relays: Vec<RelayUrl>, dm_relays: Vec<RelayUrl>) -> Self {
        let dm_relays = if dm_relays.is_empty() {
            relays.clone()
        } else {
            dm_relays
        };
        Wanted {
            profile,
            relays,
            dm_relays,
            groups: Vec::new(),
            listens_to: Vec::new(),
        }
    }

    /// The same bot, in `groups` and listening to `kinds`: what its
    /// announcements say.
    pub(crate) fn announcing(mut self, groups: Vec<GroupAddress>, kinds: Vec<Kind>) -> Self {
        self.groups = groups;
        self.listens_to = kinds;
        self
    }

    /// The bot's DM inbox relays: `--dm-relays`, or its relays.
    pub(crate) fn dm_relays(&self) -> &[RelayUrl] {
        &self.dm_relays
    }

    /// The three events as they should be given what the relays hold, in
    /// the order profile, relay list, DM inbox.
    pub(crate) fn plan(&self, held: &Held) -> Vec<Planned> {
        let profile = merged_profile(
            held.profile.as_ref().map(|event| event.content.as_str()),
            &self.profile,
        );
        let relay_list: Vec<Tag> = self
            .relays
            .iter()
            .map(|url| {
                Tag::from_standardized_without_cell(TagStandard::RelayMetadata {
                    relay_url: url.clone(),
                    metadata: None,
                })
            })
            .collect();
        let inbox: Vec<Tag> = self
            .dm_relays
            .iter()
            .map(|url| Tag::custom(TagKind::Relay, [url.to_string()]))
            .collect();
        // The profile's tags are not ours either: an owner's `auth`
        // attestation (a sibling's proof, see `gate`) rides on them.
        let profile_tags = held
            .profile
            .as_ref()
            .map(|event| event.tags.as_slice().to_vec())
            .unwrap_or_default();
        [
            (Kind::Metadata, profile, profile_tags),
            (Kind::RelayList, String::new(), relay_list),
            (Kind::InboxRelays, String::new(), inbox),
        ]
        .into_iter()
        .map(|(kind, content, tags)| Planned::against(held, kind, content, tags))
        .collect()
    }

    /// The announcements as they should be given what the relays hold: the
    /// groups list (when the bot is in a group, or the relays hold one),
    /// then the handler information (when it listens to anything).
    pub(crate) fn announcements(&self, held: &Held) -> Vec<Planned> {
        let mut planned = Vec::new();
        if !self.groups.is_empty() || held.groups_list.is_some() {
            let tags = groups_list_tags(&self.groups);
            planned.push(Planned::against(held, Kind::SimpleGroups, String::new(), tags));
        }
        if !self.listens_to.is_empty() {
            let tags = handler_tags(&self.listens_to);
            planned.push(Planned::against(held, HANDLER_INFORMATION, String::new(), tags));
        }
        planned
    }
}

/// NIP-51's simple groups list: `["group", id, relay]` per group, then
/// `["r", relay]` per relay they are on.
fn groups_list_tags(groups: &[GroupAddress]) -> Vec<Tag> {
    let relay = |group: &GroupAddress| group.relay.as_str_without_trailing_slash().to_owned();
    let mut tags: Vec<Tag> = groups
        .iter()
        .map(|group| Tag::custom(TagKind::custom("group"), [group.id.clone(), relay(group)]))
        .collect();
    let mut relays: Vec<String> = groups.iter().map(relay).collect();
    relays.sort();
    relays.dedup();
    tags.extend(relays.into_iter().map(|url| {
        Tag::custom(
            TagKind::SingleLetter(SingleLetterTag::lowercase(Alphabet::R)),
            [url],
        )
    }));
    tags
}

/// NIP-89's handler information: its `d` tag and a `k` tag per kind the
/// bot answers, each once, in the order listened to.
fn handler_tags(listens_to: &[Kind]) -> Vec<Tag> {
    let mut answered: Vec<Kind> = Vec::new();
    for kind in listens_to.iter().map(|kind| answered_kind(*kind)) {
        if !answered.contains(&kind) {
            answered.push(kind);
        }
    }
    std::iter::once(Tag::identifier(HANDLER_ID))
        .chain(
            answered
                .into_iter()
                .map(|kind| Tag::custom(TagKind::k(), [kind.as_u16().to_string()])),
        )
        .collect()
}

/// The kind a handler of what the bot listens to `kind` for handles: a
/// gift wrap (1059) carries a NIP-17 DM (14); the others are themselves.
fn answered_kind(kind: Kind) -> Kind {
    if kind == Kind::GiftWrap {
        Kind::PrivateDirectMessage
    } else {
        kind
    }
}

/// The profile JSON: the held copy's fields (when it is a JSON object)
/// with the managed ones set.
fn merged_profile(held: Option<&str>, fields: &ProfileFields) -> String {
    let mut profile = held
        .and_then(|content| serde_json::from_str::<Map<String, Value>>(content).ok())
        .unwrap_or_default();
    profile.insert("bot".to_owned(), Value::Bool(true));
    for (field, value) in [
        ("name", &fields.name),
        ("display_name", &fields.name),
        ("about", &fields.about),
        ("picture", &fields.picture),
    ] {
        if let Some(value) = value {
            profile.insert(field.to_owned(), Value::String(value.clone()));
        }
    }
    let unnamed = profile
        .get("name")
        .and_then(Value::as_str)
        .is_none_or(|name| name.trim().is_empty());
    if unnamed {
        profile.insert("name".to_owned(), Value::String(DEFAULT_PROFILE_NAME.to_owned()));
    }
    let no_display_name = profile
        .get("display_name")
        .and_then(Value::as_str)
        .is_none_or(|name| name.trim().is_empty());
    if no_display_name {
        let name = profile["name"].clone();
        profile.insert("display_name".to_owned(), name);
    }
    Value::Object(profile).to_string()
}

/// Whether the held `copy` says what `content` and `tags` say: the same
/// profile fields (in any order; its tags are the copy's own), or the same
/// relay tags (in any order).
fn says_the_same(kind: Kind, copy: &Event, content: &str, tags: &[Tag]) -> bool {
    if kind == Kind::Metadata {
        let parse = |text: &str| serde_json::from_str::<Value>(text).ok();
        return parse(&copy.content).is_some() && parse(&copy.content) == parse(content);
    }
    let set = |tags: &mut dyn Iterator<Item = &Tag>| -> BTreeSet<Vec<String>> {
        tags.map(|tag| tag.as_slice().to_vec()).collect()
    };
    set(&mut copy.tags.iter()) == set(&mut tags.iter())
}

/// Reads the newest copy of each identity event of `bot` from every relay
/// of `client`. Fails only when no relay answered.
pub(crate) async fn read_held(client: &Client, bot: PublicKey) -> Result<Held, IdentityError> {
    let filter = Filter::new().author(bot).kinds([
        Kind::Metadata,
        Kind::RelayList,
        Kind::InboxRelays,
        Kind::SimpleGroups,
        HANDLER_INFORMATION,
    ]);
    let relays = client.relays().await;
    let reads = relays.values().map(|relay| {
        let filter = filter.clone();
        async move {
            relay
                .fetch_events(filter, IDENTITY_FETCH_TIMEOUT, ReqExitPolicy::ExitOnEOSE)
                .await
                .map_err(|error| format!("{}: {error}", relay.url()))
        }
    });
    let mut events = Vec::new();
    let mut failures = Vec::new();
    for read in futures_util::future::join_all(reads).await {
        match read {
            Ok(found) => events.push(found),
            Err(failure) => failures.push(failure),
        }
    }
    if events.is_empty() {
        return Err(IdentityError::NoRelayAnswered(failures.join("; ")));
    }
    Ok(Held::newest_of(
        bot,
        events.into_iter().flatten(),
        Timestamp::now(),
    ))
}

/// Brings the relays' copy of the bot's identity in line with its
/// configuration, once, at start (and again after a reload of the config
/// file changed the profile).
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub client: Client,
    pub signer: BotSigner,
    pub outbox: Outbox,
    pub outlet: Outlet,
    pub wanted: Wanted,
}

impl Identity {
    /// The same identity with the profile fields `profile`.
    pub(crate) fn with_profile(&self, profile: ProfileFields) -> Identity {
        let mut identity = self.clone();
        identity.wanted.profile = profile;
        identity
    }

    /// Reads what the relays hold (again with backoff while none answers,
    /// until `stop`) and stores what differs for the publisher. Call once a
    /// relay is connected.
    pub(crate) async fn run(self, stop: CancellationToken) {
        let mut backoff = Backoff::new(READ_RETRY_MIN, READ_RETRY_MAX);
        let held = loop {
            match read_held(&self.client, self.signer.public_key()).await {
                Ok(held) => break held,
                Err(error) => {
                    let delay = backoff.next_delay();
                    tracing::warn!(%error, retry_in_ms = delay.as_millis() as u64, "cannot read the bot's identity; will try again");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        };
        let changed: Vec<Planned> = self
            .wanted
            .plan(&held)
            .into_iter()
            .chain(self.wanted.announcements(&held))
            .filter(|planned| !planned.up_to_date)
            .collect();
        if changed.is_empty() {
            return tracing::info!("the bot's identity is up to date");
        }
        let mut stored = Vec::new();
        for planned in &changed {
            match self.store_for_publishing(planned).await {
                Ok(()) => stored.push(planned.kind.as_u16()),
                Err(error) => {
                    tracing::error!(%error, kind = planned.kind.as_u16(), "cannot publish the bot's identity")
                }
            }
        }
        self.outlet.stored();
        tracing::info!(kinds = ?stored, "the bot's identity changed; publishing it");
    }

    /// Signs `planned` and puts it in the outbox, for every relay.
    async fn store_for_publishing(&self, planned: &Planned) -> Result<(), IdentityError> {
        let event = planned.sign(&self.signer).await?;
        self.outbox.put_unanswering(&event)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_sdk::prelude::Keys;

    fn fields(name: Option<&str>, about: Option<&str>) -> ProfileFields {
        ProfileFields {
            name: name.map(str::to_owned),
            about: about.map(str::to_owned),
            picture: None,
        }
    }

    fn profile(keys: &Keys, content: &str, at: u64) -> Event {
        EventBuilder::new(Kind::Metadata, content)
            .custom_created_at(Timestamp::from(at))
            .sign_with_keys(keys)
            .unwrap()
    }

    fn relay(url: &str) -> RelayUrl {
        RelayUrl::parse(url).unwrap()
    }

    #[test]
    fn the_profile_keeps_unmanaged_fields_and_sets_the_managed_ones() {
        let held =
            r#"{"name":"old","about":"old about","website":"https://example.com","lud16":"bot@example.com"}"#;
        let merged: Value =
            serde_json::from_str(&merged_profile(Some(held), &fields(None, Some("new about")))).unwrap();
        assert_eq!(merged["bot"], true);
        assert_eq!(merged["name"], "old");
        assert_eq!(merged["display_name"], "old", "filled from the name");
        assert_eq!(merged["about"], "new about");
        assert_eq!(merged["website"], "https://example.com");
        assert_eq!(merged["lud16"], "bot@example.com");
    }

    #[test]
    fn a_bot_without_a_name_gets_the_default_and_a_broken_copy_is_started_afresh() {
        let merged: Value =
            serde_json::from_str(&merged_profile(Some("not json"), &ProfileFields::default())).unwrap();
        assert_eq!(
            merged,
            serde_json::json!({"bot": true, "name": DEFAULT_PROFILE_NAME, "display_name": DEFAULT_PROFILE_NAME})
        );
    }

    #[test]
    fn the_name_flag_sets_the_display_name_and_an_unset_one_keeps_the_held_display_name() {
        let held = r#"{"name":"old","display_name":"Old Bot"}"#;
        let kept: Value = serde_json::from_str(&merged_profile(Some(held), &fields(None, None))).unwrap();
        assert_eq!(kept["display_name"], "Old Bot");
        let renamed: Value =
            serde_json::from_str(&merged_profile(Some(held), &fields(Some("Helper"), None))).unwrap();
        assert_eq!(
            (&renamed["name"], &renamed["display_name"]),
            (&"Helper".into(), &"Helper".into())
        );
    }

    #[tokio::test]
    async fn what_the_relays_hold_already_is_not_published_again() {
        let keys = Keys::generate();
        let wanted = Wanted::new(
            fields(Some("bot"), None),
            vec![relay("ws://a.example")],
            Vec::new(),
        );
        let fresh = wanted.plan(&Held::default());
        assert!(fresh.iter().all(|planned| !planned.up_to_date));
        let mut signed = Vec::new();
        for planned in &fresh {
            signed.push(planned.sign(&keys).await.unwrap());
        }
        let held = Held::newest_of(keys.public_key(), signed, Timestamp::now());
        assert!(wanted.plan(&held).iter().all(|planned| planned.up_to_date));

        let moved = Wanted::new(
            fields(Some("bot"), None),
            vec![relay("ws://a.example")],
            vec![relay("ws://inbox.example")],
        );
        let up_to_date: Vec<bool> = moved
            .plan(&held)
            .iter()
            .map(|planned| planned.up_to_date)
            .collect();
        assert_eq!(up_to_date, [true, true, false]);
    }

    #[tokio::test]
    async fn a_republished_profile_keeps_the_held_copys_tags() {
        let keys = Keys::generate();
        let attestation = Tag::custom(TagKind::custom("auth"), ["owner", "kind=0", "sig"]);
        let held_profile = EventBuilder::new(Kind::Metadata, r#"{"name":"sibling"}"#)
            .tag(attestation.clone())
            .sign_with_keys(&keys)
            .unwrap();
        let held = Held::newest_of(keys.public_key(), [held_profile], Timestamp::now());
        let wanted = Wanted::new(
            fields(None, Some("about me")),
            vec![relay("ws://a.example")],
            Vec::new(),
        );
        let profile = wanted.plan(&held).remove(0);
        assert!(!profile.up_to_date);
        let signed = profile.sign(&keys).await.unwrap();
        assert_eq!(signed.tags.as_slice(), [attestation]);
    }

    /// The groups list names each group with its relay and each relay
    /// once; the handler information a `k` per kind answered (a gift wrap
    /// as the DM it carries). Held as signed, both are up to date; a bot
    /// that left its groups publishes an empty list over the held one, and
    /// a bot never in a group publishes none.
    #[tokio::test]
    async fn the_announcements_name_the_groups_and_the_kinds_answered() {
        let keys = Keys::generate();
        let groups = [
            "ws://a.example'pizza",
            "ws://a.example'pasta",
            "ws://b.example'pizza",
        ]
        .map(|group| group.parse::<GroupAddress>().unwrap())
        .to_vec();
        let kinds = vec![Kind::Custom(9), Kind::TextNote, Kind::GiftWrap];
        let wanted = Wanted::new(
            ProfileFields::default(),
            vec![relay("ws://a.example")],
            Vec::new(),
        )
        .announcing(groups, kinds);
        let fresh = wanted.announcements(&Held::default());
        let tags: Vec<Vec<Vec<String>>> = fresh
            .iter()
            .map(|planned| planned.tags.iter().map(|tag| tag.as_slice().to_vec()).collect())
            .collect();
        let strings = |rows: &[&[&str]]| -> Vec<Vec<String>> {
            rows.iter()
                .map(|row| row.iter().map(|cell| (*cell).to_owned()).collect())
                .collect()
        };
        assert_eq!(
            tags,
            [
                strings(&[
                    &["group", "pizza", "ws://a.example"],
                    &["group", "pasta", "ws://a.example"],
                    &["group", "pizza", "ws://b.example"],
                    &["r", "ws://a.example"],
                    &["r", "ws://b.example"],
                ]),
                strings(&[&["d", HANDLER_ID], &["k", "9"], &["k", "1"], &["k", "14"]]),
            ]
        );
        let mut signed = Vec::new();
        for planned in &fresh {
            signed.push(planned.sign(&keys).await.unwrap());
        }
        let held = Held::newest_of(keys.public_key(), signed, Timestamp::now());
        assert!(
            wanted
                .announcements(&held)
                .iter()
                .all(|planned| planned.up_to_date)
        );

        let left = Wanted::new(
            ProfileFields::default(),
            vec![relay("ws://a.example")],
            Vec::new(),
        )
        .announcing(Vec::new(), vec![Kind::TextNote]);
        let planned = left.announcements(&held);
        assert_eq!(planned[0].kind, Kind::SimpleGroups);
        assert!(planned[0].tags.is_empty() && !planned[0].up_to_date);
        let never = left.announcements(&Held::default());
        assert_eq!(
            never.iter().map(|planned| planned.kind).collect::<Vec<_>>(),
            [HANDLER_INFORMATION]
        );
    }

    #[test]
    fn the_newest_copy_wins() {
        let keys = Keys::generate();
        let older = profile(&keys, r#"{"name":"older"}"#, 100);
        let newer = profile(&keys, r#"{"name":"newer"}"#, 200);
        let held = Held::newest_of(keys.public_key(), [newer.clone(), older], Timestamp::from(300));
        assert_eq!(held.profile.map(|event| event.id), Some(newer.id));
    }

    /// Only the bot's own, verified, not future-dated copies are held: one
    /// by another key, one resent under a known id with other content, and
    /// one dated past the clock skew are ignored.
    #[test]
    fn a_copy_by_another_key_a_tampered_one_or_one_from_the_future_is_not_held() {
        let (bot, someone) = (Keys::generate(), Keys::generate());
        let now = 1_000_000;
        let genuine = profile(&bot, r#"{"name":"mine"}"#, now);
        let by_another = profile(&someone, r#"{"name":"theirs"}"#, now + 10);
        let resent = Event::new(
            genuine.id,
            genuine.pubkey,
            Timestamp::from(now + 20),
            genuine.kind,
            genuine.tags.clone(),
            r#"{"name":"forged"}"#,
            genuine.sig,
        );
        let ahead = profile(
            &bot,
            r#"{"name":"from the future"}"#,
            now + MAX_FUTURE_SKEW_SECS + 1,
        );
        let within_skew = profile(&bot, r#"{"name":"a little ahead"}"#, now + MAX_FUTURE_SKEW_SECS);
        let held = Held::newest_of(
            bot.public_key(),
            [genuine.clone(), by_another, resent, ahead],
            Timestamp::from(now),
        );
        assert_eq!(held.profile.map(|event| event.id), Some(genuine.id));
        let held = Held::newest_of(
            bot.public_key(),
            [genuine, within_skew.clone()],
            Timestamp::from(now),
        );
        assert_eq!(held.profile.map(|event| event.id), Some(within_skew.id));
    }
}
