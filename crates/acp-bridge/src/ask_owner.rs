//! `--permission-policy ask-owner`: open permission questions, and the
//! owner's answers to them.
//!
//! Owns the table of questions the bridge posted and is waiting on, keyed by
//! the question's event id, so that an answer is matched to its question by
//! thread (the reply's NIP-10 parent, or for a DM the conversation), never
//! by guess. The turn runner opens a question and waits on its answer; the
//! heart routes the owner's replies here. Only the owner answers: a reply by
//! anyone else is refused by the heart before it reaches the desk.

use std::collections::HashMap;
use std::sync::Mutex;

use acp_client::{PermissionKind, PermissionOption};
use nostr_sdk::prelude::EventId;
use tokio::sync::oneshot;

use crate::mention::{ConversationKey, Mention};

/// A question waiting for the owner.
#[derive(Debug)]
struct OpenQuestion {
    conversation: ConversationKey,
    direct: bool,
    summary: String,
    options: Vec<PermissionOption>,
    answer: oneshot::Sender<PermissionOption>,
}

/// What became of an owner's reply.
#[derive(Debug, PartialEq, Eq)]
pub enum Routed {
    /// Not a reply to an open question: an ordinary mention.
    NotAnAnswer,
    /// The agent gets this option.
    Answered(PermissionOption),
    /// A reply to an open question that names no option.
    Unrecognized { options: String },
}

#[derive(Debug, Default)]
pub struct AskOwnerDesk {
    open: Mutex<HashMap<EventId, OpenQuestion>>,
}

impl AskOwnerDesk {
    /// Registers a posted question; the receiver yields the owner's choice.
    pub fn open(
        &self,
        question_event: EventId,
        mention: &Mention,
        summary: String,
        options: Vec<PermissionOption>,
    ) -> oneshot::Receiver<PermissionOption> {
        let (answer, receiver) = oneshot::channel();
        self.lock().insert(
            question_event,
            OpenQuestion {
                conversation: mention.conversation.clone(),
                direct: mention.thread.is_direct(),
                summary,
                options,
                answer,
            },
        );
        receiver
    }

    /// Forgets a question (answered, timed out, cancelled).
    pub fn close(&self, question_event: &EventId) {
        self.lock().remove(question_event);
    }

    /// Whether `reply` answers an open question: it replies to the question
    /// event, or it is a DM in a conversation with a question open.
    pub fn is_answer(&self, reply: &Mention) -> bool {
        self.question_of(reply).is_some()
    }

    /// Routes the owner's `reply`.
    pub fn answer(&self, reply: &Mention) -> Routed {
        let mut open = self.lock();
        let Some(id) = question_of_locked(&open, reply) else {
            return Routed::NotAnAnswer;
        };
        let Some(question) = open.get(&id) else {
            return Routed::NotAnAnswer;
        };
        match choose(&question.options, &reply.content) {
            Some(option) => {
                if let Some(question) = open.remove(&id) {
                    let _ = question.answer.send(option.clone());
                }
                Routed::Answered(option)
            }
            None => Routed::Unrecognized {
                options: numbered_options(&question.options),
            },
        }
    }

    /// The open question of a conversation, for `!status` and steer notices.
    pub fn waiting_in(&self, conversation: &ConversationKey) -> Option<String> {
        self.lock()
            .values()
            .find(|question| &question.conversation == conversation)
            .map(|question| question.summary.clone())
    }

    fn question_of(&self, reply: &Mention) -> Option<EventId> {
        question_of_locked(&self.lock(), reply)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<EventId, OpenQuestion>> {
        self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn question_of_locked(open: &HashMap<EventId, OpenQuestion>, reply: &Mention) -> Option<EventId> {
    if let Some(parent) = reply.replies_to
        && open.contains_key(&parent)
    {
        return Some(parent);
    }
    if reply.thread.is_direct() {
        return open
            .iter()
            .find(|(_, question)| question.direct && question.conversation == reply.conversation)
            .map(|(id, _)| *id);
    }
    None
}

/// The option an answer names: its number (1-based), its name, or its kind
/// (`allow once`, `reject_always`), case and punctuation aside.
pub fn choose(options: &[PermissionOption], answer: &str) -> Option<PermissionOption> {
    let words: Vec<&str> = answer
        .split_whitespace()
        .filter(|word| !word.starts_with("nostr:") && !word.starts_with('@'))
        .collect();
    let answer = normalize(&words.join(" "));
    if let Ok(number) = answer.parse::<usize>() {
        return number
            .checked_sub(1)
            .and_then(|index| options.get(index))
            .cloned();
    }
    options
        .iter()
        .find(|option| normalize(&option.name) == answer || normalize(option.kind.as_str()) == answer)
        .cloned()
}

/// Options as the question lists them: `1. Allow once (allow once)`.
pub fn numbered_options(options: &[PermissionOption]) -> String {
    options
        .iter()
        .enumerate()
        .map(|(index, option)| format!("{}. {} ({})", index + 1, option.name, kind_label(&option.kind)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn kind_label(kind: &PermissionKind) -> String {
    kind.as_str().replace('_', " ")
}

fn normalize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == '_' || c == '-' {
                ' '
            } else {
                c.to_ascii_lowercase()
            }
        })
        .filter(|c| c.is_alphanumeric() || *c == ' ')
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mention::test_mention;

    fn options() -> Vec<PermissionOption> {
        [
            ("a", "Allow once", PermissionKind::AllowOnce),
            ("b", "Always allow", PermissionKind::AllowAlways),
            ("c", "Reject once", PermissionKind::RejectOnce),
        ]
        .into_iter()
        .map(|(id, name, kind)| PermissionOption {
            id: id.into(),
            name: name.into(),
            kind,
        })
        .collect()
    }

    #[test]
    fn answers_by_number_name_or_kind() {
        let options = options();
        assert_eq!(choose(&options, "2").map(|o| o.id), Some("b".into()));
        assert_eq!(
            choose(&options, "nostr:npub1bot  1.").map(|o| o.id),
            Some("a".into())
        );
        assert_eq!(choose(&options, "reject ONCE").map(|o| o.id), Some("c".into()));
        assert_eq!(choose(&options, "allow_always").map(|o| o.id), Some("b".into()));
        assert_eq!(choose(&options, "4"), None);
        assert_eq!(choose(&options, "sure, go ahead"), None);
    }

    #[test]
    fn only_replies_to_the_question_answer_it() {
        let desk = AskOwnerDesk::default();
        let asked_in = test_mention("room", 1, "run it", true);
        let question = EventId::from_slice(&[7; 32]).expect("id");
        let mut receiver = desk.open(question, &asked_in, "rm -rf".into(), options());

        let mut elsewhere = test_mention("room", 2, "1", true);
        elsewhere.replies_to = Some(EventId::from_slice(&[8; 32]).expect("id"));
        assert_eq!(desk.answer(&elsewhere), Routed::NotAnAnswer);

        let mut unclear = test_mention("room", 3, "hmm", true);
        unclear.replies_to = Some(question);
        assert!(matches!(desk.answer(&unclear), Routed::Unrecognized { .. }));
        assert_eq!(desk.waiting_in(&asked_in.conversation).as_deref(), Some("rm -rf"));

        let mut answer = test_mention("room", 4, "3", true);
        answer.replies_to = Some(question);
        assert!(matches!(desk.answer(&answer), Routed::Answered(option) if option.id == "c"));
        assert_eq!(receiver.try_recv().map(|option| option.id), Ok("c".into()));
        assert_eq!(desk.waiting_in(&asked_in.conversation), None);
    }
}
