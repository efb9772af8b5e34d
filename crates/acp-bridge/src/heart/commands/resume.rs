//! `!resume ID`: this conversation's next turns run on one of the sessions
//! it has had (an id from `!sessions`, or a prefix of one that is unique).
//! Only its own sessions are found: an id of another conversation's, or
//! one it never had, is not taken.

use super::{Command, Context, Who, at_most_one_word};

pub(crate) struct Resume {
    id: String,
}

impl Command for Resume {
    const NAME: &'static str = "!resume";
    const HELP: &'static str = "!resume ID: this conversation's next turns run on one of its sessions (an id from !sessions, or a unique prefix).";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        Some(Resume {
            id: at_most_one_word(args)??,
        })
    }

    fn apply(self, context: &mut dyn Context) -> String {
        if context.turn_running() {
            return "A turn is in flight here: send !resume once it has answered.".to_owned();
        }
        let pool = context.pool();
        let key = context.key().clone();
        if pool.session_caps().is_some_and(|caps| !caps.reopen) {
            return "This agent cannot reopen sessions (no session/resume or session/load): !new starts a fresh one.".to_owned();
        }
        let past = pool.past_sessions(&key);
        let exact = past.iter().find(|past| past.session_id == self.id);
        let mut prefixed = past.iter().filter(|past| past.session_id.starts_with(&self.id));
        let chosen = match (exact, prefixed.next(), prefixed.next()) {
            (Some(exact), _, _) | (None, Some(exact), None) => exact,
            (None, None, _) => {
                return format!(
                    "No session of this conversation starts with `{}`; !sessions lists them.",
                    self.id
                );
            }
            (None, Some(_), Some(_)) => {
                return format!(
                    "`{}` starts more than one of this conversation's sessions; give more of its id.",
                    self.id
                );
            }
        };
        if pool.kept_session(&key).as_deref() == Some(chosen.session_id.as_str()) {
            return format!("This conversation runs on session {} already.", chosen.session_id);
        }
        let title = chosen
            .title
            .as_deref()
            .map(|title| format!(" ({title})"))
            .unwrap_or_default();
        match pool.resume(&key, &chosen.session_id) {
            Ok(()) => format!(
                "This conversation's next turns run on session {}{title}; the one it ran on is kept.",
                chosen.session_id
            ),
            Err(error) => format!("Cannot resume {}: {error}.", chosen.session_id),
        }
    }
}
