//! `!fork`'s side question: asked in a fork of the conversation's session
//! (`session/fork`), so the answer knows the conversation while the
//! conversation's own session is neither prompted nor changed by it.
//!
//! The fork lives only for the question: it is closed (or forgotten, for
//! an agent that cannot close sessions) once answered. It asks nobody
//! anything: a permission question is answered "reject" (a side question
//! reads, it does not act), a form question is cancelled.

use acp_bridge_core::mention::ConversationKey;
use acp_client::{
    AgentClient, ContentBlock, ElicitationAction, PermissionPolicy, SessionId, TurnEvent, TurnOptions,
    TurnProgress,
};

use super::PoolError;
use super::sessions::SessionBook;

/// Asks `question` in a fork of `session` (the conversation's, on
/// `client`); the agent's answer.
pub(super) async fn ask(
    book: &SessionBook,
    client: &AgentClient,
    (conversation, session): (&ConversationKey, &SessionId),
    question: &str,
) -> Result<String, PoolError> {
    let fork = book.fork(client, conversation, session).await?;
    tracing::info!(%conversation, %session, %fork, "side question asked in a fork of the session");
    let answered = answer(client, &fork, question).await;
    let closes = client.info().is_some_and(|info| info.close_session);
    if !closes || client.close_session(&fork).await.is_err() {
        client.forget_session(&fork);
    }
    answered.map_err(PoolError::Session)
}

/// Prompts `fork` with `question` and reads its turn to the end.
async fn answer(client: &AgentClient, fork: &SessionId, question: &str) -> Result<String, String> {
    let options = TurnOptions {
        permission: PermissionPolicy::RejectOnce,
        ..TurnOptions::default()
    };
    let mut turn = client
        .prompt(fork, vec![ContentBlock::text(question)], options)
        .await
        .map_err(|error| error.to_string())?;
    loop {
        match turn.next().await.map_err(|error| error.to_string())? {
            TurnProgress::Finished(outcome) => return Ok(outcome.answer()),
            TurnProgress::Event(TurnEvent::PermissionAsked(question)) => {
                let _ = question.cancel().await;
            }
            TurnProgress::Event(TurnEvent::ElicitationAsked(question)) => {
                let _ = question.answer(ElicitationAction::Cancel).await;
            }
            TurnProgress::Event(_) => {}
        }
    }
}
