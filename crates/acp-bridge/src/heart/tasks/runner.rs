//! One delegated task's run on the agent: a lease of the task's own
//! session (its conversation key is the delegating one's with
//! `/task/<id>` after it, so it never shares the parent's transcript), one
//! prompt, and the prompt's final message as the result.
//!
//! Owns the task's I/O and nothing of its bookkeeping: the heart (see
//! [`tasks`](super)) learns how it ended and carries the result
//! back. The agent's questions are not put to anyone: a question dropped
//! is answered `cancelled`, as with `--permission-policy` other than
//! `ask-owner`. Once the run ends the task's session is forgotten (its
//! MCP token revoked): a task is one prompt.

use acp_client::{ContentBlock, TurnOptions, TurnProgress};
use tokio_util::sync::CancellationToken;

use super::Ending;
use crate::mention::ConversationKey;
use crate::pool::{Lease, Pools};

/// Runs `prompt` on a fresh session of an agent of `profile` for `key`
/// until it ends or `stop` is cancelled.
pub(super) async fn run(
    pool: Pools,
    profile: String,
    options: TurnOptions,
    key: ConversationKey,
    prompt: String,
    stop: CancellationToken,
) -> Ending {
    let lease = tokio::select! {
        leased = pool.lease(&profile, &key) => match leased {
            Ok(lease) => lease,
            Err(error) => return Ending::Failed(format!("no agent for the task: {error}")),
        },
        () = stop.cancelled() => return Ending::Stopped,
    };
    tracing::info!(session = %lease.session, "task session leased");
    let ending = prompt_once(&pool, &lease, options, prompt, &stop).await;
    pool.release(&lease);
    pool.rotate(&key);
    ending
}

/// The prompt and its end; a stop cancels it and waits for that end.
async fn prompt_once(
    pool: &Pools,
    lease: &Lease,
    options: TurnOptions,
    prompt: String,
    stop: &CancellationToken,
) -> Ending {
    let turn = lease
        .client
        .prompt(&lease.session, vec![ContentBlock::text(prompt)], options)
        .await;
    let mut turn = match turn {
        Ok(turn) => turn,
        Err(error) => return Ending::Failed(error.to_string()),
    };
    let mut stopping = false;
    loop {
        tokio::select! {
            progress = turn.next() => match progress {
                Ok(TurnProgress::Finished(_)) if stopping => return Ending::Stopped,
                Ok(TurnProgress::Finished(outcome)) => return Ending::Done(outcome.answer()),
                // A question dropped is answered `cancelled`.
                Ok(TurnProgress::Event(_)) => {}
                Err(_) if stopping => return Ending::Stopped,
                Err(error) => return Ending::Failed(error.to_string()),
            },
            () = stop.cancelled(), if !stopping => {
                stopping = true;
                let (pool, lease) = (pool.clone(), lease.clone());
                tokio::spawn(async move {
                    if lease.client.cancel(&lease.session).await.is_err() {
                        pool.discard(&lease);
                    }
                });
            }
        }
    }
}
