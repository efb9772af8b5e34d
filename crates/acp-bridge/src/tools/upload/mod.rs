//! The `send_file` tool's work: a file of the conversation's workspace,
//! uploaded to the operator's Blossom servers, becomes a link the heart
//! posts in the thread with a NIP-92 `imeta` tag.
//!
//! Owns reading the file safely ([`open`]: beneath the workspace, regular,
//! bounded), deciding whether its type is sent ([`mime`]) and the upload
//! ([`blossom`]). It does not own the post, the budget or the turn: the
//! heart (`heart/send_file.rs`) checks those and posts what this returns.

pub(crate) mod args;
mod blossom;
mod mime;
mod open;

use std::path::Path;
use std::sync::Arc;

use acp_client::AgentUser;
use futures_util::future::join_all;
use nostr_sdk::prelude::{Tag, TagKind, Url};

use acp_bridge_core::mention::ConversationKey;
pub(crate) use args::{FileArgs, FileSettings};
pub(crate) use blossom::UPLOAD_TIMEOUT;
pub(crate) use mime::SENT_TYPES;

use crate::agents::workspace::Workspaces;
use crate::edge::http_get::PrivateAddresses;
use crate::edge::signer::BotSigner;
use crate::telemetry::metrics;
use blossom::Blob;
use open::{OpenError, Reader};

/// The longest file name said in the upload authorization.
const MAX_NAME_CHARS: usize = 80;

/// Why a file was not sent: what the model reads.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendFileError {
    #[error("no Blossom server is configured (--blossom), so files cannot be sent here")]
    NoServer,
    #[error("{0}")]
    Open(#[from] OpenError),
    #[error("`{0}` is not a type that is sent (sent: {SENT_TYPES})")]
    Type(String),
    #[error("the file could not be uploaded (see the bridge's log)")]
    Upload,
}

/// A file uploaded: where, and what it is.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    /// The first server's URL of the blob.
    pub url: Url,
    /// The other servers' URLs of the same blob.
    pub fallbacks: Vec<Url>,
    pub mime: &'static str,
    /// Hex.
    pub sha256: String,
    pub size: usize,
}

impl Sent {
    /// The message's text: the caption, then the URL (NIP-92: the URL
    /// appears in the content).
    pub(crate) fn content(&self, caption: &str) -> String {
        match caption.trim() {
            "" => self.url.to_string(),
            caption => format!("{caption}\n{}", self.url),
        }
    }

    /// The NIP-92 `imeta` tag of the URL.
    pub(crate) fn imeta(&self) -> Tag {
        let fields = [
            format!("url {}", self.url),
            format!("m {}", self.mime),
            format!("x {}", self.sha256),
            format!("size {}", self.size),
        ]
        .into_iter()
        .chain(self.fallbacks.iter().map(|url| format!("fallback {url}")));
        Tag::custom(TagKind::custom("imeta"), fields)
    }
}

/// `user`'s identity for a read: its uid and groups.
fn reader_of(user: &AgentUser) -> Reader {
    Reader {
        uid: user.uid,
        gid: user.gid,
        gids: std::iter::once(user.gid)
            .chain(user.groups.iter().copied())
            .collect(),
    }
}

/// Sends files for the conversations' agents. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct FileSender {
    settings: Arc<FileSettings>,
    /// Also who each conversation's agent runs as (`--agent-user`, or its
    /// own uid with `--agent-uids`): files it could not read itself are refused.
    workspaces: Workspaces,
    signer: BotSigner,
    private_addresses: PrivateAddresses,
}

impl FileSender {
    /// Files are read beneath each conversation's workspace (only those
    /// its agent's user could read), uploaded with authorizations `signer` signs.
    pub(crate) fn new(
        settings: FileSettings,
        workspaces: Workspaces,
        signer: BotSigner,
        private_addresses: PrivateAddresses,
    ) -> Self {
        FileSender {
            settings: Arc::new(settings),
            workspaces,
            signer,
            private_addresses,
        }
    }

    /// Why no file can be sent at all, if so.
    pub(crate) fn unavailable(&self) -> Option<SendFileError> {
        self.settings
            .blossom
            .is_empty()
            .then_some(SendFileError::NoServer)
    }

    /// Reads `path` from `conversation`'s workspace and uploads it to every
    /// server; where it went.
    pub(crate) async fn send(
        &self,
        conversation: &ConversationKey,
        path: &str,
    ) -> Result<Sent, SendFileError> {
        if let Some(refusal) = self.unavailable() {
            return Err(refusal);
        }
        let root = self.workspaces.root().to_path_buf();
        let workspace = self.workspaces.relative_dir_of(conversation);
        let max_bytes = self.settings.max_file_bytes;
        let owned_path = path.to_owned();
        let reader = match self.workspaces.owner_of(conversation) {
            Ok(owner) => owner.as_ref().map(reader_of),
            Err(error) => {
                tracing::error!(%conversation, %error, "cannot tell whose files the conversation's agent reads");
                return Err(SendFileError::Upload);
            }
        };
        let bytes = tokio::task::spawn_blocking(move || {
            open::read_beneath(&root, &workspace, &owned_path, max_bytes, reader.as_ref())
        })
        .await
        .map_err(|_| SendFileError::Upload)??;
        let name = display_name(path);
        let mime = mime::sniff(&name, &bytes).ok_or_else(|| SendFileError::Type(path.to_owned()))?;
        let blob = Blob::new(bytes, mime);
        // At once, so that the whole send takes one upload's bound.
        let uploads = self
            .settings
            .blossom
            .iter()
            .map(|server| blossom::upload(&self.signer, server, &blob, &name, self.private_addresses));
        let mut urls = Vec::new();
        for (server, outcome) in self.settings.blossom.iter().zip(join_all(uploads).await) {
            match outcome {
                Ok(url) => {
                    metrics::blossom_upload("ok", blob.bytes.len());
                    tracing::info!(%server, %url, sha256 = %blob.sha256, bytes = blob.bytes.len(), mime, "uploaded a file to Blossom");
                    urls.push(url);
                }
                Err(error) => {
                    metrics::blossom_upload(error.as_str(), 0);
                    tracing::warn!(%server, %error, "Blossom upload failed");
                }
            }
        }
        let mut urls = urls.into_iter();
        let url = urls.next().ok_or(SendFileError::Upload)?;
        Ok(Sent {
            url,
            fallbacks: urls.collect(),
            mime,
            size: blob.bytes.len(),
            sha256: blob.sha256,
        })
    }
}

/// The file name of `path`, printable and short, for the authorization's
/// text.
fn display_name(path: &str) -> String {
    let name = Path::new(path)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_imeta_tag_names_url_type_hash_size_and_fallbacks() {
        let sent = Sent {
            url: Url::parse("https://a.example/abc.png").unwrap(),
            fallbacks: vec![Url::parse("https://b.example/abc.png").unwrap()],
            mime: "image/png",
            sha256: "abc".into(),
            size: 3,
        };
        assert_eq!(
            sent.imeta().as_slice(),
            [
                "imeta",
                "url https://a.example/abc.png",
                "m image/png",
                "x abc",
                "size 3",
                "fallback https://b.example/abc.png"
            ]
        );
        assert_eq!(sent.content(" a chart "), "a chart\nhttps://a.example/abc.png");
        assert_eq!(sent.content(""), "https://a.example/abc.png");
        assert_eq!(display_name("dir/re\nport.pdf"), "report.pdf");
    }
}
