//! A loopback Blossom server (BUD-01/02) for the tests of `send_file`:
//! `PUT /upload` stores the body if its `Authorization: Nostr <base64>`
//! event is a valid kind 24242 upload authorization for exactly that body
//! (signature, kind, `t=upload`, `x` = the body's sha256, an expiration in
//! the future, created in the past), and answers its blob descriptor;
//! `GET /<sha256>` serves it back. A refusal is a 401 with `X-Reason`, as
//! BUD-01 says, and is recorded for the test to read.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use nostr_sdk::hashes::{Hash as _, sha256};
use nostr_sdk::prelude::{Event, JsonUtil, Kind, Timestamp};
use serde_json::json;

use crate::loopback_http::LoopbackHttp;

/// The largest upload taken.
const MAX_UPLOAD_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Default)]
struct State {
    blobs: Mutex<HashMap<String, Vec<u8>>>,
    refusals: Mutex<Vec<String>>,
}

/// The server, on its own thread and runtime; stops when dropped.
#[derive(Debug)]
pub struct BlossomServer {
    server: LoopbackHttp,
    state: Arc<State>,
}

impl BlossomServer {
    /// Starts a server on a free loopback port.
    pub fn start() -> std::io::Result<BlossomServer> {
        let state = Arc::new(State::default());
        let serving = Arc::clone(&state);
        let server = LoopbackHttp::start("blossom", move |request, addr| {
            let state = Arc::clone(&serving);
            async move { answer(request, addr, &state).await }
        })?;
        Ok(BlossomServer { server, state })
    }

    /// `http://127.0.0.1:PORT/`, what `--blossom` takes.
    pub fn base_url(&self) -> String {
        format!("http://{}/", self.server.addr())
    }

    /// The stored blob of hash `sha256` (hex).
    pub fn blob(&self, sha256: &str) -> Option<Vec<u8>> {
        lock(&self.state.blobs).get(sha256).cloned()
    }

    /// How many blobs are stored.
    pub fn blob_count(&self) -> usize {
        lock(&self.state.blobs).len()
    }

    /// Why uploads were refused, oldest first.
    pub fn refusals(&self) -> Vec<String> {
        lock(&self.state.refusals).clone()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn respond(status: StatusCode, body: impl Into<Bytes>, reason: Option<&str>) -> Response<Full<Bytes>> {
    let mut response = Response::builder().status(status);
    if let Some(reason) = reason {
        response = response.header("X-Reason", reason);
    }
    response.body(Full::new(body.into())).expect("a valid response")
}

async fn answer(request: Request<Incoming>, addr: SocketAddr, state: &State) -> Response<Full<Bytes>> {
    let path = request.uri().path().trim_start_matches('/').to_owned();
    match (request.method().clone(), path.as_str()) {
        (Method::PUT, "upload") => {
            let authorization = request
                .headers()
                .get("authorization")
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let content_type = request
                .headers()
                .get("content-type")
                .and_then(|value| value.to_str().ok())
                .unwrap_or("application/octet-stream")
                .to_owned();
            let body = match http_body_util::Limited::new(request.into_body(), MAX_UPLOAD_BYTES)
                .collect()
                .await
            {
                Ok(body) => body.to_bytes(),
                Err(_) => return respond(StatusCode::PAYLOAD_TOO_LARGE, "", Some("too large")),
            };
            let hash = sha256::Hash::hash(&body).to_string();
            if let Err(why) = check_authorization(authorization.as_deref(), &hash) {
                lock(&state.refusals).push(why.clone());
                return respond(StatusCode::UNAUTHORIZED, "", Some(&why));
            }
            let descriptor = json!({
                "url": format!("http://{addr}/{hash}"),
                "sha256": hash,
                "size": body.len(),
                "type": content_type,
                "uploaded": Timestamp::now().as_secs(),
            });
            lock(&state.blobs).insert(hash, body.to_vec());
            respond(StatusCode::OK, descriptor.to_string(), None)
        }
        (Method::GET, hash) => match lock(&state.blobs).get(hash.split('.').next().unwrap_or_default()) {
            Some(blob) => respond(StatusCode::OK, blob.clone(), None),
            None => respond(StatusCode::NOT_FOUND, "", Some("no such blob")),
        },
        _ => respond(StatusCode::NOT_FOUND, "", Some("not served here")),
    }
}

/// Checks a BUD-01 upload authorization for a body of hash `hash`.
fn check_authorization(header: Option<&str>, hash: &str) -> Result<(), String> {
    let encoded = header
        .and_then(|header| header.strip_prefix("Nostr "))
        .ok_or("no `Authorization: Nostr …` header")?;
    let json = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|error| format!("not base64: {error}"))?;
    let event = Event::from_json(json).map_err(|error| format!("not an event: {error}"))?;
    event
        .verify()
        .map_err(|error| format!("bad signature: {error}"))?;
    if event.kind != Kind::BlossomAuth {
        return Err(format!("kind {} is not 24242", event.kind.as_u16()));
    }
    let value_of = |name: &'static str| {
        event
            .tags
            .iter()
            .filter(move |tag| tag.as_slice().first().map(String::as_str) == Some(name))
            .filter_map(|tag| tag.as_slice().get(1).cloned())
    };
    if !value_of("t").any(|verb| verb == "upload") {
        return Err("no `t` upload tag".to_owned());
    }
    if !value_of("x").any(|x| x == hash) {
        return Err("no `x` tag with the body's hash".to_owned());
    }
    let now = Timestamp::now().as_secs();
    let expiration = value_of("expiration")
        .next()
        .and_then(|value| value.parse::<u64>().ok())
        .ok_or("no expiration")?;
    if expiration <= now {
        return Err("expired".to_owned());
    }
    if event.created_at.as_secs() > now + 60 {
        return Err("created in the future".to_owned());
    }
    Ok(())
}
