//! A live turn's permission questions under `--permission-policy ask-owner`.
//!
//! Owns the questions the agent asked during this turn: posting each in the
//! conversation's thread (mentioning the owner), waiting for the answer the
//! heart routes from the owner's reply, rejecting on timeout (never
//! allowing), and cancelling them with the turn. One question is open at a
//! time; others wait their turn. While one is open the turn is "blocked on
//! the owner": mid-turn mentions are held here, their authors are told why,
//! and they are steered in once the question is answered.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use acp_client::{PermissionKind, PermissionOption, PermissionQuestion};
use nostr_sdk::prelude::{EventId, PublicKey};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::ask_owner::{AskOwnerDesk, numbered_options};
use crate::mention::Mention;
use crate::reply::Replier;
use crate::store::{Store, sql_now};

/// What a turn needs to ask the owner.
#[derive(Debug, Clone)]
pub struct AskOwner {
    pub desk: Arc<AskOwnerDesk>,
    pub owner: PublicKey,
    /// `None`: wait forever.
    pub timeout: Option<Duration>,
    pub store: Arc<Store>,
}

/// How an open question ended.
#[derive(Debug)]
pub(super) enum Resolution {
    Answered(PermissionOption),
    TimedOut,
}

#[derive(Debug)]
struct Open {
    question: PermissionQuestion,
    event: EventId,
    answer: oneshot::Receiver<PermissionOption>,
    deadline: Option<Instant>,
    summary: String,
}

#[derive(Debug, Default)]
pub(super) struct OwnerQuestions {
    queued: VecDeque<PermissionQuestion>,
    open: Option<Open>,
    held: Vec<Mention>,
}

impl OwnerQuestions {
    /// The agent asked: post the question now, or after the open one.
    pub async fn asked(
        &mut self,
        question: PermissionQuestion,
        under: &Mention,
        ask: &AskOwner,
        replier: &Replier,
    ) {
        if self.open.is_some() {
            self.queued.push_back(question);
        } else {
            self.post(question, under, ask, replier).await;
        }
    }

    /// What the turn waits for, while a question is open.
    pub fn waiting_on(&self) -> Option<&str> {
        self.open.as_ref().map(|open| open.summary.as_str())
    }

    pub fn hold(&mut self, mentions: Vec<Mention>) {
        self.held.extend(mentions);
    }

    /// Mentions held while the owner was asked, once nothing is open.
    pub fn take_held(&mut self) -> Vec<Mention> {
        if self.open.is_some() {
            return Vec::new();
        }
        std::mem::take(&mut self.held)
    }

    /// Resolves when the open question is answered or times out; never
    /// when none is open.
    pub async fn resolution(&mut self) -> Resolution {
        let Some(open) = self.open.as_mut() else {
            return std::future::pending().await;
        };
        let deadline = open.deadline;
        let timeout = async move {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answer = &mut open.answer => match answer {
                Ok(option) => Resolution::Answered(option),
                // The desk dropped it: treat as unanswered in time.
                Err(_) => Resolution::TimedOut,
            },
            () = timeout => Resolution::TimedOut,
        }
    }

    /// Answers the agent, then opens the next queued question.
    pub async fn resolve(
        &mut self,
        resolution: Resolution,
        under: &Mention,
        ask: &AskOwner,
        replier: &Replier,
    ) {
        let Some(open) = self.open.take() else {
            return;
        };
        close(&open.event, ask);
        let answered = match resolution {
            Resolution::Answered(option) => {
                tracing::info!(question = %open.event, kind = option.kind.as_str(), "the owner answered the agent's question");
                open.question.answer(&option.id).await
            }
            Resolution::TimedOut => {
                let reject = open
                    .question
                    .request()
                    .option_of_kind(&[PermissionKind::RejectOnce, PermissionKind::RejectAlways])
                    .cloned();
                tracing::warn!(question = %open.event, "no answer from the owner in time: rejected");
                let text = format!(
                    "No answer within {}: the agent's request ({}) was rejected.",
                    describe(ask.timeout),
                    open.summary
                );
                if let Err(error) = replier.inform(under, &text).await {
                    tracing::error!(%error, "cannot store the timeout notice");
                }
                match reject {
                    Some(reject) => open.question.answer(&reject.id).await,
                    None => open.question.cancel().await,
                }
            }
        };
        if let Err(error) = answered {
            tracing::warn!(%error, "the answer did not reach the agent");
        }
        if let Some(next) = self.queued.pop_front() {
            self.post(next, under, ask, replier).await;
        }
    }

    /// The turn is being cancelled: every question is answered `cancelled`.
    pub async fn cancel_all(&mut self, ask: Option<&AskOwner>) {
        if let Some(open) = self.open.take() {
            if let Some(ask) = ask {
                close(&open.event, ask);
            }
            let _ = open.question.cancel().await;
        }
        for question in self.queued.drain(..) {
            let _ = question.cancel().await;
        }
    }

    async fn post(
        &mut self,
        question: PermissionQuestion,
        under: &Mention,
        ask: &AskOwner,
        replier: &Replier,
    ) {
        let request = question.request();
        let summary = request.title().unwrap_or("a tool call").to_owned();
        let text = format!(
            "The agent asks for permission: {summary}\n{}\nReply to this message with the number or the name of an option{}.",
            numbered_options(&request.options),
            match ask.timeout {
                Some(timeout) => format!(" (no answer within {} means reject)", describe(Some(timeout))),
                None => String::new(),
            }
        );
        let event = match replier.ask(under, ask.owner, &text).await {
            Ok(event) => event,
            Err(error) => {
                tracing::error!(%error, "cannot post the permission question; rejecting it");
                let _ = question.cancel().await;
                return;
            }
        };
        tracing::info!(question = %event, tool = %summary, "asked the owner for permission");
        let answer = ask
            .desk
            .open(event, under, summary.clone(), request.options.clone());
        if let Ok(payload) = serde_json::to_string(under)
            && let Err(error) = ask.store.question_open(&event.to_hex(), &payload, sql_now())
        {
            tracing::warn!(%error, "cannot record the open question");
        }
        self.open = Some(Open {
            question,
            event,
            answer,
            deadline: ask.timeout.map(|timeout| Instant::now() + timeout),
            summary,
        });
    }
}

fn close(event: &EventId, ask: &AskOwner) {
    ask.desk.close(event);
    if let Err(error) = ask.store.question_close(&event.to_hex()) {
        tracing::warn!(%error, "cannot forget the closed question");
    }
}

fn describe(timeout: Option<Duration>) -> String {
    match timeout {
        Some(timeout) if timeout.as_secs() >= 60 && timeout.as_secs() % 60 == 0 => {
            format!("{} min", timeout.as_secs() / 60)
        }
        Some(timeout) => format!("{} s", timeout.as_secs().max(1)),
        None => "forever".to_owned(),
    }
}
