//! Housekeeping: keeps the state dir from growing without bound.
//!
//! Every accepted mention leaves a journal row and usually a reply in the
//! outbox. A sent reply is only a diagnostic once the relay took it, and so
//! is one a relay refused for good: both go after `--retention`. Pending
//! mentions and replies still to publish are work, and are never pruned.
//!
//! A finished journal row is also the mention's seen entry: it keeps a
//! replayed event from being answered twice, so it may go only once the
//! date check alone would refuse its event on every relay. The intake
//! refuses events dated before the floor of the subscription that delivers
//! them and events dated more than [`MAX_FUTURE_SKEW_SECS`] ahead of their
//! arrival; so a mention accepted before `floor − MAX_FUTURE_SKEW_SECS` is
//! dated before the floor. The floor that counts is the lowest of each
//! configured relay's live subscription (or an untaken event's reach-back,
//! when lower: the link fetches from there again) and of the subscription
//! it would make next from its stored watermark (a relay that has been
//! unreachable for a month replays a month when it comes back). Rows are
//! kept for `--retention` even when that bound would allow less.
//!
//! One rule holds the two sides together: before a pass prunes, it raises
//! the store's seen horizon to the date below which it prunes, and no relay
//! link subscribes below that horizon again
//! ([`subscription_since`]). A later refetch (an untaken gift wrap dated
//! two days back, say) thus cannot reopen a window whose seen entries are
//! gone.
//!
//! This is the daemon's chore, not a table: it reads the intake's floors,
//! the pools' live sessions, the workspaces and the budgets' longest period,
//! so it sits beside `daemon` (the config wing, which wires all of them)
//! rather than in the store's wing, which imports none of those stages.

use std::time::Duration;

use nostr_sdk::prelude::{RelayUrl, Timestamp};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::agents::pool::PoolStatus;
use crate::agents::workspace::Workspaces;
use crate::base::clock_skew::MAX_FUTURE_SKEW_SECS;
use crate::intake::SubscriptionFloors;
use crate::intake::relay_link::subscription_since;
use crate::state::ledger::Ledger;
use crate::state::store::{AnsweredThreads, Outbox, SpendBook, StoreError, Watermarks, sql_seconds};

/// How often the state dir is pruned. The first pass runs at start-up.
pub(crate) const PRUNE_INTERVAL: Duration = Duration::from_secs(3600);

/// Rows removed by one pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Pruned {
    pub mentions: usize,
    pub replies: usize,
    /// Threads no longer followed (`--follow-threads`).
    pub threads: usize,
    /// Turns' spend older than the budgets' longest period.
    pub spend: usize,
}

#[derive(Debug)]
pub(crate) struct Housekeeping {
    /// Finished mentions are pruned from the journal.
    pub journal: Ledger,
    /// The relays' watermarks, and the seen horizon raised before a prune.
    pub watermarks: Watermarks,
    /// Threads no longer followed are forgotten.
    pub threads: AnsweredThreads,
    /// Replies sent or refused long ago are removed.
    pub outbox: Outbox,
    /// Turns' spend no budget period needs any more is removed.
    pub spend: SpendBook,
    /// The configured relays: their floors decide how long a finished
    /// mention must stay for dedup.
    pub relays: Vec<RelayUrl>,
    /// The intake's live subscription floors.
    pub floors: watch::Receiver<SubscriptionFloors>,
    pub retention: Duration,
    /// Conversations' workspaces idle past the retention are removed…
    pub workspaces: Workspaces,
    /// …but not those of the conversations with a live session (the
    /// pools' status, one per profile, says which).
    pub pools: Vec<watch::Receiver<PoolStatus>>,
}

impl Housekeeping {
    /// Prunes every [`PRUNE_INTERVAL`] until `stop`.
    pub(crate) async fn run(self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(PRUNE_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            match self.prune(Timestamp::now().as_secs()) {
                Ok(pruned) if pruned == Pruned::default() => {}
                Ok(pruned) => tracing::info!(
                    mentions = pruned.mentions,
                    replies = pruned.replies,
                    threads = pruned.threads,
                    spend = pruned.spend,
                    "state dir pruned"
                ),
                Err(error) => tracing::error!(%error, "cannot prune the state dir"),
            }
            self.prune_workspaces().await;
        }
    }

    /// Removes the conversations' workspaces idle past the retention,
    /// sparing those with a live session.
    async fn prune_workspaces(&self) {
        let live: std::collections::BTreeSet<_> = self
            .pools
            .iter()
            .flat_map(|pool| pool.borrow().live_sessions.clone())
            .collect();
        let removed = self
            .workspaces
            .prune(crate::agents::workspace::idle_since(self.retention), &live)
            .await;
        if !removed.is_empty() {
            let paths: Vec<String> = removed.iter().map(|path| path.display().to_string()).collect();
            tracing::info!(count = removed.len(), ?paths, "idle workspaces removed");
        }
    }

    /// One pass, as of `now` (unix seconds).
    pub(crate) fn prune(&self, now: u64) -> Result<Pruned, StoreError> {
        let retained_since = sql_seconds(now.saturating_sub(self.retention.as_secs()));
        let undated_before = self.lowest_floor(now)?.saturating_sub(MAX_FUTURE_SKEW_SECS);
        let accepted_before = retained_since.min(sql_seconds(undated_before));
        // A row accepted before `accepted_before` is of an event dated
        // before this (the intake refuses dates further ahead).
        let seen_horizon = accepted_before.saturating_add(MAX_FUTURE_SKEW_SECS as i64);
        self.watermarks.raise_seen_horizon(seen_horizon)?;
        Ok(Pruned {
            mentions: self.journal.prune(retained_since, accepted_before)?,
            replies: self.outbox.prune_settled(retained_since)?,
            threads: self.threads.prune(retained_since)?,
            spend: self
                .spend
                .prune(crate::policy::budget::spend_needed_since(sql_seconds(now)))?,
        })
    }

    /// The oldest `created_at` any configured relay may still deliver, now
    /// or after its next (re)subscription.
    fn lowest_floor(&self, now: u64) -> Result<u64, StoreError> {
        let mut lowest = now;
        let floors = self.floors.borrow();
        let seen_horizon = self.watermarks.seen_horizon()?;
        for relay in &self.relays {
            let watermark = self.watermarks.of(relay)?;
            let next = subscription_since(watermark, None, seen_horizon, now);
            let live = floors.get(relay).map_or(next, |floor| floor.as_secs());
            lowest = lowest.min(next).min(live);
        }
        Ok(lowest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::clock_skew::SINCE_SKEW;
    use crate::state::store::scratch::ScratchDir;
    use std::sync::Arc;

    use crate::state::store::{Finish, NewMention, OutgoingEvent, Store};

    const DAY: u64 = 24 * 3600;
    const NOW: u64 = 100 * DAY;

    struct Rig {
        housekeeping: Housekeeping,
        store: Arc<Store>,
        relay: RelayUrl,
        _dir: ScratchDir,
    }

    fn rig() -> Rig {
        let dir = ScratchDir::new("housekeeping");
        let relay = RelayUrl::parse("ws://127.0.0.1:7777").unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        Rig {
            housekeeping: Housekeeping {
                watermarks: Watermarks::new(Arc::clone(&store)),
                threads: AnsweredThreads::new(Arc::clone(&store)),
                outbox: Outbox::new(Arc::clone(&store)),
                spend: SpendBook::new(Arc::clone(&store)),
                journal: Ledger::new(Arc::clone(&store)),
                relays: vec![relay.clone()],
                floors: watch::Sender::new(SubscriptionFloors::default()).subscribe(),
                retention: Duration::from_secs(7 * DAY),
                workspaces: Workspaces::new(
                    &std::env::temp_dir(),
                    crate::agents::workspace::WorkspaceMode::Shared,
                    None,
                ),
                pools: vec![watch::Sender::new(PoolStatus::default()).subscribe()],
            },
            relay,
            store,
            _dir: dir,
        }
    }

    impl Rig {
        fn store(&self) -> &Store {
            &self.store
        }

        fn accept(&self, event_id: &str, at: u64) {
            let mention = NewMention {
                event_id,
                conversation: "room",
                payload: "{}",
                accepted_at: sql_seconds(at),
            };
            assert_eq!(
                self.store().journal_accept_all(&[mention]).unwrap(),
                [true],
                "{event_id} is new"
            );
        }

        fn watermark(&self, at: u64) {
            self.housekeeping
                .watermarks
                .advance(&self.relay, Timestamp::from_secs(at))
                .unwrap();
        }

        fn finish(&self, event_id: &str, at: u64) {
            self.store()
                .journal_finish(&[event_id], Finish::Dropped, sql_seconds(at))
                .unwrap();
        }

        fn answer(&self, event_id: &str, reply_id: &str, at: u64, sent: bool) {
            let reply = OutgoingEvent {
                event_id: reply_id,
                relay_hint: None,
                json: "{}",
            };
            self.store()
                .outbox_put(&reply, &[event_id], Finish::Answered, sql_seconds(at))
                .unwrap();
            if sent {
                self.housekeeping
                    .outbox
                    .mark_sent(&[reply_id], sql_seconds(at))
                    .unwrap();
            }
        }
    }

    #[test]
    fn finished_work_older_than_the_retention_goes_and_pending_work_stays() {
        let rig = rig();
        rig.watermark(NOW);
        let old = NOW - 8 * DAY;
        rig.accept("answered-old", old);
        rig.answer("answered-old", "reply-old", old, true);
        rig.accept("unsent-old", old);
        rig.answer("unsent-old", "reply-unsent", old, false);
        rig.accept("pending-old", old);
        rig.accept("notified-old", old);
        rig.finish("notified-old", old);
        rig.accept("answered-recent", NOW - DAY);
        rig.answer("answered-recent", "reply-recent", NOW - DAY, true);
        rig.accept("refused-old", old);
        rig.answer("refused-old", "reply-refused", old, false);
        rig.housekeeping
            .outbox
            .mark_refused("reply-refused", "blocked: no bots", sql_seconds(old))
            .unwrap();
        let month_start = crate::policy::budget::spend_needed_since(sql_seconds(NOW));
        for at in [month_start - 1, month_start] {
            let spent = crate::state::store::SpendRow {
                at,
                author: "a".into(),
                turns: 1,
                tokens: 0,
                cost: 0.0,
                currency: None,
            };
            let key = acp_bridge_core::mention::ConversationKey::from_journal("room");
            rig.housekeeping.spend.record(&key, &spent).unwrap();
        }

        let pruned = rig.housekeeping.prune(NOW).unwrap();

        assert_eq!(
            pruned,
            Pruned {
                mentions: 4,
                replies: 2,
                threads: 0,
                spend: 1,
            }
        );
        let pending = rig.store().journal_pending().unwrap();
        assert!(
            pending.len() == 1 && pending[0].event_id == "pending-old",
            "pending work is never pruned: {pending:?}"
        );
        let unsent = rig.housekeeping.outbox.due(i64::MAX).unwrap();
        assert!(
            unsent.len() == 1 && unsent[0].event_id == "reply-unsent",
            "unsent replies are never pruned: {unsent:?}"
        );
        assert!(rig.store().journal_contains("answered-recent").unwrap());
        assert!(!rig.store().journal_contains("answered-old").unwrap());
        assert_eq!(
            rig.housekeeping.prune(NOW).unwrap(),
            Pruned::default(),
            "idempotent"
        );
    }

    #[test]
    fn finished_mentions_stay_while_a_stale_watermark_would_replay_them() {
        let rig = rig();
        // The relay has been unreachable for a month: when it comes back it
        // delivers everything since its watermark.
        let watermark = NOW - 30 * DAY;
        rig.watermark(watermark);
        let before_the_replay = watermark - SINCE_SKEW.as_secs() - MAX_FUTURE_SKEW_SECS - 1;
        rig.accept("inside-the-replay", NOW - 20 * DAY);
        rig.finish("inside-the-replay", NOW - 20 * DAY);
        rig.accept("before-the-replay", before_the_replay);
        rig.finish("before-the-replay", before_the_replay);

        assert_eq!(rig.housekeeping.prune(NOW).unwrap().mentions, 1);
        assert!(rig.store().journal_contains("inside-the-replay").unwrap());
        assert!(!rig.store().journal_contains("before-the-replay").unwrap());
    }

    #[test]
    fn finished_mentions_stay_while_a_live_subscription_reaches_back_to_them() {
        let mut rig = rig();
        rig.watermark(NOW);
        // Subscribed three weeks ago and never reconnected since: that
        // subscription still delivers events dated after its floor.
        let floors = watch::Sender::new(SubscriptionFloors::default());
        floors.send_modify(|floors| {
            floors.insert(rig.relay.clone(), Timestamp::from_secs(NOW - 21 * DAY));
        });
        rig.housekeeping.floors = floors.subscribe();
        rig.accept("covered", NOW - 14 * DAY);
        rig.finish("covered", NOW - 14 * DAY);

        assert_eq!(rig.housekeeping.prune(NOW).unwrap().mentions, 0);
        assert!(rig.store().journal_contains("covered").unwrap());
    }

    #[test]
    fn a_pass_raises_the_seen_horizon_and_no_refetch_reaches_below_it() {
        let rig = rig();
        rig.watermark(NOW);
        let old = NOW - 8 * DAY;
        rig.accept("old", old);
        rig.finish("old", old);
        assert_eq!(rig.housekeeping.prune(NOW).unwrap().mentions, 1);
        let horizon = rig
            .housekeeping
            .watermarks
            .seen_horizon()
            .unwrap()
            .expect("raised");
        assert_eq!(horizon, sql_seconds(NOW - 7 * DAY + MAX_FUTURE_SKEW_SECS));
        assert!(
            (old + MAX_FUTURE_SKEW_SECS) < horizon as u64,
            "the pruned mention is dated below it"
        );
        // An untaken gift wrap dated two days back would have the link
        // fetch again from its date: not below the horizon.
        let refetch = subscription_since(
            Some(sql_seconds(NOW)),
            Some(Timestamp::from_secs(NOW - 9 * DAY)),
            Some(horizon),
            NOW,
        );
        assert_eq!(refetch, horizon as u64);
    }

    #[test]
    fn a_relay_without_a_watermark_bounds_nothing_beyond_the_first_start_window() {
        let rig = rig();
        rig.accept("old", NOW - 8 * DAY);
        rig.finish("old", NOW - 8 * DAY);
        assert_eq!(rig.housekeeping.prune(NOW).unwrap().mentions, 1);
    }
}
