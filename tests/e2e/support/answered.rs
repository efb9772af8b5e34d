//! What one life of the bot answered, for tests of what a later life (a
//! fresh state dir, another shard count) must not answer again.

use nostr_sdk::prelude::*;

use super::log::Line;
use super::relay::RelayServer;
use super::scene::Scene;

/// A mention in a group, a DM, and an owner's command sent as a DM
/// (`!cancel`, with no turn to cancel), each answered.
#[derive(Debug)]
pub struct AnsweredOnce {
    pub mention: Event,
    pub dm: Event,
    pub command: Event,
    /// The bot's DMs to the owner by then: the DM's answer and the command's.
    pub dm_answers: usize,
}

impl AnsweredOnce {
    /// The three events, in the order sent.
    pub fn events(&self) -> [&Event; 3] {
        [&self.mention, &self.dm, &self.command]
    }
}

impl<R: RelayServer> Scene<R> {
    /// The bound of a "nothing old is answered again" check, once the old
    /// events were judged: a new DM is answered, and by then the old
    /// mention still has one answer and the bot's DMs are the old answers
    /// and the new one's. Returns the new DM.
    pub async fn assert_only_a_new_dm_answered(&self, before: &AnsweredOnce) -> Event {
        let (owner, bot) = (&self.owner, self.bot);
        let new_dm = owner.dm(&bot, "a new question").await;
        owner.dm_containing(&bot, "a new question").await;
        assert_eq!(owner.answers_from(&bot, &before.mention.id).await.len(), 1);
        assert_eq!(
            owner.direct_messages_from(&bot, 0).await.len(),
            before.dm_answers + 1,
            "only the new DM got an answer"
        );
        new_dm
    }

    /// Has the running daemon answer a mention in `channel`, a DM and an
    /// owner command.
    pub async fn answer_one_of_each(&self, channel: &str) -> AnsweredOnce {
        let (owner, bot) = (&self.owner, self.bot);
        let mention = self.mention(channel, "answer me once").await;
        self.reply_to(&mention).await;
        let dm = owner.dm(&bot, "answer me once, privately").await;
        owner.dm_containing(&bot, "answer me once, privately").await;
        let command = owner.dm(&bot, "!cancel").await;
        owner.dm_containing(&bot, "Nothing to cancel").await;
        let dm_answers = owner.direct_messages_from(&bot, 2).await.len();
        AnsweredOnce {
            mention,
            dm,
            command,
            dm_answers,
        }
    }
}

impl Line {
    /// The intake dropped `event`, from before this start, because the
    /// bot's own reply to it is on the relay.
    pub fn answered_before_start(event: &Event) -> Self {
        Line::new("already answered before this start").with("event_id", event.id.to_hex())
    }
}
