//! Cached sibling verdicts from profiles.
//!
//! Owns the memory of what an author's kind:0 profile attests, so that a
//! sibling check that needed a network fetch of the profile is not repeated
//! for every mention. What is cached is the profile's attestation tags, not
//! a yes/no: an attestation's conditions (`kind=`, `created_at<`) depend on
//! the event being judged, so they are checked again for every event. Each
//! verdict lives for a time limit of its own kind: a positive one long (an
//! attestation is stable), a negative one short (a new sibling should not
//! wait long to be heard). An expired positive verdict is kept as *stale*
//! until it is looked up again or evicted: a known sibling is heard on it
//! while its profile is fetched anew, so a busy lookup budget never locks a
//! sibling out. The cache is bounded: at capacity it drops expired entries
//! (stale ones among them) first, then the entry closest to expiry.
//!
//! It does not decide verdicts and holds no errors: a failed profile fetch is
//! never cached as "not a sibling", the caller simply does not `put`. Time is
//! passed in (`now`), so the cache has no clock of its own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nostr_sdk::{PublicKey, Tag};

/// How long a "sibling" verdict is trusted.
pub(crate) const DEFAULT_POSITIVE_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a "not a sibling" verdict is trusted.
pub(crate) const DEFAULT_NEGATIVE_TTL: Duration = Duration::from_secs(60);
/// Authors remembered at most.
pub(crate) const DEFAULT_CAPACITY: usize = 10_000;

/// What an author's profile says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SiblingVerdict {
    /// The (signature-checked) profile carries these owner attestations.
    Sibling(Vec<Tag>),
    NotSibling,
}

#[derive(Debug, Clone)]
struct Entry {
    verdict: SiblingVerdict,
    stored_at: Instant,
}

/// Sibling verdicts per author, each valid for its verdict's time limit.
///
/// `put` at capacity scans the entries (O(capacity)); puts follow profile
/// fetches, which the gate already rate-limits, so that stays cheap.
#[derive(Debug)]
pub(crate) struct SiblingCache {
    entries: HashMap<PublicKey, Entry>,
    positive_ttl: Duration,
    negative_ttl: Duration,
    capacity: usize,
}

impl SiblingCache {
    /// A cache keeping "sibling" for `positive_ttl`, "not a sibling" for
    /// `negative_ttl`, and at most `capacity` authors (0 caches nothing).
    pub(crate) fn new(positive_ttl: Duration, negative_ttl: Duration, capacity: usize) -> Self {
        SiblingCache {
            entries: HashMap::new(),
            positive_ttl,
            negative_ttl,
            capacity,
        }
    }

    /// The live verdict on `author`; None when absent or expired (an expired
    /// negative entry is removed, an expired positive one stays stale).
    pub(crate) fn get(&mut self, author: &PublicKey, now: Instant) -> Option<SiblingVerdict> {
        let entry = self.entries.get(author)?;
        if self.remaining(entry, now).is_zero() {
            if entry.verdict == SiblingVerdict::NotSibling {
                self.entries.remove(author);
            }
            return None;
        }
        Some(entry.verdict.clone())
    }

    /// The attestations of an expired "sibling" verdict, to hear the author
    /// on while their profile is looked up again.
    pub(crate) fn stale_attestations(&self, author: &PublicKey) -> Option<&[Tag]> {
        match &self.entries.get(author)?.verdict {
            SiblingVerdict::Sibling(tags) => Some(tags),
            SiblingVerdict::NotSibling => None,
        }
    }

    /// Records `verdict` on `author` as of `now`, replacing any earlier one.
    pub(crate) fn put(&mut self, author: PublicKey, verdict: SiblingVerdict, now: Instant) {
        if self.capacity == 0 {
            return;
        }
        if !self.entries.contains_key(&author) && self.entries.len() >= self.capacity {
            self.make_room(now);
        }
        self.entries.insert(
            author,
            Entry {
                verdict,
                stored_at: now,
            },
        );
    }

    /// Authors currently remembered (expired ones included until touched or evicted).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Frees at least one slot: every expired entry, or else the one closest to expiry.
    fn make_room(&mut self, now: Instant) {
        let (positive_ttl, negative_ttl) = (self.positive_ttl, self.negative_ttl);
        self.entries
            .retain(|_, entry| !remaining(entry, now, positive_ttl, negative_ttl).is_zero());
        if self.entries.len() < self.capacity {
            return;
        }
        let closest_to_expiry = self
            .entries
            .iter()
            .min_by_key(|(_, entry)| self.remaining(entry, now))
            .map(|(author, _)| *author);
        if let Some(author) = closest_to_expiry {
            self.entries.remove(&author);
        }
    }

    fn remaining(&self, entry: &Entry, now: Instant) -> Duration {
        remaining(entry, now, self.positive_ttl, self.negative_ttl)
    }
}

/// Time left before `entry` expires; zero once expired. A `now` earlier than
/// the entry's store time counts as no time elapsed.
fn remaining(entry: &Entry, now: Instant, positive_ttl: Duration, negative_ttl: Duration) -> Duration {
    let ttl = match entry.verdict {
        SiblingVerdict::Sibling(_) => positive_ttl,
        SiblingVerdict::NotSibling => negative_ttl,
    };
    ttl.saturating_sub(now.saturating_duration_since(entry.stored_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);
    const MINUTE: Duration = Duration::from_secs(60);

    fn author(n: u32) -> PublicKey {
        let mut bytes = [0u8; 32];
        bytes[..4].copy_from_slice(&n.to_be_bytes());
        PublicKey::from_byte_array(bytes)
    }

    fn default_cache() -> SiblingCache {
        SiblingCache::new(DEFAULT_POSITIVE_TTL, DEFAULT_NEGATIVE_TTL, DEFAULT_CAPACITY)
    }

    #[test]
    fn absent_author_has_no_verdict() {
        let mut cache = default_cache();
        assert_eq!(cache.get(&author(1), Instant::now()), None);
        assert!(cache.is_empty());
    }

    #[test]
    fn negative_verdict_expires_after_its_own_ttl() {
        let mut cache = default_cache();
        let t0 = Instant::now();
        cache.put(author(1), SiblingVerdict::NotSibling, t0);
        assert_eq!(
            cache.get(&author(1), t0 + DEFAULT_NEGATIVE_TTL - SECOND),
            Some(SiblingVerdict::NotSibling)
        );
        assert_eq!(cache.get(&author(1), t0 + DEFAULT_NEGATIVE_TTL), None);
        assert!(cache.is_empty(), "an expired entry is removed when read");
    }

    #[test]
    fn positive_verdict_outlives_a_negative_one() {
        let mut cache = default_cache();
        let t0 = Instant::now();
        cache.put(author(1), SiblingVerdict::Sibling(Vec::new()), t0);
        cache.put(author(2), SiblingVerdict::NotSibling, t0);
        let later = t0 + DEFAULT_NEGATIVE_TTL + SECOND;
        assert_eq!(
            cache.get(&author(1), later),
            Some(SiblingVerdict::Sibling(Vec::new()))
        );
        assert_eq!(cache.get(&author(2), later), None);
        assert_eq!(
            cache.get(&author(1), t0 + DEFAULT_POSITIVE_TTL - SECOND),
            Some(SiblingVerdict::Sibling(Vec::new()))
        );
        assert_eq!(cache.get(&author(1), t0 + DEFAULT_POSITIVE_TTL), None);
        assert_eq!(
            cache.stale_attestations(&author(1)),
            Some(&[][..]),
            "an expired sibling verdict stays, stale"
        );
        assert_eq!(cache.stale_attestations(&author(2)), None);
    }

    #[test]
    fn a_new_verdict_replaces_the_old_one_and_restarts_its_clock() {
        let mut cache = default_cache();
        let t0 = Instant::now();
        cache.put(author(1), SiblingVerdict::NotSibling, t0);
        cache.put(author(1), SiblingVerdict::Sibling(Vec::new()), t0 + 30 * SECOND);
        assert_eq!(cache.len(), 1);
        assert_eq!(
            cache.get(&author(1), t0 + 5 * MINUTE),
            Some(SiblingVerdict::Sibling(Vec::new()))
        );
    }

    #[test]
    fn capacity_holds_under_three_times_capacity_distinct_inserts() {
        let capacity: u32 = 100;
        let bound = usize::try_from(capacity).expect("small");
        let mut cache = SiblingCache::new(DEFAULT_POSITIVE_TTL, DEFAULT_NEGATIVE_TTL, bound);
        let t0 = Instant::now();
        for n in 0..3 * capacity {
            let verdict = if n % 2 == 0 {
                SiblingVerdict::Sibling(Vec::new())
            } else {
                SiblingVerdict::NotSibling
            };
            cache.put(author(n), verdict, t0 + Duration::from_millis(u64::from(n)));
            assert!(cache.len() <= bound);
        }
        assert_eq!(cache.len(), bound);
        assert_eq!(
            cache.get(&author(3 * capacity - 1), t0 + SECOND),
            Some(SiblingVerdict::NotSibling)
        );
    }

    #[test]
    fn eviction_prefers_expired_entries() {
        let mut cache = SiblingCache::new(DEFAULT_POSITIVE_TTL, DEFAULT_NEGATIVE_TTL, 3);
        let t0 = Instant::now();
        cache.put(author(1), SiblingVerdict::Sibling(Vec::new()), t0);
        cache.put(author(2), SiblingVerdict::NotSibling, t0 + 5 * MINUTE);
        cache.put(author(3), SiblingVerdict::Sibling(Vec::new()), t0 + 5 * MINUTE);
        let now = t0 + 6 * MINUTE + SECOND;
        cache.put(author(4), SiblingVerdict::Sibling(Vec::new()), now);
        assert_eq!(cache.len(), 3);
        assert_eq!(
            cache.get(&author(1), now),
            Some(SiblingVerdict::Sibling(Vec::new())),
            "oldest but live: kept"
        );
        assert_eq!(cache.get(&author(2), now), None);
        assert_eq!(
            cache.get(&author(3), now),
            Some(SiblingVerdict::Sibling(Vec::new()))
        );
        assert_eq!(
            cache.get(&author(4), now),
            Some(SiblingVerdict::Sibling(Vec::new()))
        );
    }

    #[test]
    fn without_expired_entries_the_one_closest_to_expiry_goes() {
        let mut cache = SiblingCache::new(DEFAULT_POSITIVE_TTL, DEFAULT_NEGATIVE_TTL, 2);
        let t0 = Instant::now();
        cache.put(author(1), SiblingVerdict::Sibling(Vec::new()), t0);
        cache.put(author(2), SiblingVerdict::NotSibling, t0 + SECOND);
        let now = t0 + 2 * SECOND;
        cache.put(author(3), SiblingVerdict::Sibling(Vec::new()), now);
        assert_eq!(
            cache.get(&author(1), now),
            Some(SiblingVerdict::Sibling(Vec::new()))
        );
        assert_eq!(cache.get(&author(2), now), None);
        assert_eq!(
            cache.get(&author(3), now),
            Some(SiblingVerdict::Sibling(Vec::new()))
        );
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let mut cache = SiblingCache::new(DEFAULT_POSITIVE_TTL, DEFAULT_NEGATIVE_TTL, 0);
        let now = Instant::now();
        cache.put(author(1), SiblingVerdict::Sibling(Vec::new()), now);
        assert_eq!(cache.get(&author(1), now), None);
        assert!(cache.is_empty());
    }
}
