//! ACP payloads: the typed view of what the agent says.
//!
//! Owns the mapping between ACP JSON and Rust types; knows nothing about
//! routing or processes. Parsing is lenient by design: a missing optional
//! field or an unknown update kind never fails a turn, it is kept raw.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The ACP protocol version this client speaks (sent as an integer: some
/// agents reject a string).
pub const PROTOCOL_VERSION: u64 = 1;

/// Method names on the wire.
pub(crate) mod methods {
    pub(crate) const INITIALIZE: &str = "initialize";
    pub(crate) const SESSION_NEW: &str = "session/new";
    pub(crate) const SESSION_PROMPT: &str = "session/prompt";
    pub(crate) const SESSION_CANCEL: &str = "session/cancel";
    pub(crate) const SESSION_UPDATE: &str = "session/update";
    pub(crate) const REQUEST_PERMISSION: &str = "session/request_permission";
    /// The agent asks its user a structured question (form mode).
    pub(crate) const ELICITATION_CREATE: &str = "elicitation/create";
    pub(crate) const AUTHENTICATE: &str = "authenticate";
    pub(crate) const SESSION_LOAD: &str = "session/load";
    pub(crate) const SESSION_RESUME: &str = "session/resume";
    pub(crate) const SESSION_CLOSE: &str = "session/close";
    /// The cross-vendor steer into a running turn (claude-agent-acp, codex-acp).
    pub(crate) const SESSION_STEERING: &str = "_session/steering";
    /// The agent withdraws one of its own pending requests.
    pub(crate) const CANCEL_REQUEST: &str = "$/cancel_request";
    /// goose's non-standard mid-turn steer.
    pub(crate) const GOOSE_STEER: &str = "_goose/unstable/session/steer";
    pub(crate) const SESSION_SET_CONFIG_OPTION: &str = "session/set_config_option";
    /// The older way to set a mode, for agents without config options.
    pub(crate) const SESSION_SET_MODE: &str = "session/set_mode";
    /// The unstable way to set a model, for agents without config options.
    pub(crate) const SESSION_SET_MODEL: &str = "session/set_model";
}

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

/// A prompt content block. Text, images, audio and resource links are
/// built by this client; anything else can be passed through raw.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ContentBlock {
    Text(TextBlock),
    Image(ImageBlock),
    /// `type: audio`, the same shape as an image.
    Audio(ImageBlock),
    ResourceLink(ResourceLinkBlock),
    Raw(Value),
}

/// An image (`promptCapabilities.image`) or audio clip
/// (`promptCapabilities.audio`) given inline: its bytes as base64, never a
/// URL for the agent (or its provider) to fetch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImageBlock {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    /// Base64 (standard alphabet, padded).
    pub data: String,
}

/// A link to a resource the agent may open itself (`type:
/// resource_link`); every agent must take one, whatever its capabilities.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceLinkBlock {
    #[serde(rename = "type")]
    kind: &'static str,
    pub name: String,
    pub uri: String,
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TextBlock {
    #[serde(rename = "type")]
    kind: &'static str,
    pub text: String,
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(TextBlock {
            kind: "text",
            text: text.into(),
        })
    }

    /// An image block of `bytes` of type `mime_type` (`image/png`, …).
    pub fn image(mime_type: impl Into<String>, bytes: &[u8]) -> Self {
        ContentBlock::Image(ImageBlock::inline("image", mime_type.into(), bytes))
    }

    /// An audio block of `bytes` of type `mime_type` (`audio/mpeg`, …).
    pub fn audio(mime_type: impl Into<String>, bytes: &[u8]) -> Self {
        ContentBlock::Audio(ImageBlock::inline("audio", mime_type.into(), bytes))
    }

    /// A link named `name` to `uri`, of type `mime_type` when known.
    pub fn resource_link(name: impl Into<String>, uri: impl Into<String>, mime_type: Option<String>) -> Self {
        ContentBlock::ResourceLink(ResourceLinkBlock {
            kind: "resource_link",
            name: name.into(),
            uri: uri.into(),
            mime_type,
        })
    }
}

impl ImageBlock {
    fn inline(kind: &'static str, mime_type: String, bytes: &[u8]) -> Self {
        use base64::Engine as _;
        ImageBlock {
            kind,
            mime_type,
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
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

/// The params of our `initialize` request; `elicitation` advertises form
/// elicitation as the ACP schema spells it (`elicitation: {form: {}}`, see
/// [`crate::elicitation`]).
pub(crate) fn initialize_params(elicitation: bool) -> Value {
    // We expose no file system and no terminal to agents.
    let mut capabilities = json!({"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false});
    if elicitation {
        capabilities["elicitation"] = json!({"form": {}});
    }
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": capabilities,
        "clientInfo": {"name": "acp-bridge", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// One typed event of a turn, in the order the agent streamed it.
#[derive(Debug)]
pub enum TurnEvent {
    /// A piece of the assistant's answer; `message_id` (when the agent
    /// sends one) tells its messages apart.
    MessageChunk {
        text: String,
        message_id: Option<String>,
    },
    /// A piece of the agent's visible reasoning.
    ThoughtChunk {
        text: String,
    },
    /// User text echoed by the agent. goose streams a steer it folded into
    /// the turn this way, with `_meta.goose.steer: true` and its `messageId`.
    UserMessageChunk {
        text: String,
        steer_message_id: Option<String>,
    },
    ToolCall(ToolCall),
    ToolCallUpdate(ToolCall),
    Plan {
        entries: Value,
    },
    /// The agent advertised a live run (`_meta.goose.activeRunId`).
    RunStarted {
        run_id: String,
    },
    /// The agent cleared its live run (`activeRunId: null`).
    RunCleared,
    /// The agent asked for permission and the turn's policy answered it.
    PermissionAnswered {
        request: crate::permission::PermissionRequest,
        chosen: Option<crate::permission::PermissionOption>,
    },
    /// The agent asked for permission and waits for the caller's answer.
    PermissionAsked(crate::permission::PermissionQuestion),
    /// The agent asked a form question and waits for the caller's answer.
    ElicitationAsked(crate::elicitation::ElicitationQuestion),
    /// The agent withdrew a question it asked (`$/cancel_request`); it was
    /// answered -32800 and its handle no longer answers anything.
    QuestionWithdrawn {
        request_id: Value,
    },
    /// Context use and cost so far (`usage_update`).
    Usage(Usage),
    /// Any other update (unknown kinds included), kept raw.
    Other(Value),
}

/// How much of its context window a session uses, and what it cost.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Usage {
    /// Tokens in the context now.
    pub used: Option<u64>,
    /// The context window, in tokens.
    pub size: Option<u64>,
    /// Cost so far.
    pub cost: Option<Cost>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cost {
    pub amount: f64,
    pub currency: String,
}

impl Usage {
    fn parse(update: &Value) -> Self {
        let cost = update.get("cost").and_then(|cost| {
            Some(Cost {
                amount: cost.get("amount")?.as_f64()?,
                currency: cost
                    .get("currency")
                    .and_then(Value::as_str)
                    .unwrap_or("USD")
                    .to_owned(),
            })
        });
        Usage {
            used: update.get("used").and_then(Value::as_u64),
            size: update.get("size").and_then(Value::as_u64),
            cost,
        }
    }
}

/// A tool call or an update to one; the raw update keeps everything else.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub title: Option<String>,
    pub status: Option<String>,
    pub raw: Value,
}

/// What a `session_info_update` says about the live run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunMarker {
    Started(String),
    Cleared,
}

/// Reads `update._meta.goose.activeRunId`: a string sets the run, `null`
/// clears it, anything else (missing, not a string) leaves it unchanged.
pub(crate) fn run_marker(update: &Value) -> Option<RunMarker> {
    let goose = update.get("_meta")?.get("goose")?;
    match goose.get("activeRunId")? {
        Value::String(run_id) => Some(RunMarker::Started(run_id.clone())),
        Value::Null => Some(RunMarker::Cleared),
        _ => None,
    }
}

/// Classifies one `session/update` payload (`params.update`).
pub(crate) fn turn_event(update: Value) -> TurnEvent {
    let kind = update
        .get("sessionUpdate")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match kind {
        "agent_message_chunk" => match chunk_text(&update) {
            Some(text) => TurnEvent::MessageChunk {
                message_id: update.get("messageId").and_then(Value::as_str).map(str::to_owned),
                text,
            },
            None => TurnEvent::Other(update),
        },
        "agent_thought_chunk" => match chunk_text(&update) {
            Some(text) => TurnEvent::ThoughtChunk { text },
            None => TurnEvent::Other(update),
        },
        "user_message_chunk" => match chunk_text(&update) {
            Some(text) => TurnEvent::UserMessageChunk {
                steer_message_id: steer_message_id(&update),
                text,
            },
            None => TurnEvent::Other(update),
        },
        "tool_call" => tool_call(update).map_or_else(TurnEvent::Other, TurnEvent::ToolCall),
        "tool_call_update" => tool_call(update).map_or_else(TurnEvent::Other, TurnEvent::ToolCallUpdate),
        "usage_update" => TurnEvent::Usage(Usage::parse(&update)),
        "plan" => TurnEvent::Plan {
            entries: update.get("entries").cloned().unwrap_or(Value::Null),
        },
        "session_info_update" => match run_marker(&update) {
            Some(RunMarker::Started(run_id)) => TurnEvent::RunStarted { run_id },
            Some(RunMarker::Cleared) => TurnEvent::RunCleared,
            None => TurnEvent::Other(update),
        },
        _ => TurnEvent::Other(update),
    }
}

/// A `session/update` notification that carries a plain text chunk (the
/// bulk of what an agent sends), read straight from its line into borrowed
/// fields: no `Value` tree is built, cloned and dropped for it, and its text
/// is copied once, into the event. Anything else, including a chunk with
/// `_meta` (a run marker, a folded steer) or a non-text content, is not one
/// of these and goes through [`turn_event`].
pub(crate) struct TextChunk<'a> {
    pub session: &'a str,
    pub event: TurnEvent,
}

#[derive(Deserialize)]
struct ChunkLine<'a> {
    #[serde(borrow)]
    method: &'a str,
    /// A notification has none (or `null`, as [`crate::jsonrpc`] reads it).
    #[serde(default)]
    id: Option<serde::de::IgnoredAny>,
    #[serde(borrow)]
    params: ChunkParams<'a>,
}

#[derive(Deserialize)]
struct ChunkParams<'a> {
    #[serde(rename = "sessionId", borrow)]
    session_id: &'a str,
    #[serde(borrow)]
    update: ChunkUpdate<'a>,
}

#[derive(Deserialize)]
struct ChunkUpdate<'a> {
    #[serde(rename = "sessionUpdate", borrow)]
    kind: &'a str,
    #[serde(borrow)]
    content: ChunkContent<'a>,
    #[serde(rename = "messageId", default, borrow)]
    message_id: Option<&'a str>,
    #[serde(rename = "_meta", default)]
    meta: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct ChunkContent<'a> {
    #[serde(rename = "type", borrow)]
    kind: &'a str,
    #[serde(borrow)]
    text: std::borrow::Cow<'a, str>,
}

impl<'a> TextChunk<'a> {
    /// The chunk `line` carries, or `None` when it is anything else. Only a
    /// line that names `session/update` is parsed here at all.
    pub(crate) fn parse(line: &'a str) -> Option<Self> {
        if !line.contains(methods::SESSION_UPDATE) {
            return None;
        }
        let parsed: ChunkLine<'a> = serde_json::from_str(line).ok()?;
        let update = parsed.params.update;
        if parsed.method != methods::SESSION_UPDATE
            || parsed.id.is_some()
            || update.meta.is_some()
            || update.content.kind != "text"
        {
            return None;
        }
        let text = update.content.text.into_owned();
        let event = match update.kind {
            "agent_message_chunk" => TurnEvent::MessageChunk {
                message_id: update.message_id.map(str::to_owned),
                text,
            },
            "agent_thought_chunk" => TurnEvent::ThoughtChunk { text },
            "user_message_chunk" => TurnEvent::UserMessageChunk {
                steer_message_id: None,
                text,
            },
            _ => return None,
        };
        Some(TextChunk {
            session: parsed.params.session_id,
            event,
        })
    }
}

fn chunk_text(update: &Value) -> Option<String> {
    let content = update.get("content")?;
    if content.get("type")?.as_str()? != "text" {
        return None;
    }
    Some(content.get("text")?.as_str()?.to_owned())
}

/// `Some(messageId)` when the chunk is a folded steer (`_meta.goose.steer`).
fn steer_message_id(update: &Value) -> Option<String> {
    let goose = update.get("_meta")?.get("goose")?;
    if goose.get("steer")?.as_bool()? {
        Some(goose.get("messageId")?.as_str()?.to_owned())
    } else {
        None
    }
}

fn tool_call(update: Value) -> Result<ToolCall, Value> {
    let Some(id) = update
        .get("toolCallId")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return Err(update);
    };
    let text = |key: &str| update.get(key).and_then(Value::as_str).map(str::to_owned);
    Ok(ToolCall {
        id,
        title: text("title"),
        status: text("status"),
        raw: update,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_marker_follows_goose_rules() {
        let set =
            json!({"sessionUpdate": "session_info_update", "_meta": {"goose": {"activeRunId": "run_1"}}});
        let clear =
            json!({"sessionUpdate": "session_info_update", "_meta": {"goose": {"activeRunId": null}}});
        let other = json!({"sessionUpdate": "session_info_update", "_meta": {"goose": {"activeRunId": 5}}});
        let queued = json!({"sessionUpdate": "session_info_update", "_meta": {"goose": {"queuedSteer": {}}}});
        assert_eq!(run_marker(&set), Some(RunMarker::Started("run_1".into())));
        assert_eq!(run_marker(&clear), Some(RunMarker::Cleared));
        assert_eq!(run_marker(&other), None);
        assert_eq!(run_marker(&queued), None);
    }

    #[test]
    fn folded_steer_chunk_carries_its_message_id() {
        let update = json!({
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": "also do X"},
            "_meta": {"goose": {"steer": true, "messageId": "steer_9", "created": 1}}
        });
        let TurnEvent::UserMessageChunk {
            text,
            steer_message_id,
        } = turn_event(update)
        else {
            panic!("expected a user message chunk");
        };
        assert_eq!(text, "also do X");
        assert_eq!(steer_message_id.as_deref(), Some("steer_9"));
    }

    #[test]
    fn usage_updates_and_message_ids_are_read() {
        let update = json!({"sessionUpdate": "usage_update", "used": 1200, "size": 200000,
            "cost": {"amount": 0.0125, "currency": "USD"}});
        let TurnEvent::Usage(usage) = turn_event(update) else {
            panic!("expected usage");
        };
        assert_eq!((usage.used, usage.size), (Some(1200), Some(200_000)));
        assert_eq!(usage.cost.map(|cost| cost.currency), Some("USD".into()));
        let chunk = json!({"sessionUpdate": "agent_message_chunk", "messageId": "m1",
            "content": {"type": "text", "text": "hi"}});
        assert!(
            matches!(turn_event(chunk), TurnEvent::MessageChunk { message_id: Some(id), .. } if id == "m1")
        );
    }

    /// Every line the borrowed reader takes, it reads as the general path
    /// does; every other line it leaves to the general path.
    #[test]
    fn text_chunks_read_borrowed_match_the_general_path_and_the_rest_is_declined() {
        let general = |line: &str| {
            let message: Value = serde_json::from_str(line).unwrap();
            turn_event(message["params"]["update"].clone())
        };
        let taken = [
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text","text":"hi \"there\"\n"}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"},"extra":[1,{"a":2}]}}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"u"},"_meta":null}}}"#,
        ];
        for line in taken {
            let chunk = TextChunk::parse(line).unwrap_or_else(|| panic!("declined {line}"));
            assert_eq!(chunk.session, "s1");
            // TurnEvent has no PartialEq (a permission question holds a
            // responder); its Debug form shows every field.
            assert_eq!(
                format!("{:?}", chunk.event),
                format!("{:?}", general(line)),
                "{line}"
            );
        }
        let declined = [
            // A folded steer and a run marker need `_meta`.
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"u"},"_meta":{"goose":{"steer":true,"messageId":"x"}}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"t"},"_meta":{"goose":{"activeRunId":"r"}}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","text":"t"}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","content":[]}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan","content":{"type":"text","text":"t"}}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"t"}}}}"#,
            r#"{"jsonrpc":"2.0","method":"other","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"session/update"}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}"#,
            "session/update, not JSON",
        ];
        for line in declined {
            assert!(TextChunk::parse(line).is_none(), "took {line}");
        }
    }

    /// Frames the ACP schema crate (`agent-client-protocol-schema` 1.20.0)
    /// rejects outright, read here without failing the turn: the reason the
    /// client keeps its own types (issue 23 §4).
    #[test]
    fn what_the_strict_schema_rejects_is_read_leniently() {
        let untitled = json!({"sessionUpdate": "tool_call", "toolCallId": "t1"});
        assert!(matches!(
            turn_event(untitled),
            TurnEvent::ToolCall(ToolCall { id, title: None, .. }) if id == "t1"
        ));
        let sizeless = json!({"sessionUpdate": "usage_update", "used": 1200});
        let TurnEvent::Usage(usage) = turn_event(sizeless) else {
            panic!("expected usage");
        };
        assert_eq!(
            usage,
            Usage {
                used: Some(1200),
                size: None,
                cost: None
            }
        );
        let video = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "video", "uri": "x"}});
        assert!(matches!(turn_event(video), TurnEvent::Other(_)));
        let paused = StopReason::parse("paused");
        assert_eq!(paused, StopReason::Other("paused".into()));
        assert_eq!(paused.as_str(), "paused");
    }

    #[test]
    fn unknown_kinds_and_non_text_chunks_are_kept_raw() {
        let unknown = json!({"sessionUpdate": "brand_new_kind", "x": 1});
        assert!(matches!(turn_event(unknown.clone()), TurnEvent::Other(raw) if raw == unknown));
        let image = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "image"}});
        assert!(matches!(turn_event(image), TurnEvent::Other(_)));
    }

    #[test]
    fn form_elicitation_is_advertised_only_when_asked_for() {
        assert_eq!(
            initialize_params(true)["clientCapabilities"]["elicitation"],
            json!({"form": {}})
        );
        assert!(
            initialize_params(false)["clientCapabilities"]
                .get("elicitation")
                .is_none()
        );
    }

    #[test]
    fn prompt_text_block_serializes_as_acp_text_content() {
        let block = serde_json::to_value(ContentBlock::text("hi")).expect("serializable");
        assert_eq!(block, json!({"type": "text", "text": "hi"}));
    }

    #[test]
    fn prompt_image_block_serializes_as_acp_image_content_in_base64() {
        let block = serde_json::to_value(ContentBlock::image("image/png", b"\x89PNG")).expect("serializable");
        assert_eq!(
            block,
            json!({"type": "image", "mimeType": "image/png", "data": "iVBORw=="})
        );
    }

    #[test]
    fn audio_and_resource_link_blocks_serialize_as_acp_content() {
        let audio = serde_json::to_value(ContentBlock::audio("audio/ogg", b"OggS")).expect("serializable");
        assert_eq!(
            audio,
            json!({"type": "audio", "mimeType": "audio/ogg", "data": "T2dnUw=="})
        );
        let link = ContentBlock::resource_link("a.png", "https://e.com/a.png", Some("image/png".into()));
        assert_eq!(
            serde_json::to_value(link).expect("serializable"),
            json!({"type": "resource_link", "name": "a.png", "uri": "https://e.com/a.png", "mimeType": "image/png"})
        );
        let untyped = ContentBlock::resource_link("x", "https://e.com/x", None);
        assert_eq!(
            serde_json::to_value(untyped).expect("serializable"),
            json!({"type": "resource_link", "name": "x", "uri": "https://e.com/x"})
        );
    }
}
