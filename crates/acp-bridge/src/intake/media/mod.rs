//! Images and audio people post, into the agent's prompt.
//!
//! Owns reading which media a mention carries (`acp_bridge_core::media_refs`: NIP-92 `imeta` tags
//! and bare image and audio URLs, kept on the journaled mention), fetching
//! them under the operator's bounds (`fetch`, through the daemon's one
//! bounded GET), and building the prompt's content blocks (`blocks`). An
//! agent that advertises `promptCapabilities.image` gets `image` blocks,
//! one that advertises `promptCapabilities.audio` `audio` blocks; any other
//! gets the URL as a line of the prompt's text and a `resource_link`, and
//! any medium refused or failed the URL as a line with the reason. A
//! medium fetched is kept a while (`cache`): a prompt or steer that
//! carries it again (a retry) does not fetch it again.

mod args;
mod blocks;
mod cache;
mod fetch;

use acp_client::{AgentInfo, ContentBlock};
use futures_util::future::join_all;

use acp_bridge_core::media_refs::{MediaKind, MediaRef};
pub use args::MediaArgs;
pub(crate) use blocks::MediaSummary;
pub(crate) use cache::MediaCache;
pub use fetch::MediaFetcher;

use crate::telemetry::metrics;

/// Most media one prompt carries (qwen-code's own cap of images); past it
/// they stay URLs in the text.
pub(crate) const MAX_MEDIA_PER_PROMPT: usize = 4;

/// Which kinds of media an agent takes inline, as its `initialize` said
/// (`promptCapabilities`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AgentTakes {
    pub image: bool,
    pub audio: bool,
}

impl AgentTakes {
    /// What the agent `info` describes takes; nothing when unknown.
    pub(crate) fn of(info: Option<&AgentInfo>) -> Self {
        AgentTakes {
            image: info.is_some_and(|info| info.prompt_image),
            audio: info.is_some_and(|info| info.prompt_audio),
        }
    }

    fn takes(self, kind: MediaKind) -> bool {
        match kind {
            MediaKind::Image => self.image,
            MediaKind::Audio => self.audio,
        }
    }
}

/// Media fetched before the prompt that carries them is built (a turn's
/// first prompt's, beside the lease of its agent: the turn's preparation
/// in `heart::driver`), failures included, so the prompt fetches none of
/// them again.
#[derive(Debug, Default)]
pub(crate) struct FetchedAhead(Vec<(MediaRef, Result<fetch::Fetched, fetch::Refusal>)>);

impl FetchedAhead {
    /// How many media were fetched ahead.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The outcome fetched ahead for `media`, if any, taken out.
    fn take(&mut self, media: &MediaRef) -> Option<Result<fetch::Fetched, fetch::Refusal>> {
        let at = self.0.iter().position(|(fetched, _)| fetched == media)?;
        Some(self.0.swap_remove(at).1)
    }
}

/// Fetches what a prompt whose mentions carry `media` would fetch for an
/// agent that takes `takes` (the first [`MAX_MEDIA_PER_PROMPT`], of the
/// kinds it takes), into `cache` as well; counts nothing (the prompt does).
pub(crate) async fn fetch_ahead(
    fetcher: &MediaFetcher,
    cache: &MediaCache,
    media: &[MediaRef],
    takes: AgentTakes,
) -> FetchedAhead {
    let wanted = media
        .iter()
        .take(MAX_MEDIA_PER_PROMPT)
        .filter(|media| takes.takes(media.kind()))
        .map(|media| async move { (media.clone(), fetch_cached(fetcher, cache, media).await) });
    FetchedAhead(join_all(wanted).await)
}

/// `media` from `cache`, else fetched within its bounds and kept there.
async fn fetch_cached(
    fetcher: &MediaFetcher,
    cache: &MediaCache,
    media: &MediaRef,
) -> Result<fetch::Fetched, fetch::Refusal> {
    if let Some(cached) = cache.get(media) {
        return Ok(cached);
    }
    let fetched = fetcher.fetch(media).await;
    if let Ok(fetched) = &fetched {
        cache.put(media, fetched);
    }
    fetched
}

/// The content blocks of a prompt of `text` whose mentions carry `media`,
/// for an agent that takes the kinds `takes` says; the bridge's lines
/// about the media start with `mark`. The media not fetched `ahead` nor in
/// `cache` are fetched at once, each within its bounds, and kept there.
pub(crate) async fn prompt_blocks(
    fetcher: &MediaFetcher,
    cache: &MediaCache,
    text: String,
    mark: &str,
    media: Vec<MediaRef>,
    takes: AgentTakes,
    mut ahead: FetchedAhead,
) -> (Vec<ContentBlock>, MediaSummary) {
    let known: Vec<_> = media.iter().map(|media| ahead.take(media)).collect();
    let fetches = media
        .iter()
        .zip(known)
        .enumerate()
        .map(|(index, (media, known))| async move {
            if !takes.takes(media.kind()) {
                Err(fetch::Refusal::AgentTakesNone(media.kind()))
            } else if index >= MAX_MEDIA_PER_PROMPT {
                Err(fetch::Refusal::TooMany)
            } else if let Some(known) = known {
                known
            } else {
                fetch_cached(fetcher, cache, media).await
            }
        });
    let outcomes = join_all(fetches).await;
    for (media, outcome) in media.iter().zip(&outcomes) {
        let outcome = outcome.as_ref().map_or_else(fetch::Refusal::as_str, |_| "shown");
        match media.kind() {
            MediaKind::Image => metrics::prompt_image(outcome),
            MediaKind::Audio => metrics::prompt_audio(outcome),
        }
    }
    blocks::prompt_blocks(text, mark, media.into_iter().zip(outcomes).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An image at a loopback address: refused by the default fetcher
    /// before any connection.
    fn image(name: &str) -> MediaRef {
        MediaRef {
            url: format!("http://127.0.0.1:9/{name}.png"),
            mime: None,
            sha256: None,
            size: None,
            dim: None,
        }
    }

    fn text_of(blocks: &[ContentBlock]) -> String {
        serde_json::to_value(&blocks[0]).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[tokio::test]
    async fn only_what_a_prompt_would_fetch_is_fetched_ahead() {
        let (fetcher, cache) = (MediaFetcher::default(), MediaCache::default());
        let many: Vec<MediaRef> = (0..6).map(|n| image(&n.to_string())).collect();
        let takes_images = AgentTakes {
            image: true,
            audio: false,
        };
        let ahead = fetch_ahead(&fetcher, &cache, &many, takes_images).await;
        assert_eq!(ahead.len(), MAX_MEDIA_PER_PROMPT);
        let takes_none = AgentTakes::default();
        assert_eq!(fetch_ahead(&fetcher, &cache, &many, takes_none).await.len(), 0);
    }

    #[tokio::test]
    async fn an_outcome_fetched_ahead_failure_included_is_used_and_the_rest_fetched() {
        let (fetcher, cache) = (MediaFetcher::default(), MediaCache::default());
        let (early, late) = (image("early"), image("late"));
        let ahead = FetchedAhead(vec![(
            early.clone(),
            Err(fetch::Refusal::Failed("timed out".into())),
        )]);
        let takes = AgentTakes {
            image: true,
            audio: false,
        };
        let media = vec![early.clone(), late.clone()];
        let (blocks, _) = prompt_blocks(&fetcher, &cache, "look".into(), "[m]", media, takes, ahead).await;
        let text = text_of(&blocks);
        assert!(
            text.contains(&format!(
                "{} — not shown: could not be fetched: timed out",
                early.url
            )),
            "not fetched again: {text}"
        );
        assert!(
            text.contains(&format!("{} — not shown: a private address", late.url)),
            "fetched now: {text}"
        );
    }
}
