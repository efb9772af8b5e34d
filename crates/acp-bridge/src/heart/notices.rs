//! The heart's own messages to people (owner command answers, give-up and
//! overflow notices, "held behind a question"), sent without holding up the
//! heart: each is signed and stored on a task of its own.
//!
//! A notice that finishes mentions finishes them in the same transaction
//! that stores it (see `reply`); one that is never stored (the process
//! stopped first) leaves its mentions pending, and they resume at the next
//! start. Nothing is lost either way.

use acp_bridge_core::mention::Mention;
use nostr_sdk::prelude::PublicKey;

use crate::outbound::reply::{Reaction, Replier};

/// What the authors of a turn the owner cancelled are told.
const CANCELLED_NOTICE: &str = "Cancelled by the owner.";

#[derive(Debug, Clone)]
pub(crate) struct Notices {
    replier: Replier,
}

impl Notices {
    pub(super) fn new(replier: Replier) -> Self {
        Notices { replier }
    }

    /// Tells the authors of `mentions` why there is no answer, and finishes
    /// the mentions.
    pub(super) fn notify(&self, mentions: Vec<Mention>, text: impl Into<String>) {
        let (replier, text) = (self.replier.clone(), text.into());
        tokio::spawn(async move {
            if let Err(error) = replier.notify(&mentions, &text).await {
                tracing::error!(%error, "cannot store a notice");
            }
        });
    }

    /// Gives up on `mentions` with a notice saying why, and marks each with
    /// the give-up reaction.
    pub(super) fn give_up(&self, mentions: Vec<Mention>, text: String) {
        self.finish_marked(mentions, text, Reaction::GaveUp);
    }

    /// Tells the authors of `mentions` that the owner cancelled their
    /// turn, and marks each cancelled: like an answer's ✅, the last
    /// reaction says how the mention ended, so its 👀 is not the last word.
    pub(super) fn cancelled_by_owner(&self, mentions: Vec<Mention>) {
        self.finish_marked(mentions, CANCELLED_NOTICE.to_owned(), Reaction::Cancelled);
    }

    /// Finishes `mentions` with notice `text`, then marks each with
    /// `reaction` (once the notice is stored: a mention left pending is
    /// not marked as ended).
    fn finish_marked(&self, mentions: Vec<Mention>, text: String, reaction: Reaction) {
        let replier = self.replier.clone();
        tokio::spawn(async move {
            match replier.notify(&mentions, &text).await {
                Ok(_) => mentions
                    .iter()
                    .for_each(|mention| replier.react(mention, reaction)),
                Err(error) => tracing::error!(%error, "cannot store a notice"),
            }
        });
    }

    /// Says something in the thread of `mention` without finishing it.
    pub(super) fn inform(&self, mention: Mention, text: String) {
        let replier = self.replier.clone();
        tokio::spawn(async move {
            if let Err(error) = replier.inform(&mention, &text).await {
                tracing::error!(%error, "cannot store the notice");
            }
        });
    }

    /// Tells `owner` something about a question asked under `mention`,
    /// where it was asked (see [`Replier::about_question`]).
    pub(super) fn about_question(&self, mention: Mention, owner: Option<PublicKey>, text: String) {
        let replier = self.replier.clone();
        tokio::spawn(async move {
            if let Err(error) = replier.about_question(&mention, owner, &text).await {
                tracing::error!(%error, "cannot store the notice");
            }
        });
    }

    /// A conversation's queue overflowed: its oldest mention was dropped.
    pub(super) fn overflowed(&self, dropped: Mention) {
        tracing::warn!(conversation = %dropped.conversation, event_id = %dropped.event_id, "conversation queue full: dropped its oldest mention");
        self.give_up(
            vec![dropped],
            "Too many messages are waiting in this conversation; this one was dropped. Please send it again later.".to_owned(),
        );
    }
}
