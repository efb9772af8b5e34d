//! The number of mentions waiting for a turn, as the `--max-queued` cap
//! reads it: the journal's count, read again at most once per
//! [`QUEUED_COUNT_REFRESH`], plus what was admitted since.

use std::time::{Duration, Instant};

/// The journal's count of queued mentions is read again at most this often.
const QUEUED_COUNT_REFRESH: Duration = Duration::from_secs(1);

/// The number of mentions waiting for a turn, as the journal counts them,
/// read again only once [`QUEUED_COUNT_REFRESH`] has passed; admissions in
/// between are added to it.
#[derive(Debug, Default)]
pub(super) struct QueuedCount {
    known: usize,
    read_at: Option<Instant>,
}

impl QueuedCount {
    pub(super) fn get(
        &mut self,
        now: Instant,
        read: impl FnOnce() -> Result<u64, crate::state::store::StoreError>,
    ) -> usize {
        let fresh = self
            .read_at
            .is_some_and(|at| now.saturating_duration_since(at) < QUEUED_COUNT_REFRESH);
        if !fresh {
            match read() {
                Ok(count) => self.known = usize::try_from(count).unwrap_or(usize::MAX),
                Err(error) => tracing::warn!(%error, "cannot count the queued mentions"),
            }
            self.read_at = Some(now);
        }
        self.known
    }

    pub(super) fn add_one(&mut self) {
        self.known = self.known.saturating_add(1);
    }
}
