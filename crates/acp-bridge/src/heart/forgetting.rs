//! What a conversation forgets, live and stored, in one call: `rotate`
//! (its next turn starts a fresh session) and `forget` (it is gone).
//!
//! The live parts are the pools' (each profile's live session closed on
//! its agent, or forgotten by the client, and its MCP token revoked); the
//! stored ones are `store::ConversationRecords`', one transaction that
//! says table by table what goes. Cheap to clone: the heart, each turn's
//! driver (a session the agent filled up) and a delegated task's runner
//! (whose key ends with the task) hold one. Which of the heart's own
//! live parts a rotation touches is the heart's
//! ([`Heart::rotate_conversation`](super::Heart::rotate_conversation)):
//! none but a turn in flight, which keeps its session until it ends.

use acp_bridge_core::mention::ConversationKey;

use crate::agents::pool::Pools;
use crate::state::store::ConversationRecords;

#[derive(Debug, Clone)]
pub(crate) struct Forgetting {
    pools: Pools,
    records: ConversationRecords,
}

impl Forgetting {
    pub(crate) fn new(pools: Pools, records: ConversationRecords) -> Self {
        Forgetting { pools, records }
    }

    /// The conversation's next turn opens a fresh session: the live one
    /// ends in every profile, its MCP token stops working, and the kept
    /// session id and context mark go; the owner's choices and the
    /// conversation's profile stay (see `ConversationRecords::rotate`).
    pub(crate) fn rotate(&self, conversation: &ConversationKey) {
        self.pools.rotate(conversation);
    }

    /// The conversation is gone: what a rotation drops, and every record
    /// the store keeps for it but the journal, the spend and its agent uid
    /// (see `ConversationRecords::forget`).
    pub(crate) fn forget(&self, conversation: &ConversationKey) {
        self.pools.rotate(conversation);
        if let Err(error) = self.records.forget(conversation) {
            tracing::warn!(%conversation, %error, "cannot forget the conversation's records");
        }
    }
}
