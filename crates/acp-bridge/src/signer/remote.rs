//! The NIP-46 client side: a [`NostrConnect`] to the operator's bunker,
//! speaking with the app keys from the state dir, and the line between a
//! signer that is gone (wait and try again) and one that answered "no"
//! (give up on that one request).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nostr_connect::prelude::{AuthUrlHandler, NostrConnect};
use nostr_sdk::prelude::{BoxedFuture, NostrSigner, SignerError, Url};

use super::app_keys::{self, AppKeyError};
use super::source::BunkerUri;

/// What [`NostrConnect`] says when the signer did not answer in time.
const TIMEOUT_TEXT: &str = "timeout";
/// What the relay pool's errors say when the signer's relay is unusable
/// (not connected, gone, shut down): the request never reached the signer.
const UNREACHABLE_TEXTS: [&str; 4] = ["relay", "not connected", "no relays", "shutdown"];

/// The remote signer for `uri`, not connected yet (the first request
/// connects it). `request_timeout` bounds each request's round trip.
pub(super) fn connect(
    uri: &BunkerUri,
    state_dir: &Path,
    request_timeout: Duration,
) -> Result<Arc<dyn NostrSigner>, AppKeyError> {
    let app = app_keys::load_or_create(state_dir)?;
    tracing::info!(bunker = %uri.redacted(), app = %app.public_key(), "signing through a remote signer (NIP-46)");
    let mut connect = NostrConnect::new(uri.uri().clone(), app, request_timeout, None)
        .expect("a bunker:// URI never carries app keys to match");
    connect.auth_url_handler(LogApprovalUrl);
    Ok(Arc::new(connect))
}

/// Some bunkers (nsec.app) answer a request they want a person to approve
/// with a URL to open. A daemon has no browser: the URL goes to the log,
/// and the request waits (as for a silent signer) until someone approves.
#[derive(Debug)]
struct LogApprovalUrl;

impl AuthUrlHandler for LogApprovalUrl {
    fn on_auth_url(&self, auth_url: Url) -> BoxedFuture<'_, nostr_sdk::prelude::Result<()>> {
        Box::pin(async move {
            tracing::warn!(%auth_url, "signer: the remote signer asks for approval; open this URL to approve the daemon's requests");
            Ok(())
        })
    }
}

/// True when `error` means the signer could not be reached or did not
/// answer in time; false when it answered and refused (a bad payload, a
/// request it does not approve): trying again would not help.
pub(super) fn is_outage(error: &SignerError) -> bool {
    let text = error.to_string().to_lowercase();
    text == TIMEOUT_TEXT
        || UNREACHABLE_TEXTS
            .iter()
            .any(|unreachable| text.contains(unreachable))
}

#[cfg(test)]
mod tests {
    use nostr_connect::error::Error;
    use nostr_sdk::pool::pool;

    use super::*;

    #[test]
    fn a_silent_or_unreachable_signer_is_an_outage_a_refusal_is_not() {
        let outage = |error: Error| is_outage(&SignerError::backend(error));
        assert!(outage(Error::Timeout));
        assert!(outage(Error::Pool(pool::Error::NoRelays)));
        assert!(outage(Error::Pool(pool::Error::Shutdown)));
        assert!(!outage(Error::Response("Rejected".into())));
        assert!(!outage(Error::Response("invalid payload length".into())));
    }
}
