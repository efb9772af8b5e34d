//! Which of the agent's `authMethods` the bridge authenticates with.
//!
//! `--agent-auth-method` names one outright. Without it, the bridge picks
//! the one `env_var` method whose required variables are all in the agent's
//! environment (as `--agent-env` passes them): that is how a provider key
//! given to the daemon reaches the agent. Anything else (no such method,
//! or several) needs the operator's word, and the explanation lists what
//! the agent offers and names the flag. Values are never looked at beyond
//! "set and not empty", and never logged.

use std::collections::BTreeSet;

use acp_client::{AgentInfo, AuthKind};

use super::AgentSettings;

/// How the bridge authenticates with an agent.
#[derive(Debug, Clone, Default)]
pub(crate) struct AuthPolicy {
    /// `--agent-auth-method`.
    method: Option<String>,
    /// Names of the variables set (not empty) in the agents' environment.
    env: BTreeSet<String>,
}

/// What to do about authentication, for one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AuthChoice {
    /// The agent offers nothing and the operator asked for nothing.
    NotNeeded,
    /// Authenticate with this method.
    Method(String),
    /// No method can be chosen; the line says why and what to set.
    Unresolved(String),
}

impl AuthPolicy {
    pub(crate) fn new(settings: &AgentSettings) -> Self {
        AuthPolicy {
            method: settings.auth_method.clone(),
            env: settings
                .env
                .iter()
                .filter(|(_, value)| !value.is_empty())
                .map(|(name, _)| name.clone())
                .collect(),
        }
    }

    pub(crate) fn choose(&self, info: &AgentInfo) -> AuthChoice {
        if let Some(method) = &self.method {
            let offered = info.auth_methods.is_empty() || info.auth_methods.iter().any(|m| &m.id == method);
            return if offered {
                AuthChoice::Method(method.clone())
            } else {
                AuthChoice::Unresolved(format!(
                    "--agent-auth-method `{method}` is not one the agent offers; it offers {}",
                    offered_list(info)
                ))
            };
        }
        if info.auth_methods.is_empty() {
            return AuthChoice::NotNeeded;
        }
        let ready: Vec<&str> = info
            .auth_methods
            .iter()
            .filter(|method| match &method.kind {
                AuthKind::EnvVar { vars } => {
                    !vars.is_empty() && vars.iter().all(|var| self.env.contains(var))
                }
                _ => false,
            })
            .map(|method| method.id.as_str())
            .collect();
        match ready.as_slice() {
            [one] => AuthChoice::Method((*one).to_owned()),
            [] => AuthChoice::Unresolved(format!(
                "the agent needs authentication and no env_var method has all its variables passed to it \
                 (--agent-env); it offers {}; set --agent-auth-method (ACP_BRIDGE_AGENT_AUTH_METHOD)",
                offered_list(info)
            )),
            several => AuthChoice::Unresolved(format!(
                "the agent needs authentication and several methods could be used ({}); \
                 set --agent-auth-method (ACP_BRIDGE_AGENT_AUTH_METHOD) to one of them",
                several.join(", ")
            )),
        }
    }
}

fn offered_list(info: &AgentInfo) -> String {
    if info.auth_methods.is_empty() {
        return "no method".to_owned();
    }
    info.auth_methods
        .iter()
        .map(|method| method.describe())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(methods: &[(&str, Option<&[&str]>)]) -> AgentInfo {
        let methods: Vec<serde_json::Value> = methods
            .iter()
            .map(|(id, vars)| match vars {
                Some(vars) => serde_json::json!({"id": id, "name": id, "type": "env_var",
                    "vars": vars.iter().map(|name| serde_json::json!({"name": name})).collect::<Vec<_>>()}),
                None => serde_json::json!({"id": id, "name": id}),
            })
            .collect();
        AgentInfo::from_initialize_result(&serde_json::json!({"protocolVersion": 1, "authMethods": methods}))
    }

    fn policy(method: Option<&str>, env: &[&str]) -> AuthPolicy {
        AuthPolicy {
            method: method.map(str::to_owned),
            env: env.iter().map(|name| (*name).to_owned()).collect(),
        }
    }

    #[test]
    fn the_one_env_var_method_whose_variables_are_all_set_is_chosen() {
        let qwen = agent(&[
            (
                "openai",
                Some(&["OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"]),
            ),
            ("qwen-oauth", None),
        ]);
        let all = policy(
            None,
            &["OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "PATH"],
        );
        assert_eq!(all.choose(&qwen), AuthChoice::Method("openai".into()));
        let missing_one = policy(None, &["OPENAI_API_KEY", "OPENAI_BASE_URL"]);
        let AuthChoice::Unresolved(line) = missing_one.choose(&qwen) else {
            panic!("nothing qualifies");
        };
        assert!(
            line.contains("openai (env_var: OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL)"),
            "{line}"
        );
        assert!(
            line.contains("qwen-oauth (agent)") && line.contains("--agent-auth-method"),
            "{line}"
        );
    }

    #[test]
    fn the_flag_wins_and_must_name_an_offered_method() {
        let codex = agent(&[("api-key", Some(&["OPENAI_API_KEY"])), ("chat-gpt", None)]);
        assert_eq!(
            policy(Some("chat-gpt"), &[]).choose(&codex),
            AuthChoice::Method("chat-gpt".into())
        );
        assert!(
            matches!(policy(Some("nope"), &[]).choose(&codex), AuthChoice::Unresolved(line) if line.contains("`nope`"))
        );
        let two = agent(&[("a", Some(&["KEY"])), ("b", Some(&["KEY"]))]);
        assert!(
            matches!(policy(None, &["KEY"]).choose(&two), AuthChoice::Unresolved(line) if line.contains("a, b"))
        );
        assert_eq!(policy(None, &[]).choose(&agent(&[])), AuthChoice::NotNeeded);
    }
}
