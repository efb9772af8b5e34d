//! `session/request_permission`: the agent stops before a risky tool call
//! and asks.
//!
//! Owns the question's types and the choice of an option by policy (the
//! handle a caller answers through is the client's). Options are always chosen by their
//! `kind`: option ids are the agent's own strings and mean nothing to us.

use std::fmt;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::session::SessionId;

/// The four option kinds ACP defines, plus any other kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionKind {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
    Other(String),
}

impl PermissionKind {
    fn parse(text: &str) -> Self {
        match text {
            "allow_once" => PermissionKind::AllowOnce,
            "allow_always" => PermissionKind::AllowAlways,
            "reject_once" => PermissionKind::RejectOnce,
            "reject_always" => PermissionKind::RejectAlways,
            other => PermissionKind::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            PermissionKind::AllowOnce => "allow_once",
            PermissionKind::AllowAlways => "allow_always",
            PermissionKind::RejectOnce => "reject_once",
            PermissionKind::RejectAlways => "reject_always",
            PermissionKind::Other(other) => other,
        }
    }
}

impl fmt::Display for PermissionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One option the agent offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionOption {
    pub id: String,
    pub name: String,
    pub kind: PermissionKind,
}

/// The agent's question, as it asked it.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRequest {
    pub session_id: SessionId,
    /// The tool call the agent wants to make (an ACP `ToolCallUpdate`), raw.
    pub tool_call: Value,
    pub options: Vec<PermissionOption>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRequest {
    session_id: SessionId,
    #[serde(default)]
    tool_call: Value,
    #[serde(default)]
    options: Vec<RawOption>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawOption {
    option_id: String,
    #[serde(default)]
    name: String,
    kind: String,
}

impl PermissionRequest {
    /// Reads the params of a `session/request_permission` request.
    pub fn parse(params: Value) -> Result<Self, serde_json::Error> {
        let raw: RawRequest = serde_json::from_value(params)?;
        Ok(PermissionRequest {
            session_id: raw.session_id,
            tool_call: raw.tool_call,
            options: raw
                .options
                .into_iter()
                .map(|option| PermissionOption {
                    id: option.option_id,
                    name: option.name,
                    kind: PermissionKind::parse(&option.kind),
                })
                .collect(),
        })
    }

    /// The tool call's title, when the agent gave one.
    pub fn title(&self) -> Option<&str> {
        self.tool_call.get("title").and_then(Value::as_str)
    }

    /// Whether the tool call is one of the tools of the MCP server named
    /// `server`, as the agent names it: claude-agent-acp gives the tool's
    /// name as `_meta.claudeCode.toolName`, `mcp__<server>__<tool>`. Other
    /// agents say nothing that tells an MCP tool from another, so their
    /// questions about it are answered by the turn's policy.
    pub fn is_tool_of_mcp_server(&self, server: &str) -> bool {
        self.tool_call["_meta"]["claudeCode"]["toolName"]
            .as_str()
            .and_then(|name| name.strip_prefix("mcp__"))
            .and_then(|name| name.strip_prefix(server))
            .is_some_and(|tool| tool.starts_with("__") && tool.len() > 2)
    }

    /// The first offered option of the first kind in `preference` that the
    /// agent offered at all.
    pub fn option_of_kind(&self, preference: &[PermissionKind]) -> Option<&PermissionOption> {
        preference
            .iter()
            .find_map(|kind| self.options.iter().find(|option| &option.kind == kind))
    }
}

/// How a turn answers permission questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PermissionPolicy {
    /// Allow: `allow_once`, else `allow_always`; cancelled when neither is offered.
    #[default]
    AllowOnce,
    /// Reject: `reject_once`, else `reject_always`; cancelled when neither is offered.
    RejectOnce,
    /// Hand the question to the caller as [`crate::TurnEvent::PermissionAsked`]
    /// and wait for its answer.
    AskCaller,
}

impl PermissionPolicy {
    /// The option an automatic policy picks; `None` means "answer cancelled".
    pub fn choose(self, request: &PermissionRequest) -> Option<PermissionOption> {
        let preference = match self {
            PermissionPolicy::AllowOnce => [PermissionKind::AllowOnce, PermissionKind::AllowAlways],
            PermissionPolicy::RejectOnce => [PermissionKind::RejectOnce, PermissionKind::RejectAlways],
            PermissionPolicy::AskCaller => return None,
        };
        request.option_of_kind(&preference).cloned()
    }
}

/// The `result` of our answer to `session/request_permission`.
pub fn outcome(chosen: Option<&PermissionOption>) -> Value {
    match chosen {
        Some(option) => json!({"outcome": {"outcome": "selected", "optionId": option.id}}),
        None => json!({"outcome": {"outcome": "cancelled"}}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kinds: &[&str]) -> PermissionRequest {
        let options: Vec<Value> = kinds
            .iter()
            .enumerate()
            .map(|(index, kind)| json!({"optionId": format!("opt-{index}"), "name": kind, "kind": kind}))
            .collect();
        PermissionRequest::parse(json!({"sessionId": "s", "toolCall": {"title": "rm"}, "options": options}))
            .expect("valid request")
    }

    #[test]
    fn a_tool_of_an_mcp_server_is_told_by_claudes_tool_name_only() {
        let named = |tool_call: Value| {
            PermissionRequest::parse(json!({"sessionId": "s", "toolCall": tool_call, "options": []}))
                .expect("valid request")
                .is_tool_of_mcp_server("acp_bridge")
        };
        let claude = |name: &str| json!({"title": "x", "_meta": {"claudeCode": {"toolName": name}}});
        assert!(named(claude("mcp__acp_bridge__post_message")));
        assert!(
            !named(claude("mcp__acp_bridge_evil__post_message")),
            "another server"
        );
        assert!(!named(claude("mcp__other__post_message")));
        assert!(!named(claude("mcp__acp_bridge__")), "no tool");
        assert!(!named(claude("Bash")));
        assert!(
            !named(json!({"title": "mcp__acp_bridge__post_message"})),
            "a title proves nothing"
        );
    }

    /// An option kind this client does not know (the ACP schema crate
    /// rejects the whole request for one) is kept, and the known kinds
    /// still decide.
    #[test]
    fn an_unknown_option_kind_is_kept_not_fatal() {
        let request = request(&["allow_for_project", "allow_once"]);
        assert_eq!(
            request.options[0].kind,
            PermissionKind::Other("allow_for_project".into())
        );
        assert_eq!(request.options[1].kind, PermissionKind::AllowOnce);
    }

    #[test]
    fn policies_choose_by_kind_not_by_id_or_position() {
        let request = request(&["reject_always", "allow_always", "reject_once", "allow_once"]);
        assert_eq!(
            PermissionPolicy::AllowOnce.choose(&request).map(|o| o.id),
            Some("opt-3".into())
        );
        assert_eq!(
            PermissionPolicy::RejectOnce.choose(&request).map(|o| o.id),
            Some("opt-2".into())
        );
    }

    #[test]
    fn policies_fall_back_to_the_always_kind_then_to_cancelled() {
        let only_always = request(&["allow_always", "reject_always"]);
        assert_eq!(
            PermissionPolicy::AllowOnce.choose(&only_always).map(|o| o.kind),
            Some(PermissionKind::AllowAlways)
        );
        let no_reject = request(&["allow_once"]);
        assert_eq!(PermissionPolicy::RejectOnce.choose(&no_reject), None);
        assert_eq!(outcome(None), json!({"outcome": {"outcome": "cancelled"}}));
    }
}
