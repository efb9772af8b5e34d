//! The agent's own structured question to its user, `elicitation/create`
//! (form mode), as claude-agent-acp sends it for its AskUserQuestion tool:
//! the forms `[elicit=KIND]` asks, and the final message's line about the
//! answer.
//!
//! Sent only when the client advertised `clientCapabilities.elicitation.form`
//! in `initialize`, as claude-agent-acp does; otherwise the line says so,
//! which lets a test prove what a client advertised.

use serde_json::{Value, json};

pub(crate) const METHOD: &str = "elicitation/create";

/// Which form `[elicit=KIND]` asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ElicitKind {
    /// One titled choice (`oneOf`): "Which colour?".
    Choice,
    /// One free-text field.
    Text,
    /// Three fields: a choice, a whole number, a yes/no.
    Form,
    /// Url mode, which a form-only client cannot ask.
    Url,
}

impl ElicitKind {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "choice" => Some(ElicitKind::Choice),
            "text" => Some(ElicitKind::Text),
            "form" => Some(ElicitKind::Form),
            "url" => Some(ElicitKind::Url),
            _ => None,
        }
    }
}

/// Whether `initialize`'s params advertise form elicitation.
pub(crate) fn advertised(initialize_params: &Value) -> bool {
    initialize_params["clientCapabilities"]["elicitation"]["form"].is_object()
}

/// The params of the question.
pub(crate) fn request_params(session_id: &str, kind: ElicitKind) -> Value {
    let colour = json!({"type": "string", "title": "Colour", "oneOf": [
        {"const": "red", "title": "Red"},
        {"const": "green", "title": "Green"},
        {"const": "blue", "title": "Blue"},
    ]});
    let (message, properties, required) = match kind {
        ElicitKind::Choice => ("Which colour?", json!({ "colour": colour }), json!(["colour"])),
        ElicitKind::Text => (
            "Why do you want it?",
            json!({"reason": {"type": "string", "title": "Reason"}}),
            json!(["reason"]),
        ),
        ElicitKind::Form => (
            "How should it be set up?",
            json!({
                "colour": colour,
                "count": {"type": "integer", "description": "how many"},
                "urgent": {"type": "boolean"},
            }),
            json!(["colour", "count"]),
        ),
        ElicitKind::Url => {
            return json!({"sessionId": session_id, "mode": "url", "message": "Sign in",
                "url": "https://example.invalid/login", "elicitationId": "scripted-1"});
        }
    };
    json!({
        "sessionId": session_id,
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties, "required": required},
    })
}

/// The final message's line about the client's answer (`result` or
/// `error`): `elicitation: accept {"colour":"red"}`, `elicitation: decline`.
pub(crate) fn answer_line(answer: Result<Value, Value>) -> String {
    match answer {
        Ok(result) => match result["action"].as_str() {
            Some("accept") => format!(
                "elicitation: accept {}",
                result.get("content").unwrap_or(&Value::Null)
            ),
            Some(action) => format!("elicitation: {action}"),
            None => format!("elicitation: unreadable answer {result}"),
        },
        Err(error) => format!("elicitation: error {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_advertised_form_capability_counts() {
        assert!(advertised(
            &json!({"clientCapabilities": {"elicitation": {"form": {}}}})
        ));
        assert!(!advertised(
            &json!({"clientCapabilities": {"elicitation": {"url": {}}}})
        ));
        assert!(!advertised(&json!({"clientCapabilities": {}})));
    }

    #[test]
    fn answers_read_as_one_line() {
        assert_eq!(
            answer_line(Ok(json!({"action": "accept", "content": {"colour": "red"}}))),
            r#"elicitation: accept {"colour":"red"}"#
        );
        assert_eq!(
            answer_line(Ok(json!({"action": "cancel"}))),
            "elicitation: cancel"
        );
        assert_eq!(
            answer_line(Err(json!({"code": -32601}))),
            r#"elicitation: error {"code":-32601}"#
        );
    }
}
