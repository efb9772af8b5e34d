//! `--controls`: a session's model and mode, offered and set the ways ACP
//! agents do, so a client's `!model` / `!mode` can be tested end to end.
//!
//! With `--controls config` every session offers two config options (as
//! claude-agent-acp and codex-acp do): `model` (category `model`, values
//! `fast` and `deep`) and `mode` (category `mode`, values `ask` and
//! `code`), set with `session/set_config_option`, whose answer carries the
//! options again. With `--controls modes` only the older `modes` field is
//! offered (as qwen-code and gemini-cli do), set with `session/set_mode`.
//! A session reopened by a fresh process starts from the defaults: like a
//! real agent that does not keep the choice, the client must set it again.
//! Every final message then ends with a `model: …, mode: …` line.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

use crate::options::Controls;
use crate::rpc::RpcError;

const MODELS: [(&str, &str); 2] = [("fast", "Fast"), ("deep", "Deep")];
const MODES: [(&str, &str); 2] = [("ask", "Ask"), ("code", "Code")];

/// A session's current values.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Current {
    model: String,
    mode: String,
}

impl Default for Current {
    fn default() -> Self {
        Current {
            model: MODELS[0].0.to_owned(),
            mode: MODES[0].0.to_owned(),
        }
    }
}

/// Every session's model and mode, under `--controls`.
#[derive(Debug, Default)]
pub(crate) struct SessionControls {
    offered: Option<Controls>,
    by_session: Mutex<HashMap<String, Current>>,
}

impl SessionControls {
    pub(crate) fn new(offered: Option<Controls>) -> Self {
        SessionControls {
            offered,
            by_session: Mutex::default(),
        }
    }

    /// What an opened session's result carries (nothing without
    /// `--controls`); the session starts from the defaults.
    pub(crate) fn open(&self, session_id: &str) -> Value {
        let Some(offered) = self.offered else {
            return json!({});
        };
        let current = Current::default();
        let fields = describe(offered, &current);
        self.lock().insert(session_id.to_owned(), current);
        fields
    }

    /// `session/set_config_option {sessionId, configId, value}`.
    pub(crate) fn set_config_option(&self, params: &Value) -> Result<Value, RpcError> {
        if self.offered != Some(Controls::Config) {
            return Err(RpcError::method_not_found());
        }
        let (session_id, value) = (text(params, "sessionId"), text(params, "value"));
        let mut sessions = self.lock();
        let current = sessions
            .get_mut(session_id)
            .ok_or_else(|| RpcError::resource_not_found(format!("Session not found: {session_id}")))?;
        match text(params, "configId") {
            "model" => current.model = valid(&MODELS, value)?,
            "mode" => current.mode = valid(&MODES, value)?,
            other => {
                return Err(RpcError::invalid_params(format!(
                    "Unknown config option: {other}"
                )));
            }
        }
        log!("session {session_id}: config set to {current:?}");
        Ok(json!({ "configOptions": config_options(current) }))
    }

    /// `session/set_mode {sessionId, modeId}` (either way of offering).
    pub(crate) fn set_mode(&self, params: &Value) -> Result<Value, RpcError> {
        if self.offered.is_none() {
            return Err(RpcError::method_not_found());
        }
        let session_id = text(params, "sessionId");
        let mut sessions = self.lock();
        let current = sessions
            .get_mut(session_id)
            .ok_or_else(|| RpcError::resource_not_found(format!("Session not found: {session_id}")))?;
        current.mode = valid(&MODES, text(params, "modeId"))?;
        log!("session {session_id}: mode set to {}", current.mode);
        Ok(json!({}))
    }

    /// The final message's line saying what the turn ran on.
    pub(crate) fn status_line(&self, session_id: &str) -> Option<String> {
        self.offered?;
        let current = self.lock().get(session_id).cloned().unwrap_or_default();
        Some(format!("model: {}, mode: {}", current.model, current.mode))
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Current>> {
        self.by_session.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn text<'a>(params: &'a Value, field: &str) -> &'a str {
    params[field].as_str().unwrap_or_default()
}

fn valid(choices: &[(&str, &str)], value: &str) -> Result<String, RpcError> {
    if choices.iter().any(|(id, _)| *id == value) {
        Ok(value.to_owned())
    } else {
        Err(RpcError::invalid_params(format!("Invalid value: {value}")))
    }
}

fn describe(offered: Controls, current: &Current) -> Value {
    match offered {
        Controls::Config => json!({ "configOptions": config_options(current) }),
        Controls::Modes => json!({ "modes": {
            "currentModeId": current.mode,
            "availableModes": MODES.map(|(id, name)| json!({"id": id, "name": name})),
        }}),
    }
}

fn config_options(current: &Current) -> Value {
    let select = |id: &str, name: &str, choices: &[(&str, &str)], value: &str| {
        let options: Vec<Value> = choices
            .iter()
            .map(|(value, name)| json!({"value": value, "name": name}))
            .collect();
        json!({"id": id, "name": name, "category": id, "type": "select", "currentValue": value, "options": options})
    };
    json!([
        select("model", "Model", &MODELS, &current.model),
        select("mode", "Mode", &MODES, &current.mode),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_options_are_offered_set_and_reported() {
        let controls = SessionControls::new(Some(Controls::Config));
        let opened = controls.open("s1");
        assert_eq!(opened["configOptions"][0]["currentValue"], "fast");
        let set = json!({"sessionId": "s1", "configId": "model", "value": "deep"});
        let answer = controls.set_config_option(&set).unwrap();
        assert_eq!(answer["configOptions"][0]["currentValue"], "deep");
        let unknown = json!({"sessionId": "s1", "configId": "model", "value": "huge"});
        assert!(controls.set_config_option(&unknown).is_err());
        assert_eq!(controls.status_line("s1").unwrap(), "model: deep, mode: ask");
    }

    #[test]
    fn older_modes_are_set_with_set_mode_only() {
        let controls = SessionControls::new(Some(Controls::Modes));
        assert_eq!(controls.open("s1")["modes"]["currentModeId"], "ask");
        let set = json!({"sessionId": "s1", "configId": "mode", "value": "code"});
        assert!(controls.set_config_option(&set).is_err());
        controls
            .set_mode(&json!({"sessionId": "s1", "modeId": "code"}))
            .unwrap();
        assert_eq!(controls.status_line("s1").unwrap(), "model: fast, mode: code");
        assert_eq!(SessionControls::new(None).status_line("s1"), None);
    }
}
