//! Which answered threads a relay link follows, and through which of its
//! two live thread subscriptions (`--follow-threads involved`).
//!
//! Following a thread is a live subscription to the replies that tag its
//! root. One subscription holding every root, sent again whenever a thread
//! was new, cost 3.9 M instructions per answered mention once 500 threads
//! were followed: the store read, the filter, its JSON and the SDK's copy
//! of it, all for 500 ids, on every new thread (BENCHMARKS §8). So the
//! roots are split in two. The *bulk* subscription is sent at a (re)connection
//! and when the recent roots are folded into it. The *recent* subscription,
//! at most [`RECENT_THREADS`] roots, is what a new thread re-sends. The bulk
//! is sent once per [`RECENT_THREADS`] new threads, which keeps the cost
//! per new thread small and flat.
//!
//! Pure bookkeeping: the relay link reads the store, sends what this says
//! and reports nothing back. A send that fails leaves this ahead of the
//! relay, which is harmless: a failed send means a broken connection, and a
//! reconnection starts over from [`FollowedThreads::reset`].

use std::collections::HashSet;

use nostr_sdk::prelude::EventId;

/// Roots the recent subscription holds at most before they are folded into
/// the bulk. Each new thread re-sends up to this many ids, and each fold
/// sends all of them (up to 500), so about 32 balances the two costs.
const RECENT_THREADS: usize = 32;

/// A thread as the store lists it: its root, and the sequence number of
/// the last answer in it (numbered in commit order, see the store's
/// schema version 19).
pub(super) type Answered = (EventId, i64);

/// The roots the relay link's live thread subscriptions cover.
#[derive(Debug, Default)]
pub(super) struct FollowedThreads {
    bulk: HashSet<EventId>,
    recent: Vec<EventId>,
    /// The highest answer number read so far: the store is asked only
    /// for the threads answered after it ([`FollowedThreads::read_after`]).
    /// It used to be re-read by date, a minute back, after every answer:
    /// 0.27 M instructions per mention once dozens of threads were in that
    /// minute (BENCHMARKS §10).
    checked: i64,
}

/// What a relay link sends after threads were answered.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Renewal {
    /// Every thread answered since the last renewal is followed already.
    Unchanged,
    /// Send the recent subscription again with `recent` (live only), then
    /// read what `new` hold once.
    Recent { recent: Vec<EventId>, new: Vec<EventId> },
    /// Send the bulk subscription again with `bulk` (live only), close the
    /// recent one, then read what `new` hold once.
    Folded { bulk: Vec<EventId>, new: Vec<EventId> },
}

impl FollowedThreads {
    /// After a (re)connection: `answered`, the most recently answered
    /// threads, all go into the bulk subscription; the roots to send in it.
    pub(super) fn reset(&mut self, answered: &[Answered]) -> Vec<EventId> {
        let roots: Vec<EventId> = answered.iter().map(|(root, _)| *root).collect();
        self.bulk = roots.iter().copied().collect();
        self.recent.clear();
        self.note_checked(answered);
        roots
    }

    /// After which answer number the store should be read for threads
    /// that may be new.
    pub(super) fn read_after(&self) -> i64 {
        self.checked
    }

    /// Whether a recent subscription is open on the relay.
    pub(super) fn has_recent(&self) -> bool {
        !self.recent.is_empty()
    }

    /// After threads were answered: `lately`, the threads answered after
    /// [`Self::read_after`] (known ones among them); `most_recent` lists
    /// the threads to follow when the recent roots are folded into the
    /// bulk, or `None` when the store could not say: then nothing is
    /// folded (that would follow only the new threads), the recent
    /// subscription takes the new roots past its size, and the next new
    /// thread tries the fold again.
    pub(super) fn renew(
        &mut self,
        lately: &[Answered],
        most_recent: impl FnOnce() -> Option<Vec<Answered>>,
    ) -> Renewal {
        self.note_checked(lately);
        let mut new: Vec<EventId> = Vec::new();
        for (root, _) in lately {
            if !self.bulk.contains(root) && !self.recent.contains(root) && !new.contains(root) {
                new.push(*root);
            }
        }
        if new.is_empty() {
            return Renewal::Unchanged;
        }
        let answered = if self.recent.len() + new.len() <= RECENT_THREADS {
            None
        } else {
            most_recent()
        };
        let Some(answered) = answered else {
            self.recent.extend(new.iter().copied());
            return Renewal::Recent {
                recent: self.recent.clone(),
                new,
            };
        };
        let mut bulk = self.reset(&answered);
        for root in &new {
            if self.bulk.insert(*root) {
                bulk.push(*root);
            }
        }
        Renewal::Folded { bulk, new }
    }

    fn note_checked(&mut self, answered: &[Answered]) {
        if let Some(newest) = answered.iter().map(|(_, seq)| *seq).max() {
            self.checked = self.checked.max(newest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(n: u64) -> EventId {
        EventId::from_hex(&format!("{n:064x}")).expect("hex id")
    }

    fn answered(roots: std::ops::RangeInclusive<u64>, at: i64) -> Vec<Answered> {
        roots.map(|n| (root(n), at)).collect()
    }

    #[test]
    fn new_threads_go_to_the_recent_subscription_and_known_ones_change_nothing() {
        let mut followed = FollowedThreads::default();
        assert_eq!(followed.reset(&answered(1..=3, 10)), [root(1), root(2), root(3)]);
        assert_eq!(followed.read_after(), 10);
        assert!(!followed.has_recent());

        let unreachable = || panic!("no fold while the recent subscription has room");
        let renewal = followed.renew(&[(root(2), 11), (root(4), 11)], unreachable);
        assert_eq!(
            renewal,
            Renewal::Recent {
                recent: vec![root(4)],
                new: vec![root(4)]
            }
        );
        assert_eq!(followed.read_after(), 11);
        let renewal = followed.renew(&[(root(5), 12), (root(4), 12)], unreachable);
        assert_eq!(
            renewal,
            Renewal::Recent {
                recent: vec![root(4), root(5)],
                new: vec![root(5)]
            }
        );
        assert!(followed.has_recent());
        assert_eq!(followed.renew(&[(root(1), 13)], unreachable), Renewal::Unchanged);
        assert_eq!(followed.renew(&[], unreachable), Renewal::Unchanged);
        assert_eq!(followed.read_after(), 13, "never moves back");
    }

    #[test]
    fn a_full_recent_subscription_is_folded_into_the_bulk() {
        let mut followed = FollowedThreads::default();
        followed.reset(&answered(1..=2, 10));
        let last_recent = 2 + RECENT_THREADS as u64;
        for n in 3..=last_recent {
            let renewal = followed.renew(&[(root(n), 20)], || panic!("room left"));
            assert!(matches!(renewal, Renewal::Recent { .. }), "{renewal:?}");
        }
        // One more: the store's most recent threads become the bulk, and
        // the new root is in it even when the store's list ends before it.
        let overflow = last_recent + 1;
        let renewal = followed.renew(&[(root(overflow), 30)], || Some(answered(2..=last_recent, 20)));
        let Renewal::Folded { bulk, new } = renewal else {
            panic!("folded: {renewal:?}");
        };
        assert_eq!(new, [root(overflow)]);
        assert_eq!(bulk.len(), RECENT_THREADS + 2);
        assert!(bulk.contains(&root(overflow)) && bulk.contains(&root(2)));
        assert!(!bulk.contains(&root(1)), "fell out of the store's most recent");
        assert!(!followed.has_recent());
        assert_eq!(followed.read_after(), 30);
        let renewal = followed.renew(&[(root(overflow + 1), 31)], || panic!("room again"));
        assert!(matches!(renewal, Renewal::Recent { recent, .. } if recent == [root(overflow + 1)]));
    }

    #[test]
    fn a_store_that_cannot_list_the_threads_never_unfollows_them() {
        let mut followed = FollowedThreads::default();
        followed.reset(&answered(1..=2, 10));
        for n in 3..=2 + RECENT_THREADS as u64 {
            followed.renew(&[(root(n), 20)], || panic!("room left"));
        }
        let past = 3 + RECENT_THREADS as u64;
        let renewal = followed.renew(&[(root(past), 21)], || None);
        let Renewal::Recent { recent, new } = renewal else {
            panic!("no fold without the store's list: {renewal:?}");
        };
        assert_eq!(new, [root(past)]);
        assert_eq!(
            recent.len(),
            RECENT_THREADS + 1,
            "the recent subscription takes it"
        );
        assert_eq!(followed.bulk.len(), 2, "the bulk is kept as it was");
        // The store answers again: the next new thread folds them all in.
        let renewal = followed.renew(&[(root(past + 1), 22)], || Some(answered(1..=past, 20)));
        let Renewal::Folded { bulk, .. } = renewal else {
            panic!("folded: {renewal:?}");
        };
        assert_eq!(bulk.len(), past as usize + 1);
        assert!(!followed.has_recent());
    }
}
