//! What names a session and ends its turns: the session id, the protocol
//! version, the `initialize` request's params and the stop reason.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The ACP protocol version this client speaks (sent as an integer: some
/// agents reject a string).
pub const PROTOCOL_VERSION: u64 = 1;

/// An ACP session id, as the agent issued it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(pub String);

impl SessionId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One session of an agent's `session/list` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedSession {
    pub id: SessionId,
    /// Where the session works, as the agent says.
    pub cwd: String,
    pub title: Option<String>,
    /// Its last activity, as the agent words it (ISO 8601).
    pub updated_at: Option<String>,
}

/// One page of a `session/list` answer: its sessions (an entry without an
/// id or a `cwd` is skipped) and the cursor of the next page, if any.
pub fn session_list_page(result: &Value) -> (Vec<ListedSession>, Option<String>) {
    let text = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let sessions = result
        .get("sessions")
        .and_then(Value::as_array)
        .map(|sessions| {
            sessions
                .iter()
                .filter_map(|session| {
                    Some(ListedSession {
                        id: SessionId(text(session, "sessionId")?),
                        cwd: text(session, "cwd")?,
                        title: text(session, "title"),
                        updated_at: text(session, "updatedAt"),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    (sessions, text(result, "nextCursor"))
}

/// The title a `session_info_update` gives its session, if it gives one
/// (`title: null` clears it: `Some("")`).
pub fn session_title(update: &Value) -> Option<String> {
    if update.get("sessionUpdate").and_then(Value::as_str) != Some("session_info_update") {
        return None;
    }
    match update.get("title")? {
        Value::String(title) => Some(title.trim().to_owned()),
        Value::Null => Some(String::new()),
        _ => None,
    }
}

/// Why a prompt turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    Cancelled,
    /// A reason this client does not know, kept verbatim.
    Other(String),
}

impl StopReason {
    pub fn parse(text: &str) -> Self {
        match text {
            "end_turn" => StopReason::EndTurn,
            "max_tokens" => StopReason::MaxTokens,
            "max_turn_requests" => StopReason::MaxTurnRequests,
            "refusal" => StopReason::Refusal,
            "cancelled" => StopReason::Cancelled,
            other => StopReason::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::MaxTurnRequests => "max_turn_requests",
            StopReason::Refusal => "refusal",
            StopReason::Cancelled => "cancelled",
            StopReason::Other(other) => other,
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The params of a client's `initialize` request (`client_version` is its
/// `clientInfo.version`); `elicitation` advertises form
/// elicitation as the ACP schema spells it (`elicitation: {form: {}}`, see
/// [`crate::ElicitationRequest`]).
pub fn initialize_params(elicitation: bool, client_version: &str) -> Value {
    // We expose no file system and no terminal to agents.
    let mut capabilities = json!({"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false});
    if elicitation {
        capabilities["elicitation"] = json!({"form": {}});
    }
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": capabilities,
        "clientInfo": {"name": "acp-bridge", "version": client_version},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_list_page_keeps_whole_entries_and_its_cursor() {
        let result = json!({"sessions": [
            {"sessionId": "s1", "cwd": "/w", "title": "Fix the build", "updatedAt": "2026-11-29T10:00:00Z"},
            {"sessionId": "s2", "cwd": "/w"},
            {"cwd": "/w", "title": "no id"},
            {"sessionId": "s3"}
        ], "nextCursor": "c2"});
        let (sessions, next) = session_list_page(&result);
        assert_eq!(next.as_deref(), Some("c2"));
        assert_eq!(sessions.len(), 2, "{sessions:?}");
        assert_eq!(sessions[0].title.as_deref(), Some("Fix the build"));
        assert_eq!(sessions[1].updated_at, None);
        assert_eq!(session_list_page(&json!({})), (Vec::new(), None));
    }

    #[test]
    fn a_title_comes_from_session_info_updates_only() {
        let info = |update: Value| session_title(&update);
        assert_eq!(
            info(json!({"sessionUpdate": "session_info_update", "title": " Fix it "})).as_deref(),
            Some("Fix it")
        );
        assert_eq!(
            info(json!({"sessionUpdate": "session_info_update", "title": null})).as_deref(),
            Some("")
        );
        assert_eq!(
            info(json!({"sessionUpdate": "session_info_update", "_meta": {}})),
            None
        );
        assert_eq!(info(json!({"sessionUpdate": "plan", "title": "x"})), None);
    }

    #[test]
    fn form_elicitation_is_advertised_only_when_asked_for() {
        assert_eq!(
            initialize_params(true, "0.1.0")["clientCapabilities"]["elicitation"],
            json!({"form": {}})
        );
        assert!(
            initialize_params(false, "0.1.0")["clientCapabilities"]
                .get("elicitation")
                .is_none()
        );
    }
}
