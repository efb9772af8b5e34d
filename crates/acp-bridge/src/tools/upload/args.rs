//! The flags of `send_file` (`--blossom`, `--max-file-bytes`), and their
//! validation into [`FileSettings`].

use clap::Args;
use nostr_sdk::prelude::Url;

use crate::base::flags::{ConfigError, flag_defaults, refuse};

/// The default of `--max-file-bytes`: 20 MiB.
pub(crate) const DEFAULT_MAX_FILE_BYTES: u64 = 20 * 1024 * 1024;
/// The largest `--max-file-bytes` taken: a file is held in memory while it
/// is hashed and uploaded.
const MAX_MAX_FILE_BYTES: u64 = 512 * 1024 * 1024;

/// The flags of `send_file`.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "MCP")]
pub struct FileArgs {
    /// Blossom servers `send_file` uploads to
    ///
    /// A Blossom server (BUD-02) the `send_file` tool uploads files to,
    /// its base URL (https). Repeatable, or comma-separated: each file goes
    /// to every server. None: `send_file` refuses.
    #[arg(long, env = "ACP_BRIDGE_BLOSSOM", value_delimiter = ',', value_name = "URL")]
    pub blossom: Vec<String>,

    /// Largest file `send_file` sends
    ///
    /// Largest file (in bytes) the `send_file` tool sends.
    #[arg(
        long,
        env = "ACP_BRIDGE_MAX_FILE_BYTES",
        default_value_t = DEFAULT_MAX_FILE_BYTES,
        value_parser = clap::value_parser!(u64).range(1..=MAX_MAX_FILE_BYTES)
    )]
    pub max_file_bytes: u64,
}

impl Default for FileArgs {
    fn default() -> Self {
        flag_defaults()
    }
}

/// `send_file`'s validated flags.
#[derive(Debug, Clone, Default)]
pub struct FileSettings {
    /// Largest file `send_file` sends
    ///
    /// The Blossom servers' base URLs, each ending in `/`.
    pub blossom: Vec<Url>,
    pub max_file_bytes: u64,
}

impl FileArgs {
    pub(crate) fn validate(&self) -> Result<FileSettings, ConfigError> {
        let blossom = self
            .blossom
            .iter()
            .filter(|spec| !spec.trim().is_empty())
            .map(|spec| base_url(spec.trim()))
            .collect::<Result<_, _>>()?;
        Ok(FileSettings {
            blossom,
            max_file_bytes: self.max_file_bytes,
        })
    }
}

/// `spec` as a server's base URL: http(s), with a host, no query, ending
/// in `/` so that `upload` joins beneath it.
fn base_url(spec: &str) -> Result<Url, ConfigError> {
    let mut url = Url::parse(spec).map_err(|error| refuse("--blossom", format!("`{spec}`: {error}")))?;
    if !matches!(url.scheme(), "https" | "http") || url.host_str().is_none() {
        return Err(refuse(
            "--blossom",
            format!("`{spec}` is not an http(s) URL with a host"),
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(refuse("--blossom", format!("`{spec}` has a query or fragment")));
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_become_base_urls_and_other_schemes_are_refused() {
        let args = FileArgs {
            blossom: vec!["https://blossom.example".into(), "http://127.0.0.1:9/b".into()],
            ..FileArgs::default()
        };
        let settings = args.validate().unwrap();
        let urls: Vec<&str> = settings.blossom.iter().map(Url::as_str).collect();
        assert_eq!(urls, ["https://blossom.example/", "http://127.0.0.1:9/b/"]);
        assert_eq!(settings.max_file_bytes, DEFAULT_MAX_FILE_BYTES);
        for bad in ["ftp://x", "not a url", "https://x/?a=b"] {
            let args = FileArgs {
                blossom: vec![bad.into()],
                ..FileArgs::default()
            };
            assert!(args.validate().is_err(), "{bad}");
        }
    }
}
