//! A message into a Marmot encrypted group: a kind 9 rumor of the bot's
//! (signed by nobody: MLS authenticates it, and mdk checks the rumor's
//! `pubkey` against the sender's credential), threaded as White Noise
//! threads a reply (an `e` tag of the message answered and a `p` tag of
//! its author), encrypted by the group's MLS state into a kind 445 that
//! mdk signs with an ephemeral key. Nothing of it goes out in the clear.

use acp_bridge_core::mention::{Mention, Thread};
use nostr_sdk::prelude::{EventBuilder, EventId, Kind, PublicKey, Tag};

use crate::state::store::Finish;

use super::interim::Marks;
use super::{Replier, ReplyError, Signed};

impl Replier {
    /// Publishes the bot's self-removal from the encrypted group of
    /// `mention` (`!leave`); an admin's commit removes it.
    pub(crate) async fn leave_encrypted_group(&self, mention: &Mention) -> Result<(), ReplyError> {
        let (Thread::Marmot { group, .. }, Some(mls)) = (&mention.thread, &self.mls) else {
            return Err(ReplyError::Sign("not an encrypted group".into()));
        };
        let proposal = mls
            .leave(group.clone())
            .await
            .map_err(|error| ReplyError::Sign(error.to_string()))?;
        self.put_in_outbox(&proposal, mention.origin.as_ref(), &[], Finish::Notified)?;
        self.outlet.stored();
        Ok(())
    }

    /// `text` said in the encrypted group `group`, replying to `replying_to`
    /// of `author` (none: a message of its own). Seen as the rumor's id,
    /// which is how members thread replies to it.
    pub(super) async fn group_message(
        &self,
        group: &str,
        text: &str,
        replying_to: Option<(EventId, PublicKey)>,
        marks: Marks<'_>,
    ) -> Result<Signed, ReplyError> {
        let mls = self.mls.as_ref().ok_or_else(|| {
            ReplyError::Sign("Marmot is off (--marmot): cannot speak in an encrypted group".into())
        })?;
        let threading = replying_to
            .into_iter()
            .flat_map(|(message, author)| [Tag::event(message), Tag::public_key(author)]);
        let mut rumor = EventBuilder::new(Kind::Custom(9), text)
            .tags(threading)
            .tags(marks.labels())
            .build(self.signer.public_key());
        let seen_as = rumor.id();
        let event = mls
            .encrypt(group.to_owned(), rumor)
            .await
            .map_err(|error| ReplyError::Sign(error.to_string()))?;
        Ok(Signed {
            seen_as,
            event,
            self_copy: None,
        })
    }
}
