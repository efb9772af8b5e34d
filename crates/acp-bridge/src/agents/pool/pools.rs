//! One pool per agent profile, behind one handle.
//!
//! Each profile's processes, breaker, reaper and session book are its own
//! [`Pool`]: a profile whose agent keeps crashing never holds back
//! another's. This router only sends each call to the pool of the profile
//! it names (a lease) or came from (a release), and sums their status for
//! `!status`, the workspaces' reaper and `/healthz`. It does not pick a
//! conversation's profile (`profiles::resolve` does), nor bound how many
//! turns run (the heart's capacity does: the sum of the profiles').

use std::sync::Arc;

use acp_bridge_core::mention::ConversationKey;

use super::{AgentSettings, Lease, McpOffer, Pool, PoolError, PoolStatus, Starts};
use crate::state::store::{AgentGroups, AgentUids, Sessions};
use crate::telemetry::AgentCircuit;

/// The profiles' pools; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Pools {
    /// Each profile's name and pool, in the profiles' order.
    pools: Arc<[(String, Pool)]>,
    /// The default profile's index.
    default: usize,
}

impl Pools {
    /// Starts a pool for each profile (its name, how its agents run, the
    /// MCP servers its sessions are offered); `default_name`: the default
    /// profile's; `elicitation`: whether the agents' questions reach a
    /// person; `own_mcp_server`: the name of the bridge's own MCP server,
    /// whose tools' permission questions the client allows.
    pub(crate) fn start<'a>(
        profiles: impl IntoIterator<Item = (&'a str, &'a AgentSettings, Option<Arc<dyn McpOffer>>)>,
        default_name: &str,
        (elicitation, own_mcp_server): (bool, &'static str),
        (sessions, uids): (&Sessions, &AgentUids),
        groups: &AgentGroups,
    ) -> Pools {
        let pools: Vec<(String, Pool)> = profiles
            .into_iter()
            .map(|(name, agent, mcp)| {
                let pool = Pool::start(
                    name,
                    agent.clone(),
                    agent.client_config(elicitation, own_mcp_server),
                    (sessions.clone(), uids),
                    groups.clone(),
                    mcp,
                );
                (name.to_owned(), pool)
            })
            .collect();
        let default = pools
            .iter()
            .position(|(name, _)| name == default_name)
            .unwrap_or(0);
        Pools {
            pools: pools.into(),
            default,
        }
    }

    /// The pool of `profile`; the default's for a name not configured.
    fn pool(&self, profile: &str) -> (usize, &Pool) {
        let index = self
            .pools
            .iter()
            .position(|(name, _)| name == profile)
            .unwrap_or(self.default);
        (index, &self.pools[index].1)
    }

    /// An agent of `profile` and the conversation's session on it.
    pub(crate) async fn lease(
        &self,
        profile: &str,
        conversation: &ConversationKey,
    ) -> Result<Lease, PoolError> {
        let (index, pool) = self.pool(profile);
        let mut lease = pool.lease(conversation).await?;
        lease.pool = index;
        Ok(lease)
    }

    /// Whether the conversation's session on `profile` lives on an agent
    /// now (see [`Pool::has_live_session`]).
    pub(crate) fn has_live_session(&self, profile: &str, conversation: &ConversationKey) -> bool {
        self.pool(profile).1.has_live_session(conversation)
    }

    /// The pool of `profile` (the default's for a name not configured), for
    /// the owner's session commands, which act on one profile's sessions.
    pub(crate) fn of_profile(&self, profile: &str) -> Pool {
        self.pool(profile).1.clone()
    }

    /// Ends a lease, in the pool it came from.
    pub(crate) fn release(&self, lease: &Lease) {
        self.pools[lease.pool].1.release(lease);
    }

    /// Kills a leased agent that stopped honouring the protocol.
    pub(crate) fn discard(&self, lease: &Lease) {
        self.pools[lease.pool].1.discard(lease);
    }

    /// Forgets the conversation's session in every profile: its next turn
    /// opens a fresh one, wherever it runs. Called through the heart's
    /// `Forgetting` only.
    pub(crate) fn rotate(&self, conversation: &ConversationKey) {
        for (_, pool) in self.pools.iter() {
            pool.rotate(conversation);
        }
    }

    /// Each profile's status, to watch.
    pub(crate) fn watch_statuses(&self) -> Vec<tokio::sync::watch::Receiver<PoolStatus>> {
        self.pools.iter().map(|(_, pool)| pool.watch_status()).collect()
    }

    /// Each profile's name and status, in the profiles' order.
    pub(crate) fn statuses(&self) -> Vec<(&str, PoolStatus)> {
        self.pools
            .iter()
            .map(|(name, pool)| (name.as_str(), pool.status()))
            .collect()
    }

    /// `!status`'s split of the agents alive by profile (` (claude 1,
    /// codex 0)`); nothing with one profile.
    pub(crate) fn alive_by_profile(&self) -> String {
        if self.pools.len() < 2 {
            return String::new();
        }
        let each: Vec<String> = self
            .statuses()
            .into_iter()
            .map(|(name, status)| format!("{name} {}", status.alive))
            .collect();
        format!(" ({})", each.join(", "))
    }

    /// The profiles' status summed: every agent alive and live session;
    /// the first profile's trouble (starts held back, last failure).
    pub(crate) fn status(&self) -> PoolStatus {
        self.statuses()
            .into_iter()
            .fold(PoolStatus::default(), |mut sum, (_, status)| {
                sum.alive += status.alive;
                if sum.starts == Starts::Allowed {
                    sum.starts = status.starts;
                }
                sum.last_failure = sum.last_failure.or(status.last_failure);
                sum.live_sessions.extend(status.live_sessions);
                sum.awaiting.extend(status.awaiting);
                sum
            })
    }

    /// Kills every profile's agents and ends their actors.
    pub(crate) async fn shutdown(&self) {
        for (_, pool) in self.pools.iter() {
            pool.shutdown().await;
        }
    }
}

impl AgentCircuit for Pools {
    /// Any profile's trouble, named with its profile when there are several.
    fn unhealthy(&self) -> Option<String> {
        let several = self.pools.len() > 1;
        self.pools.iter().find_map(|(name, pool)| {
            pool.unhealthy().map(|trouble| {
                if several {
                    format!("profile {name}: {trouble}")
                } else {
                    trouble
                }
            })
        })
    }
}
