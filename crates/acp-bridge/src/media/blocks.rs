//! A prompt's content blocks: its text, then the images its mentions
//! carry, each fetched (or refused) already. Pure.
//!
//! Every image is named in the text, shown or not, on a line of the
//! bridge's own (starting with the prompt's bridge mark, which a quoted
//! message cannot imitate), so the agent can tell which image is which and
//! a refused one still reaches it as a URL with the reason: a mention is
//! never lost to its media.

use acp_client::ContentBlock;

use super::fetch::{Image, Refusal};
use super::refs::MediaRef;

/// What a prompt carries of its images, for the turn's log line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct MediaSummary {
    /// Images put into the prompt as `image` blocks.
    pub shown: usize,
    /// Their bytes, before base64.
    pub shown_bytes: usize,
    /// Images given as a URL in the text instead.
    pub as_text: usize,
}

/// The blocks of a prompt whose text is `text` and whose images came out
/// as `fetched`: one text block (the text, then a line per image starting
/// with `mark`), then an `image` block per image shown.
pub(crate) fn prompt_blocks(
    text: String,
    mark: &str,
    fetched: Vec<(MediaRef, Result<Image, Refusal>)>,
) -> (Vec<ContentBlock>, MediaSummary) {
    let mut summary = MediaSummary::default();
    let mut lines = String::new();
    if !fetched.is_empty() && !text.is_empty() && !text.ends_with('\n') {
        lines.push('\n');
    }
    let mut images = Vec::new();
    for (media, outcome) in fetched {
        match outcome {
            Ok(image) => {
                summary.shown += 1;
                summary.shown_bytes += image.bytes.len();
                lines.push_str(&format!("{mark} image: {} — attached\n", media.url));
                images.push(ContentBlock::image(image.mime, &image.bytes));
            }
            Err(refusal) => {
                summary.as_text += 1;
                lines.push_str(&format!("{mark} image: {} — not shown: {refusal}\n", media.url));
            }
        }
    }
    let mut blocks = vec![ContentBlock::text(text + &lines)];
    blocks.extend(images);
    (blocks, summary)
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
                Ok(Image {
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
                as_text: 1
            }
        );
    }
}
