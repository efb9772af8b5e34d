//! A prompt's content blocks: its text, then the images and audio clips
//! its mentions carry, each fetched (or refused) already. Pure.
//!
//! Every medium is named in the text, shown or not, on a line of the
//! bridge's own (starting with the prompt's bridge mark, which a quoted
//! message cannot imitate), so the agent can tell which block is which and
//! a refused one still reaches it as a URL with the reason: a mention is
//! never lost to its media. An agent that does not take a kind inline
//! (its `promptCapabilities`) also gets a `resource_link` to it, which
//! every agent must take (gemini and qwen put it in their model's context
//! as a reference; claude and codex show the URI as text, hence the line
//! too). Only http(s) URLs are linked: a `file://` link would have gemini
//! read a file of its workspace into the prompt on a stranger's word.

use acp_bridge_core::media_refs::{MediaKind, MediaRef};
use acp_client::ContentBlock;
use nostr_sdk::prelude::Url;

use super::fetch::{Fetched, Refusal};

/// What a prompt carries of its media, for the turn's log line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct MediaSummary {
    /// Images put into the prompt as `image` blocks.
    pub shown: usize,
    /// Their bytes, before base64.
    pub shown_bytes: usize,
    /// Audio clips put into the prompt as `audio` blocks.
    pub audio_shown: usize,
    /// Their bytes, before base64.
    pub audio_bytes: usize,
    /// Media given as a URL in the text instead.
    pub as_text: usize,
    /// Of those, the ones also given as a `resource_link`.
    pub linked: usize,
}

/// The blocks of a prompt whose text is `text` and whose media came out
/// as `fetched`: one text block (the text, then a line per medium starting
/// with `mark`), then an `image` or `audio` block per medium shown and a
/// `resource_link` per medium of a kind the agent does not take.
pub(crate) fn prompt_blocks(
    text: String,
    mark: &str,
    fetched: Vec<(MediaRef, Result<Fetched, Refusal>)>,
) -> (Vec<ContentBlock>, MediaSummary) {
    let mut summary = MediaSummary::default();
    let mut lines = String::new();
    if !fetched.is_empty() && !text.is_empty() && !text.ends_with('\n') {
        lines.push('\n');
    }
    let mut media_blocks = Vec::new();
    for (media, outcome) in fetched {
        let kind = media.kind().as_str();
        match outcome {
            Ok(Fetched {
                kind: MediaKind::Image,
                mime,
                bytes,
            }) => {
                summary.shown += 1;
                summary.shown_bytes += bytes.len();
                lines.push_str(&format!("{mark} {kind}: {} — attached\n", media.url));
                media_blocks.push(ContentBlock::image(mime, &bytes));
            }
            Ok(Fetched {
                kind: MediaKind::Audio,
                mime,
                bytes,
            }) => {
                summary.audio_shown += 1;
                summary.audio_bytes += bytes.len();
                lines.push_str(&format!("{mark} {kind}: {} — attached\n", media.url));
                media_blocks.push(ContentBlock::audio(mime, &bytes));
            }
            Err(refusal) => {
                summary.as_text += 1;
                lines.push_str(&format!("{mark} {kind}: {} — not shown: {refusal}\n", media.url));
                if let (Refusal::AgentTakesNone(_), Some(name)) = (&refusal, link_name(&media.url)) {
                    summary.linked += 1;
                    media_blocks.push(ContentBlock::resource_link(
                        name,
                        &media.url,
                        media.claimed_type(),
                    ));
                }
            }
        }
    }
    let mut blocks = vec![ContentBlock::text(text + &lines)];
    blocks.extend(media_blocks);
    (blocks, summary)
}

/// The name of the link to an http(s) `url`: its last path segment (a
/// file name, a Blossom hash), else its host; `None` for other schemes,
/// which are not linked.
fn link_name(url: &str) -> Option<String> {
    let url = Url::parse(url).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let segment = url
        .path_segments()
        .and_then(|mut segments| segments.next_back())
        .filter(|segment| !segment.is_empty());
    segment.or(url.host_str()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn media(url: &str) -> MediaRef {
        MediaRef {
            url: url.into(),
            mime: None,
            sha256: None,
            size: None,
            dim: None,
        }
    }

    #[test]
    fn text_alone_is_one_text_block() {
        let (blocks, summary) = prompt_blocks("hello".into(), "[mark]", Vec::new());
        assert_eq!(blocks, [ContentBlock::text("hello")]);
        assert_eq!(summary, MediaSummary::default());
    }

    #[test]
    fn a_fetched_image_is_an_image_block_and_a_refused_one_a_line_of_text() {
        let fetched = vec![
            (
                media("https://e.com/a.png"),
                Ok(Fetched {
                    kind: MediaKind::Image,
                    mime: "image/png",
                    bytes: b"abc".to_vec(),
                }),
            ),
            (media("https://e.com/b.png"), Err(Refusal::TooLarge)),
        ];
        let (blocks, summary) = prompt_blocks("look".into(), "[mark]", fetched);
        let wire = serde_json::to_value(&blocks).unwrap();
        assert_eq!(
            wire,
            json!([
                {"type": "text", "text": "look\n[mark] image: https://e.com/a.png — attached\n[mark] image: https://e.com/b.png — not shown: too large\n"},
                {"type": "image", "mimeType": "image/png", "data": "YWJj"},
            ])
        );
        assert_eq!(
            summary,
            MediaSummary {
                shown: 1,
                shown_bytes: 3,
                as_text: 1,
                ..MediaSummary::default()
            }
        );
    }

    #[test]
    fn audio_is_an_audio_block_and_a_kind_the_agent_does_not_take_a_resource_link() {
        let fetched = vec![
            (
                media("https://e.com/a.ogg"),
                Ok(Fetched {
                    kind: MediaKind::Audio,
                    mime: "audio/ogg",
                    bytes: b"abc".to_vec(),
                }),
            ),
            (
                media("https://e.com/b.png"),
                Err(Refusal::AgentTakesNone(MediaKind::Image)),
            ),
            (
                media("file:///etc/c.png"),
                Err(Refusal::AgentTakesNone(MediaKind::Image)),
            ),
        ];
        let (blocks, summary) = prompt_blocks("hear".into(), "[mark]", fetched);
        let wire = serde_json::to_value(&blocks).unwrap();
        assert_eq!(
            wire,
            json!([
                {"type": "text", "text": "hear\n[mark] audio: https://e.com/a.ogg — attached\n[mark] image: https://e.com/b.png — not shown: the agent does not take images\n[mark] image: file:///etc/c.png — not shown: the agent does not take images\n"},
                {"type": "audio", "mimeType": "audio/ogg", "data": "YWJj"},
                {"type": "resource_link", "name": "b.png", "uri": "https://e.com/b.png", "mimeType": "image/png"},
            ])
        );
        assert_eq!(
            summary,
            MediaSummary {
                audio_shown: 1,
                audio_bytes: 3,
                as_text: 2,
                linked: 1,
                ..MediaSummary::default()
            }
        );
    }

    #[test]
    fn a_link_is_named_by_its_last_path_segment_or_its_host() {
        assert_eq!(link_name("https://e.com/x/y.mp3").as_deref(), Some("y.mp3"));
        assert_eq!(link_name("https://e.com/").as_deref(), Some("e.com"));
        assert_eq!(link_name("ftp://e.com/a.png"), None);
    }
}
