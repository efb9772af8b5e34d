//! What goes out: answers, notices and reactions, threaded where the
//! mention was.
//!
//! Owns building and signing outgoing events and handing them to the outbox.
//! Every answer and notice is signed once and stored in the same transaction
//! that marks the mentions it answers (see `store`); only then is it
//! published, by [`publisher`], to the relay the mention came from. A crash
//! can therefore neither lose an answer nor post it twice. Reactions are
//! courtesy, not state: they are signed and handed to the publisher's
//! in-memory queue without waiting, and a lost one is not retried.
//!
//! Threading (NIP-10 markers, read the same by common clients and by buzz):
//! a reply to a top-level mention carries the mention as both `root` and
//! `reply`; a reply inside a thread carries the thread root and the mention.
//! A turn that answered several mentions (a batch, a steer) threads under
//! the newest and cites the others with NIP-18 `q` tags.
//! Group chat (kind 9) keeps the channel's `h` tag; DMs are NIP-17 gift wraps.

pub mod publisher;

use std::collections::BTreeSet;
use std::sync::Arc;

use nostr_sdk::prelude::{
    Event, EventBuilder, EventId, JsonUtil, Keys, Kind, PublicKey, RelayUrl, Tag, TagKind, TagStandard,
};

use crate::config::ReplyMode;
use crate::ledger::Ledger;
use crate::loop_guard::ReplyRecorder;
use crate::mention::{Mention, Thread};
use crate::store::{Finish, OutgoingEvent, Store, StoreError};
use publisher::Outlet;

/// The reaction that tells a person "heard you, working on it".
pub const ACCEPTED_REACTION: &str = "👀";

#[derive(Debug, thiserror::Error)]
pub enum ReplyError {
    #[error("could not sign the reply: {0}")]
    Sign(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Signs outgoing events and puts them in the outbox.
#[derive(Debug, Clone)]
pub struct Replier {
    keys: Keys,
    ledger: Ledger,
    reply_mode: ReplyMode,
    reactions: bool,
    chains: ReplyRecorder,
    outlet: Outlet,
}

impl Replier {
    pub fn new(
        keys: Keys,
        store: Arc<Store>,
        reply_mode: ReplyMode,
        reactions: bool,
        chains: ReplyRecorder,
    ) -> Self {
        Replier {
            keys,
            ledger: Ledger::new(store),
            reply_mode,
            reactions,
            chains,
            outlet: Outlet::default(),
        }
    }

    /// What the publisher reads: the outbox wake-up and the reactions.
    pub fn outlet(&self) -> Outlet {
        self.outlet.clone()
    }

    /// Marks a mention as heard (NIP-25), on the relay it came from. Not
    /// for DMs: a public reaction would reveal a private conversation.
    /// Returns at once: the publisher sends it.
    pub fn react(&self, mention: &Mention) {
        if !self.reactions || mention.thread.is_direct() {
            return;
        }
        let mut tags = vec![
            Tag::event(mention.event_id),
            Tag::public_key(mention.author),
            Tag::custom(TagKind::k(), [mention.kind.as_u16().to_string()]),
        ];
        if let Thread::Group { channel, .. } = &mention.thread {
            tags.push(group_tag(channel));
        }
        let event = match EventBuilder::new(Kind::Reaction, ACCEPTED_REACTION)
            .tags(tags)
            .sign_with_keys(&self.keys)
        {
            Ok(event) => event,
            Err(error) => return tracing::warn!(%error, "could not sign a reaction"),
        };
        self.outlet.react(event, mention.origin.clone());
    }

    /// Publishes the agent's answer to `mentions` (one turn's batch; the
    /// reply threads under the newest) and marks them all answered. With
    /// `--reply-mode agent` the agent posted for itself: nothing is
    /// published and the mentions are only marked answered.
    pub async fn answer(&self, mentions: &[Mention], text: &str) -> Result<Option<EventId>, ReplyError> {
        if self.reply_mode == ReplyMode::Agent {
            self.ledger.settle_without_event(mentions, Finish::Answered)?;
            return Ok(None);
        }
        self.store_and_publish(mentions, text, Finish::Answered)
            .await
            .map(Some)
    }

    /// Tells the people behind `mentions` why they get no answer, and marks
    /// the mentions finished.
    pub async fn notify(&self, mentions: &[Mention], text: &str) -> Result<EventId, ReplyError> {
        self.store_and_publish(mentions, text, Finish::Notified).await
    }

    /// Says something in the thread of `mention` without finishing it (for
    /// example that a steer waits behind a permission question).
    pub async fn inform(&self, mention: &Mention, text: &str) -> Result<EventId, ReplyError> {
        let event = self.build(std::slice::from_ref(mention), text, None).await?;
        self.put_in_outbox(&event, mention.origin.as_ref(), &[], Finish::Notified)?;
        Ok(event.id)
    }

    /// Asks `owner` something in the thread of `mention` (mentioning them),
    /// without finishing the mention. Returns the question's event id, which
    /// the owner's answer replies to.
    pub async fn ask(&self, mention: &Mention, owner: PublicKey, text: &str) -> Result<EventId, ReplyError> {
        let event = self
            .build(std::slice::from_ref(mention), text, Some(owner))
            .await?;
        self.put_in_outbox(&event, mention.origin.as_ref(), &[], Finish::Notified)?;
        Ok(event.id)
    }

    async fn store_and_publish(
        &self,
        mentions: &[Mention],
        text: &str,
        finish: Finish,
    ) -> Result<EventId, ReplyError> {
        let event = self.build(mentions, text, None).await?;
        let origin = mentions.last().and_then(|newest| newest.origin.as_ref());
        self.put_in_outbox(&event, origin, mentions, finish)?;
        if let Some(newest) = mentions.last() {
            self.chains.record_reply(event.id, newest.chain_depth);
        }
        Ok(event.id)
    }

    /// Stores the signed event for the relay `to` (where the mention came
    /// from; `None`: every relay) and finishes `answered` in one
    /// transaction, then wakes the publisher.
    fn put_in_outbox(
        &self,
        event: &Event,
        to: Option<&RelayUrl>,
        answered: &[Mention],
        finish: Finish,
    ) -> Result<(), StoreError> {
        let outgoing = OutgoingEvent {
            event_id: &event.id.to_hex(),
            relay_hint: to.map(RelayUrl::as_str),
            json: &event.as_json(),
        };
        self.ledger.record_outgoing(&outgoing, answered, finish)?;
        self.outlet.stored();
        Ok(())
    }

    /// Signs the event answering `mentions` in the thread of the newest one.
    /// `also_notify` is p-tagged beside the authors (the owner, for questions).
    async fn build(
        &self,
        mentions: &[Mention],
        text: &str,
        also_notify: Option<PublicKey>,
    ) -> Result<Event, ReplyError> {
        let newest = mentions
            .last()
            .ok_or_else(|| ReplyError::Sign("no mention to answer".into()))?;
        let authors: BTreeSet<PublicKey> = mentions
            .iter()
            .map(|mention| mention.author)
            .chain(also_notify)
            .collect();
        let sign_error =
            |error: nostr_sdk::prelude::event::builder::Error| ReplyError::Sign(error.to_string());
        match &newest.thread {
            Thread::Group {
                channel,
                root,
                mention,
            } => {
                let mut tags = vec![group_tag(channel)];
                tags.extend(thread_tags(*root, *mention, &authors));
                tags.extend(quote_tags(mentions, *mention));
                EventBuilder::new(Kind::Custom(9), text)
                    .tags(tags)
                    .sign_with_keys(&self.keys)
                    .map_err(sign_error)
            }
            Thread::Note { root, mention } => EventBuilder::new(Kind::TextNote, text)
                .tags(thread_tags(*root, *mention, &authors))
                .tags(quote_tags(mentions, *mention))
                .sign_with_keys(&self.keys)
                .map_err(sign_error),
            Thread::Direct { peer, message } => {
                EventBuilder::private_msg(&self.keys, *peer, text, [reply_marker(*message)])
                    .await
                    .map_err(sign_error)
            }
        }
    }
}

/// NIP-18 `q` tags citing the batch's other mentions: one reply answers
/// them all, threaded under the newest.
fn quote_tags(mentions: &[Mention], threaded_under: EventId) -> Vec<Tag> {
    mentions
        .iter()
        .filter(|mention| mention.thread.answered_event() != threaded_under)
        .map(|mention| Tag::custom(TagKind::q(), [mention.thread.answered_event().to_hex()]))
        .collect()
}

fn group_tag(channel: &str) -> Tag {
    Tag::custom(TagKind::h(), [channel.to_owned()])
}

fn reply_marker(event_id: EventId) -> Tag {
    Tag::from_standardized_without_cell(TagStandard::Event {
        event_id,
        relay_url: None,
        marker: Some(nostr_sdk::prelude::Marker::Reply),
        public_key: None,
        uppercase: false,
    })
}

/// NIP-10 `root` and `reply` markers plus a `p` tag per author answered.
fn thread_tags(root: EventId, mention: EventId, authors: &BTreeSet<PublicKey>) -> Vec<Tag> {
    let mut tags = vec![
        Tag::from_standardized_without_cell(TagStandard::Event {
            event_id: root,
            relay_url: None,
            marker: Some(nostr_sdk::prelude::Marker::Root),
            public_key: None,
            uppercase: false,
        }),
        reply_marker(mention),
    ];
    tags.extend(authors.iter().map(|author| Tag::public_key(*author)));
    tags
}
