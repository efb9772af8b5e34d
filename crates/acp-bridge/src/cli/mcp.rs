//! `acp-bridge mcp`: the stdio entry of the bridge's MCP server, run by an
//! agent that does not take MCP over HTTP (see `mcp/offer.rs`).
//!
//! A byte pump and nothing else: it connects to the daemon's local socket
//! (named by `ACP_BRIDGE_MCP_SOCKET`), sends the session's token
//! (`ACP_BRIDGE_MCP_TOKEN`) as one preamble line, then copies its stdin to
//! the socket and the socket to its stdout until either side closes. The
//! daemon checks the token and speaks MCP; this process reads no config,
//! parses no JSON and writes nothing but the daemon's bytes to stdout
//! (its own complaints go to stderr, which the agent logs).

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;

use crate::tools::mcp::{SOCKET_ENV, TOKEN_ENV, abstract_address};

/// The bytes copied at a time each way.
const CHUNK_BYTES: usize = 64 * 1024;

/// Why the pump stopped early.
#[derive(Debug, thiserror::Error)]
pub enum McpPumpError {
    #[error("{0} is not set: `acp-bridge mcp` is run by an agent, from the entry the bridge offered")]
    Missing(&'static str),
    #[error("cannot connect to the bridge's MCP socket: {0}")]
    Connect(std::io::Error),
    #[error("cannot send the token to the bridge: {0}")]
    Preamble(std::io::Error),
    #[error("the bridge closed the connection before answering (is the token still live?)")]
    Refused,
}

/// Connects and pumps until either side closes.
pub fn run() -> Result<(), McpPumpError> {
    let token = std::env::var(TOKEN_ENV).map_err(|_| McpPumpError::Missing(TOKEN_ENV))?;
    let socket = std::env::var(SOCKET_ENV).map_err(|_| McpPumpError::Missing(SOCKET_ENV))?;
    let address = abstract_address(&socket).map_err(McpPumpError::Connect)?;
    let mut stream = UnixStream::connect_addr(&address).map_err(McpPumpError::Connect)?;
    stream
        .write_all(format!("{token}\n").as_bytes())
        .map_err(McpPumpError::Preamble)?;
    let mut upstream = stream.try_clone().map_err(McpPumpError::Connect)?;
    std::thread::spawn(move || {
        let _ = pump(&mut std::io::stdin().lock(), &mut upstream);
        // The agent closed our stdin: the daemon sees the end and closes.
        let _ = upstream.shutdown(Shutdown::Write);
    });
    match pump(&mut stream, &mut std::io::stdout().lock()) {
        Ok(0) => Err(McpPumpError::Refused),
        _ => Ok(()),
    }
}

/// Copies `from` to `to` until `from` ends or either fails, flushing each
/// chunk (stdout is line-buffered); the bytes copied.
fn pump(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<u64> {
    let mut buffer = vec![0u8; CHUNK_BYTES];
    let mut total = 0u64;
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => return Ok(total),
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        to.write_all(&buffer[..read])?;
        to.flush()?;
        total += read as u64;
    }
}
