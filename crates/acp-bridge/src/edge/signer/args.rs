//! The signer's flags (the bot's key file, or a remote signer's bunker
//! URI, and its timeout) and their validation into [`SignerSettings`].
//! Secrets are read only from a file or the environment (a command-line
//! value would show in `ps`) and are never echoed back, not even in an
//! error.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use nostr_sdk::prelude::Keys;

use super::{BunkerUri, SignerSource, secret_file_unreadable};
use crate::base::flags::{ConfigError, flag_defaults, parse_duration, refuse};

/// Environment variable that may hold the bot's secret key (nsec or hex).
pub(crate) const SECRET_KEY_ENV: &str = "ACP_BRIDGE_SECRET_KEY";
/// Environment variable that may hold the remote signer's bunker URI.
pub(crate) const SIGNER_ENV: &str = "ACP_BRIDGE_SIGNER";

/// The signer's flags.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Signer")]
pub struct SignerArgs {
    /// File holding the bot's secret key (nsec or hex)
    ///
    /// File holding the bot's secret key (nsec or hex). Alternatively set
    /// ACP_BRIDGE_SECRET_KEY. Never pass a key as a plain flag value.
    #[arg(long, env = "ACP_BRIDGE_SECRET_KEY_FILE", value_name = "PATH")]
    pub secret_key_file: Option<PathBuf>,

    /// A NIP-46 remote signer's bunker:// URI (a secret)
    ///
    /// Sign through a remote signer (NIP-46) instead of a key file: its
    /// `bunker://<signer-pubkey>?relay=wss://…&secret=…` URI. The URI's
    /// secret is a credential: prefer --signer-file.
    #[arg(long, env = SIGNER_ENV, value_name = "BUNKER_URI", hide_env_values = true)]
    pub signer: Option<String>,

    /// File holding the remote signer's bunker:// URI
    ///
    /// File holding the remote signer's bunker:// URI (see --signer).
    #[arg(long, env = "ACP_BRIDGE_SIGNER_FILE", value_name = "PATH")]
    pub signer_file: Option<PathBuf>,

    /// A signer request unanswered this long is asked again
    ///
    /// How long one request to the remote signer may take before it counts
    /// as unanswered (it is then tried again, with backoff).
    #[arg(long, env = "ACP_BRIDGE_SIGNER_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub signer_timeout: Duration,
}

impl Default for SignerArgs {
    fn default() -> Self {
        flag_defaults()
    }
}

/// Who signs for the bot: [`SignerArgs`], checked. `Debug` shows no
/// secret: `Keys` prints only the public key, a bunker URI no connection
/// secret.
#[derive(Debug, Clone)]
pub struct SignerSettings {
    /// The bot's key, or the remote signer that holds it.
    pub source: SignerSource,
    /// `--signer-timeout`: one request's round trip to a remote signer.
    pub timeout: Duration,
    /// Of `--secret-key-file` and `--signer-file`, those other users may
    /// access: `run` warns (a deployment that ran with one keeps running
    /// after an upgrade), `check` says not ready until they are `chmod 600`.
    pub exposed_files: Vec<PathBuf>,
}

impl SignerSettings {
    /// The bot's own `keys`, with the flags' defaults for the rest.
    pub(crate) fn local(keys: Keys) -> SignerSettings {
        SignerSettings {
            source: SignerSource::Keys(keys),
            timeout: SignerArgs::default().signer_timeout,
            exposed_files: Vec::new(),
        }
    }
}

impl SignerArgs {
    /// The bot's key (`--secret-key-file`, `ACP_BRIDGE_SECRET_KEY`) or the
    /// remote signer (`--signer`, `--signer-file`): exactly one of them.
    /// `env` reads the process environment.
    pub(crate) fn validate(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<SignerSettings, ConfigError> {
        let bunker = match (&self.signer, &self.signer_file) {
            (Some(_), Some(_)) => {
                return Err(refuse("--signer", "give --signer or --signer-file, not both"));
            }
            (Some(uri), None) => {
                let uri = BunkerUri::parse(uri)
                    .map_err(|problem| refuse("--signer", format!("the URI {problem}")))?;
                Some(uri)
            }
            (None, Some(path)) => {
                Some(BunkerUri::read(path).map_err(|problem| refuse("--signer-file", problem))?)
            }
            (None, None) => None,
        };
        let source = match bunker {
            Some(_) if self.secret_key_file.is_some() || env(SECRET_KEY_ENV).is_some() => {
                return Err(refuse(
                    "--signer",
                    format!(
                        "a remote signer holds the bot's key: drop --secret-key-file and {SECRET_KEY_ENV}"
                    ),
                ));
            }
            Some(uri) => SignerSource::Bunker(uri),
            None => load_secret_key(self.secret_key_file.as_deref(), env).map(SignerSource::Keys)?,
        };
        let exposed_files = [&self.secret_key_file, &self.signer_file]
            .into_iter()
            .flatten()
            .filter(|path| open_to_others(path))
            .cloned()
            .collect();
        Ok(SignerSettings {
            source,
            timeout: self.signer_timeout,
            exposed_files,
        })
    }

    /// Warns of secrets kept where others can read them: a key in the
    /// environment, a bunker URI on the command line, a secret file open
    /// to other users. Called once the whole configuration is valid: a
    /// warning belongs to a configuration that runs, never before another
    /// flag's refusal.
    pub(crate) fn warn_of_secret_sources(&self, settings: &SignerSettings) {
        match settings.source {
            SignerSource::Keys(_) if self.secret_key_file.is_none() => tracing::warn!(
                "the secret key came from {SECRET_KEY_ENV}: it stays readable in /proc/<pid>/environ to every process of the daemon's user for the daemon's life; prefer --secret-key-file"
            ),
            SignerSource::Bunker(_) if self.signer.is_some() => tracing::warn!(
                "the bunker URI came from --signer or ACP_BRIDGE_SIGNER: its secret stays readable in the process's command line or environment; prefer --signer-file"
            ),
            _ => {}
        }
        for path in &settings.exposed_files {
            tracing::warn!(path = %path.display(), "the secret key file is accessible to other users; chmod 600 it");
        }
    }
}

/// Reads the bot's key from `--secret-key-file` or `ACP_BRIDGE_SECRET_KEY`.
/// Errors never contain the key material.
fn load_secret_key(file: Option<&Path>, env: &dyn Fn(&str) -> Option<String>) -> Result<Keys, ConfigError> {
    match (file, env(SECRET_KEY_ENV)) {
        (Some(_), Some(_)) => Err(refuse(
            "--secret-key-file",
            format!("both a key file and {SECRET_KEY_ENV} are set; set only one"),
        )),
        (Some(path), None) => {
            let text = std::fs::read_to_string(path).map_err(|error| {
                let create = format!(
                    "create a key there with `acp-bridge keygen --out {}`",
                    path.display()
                );
                refuse("--secret-key-file", secret_file_unreadable(path, &error, &create))
            })?;
            Keys::parse(text.trim()).map_err(|_| {
                refuse(
                    "--secret-key-file",
                    format!(
                        "`{}` does not hold a valid nsec or hex secret key: put an nsec1… or 64 hex characters in it, or make a new key file with `acp-bridge keygen --out PATH`",
                        path.display()
                    ),
                )
            })
        }
        (None, Some(text)) => Keys::parse(text.trim()).map_err(|_| {
            refuse(
                "--secret-key-file",
                format!(
                    "{SECRET_KEY_ENV} is not a valid nsec or hex secret key: set it to an nsec1… or 64 hex characters, or use --secret-key-file (create one with `acp-bridge keygen`)"
                ),
            )
        }),
        (None, None) => Err(refuse(
            "--secret-key-file",
            format!(
                "no secret key: pass --secret-key-file PATH or set {SECRET_KEY_ENV} (create one with `acp-bridge keygen`), or sign through a remote signer with --signer-file PATH"
            ),
        )),
    }
}

/// Whether users other than the file's owner and group may access `path`.
/// Group read is how orchestrators hand secrets to non-root users
/// (Kubernetes `fsGroup`); access for everyone else is a mistake.
fn open_to_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|metadata| metadata.permissions().mode() & 0o007 != 0)
}
