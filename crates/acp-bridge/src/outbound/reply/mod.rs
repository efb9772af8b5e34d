//! What goes out: answers, notices and reactions, threaded where the
//! mention was.
//!
//! Owns building and signing outgoing events and handing them to the outbox.
//! Every answer and notice is signed once and stored in the same transaction
//! that marks the mentions it answers (see `store`); only then is it
//! published, by [`publisher`], where its reader looks (see `routes`). A crash
//! can therefore neither lose an answer nor post it twice. Reactions are
//! courtesy, not state: they are signed and handed to the publisher's
//! in-memory queue without waiting, and a lost one is not retried.
//!
//! Threading (NIP-10 markers, read the same by common clients and by buzz):
//! a reply to a top-level mention carries the mention as both `root` and
//! `reply`; a reply inside a thread carries the thread root and the mention.
//! A turn that answered several mentions (a batch, a steer) threads under
//! the newest and cites the others with NIP-18 `q` tags.
//! Group chat (kind 9) keeps the channel's `h` tag, and every event in a
//! group names the group's recent events in NIP-29 `previous` tags (see
//! `groups`' timeline); DMs are NIP-17 gift wraps, each with its copy
//! wrapped to the bot itself (NIP-17: the sender's other clients read its
//! side of the conversation there). A comment or a kind 11 thread (NIP-22)
//! is answered with a comment (kind 1111) carrying the mention's root scope
//! (`E`/`A`/`I`, `K`, `P`) and the mention as its parent (`e`, `k`, `p`);
//! one posted in a group room carries the room's tags as a group message does.
//! Where each event is published is `routes`' decision.
//! An answer too long for one event goes out as a numbered series (see
//! [`series`]): the first part threads as above, each next one replies to
//! the part before it.

mod activity;
pub(crate) mod args;
mod encrypted;
mod interim;
mod own_copies;
mod progress;
pub(crate) mod publisher;
mod question_mark;
mod series;

use std::collections::BTreeSet;
use std::sync::Arc;

use acp_bridge_core::comment;
use acp_bridge_core::mention::{Intent, Mention, Thread};
use clap::ValueEnum;
use nostr_sdk::prelude::{
    Event, EventBuilder, EventId, JsonUtil, Kind, PublicKey, RelayUrl, Tag, TagKind, TagStandard,
    UnsignedEvent,
};

use crate::edge::signer::BotSigner;
use crate::outbound::groups::GroupDirectory;
use crate::policy::loop_guard::ReplyRecorder;
use crate::policy::shard::Shard;
use crate::state::ledger::Ledger;
use crate::state::mls::MlsState;
use crate::state::store::{Finish, OutgoingEvent, Store, StoreError};
use crate::telemetry::metrics;
pub(crate) use interim::is_interim;
use interim::{Marks, Standing};
pub(crate) use own_copies::OwnCopy;
use publisher::Outlet;
use tokio::sync::watch;

pub(crate) use activity::{Activity, ActivityState, PlanItem, ToolNow};
pub(crate) use args::{ProgressSettings, ReplySettings};

/// Who publishes the agent's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReplyMode {
    /// The daemon publishes the collected answer as a threaded reply.
    Daemon,
    /// The agent posts through its own tools; the daemon publishes only notices.
    Agent,
}

/// What of the agent's text a reply carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReplyContent {
    /// The agent's answer: its messages that no tool call or plan followed
    /// (narration of its work between tool calls is left out).
    Answer,
    /// Everything the agent wrote during the turn, narration included.
    Full,
}

/// The NIP-25 reactions that follow a mention's life, so a person sees
/// where it stands without reading the thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// Accepted: "heard you, working on it".
    Heard,
    /// Its answer is stored and on its way.
    Answered,
    /// Given up on, with a notice saying why.
    GaveUp,
    /// Its turn was cancelled by the owner (`!cancel`), with a notice.
    Cancelled,
}

impl Reaction {
    pub fn emoji(self) -> &'static str {
        match self {
            Reaction::Heard => "👀",
            Reaction::Answered => "✅",
            Reaction::GaveUp => "⚠️",
            Reaction::Cancelled => "🚫",
        }
    }
}

/// What goes out instead of an answer that cannot be signed.
const UNBUILDABLE_ANSWER_NOTICE: &str =
    "The agent answered, but its answer could not be published (see the bridge's log).";

#[derive(Debug, thiserror::Error)]
pub enum ReplyError {
    #[error("could not sign the reply: {0}")]
    Sign(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no randomness from the OS for the question's tag: {0}")]
    Random(String),
}

/// Signs outgoing events and puts them in the outbox.
#[derive(Debug, Clone)]
pub struct Replier {
    signer: BotSigner,
    ledger: Ledger,
    reply_mode: ReplyMode,
    reactions: bool,
    chains: ReplyRecorder,
    outlet: Outlet,
    threads: Arc<watch::Sender<()>>,
    /// `--shard`: questions asked in a DM say which replica asked them.
    shard: Shard,
    /// The groups' recent events, which the bot's group events name.
    groups: GroupDirectory,
    /// The Marmot groups' MLS state (`--marmot`), which encrypts what is
    /// said in an encrypted group.
    mls: Option<MlsState>,
    /// The DM copies wrapped to the bot itself, which the intake need not
    /// unwrap.
    own_copies: own_copies::OwnCopies,
}

impl Replier {
    pub fn new(
        signer: BotSigner,
        store: Arc<Store>,
        reply_mode: ReplyMode,
        reactions: bool,
        chains: ReplyRecorder,
    ) -> Self {
        Replier {
            signer,
            ledger: Ledger::new(store),
            reply_mode,
            reactions,
            chains,
            outlet: Outlet::default(),
            threads: Arc::new(watch::Sender::new(())),
            shard: Shard::WHOLE,
            groups: GroupDirectory::default(),
            mls: None,
            own_copies: own_copies::OwnCopies::default(),
        }
    }

    /// Names in each group event the recent events `groups` heard in that
    /// group (NIP-29 `previous`); without it, none.
    pub fn with_groups(mut self, groups: GroupDirectory) -> Self {
        self.groups = groups;
        self
    }

    /// Speaks in Marmot encrypted groups through `mls`.
    pub(crate) fn with_marmot(mut self, mls: MlsState) -> Self {
        self.mls = Some(mls);
        self
    }

    /// Asks as replica `shard` of the bot (see [`Replier::ask`]).
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.shard = shard;
        self
    }

    /// Changes each time the bot answers in a thread new to it: the relay
    /// links follow those threads (`--follow-threads`).
    pub fn threads_answered(&self) -> watch::Receiver<()> {
        self.threads.subscribe()
    }

    /// The copy of its own DM that this process wrapped as `wrapper`, if it
    /// did: what the intake would unwrap it for (see `own_copies`).
    pub(crate) fn own_copy(&self, wrapper: &EventId) -> Option<OwnCopy> {
        self.own_copies.get(wrapper)
    }

    /// What the publisher reads: the outbox wake-up and the reactions.
    pub fn outlet(&self) -> Outlet {
        self.outlet.clone()
    }

    /// Marks a mention as heard (NIP-25), on the relay it came from. Not
    /// for DMs: a public reaction would reveal a private conversation.
    /// Returns at once: a task signs it and the publisher sends it.
    pub fn react(&self, mention: &Mention, reaction: Reaction) {
        self.react_with(mention, reaction.emoji());
    }

    /// Reacts to `mention` with `emoji` (also the agent's `react` tool),
    /// like [`Replier::react`]: returns at once, and `false` without
    /// reacting with `--no-reactions` or in a DM.
    pub(crate) fn react_with(&self, mention: &Mention, emoji: &str) -> bool {
        // A delegated task's result is the heart's own mention, under an
        // id no event has: nothing to react to.
        let made_by_the_heart = matches!(mention.intent, Intent::TaskResult { .. });
        if !self.reactions || mention.thread.is_private() || made_by_the_heart {
            return false;
        }
        let mut tags = vec![
            Tag::event(mention.event_id),
            Tag::public_key(mention.author),
            Tag::custom(TagKind::k(), [mention.kind.as_u16().to_string()]),
        ];
        if let Thread::Group { channel, .. }
        | Thread::Comment {
            channel: Some(channel),
            ..
        } = &mention.thread
        {
            tags.extend(self.groups.group_tags(mention.origin.as_ref(), channel));
        }
        let (signer, outlet, origin) = (self.signer.clone(), self.outlet.clone(), mention.origin.clone());
        let emoji = emoji.to_owned();
        tokio::spawn(async move {
            match EventBuilder::new(Kind::Reaction, emoji)
                .tags(tags)
                .sign(&signer)
                .await
            {
                Ok(event) => outlet.react(event, origin),
                Err(error) => tracing::warn!(%error, "could not sign a reaction"),
            }
        });
        true
    }

    /// Publishes the agent's answer to `mentions` (one turn's batch; the
    /// reply threads under the newest) and marks them all answered. With
    /// `--reply-mode agent` the agent posted for itself: nothing is
    /// published and the mentions are only marked answered.
    pub async fn answer(&self, mentions: &[Mention], text: &str) -> Result<Option<EventId>, ReplyError> {
        self.answer_titled(mentions, text, None).await
    }

    /// [`answer`](Self::answer), carrying the session's `title` as a
    /// NIP-14 `subject` when the answer opens the bot's part of a new note
    /// thread (the mention is a root kind-1 note): clients show it as the
    /// thread's subject. Elsewhere (a group, a DM, a reply deeper in a
    /// thread), or when the title says nothing of the conversation
    /// (`prompt::title_line`), it is left out.
    pub async fn answer_titled(
        &self,
        mentions: &[Mention],
        text: &str,
        title: Option<&str>,
    ) -> Result<Option<EventId>, ReplyError> {
        let subject: Vec<Tag> = title
            .filter(|_| mentions.last().is_some_and(opens_a_note_thread))
            .and_then(acp_bridge_core::prompt::title_line)
            .map(|title| Tag::custom(TagKind::Subject, [title]))
            .into_iter()
            .collect();
        let reply = if self.reply_mode == ReplyMode::Agent {
            self.ledger.settle_without_event(mentions, Finish::Answered)?;
            let newest = mentions.last();
            self.follow_thread(newest.is_some_and(|newest| self.ledger.thread_answered(newest)));
            None
        } else {
            Some(
                self.store_and_publish(mentions, text, (Finish::Answered, &subject))
                    .await?,
            )
        };
        for mention in mentions {
            self.react(mention, Reaction::Answered);
        }
        Ok(reply)
    }

    /// Tells the relay links to follow one more thread when answering in it
    /// was new (`--follow-threads`).
    fn follow_thread(&self, new: bool) {
        if new {
            self.threads.send_replace(());
        }
    }

    /// Tells the people behind `mentions` why they get no answer, and marks
    /// the mentions finished.
    pub async fn notify(&self, mentions: &[Mention], text: &str) -> Result<EventId, ReplyError> {
        self.store_and_publish(mentions, text, (Finish::Notified, &[]))
            .await
    }

    /// Says something in the thread of `mention` without finishing it (for
    /// example that a steer waits behind a permission question): a
    /// numbered series when it is too long for one event, like an answer
    /// (a notice may quote what the agent or the owner wrote). Returns the
    /// id of the first part.
    pub async fn inform(&self, mention: &Mention, text: &str) -> Result<EventId, ReplyError> {
        let parts = self.store_interim(mention, text).await?;
        Ok(parts[0].event.id)
    }

    /// Posts `text` where the answer to `mention` is to go, as a message
    /// of its own, and returns the id clients see it by: a new message of
    /// the group, a reply to the root of the note thread, a DM to the peer.
    /// A scheduled run's prompt (see `schedule`), which its answer then
    /// threads under, so readers see what was asked and can reply to it.
    pub async fn announce(&self, mention: &Mention, text: &str) -> Result<EventId, ReplyError> {
        let builder = match &mention.thread {
            Thread::Group { channel, .. } => EventBuilder::new(Kind::Custom(9), text)
                .tags(self.groups.group_tags(mention.origin.as_ref(), channel)),
            Thread::Note { root, .. } => EventBuilder::new(Kind::TextNote, text).tags([root_marker(*root)]),
            // A top-level comment of the scope: NIP-22 makes its parent the root.
            Thread::Comment { scope, channel, .. } => EventBuilder::new(Kind::Comment, text)
                .tags(scope.root_tags())
                .tags(scope.root_as_parent_tags())
                .tags(self.groups.room_tags(mention.origin.as_ref(), channel.as_deref())),
            Thread::Direct { peer, .. } => {
                let signed = self
                    .direct_message(*peer, text, None, Standing::Finishes.into())
                    .await?;
                for event in signed.events() {
                    self.put_in_outbox(event, mention.origin.as_ref(), &[], Finish::Notified)?;
                }
                return Ok(signed.seen_as);
            }
            Thread::Marmot { group, .. } => {
                let signed = self
                    .group_message(group, text, None, Standing::Finishes.into())
                    .await?;
                self.put_in_outbox(&signed.event, mention.origin.as_ref(), &[], Finish::Notified)?;
                return Ok(signed.seen_as);
            }
        };
        let event = builder
            .sign(&self.signer)
            .await
            .map_err(|error| ReplyError::Sign(error.to_string()))?;
        self.put_in_outbox(&event, mention.origin.as_ref(), &[], Finish::Notified)?;
        Ok(event.id)
    }

    /// Posts what the agent says mid-turn (its `post_message` tool) in the
    /// thread of `mention`, which it does not finish: like [`inform`]
    /// (`Self::inform`), labelled interim and cut into a series when long,
    /// and, like an answer, counted as the bot's reply in the mention's
    /// chain, so a bot answering it is bounded by the hop bounds.
    pub async fn post_interim(&self, mention: &Mention, text: &str) -> Result<EventId, ReplyError> {
        self.post_interim_tagged(mention, text, &[]).await
    }

    /// [`post_interim`](Self::post_interim) with `extra` tags on every
    /// part (`send_file`'s NIP-92 `imeta`).
    pub async fn post_interim_tagged(
        &self,
        mention: &Mention,
        text: &str,
        extra: &[Tag],
    ) -> Result<EventId, ReplyError> {
        let parts = self.store_interim_tagged(mention, text, extra).await?;
        for part in &parts {
            self.chains.record_reply(part.seen_as, mention.chain_depth);
        }
        Ok(parts[0].event.id)
    }

    /// Signs `text` as an interim series in the thread of `mention` and
    /// stores it in the outbox.
    async fn store_interim(&self, mention: &Mention, text: &str) -> Result<Vec<Signed>, ReplyError> {
        self.store_interim_tagged(mention, text, &[]).await
    }

    /// [`store_interim`](Self::store_interim) with `extra` tags.
    async fn store_interim_tagged(
        &self,
        mention: &Mention,
        text: &str,
        extra: &[Tag],
    ) -> Result<Vec<Signed>, ReplyError> {
        let marks = Marks {
            standing: Standing::Interim,
            extra,
        };
        let parts = self
            .build_series(std::slice::from_ref(mention), text, marks)
            .await?;
        for event in parts.iter().flat_map(Signed::events) {
            self.put_in_outbox(event, mention.origin.as_ref(), &[], Finish::Notified)?;
        }
        Ok(parts)
    }

    /// Says `text` in the thread of `mention` (a group or a note thread),
    /// mentioning `whom`, without finishing the mention: a delegated
    /// task's prompt for a sibling bot (see `heart/tasks`). One event, cut
    /// to fit, counted as the bot's reply in the mention's chain, so the
    /// sibling's answer is bounded by the hop bounds. Returns its id as a
    /// reply to it references it.
    pub async fn mention_in_thread(
        &self,
        mention: &Mention,
        whom: PublicKey,
        text: &str,
    ) -> Result<EventId, ReplyError> {
        let seen_as = self.post_mentioning(mention, whom, text, &[]).await?;
        self.chains.record_reply(seen_as, mention.chain_depth);
        Ok(seen_as)
    }

    /// One interim event in the thread of `mention`, mentioning `whom`,
    /// with `extra` tags.
    async fn post_mentioning(
        &self,
        mention: &Mention,
        whom: PublicKey,
        text: &str,
        extra: &[Tag],
    ) -> Result<EventId, ReplyError> {
        let marks = Marks {
            standing: Standing::Interim,
            extra,
        };
        let signed = self
            .build(
                std::slice::from_ref(mention),
                &series::cut(text),
                Some(whom),
                marks,
            )
            .await?;
        self.put_in_outbox(&signed.event, mention.origin.as_ref(), &[], Finish::Notified)?;
        Ok(signed.seen_as)
    }

    /// Asks `owner` something in the thread of `mention` (mentioning them),
    /// without finishing the mention; about a DM with someone else, in a DM
    /// to the owner that names the conversation (the peer must not be asked,
    /// and a DM's thread never reaches the owner). A question is one event
    /// (the answer replies to it): one too long for it is cut. Returns the
    /// question's id as the owner's answer references it. Each question
    /// is an event of its own, even the same question asked again within
    /// the second (see `question_mark`).
    ///
    /// With shards, a question asked in a DM names the replica that asks
    /// it, and its copy to the bot itself (NIP-17) tells every replica whose
    /// question the owner's reply tags (see `shard`).
    pub async fn ask(&self, mention: &Mention, owner: PublicKey, text: &str) -> Result<EventId, ReplyError> {
        let to = mention.origin.as_ref();
        let mark = question_mark::question_mark()?;
        let (text, replying_to) = match mention.thread {
            Thread::Direct { peer, message } if peer == owner => (text.to_owned(), Some(message)),
            Thread::Direct { .. } => (about_private(mention, text), None),
            _ => return self.post_mentioning(mention, owner, text, &[mark]).await,
        };
        let tags = self.shard.is_sharded().then(|| self.shard.question_tag());
        let tags = tags.into_iter().chain([mark]).chain(Standing::Interim.labels());
        let rumor = self.rumor(owner, &series::cut(&text), replying_to, tags);
        let signed = self.wrap_with_copy(owner, rumor).await?;
        // The copy first: no replica hears the owner's reply before it.
        for event in signed.self_copy.iter().chain([&signed.event]) {
            self.put_in_outbox(event, to, &[], Finish::Notified)?;
        }
        Ok(signed.seen_as)
    }

    /// Tells the owner something about a question asked under `mention`,
    /// where [`Replier::ask`] asked it: in the thread, or, for a DM with
    /// someone else (who was never asked), in the owner's DM, naming the
    /// conversation.
    pub async fn about_question(
        &self,
        mention: &Mention,
        owner: Option<PublicKey>,
        text: &str,
    ) -> Result<EventId, ReplyError> {
        match (&mention.thread, owner) {
            (Thread::Direct { peer, .. }, Some(owner)) if *peer != owner => {
                let text = series::cut(&about_private(mention, text));
                let signed = self
                    .direct_message(owner, &text, None, Standing::Interim.into())
                    .await?;
                for event in signed.events() {
                    self.put_in_outbox(event, mention.origin.as_ref(), &[], Finish::Notified)?;
                }
                Ok(signed.event.id)
            }
            _ => self.inform(mention, text).await,
        }
    }

    /// Publishes `text` as the answer or notice that finishes `mentions`: a
    /// numbered series when it is too long for one event (see [`series`]),
    /// every part stored in one transaction with the mentions' finish, so a
    /// crash can leave neither half a series nor a finished mention without
    /// its parts. An answer (not a notice) also records its thread as
    /// answered in that transaction. Returns the id of the first part.
    ///
    /// An answer that cannot be built goes out as a short notice instead:
    /// building never fails a turn (a failed turn is run again, and paid
    /// again, for a reply that would fail the same way).
    async fn store_and_publish(
        &self,
        mentions: &[Mention],
        text: &str,
        (finish, extra): (Finish, &[Tag]),
    ) -> Result<EventId, ReplyError> {
        let answers_in = mentions.last().filter(|_| finish == Finish::Answered);
        let marks = Marks {
            standing: Standing::Finishes,
            extra,
        };
        let built = self.build_series(mentions, text, marks).await;
        let (parts, finish) = self.or_notice(built, mentions, finish).await?;
        let events: Vec<Event> = parts.iter().flat_map(Signed::events).cloned().collect();
        let origin = mentions.last().and_then(|newest| newest.origin.as_ref());
        let new_thread = self.ledger.record_series(
            &events,
            origin.map(RelayUrl::as_str),
            mentions,
            finish,
            answers_in,
        )?;
        self.outlet.stored();
        self.follow_thread(new_thread);
        if parts.len() > 1 {
            tracing::info!(parts = parts.len(), "the reply goes out as a series");
            metrics::reply_parts(parts.len());
        }
        // A bot may answer any part, by the id it sees (a DM's rumor): each
        // counts as our reply.
        if let Some(newest) = mentions.last() {
            for part in &parts {
                self.chains.record_reply(part.seen_as, newest.chain_depth);
            }
        }
        Ok(parts[0].event.id)
    }

    /// The events `built`, or when an answer could not be built, the short
    /// notice that goes out instead (and finishes the mentions notified).
    async fn or_notice(
        &self,
        built: Result<Vec<Signed>, ReplyError>,
        mentions: &[Mention],
        finish: Finish,
    ) -> Result<(Vec<Signed>, Finish), ReplyError> {
        match built {
            Ok(events) => Ok((events, finish)),
            Err(error) if finish == Finish::Answered => {
                tracing::error!(%error, "cannot build the answer; a notice goes instead");
                let notice = self
                    .build(
                        mentions,
                        UNBUILDABLE_ANSWER_NOTICE,
                        None,
                        Standing::Finishes.into(),
                    )
                    .await?;
                Ok((vec![notice], Finish::Notified))
            }
            Err(error) => Err(error),
        }
    }

    /// Signs `text` as the parts of a series answering `mentions`: the first
    /// threads like any reply, each next one replies to the part before it
    /// (NIP-10 `reply`, same root), so clients show them in order.
    async fn build_series(
        &self,
        mentions: &[Mention],
        text: &str,
        standing: Marks<'_>,
    ) -> Result<Vec<Signed>, ReplyError> {
        let mut parts = Vec::new();
        let mut previous = None;
        for part in series::split(text) {
            let signed = self.build_part(mentions, &part, None, previous, standing).await?;
            previous = Some(signed.seen_as);
            parts.push(signed);
        }
        Ok(parts)
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
        standing: Marks<'_>,
    ) -> Result<Signed, ReplyError> {
        self.build_part(mentions, text, also_notify, None, standing).await
    }

    /// [`build`](Self::build), or with `previous` (a part of the same
    /// series, by the id clients see) the next part: it replies to
    /// `previous` instead of the mention and cites no other mention.
    async fn build_part(
        &self,
        mentions: &[Mention],
        text: &str,
        also_notify: Option<PublicKey>,
        previous: Option<EventId>,
        standing: Marks<'_>,
    ) -> Result<Signed, ReplyError> {
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
        let quotes = |mention: EventId| match previous {
            Some(_) => Vec::new(),
            None => quote_tags(mentions, mention),
        };
        let event = match &newest.thread {
            Thread::Group {
                channel,
                root,
                mention,
            } => {
                let mut tags = self.groups.group_tags(newest.origin.as_ref(), channel);
                tags.extend(thread_tags(*root, previous.unwrap_or(*mention), &authors));
                tags.push(match previous {
                    Some(part) => chat_reply(part, None, self.signer.public_key()),
                    None => chat_reply(*mention, newest.origin.as_ref(), newest.author),
                });
                tags.extend(quotes(*mention));
                tags.extend(standing.labels());
                EventBuilder::new(Kind::Custom(9), text)
                    .tags(tags)
                    .sign(&self.signer)
                    .await
                    .map_err(sign_error)?
            }
            Thread::Note { root, mention } => EventBuilder::new(Kind::TextNote, text)
                .tags(thread_tags(*root, previous.unwrap_or(*mention), &authors))
                .tags(quotes(*mention))
                .tags(standing.labels())
                .sign(&self.signer)
                .await
                .map_err(sign_error)?,
            Thread::Comment {
                scope,
                channel,
                mention,
            } => {
                // The parent: the mention, or the part before in a series.
                let (parent, parent_kind) = match previous {
                    Some(part) => (part, Kind::Comment),
                    None => (*mention, newest.kind),
                };
                EventBuilder::new(Kind::Comment, text)
                    .tags(scope.root_tags())
                    .tags(comment::parent_tags(parent, parent_kind))
                    .tags(authors.iter().map(|author| Tag::public_key(*author)))
                    .tags(self.groups.room_tags(newest.origin.as_ref(), channel.as_deref()))
                    .tags(quotes(*mention))
                    .tags(standing.labels())
                    .sign(&self.signer)
                    .await
                    .map_err(sign_error)?
            }
            Thread::Direct { peer, message } => {
                return self
                    .direct_message(*peer, text, Some(previous.unwrap_or(*message)), standing)
                    .await;
            }
            Thread::Marmot { group, message } => {
                let replying_to = match previous {
                    Some(part) => (part, self.signer.public_key()),
                    None => (*message, newest.author),
                };
                return self.group_message(group, text, Some(replying_to), standing).await;
            }
        };
        Ok(Signed {
            seen_as: event.id,
            event,
            self_copy: None,
        })
    }

    /// A NIP-17 DM to `peer`, replying to `replying_to`, with its copy to
    /// the bot: seen as its rumor, since clients thread DMs by the rumor's
    /// id, never the gift wrap's.
    async fn direct_message(
        &self,
        peer: PublicKey,
        text: &str,
        replying_to: Option<EventId>,
        standing: Marks<'_>,
    ) -> Result<Signed, ReplyError> {
        self.wrap_with_copy(peer, self.rumor(peer, text, replying_to, standing.labels()))
            .await
    }

    /// The NIP-17 message to `peer` (unsigned: a rumor), replying to
    /// `replying_to`, with `extra` tags.
    fn rumor(
        &self,
        peer: PublicKey,
        text: &str,
        replying_to: Option<EventId>,
        extra: impl IntoIterator<Item = Tag>,
    ) -> UnsignedEvent {
        let mut rumor = EventBuilder::private_msg_rumor(peer, text)
            .tags(replying_to.map(reply_marker))
            .tags(extra)
            .build(self.signer.public_key());
        rumor.ensure_id();
        rumor
    }

    /// `rumor` sealed and gift-wrapped to `receiver`, and to the bot itself
    /// (the copy NIP-17 asks senders to keep). The bot's intake drops its
    /// copies as its own events (see `intake`), so a copy is never answered;
    /// it knows this one by its wrapper's id, unwrapping nothing.
    async fn wrap_with_copy(
        &self,
        receiver: PublicKey,
        mut rumor: UnsignedEvent,
    ) -> Result<Signed, ReplyError> {
        let seen_as = rumor.id();
        let copy = OwnCopy {
            rumor: seen_as,
            tags: rumor.tags.as_slice().to_vec(),
        };
        let wrap = |to: PublicKey, rumor: UnsignedEvent| async move {
            EventBuilder::gift_wrap(&self.signer, &to, rumor, [])
                .await
                .map_err(|error| ReplyError::Sign(error.to_string()))
        };
        // Together: through a remote signer each wrap is two round trips
        // (encrypt, then sign the seal), and the two wraps are independent.
        let (self_copy, event) = tokio::try_join!(
            wrap(self.signer.public_key(), rumor.clone()),
            wrap(receiver, rumor)
        )?;
        self.own_copies.wrapped(self_copy.id, copy);
        Ok(Signed {
            event,
            seen_as,
            self_copy: Some(self_copy),
        })
    }
}

/// `text` about the DM of `mention` with someone other than the owner, as
/// the owner reads it in their own DM: naming that conversation.
fn about_private(mention: &Mention, text: &str) -> String {
    format!(
        "About the private conversation with {} ({}): {text}",
        mention.author_short(),
        mention.conversation
    )
}

/// A signed event, with the id clients know it by (a DM's rumor's).
struct Signed {
    event: Event,
    seen_as: EventId,
    /// A DM's copy wrapped to the bot itself.
    self_copy: Option<Event>,
}

impl Signed {
    /// The event, then its copy to the bot if it has one: what goes in the
    /// outbox.
    fn events(&self) -> impl Iterator<Item = &Event> {
        std::iter::once(&self.event).chain(&self.self_copy)
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

/// The NIP-C7 reply tag of a group chat message: `["q", id, relay, author]`.
/// Chat clients (Amethyst, 0xchat) show a kind-9 message as a reply only
/// through it; the NIP-10 markers beside it are what thread readers and
/// the bot's own thread tracking use.
fn chat_reply(event_id: EventId, relay: Option<&RelayUrl>, author: PublicKey) -> Tag {
    let relay = relay.map(RelayUrl::to_string).unwrap_or_default();
    Tag::custom(TagKind::q(), [event_id.to_hex(), relay, author.to_hex()])
}

/// Whether `mention` is a root kind-1 note: the bot's answer to it opens
/// its part of a new note thread.
fn opens_a_note_thread(mention: &Mention) -> bool {
    mention.kind == Kind::TextNote
        && matches!(mention.thread, Thread::Note { root, .. } if root == mention.event_id)
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

/// The NIP-10 `e` tag naming a thread's root.
fn root_marker(root: EventId) -> Tag {
    Tag::from_standardized_without_cell(TagStandard::Event {
        event_id: root,
        relay_url: None,
        marker: Some(nostr_sdk::prelude::Marker::Root),
        public_key: None,
        uppercase: false,
    })
}

/// NIP-10 `root` and `reply` markers plus a `p` tag per author answered.
fn thread_tags(root: EventId, mention: EventId, authors: &BTreeSet<PublicKey>) -> Vec<Tag> {
    let mut tags = vec![root_marker(root), reply_marker(mention)];
    tags.extend(authors.iter().map(|author| Tag::public_key(*author)));
    tags
}

#[cfg(test)]
mod tests {

    use acp_bridge_core::mention::test_mention;

    use super::*;
    use crate::state::store::scratch::ScratchDir;
    use crate::state::store::{MentionState, Outbox};
    use nostr_sdk::prelude::Keys;

    fn replier(store: &Arc<Store>) -> Replier {
        let signer = BotSigner::from_keys(Keys::generate());
        let (chains, _guard) = crate::policy::loop_guard::loop_guard();
        Replier::new(signer, Arc::clone(store), ReplyMode::Daemon, false, chains)
    }

    #[tokio::test]
    async fn a_task_result_made_by_the_heart_gets_no_reaction() {
        let dir = ScratchDir::new("reply-task-result");
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (chains, _guard) = crate::policy::loop_guard::loop_guard();
        let signer = BotSigner::from_keys(Keys::generate());
        let replier = Replier::new(signer, store, ReplyMode::Daemon, true, chains);
        let mut result = test_mention("room", 1, "42", true);
        assert!(
            replier.react_with(&result, "👀"),
            "a person's mention is reacted to"
        );
        result.intent = Intent::TaskResult {
            task: "t1".to_owned(),
        };
        assert!(!replier.react_with(&result, "👀"));
    }

    fn state(store: &Store, mention: &Mention) -> Option<MentionState> {
        store.journal_state(&mention.event_id.to_hex()).unwrap()
    }

    #[tokio::test]
    async fn a_long_answer_is_stored_as_one_threaded_series_that_finishes_the_mention() {
        let dir = ScratchDir::new("reply-series");
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let replier = replier(&store);
        let mention = test_mention("room", 1, "write a lot", true);
        replier.ledger.accept(&[&mention]).unwrap();

        let text = "a paragraph of the answer\n\n".repeat(4000);
        let first = replier
            .answer(std::slice::from_ref(&mention), &text)
            .await
            .unwrap()
            .expect("published by the daemon");

        let stored: Vec<Event> = Outbox::new(Arc::clone(&store))
            .due(i64::MAX)
            .unwrap()
            .iter()
            .map(|entry| Event::from_json(&entry.json).unwrap())
            .collect();
        assert!(stored.len() > 2, "{} parts", stored.len());
        assert_eq!(stored[0].id, first);
        assert_eq!(state(&store, &mention), Some(MentionState::Answered));
        for (index, pair) in stored.windows(2).enumerate() {
            assert!(
                pair[1]
                    .content
                    .starts_with(&format!("({}/{}) ", index + 2, stored.len()))
            );
            let replied: Vec<String> = pair[1]
                .tags
                .iter()
                .filter(|tag| tag.as_slice().get(3).map(String::as_str) == Some("reply"))
                .map(|tag| tag.as_slice()[1].clone())
                .collect();
            assert_eq!(
                replied,
                [pair[0].id.to_hex()],
                "each part replies to the one before"
            );
        }
    }

    /// Chat clients thread a kind-9 message under the one its NIP-C7 `q`
    /// tag names (with relay hint and author); a series' later parts name
    /// the part before, written by the bot.
    #[tokio::test]
    async fn a_group_answer_names_what_it_answers_the_way_chat_clients_read_replies() {
        let dir = ScratchDir::new("reply-chat-quote");
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let replier = replier(&store);
        let mut mention = test_mention("room", 1, "hello", true);
        mention.origin = Some(RelayUrl::parse("wss://groups.example.com").unwrap());
        replier.ledger.accept(&[&mention]).unwrap();

        let text = "a paragraph of the answer\n\n".repeat(4000);
        replier
            .answer(std::slice::from_ref(&mention), &text)
            .await
            .unwrap();

        let parts = outbox(&store);
        let chat_reply = |event: &Event| -> Vec<String> {
            let quotes: Vec<&Tag> = event
                .tags
                .iter()
                .filter(|tag| tag.kind() == TagKind::q())
                .collect();
            assert_eq!(quotes.len(), 1, "one reply tag: {:?}", event.tags);
            quotes[0].as_slice()[1..].to_vec()
        };
        assert_eq!(
            chat_reply(&parts[0]),
            [
                mention.event_id.to_hex(),
                "wss://groups.example.com".to_owned(),
                mention.author.to_hex()
            ]
        );
        let bot = parts[0].pubkey.to_hex();
        for pair in parts.windows(2) {
            assert_eq!(
                chat_reply(&pair[1]),
                [pair[0].id.to_hex(), String::new(), bot.clone()]
            );
        }
    }

    /// What the outbox holds, oldest first.
    fn outbox(store: &Arc<Store>) -> Vec<Event> {
        Outbox::new(Arc::clone(store))
            .due(i64::MAX)
            .unwrap()
            .iter()
            .map(|entry| Event::from_json(&entry.json).unwrap())
            .collect()
    }

    /// What common relays accept of one event (strfry's default).
    const RELAY_MAX_EVENT_BYTES: usize = 64 * 1024;

    #[tokio::test]
    async fn a_question_too_long_for_one_event_is_cut_to_fit_one_in_public_and_in_a_dm() {
        let dir = ScratchDir::new("reply-long-question");
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let replier = replier(&store);
        let owner = Keys::generate().public_key();
        let text = "a huge form message\n".repeat(20_000);
        let public = test_mention("room", 3, "ask me", true);
        let mut private = test_mention("dm", 4, "ask me", true);
        private.thread = Thread::Direct {
            peer: owner,
            message: private.event_id,
        };
        for mention in [&public, &private] {
            replier.ask(mention, owner, &text).await.expect("posted, cut");
        }
        let stored = outbox(&store);
        assert_eq!(
            stored.len(),
            3,
            "one event per question, and the DM's copy to the bot"
        );
        for event in &stored {
            assert!(
                event.as_json().len() <= RELAY_MAX_EVENT_BYTES,
                "{}",
                event.as_json().len()
            );
        }
        assert!(stored[0].content.ends_with("[cut: too long for one message]"));
    }

    #[tokio::test]
    async fn a_notice_too_long_for_one_event_goes_out_as_a_series() {
        let dir = ScratchDir::new("reply-long-notice");
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let replier = replier(&store);
        let mention = test_mention("room", 5, "hi", true);
        let text = "That does not fit the question.\n".repeat(5_000);
        let first = replier.inform(&mention, &text).await.expect("posted");
        let stored = outbox(&store);
        assert!(stored.len() > 1, "{} parts", stored.len());
        assert_eq!(stored[0].id, first);
        assert!(
            stored
                .iter()
                .all(|event| event.as_json().len() <= RELAY_MAX_EVENT_BYTES)
        );
        assert!(stored[1].content.starts_with(&format!("(2/{}) ", stored.len())));
    }

    #[tokio::test]
    async fn an_answer_that_cannot_be_built_becomes_a_notice_not_a_failed_turn() {
        let dir = ScratchDir::new("reply-unbuildable");
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let replier = replier(&store);
        let mention = test_mention("room", 2, "hi", true);
        let mentions = std::slice::from_ref(&mention);

        let failed = Err(ReplyError::Sign("message too long".into()));
        let (events, finish) = replier
            .or_notice(failed, mentions, Finish::Answered)
            .await
            .expect("a notice instead of an error");
        assert_eq!(finish, Finish::Notified);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event.content, UNBUILDABLE_ANSWER_NOTICE);

        // A notice that cannot be built has nothing to fall back on.
        let failed = Err(ReplyError::Sign("message too long".into()));
        assert!(
            replier
                .or_notice(failed, mentions, Finish::Notified)
                .await
                .is_err()
        );
    }
}
