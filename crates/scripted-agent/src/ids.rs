//! Identifiers the agent hands out: sessions, runs, steers, tool calls and
//! its own request ids.
//!
//! Sessions are numbered `sess_1`, `sess_2`, … so logs read easily. Run and
//! steer ids also carry a per-process random salt, so that a client which
//! respawns the agent never meets an old run id again (a stale
//! `expectedRunId` must not match by accident). The salt comes from std's
//! randomly keyed hasher; no randomness crate is needed.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub(crate) struct Ids {
    salt: u32,
    sessions: AtomicU64,
    others: AtomicU64,
}

impl Ids {
    pub(crate) fn new() -> Self {
        // Keep the low half: eight hex digits tell processes apart well enough.
        let salt = RandomState::new().hash_one(std::process::id()) as u32;
        Self {
            salt,
            sessions: AtomicU64::new(1),
            others: AtomicU64::new(1),
        }
    }

    pub(crate) fn session(&self) -> String {
        format!("sess_{}", self.sessions.fetch_add(1, Ordering::Relaxed))
    }

    pub(crate) fn run(&self) -> String {
        format!("run_{:08x}_{}", self.salt, self.next())
    }

    pub(crate) fn steer(&self) -> String {
        format!("steer_{:08x}_{}", self.salt, self.next())
    }

    pub(crate) fn tool_call(&self) -> String {
        format!("call_{}", self.next())
    }

    /// Id of a request the agent sends to the client.
    pub(crate) fn request(&self) -> u64 {
        self.next()
    }

    fn next(&self) -> u64 {
        self.others.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_do_not_repeat() {
        let ids = Ids::new();
        assert_eq!(ids.session(), "sess_1");
        assert_eq!(ids.session(), "sess_2");
        assert_ne!(ids.run(), ids.run());
        assert!(ids.steer().starts_with("steer_"));
        assert!(ids.tool_call().starts_with("call_"));
    }
}
