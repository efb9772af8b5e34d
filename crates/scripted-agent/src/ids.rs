//! Identifiers the agent hands out: sessions, runs, steers, tool calls and
//! its own request ids.
//!
//! Session, run and steer ids carry a per-process random salt, then a
//! number: a client which respawns the agent never meets an old run id again
//! (a stale `expectedRunId` must not match by accident), and a session
//! reopened from an earlier process never collides with a new one. The salt comes from std's
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
        format!(
            "sess_{:08x}_{}",
            self.salt,
            self.sessions.fetch_add(1, Ordering::Relaxed)
        )
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
        let (first, second) = (ids.session(), ids.session());
        assert!(first.starts_with("sess_") && first.ends_with("_1"), "{first}");
        assert!(second.ends_with("_2") && first != second);
        assert_ne!(Ids::new().session(), first, "another process, another salt");
        assert_ne!(ids.run(), ids.run());
        assert!(ids.steer().starts_with("steer_"));
        assert!(ids.tool_call().starts_with("call_"));
    }
}
