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
