//! Images people post, into the agent's prompt.
//!
//! Owns reading which images a mention carries (`refs`: NIP-92 `imeta`
//! tags and bare image URLs, kept on the journaled mention), fetching them
//! under the operator's bounds (`fetch`, through the daemon's one bounded
//! GET), and building the prompt's content blocks (`blocks`). An agent
//! that advertises `promptCapabilities.image` gets `image` blocks; any
//! other, and any image refused or failed, gets the URL as a line of the
//! prompt's text with the reason. It owns no cache: an image is fetched
//! for each prompt that carries it.

mod args;
mod blocks;
mod fetch;
mod refs;

use acp_client::ContentBlock;
use futures_util::future::join_all;

pub use args::MediaArgs;
pub(crate) use blocks::MediaSummary;
pub use fetch::MediaFetcher;
pub use refs::MediaRef;
pub(crate) use refs::media_of;

use crate::telemetry::metrics;

/// Most images one prompt carries (qwen-code's own cap); past it they stay
/// URLs in the text.
pub(crate) const MAX_IMAGES_PER_PROMPT: usize = 4;

/// The content blocks of a prompt of `text` whose mentions carry `media`,
/// for an agent that takes images (`agent_takes_images`) or not; the
/// bridge's lines about the images start with `mark`. The images are
/// fetched at once, each within its bounds.
pub(crate) async fn prompt_blocks(
    fetcher: &MediaFetcher,
    text: String,
    mark: &str,
    media: Vec<MediaRef>,
    agent_takes_images: bool,
) -> (Vec<ContentBlock>, MediaSummary) {
    let fetches = media.iter().enumerate().map(|(index, media)| async move {
        if !agent_takes_images {
            Err(fetch::Refusal::AgentTakesNone)
        } else if index >= MAX_IMAGES_PER_PROMPT {
            Err(fetch::Refusal::TooMany)
        } else {
            fetcher.image(media).await
        }
    });
    let outcomes = join_all(fetches).await;
    for outcome in &outcomes {
        metrics::prompt_image(outcome.as_ref().map_or_else(fetch::Refusal::as_str, |_| "shown"));
    }
    blocks::prompt_blocks(text, mark, media.into_iter().zip(outcomes).collect())
}
