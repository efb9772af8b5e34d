//! The heart's side of the `send_file` tool: checked like `post_message`
//! (a turn in flight, the caption's length, the same per-conversation post
//! budget), then the file is read and uploaded by the `send_file` module on
//! a task of its own, and the link is posted under the turn's mention as an
//! interim message with a NIP-92 `imeta` tag. A refusal of the file itself
//! (outside the workspace, too large, a type not sent) spends the budget
//! too: it also bounds how fast an agent can probe the file system.

use acp_bridge_core::mention::ConversationKey;

use super::Heart;
use super::tools::Answer;

impl Heart {
    /// Sends the file `path` of the conversation's workspace with
    /// `caption` in the thread of its turn in flight.
    pub(super) fn send_file(&mut self, key: &ConversationKey, path: String, caption: String, answer: Answer) {
        let check = match self.services.files.unavailable() {
            Some(why) => Err(why.to_string()),
            None => self.postable("caption", &caption),
        };
        let mention = match self.admit_post(key, "send_file", check) {
            Ok(mention) => mention,
            Err(why) => {
                let _ = answer.send(Err(why));
                return;
            }
        };
        let files = self.services.files.clone();
        let replier = self.services.replier.clone();
        let key = key.clone();
        tokio::spawn(async move {
            let sent = match files.send(&key, &path).await {
                Ok(sent) => sent,
                Err(why) => {
                    tracing::info!(conversation = %key, path = %path, reason = %why, "send_file refused");
                    let _ = answer.send(Err(why.to_string()));
                    return;
                }
            };
            let text = sent.content(&caption);
            let outcome = match replier
                .post_interim_tagged(&mention, &text, &[sent.imeta()])
                .await
            {
                Ok(event) => {
                    tracing::info!(conversation = %key, event_id = %event, under = %mention.event_id, url = %sent.url, "posted a file for the agent mid-turn");
                    Ok(format!("sent: {}", sent.url))
                }
                Err(error) => {
                    tracing::error!(%error, "cannot store a file message the agent posted");
                    Err(
                        "the file was uploaded but the message could not be posted (see the bridge's log)"
                            .to_owned(),
                    )
                }
            };
            let _ = answer.send(outcome);
        });
    }
}
