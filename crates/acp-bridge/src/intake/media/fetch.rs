//! An image or audio clip fetched for a prompt, under the operator's
//! bounds: http(s) only, within `--max-image-bytes` (`--max-audio-bytes`
//! for audio) and `--media-fetch-timeout`, public addresses only unless
//! `--fetch-private-addresses`, a type of its kind the agents take whose
//! first bytes agree with it, and the `x` hash of its `imeta` tag (a
//! Blossom blob's) when there is one.

use std::time::Duration;

use acp_bridge_core::media_refs::{MediaKind, MediaRef};
use nostr_sdk::hashes::{Hash, sha256};
use nostr_sdk::prelude::Url;

use crate::edge::http_get::{self, Bounds, HttpGetError, PrivateAddresses};

/// A type put into a prompt: its name, the other names servers give it,
/// and whether a body starts as a file of that type does.
type MediaType = (&'static str, &'static [&'static str], fn(&[u8]) -> bool);

/// The image types put into a prompt: the ones every agent that takes
/// images takes (claude, codex, gemini, qwen, goose).
const IMAGE_TYPES: [MediaType; 4] = [
    ("image/png", &[], |body| body.starts_with(b"\x89PNG\r\n\x1a\n")),
    ("image/jpeg", &[], |body| body.starts_with(b"\xff\xd8\xff")),
    ("image/gif", &[], |body| body.starts_with(b"GIF8")),
    ("image/webp", &[], |body| body.starts_with(b"RIFF")),
];

/// The audio types put into a prompt: the ones gemini and qwen (the agents
/// that take audio) pass to their models.
const AUDIO_TYPES: [MediaType; 6] = [
    ("audio/mpeg", &["audio/mp3"], |body| {
        body.starts_with(b"ID3") || matches!(body, [0xff, second, ..] if second & 0xe0 == 0xe0)
    }),
    ("audio/ogg", &["audio/opus"], |body| body.starts_with(b"OggS")),
    ("audio/wav", &["audio/x-wav", "audio/wave"], |body| {
        body.starts_with(b"RIFF") && body.get(8..12) == Some(b"WAVE")
    }),
    ("audio/mp4", &["audio/x-m4a", "audio/m4a"], |body| {
        body.get(4..8) == Some(b"ftyp")
    }),
    ("audio/flac", &["audio/x-flac"], |body| body.starts_with(b"fLaC")),
    ("audio/webm", &[], |body| body.starts_with(b"\x1a\x45\xdf\xa3")),
];

/// The `Accept` header of an image fetch.
const ACCEPT_IMAGES: &str = "image/png, image/jpeg, image/gif, image/webp";
/// The `Accept` header of an audio fetch.
const ACCEPT_AUDIO: &str = "audio/mpeg, audio/ogg, audio/wav, audio/mp4, audio/flac, audio/webm";

/// How images and audio are fetched: the flags, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaFetcher {
    /// `--max-image-bytes`.
    pub max_image_bytes: usize,
    /// `--max-audio-bytes`.
    pub max_audio_bytes: usize,
    /// `--media-fetch-timeout`.
    pub timeout: Duration,
    /// `--fetch-private-addresses`.
    pub private_addresses: PrivateAddresses,
}

/// An image or audio clip ready for a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fetched {
    pub kind: MediaKind,
    pub mime: &'static str,
    pub bytes: Vec<u8>,
}

/// Why an image or audio clip is not in the prompt (said in the prompt's
/// text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("the agent does not take {}", if *.0 == MediaKind::Image { "images" } else { "audio" })]
    AgentTakesNone(MediaKind),
    #[error("more media than one prompt carries")]
    TooMany,
    #[error("too large")]
    TooLarge,
    #[error("not an http(s) URL")]
    Scheme,
    #[error("a private address")]
    PrivateAddress,
    #[error("{}", if *.0 == MediaKind::Image { "not a PNG, JPEG, GIF or WebP image" } else { "not an MP3, Ogg, WAV, MP4, FLAC or WebM audio file" })]
    Type(MediaKind),
    #[error("its hash is not the one its tag names")]
    Hash,
    #[error("could not be fetched: {0}")]
    Failed(String),
}

impl Refusal {
    /// The metric label of the refusal.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Refusal::AgentTakesNone(_) => "agent_takes_none",
            Refusal::TooMany => "too_many",
            Refusal::TooLarge => "too_large",
            Refusal::Scheme => "scheme",
            Refusal::PrivateAddress => "private_address",
            Refusal::Type(_) => "type",
            Refusal::Hash => "hash",
            Refusal::Failed(_) => "failed",
        }
    }
}

impl MediaFetcher {
    /// Fetches `media` and checks it is an image or audio clip (as its
    /// [`MediaRef::kind`] says) for the prompt.
    pub(crate) async fn fetch(&self, media: &MediaRef) -> Result<Fetched, Refusal> {
        let url = Url::parse(&media.url).map_err(|_| Refusal::Scheme)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refusal::Scheme);
        }
        let kind = media.kind();
        let (max_bytes, accept, types) = match kind {
            MediaKind::Image => (self.max_image_bytes, ACCEPT_IMAGES, &IMAGE_TYPES[..]),
            MediaKind::Audio => (self.max_audio_bytes, ACCEPT_AUDIO, &AUDIO_TYPES[..]),
        };
        // A size claimed past the bound is not fetched at all.
        if media.size.is_some_and(|size| size > max_bytes as u64) {
            return Err(Refusal::TooLarge);
        }
        let bounds = Bounds {
            timeout: self.timeout,
            max_bytes,
            accept,
            private_addresses: self.private_addresses,
        };
        let answer = http_get::get(&url, bounds).await.map_err(|error| match error {
            HttpGetError::TooLarge(_) => Refusal::TooLarge,
            HttpGetError::PrivateAddress(_) => Refusal::PrivateAddress,
            HttpGetError::Scheme(_) => Refusal::Scheme,
            other => Refusal::Failed(other.to_string()),
        })?;
        let mime =
            media_type(types, answer.content_type.as_deref(), &answer.body).ok_or(Refusal::Type(kind))?;
        if let Some(expected) = &media.sha256
            && sha256::Hash::hash(&answer.body).to_string() != *expected
        {
            return Err(Refusal::Hash);
        }
        Ok(Fetched {
            kind,
            mime,
            bytes: answer.body.to_vec(),
        })
    }
}

/// The type among `types` of a body served as `content_type`, when that is
/// one of them (or another name of one) and the body starts as a file of
/// that type does.
fn media_type(types: &[MediaType], content_type: Option<&str>, body: &[u8]) -> Option<&'static str> {
    let essence = content_type?.split(';').next()?.trim().to_ascii_lowercase();
    let (mime, _, agrees) = types
        .iter()
        .find(|(mime, aliases, _)| *mime == essence || aliases.contains(&essence.as_str()))?;
    agrees(body).then_some(*mime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::http_get::serving_once;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n0000";

    fn fetcher() -> MediaFetcher {
        MediaFetcher {
            max_image_bytes: 64,
            max_audio_bytes: 128,
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

    fn image_type(content_type: Option<&str>, body: &[u8]) -> Option<&'static str> {
        media_type(&IMAGE_TYPES, content_type, body)
    }

    fn audio_type(content_type: Option<&str>, body: &[u8]) -> Option<&'static str> {
        media_type(&AUDIO_TYPES, content_type, body)
    }

    #[test]
    fn the_type_must_be_an_image_type_the_body_agrees_with() {
        assert_eq!(image_type(Some("image/png"), PNG), Some("image/png"));
        assert_eq!(image_type(Some("IMAGE/PNG; q=1"), PNG), Some("image/png"));
        assert_eq!(image_type(Some("image/jpeg"), PNG), None);
        assert_eq!(image_type(Some("text/html"), b"<html>"), None);
        assert_eq!(image_type(Some("image/svg+xml"), b"<svg"), None);
        assert_eq!(image_type(None, PNG), None);
        assert_eq!(
            image_type(Some("audio/ogg"), b"OggS"),
            None,
            "no audio as an image"
        );
    }

    #[test]
    fn the_type_must_be_an_audio_type_the_body_agrees_with() {
        assert_eq!(audio_type(Some("audio/ogg"), b"OggS\0"), Some("audio/ogg"));
        assert_eq!(audio_type(Some("audio/mpeg"), b"ID3\x04"), Some("audio/mpeg"));
        assert_eq!(audio_type(Some("audio/mp3"), b"\xff\xfb\x90"), Some("audio/mpeg"));
        assert_eq!(
            audio_type(Some("audio/x-wav"), b"RIFF\0\0\0\0WAVEfmt "),
            Some("audio/wav")
        );
        assert_eq!(audio_type(Some("audio/wav"), b"RIFF\0\0\0\0WEBP"), None);
        assert_eq!(
            audio_type(Some("audio/mp4"), b"\0\0\0\x20ftypM4A "),
            Some("audio/mp4")
        );
        assert_eq!(audio_type(Some("audio/flac"), b"fLaC"), Some("audio/flac"));
        assert_eq!(audio_type(Some("audio/mpeg"), b"<html>"), None);
        assert_eq!(audio_type(Some("image/png"), PNG), None, "no image as audio");
    }

    #[tokio::test]
    async fn an_audio_clip_is_fetched_under_its_own_size_bound() {
        let ogg = [b"OggS".as_slice(), &[0u8; 96]].concat();
        let mut clip = served("audio/ogg", &ogg).await;
        clip.mime = Some("audio/ogg".into());
        let fetched = fetcher().fetch(&clip).await.unwrap();
        assert_eq!(
            (fetched.kind, fetched.mime, fetched.bytes.len()),
            (MediaKind::Audio, "audio/ogg", 100)
        );
        let mut as_image = served("audio/ogg", &ogg).await;
        as_image.mime = Some("image/png".into());
        assert_eq!(
            fetcher().fetch(&as_image).await,
            Err(Refusal::TooLarge),
            "past the image bound"
        );
        let huge = [b"OggS".as_slice(), &[0u8; 200]].concat();
        let mut long = served("audio/ogg", &huge).await;
        long.mime = Some("audio/ogg".into());
        assert_eq!(fetcher().fetch(&long).await, Err(Refusal::TooLarge));
    }

    #[tokio::test]
    async fn an_image_within_bounds_is_fetched_and_its_hash_checked() {
        let image = fetcher().fetch(&served("image/png", PNG).await).await.unwrap();
        assert_eq!(
            (image.kind, image.mime, image.bytes.as_slice()),
            (MediaKind::Image, "image/png", PNG)
        );

        let mut hashed = served("image/png", PNG).await;
        hashed.sha256 = Some(sha256::Hash::hash(PNG).to_string());
        assert!(fetcher().fetch(&hashed).await.is_ok());
        let mut wrong = served("image/png", PNG).await;
        wrong.sha256 = Some("00".repeat(32));
        assert_eq!(fetcher().fetch(&wrong).await, Err(Refusal::Hash));
    }

    #[tokio::test]
    async fn size_type_scheme_and_address_are_bounded() {
        let huge = [PNG, &[0u8; 100]].concat();
        assert_eq!(
            fetcher().fetch(&served("image/png", &huge).await).await,
            Err(Refusal::TooLarge)
        );
        let mut claimed = at("http://127.0.0.1:9/never-fetched.png".into());
        claimed.size = Some(65);
        assert_eq!(fetcher().fetch(&claimed).await, Err(Refusal::TooLarge));
        assert_eq!(
            fetcher().fetch(&served("text/html", b"<html>").await).await,
            Err(Refusal::Type(MediaKind::Image))
        );
        assert_eq!(
            fetcher().fetch(&at("file:///etc/passwd".into())).await,
            Err(Refusal::Scheme)
        );
        let public_only = MediaFetcher {
            private_addresses: PrivateAddresses::Refused,
            ..fetcher()
        };
        let private = served("image/png", PNG).await;
        assert_eq!(public_only.fetch(&private).await, Err(Refusal::PrivateAddress));
    }
}
