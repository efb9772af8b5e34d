//! The DM copies this process wrapped to the bot itself, by wrapper id.
//!
//! NIP-17 has a sender keep a copy of each DM, gift-wrapped to itself, and
//! the bot's DM subscription delivers that copy back to its intake, which
//! reads it (a replica's question says which replica asked it) and drops
//! it as the bot's own. Unwrapping it costs two decryptions; through a
//! remote signer, two round trips to the bunker, in line before the next
//! DM (BENCHMARKS §10). The copies this process wrapped need none: what
//! the intake reads off them is remembered here as they are wrapped, and
//! the intake knows them by their wrapper's id. A copy wrapped by another
//! replica, or before a restart, is not here and is unwrapped as before.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use nostr_sdk::prelude::{EventId, Tag};

/// Copies remembered at most: far more than are ever on their way back at
/// once; an older one not seen by then is unwrapped if it still comes.
const REMEMBERED: usize = 1_024;

/// What the intake reads off a copy of the bot's own DM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnCopy {
    /// The rumor's id (the DM's id as clients know it).
    pub rumor: EventId,
    /// The rumor's tags (a question's says which replica asked it).
    pub tags: Vec<Tag>,
}

/// The copies wrapped and not yet seen back, shared by the replier's
/// clones.
#[derive(Debug, Clone, Default)]
pub(crate) struct OwnCopies(Arc<Mutex<Copies>>);

#[derive(Debug, Default)]
struct Copies {
    by_wrapper: HashMap<EventId, OwnCopy>,
    /// Wrapper ids, oldest first, to forget past [`REMEMBERED`].
    order: VecDeque<EventId>,
}

impl OwnCopies {
    /// `wrapper` is the gift wrap of `copy`, made by this process.
    pub(super) fn wrapped(&self, wrapper: EventId, copy: OwnCopy) {
        let mut copies = self.lock();
        if copies.by_wrapper.insert(wrapper, copy).is_none() {
            copies.order.push_back(wrapper);
        }
        while copies.order.len() > REMEMBERED {
            if let Some(oldest) = copies.order.pop_front() {
                copies.by_wrapper.remove(&oldest);
            }
        }
    }

    /// The copy `wrapper` wraps, if this process wrapped it. Kept, not
    /// taken: each of the bot's DM relays delivers it.
    pub(crate) fn get(&self, wrapper: &EventId) -> Option<OwnCopy> {
        self.lock().by_wrapper.get(wrapper).cloned()
    }

    fn lock(&self) -> MutexGuard<'_, Copies> {
        // One insert or removal at a time: a poisoned map is still whole.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: usize) -> EventId {
        EventId::from_hex(&format!("{n:064x}")).unwrap()
    }

    fn copy(n: usize) -> OwnCopy {
        OwnCopy {
            rumor: id(n + 1_000_000),
            tags: vec![Tag::event(id(n))],
        }
    }

    #[test]
    fn a_copy_is_known_by_its_wrapper_id_on_every_relay_that_delivers_it() {
        let copies = OwnCopies::default();
        copies.wrapped(id(1), copy(1));
        assert_eq!(copies.get(&id(2)), None, "not a wrapper of ours");
        assert_eq!(copies.get(&id(1)), Some(copy(1)));
        assert_eq!(copies.get(&id(1)), Some(copy(1)), "from a second relay");
    }

    #[test]
    fn only_the_newest_copies_are_remembered() {
        let copies = OwnCopies::default();
        for n in 0..REMEMBERED + 10 {
            copies.wrapped(id(n), copy(n));
        }
        assert_eq!(copies.get(&id(9)), None, "forgotten: unwrapped if it comes");
        assert_eq!(copies.get(&id(10)), Some(copy(10)));
        assert_eq!(copies.get(&id(REMEMBERED + 9)), Some(copy(REMEMBERED + 9)));
        let remembered = copies.lock();
        assert_eq!(remembered.by_wrapper.len(), REMEMBERED);
        assert_eq!(remembered.order.len(), REMEMBERED);
    }
}
