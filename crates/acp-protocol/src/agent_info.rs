//! What an agent says about itself in `initialize`, read into types.
//!
//! Owns the reading of the `initialize` result: identity, the capabilities
//! that change how a client drives the agent (session load and resume,
//! session close), the authentication methods it offers, and the `_meta`
//! advertisements of extensions (cross-vendor steering, prompt queueing).
//! Reading is lenient: a missing or malformed field means "not offered",
//! never an error; the raw values stay available.

use serde_json::Value;

/// How a client authenticates with one of the agent's methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthKind {
    /// The agent authenticates by itself once asked (the default type).
    Agent,
    /// The agent reads credentials from environment variables; `vars` are
    /// the ones it requires (optional ones are left out).
    EnvVar { vars: Vec<String> },
    /// A terminal login flow: not something a daemon can run.
    Terminal,
    /// A type this client does not know, kept verbatim.
    Other(String),
}

/// One of the agent's `authMethods`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthMethod {
    pub id: String,
    pub name: String,
    pub kind: AuthKind,
}

impl AuthMethod {
    fn parse(value: &Value) -> Option<Self> {
        let id = value.get("id")?.as_str()?.to_owned();
        let name = value
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(&id)
            .to_owned();
        let kind = match value.get("type").and_then(Value::as_str) {
            None | Some("agent") => AuthKind::Agent,
            Some("env_var" | "envVar") => AuthKind::EnvVar {
                vars: required_vars(value),
            },
            Some("terminal") => AuthKind::Terminal,
            Some(other) => AuthKind::Other(other.to_owned()),
        };
        Some(AuthMethod { id, name, kind })
    }

    /// `id (type)`, for the lines that list what an agent offers.
    pub fn describe(&self) -> String {
        let kind = match &self.kind {
            AuthKind::Agent => "agent".to_owned(),
            AuthKind::EnvVar { vars } if vars.is_empty() => "env_var".to_owned(),
            AuthKind::EnvVar { vars } => format!("env_var: {}", vars.join(", ")),
            AuthKind::Terminal => "terminal".to_owned(),
            AuthKind::Other(other) => other.clone(),
        };
        format!("{} ({kind})", self.id)
    }
}

/// The variables an `env_var` method requires: `vars` as objects
/// (`{name, optional}`, the schema's form) or as plain names, or a single
/// `varName` (the first draft's form).
fn required_vars(method: &Value) -> Vec<String> {
    if let Some(vars) = method.get("vars").and_then(Value::as_array) {
        return vars
            .iter()
            .filter_map(|var| match var {
                Value::String(name) => Some(name.clone()),
                Value::Object(var) if var.get("optional").and_then(Value::as_bool) != Some(true) => {
                    var.get("name").and_then(Value::as_str).map(str::to_owned)
                }
                _ => None,
            })
            .collect();
    }
    method
        .get("varName")
        .and_then(Value::as_str)
        .map(|name| vec![name.to_owned()])
        .unwrap_or_default()
}

/// What the agent said about itself in `initialize`.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInfo {
    pub name: Option<String>,
    pub version: Option<String>,
    pub protocol_version: u64,
    pub auth_methods: Vec<AuthMethod>,
    /// `agentCapabilities.loadSession`: `session/load` replays a session.
    pub load_session: bool,
    /// `agentCapabilities.sessionCapabilities.resume`: `session/resume`
    /// reopens a session without replaying it.
    pub resume_session: bool,
    /// `agentCapabilities.sessionCapabilities.close`: `session/close` ends one.
    pub close_session: bool,
    /// `agentCapabilities.sessionCapabilities.list`: `session/list` lists
    /// the agent's sessions (of one `cwd`).
    pub list_sessions: bool,
    /// `agentCapabilities.sessionCapabilities.fork`: `session/fork` opens a
    /// new session with another's history.
    pub fork_session: bool,
    /// `agentCapabilities.sessionCapabilities.additionalDirectories`:
    /// sessions may be given directories beside their `cwd`.
    pub additional_directories: bool,
    /// `_meta.steering.supported == true`: the agent takes
    /// `_session/steering` into a running turn.
    pub session_steering: bool,
    /// `_meta.claudeCode.promptQueueing`: a prompt sent mid-turn is queued,
    /// not refused.
    pub prompt_queueing: bool,
    /// `agentCapabilities.promptCapabilities.image`: prompts may carry
    /// `image` blocks.
    pub prompt_image: bool,
    /// `agentCapabilities.promptCapabilities.audio`: prompts may carry
    /// `audio` blocks.
    pub prompt_audio: bool,
    /// `agentCapabilities.mcpCapabilities.http == true`: sessions may be
    /// given MCP servers over HTTP.
    pub mcp_http: bool,
    /// `agentCapabilities.mcpCapabilities.sse == true`: sessions may be
    /// given MCP servers over SSE.
    pub mcp_sse: bool,
    /// `agentCapabilities`, raw: capabilities grow faster than this client.
    pub capabilities: Value,
    /// The whole `_meta` object, for hints this client does not interpret.
    pub meta: Option<Value>,
}

impl AgentInfo {
    /// Reads an `initialize` result (whose protocol version the client
    /// checks before it trusts the rest).
    pub fn from_initialize_result(result: &Value) -> Self {
        let text = |value: Option<&Value>, key: &str| {
            value
                .and_then(|value| value.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        // A capability is offered as `true` or as an (options) object.
        let flag = |value: Option<&Value>, path: &[&str]| {
            path.iter()
                .fold(value, |value, key| value.and_then(|value| value.get(key)))
                .is_some_and(|value| value.as_bool() == Some(true) || value.is_object())
        };
        let agent_info = result.get("agentInfo");
        let capabilities = result.get("agentCapabilities");
        let meta = result.get("_meta");
        AgentInfo {
            name: text(agent_info, "name"),
            version: text(agent_info, "version"),
            protocol_version: result
                .get("protocolVersion")
                .and_then(Value::as_u64)
                .unwrap_or_default(),
            auth_methods: result
                .get("authMethods")
                .and_then(Value::as_array)
                .map(|methods| methods.iter().filter_map(AuthMethod::parse).collect())
                .unwrap_or_default(),
            load_session: flag(capabilities, &["loadSession"]),
            resume_session: flag(capabilities, &["sessionCapabilities", "resume"]),
            close_session: flag(capabilities, &["sessionCapabilities", "close"]),
            list_sessions: flag(capabilities, &["sessionCapabilities", "list"]),
            fork_session: flag(capabilities, &["sessionCapabilities", "fork"]),
            additional_directories: flag(capabilities, &["sessionCapabilities", "additionalDirectories"]),
            session_steering: meta
                .and_then(|meta| meta.get("steering"))
                .and_then(|steering| steering.get("supported"))
                .and_then(Value::as_bool)
                == Some(true),
            prompt_queueing: flag(meta, &["claudeCode", "promptQueueing"]),
            prompt_image: flag(capabilities, &["promptCapabilities", "image"]),
            prompt_audio: flag(capabilities, &["promptCapabilities", "audio"]),
            mcp_http: capabilities
                .and_then(|capabilities| capabilities.pointer("/mcpCapabilities/http"))
                .and_then(Value::as_bool)
                == Some(true),
            mcp_sse: capabilities
                .and_then(|capabilities| capabilities.pointer("/mcpCapabilities/sse"))
                .and_then(Value::as_bool)
                == Some(true),
            capabilities: capabilities.cloned().unwrap_or(Value::Null),
            meta: meta.cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn capabilities_and_extensions_are_read_from_where_agents_put_them() {
        // The shape claude-agent-acp answers (trimmed).
        let claude = json!({
            "protocolVersion": 1,
            "agentInfo": {"name": "claude-agent-acp", "version": "0.101.0"},
            "authMethods": [],
            "agentCapabilities": {
                "loadSession": true,
                "sessionCapabilities": {"resume": {}, "close": {}, "list": {}, "fork": {}, "additionalDirectories": {}},
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true}
            },
            "_meta": {"steering": {"supported": true}, "claudeCode": {"promptQueueing": true}}
        });
        let info = AgentInfo::from_initialize_result(&claude);
        assert_eq!(info.name.as_deref(), Some("claude-agent-acp"));
        assert!(info.load_session && info.resume_session && info.close_session);
        assert!(info.list_sessions && info.fork_session);
        assert!(info.additional_directories);
        assert!(info.session_steering && info.prompt_queueing);
        assert!(info.auth_methods.is_empty());
        assert!(info.prompt_image && !info.prompt_audio);
        assert!(!info.mcp_http, "no mcpCapabilities");

        let bare = AgentInfo::from_initialize_result(&json!({"protocolVersion": 1}));
        assert!(!bare.load_session && !bare.resume_session && !bare.close_session);
        assert!(!bare.list_sessions && !bare.fork_session);
        assert!(!bare.additional_directories);
        assert!(!bare.session_steering && !bare.prompt_queueing && !bare.prompt_image);
        let gemini = json!({"agentCapabilities": {"promptCapabilities": {"image": true, "audio": true}}});
        assert!(AgentInfo::from_initialize_result(&gemini).prompt_audio);
        let hinted_otherwise = json!({"_meta": {"steering": {"supported": "yes"}}});
        assert!(!AgentInfo::from_initialize_result(&hinted_otherwise).session_steering);
    }

    #[test]
    fn mcp_over_http_only_when_the_agent_says_true() {
        let mcp_http = |capabilities: Value| {
            AgentInfo::from_initialize_result(
                &json!({"protocolVersion": 1, "agentCapabilities": capabilities}),
            )
            .mcp_http
        };
        assert!(mcp_http(json!({"mcpCapabilities": {"http": true, "sse": false}})));
        assert!(!mcp_http(
            json!({"mcpCapabilities": {"http": false, "sse": true}})
        ));
        assert!(!mcp_http(json!({"mcpCapabilities": {}})));
        assert!(!mcp_http(json!({})));
    }

    #[test]
    fn mcp_over_sse_only_when_the_agent_says_true() {
        let mcp_sse = |capabilities: Value| {
            AgentInfo::from_initialize_result(
                &json!({"protocolVersion": 1, "agentCapabilities": capabilities}),
            )
            .mcp_sse
        };
        assert!(mcp_sse(json!({"mcpCapabilities": {"http": false, "sse": true}})));
        assert!(!mcp_sse(json!({"mcpCapabilities": {"http": true, "sse": false}})));
        assert!(!mcp_sse(json!({})));
    }

    #[test]
    fn auth_methods_keep_their_type_and_required_variables() {
        let result = json!({"authMethods": [
            {"id": "openai", "name": "OpenAI", "type": "env_var", "vars": [
                {"name": "OPENAI_API_KEY"}, {"name": "OPENAI_BASE_URL"}, {"name": "OPENAI_ORG", "optional": true}
            ]},
            {"id": "legacy", "name": "Legacy", "type": "env_var", "varName": "LEGACY_KEY"},
            {"id": "chat-gpt", "name": "ChatGPT"},
            {"id": "login", "type": "terminal"},
            {"name": "no id"}
        ]});
        let methods = AgentInfo::from_initialize_result(&result).auth_methods;
        assert_eq!(methods.len(), 4, "a method without an id is skipped");
        assert_eq!(
            methods[0].kind,
            AuthKind::EnvVar {
                vars: vec!["OPENAI_API_KEY".into(), "OPENAI_BASE_URL".into()]
            }
        );
        assert_eq!(
            methods[1].kind,
            AuthKind::EnvVar {
                vars: vec!["LEGACY_KEY".into()]
            }
        );
        assert_eq!(methods[2].kind, AuthKind::Agent);
        assert_eq!(methods[3].kind, AuthKind::Terminal);
        assert_eq!(
            methods[0].describe(),
            "openai (env_var: OPENAI_API_KEY, OPENAI_BASE_URL)"
        );
    }
}
