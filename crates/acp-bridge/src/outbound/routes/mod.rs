//! Where each outgoing event goes, so that its reader finds it where their
//! client looks, and how a delivery there is judged.
//!
//! - A DM (NIP-17 gift wrap) goes to its recipient's DM inbox relays (kind
//!   10050). Someone who lists none gets it where they wrote from (the
//!   outbox entry's relay, or every relay of the bot), as before, and on
//!   their NIP-65 read relays besides: Amethyst and 0xchat fall back to
//!   those when sending, and Amethyst reads DMs there too. The
//!   bot's copy of its own DM (wrapped to itself, as NIP-17 asks) goes to
//!   the bot's own inbox: `--dm-relays`, or its relays.
//! - A reply to a kind-1 note goes to the relay of the mention (or every
//!   relay of the bot) and also to the read relays (kind 10002, NIP-65) of
//!   each person it tags, as NIP-65 asks of a client publishing an event.
//!   So does a comment (NIP-22, kind 1111) outside a group; one in a group
//!   room (its `h` tag) lives on the group's relay, as group messages do.
//! - Everything else (group messages, which live on their group's relay;
//!   reactions; the bot's own profile and lists) goes where it went before.
//!
//! Delivery rule: an outbox entry is sent once its primary destination
//! accepted it (any one relay of it said OK or `duplicate:`), judged by
//! the same `Verdict` as always (see `reply::publisher`). Extra destinations
//! (the read relays) are best effort: tried alongside, each retried a few
//! times ([`EXTRA_ATTEMPTS`]) within the same publish, and tried again
//! whenever the primary is retried. Every destination receives the same
//! signed event (same id), so relays deduplicate what reaches them twice
//! and a reply is never shown twice.
//!
//! Relays that are the bot's own are used through the listening client;
//! every other relay through [`OutboundRelays`], so strangers' relays never
//! enter the listening client.
//!
//! A relay someone's list names that the outbound connections may not try
//! (`ws://`, a non-public address written in its URL, or a name refused
//! lately as it was connected to because it resolved to one) is left out
//! of their lists at each event, so they fall back to the bot's relays
//! rather than to nothing: an event whose inbox was refused as it was
//! connected to goes to the bot's relays at its next attempt, once.

use std::sync::Arc;
use std::time::Duration;

use nostr_sdk::prelude::{Event, Kind, PublicKey, RelayUrl, TagKind};

pub(crate) mod args;
mod outbound_relays;
mod relay_directory;

pub(crate) use outbound_relays::OutboundRelays;
pub(crate) use relay_directory::RelayDirectory;
use relay_directory::RelayLists;

/// Attempts at each extra destination within one publish.
pub(crate) const EXTRA_ATTEMPTS: u32 = 3;
/// Pause between two attempts at an extra destination.
pub(crate) const EXTRA_RETRY_DELAY: Duration = Duration::from_secs(2);
/// Extra destinations of one event at most, whatever the number of people
/// it tags.
pub(crate) const MAX_EXTRA_RELAYS: usize = 8;

/// Where an event must be accepted for its outbox entry to count as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Primary {
    /// As before routing: the relay the entry names (its mention's), or
    /// every relay of the bot when it names none.
    Origin(Option<RelayUrl>),
    /// These relays (any one accepting is enough).
    Relays(Vec<RelayUrl>),
}

impl std::fmt::Display for Primary {
    /// As the publisher's log lines name it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Primary::Origin(Some(url)) => write!(f, "{url}"),
            Primary::Origin(None) => f.write_str("every relay"),
            Primary::Relays(urls) => {
                let urls: Vec<&str> = urls.iter().map(RelayUrl::as_str).collect();
                f.write_str(&urls.join(", "))
            }
        }
    }
}

/// Where one event goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub primary: Primary,
    /// Best effort, besides the primary.
    pub extras: Vec<RelayUrl>,
}

/// What routing needs: the directory of people's lists, the connections to
/// their relays, and the bot's own inbox.
#[derive(Debug)]
pub(crate) struct Routes {
    pub directory: RelayDirectory,
    pub outbound: Arc<OutboundRelays>,
    pub bot: PublicKey,
    pub bot_relays: BotRelays,
}

/// The relays of the bot's own that are not its `--relay` list.
#[derive(Debug, Clone, Default)]
pub(crate) struct BotRelays {
    /// `--dm-relays`, or the bot's relays: its DM inbox.
    pub dm: Vec<RelayUrl>,
    /// `--directory-relays`: where its profile and lists go besides its
    /// relays, because clients look them up there.
    pub directory: Vec<RelayUrl>,
}

impl Routes {
    /// The route of `event`, stored for `origin` (`None`: every relay).
    pub(crate) async fn route(&self, event: &Event, origin: Option<RelayUrl>) -> Route {
        let lookups = readers(event, self.bot).into_iter().map(|person| async move {
            let mut lists = self.directory.lists(person).await;
            lists.retain(|url| self.outbound.may_try(url));
            (person, lists)
        });
        let looked_up = futures_util::future::join_all(lookups).await;
        plan(event, origin, self.bot, &self.bot_relays, &looked_up)
    }
}

/// The people whose lists decide where `event` goes: a gift wrap's
/// recipient (not the bot: its copy goes to its own inbox), a kind-1
/// reply's tagged people but the bot; each once, and no more than could
/// fill [`MAX_EXTRA_RELAYS`].
fn readers(event: &Event, bot: PublicKey) -> Vec<PublicKey> {
    let mut readers = Vec::new();
    if event.kind == Kind::GiftWrap || is_public_reply(event) {
        for person in tagged(event).filter(|person| *person != bot) {
            if readers.len() < MAX_EXTRA_RELAYS && !readers.contains(&person) {
                readers.push(person);
            }
        }
    }
    readers
}

/// A note, or a comment outside a group (no `h` tag): read where the
/// people it tags read (NIP-65).
fn is_public_reply(event: &Event) -> bool {
    event.kind == Kind::TextNote || (event.kind == Kind::Comment && event.tags.find(TagKind::h()).is_none())
}

fn tagged(event: &Event) -> impl Iterator<Item = PublicKey> + '_ {
    event
        .tags
        .filter(TagKind::p())
        .filter_map(|tag| tag.content())
        .filter_map(|hex| PublicKey::from_hex(hex).ok())
}

/// The route of `event` given the lists `looked_up` of its readers. No
/// I/O, so that the rules are tested on their own.
fn plan(
    event: &Event,
    origin: Option<RelayUrl>,
    bot: PublicKey,
    bot_relays: &BotRelays,
    looked_up: &[(PublicKey, RelayLists)],
) -> Route {
    let lists = |person: &PublicKey| {
        looked_up
            .iter()
            .find(|(known, _)| known == person)
            .map(|(_, lists)| lists)
    };
    let as_before = Route {
        primary: Primary::Origin(origin.clone()),
        extras: Vec::new(),
    };
    match event.kind {
        Kind::GiftWrap => {
            let Some(recipient) = tagged(event).next() else {
                return as_before;
            };
            let inbox = match recipient == bot {
                true => bot_relays.dm.clone(),
                false => lists(&recipient)
                    .map(|lists| lists.dm_inbox.clone())
                    .unwrap_or_default(),
            };
            match inbox.is_empty() {
                true => Route {
                    extras: read_relays(lists(&recipient), origin.as_ref()),
                    primary: Primary::Origin(origin),
                },
                false => Route {
                    primary: Primary::Relays(inbox),
                    extras: Vec::new(),
                },
            }
        }
        _ if is_public_reply(event) => {
            let readers = tagged(event).filter(|person| *person != bot);
            Route {
                extras: read_relays(readers.filter_map(|person| lists(&person)), origin.as_ref()),
                primary: Primary::Origin(origin),
            }
        }
        // The Marmot key package (30443, legacy 443) and its relay list
        // (10051) are looked up where profiles are.
        Kind::Metadata
        | Kind::RelayList
        | Kind::InboxRelays
        | Kind::MlsKeyPackage
        | Kind::Custom(30443)
        | Kind::MlsKeyPackageRelays
            if event.pubkey == bot =>
        {
            Route {
                primary: Primary::Origin(origin),
                extras: bot_relays.directory.clone(),
            }
        }
        _ => as_before,
    }
}

/// The NIP-65 read relays of `readers`, but `origin`, without repeats, at
/// most [`MAX_EXTRA_RELAYS`].
fn read_relays<'a>(
    readers: impl IntoIterator<Item = &'a RelayLists>,
    origin: Option<&RelayUrl>,
) -> Vec<RelayUrl> {
    let mut extras: Vec<RelayUrl> = Vec::new();
    for url in readers.into_iter().flat_map(|lists| &lists.read) {
        if extras.len() < MAX_EXTRA_RELAYS && Some(url) != origin && !extras.contains(url) {
            extras.push(url.clone());
        }
    }
    extras
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_sdk::prelude::{EventBuilder, Keys, Tag};

    fn url(name: &str) -> RelayUrl {
        RelayUrl::parse(&format!("wss://{name}.example.com")).unwrap()
    }

    fn lists(inbox: &[&str], read: &[&str]) -> RelayLists {
        RelayLists {
            dm_inbox: inbox.iter().map(|name| url(name)).collect(),
            read: read.iter().map(|name| url(name)).collect(),
        }
    }

    async fn wrap_to(bot: &Keys, to: PublicKey) -> Event {
        EventBuilder::private_msg(bot, to, "hi", []).await.unwrap()
    }

    #[tokio::test]
    async fn a_dm_goes_to_the_recipients_inbox_or_where_it_came_from_and_the_copy_to_the_bots_inbox() {
        let bot = Keys::generate();
        let (listed, unlisted) = (Keys::generate().public_key(), Keys::generate().public_key());
        let reads_only = Keys::generate().public_key();
        let known = [
            (listed, lists(&["inbox"], &["read"])),
            (unlisted, RelayLists::default()),
            (reads_only, lists(&[], &["read", "bots"])),
        ];
        let origin = Some(url("bots"));
        let route = |event: Event| {
            plan(
                &event,
                origin.clone(),
                bot.public_key(),
                &BotRelays {
                    dm: vec![url("botinbox")],
                    directory: vec![url("index")],
                },
                &known,
            )
        };
        assert_eq!(
            route(wrap_to(&bot, listed).await).primary,
            Primary::Relays(vec![url("inbox")])
        );
        assert_eq!(
            route(wrap_to(&bot, unlisted).await).primary,
            Primary::Origin(origin.clone())
        );
        assert_eq!(
            route(wrap_to(&bot, reads_only).await),
            Route {
                primary: Primary::Origin(origin.clone()),
                extras: vec![url("read")],
            },
            "no inbox: where they wrote from, and their read relays"
        );
        assert_eq!(
            route(wrap_to(&bot, bot.public_key()).await).primary,
            Primary::Relays(vec![url("botinbox")])
        );
        assert!(route(wrap_to(&bot, listed).await).extras.is_empty());
    }

    #[test]
    fn a_note_reply_or_comment_also_goes_to_each_tagged_persons_read_relays_and_a_group_message_does_not() {
        let bot = Keys::generate();
        let (alice, bob) = (Keys::generate().public_key(), Keys::generate().public_key());
        let known = [
            (alice, lists(&["inbox"], &["a1", "shared"])),
            (bob, lists(&[], &["shared", "b1", "bots"])),
        ];
        let tags = [
            Tag::public_key(alice),
            Tag::public_key(bob),
            Tag::public_key(bot.public_key()),
        ];
        let note = EventBuilder::text_note("answer")
            .tags(tags.clone())
            .sign_with_keys(&bot)
            .unwrap();
        let origin = Some(url("bots"));
        let route = plan(
            &note,
            origin.clone(),
            bot.public_key(),
            &BotRelays::default(),
            &known,
        );
        assert_eq!(route.primary, Primary::Origin(origin.clone()));
        assert_eq!(route.extras, [url("a1"), url("shared"), url("b1")]);

        let comment = EventBuilder::new(Kind::Comment, "answer")
            .tags(tags.clone())
            .sign_with_keys(&bot)
            .unwrap();
        let route = plan(
            &comment,
            origin.clone(),
            bot.public_key(),
            &BotRelays::default(),
            &known,
        );
        assert_eq!(
            route.extras,
            [url("a1"), url("shared"), url("b1")],
            "a comment as a note"
        );

        let group = EventBuilder::new(Kind::Custom(9), "answer")
            .tags(tags.clone())
            .sign_with_keys(&bot)
            .unwrap();
        let room_comment = EventBuilder::new(Kind::Comment, "answer")
            .tags(tags)
            .tag(Tag::custom(TagKind::h(), ["room"]))
            .sign_with_keys(&bot)
            .unwrap();
        for in_a_group in [group, room_comment] {
            let route = plan(
                &in_a_group,
                origin.clone(),
                bot.public_key(),
                &BotRelays::default(),
                &known,
            );
            assert_eq!(
                route,
                Route {
                    primary: Primary::Origin(origin.clone()),
                    extras: Vec::new()
                },
                "{}",
                in_a_group.kind
            );
        }
    }

    /// Clients look a key's profile, relay lists and Marmot key package up
    /// on directory relays (indexers); someone else's profile never goes
    /// there.
    #[test]
    fn the_bots_own_profile_and_lists_also_go_to_the_directory_relays() {
        let (bot, someone) = (Keys::generate(), Keys::generate());
        let bot_relays = BotRelays {
            dm: Vec::new(),
            directory: vec![url("index1"), url("index2")],
        };
        let marmot = [
            Kind::MlsKeyPackage,
            Kind::Custom(30443),
            Kind::MlsKeyPackageRelays,
        ];
        for kind in [Kind::Metadata, Kind::RelayList, Kind::InboxRelays]
            .into_iter()
            .chain(marmot)
        {
            let own = EventBuilder::new(kind, "").sign_with_keys(&bot).unwrap();
            let route = plan(&own, None, bot.public_key(), &bot_relays, &[]);
            assert_eq!(route.primary, Primary::Origin(None), "{kind}");
            assert_eq!(route.extras, bot_relays.directory, "{kind}");
            let theirs = EventBuilder::new(kind, "").sign_with_keys(&someone).unwrap();
            assert!(
                plan(&theirs, None, bot.public_key(), &bot_relays, &[])
                    .extras
                    .is_empty()
            );
        }
    }

    #[test]
    fn the_readers_looked_up_are_each_tagged_person_once_but_the_bot_within_the_bound() {
        let bot = Keys::generate();
        let alice = Keys::generate().public_key();
        let many = (0..20).map(|_| Tag::public_key(Keys::generate().public_key()));
        let note = EventBuilder::text_note("answer")
            .tags([
                Tag::public_key(alice),
                Tag::public_key(bot.public_key()),
                Tag::public_key(alice),
            ])
            .tags(many)
            .sign_with_keys(&bot)
            .unwrap();
        let looked_up = readers(&note, bot.public_key());
        assert_eq!(looked_up.len(), MAX_EXTRA_RELAYS);
        assert_eq!(looked_up[0], alice);
        assert_eq!(looked_up.iter().filter(|person| **person == alice).count(), 1);
        assert!(!looked_up.contains(&bot.public_key()));
        let reaction = EventBuilder::new(Kind::Reaction, "+")
            .tag(Tag::public_key(alice))
            .sign_with_keys(&bot)
            .unwrap();
        assert!(readers(&reaction, bot.public_key()).is_empty());
    }
}
