//! One delegated task's run on the agent: a lease of the task's own
//! session (its conversation key is the delegating one's with
//! `/task/<id>` after it, so it never shares the parent's transcript), one
//! prompt, and the prompt's final message as the result.
//!
//! Owns the task's I/O and nothing of its bookkeeping: the heart (see
//! [`tasks`](super)) learns how it ended and carries the result
//! back. The agent's questions are not put to anyone: a question dropped
//! is answered `cancelled`, as with `--permission-policy` other than
//! `ask-owner`. Once the run ends the task's key is forgotten (its
//! session, its MCP token, its records): a task is one prompt.
//!
//! What the prompt spends is the delegating turn's ([`Payer`]): counted
//! against that turn's author and conversation as it is reported, and
//! against that turn's `--budget-turn-cap`; the task that takes the turn
//! past its cap is cancelled and ends [`Ending::Capped`].

use acp_bridge_core::mention::ConversationKey;
use acp_client::{ContentBlock, TurnEvent, TurnOptions, TurnOutcome, TurnProgress};
use nostr_sdk::prelude::PublicKey;
use tokio_util::sync::CancellationToken;

use super::Ending;
use crate::budget::Budget;
use crate::budget::turn_cap::{CapReached, SharedSpend};
use crate::heart::usage;
use crate::pool::{Lease, Pools};
use crate::store::Sessions;

/// Whose account a task's prompt spends on: the turn that delegated it.
#[derive(Debug)]
pub(super) struct Payer {
    pub budget: Budget,
    /// Where the task's session usage is kept (under the task's key).
    pub sessions: Sessions,
    /// The delegating conversation.
    pub conversation: ConversationKey,
    /// The author the delegating turn's spend counts against.
    pub author: PublicKey,
    /// The delegating turn's spend against the per-turn cap (`None`: no
    /// cap).
    pub cap: Option<SharedSpend>,
    /// The task's id, its share of that spend.
    pub task: String,
}

impl Payer {
    /// A live report of the task's session cost (its session is fresh:
    /// the total is what it spent); the cap, if this took the turn past it.
    fn live_cost(&self, total: f64, currency: &str) -> Option<CapReached> {
        let cap = self.cap.as_ref()?;
        cap.lock().task_cost(&self.task, total, currency)
    }

    /// The prompt answered: its usage kept and counted against the
    /// delegating author and conversation, and the turn's cap.
    fn prompt_ended(&self, key: &ConversationKey, outcome: &TurnOutcome) -> Option<CapReached> {
        let (tokens, cost) = usage::record(&self.sessions, key, outcome).spent();
        let now = crate::store::sql_now();
        self.budget
            .prompt_spent(&self.conversation, &self.author, tokens, cost.clone(), now);
        let cap = self.cap.as_ref()?;
        cap.lock().task_ended(&self.task, tokens, cost)
    }
}

/// What a task runs: on which profile, with which options, as which key.
#[derive(Debug)]
pub(super) struct Run {
    pub pool: Pools,
    pub profile: String,
    pub options: TurnOptions,
    pub key: ConversationKey,
    pub prompt: String,
    /// How the task's key is forgotten once its one prompt ended.
    pub forgetting: crate::heart::Forgetting,
}

/// Runs the prompt on a fresh session of an agent of the run's profile
/// until it ends, `stop` is cancelled, or its spend passes the turn's cap.
pub(super) async fn run(run: Run, payer: Payer, stop: CancellationToken) -> Ending {
    let Run {
        pool,
        profile,
        options,
        key,
        prompt,
        forgetting,
    } = run;
    let lease = tokio::select! {
        leased = pool.lease(&profile, &key) => match leased {
            Ok(lease) => lease,
            Err(error) => return Ending::Failed(format!("no agent for the task: {error}")),
        },
        () = stop.cancelled() => return Ending::Stopped,
    };
    tracing::info!(session = %lease.session, "task session leased");
    let prompting = Prompting {
        pool: &pool,
        lease: &lease,
        key: &key,
        payer: &payer,
    };
    let ending = prompting.once(options, prompt, &stop).await;
    pool.release(&lease);
    forgetting.forget(&key);
    ending
}

/// The task's one prompt on its lease.
struct Prompting<'a> {
    pool: &'a Pools,
    lease: &'a Lease,
    key: &'a ConversationKey,
    payer: &'a Payer,
}

impl Prompting<'_> {
    /// The prompt and its end; a stop, or the cap reached, cancels it and
    /// waits for that end.
    async fn once(&self, options: TurnOptions, prompt: String, stop: &CancellationToken) -> Ending {
        let lease = self.lease;
        let turn = lease
            .client
            .prompt(&lease.session, vec![ContentBlock::text(prompt)], options)
            .await;
        let mut turn = match turn {
            Ok(turn) => turn,
            Err(error) => return Ending::Failed(error.to_string()),
        };
        let mut stopping = false;
        let mut capped: Option<CapReached> = None;
        loop {
            let progress = tokio::select! {
                progress = turn.next() => progress,
                () = stop.cancelled(), if !stopping => {
                    stopping = true;
                    self.cancel();
                    continue;
                }
            };
            let ended = match progress {
                Ok(TurnProgress::Event(TurnEvent::Usage(usage))) => {
                    let cost = usage.cost.as_ref();
                    let reached = cost.and_then(|cost| self.payer.live_cost(cost.amount, &cost.currency));
                    if reached.is_some() && !stopping {
                        stopping = true;
                        self.cancel();
                    }
                    capped = capped.or(reached);
                    None
                }
                // A question dropped is answered `cancelled`.
                Ok(TurnProgress::Event(_)) => None,
                Ok(TurnProgress::Finished(outcome)) => {
                    capped = capped.or(self.payer.prompt_ended(self.key, &outcome));
                    Some(Ending::Done(outcome.answer()))
                }
                Err(error) => Some(Ending::Failed(error.to_string())),
            };
            let Some(ending) = ended else { continue };
            return match (capped, stopping) {
                (Some(reached), _) => Ending::Capped(reached.notice()),
                (None, true) => Ending::Stopped,
                (None, false) => ending,
            };
        }
    }

    /// Asks the agent to stop the prompt; an agent that will not is
    /// discarded.
    fn cancel(&self) {
        let (pool, lease) = (self.pool.clone(), self.lease.clone());
        tokio::spawn(async move {
            if lease.client.cancel(&lease.session).await.is_err() {
                pool.discard(&lease);
            }
        });
    }
}
