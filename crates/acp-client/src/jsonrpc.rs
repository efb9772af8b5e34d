//! JSON-RPC 2.0 messages as they cross the pipe.
//!
//! Owns the shape of one message (classifying what the agent sent, building
//! what we send); knows nothing about ACP methods. Unknown members are
//! ignored so that agents may extend their messages freely.

use serde::Deserialize;
use serde_json::{Value, json};

use acp_protocol::RpcError;

/// One message from the agent, classified by the JSON-RPC rules.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// An answer to one of our requests.
    Response {
        id: u64,
        result: Result<Value, RpcError>,
    },
    /// A request from the agent that we must answer (echoing `id` verbatim).
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification from the agent (no answer expected).
    Notification { method: String, params: Value },
}

/// Why a line could not be classified.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// Not JSON, or JSON that is not an object.
    NotJson(String),
    /// A response whose id we never issued (we only issue unsigned integers).
    ForeignResponseId(String),
    /// An object that is neither request, notification nor response.
    NotAMessage,
}

#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<RpcError>,
}

impl Incoming {
    /// Classifies one line from the agent.
    pub(crate) fn parse(line: &str) -> Result<Incoming, Malformed> {
        let raw: RawMessage =
            serde_json::from_str(line).map_err(|error| Malformed::NotJson(error.to_string()))?;
        let params = raw.params.unwrap_or(Value::Null);
        match (raw.method, raw.id) {
            (Some(method), Some(id)) => Ok(Incoming::Request { id, method, params }),
            (Some(method), None) => Ok(Incoming::Notification { method, params }),
            (None, Some(id)) => {
                let id = response_id(&id).ok_or_else(|| Malformed::ForeignResponseId(id.to_string()))?;
                let result = match (raw.error, raw.result) {
                    (Some(error), _) => Err(error),
                    (None, Some(result)) => Ok(result),
                    // `"result": null` deserializes as `None`: a null result
                    // is still a success.
                    (None, None) => Ok(Value::Null),
                };
                Ok(Incoming::Response { id, result })
            }
            (None, None) => Err(Malformed::NotAMessage),
        }
    }
}

/// Our ids are unsigned integers; tolerate agents that echo them as strings.
fn response_id(id: &Value) -> Option<u64> {
    match id {
        Value::Number(number) => number.as_u64(),
        Value::String(text) => text.parse().ok(),
        _ => None,
    }
}

/// Serializes a request. `serde_json` escapes newlines inside strings, so the
/// result is always exactly one line.
pub(crate) fn request(id: u64, method: &str, params: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// Serializes a notification.
pub(crate) fn notification(method: &str, params: &Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

/// Serializes a successful answer to an agent's request.
pub(crate) fn response(id: &Value, result: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// Serializes an error answer to an agent's request.
pub(crate) fn error_response(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_three_kinds_of_message() {
        let response = Incoming::parse(r#"{"jsonrpc":"2.0","id":7,"result":{"ok":true}}"#);
        assert!(matches!(
            response,
            Ok(Incoming::Response { id: 7, result: Ok(_) })
        ));

        let request = Incoming::parse(r#"{"jsonrpc":"2.0","id":"x","method":"m","params":{}}"#);
        assert!(matches!(request, Ok(Incoming::Request { method, .. }) if method == "m"));

        let notification = Incoming::parse(r#"{"jsonrpc":"2.0","method":"n"}"#);
        assert!(matches!(
            notification,
            Ok(Incoming::Notification {
                params: Value::Null,
                ..
            })
        ));
    }

    #[test]
    fn error_response_carries_code_and_data() {
        let parsed = Incoming::parse(
            r#"{"jsonrpc":"2.0","id":"3","error":{"code":-32602,"message":"Invalid params","data":"no active run to steer"}}"#,
        );
        let Ok(Incoming::Response {
            id: 3,
            result: Err(error),
        }) = parsed
        else {
            panic!("expected an error response, got {parsed:?}");
        };
        assert_eq!(error.code, -32602);
        assert_eq!(error.data, Some(json!("no active run to steer")));
    }

    #[test]
    fn null_result_is_success_and_foreign_ids_are_rejected() {
        assert!(matches!(
            Incoming::parse(r#"{"id":1,"result":null}"#),
            Ok(Incoming::Response {
                result: Ok(Value::Null),
                ..
            })
        ));
        assert!(matches!(
            Incoming::parse(r#"{"id":{"a":1},"result":1}"#),
            Err(Malformed::ForeignResponseId(_))
        ));
        assert!(matches!(Incoming::parse("not json"), Err(Malformed::NotJson(_))));
        assert_eq!(Incoming::parse("{}").err(), Some(Malformed::NotAMessage));
    }

    #[test]
    fn built_frames_are_single_lines() {
        let frame = request(1, "session/prompt", &json!({"text": "two\nlines"}));
        assert!(!frame.contains('\n'));
        assert!(Incoming::parse(&frame).is_ok());
    }
}
