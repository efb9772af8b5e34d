//! What the heart lends a command while it runs: narrow on purpose, so a
//! command reaches only the conversation it was given in and the handles
//! commands act on, never the heart's queues or another conversation's
//! turn.

use std::future::Future;
use std::pin::Pin;

use acp_bridge_core::mention::{ConversationKey, Mention};
use acp_client::ControlKind;

use super::StatusFacts;
use crate::agents::pool::Pool;
use crate::heart::profiles::ProfileBook;
use crate::heart::schedule::Planner;
use crate::policy::budget::Budget;
use crate::state::store::Approvals;

/// A command's answer still to be worked out (it waits on the agent).
pub(crate) type Later = Pin<Box<dyn Future<Output = String> + Send>>;

/// The heart's side of a command (see the module doc).
pub(crate) trait Context {
    /// The mention that carried the command.
    fn mention(&self) -> &Mention;

    /// Whether this conversation has a turn in flight.
    fn turn_running(&self) -> bool;

    /// Cancels this conversation's turn in flight (there is one).
    fn cancel_turn(&mut self);

    /// A fresh agent session for this conversation: after its turn in
    /// flight if there is one, else from its next turn.
    fn rotate(&mut self);

    /// The schedules (`None`: no scheduler, for want of an owner).
    fn schedules(&self) -> Option<&Planner>;

    /// What turns may spend, and what they spent.
    fn budget(&self) -> &Budget;

    /// The agent profiles and each conversation's choice of one.
    fn profiles(&self) -> &ProfileBook;

    /// `!model` / `!mode`'s answer: the heart's controls own the agent's
    /// offers, which the turns' starts keep.
    fn control(&mut self, kind: ControlKind, choice: Option<&str>) -> String;

    /// The pool of this conversation's agent profile, through which the
    /// session commands reach its sessions.
    fn pool(&self) -> Pool;

    /// Answers the command with what `work` yields once it is done,
    /// instead of with what `apply` returned: work that waits on the agent
    /// runs on a task of its own, as the heart never waits.
    fn answer_later(&mut self, work: Later);

    /// `!options`' answer: every option of the conversation's session.
    fn options(&self) -> String;

    /// `!set NAME VALUE`'s answer (`words`: NAME and VALUE, at least two
    /// words): the owner's choice for one option.
    fn set_option(&mut self, words: &[&str]) -> String;

    /// `!commands`' answer: the agent's slash commands.
    fn agent_commands(&self) -> String;

    /// What `!status` reports, as the heart and the pool see it now.
    fn status(&self) -> StatusFacts;

    /// The owner's remembered permission answers (`!permissions`).
    fn approvals(&self) -> &Approvals;

    /// The replier, for a command whose work is said in the thread
    /// (`!leave`'s self-removal from an encrypted group).
    fn replier(&self) -> &crate::outbound::reply::Replier;

    /// The conversation the command was given in.
    fn key(&self) -> &ConversationKey {
        &self.mention().conversation
    }

    /// Whether it was given in the owner's DM, which only the owner reads.
    fn in_private(&self) -> bool {
        self.mention().thread.is_direct()
    }
}
