//! The event-id tracker every relay client of the daemon is built with.
//!
//! The SDK keeps, per client, an in-memory database that remembers the ids
//! of the events it has handled, to skip one a second relay delivers
//! again. Its default holds 35,000 ids in a table allocated up front, about
//! 1.1 MB per client before a single event arrives (BENCHMARKS §10, counted
//! with massif). The daemon's own subscriptions no longer reach the SDK
//! (the relay tap reads them, `relay_tap`), so what the tracker sees is a
//! trickle: acknowledgements and a few one-shot reads. A tracker a few
//! hundred times smaller loses nothing but the occasional skip of a
//! duplicate, which the intake's journal and the reads' own checks catch.

use nostr_sdk::prelude::{MemoryDatabase, MemoryDatabaseOptions};

/// Event ids a relay client remembers.
const SEEN_IDS: usize = 1_024;

/// A fresh tracker of [`SEEN_IDS`] ids, storing no events.
pub(crate) fn tracker() -> MemoryDatabase {
    let mut options = MemoryDatabaseOptions::new();
    options.events = false;
    options.max_events = Some(SEEN_IDS);
    MemoryDatabase::with_opts(options)
}
