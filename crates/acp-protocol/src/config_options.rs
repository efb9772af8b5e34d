//! A session's model and mode: what the agent offers, and how to set them.
//!
//! Owns the typed view of ACP's session configuration, read from the
//! results of `session/new`, `session/load` and `session/resume`, from the
//! `config_option_update` and `current_mode_update` session updates, and
//! from the answer of `session/set_config_option`. Does not own which value
//! a conversation should have: the daemon decides and asks.
//!
//! The shapes, as the ACP schema (`@agentclientprotocol/sdk`,
//! `zSessionConfigOption`) and the agents people run define them:
//! - `configOptions: [{id, name, category?, type: "select", currentValue,
//!   options: [{value, name}] | [{group, name, options: [{value, name}]}]}]`.
//!   Categories are `"mode"`, `"model"`, `"model_config"`,
//!   `"thought_level"` or any other string. claude-agent-acp offers `mode`
//!   and `model` options (and `thought_level`); codex-acp offers `mode`,
//!   `model` and many of its own categories. Set with
//!   `session/set_config_option {sessionId, configId, value}`, whose answer
//!   carries every option again (`{configOptions}`).
//! - The older `modes: {currentModeId, availableModes: [{id, name}]}`, set
//!   with `session/set_mode {sessionId, modeId}` (qwen-code and gemini-cli
//!   still offer only this).
//! - The unstable `models: {currentModelId, availableModels: [{modelId,
//!   name}]}`, set with `session/set_model {sessionId, modelId}`.
//!
//! - Boolean options (`type: "boolean"`, `currentValue: true|false`), set
//!   with `session/set_config_option {sessionId, configId, type:
//!   "boolean", value}` (stabilised in ACP v1).
//!
//! Parsing is lenient: an option that does not parse is skipped, unknown
//! fields and option types are ignored. Config options win over the older
//! fields when an agent sends both (claude-agent-acp does). `!model` and
//! `!mode` read one select option each ([`SessionControls::control`]);
//! `!options` and `!set` read every option ([`SessionControls::options`]).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::methods;

/// A session setting the owner can choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlKind {
    Model,
    Mode,
}

impl ControlKind {
    pub const ALL: [ControlKind; 2] = [ControlKind::Model, ControlKind::Mode];

    /// The config option `category` that carries this setting.
    pub fn category(self) -> &'static str {
        match self {
            ControlKind::Model => "model",
            ControlKind::Mode => "mode",
        }
    }

    pub fn as_str(self) -> &'static str {
        self.category()
    }
}

/// One value a control can take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlChoice {
    /// What is sent to set it.
    pub id: String,
    /// What people read.
    pub name: String,
}

/// The request that sets a control.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "via", rename_all = "snake_case")]
pub enum ControlRoute {
    /// `session/set_config_option` with this `configId`.
    ConfigOption { config_id: String },
    /// `session/set_config_option` of a boolean option: the value, `true`
    /// or `false` as text here, goes as a JSON boolean.
    BooleanOption { config_id: String },
    /// `session/set_mode` (the older modes).
    SetMode,
    /// `session/set_model` (the unstable models).
    SetModel,
}

impl ControlRoute {
    /// The method and params that set `value` on `session`.
    pub fn request(&self, session: &str, value: &str) -> (&'static str, Value) {
        match self {
            ControlRoute::ConfigOption { config_id } => (
                methods::SESSION_SET_CONFIG_OPTION,
                json!({"sessionId": session, "configId": config_id, "value": value}),
            ),
            ControlRoute::BooleanOption { config_id } => (
                methods::SESSION_SET_CONFIG_OPTION,
                json!({"sessionId": session, "configId": config_id, "type": "boolean", "value": value == "true"}),
            ),
            ControlRoute::SetMode => (
                methods::SESSION_SET_MODE,
                json!({"sessionId": session, "modeId": value}),
            ),
            ControlRoute::SetModel => (
                methods::SESSION_SET_MODEL,
                json!({"sessionId": session, "modelId": value}),
            ),
        }
    }
}

/// A control as the agent last described it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Control {
    pub route: ControlRoute,
    /// The value in effect, when the agent said.
    pub current: Option<String>,
    pub choices: Vec<ControlChoice>,
}

impl Control {
    /// Whether `id` is one of the choices.
    pub fn offers(&self, id: &str) -> bool {
        self.choices.iter().any(|choice| choice.id == id)
    }
}

/// What a session offers, as the agent last said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionControls {
    config_options: Option<Vec<ConfigOption>>,
    modes: Option<LegacyModes>,
    models: Option<LegacyModels>,
}

impl SessionControls {
    /// Reads a `session/new`, `session/load` or `session/resume` result.
    pub fn from_result(result: &Value) -> Self {
        let mut controls = SessionControls::default();
        controls.read_config_options(result);
        controls.modes = parse_field(result, "modes");
        controls.models = parse_field(result, "models");
        controls
    }

    /// Whether the agent described any control at all.
    pub fn is_empty(&self) -> bool {
        self.config_options.is_none() && self.modes.is_none() && self.models.is_none()
    }

    /// The control of `kind`: the first select option of its category, else
    /// the older field.
    pub fn control(&self, kind: ControlKind) -> Option<Control> {
        let option = self.config_options.iter().flatten().find(|option| {
            option.category.as_deref() == Some(kind.category()) && option.kind.as_deref() != Some("boolean")
        });
        if let Some(option) = option {
            return Some(option.select_control());
        }
        match kind {
            ControlKind::Mode => self.modes.as_ref().map(|modes| Control {
                route: ControlRoute::SetMode,
                current: modes.current_mode_id.clone(),
                choices: modes
                    .available_modes
                    .iter()
                    .map(|mode| choice(&mode.id, &mode.name))
                    .collect(),
            }),
            ControlKind::Model => self.models.as_ref().map(|models| Control {
                route: ControlRoute::SetModel,
                current: models.current_model_id.clone(),
                choices: models
                    .available_models
                    .iter()
                    .map(|model| choice(&model.model_id, &model.name))
                    .collect(),
            }),
        }
    }

    /// Takes in a `session/update` payload; `true` when it was about
    /// controls (`config_option_update`, `current_mode_update`).
    pub fn apply_update(&mut self, update: &Value) -> bool {
        match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("config_option_update") => {
                self.read_config_options(update);
                true
            }
            Some("current_mode_update") => {
                let current = update.get("currentModeId").and_then(Value::as_str);
                if let (Some(modes), Some(current)) = (self.modes.as_mut(), current) {
                    modes.current_mode_id = Some(current.to_owned());
                }
                true
            }
            _ => false,
        }
    }

    /// Records that `route` now holds `value`: the answer of
    /// `session/set_config_option` carries every option (read as they
    /// are), the older methods answer nothing (their value is taken).
    pub fn applied(&mut self, route: &ControlRoute, value: &str, answer: &Value) {
        match route {
            ControlRoute::ConfigOption { .. } | ControlRoute::BooleanOption { .. } => {
                self.read_config_options(answer)
            }
            ControlRoute::SetMode => {
                if let Some(modes) = self.modes.as_mut() {
                    modes.current_mode_id = Some(value.to_owned());
                }
            }
            ControlRoute::SetModel => {
                if let Some(models) = self.models.as_mut() {
                    models.current_model_id = Some(value.to_owned());
                }
            }
        }
    }

    /// Every config option the agent offers, select and boolean, in its
    /// order (a boolean's choices are `true` and `false`).
    pub fn options(&self) -> Vec<SessionOption> {
        self.config_options
            .iter()
            .flatten()
            .filter_map(|option| {
                let control = match option.kind.as_deref() {
                    Some("boolean") => Control {
                        route: ControlRoute::BooleanOption {
                            config_id: option.id.clone(),
                        },
                        current: option
                            .current_value
                            .as_ref()
                            .and_then(Value::as_bool)
                            .map(|value| value.to_string()),
                        choices: vec![choice("true", "true"), choice("false", "false")],
                    },
                    Some("select") | None => option.select_control(),
                    Some(_) => return None,
                };
                Some(SessionOption {
                    id: option.id.clone(),
                    name: if option.name.is_empty() {
                        option.id.clone()
                    } else {
                        option.name.clone()
                    },
                    category: option.category.clone(),
                    control,
                })
            })
            .collect()
    }

    fn read_config_options(&mut self, holder: &Value) {
        if let Some(Value::Array(options)) = holder.get("configOptions") {
            let parsed = options
                .iter()
                .filter_map(|option| serde_json::from_value(option.clone()).ok())
                .collect();
            self.config_options = Some(parsed);
        }
    }
}

fn parse_field<T: for<'de> Deserialize<'de>>(result: &Value, field: &str) -> Option<T> {
    serde_json::from_value(result.get(field)?.clone()).ok()
}

fn choice(id: &str, name: &str) -> ControlChoice {
    ControlChoice {
        id: id.to_owned(),
        name: if name.is_empty() { id } else { name }.to_owned(),
    }
}

/// One config option as the agent last described it (see
/// [`SessionControls::options`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionOption {
    /// Its `configId`.
    pub id: String,
    /// What people read (the id when the agent gave no name).
    pub name: String,
    pub category: Option<String>,
    pub control: Control,
}

impl SessionOption {
    /// Whether `word` names it: its id or its name, case-insensitive.
    pub fn named(&self, word: &str) -> bool {
        self.id.eq_ignore_ascii_case(word) || self.name.eq_ignore_ascii_case(word)
    }

    /// The choice `word` names (its id or its name, case-insensitive).
    pub fn choice(&self, word: &str) -> Option<&ControlChoice> {
        let choices = &self.control.choices;
        choices.iter().find(|choice| choice.id == word).or_else(|| {
            choices
                .iter()
                .find(|choice| choice.id.eq_ignore_ascii_case(word) || choice.name.eq_ignore_ascii_case(word))
        })
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigOption {
    id: String,
    #[serde(default)]
    name: String,
    category: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    current_value: Option<Value>,
    #[serde(default)]
    options: Vec<SelectEntry>,
}

impl ConfigOption {
    /// The option as a select control: set by its id, its current value a
    /// string, its choices the entries' values (groups flattened).
    fn select_control(&self) -> Control {
        Control {
            route: ControlRoute::ConfigOption {
                config_id: self.id.clone(),
            },
            current: self
                .current_value
                .as_ref()
                .and_then(Value::as_str)
                .map(str::to_owned),
            choices: self.options.iter().flat_map(SelectEntry::choices).collect(),
        }
    }
}

/// A select's entry: a value, or a named group of values.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
enum SelectEntry {
    Value {
        value: String,
        #[serde(default)]
        name: String,
    },
    Group {
        #[serde(default)]
        options: Vec<SelectEntry>,
    },
}

impl SelectEntry {
    fn choices(&self) -> Vec<ControlChoice> {
        match self {
            SelectEntry::Value { value, name } => vec![choice(value, name)],
            SelectEntry::Group { options } => options.iter().flat_map(SelectEntry::choices).collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LegacyModes {
    current_mode_id: Option<String>,
    #[serde(default)]
    available_modes: Vec<LegacyMode>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct LegacyMode {
    id: String,
    #[serde(default)]
    name: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LegacyModels {
    current_model_id: Option<String>,
    #[serde(default)]
    available_models: Vec<LegacyModel>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LegacyModel {
    model_id: String,
    #[serde(default)]
    name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(control: &Control) -> Vec<&str> {
        control.choices.iter().map(|choice| choice.id.as_str()).collect()
    }

    #[test]
    fn config_options_are_read_by_category_groups_flattened() {
        let result = json!({"sessionId": "s", "configOptions": [
            {"id": "effort", "name": "Effort", "category": "thought_level", "type": "select",
             "currentValue": "high", "options": [{"value": "high", "name": "High"}]},
            {"id": "fast", "name": "Fast", "type": "boolean", "currentValue": false},
            {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "opus",
             "options": [{"group": "a", "name": "A", "options": [{"value": "opus", "name": "Opus"}]},
                         {"group": "b", "name": "B", "options": [{"value": "haiku", "name": "Haiku"}]}]},
            {"id": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "ask",
             "options": [{"value": "ask", "name": "Ask"}, {"value": "code"}], "extra": 1},
            {"broken": true}
        ], "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}]}});
        let controls = SessionControls::from_result(&result);
        let model = controls.control(ControlKind::Model).unwrap();
        assert_eq!(
            model.route,
            ControlRoute::ConfigOption {
                config_id: "model".into()
            }
        );
        assert_eq!(model.current.as_deref(), Some("opus"));
        assert_eq!(ids(&model), ["opus", "haiku"]);
        let mode = controls.control(ControlKind::Mode).unwrap();
        assert_eq!(
            mode.route,
            ControlRoute::ConfigOption {
                config_id: "mode".into()
            }
        );
        assert_eq!(mode.choices[1], choice("code", "code"));
    }

    #[test]
    fn older_modes_and_models_are_the_fallback() {
        let result = json!({"sessionId": "s",
            "modes": {"currentModeId": "default", "availableModes": [{"id": "default", "name": "Default"}, {"id": "yolo", "name": "YOLO"}]},
            "models": {"currentModelId": "m1", "availableModels": [{"modelId": "m1", "name": "One"}]}});
        let mut controls = SessionControls::from_result(&result);
        let mode = controls.control(ControlKind::Mode).unwrap();
        assert_eq!(
            (mode.route.clone(), ids(&mode)),
            (ControlRoute::SetMode, vec!["default", "yolo"])
        );
        assert_eq!(
            controls.control(ControlKind::Model).unwrap().route,
            ControlRoute::SetModel
        );
        assert!(
            controls.apply_update(&json!({"sessionUpdate": "current_mode_update", "currentModeId": "yolo"}))
        );
        assert_eq!(
            controls.control(ControlKind::Mode).unwrap().current.as_deref(),
            Some("yolo")
        );
        controls.applied(&ControlRoute::SetModel, "m2", &json!({}));
        assert_eq!(
            controls.control(ControlKind::Model).unwrap().current.as_deref(),
            Some("m2")
        );
    }

    #[test]
    fn options_lists_selects_and_booleans_and_a_boolean_is_set_as_one() {
        let result = json!({"configOptions": [
            {"id": "effort", "name": "Effort", "category": "thought_level", "type": "select",
             "currentValue": "high", "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"}]},
            {"id": "fast", "type": "boolean", "currentValue": false},
            {"id": "weird", "type": "slider", "currentValue": 3}
        ]});
        let options = SessionControls::from_result(&result).options();
        assert_eq!(options.len(), 2, "{options:?}");
        assert!(options[0].named("EFFORT") && options[0].named("effort"));
        assert_eq!(options[0].choice("Low").map(|c| c.id.as_str()), Some("low"));
        assert_eq!(options[0].control.current.as_deref(), Some("high"));
        assert_eq!(
            (options[1].name.as_str(), options[1].control.current.as_deref()),
            ("fast", Some("false"))
        );
        assert_eq!(
            options[1].control.route.request("s", "true"),
            (
                methods::SESSION_SET_CONFIG_OPTION,
                json!({"sessionId": "s", "configId": "fast", "type": "boolean", "value": true})
            )
        );
    }

    #[test]
    fn updates_and_answers_replace_the_options() {
        let mut controls = SessionControls::default();
        assert!(controls.is_empty() && controls.control(ControlKind::Model).is_none());
        let options = |current: &str| {
            json!([{"id": "m", "name": "Model", "category": "model", "type": "select", "currentValue": current,
                    "options": [{"value": "a", "name": "A"}, {"value": "b", "name": "B"}]}])
        };
        assert!(
            controls.apply_update(
                &json!({"sessionUpdate": "config_option_update", "configOptions": options("a")})
            )
        );
        assert_eq!(
            controls.control(ControlKind::Model).unwrap().current.as_deref(),
            Some("a")
        );
        let route = ControlRoute::ConfigOption {
            config_id: "m".into(),
        };
        controls.applied(&route, "b", &json!({"configOptions": options("b")}));
        assert_eq!(
            controls.control(ControlKind::Model).unwrap().current.as_deref(),
            Some("b")
        );
        assert!(!controls.apply_update(&json!({"sessionUpdate": "agent_message_chunk"})));
        assert_eq!(
            route.request("s", "b"),
            (
                methods::SESSION_SET_CONFIG_OPTION,
                json!({"sessionId": "s", "configId": "m", "value": "b"})
            )
        );
    }
}
