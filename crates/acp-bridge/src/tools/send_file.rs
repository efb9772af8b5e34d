//! `send_file`: checked like `post_message` (a turn in flight, the
//! caption's length, the same per-conversation post budget), then the file
//! is read and uploaded by the `send_file` module on a task of its own, and
//! the link is posted under the turn's mention as an interim message with
//! a NIP-92 `imeta` tag. A refusal of the file itself (outside the
//! workspace, too large, a type not sent) spends the budget too: it also
//! bounds how fast an agent can probe the file system. In a Marmot
//! encrypted group it is refused: the upload would be public.

use std::time::Duration;

use acp_bridge_core::mention::Thread;
use rmcp::schemars;

use super::posts::{admit_post, postable};
use super::{Answer, Context, HEART_ANSWER_TIMEOUT, Tool};

/// The refusal in a Marmot encrypted group: a Blossom upload is in the
/// clear (MIP-04's encrypted media is not done), and nothing said there
/// may be.
const IN_AN_ENCRYPTED_GROUP: &str = "files are not sent in an encrypted group: the upload would be readable by anyone; say it in text instead";

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct SendFile {
    /// The file, relative to your working directory (or an absolute path in it).
    path: String,
    /// A line said with the file.
    #[serde(default)]
    caption: String,
}

impl Tool for SendFile {
    const NAME: &'static str = "send_file";
    const DESCRIPTION: &'static str = "Send a file from your working directory into this conversation's thread, with a caption: images, audio, video, PDF, archives or text, up to the bridge's size bound. It is uploaded and posted as a link.";

    /// The upload takes its own bound on top.
    fn answer_timeout(&self) -> Duration {
        HEART_ANSWER_TIMEOUT + crate::tools::upload::UPLOAD_TIMEOUT
    }

    fn run(self, context: &mut dyn Context, answer: Answer) {
        let SendFile { path, caption } = self;
        let encrypted = context
            .turn_mention()
            .is_some_and(|mention| matches!(mention.thread, Thread::Marmot { .. }));
        let check = match context.files().unavailable() {
            Some(why) => Err(why.to_string()),
            None if encrypted => Err(IN_AN_ENCRYPTED_GROUP.to_owned()),
            None => postable(context, "caption", &caption),
        };
        let mention = match admit_post(context, Self::NAME, check) {
            Ok(mention) => mention,
            Err(why) => {
                let _ = answer.send(Err(why));
                return;
            }
        };
        let files = context.files().clone();
        let replier = context.replier().clone();
        let key = context.conversation().clone();
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
