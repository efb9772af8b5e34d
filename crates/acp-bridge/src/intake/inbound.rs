//! What the intake hands the heart: an accepted mention, or an owner
//! command beside the mention that carried it.
//!
//! Lives apart from the intake so that the stages below it (the heart and
//! what it drives) name the hand-off without importing the intake, which
//! imports them.

use acp_bridge_core::mention::{CommandCall, Mention};

/// What the intake hands to the heart.
#[derive(Debug)]
pub enum Inbound {
    Mention(Mention),
    /// An owner command (checked before the author gate, owner only).
    Command {
        mention: Mention,
        command: CommandCall,
    },
}
