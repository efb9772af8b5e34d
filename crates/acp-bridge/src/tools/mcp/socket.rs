//! The MCP server's local socket: what `acp-bridge mcp` (the stdio entry
//! offered to agents without `mcpCapabilities.http`) connects to.
//!
//! A Linux abstract Unix socket with a random name, bound at start. Not a
//! socket file: with `--agent-user` the daemon runs as root and its state
//! dir is 0700, so a file there is out of the agent's reach, and a file
//! anywhere else needs its mode and owner right (and removing after a
//! crash); an abstract name has no file and goes with the daemon's
//! process. It is reachable from the daemon's network namespace, which the
//! agents share (acp-client unshares PID and mount only), and by any local
//! process there, as the loopback HTTP port is; the token is one guard,
//! and the peer's uid, as the kernel gives it (`SO_PEERCRED`), the other.
//!
//! A connection sends one preamble line first, the token of its session
//! (at most [`MAX_PREAMBLE_BYTES`], within [`PREAMBLE_TIMEOUT`]); a token
//! that is not live, or a peer whose uid is neither the one the token's
//! conversation's agent runs as nor the daemon's, closes the connection
//! unanswered, logged and counted (`acp_bridge_mcp_unauthorized_total`):
//! a token read by another local user (from a process's environment, say)
//! serves them nothing. Then rmcp serves newline-delimited
//! JSON-RPC on it with the tools bound to the token's conversation, until
//! the agent closes it, the token is revoked (its session forgotten) or
//! the daemon stops. At most [`MAX_CONNECTIONS`] are served at once; one
//! more is closed as soon as it is accepted.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::tokens::TokenRegistry;
use crate::edge::http_server::AcceptBackoff;
use crate::telemetry::metrics;
use crate::tools::{BridgeTools, ToolRequest};

/// The variable `acp-bridge mcp` reads its session's token from (env, not
/// argv: anyone on the host can read a process's argv).
pub(crate) const TOKEN_ENV: &str = "ACP_BRIDGE_MCP_TOKEN";
/// The variable `acp-bridge mcp` reads the socket's abstract name from.
pub(crate) const SOCKET_ENV: &str = "ACP_BRIDGE_MCP_SOCKET";
/// Connections served at once: one per agent session that runs the stdio
/// entry, with headroom.
const MAX_CONNECTIONS: usize = 64;
/// The longest preamble line read (a token is 64 hex characters).
const MAX_PREAMBLE_BYTES: u64 = 128;
/// How long a connection may take to send its preamble.
const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a client may take to `initialize` once its token is accepted.
const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(60);
/// Random bytes in the socket's name (128 bits: no other process guesses
/// or squats it).
const NAME_RANDOM_BYTES: usize = 16;

/// What serving needs, shared by every connection.
#[derive(Debug)]
struct Shared {
    tokens: Arc<TokenRegistry>,
    heart: mpsc::Sender<ToolRequest>,
    stop: CancellationToken,
    /// The daemon's own uid, always let in (it started every agent).
    own_uid: u32,
}

/// The abstract socket address of `name` (no leading NUL).
pub(crate) fn abstract_address(name: &str) -> std::io::Result<SocketAddr> {
    SocketAddr::from_abstract_name(name.as_bytes())
}

/// Binds a fresh abstract socket now (so a failure stops the start) and
/// serves until `stop`. Returns its name.
pub(super) fn bind(
    tokens: Arc<TokenRegistry>,
    heart: mpsc::Sender<ToolRequest>,
    stop: CancellationToken,
) -> std::io::Result<String> {
    let mut random = [0u8; NAME_RANDOM_BYTES];
    getrandom::fill(&mut random).map_err(|error| std::io::Error::other(error.to_string()))?;
    let hex: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
    let name = format!("acp-bridge-mcp-{hex}");
    let listener = std::os::unix::net::UnixListener::bind_addr(&abstract_address(&name)?)?;
    listener.set_nonblocking(true)?;
    let listener = UnixListener::from_std(listener)?;
    tracing::info!(socket = %name, "serving the bridge's MCP server on an abstract Unix socket");
    let shared = Arc::new(Shared {
        tokens,
        heart,
        stop,
        own_uid: nix::unistd::geteuid().as_raw(),
    });
    tokio::spawn(serve(listener, shared));
    Ok(name)
}

async fn serve(listener: UnixListener, shared: Arc<Shared>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut backoff = AcceptBackoff::default();
    let accept = || async { listener.accept().await.map(|(stream, _)| stream) };
    while let Some(stream) = backoff.next_connection("MCP socket", &shared.stop, accept).await {
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            tracing::warn!(
                max = MAX_CONNECTIONS,
                "MCP socket: too many connections; closing one"
            );
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            serve_connection(stream, &shared).await;
            drop(slot);
        });
    }
}

/// The preamble's token checked, then rmcp until the connection, the token
/// or the daemon ends.
async fn serve_connection(stream: UnixStream, shared: &Shared) {
    let peer_uid = match stream.peer_cred() {
        Ok(credentials) => credentials.uid(),
        Err(error) => {
            tracing::warn!(%error, "MCP connection whose peer's credentials are unknown: closed");
            return;
        }
    };
    let (read, write) = stream.into_split();
    let mut read = BufReader::new(read);
    let token = match tokio::time::timeout(PREAMBLE_TIMEOUT, preamble(&mut read)).await {
        Ok(Some(token)) => token,
        Ok(None) | Err(_) => String::new(),
    };
    let Some(binding) = shared.tokens.bind(&token) else {
        metrics::mcp_unauthorized();
        tracing::info!("MCP connection without a live token: closed");
        return;
    };
    let (conversation, revoked) = (binding.conversation, binding.revoked);
    if peer_uid != binding.agent_uid && peer_uid != shared.own_uid {
        metrics::mcp_unauthorized();
        tracing::warn!(
            %conversation,
            peer_uid,
            agent_uid = binding.agent_uid,
            "MCP connection with a live token from a process of another uid than its conversation's agent: closed"
        );
        return;
    }
    tracing::info!(%conversation, "MCP connection over the local socket");
    let ended = CancellationToken::new();
    let tools = BridgeTools::new(conversation.clone(), shared.heart.clone());
    let started = tokio::time::timeout(
        INITIALIZE_TIMEOUT,
        tools.serve_with_ct((read, write), ended.clone()),
    );
    let running = tokio::select! {
        () = shared.stop.cancelled() => return,
        () = revoked.cancelled() => return,
        started = started => match started {
            Ok(Ok(running)) => running,
            Ok(Err(error)) => {
                tracing::info!(%conversation, %error, "MCP connection ended before it was initialized");
                return;
            }
            Err(_) => {
                tracing::info!(%conversation, timeout_secs = INITIALIZE_TIMEOUT.as_secs(), "MCP connection not initialized in time: closed");
                return;
            }
        },
    };
    tokio::select! {
        _ = running.waiting() => {}
        () = shared.stop.cancelled() => ended.cancel(),
        () = revoked.cancelled() => {
            tracing::info!(%conversation, "MCP connection closed: its session's token was revoked");
            ended.cancel();
        }
    }
}

/// The first line, without its end; `None` when it is longer than
/// [`MAX_PREAMBLE_BYTES`] or the connection ends first.
async fn preamble<R: tokio::io::AsyncBufRead + Unpin>(read: &mut R) -> Option<String> {
    let mut line = Vec::new();
    (&mut *read)
        .take(MAX_PREAMBLE_BYTES)
        .read_until(b'\n', &mut line)
        .await
        .ok()?;
    let line = line.strip_suffix(b"\n")?;
    String::from_utf8(line.to_vec())
        .ok()
        .map(|token| token.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_preamble_is_one_bounded_line() {
        let mut read: &[u8] = b"abc\n{\"jsonrpc\"";
        assert_eq!(preamble(&mut read).await.as_deref(), Some("abc"));
        assert_eq!(read, b"{\"jsonrpc\"", "what follows is left for rmcp");
        let mut unfinished: &[u8] = b"abc";
        assert_eq!(preamble(&mut unfinished).await, None);
        let long = format!("{}\n", "a".repeat(MAX_PREAMBLE_BYTES as usize));
        assert_eq!(preamble(&mut long.as_bytes()).await, None);
    }
}
