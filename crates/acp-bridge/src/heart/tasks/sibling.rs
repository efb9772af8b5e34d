//! Tasks handed to a sibling bot (`delegate(to: <npub|hex>)`): only a bot
//! the author gate has verified as the owner's sibling, and not from a DM.
//! The prompt is posted in the thread of the delegating mention,
//! mentioning that bot; its reply to that post (heard because it is a
//! sibling) is the task's result, taken by the heart before it could
//! become a turn. Without a reply in [`SIBLING_REPLY_TIMEOUT`] the task
//! fails; `task_stop` stops waiting. The reply's row is finished in the
//! transaction that journals the result. A reply that comes after that
//! (or after a restart: such tasks are in memory only) is an ordinary
//! mention.

use std::time::Duration;

use acp_bridge_core::mention::Mention;
use nostr_sdk::prelude::PublicKey;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Ending, State, TaskNews, Work};
use crate::heart::Heart;

/// How long a task handed to a sibling bot waits for its reply.
const SIBLING_REPLY_TIMEOUT: Duration = Duration::from_secs(30 * 60);

impl Heart {
    /// The sibling bot `to` names, if the gate hears it as one.
    pub(super) fn sibling(&self, to: &str) -> Result<PublicKey, String> {
        let bot = PublicKey::parse(to)
            .map_err(|_| format!("to must be \"self\" or the npub or hex key of a sibling bot, not {to}"))?;
        if !self
            .services
            .gate
            .as_ref()
            .is_some_and(|gate| gate.known_sibling(&bot))
        {
            return Err(format!(
                "{to} is not a sibling bot this bridge hears (a bot your owner attested that has written to it)"
            ));
        }
        Ok(bot)
    }

    /// Posts the task in the thread of `under`, mentioning the sibling bot,
    /// and waits for its reply (see [`Heart::sibling_result`]), a stop, or
    /// [`SIBLING_REPLY_TIMEOUT`].
    pub(super) fn hand_to_sibling(
        &self,
        under: &Mention,
        bot: PublicKey,
        id: &str,
        prompt: &str,
        stop: CancellationToken,
        news: mpsc::Sender<TaskNews>,
    ) {
        let replier = self.services.replier.clone();
        let under = under.clone();
        let text = format!("{prompt}\n\n(Task {id}: please reply to this message with the result.)");
        let id = id.to_owned();
        tokio::spawn(async move {
            let ending = match replier.mention_in_thread(&under, bot, &text).await {
                Ok(event) => {
                    tracing::info!(task_id = %id, %event, "task posted for a sibling bot");
                    let posted = TaskNews::Posted {
                        id: id.clone(),
                        event,
                    };
                    let _ = news.send(posted).await;
                    tokio::select! {
                        () = stop.cancelled() => Ending::Stopped,
                        () = tokio::time::sleep(SIBLING_REPLY_TIMEOUT) => Ending::Failed(format!(
                            "the sibling bot did not reply within {} s", SIBLING_REPLY_TIMEOUT.as_secs()
                        )),
                    }
                }
                Err(error) => Ending::Failed(format!("the task could not be posted: {error}")),
            };
            let _ = news.send(TaskNews::Ended { id, ending }).await;
        });
    }

    /// Whether `mention` is a sibling bot's reply to the task posted for
    /// it; if so it is the task's result, and no turn of its own.
    pub(in crate::heart) fn sibling_result(&mut self, mention: &Mention) -> bool {
        let Some(replied) = mention.replies_to.filter(|_| mention.from_sibling) else {
            return false;
        };
        let found = self.tasks.tasks.iter_mut().find(|(_, task)| {
            matches!(task.state, State::Running { .. })
                && matches!(task.work, Work::Sibling { bot, posted, .. }
                    if bot == mention.author && posted == Some(replied))
        });
        let Some((id, task)) = found else {
            return false;
        };
        // The reply's row is finished as the result is journaled.
        task.row = Some(mention.clone());
        let id = id.clone();
        tracing::info!(task_id = %id, event_id = %mention.event_id, "a sibling bot replied with a task's result");
        self.on_task_ended(id, Ending::Done(mention.content.clone()));
        true
    }
}
