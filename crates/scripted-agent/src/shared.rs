//! What the dispatcher ([`crate::agent`]) and the turns, steers and
//! questions it starts share: one home for the agent's state, below all of
//! them, so none of them imports the dispatcher.

use std::sync::atomic::{AtomicBool, AtomicU32};

use crate::controls::SessionControls;
use crate::ids::Ids;
use crate::options::Options;
use crate::permission::PendingRequests;
use crate::session::Sessions;
use crate::wire::Outbox;

/// Everything the dispatcher and the turns share.
#[derive(Debug)]
pub(crate) struct Agent {
    pub(crate) options: Options,
    pub(crate) outbox: Outbox,
    pub(crate) sessions: Sessions,
    pub(crate) ids: Ids,
    /// The agent's own requests (permission, elicitation) awaiting the
    /// client's answer.
    pub(crate) pending: PendingRequests,
    /// `--controls`: each session's model and mode.
    pub(crate) controls: SessionControls,
    /// The client advertised form elicitation in `initialize`.
    pub(crate) client_elicits: AtomicBool,
    /// Turns started by this process (`--fail-first-prompts`).
    pub(crate) turns_started: AtomicU32,
}

impl Agent {
    pub(crate) fn new(options: Options, outbox: Outbox) -> Self {
        Self {
            controls: SessionControls::new(options.controls),
            options,
            outbox,
            sessions: Sessions::default(),
            ids: Ids::new(),
            pending: PendingRequests::default(),
            client_elicits: AtomicBool::new(false),
            turns_started: AtomicU32::new(0),
        }
    }
}
