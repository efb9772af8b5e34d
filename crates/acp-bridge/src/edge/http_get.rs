//! One bounded HTTP(S) GET or PUT, for the daemon's few requests to
//! someone else's URL (a group relay's NIP-11 document, an image a mention
//! carries; a file `send_file` uploads to a Blossom server).
//!
//! hyper's HTTP/1 client (hyper already serves the metrics) over TCP, or
//! TLS with the web's root certificates (the stack the relay connections
//! use already). Every fetch is bounded in time and in size, follows no
//! redirect (a 3xx is an answer like any other non-200), and, unless its
//! caller allows it, refuses a host that resolves to a loopback, private,
//! link-local or otherwise non-public address ([`crate::edge::public_address`]:
//! the one rule, shared with the connections to other people's relays).
//! It owns no retry and no cache.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use nostr_sdk::prelude::Url;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::task::AbortOnDropHandle;

use crate::edge::public_address;
pub(crate) use crate::edge::public_address::PrivateAddresses;

/// The bounds of one fetch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// The whole fetch (resolve, connect, TLS, request, answer) takes at most this.
    pub timeout: Duration,
    /// A body larger than this is refused.
    pub max_bytes: usize,
    /// The `Accept` header sent.
    pub accept: &'static str,
    pub private_addresses: PrivateAddresses,
}

/// A 200 answer.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The `Content-Type` header, if the server sent a readable one.
    pub content_type: Option<String>,
    pub body: Bytes,
}

/// Why a fetch gave nothing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpGetError {
    #[error("the URL has no host")]
    NoHost,
    #[error("the scheme `{0}` is not fetched")]
    Scheme(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the host resolves to a private or loopback address ({0})")]
    PrivateAddress(IpAddr),
    #[error("larger than {0} bytes")]
    TooLarge(usize),
    #[error("the server answered `{0}`")]
    Status(String),
    #[error("cannot build the request: {0}")]
    Request(String),
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
}

/// What a PUT sends: its body, typed, with an `Authorization` header.
#[derive(Debug)]
pub(crate) struct Upload<'a> {
    pub body: Bytes,
    pub content_type: &'a str,
    pub authorization: &'a str,
}

/// Fetches `url` (`http`/`ws` in the clear, `https`/`wss` over TLS) within
/// `bounds`.
pub(crate) async fn get(url: &Url, bounds: Bounds) -> Result<Answer, HttpGetError> {
    tokio::time::timeout(bounds.timeout, fetch(url, None, bounds))
        .await
        .map_err(|_| HttpGetError::Timeout(bounds.timeout))?
}

/// PUTs `upload` to `url` within `bounds` (which bound the answer's body
/// too); any 2xx is an answer, and, like a GET, it follows no redirect: an
/// authorized upload goes to the server named and nowhere else.
pub(crate) async fn put(url: &Url, upload: Upload<'_>, bounds: Bounds) -> Result<Answer, HttpGetError> {
    tokio::time::timeout(bounds.timeout, fetch(url, Some(upload), bounds))
        .await
        .map_err(|_| HttpGetError::Timeout(bounds.timeout))?
}

async fn fetch(url: &Url, upload: Option<Upload<'_>>, bounds: Bounds) -> Result<Answer, HttpGetError> {
    let tls = match url.scheme() {
        "https" | "wss" => true,
        "http" | "ws" => false,
        other => return Err(HttpGetError::Scheme(other.to_owned())),
    };
    let host = url.host_str().ok_or(HttpGetError::NoHost)?;
    let port = url.port_or_known_default().unwrap_or(if tls { 443 } else { 80 });
    let target = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let builder = Request::builder()
        .uri(target)
        .header(header::HOST, authority)
        .header(header::ACCEPT, bounds.accept)
        .header(header::USER_AGENT, "acp-bridge");
    let request = match upload {
        None => builder.method(Method::GET).body(Full::new(Bytes::new())),
        Some(upload) => builder
            .method(Method::PUT)
            .header(header::CONTENT_TYPE, upload.content_type)
            .header(header::AUTHORIZATION, upload.authorization)
            .body(Full::new(upload.body)),
    }
    .map_err(|error| HttpGetError::Request(error.to_string()))?;
    // An IPv6 literal is written in brackets in a URL, not to the resolver.
    let bare_host = host.trim_start_matches('[').trim_end_matches(']');
    let tcp = public_address::connect(bare_host, port, bounds.private_addresses)
        .await
        .map_err(|error| match error {
            public_address::ConnectError::Io(error) => HttpGetError::Io(error),
            public_address::ConnectError::PrivateAddress(address) => HttpGetError::PrivateAddress(address),
        })?;
    if tls {
        let tls = tls_connector().connect(server_name(bare_host)?, tcp).await?;
        exchange(tls, request, bounds.max_bytes).await
    } else {
        exchange(tcp, request, bounds.max_bytes).await
    }
}

/// The header a Blossom server (BUD-01) says why it refused in.
const REASON_HEADER: &str = "x-reason";

/// Sends `request` over `stream` (HTTP/1.1, hyper) and reads the answer's
/// body, refusing one past `max_bytes`, and one that is not a 200 (a GET)
/// or a 2xx (a PUT).
async fn exchange(
    stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    request: Request<Full<Bytes>>,
    max_bytes: usize,
) -> Result<Answer, HttpGetError> {
    let is_get = request.method() == Method::GET;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // Ends with the fetch, whichever way it ends.
    let _connection = AbortOnDropHandle::new(tokio::spawn(connection));
    let response = sender.send_request(request).await?;
    let status = response.status();
    if (is_get && status != StatusCode::OK) || !status.is_success() {
        let reason = response
            .headers()
            .get(REASON_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(|reason| format!(": {}", reason.chars().take(200).collect::<String>()))
            .unwrap_or_default();
        return Err(HttpGetError::Status(format!("{status}{reason}")));
    }
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = Limited::new(response.into_body(), max_bytes)
        .collect()
        .await
        .map_err(|error| match error.downcast::<hyper::Error>() {
            Ok(error) => HttpGetError::Http(*error),
            Err(_) => HttpGetError::TooLarge(max_bytes),
        })?
        .to_bytes();
    Ok(Answer { content_type, body })
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

fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, HttpGetError> {
    rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|error| HttpGetError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, error)))
}

/// A one-shot HTTP server on loopback that answers `answer` to the first
/// request; its port. For the fetchers' unit tests.
#[cfg(test)]
pub(crate) async fn serving_once(answer: Vec<u8>) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 1024];
        let _ = stream.read(&mut request).await;
        let _ = stream.write_all(&answer).await;
    });
    port
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds {
        timeout: Duration::from_secs(5),
        max_bytes: 16,
        accept: "*/*",
        private_addresses: PrivateAddresses::Allowed,
    };

    #[tokio::test]
    async fn a_loopback_host_is_refused_unless_allowed() {
        let port = serving_once(b"HTTP/1.0 200 OK\r\n\r\nhi".to_vec()).await;
        let url = Url::parse(&format!("http://127.0.0.1:{port}/x")).unwrap();
        let refused = Bounds {
            private_addresses: PrivateAddresses::Refused,
            ..BOUNDS
        };
        assert!(matches!(
            get(&url, refused).await,
            Err(HttpGetError::PrivateAddress(_))
        ));
        let answer = get(&url, BOUNDS).await.unwrap();
        assert_eq!(&answer.body[..], b"hi");
    }

    #[tokio::test]
    async fn a_large_body_a_redirect_and_another_scheme_are_refused() {
        let port = serving_once(b"HTTP/1.0 200 OK\r\n\r\n0123456789abcdefXYZ".to_vec()).await;
        let url = Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        assert!(matches!(get(&url, BOUNDS).await, Err(HttpGetError::TooLarge(16))));

        let redirect = b"HTTP/1.1 302 Found\r\nLocation: file:///etc/passwd\r\nContent-Length: 0\r\n\r\n";
        let port = serving_once(redirect.to_vec()).await;
        let url = Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        assert!(matches!(get(&url, BOUNDS).await, Err(HttpGetError::Status(_))));

        let url = Url::parse("file:///etc/passwd").unwrap();
        assert!(matches!(get(&url, BOUNDS).await, Err(HttpGetError::Scheme(_))));
    }

    #[tokio::test]
    async fn a_put_sends_its_body_and_takes_any_2xx_but_no_redirect() {
        let upload = || Upload {
            body: Bytes::from_static(b"blob"),
            content_type: "text/plain",
            authorization: "Nostr abc",
        };
        let port = serving_once(b"HTTP/1.0 201 Created\r\n\r\n{}".to_vec()).await;
        let url = Url::parse(&format!("http://127.0.0.1:{port}/upload")).unwrap();
        assert_eq!(&put(&url, upload(), BOUNDS).await.unwrap().body[..], b"{}");

        let redirect =
            b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://elsewhere/\r\nContent-Length: 0\r\n\r\n";
        let port = serving_once(redirect.to_vec()).await;
        let url = Url::parse(&format!("http://127.0.0.1:{port}/upload")).unwrap();
        assert!(matches!(
            put(&url, upload(), BOUNDS).await,
            Err(HttpGetError::Status(_))
        ));

        let refused = b"HTTP/1.1 401 Unauthorized\r\nX-Reason: expired\r\nContent-Length: 0\r\n\r\n";
        let port = serving_once(refused.to_vec()).await;
        let url = Url::parse(&format!("http://127.0.0.1:{port}/upload")).unwrap();
        match put(&url, upload(), BOUNDS).await {
            Err(HttpGetError::Status(status)) => assert_eq!(status, "401 Unauthorized: expired"),
            other => panic!("{other:?}"),
        }
    }
}
