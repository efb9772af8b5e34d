//! The MCP server's bearer tokens: one per conversation's session, bound to
//! that conversation and no other.
//!
//! A token is 32 random bytes from the OS, written as hex; only its
//! SHA-256 is kept as the key it is looked up by, so the lookup is a hash
//! map probe on a digest, not a comparison of secrets that could leak
//! their prefix through timing. The conversation's token is the same for
//! every `session/new`, `session/load` and `session/resume` of its
//! session during this daemon run (claude-agent-acp rebuilds a session's
//! process when its `mcpServers` change), and a new one is minted once the
//! session is forgotten (`!rotate`). Tokens are not persisted: a restarted
//! daemon mints new ones for the sessions it reopens.
//!
//! A token's revocation is also a signal ([`TokenRegistry::bind`]): a
//! stdio connection is bound once, when it opens, so it is closed when its
//! token is revoked rather than serving a conversation's old session on.
//!
//! A token also names the uid its conversation's agent runs as (the
//! daemon's own without `--agent-user`): the local socket serves it only to
//! a peer of that uid (or the daemon's), so a token read by another local
//! user is of no use to them.
//!
//! Owns minting, resolving and revoking; knows nothing of HTTP or tools.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

use acp_bridge_core::mention::ConversationKey;
use nostr_sdk::hashes::{Hash, sha256};
use tokio_util::sync::CancellationToken;

/// Random bytes in a token (256 bits).
const TOKEN_BYTES: usize = 32;

/// A session's secret, as sent in its `Authorization: Bearer` header.
/// `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Token(String);

impl Token {
    /// The hex text sent to the agent.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

/// The OS gave no random bytes.
#[derive(Debug, thiserror::Error)]
#[error("cannot read random bytes for an MCP token: {0}")]
pub(crate) struct MintError(String);

/// Which conversation each live token belongs to.
#[derive(Debug, Default)]
pub(crate) struct TokenRegistry {
    inner: Mutex<Registry>,
}

/// What a live token stands for.
#[derive(Debug, Clone)]
pub(crate) struct Binding {
    pub(crate) conversation: ConversationKey,
    /// The uid the conversation's agent runs as: the one local peer, with
    /// the daemon's own, that may present this token over the socket.
    pub(crate) agent_uid: u32,
    /// Cancelled when the token is revoked.
    pub(crate) revoked: CancellationToken,
}

#[derive(Debug, Default)]
struct Registry {
    /// SHA-256 of a token → its conversation.
    by_digest: HashMap<[u8; 32], Binding>,
    /// A conversation's live token.
    by_conversation: HashMap<ConversationKey, Token>,
}

impl TokenRegistry {
    /// The conversation's token, for its agent running as `agent_uid`: the
    /// one it has, or a new one (also when its agent's uid changed, so the
    /// old uid's copy stops working).
    pub(crate) fn token_for(
        &self,
        conversation: &ConversationKey,
        agent_uid: u32,
    ) -> Result<Token, MintError> {
        let mut registry = self.lock();
        if let Some(token) = registry.by_conversation.get(conversation) {
            let same_uid = registry
                .by_digest
                .get(&digest(token.expose()))
                .is_some_and(|binding| binding.agent_uid == agent_uid);
            if same_uid {
                return Ok(token.clone());
            }
            registry.revoke(conversation);
        }
        let mut bytes = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes).map_err(|error| MintError(error.to_string()))?;
        let token = Token(bytes.iter().map(|byte| format!("{byte:02x}")).collect());
        let binding = Binding {
            conversation: conversation.clone(),
            agent_uid,
            revoked: CancellationToken::new(),
        };
        registry.by_digest.insert(digest(token.expose()), binding);
        registry
            .by_conversation
            .insert(conversation.clone(), token.clone());
        Ok(token)
    }

    /// The conversation `presented` was minted for, if it is live.
    pub(crate) fn resolve(&self, presented: &str) -> Option<ConversationKey> {
        self.bind(presented).map(|binding| binding.conversation)
    }

    /// What `presented` was minted for, if it is live: its conversation,
    /// its agent's uid, and a signal cancelled when it is revoked.
    pub(crate) fn bind(&self, presented: &str) -> Option<Binding> {
        self.lock().by_digest.get(&digest(presented)).cloned()
    }

    /// The conversation's token stops working; its next session gets a new one.
    pub(crate) fn revoke(&self, conversation: &ConversationKey) {
        self.lock().revoke(conversation);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        // A panic while holding this lock leaves the maps consistent (each
        // change is one insert or remove pair), so a poisoned lock is used.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Registry {
    fn revoke(&mut self, conversation: &ConversationKey) {
        if let Some(token) = self.by_conversation.remove(conversation)
            && let Some(binding) = self.by_digest.remove(&digest(token.expose()))
        {
            binding.revoked.cancel();
        }
    }
}

fn digest(token: &str) -> [u8; 32] {
    sha256::Hash::hash(token.as_bytes()).to_byte_array()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The uid the tests' agents run as.
    const UID: u32 = 61_000;

    fn key(name: &str) -> ConversationKey {
        ConversationKey::from_journal(name)
    }

    #[test]
    fn a_token_resolves_to_its_own_conversation_only() {
        let registry = TokenRegistry::default();
        let alice = registry.token_for(&key("alice"), UID).expect("token");
        let bob = registry.token_for(&key("bob"), UID).expect("token");
        assert_ne!(alice, bob);
        assert_eq!(alice.expose().len(), 2 * TOKEN_BYTES);
        assert_eq!(registry.resolve(alice.expose()), Some(key("alice")));
        assert_eq!(registry.resolve(bob.expose()), Some(key("bob")));
    }

    #[test]
    fn a_conversation_keeps_its_token_until_revoked() {
        let registry = TokenRegistry::default();
        let first = registry.token_for(&key("alice"), UID).expect("token");
        assert_eq!(registry.token_for(&key("alice"), UID).expect("token"), first);
        registry.revoke(&key("alice"));
        assert_eq!(
            registry.resolve(first.expose()),
            None,
            "a revoked token resolves to nothing"
        );
        let second = registry.token_for(&key("alice"), UID).expect("token");
        assert_ne!(second, first);
        assert_eq!(registry.resolve(second.expose()), Some(key("alice")));
    }

    #[test]
    fn revoking_a_token_signals_its_bindings() {
        let registry = TokenRegistry::default();
        let token = registry.token_for(&key("alice"), UID).expect("token");
        let binding = registry.bind(token.expose()).expect("bound");
        assert_eq!(binding.conversation, key("alice"));
        assert_eq!(binding.agent_uid, UID);
        let revoked = binding.revoked;
        assert!(!revoked.is_cancelled());
        registry.revoke(&key("bob"));
        assert!(!revoked.is_cancelled(), "another conversation's revocation");
        registry.revoke(&key("alice"));
        assert!(revoked.is_cancelled());
    }

    #[test]
    fn a_conversation_whose_agent_changes_uid_gets_a_new_token() {
        let registry = TokenRegistry::default();
        let first = registry.token_for(&key("alice"), UID).expect("token");
        let revoked = registry.bind(first.expose()).expect("bound").revoked;
        let second = registry.token_for(&key("alice"), UID + 1).expect("token");
        assert_ne!(second, first);
        assert!(revoked.is_cancelled(), "the old uid's token is revoked");
        assert_eq!(registry.resolve(first.expose()), None);
        assert_eq!(registry.bind(second.expose()).expect("bound").agent_uid, UID + 1);
    }

    #[test]
    fn an_unknown_token_resolves_to_nothing() {
        let registry = TokenRegistry::default();
        let alice = registry.token_for(&key("alice"), UID).expect("token");
        assert_eq!(registry.resolve(""), None);
        assert_eq!(registry.resolve(&"0".repeat(2 * TOKEN_BYTES)), None);
        let mut altered = alice.expose().to_owned();
        altered.replace_range(0..1, if altered.starts_with('0') { "1" } else { "0" });
        assert_eq!(registry.resolve(&altered), None);
    }

    #[test]
    fn a_token_is_not_shown_by_debug() {
        let registry = TokenRegistry::default();
        let token = registry.token_for(&key("alice"), UID).expect("token");
        assert!(!format!("{token:?}").contains(token.expose()));
    }
}
