//! The group relay's own key, read from its NIP-11 document.
//!
//! NIP-29 has the hosting relay sign a group's metadata and members lists
//! with the key its NIP-11 document names (`self`; older relays call it
//! `pubkey`). The document is served over HTTP(S) at the relay's own URL to
//! a request that accepts `application/nostr+json`; it is fetched with the
//! daemon's one bounded GET (`http_get`), which follows no redirect. The
//! operator names the relays, so their addresses may be private.

use std::time::Duration;

use nostr_sdk::prelude::{PublicKey, RelayUrl};
use serde_json::Value;

use crate::edge::http_get::{self, Bounds, HttpGetError, PrivateAddresses};

/// The bounds of the fetch: the whole of it (connect, TLS, request,
/// answer) within `NIP11_FETCH_TIMEOUT`, a document of at most `MAX_NIP11_BYTES`.
const NIP11_FETCH_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_NIP11_BYTES: usize = 64 * 1024;
const NIP11_BOUNDS: Bounds = Bounds {
    timeout: NIP11_FETCH_TIMEOUT,
    max_bytes: MAX_NIP11_BYTES,
    accept: "application/nostr+json",
    private_addresses: PrivateAddresses::Allowed,
};

/// Why the relay's key could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RelayKeyError {
    #[error("the relay's NIP-11 document: {0}")]
    Fetch(#[from] HttpGetError),
    #[error("the relay's NIP-11 document is not JSON: {0}")]
    NotJson(String),
    #[error("the relay's NIP-11 document names a key that is not one: `{0}`")]
    BadKey(String),
}

/// The key the relay at `url` signs with, as its NIP-11 document names it;
/// `None` when the document names none.
pub(crate) async fn relay_key(url: &RelayUrl) -> Result<Option<PublicKey>, RelayKeyError> {
    let answer = http_get::get(url.into(), NIP11_BOUNDS).await?;
    let document: Value =
        serde_json::from_slice(&answer.body).map_err(|error| RelayKeyError::NotJson(error.to_string()))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::http_get::serving_once;

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
        let port = serving_once(answer).await;
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
        assert!(
            matches!(huge, Err(RelayKeyError::Fetch(HttpGetError::TooLarge(_)))),
            "{huge:?}"
        );

        let url = serving(Vec::new()).await;
        assert!(matches!(
            relay_key(&url).await,
            Err(RelayKeyError::Fetch(HttpGetError::Http(_)))
        ));
    }

    #[tokio::test]
    async fn an_answer_other_than_a_document_is_refused() {
        let url =
            serving(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 14\r\n\r\nwebsocket only".to_vec()).await;
        assert!(matches!(
            relay_key(&url).await,
            Err(RelayKeyError::Fetch(HttpGetError::Status(_)))
        ));
        let url = serving(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n<html>".to_vec()).await;
        assert!(matches!(relay_key(&url).await, Err(RelayKeyError::NotJson(_))));
    }
}
