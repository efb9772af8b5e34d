//! ACP vocabulary the agent speaks: method names, the `initialize` answer,
//! text of content blocks, and the `session/update` payloads (including
//! goose's `_meta.goose` run and steer markers).

use serde_json::{Value, json};

use crate::options::{Options, Reopen};
use crate::wire::{ClientGone, Outbox};

pub(crate) const INITIALIZE: &str = "initialize";
pub(crate) const SESSION_NEW: &str = "session/new";
pub(crate) const SESSION_PROMPT: &str = "session/prompt";
pub(crate) const SESSION_CANCEL: &str = "session/cancel";
pub(crate) const SESSION_UPDATE: &str = "session/update";
/// goose's mid-turn steer extension.
pub(crate) const SESSION_STEER: &str = "_goose/unstable/session/steer";
pub(crate) const SESSION_RESUME: &str = "session/resume";
pub(crate) const SESSION_LOAD: &str = "session/load";
pub(crate) const SESSION_CLOSE: &str = "session/close";
/// `--list-sessions`.
pub(crate) const SESSION_LIST: &str = "session/list";
pub(crate) const SESSION_FORK: &str = "session/fork";
pub(crate) const SESSION_SET_CONFIG_OPTION: &str = "session/set_config_option";
pub(crate) const SESSION_SET_MODE: &str = "session/set_mode";
/// The cross-vendor mid-turn steer (`--session-steering`).
pub(crate) const SESSION_STEERING: &str = "_session/steering";

/// The `initialize` result. goose advertises nothing for its steer (clients
/// try it and tolerate a refusal); `_meta.steering.supported` announces
/// `_session/steering`, as claude-agent-acp and codex-acp do.
pub(crate) fn initialize_result(options: &Options) -> Value {
    let mut result = json!({
        "protocolVersion": options.protocol_version,
        "agentCapabilities": {
            "loadSession": options.reopen_sessions == Some(Reopen::Load),
            "promptCapabilities": { "image": options.images, "audio": options.audio, "embeddedContext": false },
            // It takes an HTTP MCP server unless told not to (and calls
            // the bridge's on `[mcp-post=…]`, over HTTP or stdio).
            "mcpCapabilities": { "http": !options.no_mcp_http, "sse": false },
        },
        "agentInfo": { "name": options.name, "version": env!("CARGO_PKG_VERSION") },
        "authMethods": [],
    });
    if options.reopen_sessions == Some(Reopen::Resume) {
        result["agentCapabilities"]["sessionCapabilities"] = json!({ "resume": {}, "close": {} });
    }
    if options.list_sessions {
        result["agentCapabilities"]["sessionCapabilities"]["list"] = json!({});
        result["agentCapabilities"]["sessionCapabilities"]["fork"] = json!({});
    }
    if options.additional_directories {
        result["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"] = json!({});
    }
    if options.session_steering
        && let Some(object) = result.as_object_mut()
    {
        object.insert("_meta".to_owned(), json!({ "steering": { "supported": true } }));
    }
    result
}

/// The concatenated text of the `text` blocks; other blocks are ignored.
pub(crate) fn text_of(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect()
}

/// A line per `image` or `audio` block, with its type and its decoded
/// length (`[image image/png, 68 bytes]`), and per `resource_link` block,
/// with its name, URI and type (`[resource_link a.png
/// https://…/a.png image/png]`), so a test can see what reached the agent.
pub(crate) fn media_of(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter_map(|block| {
            let kind = block["type"].as_str()?;
            let mime = block["mimeType"].as_str().unwrap_or("?");
            match kind {
                "image" | "audio" => {
                    let data = block["data"].as_str().unwrap_or_default();
                    let padding = data.bytes().rev().take_while(|&byte| byte == b'=').count();
                    let bytes = (data.len() / 4 * 3).saturating_sub(padding.min(2));
                    Some(format!("\n[{kind} {mime}, {bytes} bytes]"))
                }
                "resource_link" => Some(format!(
                    "\n[resource_link {} {} {mime}]",
                    block["name"].as_str().unwrap_or("?"),
                    block["uri"].as_str().unwrap_or("?"),
                )),
                _ => None,
            }
        })
        .collect()
}

/// The title of the tool call the script pretends to run.
pub(crate) const TOOL_TITLE: &str = "scripted tool";

/// The pending tool call the script pretends to run, as a permission
/// request shows it.
pub(crate) fn tool_call(tool_call_id: &str, title: &str) -> Value {
    json!({
        "toolCallId": tool_call_id,
        "title": title,
        "kind": "execute",
        "status": "pending",
    })
}

/// Sends one `session/update` notification for `session_id`.
pub(crate) async fn send_update(outbox: &Outbox, session_id: &str, update: Value) -> Result<(), ClientGone> {
    outbox
        .notify(
            SESSION_UPDATE,
            json!({ "sessionId": session_id, "update": update }),
        )
        .await
}

/// The builders of `update` payloads.
pub(crate) mod update {
    use serde_json::{Value, json};

    /// Advertises the live run (`Some`) or its end (`None`, sent as JSON null).
    pub(crate) fn active_run(run_id: Option<&str>) -> Value {
        json!({
            "sessionUpdate": "session_info_update",
            "_meta": { "goose": { "activeRunId": run_id } },
        })
    }

    /// Names the session (`--list-sessions`).
    pub(crate) fn session_title(title: &str) -> Value {
        json!({ "sessionUpdate": "session_info_update", "title": title })
    }

    /// Tells the client a steer was queued on a run, before it is folded.
    pub(crate) fn queued_steer(message_id: &str, run_id: &str) -> Value {
        json!({
            "sessionUpdate": "session_info_update",
            "_meta": { "goose": { "queuedSteer": { "messageId": message_id, "runId": run_id } } },
        })
    }

    /// A steer folded into the turn: the proof that it was delivered.
    pub(crate) fn steer_folded(text: &str, message_id: &str) -> Value {
        json!({
            "sessionUpdate": "user_message_chunk",
            "content": { "type": "text", "text": text },
            "_meta": { "goose": { "steer": true, "messageId": message_id } },
        })
    }

    /// The session's usage so far: its cost in USD (the total, not this
    /// prompt's share, as ACP's `usage_update` has it).
    pub(crate) fn usage(cost: f64) -> Value {
        json!({
            "sessionUpdate": "usage_update",
            "used": 1000,
            "size": 200_000,
            "cost": { "amount": cost, "currency": "USD" },
        })
    }

    pub(crate) fn agent_text(text: &str) -> Value {
        chunk("agent_message_chunk", text)
    }

    pub(crate) fn thought(text: &str) -> Value {
        chunk("agent_thought_chunk", text)
    }

    /// The tool call as first reported.
    pub(crate) fn tool_call(tool_call_id: &str, title: &str) -> Value {
        let mut update = super::tool_call(tool_call_id, title);
        update["sessionUpdate"] = json!("tool_call");
        update
    }

    pub(crate) fn tool_call_update(tool_call_id: &str, status: &str) -> Value {
        json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "status": status,
        })
    }

    fn chunk(kind: &str, text: &str) -> Value {
        json!({ "sessionUpdate": kind, "content": { "type": "text", "text": text } })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_of_joins_text_blocks_only() {
        let blocks = [
            json!({"type": "text", "text": "a"}),
            json!({"type": "image", "data": "x"}),
            json!({"type": "text", "text": "b"}),
        ];
        assert_eq!(text_of(&blocks), "ab");
    }

    #[test]
    fn media_of_names_each_media_blocks_type_and_length_and_each_link() {
        let blocks = [
            json!({"type": "text", "text": "a"}),
            json!({"type": "image", "mimeType": "image/png", "data": "iVBORw=="}),
            json!({"type": "audio", "mimeType": "audio/ogg", "data": "YWJj"}),
            json!({"type": "resource_link", "name": "b.gif", "uri": "https://e.com/b.gif", "mimeType": "image/gif"}),
        ];
        assert_eq!(
            media_of(&blocks),
            "\n[image image/png, 4 bytes]\n[audio audio/ogg, 3 bytes]\n[resource_link b.gif https://e.com/b.gif image/gif]"
        );
        assert!(
            !initialize_result(&Options::default())["agentCapabilities"]["promptCapabilities"]["image"]
                .as_bool()
                .unwrap()
        );
        let images = initialize_result(&Options {
            images: true,
            ..Options::default()
        });
        let capabilities = &images["agentCapabilities"]["promptCapabilities"];
        assert_eq!(
            (&capabilities["image"], &capabilities["audio"]),
            (&json!(true), &json!(false))
        );
        let audio = initialize_result(&Options {
            audio: true,
            ..Options::default()
        });
        assert_eq!(
            audio["agentCapabilities"]["promptCapabilities"]["audio"],
            json!(true)
        );
    }

    #[test]
    fn session_steering_is_advertised_only_when_served() {
        let goose_style = initialize_result(&Options::default());
        assert!(goose_style.get("_meta").is_none());
        assert_eq!(goose_style["protocolVersion"], 1);
        let steering = initialize_result(&Options {
            session_steering: true,
            ..Options::default()
        });
        assert_eq!(steering["_meta"]["steering"]["supported"], true);
    }

    #[test]
    fn run_end_is_json_null() {
        assert!(update::active_run(None)["_meta"]["goose"]["activeRunId"].is_null());
    }
}
