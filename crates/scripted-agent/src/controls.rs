//! `--controls`: a session's model and mode, offered and set the ways ACP
//! agents do, so a client's `!model` / `!mode` can be tested end to end.
//!
//! With `--controls config` every session offers four config options (as
//! claude-agent-acp and codex-acp do): `model` (category `model`, values
//! `fast` and `deep`), `mode` (category `mode`, values `ask` and `code`),
//! `effort` (category `thought_level`, values `low` and `high`) and the
//! boolean `brief` (named "Brief answers"), set with
//! `session/set_config_option` (a boolean's value as a JSON boolean),
//! whose answer carries the options again. With `--controls modes` only the older `modes` field is
//! offered (as qwen-code and gemini-cli do), set with `session/set_mode`.
//! A session reopened by a fresh process starts from the defaults: like a
//! real agent that does not keep the choice, the client must set it again.
//! Every final message then ends with a `model: …, mode: …` line (and
//! `, effort: …, brief: …` under `--controls config`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

use crate::options::Controls;
use crate::rpc::RpcError;

const MODELS: [(&str, &str); 2] = [("fast", "Fast"), ("deep", "Deep")];
const MODES: [(&str, &str); 2] = [("ask", "Ask"), ("code", "Code")];
const EFFORTS: [(&str, &str); 2] = [("low", "Low"), ("high", "High")];

/// A session's current values.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Current {
    model: String,
    mode: String,
    effort: String,
    brief: bool,
}

impl Default for Current {
    fn default() -> Self {
        Current {
            model: MODELS[0].0.to_owned(),
            mode: MODES[0].0.to_owned(),
            effort: EFFORTS[0].0.to_owned(),
            brief: false,
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
            "effort" => current.effort = valid(&EFFORTS, value)?,
            "brief" => {
                current.brief = params["value"]
                    .as_bool()
                    .ok_or_else(|| RpcError::invalid_params("brief takes a boolean value"))?;
            }
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
        let offered = self.offered?;
        let current = self.lock().get(session_id).cloned().unwrap_or_default();
        let line = format!("model: {}, mode: {}", current.model, current.mode);
        Some(match offered {
            Controls::Config => format!("{line}, effort: {}, brief: {}", current.effort, current.brief),
            Controls::Modes => line,
        })
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
    let select = |id: &str, name: &str, category: &str, choices: &[(&str, &str)], value: &str| {
        let options: Vec<Value> = choices
            .iter()
            .map(|(value, name)| json!({"value": value, "name": name}))
            .collect();
        json!({"id": id, "name": name, "category": category, "type": "select", "currentValue": value, "options": options})
    };
    json!([
        select("model", "Model", "model", &MODELS, &current.model),
        select("mode", "Mode", "mode", &MODES, &current.mode),
        select("effort", "Effort", "thought_level", &EFFORTS, &current.effort),
        {"id": "brief", "name": "Brief answers", "type": "boolean", "currentValue": current.brief},
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
        let brief = json!({"sessionId": "s1", "configId": "brief", "type": "boolean", "value": true});
        let answer = controls.set_config_option(&brief).unwrap();
        assert_eq!(answer["configOptions"][3]["currentValue"], true);
        assert_eq!(answer["configOptions"][2]["category"], "thought_level");
        assert_eq!(
            controls.status_line("s1").unwrap(),
            "model: deep, mode: ask, effort: low, brief: true"
        );
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
