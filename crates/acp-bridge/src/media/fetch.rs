//! An image fetched for a prompt, under the operator's bounds: http(s)
//! only, within `--max-image-bytes` and `--media-fetch-timeout`, public
//! addresses only unless `--fetch-private-addresses`, an image type the
//! agents take whose first bytes agree with it, and the `x` hash of its
//! `imeta` tag (a Blossom blob's) when there is one.

use std::time::Duration;

use nostr_sdk::hashes::{Hash, sha256};
use nostr_sdk::prelude::Url;

use super::refs::MediaRef;
use crate::http_get::{self, Bounds, HttpGetError, PrivateAddresses};

/// The image types put into a prompt: the ones every agent that takes
/// images takes (claude, codex, gemini, qwen, goose), with the first bytes
/// a file of that type starts with.
const IMAGE_TYPES: [(&str, &[u8]); 4] = [
    ("image/png", b"\x89PNG\r\n\x1a\n"),
    ("image/jpeg", b"\xff\xd8\xff"),
    ("image/gif", b"GIF8"),
    ("image/webp", b"RIFF"),
];

/// The `Accept` header of an image fetch.
const ACCEPT_IMAGES: &str = "image/png, image/jpeg, image/gif, image/webp";

/// How images are fetched: the flags, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaFetcher {
    /// `--max-image-bytes`.
    pub max_image_bytes: usize,
    /// `--media-fetch-timeout`.
    pub timeout: Duration,
    /// `--fetch-private-addresses`.
    pub private_addresses: PrivateAddresses,
}

/// An image ready for a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub mime: &'static str,
    pub bytes: Vec<u8>,
}

/// Why an image is not in the prompt (said in the prompt's text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("the agent does not take images")]
    AgentTakesNone,
    #[error("more images than one prompt carries")]
    TooMany,
    #[error("too large")]
    TooLarge,
    #[error("not an http(s) URL")]
    Scheme,
    #[error("a private address")]
    PrivateAddress,
    #[error("not a PNG, JPEG, GIF or WebP image")]
    Type,
    #[error("its hash is not the one its tag names")]
    Hash,
    #[error("could not be fetched: {0}")]
    Failed(String),
}

impl Refusal {
    /// The metric label of the refusal.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Refusal::AgentTakesNone => "agent_takes_none",
            Refusal::TooMany => "too_many",
            Refusal::TooLarge => "too_large",
            Refusal::Scheme => "scheme",
            Refusal::PrivateAddress => "private_address",
            Refusal::Type => "type",
            Refusal::Hash => "hash",
            Refusal::Failed(_) => "failed",
        }
    }
}

impl MediaFetcher {
    /// Fetches `media` and checks it is an image for the prompt.
    pub(crate) async fn image(&self, media: &MediaRef) -> Result<Image, Refusal> {
        let url = Url::parse(&media.url).map_err(|_| Refusal::Scheme)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refusal::Scheme);
        }
        // A size claimed past the bound is not fetched at all.
        if media.size.is_some_and(|size| size > self.max_image_bytes as u64) {
            return Err(Refusal::TooLarge);
        }
        let bounds = Bounds {
            timeout: self.timeout,
            max_bytes: self.max_image_bytes,
            accept: ACCEPT_IMAGES,
            private_addresses: self.private_addresses,
        };
        let answer = http_get::get(&url, bounds).await.map_err(|error| match error {
            HttpGetError::TooLarge(_) => Refusal::TooLarge,
            HttpGetError::PrivateAddress(_) => Refusal::PrivateAddress,
            HttpGetError::Scheme(_) => Refusal::Scheme,
            other => Refusal::Failed(other.to_string()),
        })?;
        let mime = image_type(answer.content_type.as_deref(), &answer.body).ok_or(Refusal::Type)?;
        if let Some(expected) = &media.sha256
            && sha256::Hash::hash(&answer.body).to_string() != *expected
        {
            return Err(Refusal::Hash);
        }
        Ok(Image {
            mime,
            bytes: answer.body.to_vec(),
        })
    }
}

/// The image type of a body served as `content_type`, when that is a type
/// agents take and the body starts as a file of that type does.
fn image_type(content_type: Option<&str>, body: &[u8]) -> Option<&'static str> {
    let essence = content_type?.split(';').next()?.trim().to_ascii_lowercase();
    let (mime, magic) = IMAGE_TYPES.iter().find(|(mime, _)| *mime == essence)?;
    body.starts_with(magic).then_some(*mime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_get::serving_once;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n0000";

    fn fetcher() -> MediaFetcher {
        MediaFetcher {
            max_image_bytes: 64,
            timeout: Duration::from_secs(5),
            private_addresses: PrivateAddresses::Allowed,
        }
    }

    fn at(url: String) -> MediaRef {
        MediaRef {
            url,
            mime: None,
            sha256: None,
            size: None,
            dim: None,
        }
    }

    async fn served(content_type: &str, body: &[u8]) -> MediaRef {
        let mut answer = format!("HTTP/1.0 200 OK\r\nContent-Type: {content_type}\r\n\r\n").into_bytes();
        answer.extend_from_slice(body);
        let port = serving_once(answer).await;
        at(format!("http://127.0.0.1:{port}/a.png"))
    }

    #[test]
    fn the_type_must_be_an_image_type_the_body_agrees_with() {
        assert_eq!(image_type(Some("image/png"), PNG), Some("image/png"));
        assert_eq!(image_type(Some("IMAGE/PNG; q=1"), PNG), Some("image/png"));
        assert_eq!(image_type(Some("image/jpeg"), PNG), None);
        assert_eq!(image_type(Some("text/html"), b"<html>"), None);
        assert_eq!(image_type(Some("image/svg+xml"), b"<svg"), None);
        assert_eq!(image_type(None, PNG), None);
    }

    #[tokio::test]
    async fn an_image_within_bounds_is_fetched_and_its_hash_checked() {
        let image = fetcher().image(&served("image/png", PNG).await).await.unwrap();
        assert_eq!((image.mime, image.bytes.as_slice()), ("image/png", PNG));

        let mut hashed = served("image/png", PNG).await;
        hashed.sha256 = Some(sha256::Hash::hash(PNG).to_string());
        assert!(fetcher().image(&hashed).await.is_ok());
        let mut wrong = served("image/png", PNG).await;
        wrong.sha256 = Some("00".repeat(32));
        assert_eq!(fetcher().image(&wrong).await, Err(Refusal::Hash));
    }

    #[tokio::test]
    async fn size_type_scheme_and_address_are_bounded() {
        let huge = [PNG, &[0u8; 100]].concat();
        assert_eq!(
            fetcher().image(&served("image/png", &huge).await).await,
            Err(Refusal::TooLarge)
        );
        let mut claimed = at("http://127.0.0.1:9/never-fetched.png".into());
        claimed.size = Some(65);
        assert_eq!(fetcher().image(&claimed).await, Err(Refusal::TooLarge));
        assert_eq!(
            fetcher().image(&served("text/html", b"<html>").await).await,
            Err(Refusal::Type)
        );
        assert_eq!(
            fetcher().image(&at("file:///etc/passwd".into())).await,
            Err(Refusal::Scheme)
        );
        let public_only = MediaFetcher {
            private_addresses: PrivateAddresses::Refused,
            ..fetcher()
        };
        let private = served("image/png", PNG).await;
        assert_eq!(public_only.image(&private).await, Err(Refusal::PrivateAddress));
    }
}
