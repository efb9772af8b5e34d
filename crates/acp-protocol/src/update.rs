//! ACP payloads: the typed view of what the agent says in a turn.
//!
//! Owns the mapping between `session/update` JSON and Rust types; knows
//! nothing about routing or processes. Parsing is lenient by design: a
//! missing optional field or an unknown update kind never fails a turn, it
//! is kept raw.

use serde::Deserialize;
use serde_json::Value;

use crate::methods;
use crate::permission::{PermissionOption, PermissionRequest};

/// One typed event of a turn, in the order the agent streamed it.
///
/// The two questions the caller answers are type parameters: their answer
/// handles hold the live connection, which only a client has (acp-client
/// names this type with its own `PermissionQuestion` and
/// `ElicitationQuestion`). Parsing never makes one, so it works for any.
#[derive(Debug)]
pub enum TurnEvent<P, E> {
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
        request: PermissionRequest,
        chosen: Option<PermissionOption>,
    },
    /// The agent asked for permission and waits for the caller's answer.
    PermissionAsked(P),
    /// The agent asked a form question and waits for the caller's answer.
    ElicitationAsked(E),
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
///
/// Every field but the id is optional: an update names only what changed
/// (`content`, when present, replaces the call's whole content).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub title: Option<String>,
    pub status: Option<String>,
    pub kind: Option<ToolKind>,
    /// `None`: the update leaves the content as it was.
    pub content: Option<Vec<ToolContent>>,
    pub raw: Value,
}

impl ToolCall {
    /// The shell command an `execute` call runs, from `rawInput.command`:
    /// a string, or an argv array (codex sends `["bash", "-lc", "ls"]`)
    /// joined with spaces. Agents name other inputs freely; only this one
    /// is read.
    pub fn command(&self) -> Option<String> {
        tool_command(&self.raw)
    }
}

/// The shell command of a tool call as the agent sent it (a `tool_call`,
/// an update, or a permission request's `toolCall`), from
/// `rawInput.command`: a string, or an argv array (codex sends
/// `["bash", "-lc", "ls"]`) joined with spaces; a blank one is none.
/// Agents name other inputs freely; only this one is read.
pub fn tool_command(tool_call: &Value) -> Option<String> {
    match tool_call.get("rawInput")?.get("command")? {
        Value::String(command) if !command.trim().is_empty() => Some(command.clone()),
        Value::Array(argv) if !argv.is_empty() => Some(
            argv.iter()
                .map(|arg| arg.as_str().map_or_else(|| arg.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
}

/// The `content` of a tool call as the agent sent it, typed; `None` when
/// it has none (an update that leaves the content as it was).
pub fn tool_content(tool_call: &Value) -> Option<Vec<ToolContent>> {
    tool_call
        .get("content")
        .and_then(Value::as_array)
        .map(|items| items.iter().map(ToolContent::parse).collect())
}

/// What sort of work a tool call does (ACP `ToolKind`); a kind this crate
/// does not know reads as `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum ToolKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Think,
    Fetch,
    SwitchMode,
    #[default]
    Other,
}

impl ToolKind {
    pub fn parse(kind: &str) -> Self {
        match kind {
            "read" => ToolKind::Read,
            "edit" => ToolKind::Edit,
            "delete" => ToolKind::Delete,
            "move" => ToolKind::Move,
            "search" => ToolKind::Search,
            "execute" => ToolKind::Execute,
            "think" => ToolKind::Think,
            "fetch" => ToolKind::Fetch,
            "switch_mode" => ToolKind::SwitchMode,
            _ => ToolKind::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Delete => "delete",
            ToolKind::Move => "move",
            ToolKind::Search => "search",
            ToolKind::Execute => "execute",
            ToolKind::Think => "think",
            ToolKind::Fetch => "fetch",
            ToolKind::SwitchMode => "switch_mode",
            ToolKind::Other => "other",
        }
    }
}

/// One item of a tool call's `content`.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolContent {
    /// A file change: `old_text` is `None` for a new file.
    Diff {
        path: String,
        old_text: Option<String>,
        new_text: String,
    },
    /// A terminal the client created (`terminal/create`) shows the output.
    Terminal { terminal_id: String },
    /// Ordinary content (`{"type": "content", ...}`) or a type this crate
    /// does not know, raw.
    Other(Value),
}

impl ToolContent {
    /// Reads one item; a diff or terminal missing a required field is kept
    /// raw rather than failing the update.
    fn parse(item: &Value) -> Self {
        let text = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_owned);
        match item.get("type").and_then(Value::as_str) {
            Some("diff") => match (text("path"), text("newText")) {
                (Some(path), Some(new_text)) => ToolContent::Diff {
                    path,
                    old_text: text("oldText"),
                    new_text,
                },
                _ => ToolContent::Other(item.clone()),
            },
            Some("terminal") => match text("terminalId") {
                Some(terminal_id) => ToolContent::Terminal { terminal_id },
                None => ToolContent::Other(item.clone()),
            },
            _ => ToolContent::Other(item.clone()),
        }
    }
}

/// What a `session_info_update` says about the live run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunMarker {
    Started(String),
    Cleared,
}

/// Reads `update._meta.goose.activeRunId`: a string sets the run, `null`
/// clears it, anything else (missing, not a string) leaves it unchanged.
pub fn run_marker(update: &Value) -> Option<RunMarker> {
    let goose = update.get("_meta")?.get("goose")?;
    match goose.get("activeRunId")? {
        Value::String(run_id) => Some(RunMarker::Started(run_id.clone())),
        Value::Null => Some(RunMarker::Cleared),
        _ => None,
    }
}

/// Classifies one `session/update` payload (`params.update`).
pub fn turn_event<P, E>(update: Value) -> TurnEvent<P, E> {
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
#[derive(Debug)]
pub struct TextChunk<'a, P, E> {
    pub session: &'a str,
    pub event: TurnEvent<P, E>,
}

#[derive(Deserialize)]
struct ChunkLine<'a> {
    #[serde(borrow)]
    method: &'a str,
    /// A notification has none (or `null`, as JSON-RPC readers take it).
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

impl<'a, P, E> TextChunk<'a, P, E> {
    /// The chunk `line` carries, or `None` when it is anything else. Only a
    /// line that names `session/update` is parsed here at all.
    pub fn parse(line: &'a str) -> Option<Self> {
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
    let content = tool_content(&update);
    Ok(ToolCall {
        id,
        title: text("title"),
        status: text("status"),
        kind: text("kind").map(|kind| ToolKind::parse(&kind)),
        content,
        raw: update,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::StopReason;

    /// The questions never appear in what is parsed: `()` stands in.
    type Event = TurnEvent<(), ()>;

    fn turn_event(update: Value) -> Event {
        super::turn_event(update)
    }

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
            let chunk = TextChunk::<(), ()>::parse(line).unwrap_or_else(|| panic!("declined {line}"));
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
            assert!(TextChunk::<(), ()>::parse(line).is_none(), "took {line}");
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
    fn tool_calls_carry_kind_diffs_terminals_and_command() {
        let call = json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Edit a.rs",
        "kind": "edit", "status": "pending", "rawInput": {"command": "ls -la"},
        "content": [
            {"type": "diff", "path": "/w/a.rs", "oldText": "a\n", "newText": "b\n"},
            {"type": "diff", "path": "/w/new.rs", "oldText": null, "newText": "x\n"},
            {"type": "terminal", "terminalId": "term-1"},
            {"type": "content", "content": {"type": "text", "text": "hi"}},
            {"type": "diff", "path": "/w/broken.rs"},
            "not an object"
        ]});
        let TurnEvent::ToolCall(call) = turn_event(call) else {
            panic!("expected a tool call");
        };
        assert_eq!(call.kind, Some(ToolKind::Edit));
        assert_eq!(call.command().as_deref(), Some("ls -la"));
        let content = call.content.expect("content");
        assert_eq!(
            content[..3],
            [
                ToolContent::Diff {
                    path: "/w/a.rs".into(),
                    old_text: Some("a\n".into()),
                    new_text: "b\n".into()
                },
                ToolContent::Diff {
                    path: "/w/new.rs".into(),
                    old_text: None,
                    new_text: "x\n".into()
                },
                ToolContent::Terminal {
                    terminal_id: "term-1".into()
                },
            ]
        );
        assert!(matches!(
            content[3..],
            [
                ToolContent::Other(_),
                ToolContent::Other(_),
                ToolContent::Other(_)
            ]
        ));
        let update = json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "kind": "teleport",
            "rawInput": {"command": ["bash", "-lc", "ls"]}});
        let TurnEvent::ToolCallUpdate(update) = turn_event(update) else {
            panic!("expected a tool call update");
        };
        assert_eq!((update.kind, &update.content), (Some(ToolKind::Other), &None));
        assert_eq!(update.command().as_deref(), Some("bash -lc ls"));
        for kind in [
            "read",
            "edit",
            "delete",
            "move",
            "search",
            "execute",
            "think",
            "fetch",
            "switch_mode",
            "other",
        ] {
            assert_eq!(ToolKind::parse(kind).as_str(), kind);
        }
    }

    #[test]
    fn unknown_kinds_and_non_text_chunks_are_kept_raw() {
        let unknown = json!({"sessionUpdate": "brand_new_kind", "x": 1});
        assert!(matches!(turn_event(unknown.clone()), TurnEvent::Other(raw) if raw == unknown));
        let image = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "image"}});
        assert!(matches!(turn_event(image), TurnEvent::Other(_)));
    }
}
