//! The group relay's own key, read from its NIP-11 document.
//!
//! NIP-29 has the hosting relay sign a group's metadata and members lists
//! with the key its NIP-11 document names (`self`; older relays call it
//! `pubkey`). The document is served over HTTP(S) at the relay's own URL to
//! a request that accepts `application/nostr+json`. This module fetches it
//! with a bare HTTP/1.0 GET (a 1.0 request gets a plain body, never a
//! chunked one) over TCP, or TLS for `wss://` with the web's root
//! certificates (the stack the relay connections use already), bounded in
//! time and size. It does not follow redirects.

use std::sync::Arc;
use std::time::Duration;

use nostr_sdk::prelude::{PublicKey, RelayUrl, Url};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The whole fetch (connect, TLS, request, answer) takes at most this.
const NIP11_FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// A NIP-11 document larger than this is refused.
const MAX_NIP11_BYTES: usize = 64 * 1024;

/// Why the relay's key could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RelayKeyError {
    #[error("the relay URL has no host")]
    NoHost,
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the relay's NIP-11 document is larger than {MAX_NIP11_BYTES} bytes")]
    TooLarge,
    #[error("the relay answered `{0}` instead of a NIP-11 document")]
    Status(String),
    #[error("the relay closed the connection without an answer (no NIP-11 document)")]
    NoAnswer,
    #[error("the relay's NIP-11 document is not JSON: {0}")]
    NotJson(String),
    #[error("the relay's NIP-11 document names a key that is not one: `{0}`")]
    BadKey(String),
}

/// The key the relay at `url` signs with, as its NIP-11 document names it;
/// `None` when the document names none.
pub async fn relay_key(url: &RelayUrl) -> Result<Option<PublicKey>, RelayKeyError> {
    let document = tokio::time::timeout(NIP11_FETCH_TIMEOUT, fetch(url.into()))
        .await
        .map_err(|_| RelayKeyError::Timeout(NIP11_FETCH_TIMEOUT))??;
    key_of(&document)
}

/// The key a NIP-11 document names, if any.
fn key_of(document: &Value) -> Result<Option<PublicKey>, RelayKeyError> {
    let named = ["self", "pubkey"]
        .into_iter()
        .find_map(|field| document.get(field)?.as_str());
    named
        .map(|key| PublicKey::parse(key).map_err(|_| RelayKeyError::BadKey(key.to_owned())))
        .transpose()
}

async fn fetch(url: &Url) -> Result<Value, RelayKeyError> {
    let host = url.host_str().ok_or(RelayKeyError::NoHost)?;
    let port = url
        .port_or_known_default()
        .unwrap_or(if url.scheme() == "wss" { 443 } else { 80 });
    let tcp = TcpStream::connect((host, port)).await?;
    let request = format!(
        "GET {} HTTP/1.0\r\nHost: {host}\r\nAccept: application/nostr+json\r\nUser-Agent: acp-bridge\r\n\r\n",
        url.path()
    );
    let answer = if url.scheme() == "wss" {
        let tls = tls_connector().connect(server_name(host)?, tcp).await?;
        exchange(tls, &request).await?
    } else {
        exchange(tcp, &request).await?
    };
    document_of(&answer)
}

async fn exchange(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    request: &str,
) -> Result<Vec<u8>, RelayKeyError> {
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    let mut answer = Vec::new();
    // One byte past the bound tells a document that is too large.
    let read = stream
        .take(MAX_NIP11_BYTES as u64 + 1)
        .read_to_end(&mut answer)
        .await;
    // A TLS peer that closes without `close_notify` still sent it all.
    if let Err(error) = read
        && answer.is_empty()
    {
        return Err(error.into());
    }
    if answer.len() > MAX_NIP11_BYTES {
        return Err(RelayKeyError::TooLarge);
    }
    Ok(answer)
}

/// The JSON body of an HTTP answer whose status is 200.
fn document_of(answer: &[u8]) -> Result<Value, RelayKeyError> {
    if answer.is_empty() {
        return Err(RelayKeyError::NoAnswer);
    }
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(RelayKeyError::Status(status.to_owned()));
    }
    serde_json::from_str(body).map_err(|error| RelayKeyError::NotJson(error.to_string()))
}

fn tls_connector() -> tokio_rustls::TlsConnector {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, RelayKeyError> {
    rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|error| RelayKeyError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, error)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_read_from_self_or_pubkey() {
        let key = nostr_sdk::prelude::Keys::generate().public_key();
        let answer = format!(
            "HTTP/1.0 200 OK\r\nContent-Type: application/nostr+json\r\n\r\n{{\"name\":\"r\",\"self\":\"{}\"}}",
            key.to_hex()
        );
        let document = document_of(answer.as_bytes()).unwrap();
        assert_eq!(key_of(&document).unwrap(), Some(key));
        let older = serde_json::json!({"pubkey": key.to_hex()});
        assert_eq!(key_of(&older).unwrap(), Some(key));
        assert_eq!(key_of(&serde_json::json!({"name": "r"})).unwrap(), None);
        assert!(matches!(
            key_of(&serde_json::json!({"self": "nope"})),
            Err(RelayKeyError::BadKey(_))
        ));
    }

    /// A one-shot HTTP server on loopback that answers `answer`; the URL
    /// of a relay there.
    async fn serving(answer: Vec<u8>) -> RelayUrl {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request).await;
            let _ = stream.write_all(&answer).await;
        });
        RelayUrl::parse(&format!("ws://127.0.0.1:{port}")).unwrap()
    }

    #[tokio::test]
    async fn the_document_is_fetched_and_a_huge_one_refused() {
        let key = nostr_sdk::prelude::Keys::generate().public_key();
        let document = format!("HTTP/1.0 200 OK\r\n\r\n{{\"self\":\"{}\"}}", key.to_hex());
        let url = serving(document.into_bytes()).await;
        assert_eq!(relay_key(&url).await.unwrap(), Some(key));

        let mut huge = b"HTTP/1.0 200 OK\r\n\r\n\"".to_vec();
        huge.resize(MAX_NIP11_BYTES + 10, b'a');
        let url = serving(huge).await;
        assert!(matches!(relay_key(&url).await, Err(RelayKeyError::TooLarge)));

        let url = serving(Vec::new()).await;
        assert!(matches!(relay_key(&url).await, Err(RelayKeyError::NoAnswer)));
    }

    #[test]
    fn an_answer_other_than_a_document_is_refused() {
        assert!(matches!(
            document_of(b"HTTP/1.1 400 Bad Request\r\n\r\nwebsocket only"),
            Err(RelayKeyError::Status(_))
        ));
        assert!(matches!(
            document_of(b"HTTP/1.1 200 OK\r\n\r\n<html>"),
            Err(RelayKeyError::NotJson(_))
        ));
    }
}
