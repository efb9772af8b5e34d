//! A long turn's progress messages as events (docs/progress.md): one
//! interim message in the turn's thread, and the NIP-09 deletion that
//! takes it away once a newer one or the answer is out.
//!
//! Nostr events cannot be edited, and clients (Amethyst, Damus, Coracle,
//! Nostur, Flotilla) hide an event once its author's deletion arrives, so
//! "replace" is "post the new one, then delete the old". Both are stored in
//! the outbox like any reply: a deletion stored after the answer goes out
//! with it, and neither is lost to a restart. When to post and what they
//! say is the turn's (`heart::progress`).

use acp_bridge_core::mention::{Mention, Thread};
use nostr_sdk::prelude::{EventBuilder, EventId, Kind, Tag, TagKind};

use super::{Finish, Replier, ReplyError, Signed, Standing};

/// What a deletion says to clients that show its reason.
const DELETION_REASON: &str = "interim progress, superseded";

/// The most of a progress message's text kept: a glance, not a report.
const MAX_PROGRESS_BYTES: usize = 4096;

impl Replier {
    /// Posts a progress message in the thread of `mention`, where its
    /// answer will be (a reply, a group message or a DM): one event,
    /// labelled interim (it answers nothing), cut at
    /// [`MAX_PROGRESS_BYTES`], counted as the bot's reply in the mention's
    /// chain (a bot answering it is bounded by the hop bounds). Returns the
    /// id its deletion names (a DM's: its gift wrap's, never deleted).
    pub(crate) async fn post_progress(&self, mention: &Mention, text: &str) -> Result<EventId, ReplyError> {
        let mentions = std::slice::from_ref(mention);
        let signed: Signed = self
            .build(mentions, bounded(text), None, Standing::Interim.into())
            .await?;
        for event in signed.events() {
            self.put_in_outbox(event, mention.origin.as_ref(), &[], Finish::Notified)?;
        }
        self.chains.record_reply(signed.seen_as, mention.chain_depth);
        Ok(signed.event.id)
    }

    /// Deletes the bot's progress messages `ids` in the thread of
    /// `mention` (NIP-09: their `e` ids and their kind in `k`, and a
    /// group's `h`, which its relay wants on every event). Not for DMs:
    /// clients do not honour a deletion of a gift-wrapped message, so DMs
    /// are never deleted from.
    pub(crate) async fn retract(&self, mention: &Mention, ids: &[EventId]) -> Result<EventId, ReplyError> {
        let (kind, group) = match &mention.thread {
            Thread::Group { channel, .. } => (
                Kind::Custom(9),
                self.groups.group_tags(mention.origin.as_ref(), channel),
            ),
            Thread::Note { .. } => (Kind::TextNote, Vec::new()),
            Thread::Comment { channel, .. } => (
                Kind::Comment,
                self.groups.room_tags(mention.origin.as_ref(), channel.as_deref()),
            ),
            // A public deletion would name a private message.
            Thread::Direct { .. } | Thread::Marmot { .. } => {
                return Err(ReplyError::Sign(
                    "a private thread's progress messages are not deleted".into(),
                ));
            }
        };
        let event = EventBuilder::new(Kind::EventDeletion, DELETION_REASON)
            .tags(ids.iter().map(|id| Tag::event(*id)))
            .tag(Tag::custom(TagKind::k(), [kind.as_u16().to_string()]))
            .tags(group)
            .sign(&self.signer)
            .await
            .map_err(|error| ReplyError::Sign(error.to_string()))?;
        self.put_in_outbox(&event, mention.origin.as_ref(), &[], Finish::Notified)?;
        Ok(event.id)
    }
}

/// `text` cut at [`MAX_PROGRESS_BYTES`], on a character boundary.
fn bounded(text: &str) -> &str {
    let mut end = text.len().min(MAX_PROGRESS_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use acp_bridge_core::mention::test_mention;
    use nostr_sdk::prelude::{Event, JsonUtil, Keys};

    use super::*;
    use crate::edge::signer::BotSigner;
    use crate::outbound::reply::{ReplyMode, is_interim};
    use crate::state::store::scratch::ScratchDir;
    use crate::state::store::{Outbox, Store};

    #[tokio::test]
    async fn a_progress_message_is_interim_and_its_deletion_names_it_and_its_kind() {
        let dir = ScratchDir::new("reply-progress");
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (chains, _guard) = crate::policy::loop_guard::loop_guard();
        let signer = BotSigner::from_keys(Keys::generate());
        let replier = Replier::new(signer, Arc::clone(&store), ReplyMode::Daemon, false, chains);
        let mention = test_mention("room", 1, "work", true);

        let posted = replier
            .post_progress(&mention, &"still working\n".repeat(10_000))
            .await
            .unwrap();
        replier.retract(&mention, &[posted]).await.unwrap();

        let stored: Vec<Event> = Outbox::new(store)
            .due(i64::MAX)
            .unwrap()
            .iter()
            .map(|entry| Event::from_json(&entry.json).unwrap())
            .collect();
        assert_eq!(
            stored.len(),
            2,
            "one progress message, cut to fit, and its deletion"
        );
        assert_eq!(stored[0].id, posted);
        assert!(is_interim(&stored[0].tags));
        let deletion = &stored[1];
        assert_eq!(deletion.kind, Kind::EventDeletion);
        let tags: Vec<Vec<String>> = deletion.tags.iter().map(|tag| tag.as_slice().to_vec()).collect();
        assert!(tags.contains(&vec!["e".to_owned(), posted.to_hex()]), "{tags:?}");
        assert!(tags.contains(&vec!["k".to_owned(), "9".to_owned()]), "{tags:?}");
        assert!(
            tags.contains(&vec!["h".to_owned(), "room".to_owned()]),
            "{tags:?}"
        );
    }
}
