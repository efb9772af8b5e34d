//! A turn's first prompt's parts that need no agent, made beside the lease.
//!
//! Reopening a conversation's session (after `--session-idle` closed it,
//! or once its agent went away) keeps a turn waiting on the agent, about
//! half a second with claude-agent-acp (BENCHMARKS.md §9). The thread
//! context read (a relay round trip) and the fetches of the batch's media
//! (HTTP) do not need the agent, so they run beside the lease, joined in
//! the driver's own task ([`Preparation::beside`]), and the first prompt
//! waits for whichever of the two ends last instead of their sum; a turn
//! cancelled, or the daemon shutting down, while the lease is pending
//! drops both with the driver. Only when the lease has to wait: a
//! conversation whose session is live is leased at once, and overlapping
//! the two there hid nothing and cost five wake-ups per mention (both
//! runtime workers busy where one did the two in turn, BENCHMARKS §10);
//! its prompt reads and fetches in line.
//!
//! What is done ahead is what the first prompt would do anyway:
//! - the context, from the session's mark as it stood; the mark moves only
//!   once the agent accepts the prompt (`PendingMark::commit`, as before).
//!   If the lease replaced the session (the agent no longer knew it), the
//!   store cleared the mark, and the context is read again for the new
//!   session, as the prompt would have read it; so it is when a message it
//!   quotes was journaled since (a mention that joined the turn meanwhile
//!   is prompted as itself, never quoted too), and when the lease took
//!   longer than [`FRESH_FOR`] (a cold start, a lease parked for a free
//!   session: the thread may have moved on, and one more read is small
//!   beside such a wait).
//! - the media of the kinds the profile's agent took when it was last
//!   leased in this run ([`TakesSeen`]); none before that: a stranger's URL
//!   is fetched only for an agent that takes what it points to. The prompt
//!   uses the outcomes (failures too) and fetches only what is left.
//!
//! A slash command's turn prepares nothing: its prompt is the command alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_bridge_core::media_refs::MediaRef;
use acp_bridge_core::mention::{ConversationKey, Mention};
use acp_bridge_core::slash;
use tokio::time::Instant;

use super::TurnServices;
use crate::intake::media::{self, AgentTakes, FetchedAhead, MediaCache, MediaFetcher};
use crate::intake::thread_context::{Gathered, ThreadContext};

/// How long a context read ahead stays good for the prompt: the relay
/// read's own bound (`CONTEXT_FETCH_TIMEOUT`), well above a reopen.
const FRESH_FOR: Duration = Duration::from_secs(3);

/// What each profile's agent took inline when it was last leased, in this
/// run: which media a turn may fetch before its own lease says.
#[derive(Debug, Clone, Default)]
pub(crate) struct TakesSeen(Arc<Mutex<HashMap<String, AgentTakes>>>);

impl TakesSeen {
    /// `profile`'s agent takes `takes`, as its lease just said.
    pub(super) fn saw(&self, profile: &str, takes: AgentTakes) {
        self.lock().insert(profile.to_owned(), takes);
    }

    /// What `profile`'s agent took when last leased; nothing if it was not.
    fn of(&self, profile: &str) -> AgentTakes {
        self.lock().get(profile).copied().unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, AgentTakes>> {
        // One insert or read at a time: a poisoned map is still whole.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What the first prompt of a turn will need besides the agent, to be
/// made beside its lease.
#[derive(Debug)]
pub(super) struct Preparation {
    /// The thread context's reader and the batch it is read for (`None`:
    /// no context for this turn).
    context: Option<(ThreadContext, Vec<Mention>)>,
    media: Vec<MediaRef>,
    /// What the profile's agent took at its last lease: which media may be
    /// fetched ahead.
    takes: AgentTakes,
    fetcher: MediaFetcher,
    cache: MediaCache,
}

/// A thread context read ahead of its prompt.
#[derive(Debug)]
struct ContextAhead {
    gathered: Gathered,
    /// The session's mark it was read from.
    from: Option<(i64, String)>,
    read_at: Instant,
}

impl ContextAhead {
    /// Why it no longer fits the prompt of the turn answering `batch`, if
    /// it does not.
    fn stale(&self, context: &ThreadContext, batch: &[Mention]) -> Option<&'static str> {
        let first = batch.first()?;
        if mark_of(context, &first.conversation) != self.from {
            Some("the lease opened a new session")
        } else if self.read_at.elapsed() > FRESH_FOR {
            Some("read too long before the lease ended")
        } else if !context.still_new(&self.gathered) {
            Some("a message it quotes joined the turn")
        } else {
            None
        }
    }
}

/// The parts made ahead of the first prompt.
#[derive(Debug, Default)]
pub(super) struct Prepared {
    /// The context read ahead (`None`: no context for this turn).
    context: Option<ContextAhead>,
    /// The batch's media fetched ahead.
    pub(super) media: FetchedAhead,
}

impl Preparation {
    /// What the first prompt of the turn answering `batch` on `profile`
    /// will need (its thread context too when `context_for` is set);
    /// `None` for a slash command's turn.
    pub(super) fn of(
        services: &TurnServices,
        profile: &str,
        batch: &[Mention],
        context_for: Option<&[Mention]>,
    ) -> Option<Self> {
        if batch.iter().any(slash::is_command) {
            return None;
        }
        Some(Preparation {
            context: context_for.and_then(|batch| Some((services.context.clone()?, batch.to_vec()))),
            media: batch
                .iter()
                .flat_map(|mention| mention.media.iter().cloned())
                .collect(),
            takes: services.takes_seen.of(profile),
            fetcher: services.media,
            cache: services.media_cache.clone(),
        })
    }

    /// Awaits `lease` and makes the parts meanwhile, in the caller's task;
    /// returns the lease's outcome once both are done.
    pub(super) async fn beside<T>(self, lease: impl Future<Output = T>) -> (T, Prepared) {
        let started = Instant::now();
        let lease = async {
            let leased = lease.await;
            (leased, Instant::now())
        };
        let ((leased, lease_ended), (prepared, prepared_at)) = tokio::join!(lease, self.make());
        // Worth an operator's line only when it hid a wait (the lease was
        // still reopening or starting the session); a line per turn costs
        // as much as a tenth of a signature (BENCHMARKS §10).
        let lease_pending = prepared_at < lease_ended;
        crate::telemetry::info_when!(
            lease_pending,
            context_ms = prepared
                .context
                .as_ref()
                .map(|ahead| (ahead.read_at - started).as_millis() as u64),
            media_ms = (prepared_at - started).as_millis() as u64,
            media_fetched = prepared.media.len(),
            lease_pending,
            "turn prepared"
        );
        (leased, prepared)
    }

    /// The context read and the media fetched, and when both were done.
    async fn make(self) -> (Prepared, Instant) {
        let Preparation {
            context,
            media,
            takes,
            fetcher,
            cache,
        } = self;
        let read = async {
            let (context, batch) = context?;
            let from = mark_of(&context, &batch.first()?.conversation);
            let gathered = context.for_turn(&batch).await;
            Some(ContextAhead {
                gathered,
                from,
                read_at: Instant::now(),
            })
        };
        let fetch = media::fetch_ahead(&fetcher, &cache, &media, takes);
        let (context, media) = tokio::join!(read, fetch);
        (Prepared { context, media }, Instant::now())
    }
}

impl Prepared {
    /// The thread context for the first prompt of the turn answering
    /// `batch`: the one read ahead, unless it is stale (see the module's
    /// doc): then read again.
    pub(super) async fn context(&mut self, context: &ThreadContext, batch: &[Mention]) -> Gathered {
        let Some(ahead) = self.context.take() else {
            return context.for_turn(batch).await;
        };
        match ahead.stale(context, batch) {
            None => ahead.gathered,
            Some(why) => {
                tracing::info!(why, "the thread context read ahead is stale: reading it again");
                context.for_turn(batch).await
            }
        }
    }
}

/// The conversation's context mark now (`None`: none, or unreadable: the
/// read itself says so).
fn mark_of(context: &ThreadContext, conversation: &ConversationKey) -> Option<(i64, String)> {
    context.marks.of(conversation).ok().flatten()
}
