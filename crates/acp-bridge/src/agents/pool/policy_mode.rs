//! The mode a session starts in under the operator's
//! `--permission-policy` (issue 35 §4).
//!
//! Agents pick a starting mode of their own, and some pick one where a
//! classifier, not the person asked, approves tool calls
//! (claude-agent-acp 0.101 starts in `auto` when its catalog offers it;
//! codex-acp 2.6 in `agent`, "auto review"). The operator's policy holds
//! only if the agent asks: at each session start (new, resumed or loaded)
//! the daemon sets the mode the policy wants, unless the owner chose one
//! with `!mode` (the owner's choice wins; see `heart::controls`). The
//! mode is found by its id, which names its meaning, never by agent name:
//!
//! - `ask-owner`: the agent's ask-every-time mode, so each call that needs
//!   permission is put to the owner.
//! - `reject`: the same mode, so each such call is put to the policy,
//!   which refuses it; a self-approving mode would run what the operator
//!   chose to refuse.
//! - `allow`: the agent's own mode; every question is allowed anyway, and
//!   a mode that asks less changes nothing the operator chose.
//!
//! An agent that offers none of the ask-every-time ids keeps its own mode.

use acp_client::{Control, PermissionPolicy};

use super::PermissionPolicyArg;

/// Mode ids that ask before every action that needs permission, in the
/// order tried: `default` is claude-agent-acp's ("Manual: always ask
/// before making changes"), gemini-cli's and qwen-code's; `read-only` is
/// codex-acp's ("requires approval to edit files and access the
/// internet"); `ask` the plain word.
const ASK_EVERY_TIME: [&str; 3] = ["default", "read-only", "ask"];

/// The mode `policy` wants a session to start in, of those `mode` offers;
/// `None` keeps the agent's own.
pub(crate) fn policy_mode(policy: PermissionPolicy, mode: &Control) -> Option<&'static str> {
    match policy {
        PermissionPolicy::AllowOnce => None,
        PermissionPolicy::AskCaller | PermissionPolicy::RejectOnce => {
            ASK_EVERY_TIME.into_iter().find(|id| mode.offers(id))
        }
    }
}

impl From<PermissionPolicyArg> for PermissionPolicy {
    fn from(policy: PermissionPolicyArg) -> Self {
        match policy {
            PermissionPolicyArg::Allow => PermissionPolicy::AllowOnce,
            PermissionPolicyArg::Reject => PermissionPolicy::RejectOnce,
            PermissionPolicyArg::AskOwner => PermissionPolicy::AskCaller,
        }
    }
}

#[cfg(test)]
mod tests {
    use acp_client::{ControlChoice, ControlRoute};

    use super::*;

    fn modes(ids: &[&str], current: &str) -> Control {
        Control {
            route: ControlRoute::SetMode,
            current: Some(current.to_owned()),
            choices: ids
                .iter()
                .map(|id| ControlChoice {
                    id: (*id).to_owned(),
                    name: (*id).to_owned(),
                })
                .collect(),
        }
    }

    #[test]
    fn ask_owner_and_reject_want_the_ask_every_time_mode_allow_the_agents_own() {
        let claude = modes(&["default", "acceptEdits", "plan", "auto"], "auto");
        let codex = modes(
            &["read-only", "workspace-write", "agent", "agent-full-access"],
            "agent",
        );
        for policy in [PermissionPolicy::AskCaller, PermissionPolicy::RejectOnce] {
            assert_eq!(policy_mode(policy, &claude), Some("default"));
            assert_eq!(policy_mode(policy, &codex), Some("read-only"));
        }
        assert_eq!(policy_mode(PermissionPolicy::AllowOnce, &claude), None);
        let unknown = modes(&["fast", "careful"], "fast");
        assert_eq!(policy_mode(PermissionPolicy::AskCaller, &unknown), None);
    }
}
