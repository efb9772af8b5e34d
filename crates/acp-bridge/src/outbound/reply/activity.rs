//! A running turn's live view for clients that want one: an ephemeral
//! activity event (kind [`ACTIVITY_KIND`], docs/progress.md) a few seconds
//! apart while the turn runs, and one saying it ended.
//!
//! Ephemeral (NIP-01: relays pass it on and keep nothing), so it is sent
//! as reactions are: signed, queued in memory to the mention's relay, never
//! retried. It names the thread (its root and newest mention), the people
//! it answers and the group, and expires a minute ahead (NIP-40) for the
//! relays that store it anyway. Never for a DM: an event naming a DM's
//! participants would tell everyone who talks to the bot.

use std::time::Duration;

use acp_bridge_core::mention::{Mention, Thread};
use nostr_sdk::prelude::{EventBuilder, Kind, Tag, Timestamp};
use serde::Serialize;

use super::{Replier, ReplyError, reply_marker, root_marker};

/// The activity event's kind: ephemeral (20000–29999), unknown to clients
/// that do not read it, which ignore it.
const ACTIVITY_KIND: u16 = 25910;

/// How long a relay that stores the event may keep it (NIP-40).
const EXPIRES_AFTER: Duration = Duration::from_secs(60);

/// The activity event's content, version 1 (the schema in docs/progress.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Activity {
    pub v: u8,
    pub state: ActivityState,
    pub elapsed_s: u64,
    pub plan: Vec<PlanItem>,
    pub tool: Option<ToolNow>,
    pub tools_done: u64,
}

/// Whether the turn still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ActivityState {
    Working,
    Ended,
}

/// One entry of the agent's plan, as ACP words it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PlanItem {
    pub content: String,
    pub status: String,
}

/// The tool call running now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ToolNow {
    pub title: String,
    pub kind: String,
}

impl Replier {
    /// Sends `activity` about the turn answering `mentions` (the newest
    /// last), to the newest's relay; returns at once. Nothing for a DM.
    pub(crate) async fn send_activity(
        &self,
        mentions: &[Mention],
        activity: &Activity,
    ) -> Result<(), ReplyError> {
        let Some(newest) = mentions.last() else {
            return Ok(());
        };
        // Threaded as the answer is: a top-level mention is both root and reply.
        let (root, group) = match &newest.thread {
            Thread::Group { channel, root, .. } => (
                vec![root_marker(*root)],
                self.groups.group_tags(newest.origin.as_ref(), channel),
            ),
            Thread::Note { root, .. } => (vec![root_marker(*root)], Vec::new()),
            Thread::Comment { scope, channel, .. } => (
                scope.root_tags(),
                self.groups.room_tags(newest.origin.as_ref(), channel.as_deref()),
            ),
            // Public events: never of a private thread.
            Thread::Direct { .. } | Thread::Marmot { .. } => return Ok(()),
        };
        let content = serde_json::to_string(activity).map_err(|error| ReplyError::Sign(error.to_string()))?;
        let authors = mentions.iter().map(|mention| Tag::public_key(mention.author));
        let expires = Timestamp::now() + EXPIRES_AFTER;
        let event = EventBuilder::new(Kind::Custom(ACTIVITY_KIND), content)
            .tags(root)
            .tag(reply_marker(newest.thread.answered_event()))
            .tags(authors)
            .tags(group)
            .tag(Tag::expiration(expires))
            .sign(&self.signer)
            .await
            .map_err(|error| ReplyError::Sign(error.to_string()))?;
        // The reactions' queue: courtesy, never retried.
        self.outlet.react(event, newest.origin.clone());
        Ok(())
    }
}
