//! Which images and audio clips a mention carries: its NIP-92 `imeta`
//! tags, then the bare image and audio URLs of its text. Pure: read at
//! acceptance and journaled with the mention, fetched (or not) when its
//! prompt is built.

use nostr::prelude::{Tag, Url};
use serde::{Deserialize, Serialize};

/// Most media (images and audio) taken from one mention (qwen-code's own
/// per-prompt cap of images); the rest stay URLs in the text.
pub const MAX_MEDIA_PER_MENTION: usize = 4;

/// File name endings of the image types agents take, for URLs with no
/// `imeta` tag, and the type each names.
const IMAGE_EXTENSIONS: [(&str, &str); 5] = [
    (".png", "image/png"),
    (".jpg", "image/jpeg"),
    (".jpeg", "image/jpeg"),
    (".gif", "image/gif"),
    (".webp", "image/webp"),
];

/// File name endings of the audio types fetched, for URLs with no `imeta`
/// tag (or one without `m`), and the type each names. `.webm` is left out:
/// it is as often a video.
const AUDIO_EXTENSIONS: [(&str, &str); 7] = [
    (".mp3", "audio/mpeg"),
    (".ogg", "audio/ogg"),
    (".oga", "audio/ogg"),
    (".opus", "audio/ogg"),
    (".wav", "audio/wav"),
    (".m4a", "audio/mp4"),
    (".flac", "audio/flac"),
];

/// What a media reference is, for the prompt: an agent takes each kind
/// only when its `promptCapabilities` say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    Image,
    Audio,
}

impl MediaKind {
    /// The word in the prompt's lines and the ACP block's type.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaKind::Image => "image",
            MediaKind::Audio => "audio",
        }
    }
}

/// One image or audio clip a mention points at, with what its `imeta` tag
/// says of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaRef {
    pub url: String,
    /// `m`: the MIME type the author claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    /// `x`: the SHA-256 of the file, lowercase hex; else the one a Blossom
    /// URL names (`/<sha256>[.ext]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// `size`: its length in bytes, as claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// `dim`: width and height in pixels, as claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dim: Option<(u32, u32)>,
}

impl MediaRef {
    /// Audio when its `m` says so, or (without `m`) its URL ends as an
    /// audio file does; else an image (an `imeta` tag without `m` was
    /// always taken for one).
    pub fn kind(&self) -> MediaKind {
        match self.mime.as_deref() {
            Some(mime) if mime.starts_with("audio/") => MediaKind::Audio,
            Some(_) => MediaKind::Image,
            None if typed_by_extension(&self.url, &AUDIO_EXTENSIONS).is_some() => MediaKind::Audio,
            None => MediaKind::Image,
        }
    }

    /// Its type as far as known before a fetch: the tag's `m`, else the
    /// one its URL's extension names.
    pub fn claimed_type(&self) -> Option<String> {
        self.mime.clone().or_else(|| {
            typed_by_extension(&self.url, &IMAGE_EXTENSIONS)
                .or_else(|| typed_by_extension(&self.url, &AUDIO_EXTENSIONS))
                .map(str::to_owned)
        })
    }
}

/// The media of a mention: each `imeta` tag whose `m` is an image or audio
/// type (or that has no `m`), then each image or audio URL of `content` no
/// tag named, in order, without repeats, at most [`MAX_MEDIA_PER_MENTION`].
pub fn media_of(tags: &[Tag], content: &str) -> Vec<MediaRef> {
    let mut found: Vec<MediaRef> = Vec::new();
    let tagged = tags.iter().filter_map(imeta).filter(|media| {
        media
            .mime
            .as_deref()
            .is_none_or(|mime| mime.starts_with("image/") || mime.starts_with("audio/"))
    });
    let bare = content
        .split_whitespace()
        .filter_map(bare_media_url)
        .map(|url| MediaRef {
            url,
            mime: None,
            sha256: None,
            size: None,
            dim: None,
        });
    for mut media in tagged.chain(bare) {
        media.sha256 = media.sha256.or_else(|| blossom_hash(&media.url));
        if found.len() == MAX_MEDIA_PER_MENTION {
            break;
        }
        if !found.iter().any(|known| known.url == media.url) {
            found.push(media);
        }
    }
    found
}

/// A NIP-92 `imeta` tag read: `["imeta", "url <url>", "m <mime>", …]`,
/// each entry a key and a value split at the first space. `None` without
/// a `url`; unknown keys are skipped.
pub fn imeta(tag: &Tag) -> Option<MediaRef> {
    let mut values = tag.as_slice().iter();
    if values.next().map(String::as_str) != Some("imeta") {
        return None;
    }
    let mut media = MediaRef {
        url: String::new(),
        mime: None,
        sha256: None,
        size: None,
        dim: None,
    };
    for entry in values {
        let Some((key, value)) = entry.split_once(' ') else {
            continue;
        };
        let value = value.trim();
        match key {
            "url" => media.url = value.to_owned(),
            "m" => media.mime = Some(value.to_ascii_lowercase()),
            "x" => media.sha256 = Some(value.to_ascii_lowercase()),
            "size" => media.size = value.parse().ok(),
            "dim" => {
                media.dim = value
                    .split_once('x')
                    .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
            }
            _ => {}
        }
    }
    (!media.url.is_empty()).then_some(media)
}

/// The SHA-256 a Blossom blob URL names: its last path segment, without
/// an extension, when that is 64 hex digits (BUD-01 `GET /<sha256>`).
fn blossom_hash(url: &str) -> Option<String> {
    let url = Url::parse(url).ok()?;
    let name = url.path_segments()?.next_back()?;
    let stem = name.split_once('.').map_or(name, |(stem, _)| stem);
    (stem.len() == 64 && stem.bytes().all(|byte| byte.is_ascii_hexdigit())).then(|| stem.to_ascii_lowercase())
}

/// The type `extensions` give the path of `url`, if its path ends in one.
fn typed_by_extension(url: &str, extensions: &[(&str, &'static str)]) -> Option<&'static str> {
    let path = Url::parse(url).ok()?.path().to_ascii_lowercase();
    extensions
        .iter()
        .find(|(extension, _)| path.ends_with(extension))
        .map(|(_, mime)| *mime)
}

/// `word` as an http(s) URL whose path ends in an image or audio type's
/// extension.
fn bare_media_url(word: &str) -> Option<String> {
    let word = word.trim_end_matches([',', '.', ')', ']', '>', '"', '\'']);
    let url = Url::parse(word).ok()?;
    let media = matches!(url.scheme(), "http" | "https")
        && (typed_by_extension(word, &IMAGE_EXTENSIONS).is_some()
            || typed_by_extension(word, &AUDIO_EXTENSIONS).is_some());
    media.then(|| word.to_owned())
}

#[cfg(test)]
mod tests {
    use nostr::prelude::TagKind;

    use super::*;

    fn imeta_tag(entries: &[&str]) -> Tag {
        Tag::custom(TagKind::custom("imeta"), entries.iter().copied())
    }

    #[test]
    fn an_imeta_tag_gives_url_type_hash_size_and_dimensions() {
        let tag = imeta_tag(&[
            "url https://example.com/cat.png",
            "m image/PNG",
            "x ABCDEF",
            "size 1234",
            "dim 640x480",
            "blurhash whatever",
            "nonsense",
        ]);
        assert_eq!(
            imeta(&tag),
            Some(MediaRef {
                url: "https://example.com/cat.png".into(),
                mime: Some("image/png".into()),
                sha256: Some("abcdef".into()),
                size: Some(1234),
                dim: Some((640, 480)),
            })
        );
        assert_eq!(imeta(&imeta_tag(&["m image/png", "size 3"])), None);
        let other = Tag::custom(TagKind::custom("r"), ["url https://example.com/a.png"]);
        assert_eq!(imeta(&other), None);
        let bad_numbers = imeta(&imeta_tag(&["url https://e.com/a", "size big", "dim 3by4"])).unwrap();
        assert_eq!((bad_numbers.size, bad_numbers.dim), (None, None));
    }

    #[test]
    fn media_come_from_imeta_tags_then_bare_urls_without_repeats() {
        let tags = [
            imeta_tag(&["url https://e.com/a.png", "m image/png"]),
            imeta_tag(&["url https://e.com/song", "m audio/mpeg"]),
            imeta_tag(&["url https://e.com/film.mp4", "m video/mp4"]),
            Tag::hashtag("cats"),
        ];
        let content = "look https://e.com/a.png and https://e.com/b.JPG, https://e.com/c.txt ftp://e.com/d.png https://e.com/e.ogg";
        let found = media_of(&tags, content);
        let urls: Vec<&str> = found.iter().map(|m| m.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "https://e.com/a.png",
                "https://e.com/song",
                "https://e.com/b.JPG",
                "https://e.com/e.ogg"
            ]
        );
        let kinds: Vec<MediaKind> = found.iter().map(MediaRef::kind).collect();
        assert_eq!(
            kinds,
            [
                MediaKind::Image,
                MediaKind::Audio,
                MediaKind::Image,
                MediaKind::Audio
            ]
        );
        let types: Vec<Option<String>> = found.iter().map(MediaRef::claimed_type).collect();
        assert_eq!(
            types,
            [
                Some("image/png".to_owned()),
                Some("audio/mpeg".to_owned()),
                Some("image/jpeg".to_owned()),
                Some("audio/ogg".to_owned())
            ]
        );
    }

    #[test]
    fn a_blossom_url_names_the_hash_its_blob_must_have() {
        let hash = "AB".repeat(32);
        let content = format!("https://blossom.example/{hash}.png");
        let found = media_of(&[], &content);
        assert_eq!(found[0].sha256, Some(hash.to_ascii_lowercase()));
        let tagged = imeta_tag(&[&format!("url https://b.example/{hash}"), "x 00", "m image/png"]);
        assert_eq!(
            media_of(&[tagged], "")[0].sha256.as_deref(),
            Some("00"),
            "the tag's own x wins"
        );
        assert_eq!(media_of(&[], "https://e.com/abc.png")[0].sha256, None);
    }

    #[test]
    fn a_mention_gives_at_most_its_cap_of_media() {
        let content: Vec<String> = (0..10).map(|n| format!("https://e.com/{n}.webp")).collect();
        assert_eq!(media_of(&[], &content.join(" ")).len(), MAX_MEDIA_PER_MENTION);
    }
}
