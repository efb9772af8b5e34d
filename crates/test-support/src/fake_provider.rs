//! A loopback fake model provider: the model APIs the npm agents call,
//! answered on `127.0.0.1` with text derived from each request.
//!
//! Real agents (claude-agent-acp, codex-acp, qwen-code) need a model behind
//! them. Tests have no key and no network, so this module owns a small
//! HTTP/1.1 server that speaks just enough of three wire formats for them:
//!
//! - OpenAI chat completions: `POST /v1/chat/completions` (and
//!   `/chat/completions`);
//! - Anthropic messages: `POST /v1/messages` and `/v1/messages/count_tokens`;
//! - OpenAI responses: `POST /v1/responses` (and `/responses`);
//! - Gemini: `POST /v1beta/models/{model}:generateContent`,
//!   `:streamGenerateContent` and `:countTokens` (for gemini-cli);
//!
//! plus `GET /v1/models` (and `/models`). Each answer is plain text, `reply
//! to: ` followed by the first line of the last text part of the last user
//! message (agents put their reminders first and the prompt last), streamed
//! as server-sent events when the request asks for `"stream": true`. The stream
//! can be slowed down ([`Streaming`]) so that a test lands a message while a
//! turn is still running. Every request is recorded ([`RecordedRequest`]),
//! secrets left out, so a test can assert what reached the model.
//!
//! One scripted exception ([`FakeProvider::use_tool`]): the Anthropic
//! messages API can answer a prompt with a tool call instead of text, so
//! that a test drives an agent's own tools (claude's AskUserQuestion).
//!
//! The server runs on a thread and runtime of its own (`loopback_http`): it
//! serves sync tests, async tests and tests with a paused clock alike, and
//! stops when the [`FakeProvider`] is dropped.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Sleep;

use crate::loopback_http::LoopbackHttp;

/// The model name answered when a request names none.
const DEFAULT_MODEL: &str = "fake-model";
/// Header values never recorded (lower case).
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "cookie",
];

/// How streamed answers are paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streaming {
    /// Into how many text deltas an answer is cut (at most one per
    /// character; at least one).
    pub chunks: usize,
    /// The pause before each text delta.
    pub chunk_delay: Duration,
}

impl Default for Streaming {
    /// Three deltas, no pause.
    fn default() -> Self {
        Streaming {
            chunks: 3,
            chunk_delay: Duration::ZERO,
        }
    }
}

/// Which model API a request was answered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI `POST /v1/chat/completions`.
    ChatCompletions,
    /// Anthropic `POST /v1/messages`.
    Messages,
    /// Anthropic `POST /v1/messages/count_tokens`.
    CountTokens,
    /// OpenAI `POST /v1/responses`.
    Responses,
    /// Gemini `POST /v1beta/models/{model}:generateContent`, or
    /// `:streamGenerateContent` (streamed whatever the body says).
    GenerateContent,
    /// Gemini `POST /v1beta/models/{model}:countTokens`.
    GeminiCountTokens,
    /// `GET /v1/models`.
    Models,
}

impl Api {
    /// The API served at `method` `path` (query string excluded).
    fn route(method: &Method, path: &str) -> Option<Api> {
        if let Some((_, action)) = path
            .strip_prefix("/v1beta/models/")
            .and_then(|rest| rest.split_once(':'))
        {
            return match (method, action) {
                (&Method::POST, "generateContent" | "streamGenerateContent") => Some(Api::GenerateContent),
                (&Method::POST, "countTokens") => Some(Api::GeminiCountTokens),
                _ => None,
            };
        }
        let path = path.strip_prefix("/v1").unwrap_or(path);
        match (method, path) {
            (&Method::POST, "/chat/completions") => Some(Api::ChatCompletions),
            (&Method::POST, "/messages") => Some(Api::Messages),
            (&Method::POST, "/messages/count_tokens") => Some(Api::CountTokens),
            (&Method::POST, "/responses") => Some(Api::Responses),
            (&Method::GET, "/models") => Some(Api::Models),
            _ => None,
        }
    }

    /// Whether requests to this API generate text (and so carry a
    /// conversation and get a reply).
    pub fn generates(self) -> bool {
        matches!(
            self,
            Api::ChatCompletions | Api::Messages | Api::Responses | Api::GenerateContent
        )
    }
}

/// How far the answer to a request got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// A stream still being sent.
    Streaming,
    /// Sent to the end.
    Complete,
    /// The client hung up before the end of the stream (a cancelled turn).
    Dropped,
}

/// One message of the conversation a generation request carries, whatever
/// the API: its role (`system`, `developer`, `user`, `assistant`, `tool`)
/// and its text parts, in order (other parts, such as tool calls, left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub parts: Vec<String>,
}

impl Message {
    /// The text parts joined by newlines.
    pub fn text(&self) -> String {
        self.parts.join("\n")
    }
}

/// A request as the provider received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query string, e.g. `/v1/messages?beta=true` (the value of a
    /// `key` parameter replaced by `<redacted>`).
    pub path: String,
    /// Names in lower case; the values of credentials replaced by
    /// `<redacted>`.
    pub headers: Vec<(String, String)>,
    /// The parsed JSON body; `Null` when empty, a string when not JSON.
    pub body: Value,
    /// The API that answered it; `None` for an unknown endpoint (answered
    /// 404).
    pub api: Option<Api>,
    /// The text answered, for generation requests.
    pub reply: Option<String>,
    pub delivery: Delivery,
}

impl RecordedRequest {
    /// The value of header `name` (lower case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Whether the request asked for a streamed answer.
    pub fn streamed(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
            || self.path.contains(":streamGenerateContent")
    }

    /// The conversation carried by a generation request, system prompt
    /// first; empty for other requests.
    pub fn conversation(&self) -> Vec<Message> {
        match self.api {
            Some(Api::ChatCompletions) => chat_conversation(&self.body),
            Some(Api::Messages | Api::CountTokens) => anthropic_conversation(&self.body),
            Some(Api::Responses) => responses_conversation(&self.body),
            Some(Api::GenerateContent | Api::GeminiCountTokens) => gemini_conversation(&self.body),
            Some(Api::Models) | None => Vec::new(),
        }
    }

    /// The texts of the user messages, in order.
    pub fn user_texts(&self) -> Vec<String> {
        self.conversation()
            .into_iter()
            .filter(|message| message.role == "user")
            .map(|message| message.text())
            .collect()
    }
}

/// A tool call the Anthropic messages API answers with, instead of text,
/// when the last user message holds `trigger` (and no tool result yet) and
/// the request offers a tool named `name`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedToolUse {
    pub trigger: String,
    pub name: String,
    pub input: Value,
}

impl ScriptedToolUse {
    /// Whether `body` (a messages request) is to be answered with the call.
    fn applies_to(&self, body: &Value) -> bool {
        let offered = body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|tools| tools.iter().any(|tool| tool["name"] == self.name.as_str()));
        // claude sends its environment as a trailing `system` message.
        let Some(last) = body
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|messages| messages.iter().rev().find(|message| message["role"] == "user"))
        else {
            return false;
        };
        let answered = last["content"]
            .as_array()
            .is_some_and(|parts| parts.iter().any(|part| part["type"] == "tool_result"));
        let asked = content_parts(&last["content"])
            .iter()
            .any(|part| part.contains(&self.trigger));
        offered && asked && !answered
    }
}

/// A running fake provider; stops when dropped.
#[derive(Debug)]
pub struct FakeProvider {
    server: LoopbackHttp,
    log: watch::Receiver<Vec<RecordedRequest>>,
    streaming: Arc<Mutex<Streaming>>,
    tool_use: Arc<Mutex<Option<ScriptedToolUse>>>,
}

impl FakeProvider {
    /// Starts a provider on a free loopback port, streaming at `streaming`'s
    /// pace.
    pub fn start(streaming: Streaming) -> std::io::Result<FakeProvider> {
        let (log_sender, log) = watch::channel(Vec::new());
        let streaming = Arc::new(Mutex::new(streaming));
        let tool_use = Arc::new(Mutex::new(None));
        let state = Arc::new(State {
            log: log_sender,
            streaming: Arc::clone(&streaming),
            tool_use: Arc::clone(&tool_use),
            ids: AtomicU64::new(0),
        });
        let server = LoopbackHttp::start("fake-provider", move |request, _| {
            answer(request, Arc::clone(&state))
        })?;
        Ok(FakeProvider {
            server,
            log,
            streaming,
            tool_use,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash or `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    /// Changes the pace of the answers to come.
    pub fn set_streaming(&self, streaming: Streaming) {
        *self.streaming.lock().unwrap_or_else(PoisonError::into_inner) = streaming;
    }

    /// From now on, answers prompts that hold `tool.trigger` with a call of
    /// `tool.name` (Anthropic messages API only; see [`ScriptedToolUse`]).
    pub fn use_tool(&self, tool: ScriptedToolUse) {
        *self.tool_use.lock().unwrap_or_else(PoisonError::into_inner) = Some(tool);
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.log.borrow().clone()
    }

    /// The generation requests received so far (those that carry a
    /// conversation), oldest first.
    pub fn generations(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|request| request.api.is_some_and(Api::generates))
            .collect()
    }

    /// Waits until `done` holds for the requests received (checked at each
    /// new request and each change of delivery), then returns them. Wrap it
    /// in a timeout: it waits as long as it takes.
    pub async fn wait_for(&self, mut done: impl FnMut(&[RecordedRequest]) -> bool) -> Vec<RecordedRequest> {
        let mut log = self.log.clone();
        let requests = log
            .wait_for(|requests| done(requests))
            .await
            .expect("the provider's log lives as long as the provider");
        requests.clone()
    }
}

/// What the connections share.
struct State {
    log: watch::Sender<Vec<RecordedRequest>>,
    streaming: Arc<Mutex<Streaming>>,
    tool_use: Arc<Mutex<Option<ScriptedToolUse>>>,
    /// Numbers the ids of answers.
    ids: AtomicU64,
}

impl State {
    fn record(&self, request: RecordedRequest) -> usize {
        let mut index = 0;
        self.log.send_modify(|log| {
            index = log.len();
            log.push(request);
        });
        index
    }

    fn set_delivery(&self, index: usize, delivery: Delivery) {
        self.log.send_modify(|log| log[index].delivery = delivery);
    }

    fn streaming(&self) -> Streaming {
        *self.streaming.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tool call `body` is answered with, if any.
    fn tool_use_for(&self, api: Api, body: &Value) -> Option<ScriptedToolUse> {
        let tool_use = self.tool_use.lock().unwrap_or_else(PoisonError::into_inner);
        tool_use
            .as_ref()
            .filter(|tool| api == Api::Messages && tool.applies_to(body))
            .cloned()
    }
}

/// The body of a response: all at once, or events paced by a timer.
type ResponseBody = http_body_util::Either<http_body_util::Full<Bytes>, SseBody>;

async fn answer(request: Request<Incoming>, state: Arc<State>) -> Response<ResponseBody> {
    let (parts, body) = request.into_parts();
    let raw = body
        .collect()
        .await
        .map(|body| body.to_bytes())
        .unwrap_or_default();
    let body = parse_body(&raw);
    let api = Api::route(&parts.method, parts.uri.path());
    let mut recorded = RecordedRequest {
        method: parts.method.to_string(),
        path: redact_key(
            parts
                .uri
                .path_and_query()
                .map_or(parts.uri.path(), |path| path.as_str()),
        ),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| {
                let name = name.as_str().to_owned();
                let value = if SECRET_HEADERS.contains(&name.as_str()) {
                    "<redacted>".to_owned()
                } else {
                    String::from_utf8_lossy(value.as_bytes()).into_owned()
                };
                (name, value)
            })
            .collect(),
        body,
        api,
        reply: None,
        delivery: Delivery::Complete,
    };
    let Some(api) = api else {
        state.record(recorded);
        return json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": {"type": "not_found_error", "message": "the fake provider has no such endpoint"}}),
        );
    };
    if !api.generates() {
        let answer = match api {
            Api::Models => models(),
            Api::GeminiCountTokens => json!({"totalTokens": input_tokens(&raw)}),
            _ => json!({"input_tokens": input_tokens(&raw)}),
        };
        state.record(recorded);
        return json_response(StatusCode::OK, &answer);
    }
    let tool_use = state.tool_use_for(api, &recorded.body);
    let text = match &tool_use {
        Some(tool) => format!("tool_use {}", tool.name),
        None => reply_text(&recorded.conversation()),
    };
    let exchange = Exchange {
        tool_use,
        id: state.ids.fetch_add(1, Ordering::Relaxed) + 1,
        model: recorded
            .body
            .get("model")
            .and_then(Value::as_str)
            .or_else(|| gemini_model(parts.uri.path()))
            .unwrap_or(DEFAULT_MODEL)
            .to_owned(),
        input_tokens: input_tokens(&raw),
        output_tokens: text.len().div_ceil(4) as u64,
        text: text.clone(),
    };
    recorded.reply = Some(text);
    if !recorded.streamed() {
        state.record(recorded);
        let answer = match api {
            Api::ChatCompletions => exchange.chat_completion(),
            Api::Messages => exchange.anthropic_message(),
            Api::GenerateContent => exchange.gemini_response(None),
            _ => exchange.response(),
        };
        return json_response(StatusCode::OK, &answer);
    }
    recorded.delivery = Delivery::Streaming;
    let streaming = state.streaming();
    let events = match api {
        Api::ChatCompletions => exchange.chat_completion_events(streaming.chunks),
        Api::Messages => exchange.anthropic_message_events(streaming.chunks),
        Api::GenerateContent => exchange.gemini_events(streaming.chunks),
        _ => exchange.response_events(streaming.chunks),
    };
    let index = state.record(recorded);
    let body = SseBody {
        events: events.into(),
        delay: streaming.chunk_delay,
        sleep: None,
        done: Some((state, index)),
    };
    let mut response = Response::new(http_body_util::Either::Right(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    response
}

/// `path` with the value of a `key` query parameter (Gemini's API key)
/// replaced by `<redacted>`.
fn redact_key(path: &str) -> String {
    let Some((path, query)) = path.split_once('?') else {
        return path.to_owned();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some(("key", _)) => "key=<redacted>".to_owned(),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// The model named in a Gemini path, `/v1beta/models/{model}:action`.
fn gemini_model(path: &str) -> Option<&str> {
    let (model, _) = path.strip_prefix("/v1beta/models/")?.split_once(':')?;
    Some(model)
}

fn parse_body(raw: &[u8]) -> Value {
    if raw.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(raw).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(raw).into_owned()))
}

fn json_response(status: StatusCode, body: &Value) -> Response<ResponseBody> {
    let mut response = Response::new(http_body_util::Either::Left(http_body_util::Full::new(
        Bytes::from(body.to_string()),
    )));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// A crude token count: four bytes a token.
fn input_tokens(raw: &[u8]) -> u64 {
    raw.len().div_ceil(4).max(1) as u64
}

/// The answer to a conversation: `reply to: ` and the first line of the last
/// text part of the last user message.
fn reply_text(conversation: &[Message]) -> String {
    let prompt = conversation
        .iter()
        .rev()
        .find(|message| message.role == "user")
        .and_then(|message| message.parts.last())
        .and_then(|part| part.lines().find(|line| !line.trim().is_empty()))
        .unwrap_or("");
    format!("reply to: {}", prompt.trim())
}

fn models() -> Value {
    // One list readable as OpenAI's and as Anthropic's model list.
    json!({
        "object": "list",
        "data": [{
            "id": DEFAULT_MODEL,
            "object": "model",
            "type": "model",
            "created": 0,
            "created_at": "1970-01-01T00:00:00Z",
            "owned_by": "fake-provider",
            "display_name": "Fake model",
        }],
        "has_more": false,
        "first_id": DEFAULT_MODEL,
        "last_id": DEFAULT_MODEL,
    })
}

/// The text parts of `content` in any of the APIs' shapes: a string, or an
/// array of parts with a `text` field (`text`, `input_text`, `output_text`,
/// and Anthropic's `tool_result` with nested content).
fn content_parts(content: &Value) -> Vec<String> {
    match content {
        Value::String(text) => vec![text.clone()],
        Value::Array(parts) => parts
            .iter()
            .flat_map(|part| match part.get("type").and_then(Value::as_str) {
                Some("text" | "input_text" | "output_text") | None => part
                    .get("text")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .into_iter()
                    .collect(),
                Some("tool_result") => part.get("content").map(content_parts).unwrap_or_default(),
                Some(_) => Vec::new(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A message of `role` made of the text parts of `content`, if it has any.
fn message(role: &str, content: &Value) -> Option<Message> {
    let parts = content_parts(content);
    (!parts.is_empty()).then(|| Message {
        role: role.to_owned(),
        parts,
    })
}

fn role_messages(messages: Option<&Value>) -> impl Iterator<Item = Message> + '_ {
    messages
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| message(item.get("role")?.as_str()?, item.get("content")?))
}

fn chat_conversation(body: &Value) -> Vec<Message> {
    role_messages(body.get("messages")).collect()
}

fn anthropic_conversation(body: &Value) -> Vec<Message> {
    let system = body.get("system").and_then(|system| message("system", system));
    system
        .into_iter()
        .chain(role_messages(body.get("messages")))
        .collect()
}

fn responses_conversation(body: &Value) -> Vec<Message> {
    let instructions = body
        .get("instructions")
        .and_then(|instructions| message("system", instructions));
    let input: Vec<Message> = match body.get("input") {
        Some(text @ Value::String(_)) => message("user", text).into_iter().collect(),
        // Items other than messages (function calls, reasoning) have no
        // role and are skipped.
        input => role_messages(input).collect(),
    };
    instructions.into_iter().chain(input).collect()
}

fn gemini_conversation(body: &Value) -> Vec<Message> {
    let system = body
        .get("systemInstruction")
        .and_then(|instruction| message("system", instruction.get("parts")?));
    let contents = body
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|content| {
            // Gemini calls the assistant `model`.
            let role = match content.get("role").and_then(Value::as_str) {
                Some("model") => "assistant",
                Some(role) => role,
                None => "user",
            };
            message(role, content.get("parts")?)
        });
    system.into_iter().chain(contents).collect()
}

/// One generated answer, rendered in each API's shape.
struct Exchange {
    /// A tool call answered instead of `text` (Anthropic messages only).
    tool_use: Option<ScriptedToolUse>,
    id: u64,
    model: String,
    text: String,
    input_tokens: u64,
    output_tokens: u64,
}

impl Exchange {
    fn chat_completion(&self) -> Value {
        json!({
            "id": format!("chatcmpl-fake-{}", self.id),
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": self.text},
                "finish_reason": "stop",
            }],
            "usage": self.chat_usage(),
        })
    }

    fn chat_usage(&self) -> Value {
        json!({
            "prompt_tokens": self.input_tokens,
            "completion_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
        })
    }

    fn chat_completion_events(&self, chunks: usize) -> Vec<Event> {
        let chunk = |delta: Value, finish_reason: Value| {
            json!({
                "id": format!("chatcmpl-fake-{}", self.id),
                "object": "chat.completion.chunk",
                "created": 0,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            })
        };
        let mut events = vec![Event::data(&chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        ))];
        events.extend(
            split(&self.text, chunks)
                .into_iter()
                .map(|piece| Event::delta(&chunk(json!({"content": piece}), Value::Null))),
        );
        let mut last = chunk(json!({}), json!("stop"));
        last["usage"] = self.chat_usage();
        events.push(Event::data(&last));
        events.push(Event::Now(Bytes::from_static(b"data: [DONE]\n\n")));
        events
    }

    fn anthropic_message(&self) -> Value {
        let mut message = self.anthropic_message_start();
        message["content"] = match &self.tool_use {
            Some(tool) => {
                json!([{"type": "tool_use", "id": self.tool_use_id(), "name": tool.name, "input": tool.input}])
            }
            None => json!([{"type": "text", "text": self.text}]),
        };
        message["stop_reason"] = json!(self.anthropic_stop_reason());
        message["usage"]["output_tokens"] = json!(self.output_tokens);
        message
    }

    fn anthropic_message_start(&self) -> Value {
        json!({
            "id": format!("msg_fake_{}", self.id),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {
                "input_tokens": self.input_tokens,
                "output_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        })
    }

    fn tool_use_id(&self) -> String {
        format!("toolu_fake_{}", self.id)
    }

    fn anthropic_stop_reason(&self) -> &'static str {
        if self.tool_use.is_some() {
            "tool_use"
        } else {
            "end_turn"
        }
    }

    fn anthropic_message_events(&self, chunks: usize) -> Vec<Event> {
        let block = match &self.tool_use {
            Some(tool) => {
                json!({"type": "tool_use", "id": self.tool_use_id(), "name": tool.name, "input": {}})
            }
            None => json!({"type": "text", "text": ""}),
        };
        let mut events = vec![
            Event::named(
                "message_start",
                &json!({"type": "message_start", "message": self.anthropic_message_start()}),
            ),
            Event::named(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0, "content_block": block}),
            ),
        ];
        let delta = |piece: &str| match &self.tool_use {
            Some(_) => json!({"type": "input_json_delta", "partial_json": piece}),
            None => json!({"type": "text_delta", "text": piece}),
        };
        let body = match &self.tool_use {
            Some(tool) => tool.input.to_string(),
            None => self.text.clone(),
        };
        events.extend(split(&body, chunks).into_iter().map(|piece| {
            Event::named_delta(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": delta(&piece)}),
            )
        }));
        events.extend([
            Event::named(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": 0}),
            ),
            Event::named(
                "message_delta",
                &json!({
                    "type": "message_delta",
                    "delta": {"stop_reason": self.anthropic_stop_reason(), "stop_sequence": null},
                    "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
                }),
            ),
            Event::named("message_stop", &json!({"type": "message_stop"})),
        ]);
        events
    }

    fn response_id(&self) -> String {
        format!("resp_fake_{}", self.id)
    }

    fn output_item(&self, status: &str, text: &str) -> Value {
        json!({
            "id": format!("msg_fake_{}", self.id),
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": if status == "completed" {
                json!([{"type": "output_text", "text": text, "annotations": []}])
            } else {
                json!([])
            },
        })
    }

    fn response_object(&self, status: &str) -> Value {
        let completed = status == "completed";
        json!({
            "id": self.response_id(),
            "object": "response",
            "created_at": 0,
            "status": status,
            "model": self.model,
            "output": if completed { json!([self.output_item("completed", &self.text)]) } else { json!([]) },
            "usage": if completed {
                json!({
                    "input_tokens": self.input_tokens,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": self.output_tokens,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": self.input_tokens + self.output_tokens,
                })
            } else {
                Value::Null
            },
        })
    }

    fn response(&self) -> Value {
        self.response_object("completed")
    }

    fn response_events(&self, chunks: usize) -> Vec<Event> {
        let item_id = format!("msg_fake_{}", self.id);
        let mut sequence = 0_u64;
        let mut event = |kind: &str, mut payload: Value| {
            payload["type"] = json!(kind);
            payload["sequence_number"] = json!(sequence);
            sequence += 1;
            (kind.to_owned(), payload)
        };
        let mut events = Vec::new();
        let (kind, payload) = event(
            "response.created",
            json!({"response": self.response_object("in_progress")}),
        );
        events.push(Event::named(&kind, &payload));
        let (kind, payload) = event(
            "response.output_item.added",
            json!({"output_index": 0, "item": self.output_item("in_progress", "")}),
        );
        events.push(Event::named(&kind, &payload));
        for piece in split(&self.text, chunks) {
            let (kind, payload) = event(
                "response.output_text.delta",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0, "delta": piece}),
            );
            events.push(Event::named_delta(&kind, &payload));
        }
        let (kind, payload) = event(
            "response.output_text.done",
            json!({"item_id": item_id, "output_index": 0, "content_index": 0, "text": self.text}),
        );
        events.push(Event::named(&kind, &payload));
        let (kind, payload) = event(
            "response.output_item.done",
            json!({"output_index": 0, "item": self.output_item("completed", &self.text)}),
        );
        events.push(Event::named(&kind, &payload));
        let (kind, payload) = event("response.completed", json!({"response": self.response()}));
        events.push(Event::named(&kind, &payload));
        events
    }
}

impl Exchange {
    fn gemini_usage(&self) -> Value {
        json!({
            "promptTokenCount": self.input_tokens,
            "candidatesTokenCount": self.output_tokens,
            "totalTokenCount": self.input_tokens + self.output_tokens,
        })
    }

    /// A whole answer, or with `piece` one chunk of a stream; the last
    /// chunk of a stream carries the finish reason and the usage.
    fn gemini_response(&self, piece: Option<(&str, bool)>) -> Value {
        let (text, last) = piece.unwrap_or((&self.text, true));
        let mut candidate = json!({
            "content": {"role": "model", "parts": [{"text": text}]},
            "index": 0,
        });
        let mut response = json!({"modelVersion": self.model, "responseId": format!("fake-{}", self.id)});
        if last {
            candidate["finishReason"] = json!("STOP");
            response["usageMetadata"] = self.gemini_usage();
        }
        response["candidates"] = json!([candidate]);
        response
    }

    fn gemini_events(&self, chunks: usize) -> Vec<Event> {
        let pieces = split(&self.text, chunks);
        let count = pieces.len();
        pieces
            .iter()
            .enumerate()
            .map(|(index, piece)| Event::delta(&self.gemini_response(Some((piece, index + 1 == count)))))
            .collect()
    }
}

/// Cuts `text` into at most `chunks` pieces of about equal length, on
/// character boundaries.
fn split(text: &str, chunks: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(chunks.max(1)).max(1);
    chars.chunks(size).map(|piece| piece.iter().collect()).collect()
}

/// One server-sent event, sent at once or after the chunk delay.
enum Event {
    Now(Bytes),
    Delayed(Bytes),
}

impl Event {
    fn data(payload: &Value) -> Event {
        Event::Now(Bytes::from(format!("data: {payload}\n\n")))
    }

    fn delta(payload: &Value) -> Event {
        Event::Delayed(Bytes::from(format!("data: {payload}\n\n")))
    }

    fn named(name: &str, payload: &Value) -> Event {
        Event::Now(Bytes::from(format!("event: {name}\ndata: {payload}\n\n")))
    }

    fn named_delta(name: &str, payload: &Value) -> Event {
        Event::Delayed(Bytes::from(format!("event: {name}\ndata: {payload}\n\n")))
    }
}

/// A streamed answer: its events in order, each text delta after the chunk
/// delay. Records in the log whether it was sent to the end or dropped.
struct SseBody {
    events: VecDeque<Event>,
    delay: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
    /// Where to record the delivery; taken once recorded.
    done: Option<(Arc<State>, usize)>,
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let Some(event) = this.events.pop_front() else {
            if let Some((state, index)) = this.done.take() {
                state.set_delivery(index, Delivery::Complete);
            }
            return Poll::Ready(None);
        };
        let bytes = match event {
            Event::Now(bytes) => bytes,
            Event::Delayed(bytes) if this.delay.is_zero() => bytes,
            Event::Delayed(bytes) => {
                let delay = this.delay;
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(delay)));
                if sleep.as_mut().poll(context).is_pending() {
                    this.events.push_front(Event::Delayed(bytes));
                    return Poll::Pending;
                }
                this.sleep = None;
                bytes
            }
        };
        Poll::Ready(Some(Ok(Frame::data(bytes))))
    }

    fn is_end_stream(&self) -> bool {
        self.events.is_empty() && self.done.is_none()
    }
}

impl Drop for SseBody {
    fn drop(&mut self) {
        if let Some((state, index)) = self.done.take() {
            state.set_delivery(index, Delivery::Dropped);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Instant;

    use super::*;

    /// A response read off the wire: status, lower-case headers, body with
    /// any chunked encoding undone.
    struct Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Reply {
        fn json(&self) -> Value {
            serde_json::from_str(&self.body).expect("a JSON body")
        }

        /// The server-sent events: (event name if any, data).
        fn events(&self) -> Vec<(Option<String>, String)> {
            self.body
                .split("\n\n")
                .filter(|block| !block.is_empty())
                .map(|block| {
                    let field = |name: &str| {
                        block
                            .lines()
                            .find_map(|line| line.strip_prefix(name))
                            .map(str::to_owned)
                    };
                    (field("event: "), field("data: ").expect("every event has data"))
                })
                .collect()
        }
    }

    fn send(provider: &FakeProvider, method: &str, path: &str, body: Option<&Value>) -> Reply {
        let mut stream = TcpStream::connect(provider.addr()).expect("connect");
        let body = body.map(Value::to_string).unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             authorization: Bearer sk-secret\r\nx-api-key: sk-secret\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            provider.addr(),
            body.len()
        )
        .expect("send");
        let mut raw = String::new();
        stream.read_to_string(&mut raw).expect("read");
        let (head, body) = raw.split_once("\r\n\r\n").expect("a header block");
        let mut lines = head.lines();
        let status = lines.next().expect("a status line")[9..12]
            .parse()
            .expect("a status");
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(": "))
            .map(|(name, value)| (name.to_ascii_lowercase(), value.to_owned()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(name, value)| name == "transfer-encoding" && value == "chunked");
        let body = if chunked { dechunk(body) } else { body.to_owned() };
        Reply {
            status,
            headers,
            body,
        }
    }

    fn dechunk(mut body: &str) -> String {
        let mut out = String::new();
        loop {
            let (size, rest) = body.split_once("\r\n").expect("a chunk size");
            let size = usize::from_str_radix(size, 16).expect("a hex chunk size");
            if size == 0 {
                return out;
            }
            out.push_str(&rest[..size]);
            body = &rest[size + 2..];
        }
    }

    fn provider() -> FakeProvider {
        FakeProvider::start(Streaming::default()).expect("the provider starts")
    }

    fn chat_request(stream: bool) -> Value {
        json!({
            "model": "gpt-fake",
            "stream": stream,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "first question"},
                {"role": "assistant", "content": "reply to: first question"},
                {"role": "user", "content": [{"type": "text", "text": "second question\nmore lines"}]},
            ],
        })
    }

    #[test]
    fn chat_completions_answer_the_last_user_message_and_record_the_request() {
        let provider = provider();
        let reply = send(
            &provider,
            "POST",
            "/v1/chat/completions",
            Some(&chat_request(false)),
        );
        assert_eq!(reply.status, 200);
        let answer = reply.json();
        assert_eq!(answer["object"], "chat.completion");
        assert_eq!(answer["model"], "gpt-fake");
        assert_eq!(
            answer["choices"][0]["message"]["content"],
            "reply to: second question"
        );
        assert_eq!(answer["choices"][0]["finish_reason"], "stop");
        assert!(answer["usage"]["prompt_tokens"].as_u64() > Some(0));

        let [request] = provider.requests().try_into().expect("one request");
        assert_eq!(request.api, Some(Api::ChatCompletions));
        assert_eq!(request.path, "/v1/chat/completions");
        assert_eq!(request.header("authorization"), Some("<redacted>"));
        assert_eq!(request.header("x-api-key"), Some("<redacted>"));
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(request.body, chat_request(false));
        assert_eq!(request.reply.as_deref(), Some("reply to: second question"));
        assert_eq!(request.delivery, Delivery::Complete);
        assert_eq!(
            request.conversation(),
            [
                ("system", "be brief"),
                ("user", "first question"),
                ("assistant", "reply to: first question"),
                ("user", "second question\nmore lines"),
            ]
            .map(|(role, text)| Message {
                role: role.to_owned(),
                parts: vec![text.to_owned()],
            })
        );
        assert_eq!(
            request.user_texts(),
            ["first question", "second question\nmore lines"]
        );
    }

    #[test]
    fn chat_completions_stream_deltas_then_usage_then_done() {
        let provider = provider();
        let reply = send(&provider, "POST", "/chat/completions", Some(&chat_request(true)));
        assert_eq!(reply.status, 200);
        assert!(
            reply
                .headers
                .contains(&("content-type".to_owned(), "text/event-stream".to_owned()))
        );
        let events = reply.events();
        let (last, chunks) = events.split_last().expect("events");
        assert_eq!(last.1, "[DONE]");
        let chunks: Vec<Value> = chunks
            .iter()
            .map(|(_, data)| serde_json::from_str(data).expect("JSON chunks"))
            .collect();
        let text: String = chunks
            .iter()
            .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(text, "reply to: second question");
        let deltas = chunks
            .iter()
            .filter(|chunk| {
                chunk["choices"][0]["delta"]["content"]
                    .as_str()
                    .is_some_and(|text| !text.is_empty())
            })
            .count();
        assert_eq!(deltas, Streaming::default().chunks);
        let finish = chunks.last().expect("a final chunk");
        assert_eq!(finish["choices"][0]["finish_reason"], "stop");
        assert!(finish["usage"]["completion_tokens"].as_u64() > Some(0));
        assert_eq!(provider.requests()[0].delivery, Delivery::Complete);
    }

    fn anthropic_request(stream: bool) -> Value {
        json!({
            "model": "claude-fake",
            "stream": stream,
            "max_tokens": 100,
            "system": [{"type": "text", "text": "you are a test"}],
            "messages": [
                {"role": "user", "content": "hello there"},
                {"role": "assistant", "content": [{"type": "text", "text": "reply to: hello there"}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "tool output"},
                    {"type": "text", "text": "<system-reminder>be nice</system-reminder>"},
                    {"type": "text", "text": "and now?\nsecond line"},
                ]},
            ],
        })
    }

    #[test]
    fn anthropic_messages_answer_whole() {
        let provider = provider();
        let reply = send(
            &provider,
            "POST",
            "/v1/messages?beta=true",
            Some(&anthropic_request(false)),
        );
        assert_eq!(reply.status, 200);
        let answer = reply.json();
        assert_eq!(answer["type"], "message");
        assert_eq!(answer["role"], "assistant");
        assert_eq!(answer["content"][0]["text"], "reply to: and now?");
        assert_eq!(answer["stop_reason"], "end_turn");
        assert!(answer["usage"]["output_tokens"].as_u64() > Some(0));
        let request = &provider.requests()[0];
        assert_eq!(request.path, "/v1/messages?beta=true");
        assert_eq!(request.conversation()[0].role, "system");
        assert_eq!(
            request.user_texts(),
            [
                "hello there",
                "tool output\n<system-reminder>be nice</system-reminder>\nand now?\nsecond line"
            ]
        );
    }

    #[test]
    fn anthropic_messages_stream_the_event_sequence() {
        let provider = provider();
        let reply = send(&provider, "POST", "/v1/messages", Some(&anthropic_request(true)));
        let events = reply.events();
        let names: Vec<&str> = events
            .iter()
            .map(|(name, _)| name.as_deref().expect("named events"))
            .collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        let payloads: Vec<Value> = events
            .iter()
            .map(|(_, data)| serde_json::from_str(data).expect("JSON data"))
            .collect();
        let text: String = payloads
            .iter()
            .filter_map(|payload| payload["delta"]["text"].as_str())
            .collect();
        assert_eq!(text, "reply to: and now?");
        assert_eq!(payloads[6]["delta"]["stop_reason"], "end_turn");
        assert!(payloads[6]["usage"]["output_tokens"].as_u64() > Some(0));
    }

    #[test]
    fn a_scripted_tool_call_answers_only_an_unanswered_prompt_that_offers_the_tool() {
        let provider = provider();
        let input = json!({"questions": [{"question": "Which?"}]});
        provider.use_tool(ScriptedToolUse {
            trigger: "pick one".into(),
            name: "Ask".into(),
            input: input.clone(),
        });
        let mut request = json!({"model": "claude-fake", "stream": false, "tools": [{"name": "Ask"}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "please pick one"}]},
                         {"role": "system", "content": "trailing environment"}]});
        let answer = send(&provider, "POST", "/v1/messages", Some(&request)).json();
        assert_eq!(answer["stop_reason"], "tool_use");
        assert_eq!(answer["content"][0]["name"], "Ask");
        assert_eq!(answer["content"][0]["input"], input);
        request["stream"] = json!(true);
        let events = send(&provider, "POST", "/v1/messages", Some(&request)).events();
        let payloads: Vec<Value> = events
            .iter()
            .map(|(_, data)| serde_json::from_str(data).expect("JSON data"))
            .collect();
        let streamed: String = payloads
            .iter()
            .filter_map(|payload| payload["delta"]["partial_json"].as_str())
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&streamed).expect("the input"),
            input
        );
        assert_eq!(payloads[1]["content_block"]["type"], "tool_use");

        request["stream"] = json!(false);
        request["messages"][0]["content"] = json!([
            {"type": "tool_result", "tool_use_id": "t", "content": "done"},
            {"type": "text", "text": "please pick one"},
        ]);
        let after = send(&provider, "POST", "/v1/messages", Some(&request)).json();
        assert_eq!(after["stop_reason"], "end_turn", "answered once the tool ran");
        request["tools"] = json!([]);
        request["messages"][0]["content"] = json!("please pick one");
        let unoffered = send(&provider, "POST", "/v1/messages", Some(&request)).json();
        assert_eq!(
            unoffered["stop_reason"], "end_turn",
            "no call of a tool not offered"
        );
    }

    #[test]
    fn anthropic_token_counts_and_model_lists_are_answered() {
        let provider = provider();
        let count = send(
            &provider,
            "POST",
            "/v1/messages/count_tokens",
            Some(&anthropic_request(false)),
        );
        assert!(count.json()["input_tokens"].as_u64() > Some(0));
        for path in ["/v1/models", "/models"] {
            let models = send(&provider, "GET", path, None).json();
            assert_eq!(models["data"][0]["id"], DEFAULT_MODEL);
        }
        let apis: Vec<Option<Api>> = provider.requests().iter().map(|request| request.api).collect();
        assert_eq!(
            apis,
            [Some(Api::CountTokens), Some(Api::Models), Some(Api::Models)]
        );
        assert!(provider.generations().is_empty());
    }

    fn responses_request(stream: bool) -> Value {
        json!({
            "model": "gpt-fake",
            "stream": stream,
            "instructions": "you are a test",
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "what now"}]},
                {"type": "reasoning", "summary": []},
            ],
        })
    }

    #[test]
    fn responses_answer_whole() {
        let provider = provider();
        let reply = send(&provider, "POST", "/responses", Some(&responses_request(false)));
        let answer = reply.json();
        assert_eq!(answer["object"], "response");
        assert_eq!(answer["status"], "completed");
        assert_eq!(answer["output"][0]["content"][0]["text"], "reply to: what now");
        assert!(answer["usage"]["total_tokens"].as_u64() > Some(0));
        assert_eq!(provider.requests()[0].user_texts(), ["what now"]);
    }

    #[test]
    fn responses_stream_the_event_sequence() {
        let provider = provider();
        let reply = send(&provider, "POST", "/v1/responses", Some(&responses_request(true)));
        let events = reply.events();
        let names: Vec<&str> = events
            .iter()
            .map(|(name, _)| name.as_deref().expect("named events"))
            .collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.output_item.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let payloads: Vec<Value> = events
            .iter()
            .map(|(_, data)| serde_json::from_str(data).expect("JSON data"))
            .collect();
        let text: String = payloads
            .iter()
            .filter_map(|payload| payload["delta"].as_str())
            .collect();
        assert_eq!(text, "reply to: what now");
        let completed = &payloads[7]["response"];
        assert_eq!(completed["status"], "completed");
        assert!(completed["usage"]["output_tokens"].as_u64() > Some(0));
        for (sequence, payload) in payloads.iter().enumerate() {
            assert_eq!(payload["sequence_number"], sequence);
        }
    }

    fn gemini_request() -> Value {
        json!({
            "systemInstruction": {"parts": [{"text": "you are a test"}]},
            "contents": [
                {"role": "user", "parts": [{"text": "hi gemini"}]},
                {"role": "model", "parts": [{"text": "reply to: hi gemini"}]},
                {"role": "user", "parts": [{"text": "again"}]},
            ],
        })
    }

    #[test]
    fn gemini_generate_content_answers_whole_and_hides_the_key() {
        let provider = provider();
        let reply = send(
            &provider,
            "POST",
            "/v1beta/models/gemini-fake:generateContent?key=secret",
            Some(&gemini_request()),
        );
        let answer = reply.json();
        assert_eq!(
            answer["candidates"][0]["content"]["parts"][0]["text"],
            "reply to: again"
        );
        assert_eq!(answer["candidates"][0]["finishReason"], "STOP");
        assert_eq!(answer["modelVersion"], "gemini-fake");
        assert!(answer["usageMetadata"]["totalTokenCount"].as_u64() > Some(0));
        let request = &provider.requests()[0];
        assert_eq!(
            request.path,
            "/v1beta/models/gemini-fake:generateContent?key=<redacted>"
        );
        assert_eq!(
            request
                .conversation()
                .iter()
                .map(|message| message.role.as_str())
                .collect::<Vec<_>>(),
            ["system", "user", "assistant", "user"]
        );
        let count = send(
            &provider,
            "POST",
            "/v1beta/models/gemini-fake:countTokens",
            Some(&gemini_request()),
        );
        assert!(count.json()["totalTokens"].as_u64() > Some(0));
    }

    #[test]
    fn gemini_stream_generate_content_streams_whatever_the_body_says() {
        let provider = provider();
        let reply = send(
            &provider,
            "POST",
            "/v1beta/models/gemini-fake:streamGenerateContent?alt=sse",
            Some(&gemini_request()),
        );
        let chunks: Vec<Value> = reply
            .events()
            .iter()
            .map(|(_, data)| serde_json::from_str(data).expect("JSON chunks"))
            .collect();
        assert_eq!(chunks.len(), Streaming::default().chunks);
        let text: String = chunks
            .iter()
            .filter_map(|chunk| chunk["candidates"][0]["content"]["parts"][0]["text"].as_str())
            .collect();
        assert_eq!(text, "reply to: again");
        let last = chunks.last().expect("a last chunk");
        assert_eq!(last["candidates"][0]["finishReason"], "STOP");
        assert!(last["usageMetadata"]["candidatesTokenCount"].as_u64() > Some(0));
        assert!(chunks[0]["candidates"][0].get("finishReason").is_none());
        assert!(provider.requests()[0].streamed());
    }

    #[test]
    fn unknown_endpoints_are_refused_and_recorded() {
        let provider = provider();
        let reply = send(&provider, "POST", "/v1/embeddings", Some(&json!({"input": "x"})));
        assert_eq!(reply.status, 404);
        let request = &provider.requests()[0];
        assert_eq!(request.api, None);
        assert_eq!(request.body, json!({"input": "x"}));
    }

    #[test]
    fn a_slow_stream_paces_its_deltas_and_records_a_hang_up() {
        let provider = provider();
        let streaming = Streaming {
            chunks: 4,
            chunk_delay: Duration::from_millis(100),
        };
        provider.set_streaming(streaming);
        let started = Instant::now();
        send(&provider, "POST", "/v1/messages", Some(&anthropic_request(true)));
        assert!(started.elapsed() >= streaming.chunk_delay * 4);
        assert_eq!(provider.requests()[0].delivery, Delivery::Complete);

        provider.set_streaming(Streaming {
            chunks: 4,
            chunk_delay: Duration::from_secs(60),
        });
        let mut stream = TcpStream::connect(provider.addr()).expect("connect");
        let body = anthropic_request(true).to_string();
        write!(
            stream,
            "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let wait = provider.wait_for(|requests| {
                requests
                    .get(1)
                    .is_some_and(|request| request.delivery == Delivery::Streaming)
            });
            tokio::time::timeout(Duration::from_secs(10), wait)
                .await
                .expect("the stream starts");
            drop(stream);
            let wait = provider.wait_for(|requests| requests[1].delivery == Delivery::Dropped);
            tokio::time::timeout(Duration::from_secs(10), wait)
                .await
                .expect("the hang-up is recorded");
        });
    }

    #[test]
    fn split_cuts_on_character_boundaries() {
        assert_eq!(split("héllo", 2), ["hél", "lo"]);
        assert_eq!(split("ab", 5), ["a", "b"]);
        assert_eq!(split("abc", 0), ["abc"]);
        assert!(split("", 3).is_empty());
    }
}
