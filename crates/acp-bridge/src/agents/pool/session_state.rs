//! Where each conversation's session stands in one pool: one state per
//! conversation, as the heart's conversation `State` is for a conversation.
//!
//! A session is opening (admitted, not yet reported), live on an agent,
//! being closed (with the leases that came meanwhile), or not yet admitted
//! (leases parked until a live session or an agent slot frees). Held as one
//! map of one enum, so an impossible combination (opening and closing at
//! once, a lease parked on a live session) cannot be written. Owns the
//! bookkeeping only: the actor decides when a state changes and does the
//! agent's side. Generic over the parked lease, so it knows nothing of the
//! actor's reply channels.

use std::collections::HashMap;

use acp_bridge_core::live_sessions::Activity;
use acp_bridge_core::mention::ConversationKey;
use acp_client::SessionId;
use tokio::time::Instant;

use super::Awaited;

/// A conversation's session: valid while `generation` lives in `slot`.
#[derive(Debug)]
pub(super) struct SessionRef {
    pub(super) slot: usize,
    pub(super) generation: u64,
    pub(super) session: SessionId,
    pub(super) activity: Activity<Instant>,
}

/// Where one conversation's session stands; a conversation with none has
/// no entry.
#[derive(Debug)]
enum SessionState<W> {
    /// Admitted to open (or reopen) a session that it has not reported
    /// yet: counts as live.
    Opening,
    Live(SessionRef),
    /// Its session is being closed (idle, LRU): reopening a session the
    /// agent is still tearing down (or that a stopping agent has not saved
    /// yet) could find it gone, so the leases that come meanwhile wait here.
    Closing(Vec<W>),
    /// Leases waiting for `awaited` to free, admitted in `arrival` order
    /// across conversations.
    Awaiting {
        arrival: u64,
        awaited: Awaited,
        leases: Vec<W>,
    },
}

/// Every conversation's session state in one pool.
#[derive(Debug)]
pub(super) struct SessionStates<W> {
    states: HashMap<ConversationKey, SessionState<W>>,
    /// The next parked conversation's place in the order of arrival.
    arrivals: u64,
}

impl<W> Default for SessionStates<W> {
    fn default() -> Self {
        SessionStates {
            states: HashMap::new(),
            arrivals: 0,
        }
    }
}

impl<W> SessionStates<W> {
    /// The conversation's live session.
    pub(super) fn live(&self, conversation: &ConversationKey) -> Option<&SessionRef> {
        match self.states.get(conversation) {
            Some(SessionState::Live(known)) => Some(known),
            _ => None,
        }
    }

    pub(super) fn live_mut(&mut self, conversation: &ConversationKey) -> Option<&mut SessionRef> {
        match self.states.get_mut(conversation) {
            Some(SessionState::Live(known)) => Some(known),
            _ => None,
        }
    }

    /// Every live session.
    pub(super) fn live_sessions(&self) -> impl Iterator<Item = (&ConversationKey, &SessionRef)> {
        self.states.iter().filter_map(|(key, state)| match state {
            SessionState::Live(known) => Some((key, known)),
            _ => None,
        })
    }

    /// How many sessions are live.
    pub(super) fn live_count(&self) -> usize {
        self.live_sessions().count()
    }

    /// Whether the conversation has a session live or being opened.
    pub(super) fn holds_a_session(&self, conversation: &ConversationKey) -> bool {
        matches!(
            self.states.get(conversation),
            Some(SessionState::Live(_) | SessionState::Opening)
        )
    }

    /// The sessions that count against `--max-live-sessions`: live and opening.
    pub(super) fn counted(&self) -> usize {
        self.states
            .values()
            .filter(|state| matches!(state, SessionState::Live(_) | SessionState::Opening))
            .count()
    }

    /// The conversation, which has no session, is admitted to open one.
    pub(super) fn opening(&mut self, conversation: &ConversationKey) {
        self.states
            .entry(conversation.clone())
            .or_insert(SessionState::Opening);
    }

    /// The conversation opened `session`: it is live, unless its old one is
    /// still being closed (those leases reopen it then).
    pub(super) fn opened(&mut self, conversation: ConversationKey, session: SessionRef) {
        if let Some(SessionState::Closing(_)) = self.states.get(&conversation) {
            return;
        }
        self.states.insert(conversation, SessionState::Live(session));
    }

    /// The conversation's lease ended: a conversation runs one turn at a
    /// time, so it opens nothing any more (a failed open ends here).
    pub(super) fn stop_opening(&mut self, conversation: &ConversationKey) {
        if let Some(SessionState::Opening) = self.states.get(conversation) {
            self.states.remove(conversation);
        }
    }

    /// Takes the conversation's live session out.
    pub(super) fn take_live(&mut self, conversation: &ConversationKey) -> Option<SessionRef> {
        match self.states.remove(conversation) {
            Some(SessionState::Live(known)) => Some(known),
            Some(other) => {
                self.states.insert(conversation.clone(), other);
                None
            }
            None => None,
        }
    }

    /// Forgets the live sessions on `slot` (its agent is gone).
    pub(super) fn vacate(&mut self, slot: usize) {
        self.states
            .retain(|_, state| !matches!(state, SessionState::Live(known) if known.slot == slot));
    }

    /// The conversation's session, taken out already, is being closed.
    pub(super) fn closing(&mut self, conversation: &ConversationKey) {
        self.states
            .entry(conversation.clone())
            .or_insert_with(|| SessionState::Closing(Vec::new()));
    }

    /// Parks `lease` if the conversation's session is being closed, else
    /// hands it back.
    pub(super) fn wait_for_close(&mut self, conversation: &ConversationKey, lease: W) -> Option<W> {
        match self.states.get_mut(conversation) {
            Some(SessionState::Closing(waiting)) => {
                waiting.push(lease);
                None
            }
            _ => Some(lease),
        }
    }

    /// The conversation's session is closed: the leases that waited for it.
    pub(super) fn closed(&mut self, conversation: &ConversationKey) -> Vec<W> {
        match self.states.remove(conversation) {
            Some(SessionState::Closing(waiting)) => waiting,
            Some(other) => {
                self.states.insert(conversation.clone(), other);
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// Parks the conversation's `lease` until `awaited` frees.
    pub(super) fn park(&mut self, conversation: &ConversationKey, awaited: Awaited, lease: W) {
        if let Some(SessionState::Awaiting { leases, .. }) = self.states.get_mut(conversation) {
            return leases.push(lease);
        }
        self.arrivals += 1;
        let parked = SessionState::Awaiting {
            arrival: self.arrivals,
            awaited,
            leases: vec![lease],
        };
        self.states.insert(conversation.clone(), parked);
    }

    /// Whether any lease is parked.
    pub(super) fn any_parked(&self) -> bool {
        self.parked().next().is_some()
    }

    /// The conversations with parked leases, and what each awaits.
    pub(super) fn parked(&self) -> impl Iterator<Item = (&ConversationKey, Awaited)> + Clone {
        self.states.iter().filter_map(|(key, state)| match state {
            SessionState::Awaiting { awaited, .. } => Some((key, *awaited)),
            _ => None,
        })
    }

    /// Every parked lease, taken out in the order their conversations arrived.
    pub(super) fn unpark_all(&mut self) -> Vec<W> {
        let mut parked: Vec<(u64, Vec<W>)> = Vec::new();
        self.states.retain(|_, state| match state {
            SessionState::Awaiting { arrival, leases, .. } => {
                parked.push((*arrival, std::mem::take(leases)));
                false
            }
            _ => true,
        });
        parked.sort_by_key(|(arrival, _)| *arrival);
        parked.into_iter().flat_map(|(_, leases)| leases).collect()
    }

    /// Forgets every state; the leases that waited (parked, or for a close).
    pub(super) fn clear(&mut self) -> Vec<W> {
        let mut waiting = self.unpark_all();
        for (_, state) in self.states.drain() {
            if let SessionState::Closing(leases) = state {
                waiting.extend(leases);
            }
        }
        waiting
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;

    fn key(name: &str) -> ConversationKey {
        ConversationKey::from_journal(name)
    }

    fn session(slot: usize) -> SessionRef {
        SessionRef {
            slot,
            generation: 1,
            session: SessionId("s".into()),
            activity: Activity::opened_for_turn(Instant::now()),
        }
    }

    #[test]
    fn a_session_goes_from_opening_to_live_to_closing_and_back_to_nothing() {
        let mut states = SessionStates::<&str>::default();
        states.opening(&key("a"));
        assert!(states.holds_a_session(&key("a")));
        assert_eq!((states.counted(), states.live_count()), (1, 0));
        states.opened(key("a"), session(0));
        assert_eq!((states.counted(), states.live_count()), (1, 1));
        states.stop_opening(&key("a"));
        assert!(
            states.live(&key("a")).is_some(),
            "the lease's end leaves a live session"
        );
        assert!(states.take_live(&key("a")).is_some());
        states.closing(&key("a"));
        assert_eq!(
            states.wait_for_close(&key("a"), "lease"),
            None,
            "parked on the close"
        );
        states.opened(key("a"), session(0));
        assert!(states.live(&key("a")).is_none(), "a closing session is not live");
        assert_eq!(states.closed(&key("a")), ["lease"]);
        assert!(!states.holds_a_session(&key("a")));
        assert_eq!(states.wait_for_close(&key("a"), "next"), Some("next"));
    }

    #[test]
    fn parked_leases_come_out_in_their_conversations_order_of_arrival() {
        let mut states = SessionStates::default();
        states.park(&key("b"), Awaited::LiveSession, "b1");
        states.park(&key("a"), Awaited::AgentSlot, "a1");
        states.park(&key("b"), Awaited::LiveSession, "b2");
        states.opened(key("c"), session(1));
        assert!(states.any_parked());
        assert_eq!(states.parked().count(), 2);
        assert_eq!(states.unpark_all(), ["b1", "b2", "a1"]);
        assert!(!states.any_parked());
        assert_eq!(states.live_count(), 1);
    }

    #[test]
    fn vacating_a_slot_forgets_only_its_live_sessions() {
        let mut states = SessionStates::<&str>::default();
        states.opened(key("a"), session(0));
        states.opened(key("b"), session(1));
        states.opening(&key("c"));
        states.vacate(0);
        assert!(states.live(&key("a")).is_none());
        assert!(states.live(&key("b")).is_some());
        assert!(states.holds_a_session(&key("c")));
        states.closing(&key("d"));
        states.park(&key("e"), Awaited::LiveSession, "e");
        assert_eq!(states.wait_for_close(&key("d"), "d"), None);
        let mut waiting = states.clear();
        waiting.sort();
        assert_eq!(waiting, ["d", "e"]);
        assert_eq!(states.counted(), 0);
    }
}
