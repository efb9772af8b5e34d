//! JSON-RPC 2.0 message shapes: sorting what the client sent into requests,
//! notifications and responses, building the frames we send, and the error
//! objects with their standard messages. Knows nothing of ACP methods.

use serde_json::{Value, json};

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;
/// ACP's code for a missing resource, such as an unknown session.
const RESOURCE_NOT_FOUND: i64 = -32002;

/// A JSON-RPC error object: `{code, message, data?}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    code: i64,
    message: &'static str,
    data: Option<Value>,
}

impl RpcError {
    pub(crate) fn parse_error(data: impl Into<Value>) -> Self {
        Self::new(PARSE_ERROR, "Parse error", Some(data.into()))
    }

    pub(crate) fn invalid_request(data: impl Into<Value>) -> Self {
        Self::new(INVALID_REQUEST, "Invalid Request", Some(data.into()))
    }

    pub(crate) fn method_not_found() -> Self {
        Self::new(METHOD_NOT_FOUND, "Method not found", None)
    }

    pub(crate) fn invalid_params(data: impl Into<Value>) -> Self {
        Self::new(INVALID_PARAMS, "Invalid params", Some(data.into()))
    }

    pub(crate) fn internal_error(data: impl Into<Value>) -> Self {
        Self::new(INTERNAL_ERROR, "Internal error", Some(data.into()))
    }

    pub(crate) fn resource_not_found(data: impl Into<Value>) -> Self {
        Self::new(RESOURCE_NOT_FOUND, "Resource not found", Some(data.into()))
    }

    fn new(code: i64, message: &'static str, data: Option<Value>) -> Self {
        Self { code, message, data }
    }

    fn into_value(self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let (Some(data), Some(object)) = (self.data, error.as_object_mut()) {
            object.insert("data".to_owned(), data);
        }
        error
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.code, self.message)?;
        match &self.data {
            Some(Value::String(data)) => write!(f, ": {data}"),
            Some(data) => write!(f, ": {data}"),
            None => Ok(()),
        }
    }
}

/// One frame from the client, sorted by what it asks of us.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// Must be answered with `id`.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// Never answered.
    Notification { method: String, params: Value },
    /// The client's answer to one of our own requests.
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
}

/// Sorts one parsed frame. A frame that is not a JSON-RPC message is answered
/// with -32600 at the id it carried, if any (`null` otherwise).
pub(crate) fn classify(frame: Value) -> Result<Incoming, (Value, RpcError)> {
    let Value::Object(mut object) = frame else {
        return Err((
            Value::Null,
            RpcError::invalid_request("a frame must be a JSON object"),
        ));
    };
    let id = object.remove("id");
    let params = object.remove("params").unwrap_or(Value::Null);
    match (object.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), id) => Err((
            id.unwrap_or(Value::Null),
            RpcError::invalid_request("method must be a string"),
        )),
        (None, Some(id)) => match (object.remove("result"), object.remove("error")) {
            (Some(result), None) => Ok(Incoming::Response {
                id,
                outcome: Ok(result),
            }),
            (None, Some(error)) => Ok(Incoming::Response {
                id,
                outcome: Err(error),
            }),
            _ => Err((
                id,
                RpcError::invalid_request("a response needs exactly one of result and error"),
            )),
        },
        (None, None) => Err((
            Value::Null,
            RpcError::invalid_request("a frame needs a method or an id"),
        )),
    }
}

pub(crate) fn response(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

pub(crate) fn error_response(id: Value, error: RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.into_value() })
}

pub(crate) fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

pub(crate) fn request(id: u64, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_requests_notifications_and_responses() {
        let request = classify(json!({"jsonrpc": "2.0", "id": 7, "method": "m"}));
        assert!(matches!(request, Ok(Incoming::Request { id, .. }) if id == json!(7)));
        let note = classify(json!({"jsonrpc": "2.0", "method": "n", "params": {}}));
        assert!(matches!(note, Ok(Incoming::Notification { .. })));
        let answer = classify(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": 1}}));
        assert!(matches!(answer, Ok(Incoming::Response { outcome: Err(_), .. })));
    }

    #[test]
    fn non_messages_are_invalid_requests() {
        let (id, error) = classify(json!([1, 2])).expect_err("arrays are not messages");
        assert_eq!(id, Value::Null);
        assert_eq!(error.code, INVALID_REQUEST);
        let (id, error) = classify(json!({"id": "x", "method": 3})).expect_err("bad method");
        assert_eq!(id, json!("x"));
        assert_eq!(error.code, INVALID_REQUEST);
    }

    #[test]
    fn error_objects_carry_data_only_when_given() {
        let frame = error_response(json!(1), RpcError::method_not_found());
        assert_eq!(
            frame["error"],
            json!({"code": -32601, "message": "Method not found"})
        );
        let frame = error_response(json!(1), RpcError::invalid_params("why"));
        assert_eq!(frame["error"]["data"], json!("why"));
    }
}
