//! A NIP-46 remote signer in the test process (nostr-connect's own signer
//! side), holding the bot's key on the test relay: the daemon under test
//! then signs and decrypts through it, holding no key. A test can stop it
//! (an outage) and start it again, put it far away (a phone's round trip)
//! and watch how many requests the daemon has out at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nostr_connect::prelude::{
    NostrConnect, NostrConnectKeys, NostrConnectRemoteSigner, NostrConnectRequest, NostrConnectSignerActions,
    NostrConnectURI,
};
use nostr_sdk::prelude::*;
use tokio::task::JoinHandle;

use super::relay::{SlowLink, port_of};
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
    /// The daemon's way to it, when far away, and its round trip.
    far: Option<(SlowLink, Duration)>,
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
            far: None,
        }
    }

    /// The same bunker, `round_trip` away from the daemon: its URI names a
    /// [`SlowLink`] to the relay, so each request the daemon sends is
    /// answered `round_trip` later at the earliest, and requests sent
    /// together wait together (as over a phone's link). The bunker itself
    /// stays on the relay: it answers one request at a time at once.
    pub async fn far(mut self, round_trip: Duration) -> Self {
        let relay = RelayUrl::parse(&self.relay_url).expect("relay url");
        self.far = Some((SlowLink::start(port_of(&relay), round_trip).await, round_trip));
        self
    }

    /// From now on, the daemon's requests to this bunker and its answers,
    /// as the relay carries them.
    pub async fn watch(&self) -> RequestsWatch {
        let one_way = self
            .far
            .as_ref()
            .map_or(Duration::ZERO, |(_, round_trip)| *round_trip / 2);
        RequestsWatch::start(&self.relay_url, self.keys.signer.clone(), one_way).await
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
        let relay = self
            .far
            .as_ref()
            .map_or_else(|| self.relay_url.clone(), |(link, _)| link.url());
        NostrConnectURI::Bunker {
            remote_signer_public_key: self.keys.signer.public_key(),
            relays: vec![RelayUrl::parse(&relay).expect("relay url")],
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

/// What a [`RequestsWatch`] saw: requests to the bunker, the most out at
/// once, the most NIP-44 encryptions out at once (a gift wrap's first
/// step), as the daemon has them out, and the NIP-44 decryptions (two
/// per gift wrap unwrapped).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Requests {
    pub sent: usize,
    pub most_out: usize,
    pub most_encrypting: usize,
    pub decryptions: usize,
}

/// One request as the relay saw it: when it came, when its answer came,
/// and what it asks.
#[derive(Debug, Clone)]
struct Seen {
    came: Instant,
    answered: Option<Instant>,
    method: NostrConnectMethod,
}

/// The requests seen, by id.
#[derive(Debug, Default)]
struct Seens(HashMap<String, Seen>);

impl Seens {
    /// Notes `event` (a request to the bunker or its answer) as the bunker
    /// reads it.
    fn note(&mut self, bunker: &Keys, event: &Event) {
        let from_bunker = event.pubkey == bunker.public_key();
        let other = match from_bunker {
            true => event.tags.public_keys().next().copied(),
            false => Some(event.pubkey),
        };
        let Some(text) =
            other.and_then(|other| nip44::decrypt(bunker.secret_key(), &other, &event.content).ok())
        else {
            return;
        };
        let now = Instant::now();
        match NostrConnectMessage::from_json(text) {
            Ok(NostrConnectMessage::Request { id, method, .. }) if !from_bunker => {
                self.0.insert(
                    id,
                    Seen {
                        came: now,
                        answered: None,
                        method,
                    },
                );
            }
            Ok(NostrConnectMessage::Response { id, .. }) if from_bunker => {
                if let Some(seen) = self.0.get_mut(&id) {
                    seen.answered.get_or_insert(now);
                }
            }
            _ => {}
        }
    }

    /// What was out at once, once all are answered. The relay sees a
    /// request `one_way` after the daemon sent it, and an answer `one_way`
    /// before the daemon reads it: a request sent only once the answer
    /// before it was read comes a whole round trip after that answer, and
    /// requests sent together come within milliseconds of each other, so a
    /// request counts as out from when it came until `one_way` after its
    /// answer came (half a round trip of margin either way).
    fn requests(&self, one_way: Duration) -> Option<Requests> {
        let spans: Vec<(Instant, Instant, bool)> = self
            .0
            .values()
            .map(|seen| {
                let encrypting = seen.method == NostrConnectMethod::Nip44Encrypt;
                Some((seen.came, seen.answered? + one_way, encrypting))
            })
            .collect::<Option<_>>()?;
        let out_at = |at: Instant, encrypting_only: bool| {
            spans
                .iter()
                .filter(|(came, ended, encrypting)| {
                    *came <= at && at < *ended && (*encrypting || !encrypting_only)
                })
                .count()
        };
        let most = |encrypting_only: bool| {
            spans
                .iter()
                .map(|(came, ..)| out_at(*came, encrypting_only))
                .max()
                .unwrap_or(0)
        };
        Some(Requests {
            sent: spans.len(),
            most_out: most(false),
            most_encrypting: most(true),
            decryptions: self
                .0
                .values()
                .filter(|seen| seen.method == NostrConnectMethod::Nip44Decrypt)
                .count(),
        })
    }
}

/// Reads the NIP-46 requests to one bunker and its answers on the relay
/// (with the bunker's key), in the order the relay hands them out.
#[derive(Debug)]
pub struct RequestsWatch {
    seen: Arc<Mutex<Seens>>,
    one_way: Duration,
    /// Subscribed while the watch lives.
    _client: Client,
    _counting: tokio_util::task::AbortOnDropHandle<()>,
}

impl RequestsWatch {
    async fn start(relay_url: &str, bunker: Keys, one_way: Duration) -> Self {
        let client = Client::default();
        client.add_relay(relay_url).await.expect("add the relay");
        client.connect().await;
        let mut notifications = client.notifications();
        let filter = Filter::new().kind(Kind::NostrConnect).since(Timestamp::now());
        client.subscribe(filter.clone(), None).await.expect("subscribe");
        // The relay answers in order: once this is answered, the
        // subscription above is in place.
        let _ = client.fetch_events(filter.limit(0), PATIENCE).await;
        let seen = Arc::new(Mutex::new(Seens::default()));
        let counting = tokio::spawn({
            let seen = Arc::clone(&seen);
            async move {
                while let Ok(notification) = notifications.recv().await {
                    if let RelayPoolNotification::Event { event, .. } = notification {
                        seen.lock().expect("not poisoned").note(&bunker, &event);
                    }
                }
            }
        });
        RequestsWatch {
            seen,
            one_way,
            _client: client,
            _counting: tokio_util::task::AbortOnDropHandle::new(counting),
        }
    }

    /// What it saw, once at least `sent` requests were all answered.
    pub async fn settled(&self, sent: usize) -> Requests {
        let now = || self.seen.lock().expect("not poisoned").requests(self.one_way);
        eventually(
            PATIENCE,
            async || now().filter(|seen| seen.sent >= sent),
            || format!("{sent} requests to the bunker, all answered: {:?}", now()),
        )
        .await
    }
}
