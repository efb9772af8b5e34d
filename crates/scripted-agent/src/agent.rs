//! The agent's dispatcher: one frame from the client in, the right handler
//! run, on the state in [`crate::shared`]. Requests that finish at once are answered here;
//! a prompt starts and advertises its run here (so a second prompt or a
//! steer sent right after it already sees the live run) and is then played
//! by its own task.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::acp::{self, update};
use crate::directives::TurnScript;
use crate::goose_steer;
use crate::options::Reopen;
use crate::rpc::{self, Incoming, RpcError};
use crate::session::StartRunError;
use crate::shared::Agent;
use crate::steering::{self, Steering};
use crate::turn::{self, Turn};
use crate::wire::ClientGone;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptParams {
    session_id: String,
    prompt: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelParams {
    session_id: String,
}

impl Agent {
    /// Acts on one parsed frame. Turns are spawned into `turns`, which the
    /// caller owns so it can drop them all when the input ends.
    pub(crate) async fn dispatch(
        self: &Arc<Self>,
        frame: Value,
        turns: &mut JoinSet<()>,
    ) -> Result<(), ClientGone> {
        match rpc::classify(frame) {
            Err((id, error)) => {
                log!("invalid frame: {error}");
                self.outbox.respond_error(id, error).await
            }
            Ok(Incoming::Request { id, method, params }) => self.request(id, &method, params, turns).await,
            Ok(Incoming::Notification { method, params }) => {
                self.notification(&method, params);
                Ok(())
            }
            Ok(Incoming::Response { id, outcome }) => {
                if !self.pending.resolve(&id, outcome) {
                    log!("ignored a response to no pending request (id {id})");
                }
                Ok(())
            }
        }
    }

    async fn request(
        self: &Arc<Self>,
        id: Value,
        method: &str,
        params: Value,
        turns: &mut JoinSet<()>,
    ) -> Result<(), ClientGone> {
        match method {
            acp::INITIALIZE => {
                if let Some(ms) = self.options.init_delay_ms {
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                }
                let elicits = crate::elicit::advertised(&params);
                self.client_elicits.store(elicits, Ordering::Relaxed);
                let result = acp::initialize_result(&self.options);
                self.outbox.respond(id, result).await
            }
            acp::SESSION_NEW => {
                let outcome = self.new_session(&params);
                let opened = outcome.as_ref().ok().map(|result| result["sessionId"].clone());
                self.outbox.reply(id, outcome).await?;
                self.advertise_commands(opened.as_ref().and_then(Value::as_str))
                    .await
            }
            acp::SESSION_PROMPT => self.prompt(id, params, turns).await,
            acp::SESSION_RESUME if self.options.reopen_sessions == Some(Reopen::Resume) => {
                let outcome = self.reopen_session(&params).await;
                let opened = outcome.as_ref().ok().cloned();
                let outcome = outcome.map(|session_id| self.controls.open(&session_id));
                self.outbox.reply(id, outcome).await?;
                self.advertise_commands(opened.as_deref()).await
            }
            acp::SESSION_LOAD if self.options.reopen_sessions == Some(Reopen::Load) => {
                match self.reopen_session(&params).await {
                    Ok(session_id) => {
                        // The history, replayed before the answer as agents do.
                        let history = update::agent_text("(history of an earlier turn)");
                        acp::send_update(&self.outbox, &session_id, history).await?;
                        self.outbox.respond(id, self.controls.open(&session_id)).await
                    }
                    Err(error) => self.outbox.respond_error(id, error).await,
                }
            }
            acp::SESSION_CLOSE if self.options.reopen_sessions == Some(Reopen::Resume) => {
                let session_id = params["sessionId"].as_str().unwrap_or_default();
                log!("session {session_id}: closed");
                self.sessions.remove(session_id);
                self.outbox.respond(id, json!({})).await
            }
            acp::SESSION_LIST if self.options.list_sessions => {
                let sessions = self.sessions.list(params["cwd"].as_str());
                self.outbox.respond(id, json!({ "sessions": sessions })).await
            }
            acp::SESSION_FORK if self.options.list_sessions => {
                let outcome = self.fork_session(&params);
                self.outbox.reply(id, outcome).await
            }
            acp::SESSION_SET_CONFIG_OPTION => {
                let outcome = self.controls.set_config_option(&params);
                self.outbox.reply(id, outcome).await
            }
            acp::SESSION_SET_MODE => {
                let outcome = self.controls.set_mode(&params);
                self.outbox.reply(id, outcome).await
            }
            acp::SESSION_STEER if !self.options.no_steer => goose_steer::handle(self, id, params).await,
            acp::SESSION_STEERING if self.options.session_steering => match steering::handle(self, params) {
                Ok(Steering::Answered(result)) => self.outbox.respond(id, result).await,
                Ok(Steering::StartTurn { session_id, text }) => {
                    self.start_turn(&session_id, text, None, turns).await?;
                    let result = json!({ "outcome": "startedNewTurn" });
                    self.outbox.respond(id, result).await
                }
                Err(error) => self.outbox.respond_error(id, error).await,
            },
            _ => {
                log!("unknown method `{method}`");
                let error = RpcError::method_not_found();
                self.outbox.respond_error(id, error).await
            }
        }
    }

    fn notification(&self, method: &str, params: Value) {
        if method != acp::SESSION_CANCEL {
            return;
        }
        let Ok(CancelParams { session_id }) = serde_json::from_value(params) else {
            log!("ignored a session/cancel without a sessionId");
            return;
        };
        if self.options.ignore_cancel {
            log!("session {session_id}: cancel ignored (--ignore-cancel)");
        } else if self.sessions.cancel(&session_id) {
            log!("session {session_id}: cancel requested");
        } else {
            log!("session {session_id}: cancel with no live run, ignored");
        }
    }

    /// Takes a session of an earlier process back: any id of the shape
    /// this agent hands out is known; under `--reopen-delay-ms`, only
    /// after that long.
    async fn reopen_session(&self, params: &Value) -> Result<String, RpcError> {
        if let Some(ms) = self.options.reopen_delay_ms {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        let session_id = params["sessionId"].as_str().unwrap_or_default();
        if !session_id.starts_with("sess_") {
            return Err(RpcError::resource_not_found(format!(
                "Session not found: {session_id}"
            )));
        }
        log!("session {session_id}: reopened");
        self.sessions.insert(session_id.to_owned());
        self.sessions.set_cwd(session_id, params);
        self.sessions.offer_mcp(session_id, params);
        Ok(session_id.to_owned())
    }

    /// Under `--commands`, advertises them for the session just opened.
    async fn advertise_commands(&self, session_id: Option<&str>) -> Result<(), ClientGone> {
        match (self.options.commands.as_deref(), session_id) {
            (Some(spec), Some(session_id)) => {
                acp::send_update(&self.outbox, session_id, crate::slash::advertised(spec)).await
            }
            _ => Ok(()),
        }
    }

    fn new_session(&self, params: &Value) -> Result<Value, RpcError> {
        let cwd = params["cwd"]
            .as_str()
            .filter(|cwd| cwd.starts_with('/'))
            .ok_or_else(|| RpcError::invalid_params("cwd must be an absolute path"))?;
        let session_id = self.ids.session();
        log!("session {session_id}: created (cwd {cwd})");
        self.sessions.insert(session_id.clone());
        self.sessions.set_cwd(&session_id, params);
        self.sessions.offer_mcp(&session_id, params);
        let mut result = self.controls.open(&session_id);
        result["sessionId"] = json!(session_id);
        Ok(result)
    }

    /// A new session in the params' `cwd` with the history of their
    /// `sessionId` (which this agent keeps none of: the fork is a new
    /// session that names its origin in the log).
    fn fork_session(&self, params: &Value) -> Result<Value, RpcError> {
        let origin = params["sessionId"].as_str().unwrap_or_default();
        if !self.sessions.was_opened(origin) {
            return Err(RpcError::resource_not_found(format!(
                "Session not found: {origin}"
            )));
        }
        let result = self.new_session(params)?;
        log!("session {}: forked from {origin}", result["sessionId"]);
        Ok(result)
    }

    async fn prompt(
        self: &Arc<Self>,
        id: Value,
        params: Value,
        turns: &mut JoinSet<()>,
    ) -> Result<(), ClientGone> {
        let params: PromptParams = match serde_json::from_value(params) {
            Ok(params) => params,
            Err(error) => {
                let error = RpcError::invalid_params(error.to_string());
                return self.outbox.respond_error(id, error).await;
            }
        };
        let prompt_text = acp::text_of(&params.prompt) + &acp::media_of(&params.prompt);
        if let Some(answer) = self
            .options
            .commands
            .as_deref()
            .and_then(|spec| crate::slash::answer(spec, &prompt_text))
        {
            log!("session {}: {answer}", params.session_id);
            let text = acp::update::agent_text(&answer);
            acp::send_update(&self.outbox, &params.session_id, text).await?;
            return self.outbox.respond(id, json!({"stopReason": "end_turn"})).await;
        }
        self.start_turn(&params.session_id, prompt_text, Some(id), turns)
            .await
    }

    /// Starts a run for `prompt_text` and plays it on its own task; the
    /// prompt request `id` is answered when it ends (a turn the agent
    /// started by itself has none).
    async fn start_turn(
        self: &Arc<Self>,
        session_id: &str,
        prompt_text: String,
        id: Option<Value>,
        turns: &mut JoinSet<()>,
    ) -> Result<(), ClientGone> {
        let mut script = TurnScript::new(&self.options, &prompt_text);
        if self.turns_started.fetch_add(1, Ordering::Relaxed) < self.options.fail_first_prompts {
            script.fail = true;
        }
        let refusal = match self.sessions.start_run(session_id, self.ids.run()) {
            Ok(run) => {
                if self.options.list_sessions
                    && let Some(title) = self.sessions.title_once(session_id)
                {
                    acp::send_update(&self.outbox, session_id, update::session_title(&title)).await?;
                }
                if !script.no_run_id {
                    let started = update::active_run(Some(run.run_id()));
                    acp::send_update(&self.outbox, session_id, started).await?;
                }
                if script.advertise_wrong_run {
                    let wrong = update::active_run(Some(&self.ids.run()));
                    acp::send_update(&self.outbox, session_id, wrong).await?;
                }
                log!("session {session_id}: run {} started: {script:?}", run.run_id());
                let turn = Turn {
                    request_id: id,
                    run,
                    prompt_text,
                    script,
                };
                turns.spawn(turn::play(Arc::clone(self), turn));
                return Ok(());
            }
            Err(StartRunError::UnknownSession) => {
                RpcError::resource_not_found(format!("Session not found: {session_id}"))
            }
            Err(StartRunError::AlreadyLive(run_id)) => {
                log!("session {session_id}: prompt refused, run {run_id} is live");
                RpcError::invalid_params(format!(
                    "session already has active run `{run_id}`; use {}",
                    acp::SESSION_STEER
                ))
            }
        };
        match id {
            Some(id) => self.outbox.respond_error(id, refusal).await,
            None => Ok(()),
        }
    }
}
