//! The author gate's flags (`--owner`, `--respond-to`, `--allowlist`) and
//! their validation into [`GateSettings`].

use std::collections::BTreeSet;

use clap::Args;
use nostr_sdk::prelude::PublicKey;

use super::{GateRules, RespondTo};
use crate::base::flags::{ConfigError, refuse};

/// The author gate's flags.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Gate")]
pub struct GateArgs {
    /// The owner's public key (npub or hex).
    #[arg(long, env = "ACP_BRIDGE_OWNER", value_name = "NPUB")]
    pub owner: Option<String>,

    /// Who is heard.
    #[arg(long, env = "ACP_BRIDGE_RESPOND_TO", value_enum, default_value = "owner-only")]
    pub respond_to: RespondTo,

    /// Keys heard in allowlist mode (npub or hex)
    ///
    /// Public keys heard in allowlist mode (npub or hex; repeatable or comma-separated);
    /// in anyone mode they are not strangers (the stranger budget does not bind them).
    #[arg(
        long,
        env = "ACP_BRIDGE_ALLOWLIST",
        value_delimiter = ',',
        value_name = "NPUB"
    )]
    pub allowlist: Vec<String>,
}

/// Who is heard: [`GateArgs`], checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSettings {
    /// `--owner`.
    pub owner: Option<PublicKey>,
    /// `--respond-to`.
    pub respond_to: RespondTo,
    /// `--allowlist`.
    pub allowlist: BTreeSet<PublicKey>,
}

impl GateSettings {
    /// Only `owner` is heard (`--respond-to owner-only`, the flag's default).
    pub(crate) fn owner_only(owner: PublicKey) -> GateSettings {
        GateSettings {
            owner: Some(owner),
            respond_to: RespondTo::OwnerOnly,
            allowlist: BTreeSet::new(),
        }
    }

    /// The author gate's rules of these settings.
    pub(crate) fn rules(&self) -> GateRules {
        GateRules::new(self.owner, self.respond_to, self.allowlist.clone())
    }
}

impl GateArgs {
    /// Checks the keys, and that the chosen audience has them: an owner
    /// for `owner-only` and `allowlist`, a key for `allowlist`.
    pub(crate) fn validate(&self) -> Result<GateSettings, ConfigError> {
        let owner = self
            .owner
            .as_deref()
            .map(|owner| parse_public_key(owner).map_err(|problem| refuse("--owner", problem)))
            .transpose()?;
        if owner.is_none() && matches!(self.respond_to, RespondTo::OwnerOnly | RespondTo::Allowlist) {
            return Err(refuse(
                "--owner",
                "required with --respond-to owner-only or allowlist (set ACP_BRIDGE_OWNER)",
            ));
        }
        let allowlist = parse_allowlist(&self.allowlist)?;
        if self.respond_to == RespondTo::Allowlist && allowlist.is_empty() {
            return Err(refuse(
                "--allowlist",
                "is empty, but --respond-to allowlist needs at least one key",
            ));
        }
        Ok(GateSettings {
            owner,
            respond_to: self.respond_to,
            allowlist,
        })
    }
}

/// `--allowlist`'s keys (blank entries skipped), as at start and on a
/// reload of the config file.
pub(crate) fn parse_allowlist(entries: &[String]) -> Result<BTreeSet<PublicKey>, ConfigError> {
    entries
        .iter()
        .filter(|entry| !entry.trim().is_empty())
        .map(|entry| parse_public_key(entry.trim()).map_err(|problem| refuse("--allowlist", problem)))
        .collect()
}

fn parse_public_key(value: &str) -> Result<PublicKey, String> {
    PublicKey::parse(value)
        .map_err(|_| format!("`{value}` is not a valid public key: give an npub1… or 64 hex characters"))
}
