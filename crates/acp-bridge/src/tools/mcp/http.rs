//! The MCP server's loopback HTTP listener: the bearer check, then rmcp's
//! streamable-HTTP service.
//!
//! Bound on `127.0.0.1:0` at start, before any session is offered it (the
//! agents give a server little time to answer at session start). Served
//! with the same hyper 1 `service_fn` shape as the metrics endpoint
//! (`metrics_endpoint.rs`), with bounds of its own: at most
//! [`MAX_CONNECTIONS`] at once, [`REQUEST_HEAD_TIMEOUT`] for a request's
//! head, [`CONNECTION_LIFETIME`] for a connection, and request bodies of at
//! most [`MAX_REQUEST_BODY_BYTES`] (our tools take short arguments).
//! One conversation's token has at most [`MAX_PER_CONVERSATION`] requests
//! in flight: past it the request is answered 429 and its connection
//! closed, so one conversation's agent cannot hold every connection and
//! shut the others out (connections are pooled across tokens by HTTP
//! clients, so the count is of requests being served, each holding its
//! connection).
//!
//! Every request must carry `Authorization: Bearer <token>` of a live
//! session (see [`tokens`](super::tokens)); any other gets 401 with an
//! empty body, before rmcp reads a byte of it. The token's conversation is
//! then fixed in the tools that serve the request: rmcp runs stateless
//! (no `Mcp-Session-Id`, no session map to bound or evict), so each
//! request is served by a service built for its conversation alone.
//! rmcp also checks the `Host` header against loopback names (DNS
//! rebinding) and refuses any request with an `Origin` (no browser calls
//! this server).
//!
//! A live token is not enough: the process that connected must be the
//! agents' user's or the daemon's ([`tcp_owner`](super::tcp_owner)), else
//! 403. Agents may put the token in a command line that every local user
//! can read.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_bridge_core::mention::ConversationKey;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::tcp_owner;
use super::tokens::TokenRegistry;
use crate::edge::http_server::{self, ConnectionEnds, ServerBounds};
use crate::telemetry::metrics;
use crate::tools::{BridgeTools, ToolRequest};

/// Connections served at once: a few per agent process (each keeps one
/// alive per session it runs), with headroom.
const MAX_CONNECTIONS: usize = 64;
/// Requests of one conversation served at once: a quarter of the
/// connections, so that at least three others always find one.
const MAX_PER_CONVERSATION: usize = MAX_CONNECTIONS / 4;
/// How long a connection may take to send a request's head, and how long a
/// kept-alive one may sit idle before its next.
const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a connection lives, whatever it does (an agent reconnects).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);
/// The largest request body rmcp reads (a tool call's JSON).
const MAX_REQUEST_BODY_BYTES: usize = 256 * 1024;
/// The path the server answers on.
pub(super) const PATH: &str = "/mcp";

type Body = BoxBody<Bytes, Infallible>;

/// What serving needs, shared by every connection.
#[derive(Debug)]
struct Shared {
    tokens: Arc<TokenRegistry>,
    heart: mpsc::Sender<ToolRequest>,
    stop: CancellationToken,
    in_flight: Arc<InFlight>,
    /// The users whose processes may call: the agents' and the daemon's.
    callers: Vec<u32>,
}

/// How many requests each conversation has being served.
#[derive(Debug, Default)]
struct InFlight(Mutex<HashMap<ConversationKey, usize>>);

/// One request of a conversation being served; given back when dropped.
#[derive(Debug)]
struct Seat {
    book: Arc<InFlight>,
    conversation: ConversationKey,
}

impl InFlight {
    /// A seat for a request of `conversation`, unless it has
    /// [`MAX_PER_CONVERSATION`] already.
    fn seat(self: &Arc<Self>, conversation: &ConversationKey) -> Option<Seat> {
        let mut counts = self.counts();
        let count = counts.entry(conversation.clone()).or_default();
        if *count >= MAX_PER_CONVERSATION {
            return None;
        }
        *count += 1;
        Some(Seat {
            book: Arc::clone(self),
            conversation: conversation.clone(),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<ConversationKey, usize>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut counts = self.book.counts();
        if let Some(count) = counts.get_mut(&self.conversation) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.conversation);
            }
        }
    }
}

/// Binds the listener now (so a failure stops the start) and serves until
/// `stop` the processes of the users `callers`. Returns the bound address.
pub(super) async fn bind(
    tokens: Arc<TokenRegistry>,
    heart: mpsc::Sender<ToolRequest>,
    stop: CancellationToken,
    callers: Vec<u32>,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "serving the bridge's MCP server on loopback");
    let shared = Arc::new(Shared {
        tokens,
        heart,
        stop,
        in_flight: Arc::default(),
        callers,
    });
    tokio::spawn(serve(listener, shared));
    Ok(addr)
}

/// The server's bounds (see the module doc).
const BOUNDS: ServerBounds = ServerBounds {
    name: "MCP server",
    max_connections: MAX_CONNECTIONS,
    head_timeout: REQUEST_HEAD_TIMEOUT,
    lifetime: CONNECTION_LIFETIME,
    on_full: || {
        tracing::warn!(
            max = MAX_CONNECTIONS,
            "MCP server: too many connections; closing one"
        )
    },
};

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let stop = shared.stop.clone();
    let answer = move |request| {
        let shared = Arc::clone(&shared);
        async move { respond(request, &shared).await }
    };
    http_server::serve(listener, BOUNDS, stop, answer).await;
}

/// 401 unless the request carries a live token; else rmcp's answer, with
/// the tools bound to the token's conversation.
async fn respond(request: Request<Incoming>, shared: &Shared) -> Response<Body> {
    let conversation = bearer(&request).and_then(|token| shared.tokens.resolve(token));
    let Some(conversation) = conversation else {
        metrics::mcp_unauthorized();
        tracing::info!(
            path = request.uri().path(),
            "MCP request without a live token: 401"
        );
        return status(StatusCode::UNAUTHORIZED);
    };
    let caller = request
        .extensions()
        .get::<ConnectionEnds>()
        .and_then(|ends| tcp_owner::owner_uid(ends.local, ends.peer));
    if !caller.is_some_and(|uid| shared.callers.contains(&uid)) {
        metrics::mcp_unauthorized();
        tracing::warn!(
            %conversation,
            caller_uid = caller,
            allowed = ?shared.callers,
            "MCP request with a live token from a process of another user: 403 (the token may have leaked, e.g. from an agent's command line)"
        );
        return status(StatusCode::FORBIDDEN);
    }
    if request.uri().path() != PATH {
        return status(StatusCode::NOT_FOUND);
    }
    let Some(_seat) = shared.in_flight.seat(&conversation) else {
        tracing::warn!(
            %conversation,
            max = MAX_PER_CONVERSATION,
            "MCP server: too many requests of one conversation at once; 429, connection closed"
        );
        let mut response = status(StatusCode::TOO_MANY_REQUESTS);
        response.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
        return response;
    };
    let heart = shared.heart.clone();
    let service = StreamableHttpService::new(
        move || Ok(BridgeTools::new(conversation.clone(), heart.clone())),
        Arc::new(NeverSessionManager::default()),
        StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .enforce_origin_validation()
            .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
            .with_cancellation_token(shared.stop.child_token()),
    );
    service.handle(request).await
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer(request: &Request<Incoming>) -> Option<&str> {
    let value = request
        .headers()
        .get(hyper::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// An answer with `code` and no body: nothing that tells a prober more.
fn status(code: StatusCode) -> Response<Body> {
    let mut response = Response::new(Empty::new().boxed());
    *response.status_mut() = code;
    response
}
