//! What the client throws away of what an agent sends, and who is told.
//!
//! An agent controls how much it streams and for which sessions. The client
//! keeps every bound itself (see [`crate::connection`]) and reports each
//! update it drops to an observer the caller installs, so that a daemon can
//! count them (a metric) without this crate knowing of metrics.

use std::fmt;
use std::sync::Arc;

/// Why an update from the agent was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DroppedUpdate {
    /// For a session this client never opened (nor was opening), or one it
    /// has forgotten.
    UnknownSession,
    /// Outside a turn, past the session's backlog bound: the oldest went.
    BacklogFull,
    /// In a turn whose caller had not read its events: past the bound the
    /// update is not delivered (it still counts toward the turn's outcome:
    /// text, usage, run id).
    TurnEventsFull,
    /// A question (permission, elicitation) that found even the questions'
    /// reserve of the turn's events full: answered cancelled at once.
    QuestionOverflow,
}

impl DroppedUpdate {
    /// A short stable name, for a metric's label.
    pub fn as_str(self) -> &'static str {
        match self {
            DroppedUpdate::UnknownSession => "unknown_session",
            DroppedUpdate::BacklogFull => "backlog_full",
            DroppedUpdate::TurnEventsFull => "turn_events_full",
            DroppedUpdate::QuestionOverflow => "question_overflow",
        }
    }
}

/// Told of every update the client drops. Called on the connection's reader
/// task while it holds the connection's lock: it must be quick and must not
/// call back into the client. The default observer ignores everything.
#[derive(Clone, Default)]
pub struct DropObserver(Option<Arc<dyn Fn(DroppedUpdate) + Send + Sync>>);

impl DropObserver {
    pub fn new(observe: impl Fn(DroppedUpdate) + Send + Sync + 'static) -> Self {
        DropObserver(Some(Arc::new(observe)))
    }

    pub(crate) fn dropped(&self, why: DroppedUpdate) {
        if let Some(observe) = &self.0 {
            observe(why);
        }
    }
}

impl fmt::Debug for DropObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "DropObserver(installed)"
        } else {
            "DropObserver(none)"
        })
    }
}
