//! `post_message`: the agent posts in its conversation's thread now, while
//! it keeps working (progress, or a part of the answer), under the mention
//! its turn works on, as an interim message that does not answer it.
//! Bounded as [`posts`](super::posts) says.

use rmcp::schemars;

use super::posts::{admit_post, postable};
use super::{Answer, Context, Tool};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct PostMessage {
    /// The message, as it should appear in the thread.
    text: String,
}

impl Tool for PostMessage {
    const NAME: &'static str = "post_message";
    const DESCRIPTION: &'static str = "Post a message in this conversation's thread now, while you keep working (progress, or a part of the answer). Your final answer is still posted when your turn ends.";

    fn run(self, context: &mut dyn Context, answer: Answer) {
        let text = self.text;
        let check = if text.trim().is_empty() {
            Err("the message is empty".to_owned())
        } else {
            postable(context, "message", &text)
        };
        let mention = match admit_post(context, Self::NAME, check) {
            Ok(mention) => mention,
            Err(why) => {
                let _ = answer.send(Err(why));
                return;
            }
        };
        let replier = context.replier().clone();
        tokio::spawn(async move {
            let outcome = match replier.post_interim(&mention, &text).await {
                Ok(event) => {
                    tracing::info!(conversation = %mention.conversation, event_id = %event, under = %mention.event_id, "posted a message for the agent mid-turn");
                    Ok("posted in the thread".to_owned())
                }
                Err(error) => {
                    tracing::error!(%error, "cannot store a message the agent posted");
                    Err("the message could not be posted (see the bridge's log)".to_owned())
                }
            };
            let _ = answer.send(outcome);
        });
    }
}
