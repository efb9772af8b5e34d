//! Who owns each conversation's workspace, and so who its agent runs as.
//!
//! Without `--agent-user`, the daemon's user; with it, that one user for
//! every conversation; with `--agent-uids FIRST-LAST` too, a uid of that
//! range for each conversation alone ([`AgentUids`] keeps which), with
//! `--agent-user`'s primary group as its group and no supplementary
//! groups. Such a uid has no account: its `HOME` is the conversation's
//! workspace, the one directory it owns.

use std::ops::RangeInclusive;
use std::path::PathBuf;

use acp_bridge_core::mention::ConversationKey;
use acp_client::AgentUser;

use crate::state::store::AgentUids;

/// Whose the conversations' workspaces are.
#[derive(Debug, Clone)]
pub(crate) enum Owners {
    /// The daemon's user: nobody else.
    Daemon,
    /// `--agent-user` alone: every conversation's.
    One(AgentUser),
    /// `--agent-uids`: a uid of the range for each conversation.
    PerConversation(ConversationUids),
}

/// `--agent-uids`: the range, the table of who holds which uid, and the
/// group (`--agent-user`'s) every one of them runs with.
#[derive(Debug, Clone)]
pub(crate) struct ConversationUids {
    pub(crate) range: RangeInclusive<u32>,
    pub(crate) uids: AgentUids,
    /// `--agent-user`: its primary group is the conversations' group.
    pub(crate) group_of: AgentUser,
}

/// No uid of `--agent-uids` is free, or the store could not say.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OwnerError {
    #[error("no agent identity is free: all {0} uids of --agent-uids are in use")]
    Full(usize),
    #[error("cannot read the conversations' agent uids: {0}")]
    Store(String),
}

impl Owners {
    /// The user a conversation's workspace (`home`) and agent belong to;
    /// `None`: the daemon's user. With `--agent-uids`, assigns the
    /// conversation a uid on first use.
    pub(crate) fn of(
        &self,
        conversation: &ConversationKey,
        home: PathBuf,
    ) -> Result<Option<AgentUser>, OwnerError> {
        match self {
            Owners::Daemon => Ok(None),
            Owners::One(user) => Ok(Some(user.clone())),
            Owners::PerConversation(each) => {
                let uid = each
                    .uids
                    .assign(conversation, &each.range)
                    .map_err(|error| OwnerError::Store(error.to_string()))?
                    .ok_or_else(|| OwnerError::Full(each.range.clone().count()))?;
                Ok(Some(AgentUser {
                    name: format!("conversation uid {uid}"),
                    uid,
                    gid: each.group_of.gid,
                    groups: vec![each.group_of.gid],
                    home,
                }))
            }
        }
    }

    /// The user the workspaces' root is checked against: no agent may
    /// change `--cwd` (with `--agent-uids`, `--agent-user`'s group stands
    /// for all of them; their uids own nothing above their workspaces).
    pub(crate) fn checked(&self) -> Option<&AgentUser> {
        match self {
            Owners::Daemon => None,
            Owners::One(user) => Some(user),
            Owners::PerConversation(each) => Some(&each.group_of),
        }
    }
}
