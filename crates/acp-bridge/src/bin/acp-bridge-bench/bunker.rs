//! A DM's round trip (the owner's NIP-17 DM published → the owner decrypts
//! the answer) with the bot's key in the daemon vs behind a NIP-46 bunker
//! (nostr-connect's signer side, in this process) a phone's round trip
//! away: what a remote signer adds to an answer, and how many requests it
//! asks of the bunker per DM (issue 39).
//!
//! The bunker's distance is a forwarder between the daemon and the relay
//! that holds the daemon's bunker traffic for half the round trip each way
//! (the URI the daemon gets names it): requests sent together wait
//! together, as over a real link, while the bunker itself answers at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use acp_bridge::EmbeddedRelay;
use nostr_connect::prelude::{
    NostrConnectKeys, NostrConnectRemoteSigner, NostrConnectRequest, NostrConnectSignerActions,
};
use nostr_sdk::prelude::*;
use test_support::slow_link::SlowLink;
use tokio_util::task::AbortOnDropHandle;

use crate::harness::{DaemonProcess, PATIENCE, ms, percentiles};
use crate::paths::temp_dir;

/// The bunker's round trip by default, in ms: a phone near its relay.
const DELAY_MS: u64 = 20;
/// Measured DMs per signer by default (after one to warm up).
const SAMPLES: usize = 50;

/// The table: p50 and p99 of each signer, what the bunker adds, and the
/// requests it answered per DM.
pub async fn section() {
    let (samples, delay) = (samples(), delay());
    println!(
        "## A DM's round trip (owner's NIP-17 DM → the owner decrypts the answer): local keys vs a bunker {} ms away",
        delay.as_millis()
    );
    println!("| signer | p50 | p99 | samples | bunker requests per DM |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let mut local = local_keys(samples).await;
    let (mut remote, per_dm) = through_bunker(samples, delay).await;
    let (local_p50, local_p99) = percentiles(&mut local);
    let (remote_p50, remote_p99) = percentiles(&mut remote);
    println!(
        "| local keys | {} | {} | {samples} | - |",
        ms(local_p50),
        ms(local_p99)
    );
    println!(
        "| bunker | {} | {} | {samples} | {per_dm:.1} |",
        ms(remote_p50),
        ms(remote_p99)
    );
    println!(
        "\nAdded by the bunker: p50 {}, p99 {}.\n",
        ms(remote_p50.saturating_sub(local_p50)),
        ms(remote_p99.saturating_sub(local_p99))
    );
}

/// The bunker's round trip: `ACP_BRIDGE_BENCH_BUNKER_DELAY_MS=20`.
fn delay() -> Duration {
    Duration::from_millis(env_number("ACP_BRIDGE_BENCH_BUNKER_DELAY_MS").unwrap_or(DELAY_MS))
}

/// DMs measured per signer: `ACP_BRIDGE_BENCH_BUNKER_SAMPLES=50`.
fn samples() -> usize {
    env_number("ACP_BRIDGE_BENCH_BUNKER_SAMPLES").map_or(SAMPLES, |samples| samples as usize)
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

/// `samples` DM round trips to a daemon holding the bot's key.
async fn local_keys(samples: usize) -> Vec<Duration> {
    let relay = EmbeddedRelay::start(None).await.expect("relay");
    let owner = Keys::generate();
    let daemon = DaemonProcess::spawn(&relay, &owner, crate::harness::ZERO_THINK_TIME, &[]);
    round_trips(&relay, &daemon, owner, samples, || {}).await
}

/// `samples` DM round trips to a daemon signing through a bunker `delay`
/// away, and the requests the bunker answered per DM.
async fn through_bunker(samples: usize, delay: Duration) -> (Vec<Duration>, f64) {
    let relay = EmbeddedRelay::start(None).await.expect("relay");
    let (owner, bot) = (Keys::generate(), Keys::generate());
    let keys = NostrConnectKeys {
        signer: Keys::generate(),
        user: bot.clone(),
    };
    let bunker_key = keys.signer.public_key();
    let secret = "bench-bunker-secret";
    let signer = NostrConnectRemoteSigner::new(keys, [relay.url().clone()], Some(secret.to_owned()), None)
        .expect("the bunker");
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = Approve(Arc::clone(&requests));
    let _serving = AbortOnDropHandle::new(tokio::spawn(async move {
        let _ = signer.serve(counted).await;
    }));
    let port = Url::parse(relay.url().as_str())
        .ok()
        .and_then(|url| url.port())
        .expect("the relay's port");
    let far = SlowLink::start(port, delay).await;
    let uri = NostrConnectURI::Bunker {
        remote_signer_public_key: bunker_key,
        relays: vec![RelayUrl::parse(&far.url()).expect("the link's url")],
        secret: Some(secret.to_owned()),
    };
    let file = temp_dir("bunker").join("bunker-uri");
    std::fs::write(&file, uri.to_string()).expect("write the bunker URI");
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
    std::fs::set_permissions(&file, private).expect("chmod 600");
    let flags = ["--signer-file", file.to_str().expect("a UTF-8 path")];
    // The bot's key stays with the bunker (see `spawn_under`).
    let daemon = DaemonProcess::spawn_replica(&bot, &relay, &owner, crate::harness::ZERO_THINK_TIME, &flags);
    let mut before = 0;
    let measured = round_trips(&relay, &daemon, owner, samples, || {
        before = requests.load(Ordering::SeqCst);
    })
    .await;
    let asked = requests.load(Ordering::SeqCst) - before;
    let per_dm = asked as f64 / measured.len().max(1) as f64;
    (measured, per_dm)
}

/// Approves every request, counting them.
struct Approve(Arc<AtomicUsize>);

impl NostrConnectSignerActions for Approve {
    fn approve(&self, _client: &PublicKey, _request: &NostrConnectRequest) -> bool {
        self.0.fetch_add(1, Ordering::SeqCst);
        true
    }
}

/// One DM to warm up, then `start_counting`, then `samples` DMs one after
/// the other, each timed from its publication to the owner reading the
/// answer.
async fn round_trips(
    relay: &EmbeddedRelay,
    daemon: &DaemonProcess,
    owner: Keys,
    samples: usize,
    start_counting: impl FnOnce(),
) -> Vec<Duration> {
    daemon.ready().await;
    let bot = daemon.bot.public_key();
    let client = Client::builder()
        .signer(owner.clone())
        .websocket_transport(acp_bridge::NoDelayTransport::default())
        .build();
    client.add_relay(relay.url().clone()).await.expect("relay");
    client.connect().await;
    client.wait_for_connection(Duration::from_secs(5)).await;
    // Gift wraps are dated up to two days back: new ones only, by limit.
    let answers = Filter::new()
        .kind(Kind::GiftWrap)
        .pubkey(owner.public_key())
        .limit(0);
    client.subscribe(answers, None).await.expect("subscribe");
    dm_round_trip(&client, &owner, bot, "warm up").await;
    start_counting();
    let mut measured = Vec::with_capacity(samples);
    for sample in 0..samples {
        measured.push(dm_round_trip(&client, &owner, bot, &format!("DM {sample}")).await);
    }
    client.shutdown().await;
    measured
}

/// Sends `text` to `bot` as a NIP-17 DM; the time until the owner has
/// decrypted an answer quoting it.
async fn dm_round_trip(client: &Client, owner: &Keys, bot: PublicKey, text: &str) -> Duration {
    let mut notifications = client.notifications();
    let sent = Instant::now();
    // Wrapped here, as the owner's client does, and sent to the relay
    // (not looked up in the bot's inbox list).
    let dm = EventBuilder::private_msg(owner, bot, text, [])
        .await
        .expect("wrap the DM");
    client.send_event(&dm).await.expect("send the DM");
    let answered = async {
        while let Ok(notification) = notifications.recv().await {
            let RelayPoolNotification::Event { event, .. } = notification else {
                continue;
            };
            let Ok(gift) = UnwrappedGift::from_gift_wrap(owner, &event).await else {
                continue;
            };
            if gift.sender == bot && gift.rumor.content.contains(text) {
                return sent.elapsed();
            }
        }
        panic!("the owner's client stopped");
    };
    tokio::time::timeout(PATIENCE, answered)
        .await
        .expect("the DM answered in time")
}
