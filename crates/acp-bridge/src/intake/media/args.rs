//! The flags of images and audio in prompts, and their validation into a
//! [`MediaFetcher`].

use std::time::Duration;

use clap::Args;

use super::fetch::MediaFetcher;
use crate::base::flags::{ConfigError, flag_defaults, longer_than_zero, parse_duration, refuse};
use crate::edge::http_get::PrivateAddresses;

/// The default of `--max-image-bytes`: 3.5 MiB, so that the base64 of an
/// image stays under the 5 MB Anthropic takes (the bridge does not resize).
pub(crate) const DEFAULT_MAX_IMAGE_BYTES: u64 = 3584 * 1024;
/// The default of `--max-audio-bytes`: 10 MiB, a few minutes of
/// compressed speech, whose base64 stays well under the 20 MB of inline
/// data gemini's API takes in one request.
pub(crate) const DEFAULT_MAX_AUDIO_BYTES: u64 = 10 * 1024 * 1024;
/// The largest `--max-image-bytes` (and `--max-audio-bytes`) taken: the most any agent advertises
/// (qwen-code, about 10 MB), with room.
const MAX_MAX_IMAGE_BYTES: u64 = 16 * 1024 * 1024;
/// The longest `--media-fetch-timeout` taken: a fetch holds its turn's prompt.
const MAX_MEDIA_FETCH_TIMEOUT: Duration = Duration::from_secs(120);

/// The flags of images and audio in prompts.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Turns")]
pub struct MediaArgs {
    /// Largest image fetched into a prompt
    ///
    /// Largest image (in bytes) fetched into a prompt, for agents that take
    /// images; a larger one reaches the agent as its URL.
    #[arg(
        long,
        env = "ACP_BRIDGE_MAX_IMAGE_BYTES",
        default_value_t = DEFAULT_MAX_IMAGE_BYTES,
        value_parser = clap::value_parser!(u64).range(1..=MAX_MAX_IMAGE_BYTES)
    )]
    pub max_image_bytes: u64,

    /// Largest audio clip fetched into a prompt
    ///
    /// Largest audio clip (in bytes) fetched into a prompt, for agents that
    /// take audio; a larger one reaches the agent as its URL.
    #[arg(
        long,
        env = "ACP_BRIDGE_MAX_AUDIO_BYTES",
        default_value_t = DEFAULT_MAX_AUDIO_BYTES,
        value_parser = clap::value_parser!(u64).range(1..=MAX_MAX_IMAGE_BYTES),
        hide_short_help = true
    )]
    pub max_audio_bytes: u64,

    /// One image or audio fetch takes at most this
    ///
    /// One image or audio fetch (connect, TLS, answer) takes at most this.
    #[arg(long, env = "ACP_BRIDGE_MEDIA_FETCH_TIMEOUT", default_value = "10s", value_parser = parse_duration, hide_short_help = true)]
    pub media_fetch_timeout: Duration,

    /// Fetch media from loopback and private addresses too
    ///
    /// Fetch images and audio from loopback and private addresses too. Off: a URL
    /// someone posts cannot make the daemon reach its own host or network.
    #[arg(long, env = "ACP_BRIDGE_FETCH_PRIVATE_ADDRESSES")]
    pub fetch_private_addresses: bool,
}

impl Default for MediaArgs {
    fn default() -> Self {
        flag_defaults()
    }
}

impl MediaArgs {
    pub(crate) fn validate(&self) -> Result<MediaFetcher, ConfigError> {
        let timeout = longer_than_zero("--media-fetch-timeout", self.media_fetch_timeout)?;
        if timeout > MAX_MEDIA_FETCH_TIMEOUT {
            return Err(refuse(
                "--media-fetch-timeout",
                format!("at most {}s", MAX_MEDIA_FETCH_TIMEOUT.as_secs()),
            ));
        }
        Ok(MediaFetcher {
            max_image_bytes: usize::try_from(self.max_image_bytes).unwrap_or(usize::MAX),
            max_audio_bytes: usize::try_from(self.max_audio_bytes).unwrap_or(usize::MAX),
            timeout,
            private_addresses: if self.fetch_private_addresses {
                PrivateAddresses::Allowed
            } else {
                PrivateAddresses::Refused
            },
        })
    }
}

impl Default for MediaFetcher {
    fn default() -> Self {
        MediaArgs::default().validate().expect("the defaults are valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_refuse_private_addresses_and_keep_images_under_anthropics_cap() {
        let fetcher = MediaFetcher::default();
        assert_eq!(fetcher.private_addresses, PrivateAddresses::Refused);
        // base64 grows by 4/3.
        assert!(fetcher.max_image_bytes * 4 / 3 < 5_000_000);
        let long = MediaArgs {
            media_fetch_timeout: Duration::from_secs(121),
            ..MediaArgs::default()
        };
        assert!(long.validate().is_err());
    }
}
