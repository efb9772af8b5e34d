//! Prompt content blocks: what a client sends the agent in
//! `session/prompt` (text, inline images and audio, resource links).

use serde::Serialize;
use serde_json::Value;

/// A prompt content block. Text, images, audio and resource links are
/// built by this client; anything else can be passed through raw.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ContentBlock {
    Text(TextBlock),
    Image(ImageBlock),
    /// `type: audio`, the same shape as an image.
    Audio(ImageBlock),
    ResourceLink(ResourceLinkBlock),
    Raw(Value),
}

/// An image (`promptCapabilities.image`) or audio clip
/// (`promptCapabilities.audio`) given inline: its bytes as base64, never a
/// URL for the agent (or its provider) to fetch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImageBlock {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    /// Base64 (standard alphabet, padded).
    pub data: String,
}

/// A link to a resource the agent may open itself (`type:
/// resource_link`); every agent must take one, whatever its capabilities.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceLinkBlock {
    #[serde(rename = "type")]
    kind: &'static str,
    pub name: String,
    pub uri: String,
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TextBlock {
    #[serde(rename = "type")]
    kind: &'static str,
    pub text: String,
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(TextBlock {
            kind: "text",
            text: text.into(),
        })
    }

    /// An image block of `bytes` of type `mime_type` (`image/png`, …).
    pub fn image(mime_type: impl Into<String>, bytes: &[u8]) -> Self {
        ContentBlock::Image(ImageBlock::inline("image", mime_type.into(), bytes))
    }

    /// An audio block of `bytes` of type `mime_type` (`audio/mpeg`, …).
    pub fn audio(mime_type: impl Into<String>, bytes: &[u8]) -> Self {
        ContentBlock::Audio(ImageBlock::inline("audio", mime_type.into(), bytes))
    }

    /// A link named `name` to `uri`, of type `mime_type` when known.
    pub fn resource_link(name: impl Into<String>, uri: impl Into<String>, mime_type: Option<String>) -> Self {
        ContentBlock::ResourceLink(ResourceLinkBlock {
            kind: "resource_link",
            name: name.into(),
            uri: uri.into(),
            mime_type,
        })
    }
}

impl ImageBlock {
    fn inline(kind: &'static str, mime_type: String, bytes: &[u8]) -> Self {
        use base64::Engine as _;
        ImageBlock {
            kind,
            mime_type,
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn prompt_text_block_serializes_as_acp_text_content() {
        let block = serde_json::to_value(ContentBlock::text("hi")).expect("serializable");
        assert_eq!(block, json!({"type": "text", "text": "hi"}));
    }

    #[test]
    fn prompt_image_block_serializes_as_acp_image_content_in_base64() {
        let block = serde_json::to_value(ContentBlock::image("image/png", b"\x89PNG")).expect("serializable");
        assert_eq!(
            block,
            json!({"type": "image", "mimeType": "image/png", "data": "iVBORw=="})
        );
    }

    #[test]
    fn audio_and_resource_link_blocks_serialize_as_acp_content() {
        let audio = serde_json::to_value(ContentBlock::audio("audio/ogg", b"OggS")).expect("serializable");
        assert_eq!(
            audio,
            json!({"type": "audio", "mimeType": "audio/ogg", "data": "T2dnUw=="})
        );
        let link = ContentBlock::resource_link("a.png", "https://e.com/a.png", Some("image/png".into()));
        assert_eq!(
            serde_json::to_value(link).expect("serializable"),
            json!({"type": "resource_link", "name": "a.png", "uri": "https://e.com/a.png", "mimeType": "image/png"})
        );
        let untyped = ContentBlock::resource_link("x", "https://e.com/x", None);
        assert_eq!(
            serde_json::to_value(untyped).expect("serializable"),
            json!({"type": "resource_link", "name": "x", "uri": "https://e.com/x"})
        );
    }
}
