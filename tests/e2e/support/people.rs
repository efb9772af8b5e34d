//! People with keys of their own who mention the bot and read its answers.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::time::Duration;

use nostr_sdk::prelude::*;

use super::{PATIENCE, eventually};

/// Someone with a key, connected to the relay.
#[derive(Debug)]
pub struct Person {
    pub keys: Keys,
    pub client: Client,
}

impl Person {
    pub async fn join(relay_url: &str) -> Self {
        Self::join_as(Keys::generate(), relay_url).await
    }

    pub async fn join_as(keys: Keys, relay_url: &str) -> Self {
        let client = Client::builder().signer(keys.clone()).build();
        client.add_relay(relay_url).await.expect("add relay");
        client.connect().await;
        client.wait_for_connection(Duration::from_secs(5)).await;
        Person { keys, client }
    }

    pub fn public_key(&self) -> PublicKey {
        self.keys.public_key()
    }

    /// Publishes a signed event built from `builder`.
    pub async fn publish(&self, builder: EventBuilder) -> Event {
        let event = builder.sign_with_keys(&self.keys).expect("sign");
        self.send(&event).await;
        event
    }

    /// Publishes a signed event built from `builder` to `relay_url` only
    /// (one of this person's relays); returns once it accepted it.
    pub async fn publish_to(&self, relay_url: &str, builder: EventBuilder) -> Event {
        let event = builder.sign_with_keys(&self.keys).expect("sign");
        let output = self
            .client
            .send_event_to([relay_url], &event)
            .await
            .expect("send");
        assert!(
            output.failed.is_empty(),
            "relay refused the event: {:?}",
            output.failed
        );
        event
    }

    /// Sends `event`; returns once a relay has accepted it.
    pub async fn send(&self, event: &Event) {
        let output = self.client.send_event(event).await.expect("send");
        assert!(
            !output.success.is_empty(),
            "relay refused the event: {:?}",
            output.failed
        );
    }

    /// A top-level group-chat (kind 9) mention of `bot` in `channel`.
    pub async fn mention_in_group(&self, bot: &PublicKey, channel: &str, text: &str) -> Event {
        self.publish(group_message(bot, channel, text, &[])).await
    }

    /// A kind-9 reply in `channel` to `parent` (thread `root`), p-tagging `bot`.
    pub async fn reply_in_group(
        &self,
        bot: &PublicKey,
        channel: &str,
        root: &EventId,
        parent: &EventId,
        text: &str,
    ) -> Event {
        let thread = [
            Tag::parse(["e", &root.to_hex(), "", "root"]).expect("tag"),
            Tag::parse(["e", &parent.to_hex(), "", "reply"]).expect("tag"),
        ];
        self.publish(group_message(bot, channel, text, &thread)).await
    }

    /// A kind-1 note mentioning `bot`.
    pub async fn mention_in_note(&self, bot: &PublicKey, text: &str) -> Event {
        self.publish(EventBuilder::text_note(text).tag(Tag::public_key(*bot)))
            .await
    }

    /// A NIP-17 DM to `bot`; returns the gift wrap (the event the relay
    /// carries, and the daemon logs).
    pub async fn dm(&self, bot: &PublicKey, text: &str) -> Event {
        let wrap = EventBuilder::private_msg(&self.keys, *bot, text, [])
            .await
            .expect("gift wrap");
        self.send(&wrap).await;
        wrap
    }

    /// A NIP-17 DM to `bot` replying to `message` (a rumor's id, as NIP-17
    /// tags it); returns the gift wrap.
    pub async fn dm_replying(&self, bot: &PublicKey, message: &EventId, text: &str) -> Event {
        let reply = Tag::parse(["e", &message.to_hex(), "", "reply"]).expect("tag");
        let wrap = EventBuilder::private_msg(&self.keys, *bot, text, [reply])
            .await
            .expect("gift wrap");
        self.send(&wrap).await;
        wrap
    }

    /// A NIP-17 DM to `bot` whose gift wrap is dated `wrapped_at` (NIP-59
    /// dates wraps up to two days back at random; here the test picks);
    /// returns the wrap once the relay has it.
    pub async fn dm_wrapped_at(&self, bot: &PublicKey, text: &str, wrapped_at: Timestamp) -> Event {
        let rumor = EventBuilder::private_msg_rumor(*bot, text).build(self.public_key());
        let seal = EventBuilder::seal(&self.keys, bot, rumor)
            .await
            .expect("seal")
            .sign(&self.keys)
            .await
            .expect("sign the seal");
        let ephemeral = Keys::generate();
        let content = nip44::encrypt(
            ephemeral.secret_key(),
            bot,
            seal.as_json(),
            nip44::Version::default(),
        )
        .expect("encrypt the seal");
        let wrap = EventBuilder::new(Kind::GiftWrap, content)
            .tag(Tag::public_key(*bot))
            .custom_created_at(wrapped_at)
            .sign_with_keys(&ephemeral)
            .expect("sign the wrap");
        self.send(&wrap).await;
        wrap
    }

    /// Waits for a DM from `from` to this person containing `needle`.
    pub async fn dm_containing(&self, from: &PublicKey, needle: &str) -> UnsignedEvent {
        let probe = async || {
            let messages = self.direct_messages_from(from, 0).await;
            messages
                .into_iter()
                .find(|message| message.content.contains(needle))
        };
        eventually(PATIENCE, probe, || {
            format!("a DM from {from} containing `{needle}`")
        })
        .await
    }

    /// Events by `author` that reference `event_id` in an `e` tag, waiting
    /// until `count` have arrived.
    pub async fn replies_from(&self, author: &PublicKey, event_id: &EventId, count: usize) -> Vec<Event> {
        let found = Cell::new(0);
        let probe = async || {
            let events = self.events_referencing(author, event_id).await;
            found.set(events.len());
            (events.len() >= count).then_some(events)
        };
        let describe = || {
            format!(
                "{count} event(s) from {author} referencing {event_id}; found {}",
                found.get()
            )
        };
        eventually(PATIENCE, probe, describe).await
    }

    /// Waits for an event by `author` referencing `event_id` whose content
    /// contains `needle`.
    pub async fn reply_containing(&self, author: &PublicKey, event_id: &EventId, needle: &str) -> Event {
        let probe = async || {
            let events = self.events_referencing(author, event_id).await;
            events.into_iter().find(|event| event.content.contains(needle))
        };
        let describe = || format!("an event from {author} referencing {event_id} containing `{needle}`");
        eventually(PATIENCE, probe, describe).await
    }

    /// Events by `author` referencing `event_id` (reactions aside), as
    /// stored on the relay now.
    pub async fn events_referencing(&self, author: &PublicKey, event_id: &EventId) -> Vec<Event> {
        let filter = Filter::new().author(*author).event(*event_id);
        let mut events: Vec<Event> = self
            .client
            .fetch_events(filter, Duration::from_secs(5))
            .await
            .expect("fetch")
            .into_iter()
            .filter(|event| event.kind != Kind::Reaction)
            .collect();
        events.sort_by_key(|event| event.created_at);
        events
    }

    /// Events by `author` that quote (`q`) or reference (`e`) `event_id`:
    /// everything that answers it, also as part of a merged turn.
    pub async fn answers_from(&self, author: &PublicKey, event_id: &EventId) -> Vec<Event> {
        let quoted = Filter::new()
            .author(*author)
            .custom_tag(SingleLetterTag::lowercase(Alphabet::Q), event_id.to_hex());
        let mut events: Vec<Event> = self
            .client
            .fetch_events(quoted, Duration::from_secs(5))
            .await
            .expect("fetch")
            .into_iter()
            .collect();
        events.extend(self.events_referencing(author, event_id).await);
        events.sort_by_key(|event| event.id);
        events.dedup_by_key(|event| event.id);
        events
    }

    /// The newest event of `kind` by `author` (a replaceable one: a
    /// profile, a relay list) that the relay holds now.
    pub async fn newest(&self, author: &PublicKey, kind: Kind) -> Option<Event> {
        let filter = Filter::new().author(*author).kind(kind);
        let events = self
            .client
            .fetch_events(filter, Duration::from_secs(5))
            .await
            .expect("fetch");
        events.into_iter().max_by_key(|event| event.created_at)
    }

    /// Waits until the newest event of `kind` by `author` passes `check`,
    /// and returns it.
    pub async fn newest_where(
        &self,
        author: &PublicKey,
        kind: Kind,
        check: impl Fn(&Event) -> bool,
    ) -> Event {
        let seen = std::cell::RefCell::new(None);
        let probe = async || {
            let newest = self.newest(author, kind).await;
            let found = newest.clone().filter(|event| check(event));
            *seen.borrow_mut() = newest;
            found
        };
        let describe = || {
            format!(
                "a kind {kind} event by {author} as expected; newest: {:?}",
                seen.borrow()
            )
        };
        eventually(PATIENCE, probe, describe).await
    }

    /// NIP-17 messages to this person from `sender`, unwrapped, waiting
    /// until `count` have arrived.
    pub async fn direct_messages_from(&self, sender: &PublicKey, count: usize) -> Vec<UnsignedEvent> {
        let found = Cell::new(0);
        let probe = async || {
            let filter = Filter::new().kind(Kind::GiftWrap).pubkey(self.public_key());
            let wraps = self
                .client
                .fetch_events(filter, Duration::from_secs(5))
                .await
                .expect("fetch");
            let mut messages = Vec::new();
            for wrap in wraps.iter() {
                if let Ok(gift) = UnwrappedGift::from_gift_wrap(&self.keys, wrap).await
                    && gift.sender == *sender
                {
                    messages.push(gift.rumor);
                }
            }
            found.set(messages.len());
            (messages.len() >= count).then_some(messages)
        };
        let describe = || format!("{count} DM(s) from {sender}; found {}", found.get());
        eventually(PATIENCE, probe, describe).await
    }
}

/// Publishes a profile for `keys` carrying `owner`'s attestation: a sibling
/// by its profile.
pub async fn attest_profile(relay_url: &str, owner: &Keys, keys: &Keys) {
    let bot = Person::join_as(keys.clone(), relay_url).await;
    let attestation = acp_bridge::Attestation::sign(owner, &keys.public_key(), "").expect("sign");
    bot.publish(EventBuilder::metadata(&Metadata::new().name("bot")).tag(attestation.to_tag()))
        .await;
}

/// A kind-9 message in `channel` mentioning `bot`, with extra tags.
pub fn group_message(bot: &PublicKey, channel: &str, text: &str, extra: &[Tag]) -> EventBuilder {
    EventBuilder::new(Kind::Custom(9), text)
        .tag(Tag::custom(TagKind::h(), [channel.to_owned()]))
        .tag(Tag::public_key(*bot))
        .tags(extra.iter().cloned())
}

/// The group channel (`h` tag) of `event`.
pub fn channel_of(event: &Event) -> Option<&str> {
    event
        .tags
        .iter()
        .find(|tag| tag.kind() == TagKind::h())
        .and_then(|tag| tag.content())
}

/// The `e` tags of `event` as (id, marker).
pub fn e_tags(event: &Event) -> BTreeSet<(String, String)> {
    event
        .tags
        .iter()
        .filter(|tag| tag.kind() == TagKind::e())
        .map(|tag| {
            let fields = tag.as_slice();
            (
                fields.get(1).cloned().unwrap_or_default(),
                fields.get(3).cloned().unwrap_or_default(),
            )
        })
        .collect()
}

/// Whether `event` p-tags `key`.
pub fn p_tags(event: &Event, key: &PublicKey) -> bool {
    event
        .tags
        .iter()
        .any(|tag| tag.kind() == TagKind::p() && tag.content() == Some(key.to_hex().as_str()))
}
