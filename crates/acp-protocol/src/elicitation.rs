//! `elicitation/create` in form mode: the agent asks its user a structured
//! question (claude-agent-acp turns its AskUserQuestion tool into one).
//!
//! Owns the question's typed form and the answers on the wire (the handle
//! a caller answers through is the client's). Shapes, from the ACP schema
//! (`@agentclientprotocol/sdk` 2.4, `CreateElicitationRequest`,
//! `ElicitationSchema`, `CreateElicitationResponse`):
//!
//! - the client opts in with `clientCapabilities.elicitation.form: {}` in
//!   `initialize` (claude-agent-acp checks `clientCapabilities.elicitation.form`);
//! - params: `{sessionId, toolCallId?, mode: "form", message,
//!   requestedSchema: {type: "object", properties: {NAME: PROPERTY},
//!   required?: [NAME]}}`, where a property is `{type: "string"|"number"|
//!   "integer"|"boolean", title?, description?}` and a single choice is a
//!   string with `enum: [..]` or titled `oneOf: [{const, title}]`;
//! - result: `{action: "accept", content: {NAME: value}}`, `{action:
//!   "decline"}` or `{action: "cancel"}`.
//!
//! Anything else (url mode, a request scoped to no session, multi-select
//! arrays, custom property types) is [`Unsupported`]: a client answers
//! `decline` and logs why, never failing the turn.
//!
//! Fields are kept in name order: the JSON object's own order does not
//! survive parsing, and a stable order is what an answer "in order" needs.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::session::SessionId;

/// One field of the form.
#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    /// The key of its value in the answer's `content`.
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub required: bool,
    pub kind: FieldKind,
}

impl FormField {
    /// What a person calls the field: its title, else its name.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }
}

/// The value types a field may take.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    Text,
    Number,
    Integer,
    Boolean,
    /// One of these (a string `enum` or titled `oneOf`).
    Choice(Vec<Choice>),
}

/// One choice of a choice field: `value` goes on the wire, `title` is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub value: String,
    pub title: String,
}

/// The agent's question, as it asked it.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitationRequest {
    pub session_id: SessionId,
    pub message: String,
    /// The tool call the question belongs to, when the agent named one.
    pub tool_call_id: Option<String>,
    pub fields: Vec<FormField>,
}

/// Why a request is answered `decline` without asking anyone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error("malformed elicitation request: {0}")]
    Malformed(String),
    #[error("elicitation mode `{0}` is not supported (only `form`)")]
    Mode(String),
    #[error("the elicitation names no session (request-scoped elicitations are not supported)")]
    NoSession,
    #[error("field `{name}` has type `{kind}`, which is not supported")]
    FieldType { name: String, kind: String },
    #[error("the form has no fields")]
    NoFields,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRequest {
    session_id: Option<SessionId>,
    tool_call_id: Option<String>,
    mode: Option<String>,
    #[serde(default)]
    message: String,
    #[serde(default)]
    requested_schema: RawSchema,
}

#[derive(Deserialize, Default)]
struct RawSchema {
    #[serde(default)]
    properties: Map<String, Value>,
    #[serde(default)]
    required: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawProperty {
    #[serde(rename = "type")]
    kind: Option<String>,
    title: Option<String>,
    description: Option<String>,
    #[serde(rename = "enum")]
    values: Option<Vec<String>>,
    one_of: Option<Vec<RawChoice>>,
}

#[derive(Deserialize)]
struct RawChoice {
    #[serde(rename = "const")]
    value: String,
    title: Option<String>,
}

impl ElicitationRequest {
    /// Reads the params of an `elicitation/create` request.
    pub fn parse(params: Value) -> Result<Self, Unsupported> {
        let raw: RawRequest =
            serde_json::from_value(params).map_err(|error| Unsupported::Malformed(error.to_string()))?;
        match raw.mode.as_deref() {
            Some("form") => {}
            Some(mode) => return Err(Unsupported::Mode(mode.to_owned())),
            None => return Err(Unsupported::Mode("(none)".to_owned())),
        }
        let session_id = raw.session_id.ok_or(Unsupported::NoSession)?;
        let required = raw.requested_schema.required.unwrap_or_default();
        let fields = raw
            .requested_schema
            .properties
            .into_iter()
            .map(|(name, property)| {
                let property: RawProperty = serde_json::from_value(property)
                    .map_err(|error| Unsupported::Malformed(format!("field `{name}`: {error}")))?;
                let kind = field_kind(&name, &property)?;
                Ok(FormField {
                    required: required.contains(&name),
                    name,
                    title: property.title,
                    description: property.description,
                    kind,
                })
            })
            .collect::<Result<Vec<_>, Unsupported>>()?;
        if fields.is_empty() {
            return Err(Unsupported::NoFields);
        }
        Ok(ElicitationRequest {
            session_id,
            message: raw.message,
            tool_call_id: raw.tool_call_id,
            fields,
        })
    }
}

fn field_kind(name: &str, property: &RawProperty) -> Result<FieldKind, Unsupported> {
    let kind = property.kind.as_deref().unwrap_or("(none)");
    match kind {
        "string" => {
            if let Some(choices) = &property.one_of {
                return Ok(FieldKind::Choice(
                    choices
                        .iter()
                        .map(|choice| Choice {
                            value: choice.value.clone(),
                            title: choice.title.clone().unwrap_or_else(|| choice.value.clone()),
                        })
                        .collect(),
                ));
            }
            if let Some(values) = &property.values {
                return Ok(FieldKind::Choice(
                    values
                        .iter()
                        .map(|value| Choice {
                            value: value.clone(),
                            title: value.clone(),
                        })
                        .collect(),
                ));
            }
            Ok(FieldKind::Text)
        }
        "number" => Ok(FieldKind::Number),
        "integer" => Ok(FieldKind::Integer),
        "boolean" => Ok(FieldKind::Boolean),
        other => Err(Unsupported::FieldType {
            name: name.to_owned(),
            kind: other.to_owned(),
        }),
    }
}

/// How the question was answered.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAction {
    /// The person filled in the form: `content` maps field names to values.
    Accept(Map<String, Value>),
    /// The person (or the policy, on a timeout) said no.
    Decline,
    /// Nobody answered: the turn was cancelled.
    Cancel,
}

impl ElicitationAction {
    /// The `result` of our answer to `elicitation/create`.
    pub fn result(&self) -> Value {
        match self {
            ElicitationAction::Accept(content) => json!({"action": "accept", "content": content}),
            ElicitationAction::Decline => json!({"action": "decline"}),
            ElicitationAction::Cancel => json!({"action": "cancel"}),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_of_every_supported_type_parses_in_name_order() {
        let request = ElicitationRequest::parse(json!({
            "sessionId": "s", "mode": "form", "message": "Set it up",
            "requestedSchema": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string", "title": "Your name"},
                "colour": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "b", "title": "Blue"}]},
                "size": {"type": "string", "enum": ["S", "M"]},
                "count": {"type": "integer"},
                "ratio": {"type": "number"},
                "ok": {"type": "boolean"}
            }}
        }))
        .expect("supported");
        let names: Vec<&str> = request.fields.iter().map(|field| field.name.as_str()).collect();
        assert_eq!(names, ["colour", "count", "name", "ok", "ratio", "size"]);
        assert_eq!(
            request.fields[0].kind,
            FieldKind::Choice(vec![
                Choice {
                    value: "r".into(),
                    title: "Red".into()
                },
                Choice {
                    value: "b".into(),
                    title: "Blue".into()
                },
            ])
        );
        assert!(request.fields[2].required && !request.fields[0].required);
        assert_eq!(request.fields[2].label(), "Your name");
        assert_eq!(request.fields[1].kind, FieldKind::Integer);
        assert_eq!(request.fields[3].kind, FieldKind::Boolean);
    }

    #[test]
    fn what_cannot_be_asked_is_unsupported_not_an_error_of_the_turn() {
        let url = json!({"sessionId": "s", "mode": "url", "message": "m", "url": "https://x", "elicitationId": "e"});
        assert_eq!(
            ElicitationRequest::parse(url),
            Err(Unsupported::Mode("url".into()))
        );
        let scoped = json!({"requestId": 3, "mode": "form", "message": "m",
            "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}}});
        assert_eq!(ElicitationRequest::parse(scoped), Err(Unsupported::NoSession));
        let multi = json!({"sessionId": "s", "mode": "form", "message": "m",
            "requestedSchema": {"type": "object", "properties": {"a": {"type": "array", "items": {"enum": ["x"]}}}}});
        assert!(matches!(
            ElicitationRequest::parse(multi),
            Err(Unsupported::FieldType { kind, .. }) if kind == "array"
        ));
        assert!(matches!(
            ElicitationRequest::parse(json!("nonsense")),
            Err(Unsupported::Malformed(_))
        ));
    }

    #[test]
    fn answers_have_the_acp_response_shape() {
        let mut content = Map::new();
        content.insert("colour".into(), json!("r"));
        assert_eq!(
            ElicitationAction::Accept(content).result(),
            json!({"action": "accept", "content": {"colour": "r"}})
        );
        assert_eq!(ElicitationAction::Decline.result(), json!({"action": "decline"}));
        assert_eq!(ElicitationAction::Cancel.result(), json!({"action": "cancel"}));
    }
}
