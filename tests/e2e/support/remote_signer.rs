//! A NIP-46 remote signer in the test process (nostr-connect's own signer
//! side), holding the bot's key on the test relay: the daemon under test
//! then signs and decrypts through it, holding no key. A test can stop it
//! (an outage) and start it again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nostr_connect::prelude::{
    NostrConnect, NostrConnectKeys, NostrConnectRemoteSigner, NostrConnectRequest, NostrConnectSignerActions,
    NostrConnectURI,
};
use nostr_sdk::prelude::*;
use tokio::task::JoinHandle;

use super::{PATIENCE, eventually};

/// How long the readiness probe waits for one answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// The connection secret of the test bunker.
pub const BUNKER_SECRET: &str = "test-bunker-secret";

/// Approves every request, like a bunker the operator set to "always";
/// or, while `refusing`, every request but the signatures, like a bunker
/// whose policy does not (yet) allow what the bot signs.
struct Policy {
    refusing: Arc<AtomicBool>,
}

impl NostrConnectSignerActions for Policy {
    fn approve(&self, _client: &PublicKey, request: &NostrConnectRequest) -> bool {
        !(matches!(request, NostrConnectRequest::SignEvent(_)) && self.refusing.load(Ordering::SeqCst))
    }
}

/// The bot's key behind a bunker on `relay_url`.
#[derive(Debug)]
pub struct RemoteSigner {
    keys: NostrConnectKeys,
    relay_url: String,
    serving: Option<JoinHandle<()>>,
    refusing: Arc<AtomicBool>,
}

impl RemoteSigner {
    /// Serves `bot`'s key on `relay_url` and waits until it answers.
    pub async fn start(bot: &Keys, relay_url: &str) -> Self {
        let mut signer = Self::down(bot, relay_url);
        signer.resume().await;
        signer
    }

    /// A bunker for `bot` on `relay_url` that is not running yet.
    pub fn down(bot: &Keys, relay_url: &str) -> Self {
        RemoteSigner {
            keys: NostrConnectKeys {
                signer: Keys::generate(),
                user: bot.clone(),
            },
            relay_url: relay_url.to_owned(),
            serving: None,
            refusing: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The bunker's own key, which signs its answers.
    pub fn public_key(&self) -> PublicKey {
        self.keys.signer.public_key()
    }

    /// The `bunker://` URI the daemon is given, secret included.
    pub fn bunker_uri(&self) -> String {
        self.uri().to_string()
    }

    fn uri(&self) -> NostrConnectURI {
        NostrConnectURI::Bunker {
            remote_signer_public_key: self.keys.signer.public_key(),
            relays: vec![RelayUrl::parse(&self.relay_url).expect("relay url")],
            secret: Some(BUNKER_SECRET.to_owned()),
        }
    }

    /// Stops answering: requests go unanswered, as when a bunker is down.
    pub fn stop(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.abort();
        }
    }

    /// Refuses (answers "Rejected") every signature from now on, or signs
    /// again.
    pub fn refuse_signatures(&self, refusing: bool) {
        self.refusing.store(refusing, Ordering::SeqCst);
    }

    /// Serves again (a fresh connection and subscription) and waits until
    /// it answers.
    pub async fn resume(&mut self) {
        self.stop();
        let signer = NostrConnectRemoteSigner::new(
            self.keys.clone(),
            [self.relay_url.as_str()],
            Some(BUNKER_SECRET.to_owned()),
            None,
        )
        .expect("signer");
        let policy = Policy {
            refusing: Arc::clone(&self.refusing),
        };
        self.serving = Some(tokio::spawn(async move {
            let _ = signer.serve(policy).await;
        }));
        // Ready once a client of its own gets an answer: its subscription
        // is in place.
        let bot = self.keys.user.public_key();
        let probe = async || {
            let client =
                NostrConnect::new(self.uri(), Keys::generate(), PROBE_TIMEOUT, None).expect("client");
            let answered = client.get_public_key().await.ok();
            client.shutdown().await;
            answered.filter(|key| *key == bot)
        };
        eventually(PATIENCE, probe, || "the test bunker answering".to_owned()).await;
    }
}

impl Drop for RemoteSigner {
    fn drop(&mut self) {
        self.stop();
    }
}
