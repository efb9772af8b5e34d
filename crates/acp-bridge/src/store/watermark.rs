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

use rusqlite::{OptionalExtension, params};

use super::{Result, Store};

impl Store {
    /// The watermark of `relay`, if one was ever recorded.
    pub fn watermark(&self, relay: &str) -> Result<Option<i64>> {
        let conn = self.conn();
        let created_at = conn
            .prepare_cached("SELECT created_at FROM watermark WHERE relay = ?1")?
            .query_row(params![relay], |row| row.get(0))
            .optional()?;
        Ok(created_at)
    }

    /// Raises the watermark of `relay` to `created_at`; a lower value leaves
    /// it where it is.
    pub fn advance_watermark(&self, relay: &str, created_at: i64) -> Result<()> {
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
    pub fn seen_horizon(&self) -> Result<Option<i64>> {
        self.watermark(SEEN_HORIZON_KEY)
    }

    /// Raises the seen horizon to `created_at` (before pruning what it
    /// covers); a lower value leaves it where it is.
    pub fn raise_seen_horizon(&self, created_at: i64) -> Result<()> {
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
