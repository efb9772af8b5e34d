//! What a turn's updates add up to, gathered in the connection as each
//! update is routed (not as the caller reads the events, which may be
//! dropped): the agent's text within its bound, its messages told apart,
//! the last usage and run id. The bounds are described in [`crate::turn`].

use acp_protocol::Usage;

use crate::TurnEvent;

/// One message of the agent's within a turn. Messages are told apart by
/// the `messageId` of their chunks where the agent sends one, and by what
/// comes between them (tool calls, plans, echoed user text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentMessage {
    pub text: String,
    /// A tool call or a plan followed it: the agent was narrating its work,
    /// not answering. Its text is then kept only in
    /// [`crate::TurnOutcome::message`].
    pub narration: bool,
}

/// What a turn's updates add up to, gathered as they are routed: the
/// agent's text (bounded, see the module doc), its messages, the last usage
/// and run id it reported.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    max_text_bytes: usize,
    pub(crate) message: String,
    pub(crate) message_truncated: bool,
    pub(crate) messages: Vec<AgentMessage>,
    /// Bytes of text held in `messages` (narration's text is let go).
    messages_bytes: usize,
    pub(crate) messages_truncated: bool,
    /// The `messageId` of the message being streamed, when the agent sends ids.
    message_id: Option<String>,
    /// Something other than message text came since the last chunk: the
    /// next chunk starts a new message.
    message_boundary: bool,
    pub(crate) usage: Option<Usage>,
    pub(crate) run_id: Option<String>,
}

impl Transcript {
    pub(crate) fn new(max_text_bytes: usize) -> Self {
        Transcript {
            max_text_bytes,
            ..Transcript::default()
        }
    }

    pub(crate) fn observe(&mut self, event: &TurnEvent) {
        match event {
            TurnEvent::MessageChunk { text, message_id } => self.message_chunk(text, message_id.as_deref()),
            TurnEvent::ToolCall(_) | TurnEvent::Plan { .. } => {
                if !self.message_boundary {
                    self.last_was_narration();
                }
                self.message_boundary = true;
            }
            TurnEvent::ToolCallUpdate(_) | TurnEvent::UserMessageChunk { .. } => self.message_boundary = true,
            TurnEvent::Usage(usage) => self.usage = Some(usage.clone()),
            TurnEvent::RunStarted { run_id } => self.run_id = Some(run_id.clone()),
            _ => {}
        }
    }

    /// The message just streamed was narration, not the answer: its text
    /// lives on in `message` only, and what it lost at the bound was
    /// narration too. Narrations in a row are kept as one entry, so an
    /// agent that narrates every tool call does not grow the list.
    fn last_was_narration(&mut self) {
        let Some(last) = self.messages.pop() else {
            return;
        };
        self.messages_bytes -= last.text.len();
        self.messages_truncated = false;
        if !self.messages.last().is_some_and(|message| message.narration) {
            self.messages.push(AgentMessage {
                text: String::new(),
                narration: true,
            });
        }
    }

    fn message_chunk(&mut self, text: &str, message_id: Option<&str>) {
        let limit = self.max_text_bytes;
        // Once something was dropped nothing more is kept: the text never
        // has a hole in the middle.
        let room = |used: usize, truncated: bool| if truncated { 0 } else { limit.saturating_sub(used) };
        let kept = within(text, room(self.message.len(), self.message_truncated));
        self.message.push_str(kept);
        self.message_truncated |= kept.len() < text.len();
        let other_message = match (message_id, self.message_id.as_deref()) {
            (Some(id), Some(current)) => id != current,
            _ => false,
        };
        let kept = within(text, room(self.messages_bytes, self.messages_truncated));
        self.messages_bytes += kept.len();
        self.messages_truncated |= kept.len() < text.len();
        if let Some(id) = message_id {
            self.message_id = Some(id.to_owned());
        }
        match self.messages.last_mut() {
            Some(last) if !self.message_boundary && !other_message => last.text.push_str(kept),
            // Past the bound no new message is started (their number stays
            // bounded too), and a tool call after it must not make the
            // last kept message narration.
            _ if kept.is_empty() => {
                self.message_boundary = true;
                return;
            }
            _ => self.messages.push(AgentMessage {
                text: kept.to_owned(),
                narration: false,
            }),
        }
        self.message_boundary = false;
    }
}

/// The longest prefix of `text` of at most `max_bytes` that ends on a
/// character boundary.
fn within(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::within;

    #[test]
    fn within_cuts_on_a_character_boundary() {
        assert_eq!(within("abc", 5), "abc");
        assert_eq!(within("abc", 2), "ab");
        // 🦀 is four bytes: a cut inside it keeps nothing of it.
        assert_eq!(within("a🦀b", 4), "a");
        assert_eq!(within("a🦀b", 5), "a🦀");
        assert_eq!(within("é", 1), "");
        assert_eq!(within("x", 0), "");
    }
}
