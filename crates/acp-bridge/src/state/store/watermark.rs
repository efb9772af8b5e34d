//! Watermarks: per relay URL, the newest `created_at` the daemon has
//! processed. Intake subscribes with `since` derived from it after a restart
//! or a reconnect (the SDK would re-send its original `since`), so nothing
//! that arrived while the daemon was away is missed and old history is not
//! replayed. A watermark never moves backwards: events arrive out of order,
//! and an older one must not reopen a window already covered.
//!
//! The relay URL is used as given; the caller normalises it.
//!
//! The same table keeps the *seen horizon*, under a key that is no relay
//! URL: housekeeping may have pruned the seen entries (finished journal
//! rows) of events dated before it, so no subscription may reach below it
//! again. It never moves backwards either.

use std::sync::Arc;

use nostr_sdk::prelude::{RelayUrl, Timestamp};
use rusqlite::{OptionalExtension, params};

use super::{Result, Store, sql_seconds};

/// The door to the watermarks and the seen horizon, the only way to the
/// table: the intake advances a relay's watermark as it catches up, the
/// relay links read it for `since`, housekeeping raises the horizon before
/// it prunes. Values read are unix seconds, as `subscription_since` takes
/// them.
#[derive(Debug, Clone)]
pub(crate) struct Watermarks {
    store: Arc<Store>,
}

impl Watermarks {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Watermarks { store }
    }

    /// The watermark of `relay`, if one was ever recorded.
    pub(crate) fn of(&self, relay: &RelayUrl) -> Result<Option<i64>> {
        self.store.watermark(relay.as_str())
    }

    /// Raises the watermark of `relay` to `created_at`; a lower value
    /// leaves it where it is.
    pub(crate) fn advance(&self, relay: &RelayUrl, created_at: Timestamp) -> Result<()> {
        self.store
            .advance_watermark(relay.as_str(), sql_seconds(created_at.as_secs()))
    }

    /// The date before which seen entries may have been pruned, if any were.
    pub(crate) fn seen_horizon(&self) -> Result<Option<i64>> {
        self.store.seen_horizon()
    }

    /// Raises the seen horizon to `created_at` (unix seconds; before
    /// pruning what it covers); a lower value leaves it where it is.
    pub(crate) fn raise_seen_horizon(&self, created_at: i64) -> Result<()> {
        self.store.raise_seen_horizon(created_at)
    }
}

impl Store {
    /// The watermark of `relay`, if one was ever recorded.
    pub(super) fn watermark(&self, relay: &str) -> Result<Option<i64>> {
        let conn = self.conn();
        let created_at = conn
            .prepare_cached("SELECT created_at FROM watermark WHERE relay = ?1")?
            .query_row(params![relay], |row| row.get(0))
            .optional()?;
        Ok(created_at)
    }

    /// Raises the watermark of `relay` to `created_at`; a lower value leaves
    /// it where it is.
    pub(super) fn advance_watermark(&self, relay: &str, created_at: i64) -> Result<()> {
        let conn = self.conn();
        conn.prepare_cached(
            "INSERT INTO watermark (relay, created_at) VALUES (?1, ?2)
             ON CONFLICT (relay) DO UPDATE
             SET created_at = max(created_at, excluded.created_at)",
        )?
        .execute(params![relay, created_at])?;
        Ok(())
    }
}

/// The seen horizon's row in the watermark table (a relay URL has a scheme).
const SEEN_HORIZON_KEY: &str = "seen-horizon";

impl Store {
    /// The date before which seen entries may have been pruned, if any were.
    pub(super) fn seen_horizon(&self) -> Result<Option<i64>> {
        self.watermark(SEEN_HORIZON_KEY)
    }

    /// Raises the seen horizon to `created_at` (before pruning what it
    /// covers); a lower value leaves it where it is.
    pub(super) fn raise_seen_horizon(&self, created_at: i64) -> Result<()> {
        self.advance_watermark(SEEN_HORIZON_KEY, created_at)
    }
}

#[cfg(test)]
mod tests {
    use super::super::scratch::ScratchDir;
    use super::*;

    const RELAY_A: &str = "wss://a.example";
    const RELAY_B: &str = "wss://b.example";

    #[test]
    fn watermark_never_moves_backwards() {
        let dir = ScratchDir::new("watermark");
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.watermark(RELAY_A).unwrap(), None);
        store.advance_watermark(RELAY_A, 1_000).unwrap();
        store.advance_watermark(RELAY_A, 900).unwrap();
        assert_eq!(store.watermark(RELAY_A).unwrap(), Some(1_000));
        store.advance_watermark(RELAY_A, 1_001).unwrap();
        assert_eq!(store.watermark(RELAY_A).unwrap(), Some(1_001));

        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.watermark(RELAY_A).unwrap(), Some(1_001));
    }

    #[test]
    fn watermark_is_per_relay() {
        let dir = ScratchDir::new("watermark-relay");
        let store = Store::open(dir.path()).unwrap();
        store.advance_watermark(RELAY_A, 2_000).unwrap();
        store.advance_watermark(RELAY_B, 50).unwrap();
        assert_eq!(store.watermark(RELAY_A).unwrap(), Some(2_000));
        assert_eq!(store.watermark(RELAY_B).unwrap(), Some(50));
        assert_eq!(store.watermark("wss://c.example").unwrap(), None);
    }

    #[test]
    fn the_seen_horizon_only_rises_and_is_no_relays_watermark() {
        let dir = ScratchDir::new("seen-horizon");
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.seen_horizon().unwrap(), None);
        store.raise_seen_horizon(500).unwrap();
        store.raise_seen_horizon(400).unwrap();
        assert_eq!(store.seen_horizon().unwrap(), Some(500));
        store.advance_watermark(RELAY_A, 900).unwrap();
        assert_eq!(store.seen_horizon().unwrap(), Some(500));
    }
}
