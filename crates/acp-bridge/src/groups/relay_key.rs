//! The group relay's own key, read from its NIP-11 document.
//!
//! NIP-29 has the hosting relay sign a group's metadata and members lists
//! with the key its NIP-11 document names (`self`; older relays call it
//! `pubkey`). The document is served over HTTP(S) at the relay's own URL to
//! a request that accepts `application/nostr+json`. This module fetches it
//! with hyper's HTTP/1 client (hyper already serves the metrics) over TCP,
//! or TLS for `wss://` with the web's root certificates (the stack the
//! relay connections use already), bounded in time and size. It does not
//! follow redirects.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use nostr_sdk::prelude::{PublicKey, RelayUrl, Url};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_util::task::AbortOnDropHandle;

/// The whole fetch (connect, TLS, request, answer) takes at most this.
const NIP11_FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// A NIP-11 document larger than this is refused.
const MAX_NIP11_BYTES: usize = 64 * 1024;

/// Why the relay's key could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RelayKeyError {
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
    #[error("cannot build the request: {0}")]
    Request(String),
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    #[error("the relay's NIP-11 document is not JSON: {0}")]
    NotJson(String),
    #[error("the relay's NIP-11 document names a key that is not one: `{0}`")]
    BadKey(String),
}

/// The key the relay at `url` signs with, as its NIP-11 document names it;
/// `None` when the document names none.
pub(crate) async fn relay_key(url: &RelayUrl) -> Result<Option<PublicKey>, RelayKeyError> {
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
    let request = Request::get(url.path())
        .header(header::HOST, host)
        .header(header::ACCEPT, "application/nostr+json")
        .header(header::USER_AGENT, "acp-bridge")
        .body(Empty::<Bytes>::new())
        .map_err(|error| RelayKeyError::Request(error.to_string()))?;
    let tcp = TcpStream::connect((host, port)).await?;
    if url.scheme() == "wss" {
        let tls = tls_connector().connect(server_name(host)?, tcp).await?;
        exchange(tls, request).await
    } else {
        exchange(tcp, request).await
    }
}

/// Sends `request` over `stream` (HTTP/1.1, hyper) and reads the answer's
/// JSON body, refusing one that is not a 200 or is past the bound.
async fn exchange(
    stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    request: Request<Empty<Bytes>>,
) -> Result<Value, RelayKeyError> {
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // Ends with the fetch, whichever way it ends.
    let _connection = AbortOnDropHandle::new(tokio::spawn(connection));
    let response = sender.send_request(request).await?;
    if response.status() != StatusCode::OK {
        return Err(RelayKeyError::Status(response.status().to_string()));
    }
    let body = Limited::new(response.into_body(), MAX_NIP11_BYTES)
        .collect()
        .await
        .map_err(|error| match error.downcast::<hyper::Error>() {
            Ok(error) => RelayKeyError::Http(*error),
            Err(_) => RelayKeyError::TooLarge,
        })?
        .to_bytes();
    serde_json::from_slice(&body).map_err(|error| RelayKeyError::NotJson(error.to_string()))
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn the_key_is_read_from_self_or_pubkey() {
        let key = nostr_sdk::prelude::Keys::generate().public_key();
        let document = serde_json::json!({"name": "r", "self": key.to_hex()});
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
        huge.resize(huge.len() + MAX_NIP11_BYTES + 10, b'a');
        let url = serving(huge).await;
        let huge = relay_key(&url).await;
        assert!(matches!(huge, Err(RelayKeyError::TooLarge)), "{huge:?}");

        let url = serving(Vec::new()).await;
        assert!(matches!(relay_key(&url).await, Err(RelayKeyError::Http(_))));
    }

    #[tokio::test]
    async fn an_answer_other_than_a_document_is_refused() {
        let url =
            serving(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 14\r\n\r\nwebsocket only".to_vec()).await;
        assert!(matches!(relay_key(&url).await, Err(RelayKeyError::Status(_))));
        let url = serving(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n<html>".to_vec()).await;
        assert!(matches!(relay_key(&url).await, Err(RelayKeyError::NotJson(_))));
    }
}
