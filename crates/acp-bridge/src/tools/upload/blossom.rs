//! Uploading a blob to a Blossom server (BUD-02 `PUT /upload`), authorized
//! by a kind 24242 event (BUD-01) the bot's signer signs.
//!
//! Written on the daemon's one bounded HTTP client (`http_get`) rather than
//! taken from nostr-blossom, which brings reqwest, has no timeout and
//! follows redirects on the authorized PUT. The server's blob descriptor
//! must name the hash that was sent: a server that stored something else
//! (or says so) is not linked to.

use std::time::Duration;

use base64::Engine as _;
use hyper::body::Bytes;
use nostr_sdk::hashes::{Hash as _, sha256};
use nostr_sdk::prelude::{EventBuilder, JsonUtil, Kind, Tag, TagKind, TagStandard, Timestamp, Url};

use crate::edge::http_get::{self, Bounds, HttpGetError, PrivateAddresses, Upload};
use crate::edge::signer::BotSigner;

/// How long an upload authorization stays valid (BUD-01 `expiration`).
const AUTHORIZATION_LIFETIME: Duration = Duration::from_secs(5 * 60);
/// One upload (connect, TLS, body, answer) takes at most this.
pub(crate) const UPLOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest blob descriptor read.
const MAX_DESCRIPTOR_BYTES: usize = 64 * 1024;

/// A file ready to upload.
#[derive(Debug, Clone)]
pub(crate) struct Blob {
    pub bytes: Bytes,
    /// Hex.
    pub sha256: String,
    pub mime: &'static str,
}

impl Blob {
    pub(crate) fn new(bytes: Vec<u8>, mime: &'static str) -> Blob {
        let sha256 = sha256::Hash::hash(&bytes).to_string();
        Blob {
            bytes: Bytes::from(bytes),
            sha256,
            mime,
        }
    }
}

/// Why an upload gave no URL.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BlossomError {
    #[error("cannot sign the upload authorization: {0}")]
    Sign(String),
    #[error("{0}")]
    Http(#[from] HttpGetError),
    #[error("the server's blob descriptor is not readable: {0}")]
    Descriptor(String),
    #[error("the server stored a blob with another hash ({0})")]
    HashMismatch(String),
}

impl BlossomError {
    /// The metric label of the failure.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            BlossomError::Sign(_) => "sign",
            BlossomError::Http(HttpGetError::Timeout(_)) => "timeout",
            BlossomError::Http(HttpGetError::Status(_)) => "refused",
            BlossomError::Http(_) => "failed",
            BlossomError::Descriptor(_) | BlossomError::HashMismatch(_) => "bad_descriptor",
        }
    }
}

/// The `Authorization` header value for uploading `blob` as `name` to
/// `server`: the event names the server's domain (a `server` tag, BUD-01's
/// scoping), so a server that received it cannot replay it against
/// another, and each server gets its own.
async fn authorization(
    signer: &BotSigner,
    blob: &Blob,
    name: &str,
    server: &Url,
) -> Result<String, BlossomError> {
    let hash = blob
        .sha256
        .parse::<sha256::Hash>()
        .map_err(|error| BlossomError::Sign(error.to_string()))?;
    let domain = server
        .host_str()
        .ok_or_else(|| BlossomError::Sign(format!("{server} names no host")))?
        .to_ascii_lowercase();
    let event = EventBuilder::new(Kind::BlossomAuth, format!("Upload {name}"))
        .tags([
            Tag::hashtag("upload"),
            Tag::from_standardized(TagStandard::Sha256(hash)),
            Tag::expiration(Timestamp::now() + AUTHORIZATION_LIFETIME),
            Tag::custom(TagKind::custom("server"), [domain]),
        ])
        .sign(signer)
        .await
        .map_err(|error| BlossomError::Sign(error.to_string()))?;
    let encoded = base64::engine::general_purpose::STANDARD.encode(event.as_json());
    Ok(format!("Nostr {encoded}"))
}

/// The blob descriptor fields read (BUD-02).
#[derive(Debug, serde::Deserialize)]
struct Descriptor {
    url: String,
    sha256: String,
}

/// Uploads `blob`, named `name`, to the Blossom server at `server` (its
/// base URL) with an authorization `signer` signs for that server alone;
/// the blob's URL there.
pub(crate) async fn upload(
    signer: &BotSigner,
    server: &Url,
    blob: &Blob,
    name: &str,
    private_addresses: PrivateAddresses,
) -> Result<Url, BlossomError> {
    let authorization = &authorization(signer, blob, name, server).await?;
    let endpoint = server
        .join("upload")
        .map_err(|error| BlossomError::Descriptor(error.to_string()))?;
    let bounds = Bounds {
        timeout: UPLOAD_TIMEOUT,
        max_bytes: MAX_DESCRIPTOR_BYTES,
        accept: "application/json",
        private_addresses,
    };
    let answer = http_get::put(
        &endpoint,
        Upload {
            body: blob.bytes.clone(),
            content_type: blob.mime,
            authorization,
        },
        bounds,
    )
    .await?;
    let descriptor: Descriptor =
        serde_json::from_slice(&answer.body).map_err(|error| BlossomError::Descriptor(error.to_string()))?;
    if !descriptor.sha256.eq_ignore_ascii_case(&blob.sha256) {
        return Err(BlossomError::HashMismatch(descriptor.sha256));
    }
    let url = Url::parse(&descriptor.url).map_err(|error| BlossomError::Descriptor(error.to_string()))?;
    if !matches!(url.scheme(), "https" | "http") {
        return Err(BlossomError::Descriptor(format!("a {} URL", url.scheme())));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::http_get::serving_once;

    #[tokio::test]
    async fn a_descriptor_naming_another_hash_is_refused() {
        let blob = Blob::new(b"hello".to_vec(), "text/plain");
        let other = "0".repeat(64);
        let answer = format!(
            "HTTP/1.0 200 OK\r\n\r\n{{\"url\":\"http://127.0.0.1/{other}\",\"sha256\":\"{other}\",\"size\":5}}"
        );
        let port = serving_once(answer.into_bytes()).await;
        let server = Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        let signer = BotSigner::from_keys(nostr_sdk::prelude::Keys::generate());
        let outcome = upload(&signer, &server, &blob, "x", PrivateAddresses::Allowed).await;
        assert!(
            matches!(outcome, Err(BlossomError::HashMismatch(_))),
            "{outcome:?}"
        );

        let good = format!(
            "HTTP/1.0 200 OK\r\n\r\n{{\"url\":\"http://127.0.0.1/{0}\",\"sha256\":\"{0}\"}}",
            blob.sha256
        );
        let port = serving_once(good.into_bytes()).await;
        let server = Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        let url = upload(&signer, &server, &blob, "x", PrivateAddresses::Allowed)
            .await
            .unwrap();
        assert_eq!(url.path(), format!("/{}", blob.sha256));
        assert_eq!(
            blob.sha256, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
            "sha256 of `hello`"
        );
    }

    /// An authorization names the one server it is for.
    #[tokio::test]
    async fn each_servers_authorization_names_that_server_alone() {
        use nostr_sdk::prelude::{Event, Keys};
        let keys = Keys::generate();
        let signer = BotSigner::from_keys(keys.clone());
        let blob = Blob::new(b"hello".to_vec(), "text/plain");
        let read = |header: String| {
            let json = base64::engine::general_purpose::STANDARD
                .decode(header.strip_prefix("Nostr ").unwrap())
                .unwrap();
            let event = Event::from_json(json).unwrap();
            event.verify().unwrap();
            let servers: Vec<String> = event
                .tags
                .filter(TagKind::custom("server"))
                .filter_map(|tag| tag.content().map(str::to_owned))
                .collect();
            servers
        };
        let one = Url::parse("https://Blossom.Example.com/").unwrap();
        let other = Url::parse("https://cdn.other.net:8443/base/").unwrap();
        let for_one = read(authorization(&signer, &blob, "a.txt", &one).await.unwrap());
        let for_other = read(authorization(&signer, &blob, "a.txt", &other).await.unwrap());
        println!("server tags: {for_one:?}, {for_other:?}");
        assert_eq!(for_one, ["blossom.example.com"]);
        assert_eq!(for_other, ["cdn.other.net"]);
    }
}
