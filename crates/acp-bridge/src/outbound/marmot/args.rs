//! The Marmot flags: whether the bot joins encrypted groups, and where the
//! key of its MLS state lives.

use std::path::PathBuf;

use crate::base::flags::{ConfigError, refuse};

/// The Marmot (MLS encrypted groups) flags.
#[derive(Debug, Clone, Default, clap::Args)]
// Under the identity's heading (and its `[identity]` table): the key
// packages are how others find the bot, like its relay lists.
#[command(next_help_heading = "Identity")]
pub struct MarmotArgs {
    /// Join Marmot (MLS) encrypted groups
    ///
    /// Publish the bot's key packages (kinds 30443 and 443) and key-package
    /// relay list (kind 10051), so that a Marmot client (White Noise) can
    /// add the bot to an encrypted group (docs/marmot.md). Off: the bot has
    /// no MLS state and no Marmot client can invite it.
    #[arg(long, env = "ACP_BRIDGE_MARMOT")]
    pub marmot: bool,

    /// The key of the MLS state's database (64 hex digits)
    ///
    /// A file holding the 32-byte key (64 hex digits) that encrypts the
    /// Marmot MLS state (marmot.sqlite in the state dir). Unset:
    /// marmot.key in the state dir, created (mode 0600) on first start;
    /// point it at a systemd credential to keep the key off the state dir.
    #[arg(
        long,
        env = "ACP_BRIDGE_MARMOT_KEY_FILE",
        value_name = "PATH",
        hide_short_help = true
    )]
    pub marmot_key_file: Option<PathBuf>,
}

/// `--marmot` and its key, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MarmotSettings {
    /// `--marmot`: join encrypted groups.
    pub enabled: bool,
    /// `--marmot-key-file` (`None`: `marmot.key` in the state dir).
    pub key_file: Option<PathBuf>,
}

impl MarmotArgs {
    /// Refuses a named key file that cannot be read or holds no key now,
    /// rather than when the daemon opens the MLS state.
    pub(crate) fn validate(&self) -> Result<MarmotSettings, ConfigError> {
        if let Some(path) = &self.marmot_key_file {
            crate::state::mls::key::load_or_create(path, false)
                .map_err(|error| refuse("--marmot-key-file", error.to_string()))?;
        }
        Ok(MarmotSettings {
            enabled: self.marmot,
            key_file: self.marmot_key_file.clone(),
        })
    }
}
