//! Wires the stages together and owns their lifetimes; no business logic.
//!
//! relay links → intake → heart → turn runners → replier → outbox publisher,
//! with housekeeping pruning the state dir beside them.
//! Shutdown runs in that order too: stop listening, let turns finish within
//! the grace, abandon the rest (they stay journaled), kill the agents, flush
//! the outbox.

use std::sync::Arc;
use std::time::Duration;

use acp_client::{ClientConfig, PermissionPolicy, TurnOptions};
use nostr_sdk::prelude::{Client, ClientOptions, RelayOptions, RelayUrl};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::ask_owner::AskOwnerDesk;
use crate::config::{PermissionPolicyArg, RelaySpec, Settings};
use crate::embedded_relay::EmbeddedRelay;
use crate::gate::AuthorGate;
use crate::heart::Heart;
use crate::housekeeping::Housekeeping;
use crate::intake::relay_link::{Interest, RelayLink};
use crate::intake::{Intake, IntakeLimits};
use crate::loop_guard::LoopGuard;
use crate::mention::Mention;
use crate::mode_gate::ModeGate;
use crate::pool::Pool;
use crate::reply::Replier;
use crate::reply::publisher::Publisher;
use crate::store::{Finish, Store, StoreError, sql_now};
use crate::telemetry::http::{self, Health};
use crate::transport::NoDelayTransport;
use crate::turn_runner::{AskOwner, TurnContext};
use sd_notify::NotifyState;

/// Events waiting between the relay links and the intake.
const ARRIVAL_QUEUE: usize = 4096;
/// Mentions waiting between the intake and the heart.
const INBOUND_QUEUE: usize = 1024;
/// At shutdown, the outbox gets this long to publish what is left.
const OUTBOX_FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("state directory: {0}")]
    Store(#[from] StoreError),
    #[error("embedded relay: {0}")]
    EmbeddedRelay(String),
    #[error("relay {url}: {reason}")]
    Relay { url: RelayUrl, reason: String },
    #[error("--metrics-addr: {0}")]
    Metrics(String),
}

/// Handles a running daemon exposes (for health checks, tests, the demo).
#[derive(Debug, Clone)]
pub struct DaemonHandle {
    /// One flag per relay: connected and subscribed.
    pub relays_connected: Vec<watch::Receiver<bool>>,
    pub pool: Arc<Pool>,
}

impl DaemonHandle {
    pub fn any_relay_connected(&self) -> bool {
        self.relays_connected.iter().any(|connected| *connected.borrow())
    }
}

/// Runs the daemon until `stop` is cancelled. `on_ready` receives the
/// handle once the stages are wired.
pub async fn run(
    settings: Settings,
    stop: CancellationToken,
    on_ready: impl FnOnce(DaemonHandle),
) -> Result<(), DaemonError> {
    tracing::info!(config = %settings.summary(), "starting acp-bridge");
    let store = Arc::new(Store::open(&settings.state_dir)?);
    let mut embedded = None;
    let mut relay_urls = Vec::new();
    for relay in &settings.relays {
        match relay {
            RelaySpec::Embedded => {
                let relay = EmbeddedRelay::start(None)
                    .await
                    .map_err(|error| DaemonError::EmbeddedRelay(error.to_string()))?;
                relay_urls.push(relay.url().clone());
                embedded = Some(relay);
            }
            RelaySpec::Url(url) => relay_urls.push(url.clone()),
        }
    }

    let client = Client::builder()
        .signer(settings.keys.clone())
        .websocket_transport(NoDelayTransport)
        .opts(ClientOptions::new().autoconnect(false))
        .build();
    let mut relays = Vec::new();
    for url in &relay_urls {
        client
            .pool()
            .add_relay(url.clone(), RelayOptions::new().reconnect(false))
            .await
            .map_err(|error| relay_error(url, error))?;
        relays.push(
            client
                .relay(url.clone())
                .await
                .map_err(|error| relay_error(url, error))?,
        );
    }

    let loop_guard = Arc::new(LoopGuard::default());
    let replier = Replier::new(
        settings.keys.clone(),
        client.clone(),
        Arc::clone(&store),
        settings.reply_mode,
        settings.reactions,
        Arc::clone(&loop_guard),
    );
    let client_config = ClientConfig {
        cancel_timeout: settings.agent.cancel_timeout,
        ..ClientConfig::default()
    };
    let pool = Arc::new(Pool::start(settings.agent.clone(), client_config));
    let turn_options = TurnOptions {
        idle_timeout: settings.agent.idle_timeout,
        max_duration: settings.agent.max_turn_duration,
        permission: match settings.permission_policy {
            PermissionPolicyArg::Allow => PermissionPolicy::AllowOnce,
            PermissionPolicyArg::Reject => PermissionPolicy::RejectOnce,
            PermissionPolicyArg::AskOwner => PermissionPolicy::AskCaller,
        },
    };
    let ask = match (settings.permission_policy, settings.owner) {
        (PermissionPolicyArg::AskOwner, Some(owner)) => Some(AskOwner {
            desk: Arc::new(AskOwnerDesk::default()),
            owner,
            timeout: settings.permission_timeout,
            store: Arc::clone(&store),
        }),
        _ => None,
    };
    let turns = TurnContext {
        pool: Arc::clone(&pool),
        replier: replier.clone(),
        options: turn_options,
        ask,
    };
    let mut heart = Heart::new(
        turns,
        Arc::clone(&store),
        ModeGate::new(settings.multiple_event_handling, settings.dedup),
        (settings.agent.processes * settings.agent.turns_per_agent) as usize,
    );
    expire_stale_questions(&store, &replier).await;
    heart.resume(pending_mentions(&store));

    let intake_stop = stop.child_token();
    let publisher_stop = CancellationToken::new();
    let publisher = Arc::new(Publisher::new(
        client.clone(),
        Arc::clone(&store),
        replier.publish_signal(),
    ));
    let publisher_task = tokio::spawn({
        let publisher = Arc::clone(&publisher);
        let publisher_stop = publisher_stop.clone();
        async move { publisher.run(publisher_stop).await }
    });

    let (arrivals_tx, arrivals_rx) = mpsc::channel(ARRIVAL_QUEUE);
    let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_QUEUE);
    let interest = Interest {
        bot: settings.keys.public_key(),
        kinds: settings.kinds.clone(),
    };
    let mut relays_connected = Vec::new();
    let mut link_tasks = Vec::new();
    for relay in relays {
        let (connected_tx, connected_rx) = watch::channel(false);
        relays_connected.push(connected_rx);
        let link = RelayLink::new(
            relay,
            interest.clone(),
            Arc::clone(&store),
            arrivals_tx.clone(),
            connected_tx,
        );
        link_tasks.push(tokio::spawn(link.run(intake_stop.clone())));
    }
    drop(arrivals_tx);
    let gate = AuthorGate::new(
        settings.owner,
        settings.respond_to,
        settings.allowlist.clone(),
        client.clone(),
    );
    let intake = Intake::new(
        settings.keys.clone(),
        Arc::clone(&store),
        gate,
        replier.clone(),
        loop_guard,
        IntakeLimits {
            kinds: settings.kinds.clone(),
            max_content_bytes: settings.max_content_bytes,
            rate_limit_burst: settings.rate_limit_burst,
            rate_limit_refill: settings.rate_limit_refill,
            max_bot_hops: settings.max_bot_hops,
            session_policy: settings.session_policy,
        },
        inbound_tx,
    );
    let housekeeping = Housekeeping {
        store: Arc::clone(&store),
        relays: relay_urls.clone(),
        floors: intake.floors(),
        retention: settings.retention,
    };
    let intake_task = tokio::spawn(intake.run(arrivals_rx));
    let housekeeping_task = tokio::spawn(housekeeping.run(intake_stop.clone()));

    let metrics_stop = CancellationToken::new();
    if let Some(addr) = settings.metrics_addr {
        let recorder = http::install_recorder().map_err(DaemonError::Metrics)?;
        let health = Health {
            relays_connected: relays_connected.clone(),
            pool: Arc::clone(&pool),
        };
        http::bind(addr, recorder, health, metrics_stop.clone())
            .await
            .map_err(|error| DaemonError::Metrics(format!("cannot listen on {addr}: {error}")))?;
    }
    let handle = DaemonHandle {
        relays_connected: relays_connected.clone(),
        pool: Arc::clone(&pool),
    };
    tokio::spawn(announce_ready(relays_connected, stop.clone()));
    on_ready(handle);

    heart.run(inbound_rx, stop.clone(), settings.shutdown_grace).await;
    notify_systemd(&[NotifyState::Stopping]);

    // The heart returned: stop was requested and the turns are settled.
    intake_stop.cancel();
    for task in link_tasks {
        let _ = task.await;
    }
    let _ = intake_task.await;
    let _ = housekeeping_task.await;
    publisher_stop.cancel();
    let _ = publisher_task.await;
    if tokio::time::timeout(OUTBOX_FLUSH_TIMEOUT, publisher.flush()).await != Ok(true) {
        tracing::warn!("some replies are still unsent; they are published at the next start");
    }
    client.shutdown().await;
    metrics_stop.cancel();
    if let Some(relay) = embedded {
        relay.shutdown();
    }
    tracing::info!("acp-bridge stopped");
    Ok(())
}

/// Logs once, when the first relay is connected and subscribed.
async fn announce_ready(relays: Vec<watch::Receiver<bool>>, stop: CancellationToken) {
    let waits = relays.into_iter().map(|mut connected| {
        Box::pin(async move {
            let _ = connected.wait_for(|connected| *connected).await;
        })
    });
    tokio::select! {
        () = stop.cancelled() => {}
        _ = futures_util::future::select_all(waits) => {
            tracing::info!("ready: subscribed to mentions");
            notify_systemd(&[NotifyState::Ready]);
        }
    }
}

/// Questions posted before a crash died with their turns: their threads are
/// told so (the resumed mention will ask again) and they are forgotten.
async fn expire_stale_questions(store: &Store, replier: &Replier) {
    let stale = match store.questions_open() {
        Ok(stale) => stale,
        Err(error) => return tracing::error!(%error, "cannot read the open questions"),
    };
    for (event_id, payload) in stale {
        if let Ok(mention) = serde_json::from_str::<Mention>(&payload) {
            let text = "This permission question expired: the bridge restarted. If the agent still needs it, it will ask again.";
            if let Err(error) = replier.inform(&mention, text).await {
                tracing::error!(%error, "cannot mark a stale question expired");
                continue;
            }
            tracing::info!(question = %event_id, "marked a stale permission question expired");
        }
        let _ = store.question_close(&event_id);
    }
}

/// The journal's unfinished mentions; an unreadable entry is finished as
/// dropped (and logged) rather than blocking the rest.
fn pending_mentions(store: &Store) -> Vec<Mention> {
    let pending = match store.journal_pending() {
        Ok(pending) => pending,
        Err(error) => {
            tracing::error!(%error, "cannot read the journal");
            return Vec::new();
        }
    };
    pending
        .into_iter()
        .filter_map(|entry| match serde_json::from_str::<Mention>(&entry.payload) {
            Ok(mention) => Some(mention),
            Err(error) => {
                tracing::error!(event_id = %entry.event_id, %error, "unreadable journal entry dropped");
                let _ = store.journal_finish(&[&entry.event_id], Finish::Dropped, sql_now());
                None
            }
        })
        .collect()
}

/// Tells systemd (`Type=notify`) about readiness and stopping; a no-op
/// outside systemd (no `$NOTIFY_SOCKET`).
fn notify_systemd(states: &[NotifyState]) {
    if let Err(error) = sd_notify::notify(states) {
        tracing::debug!(%error, "sd_notify failed");
    }
}

fn relay_error(url: &RelayUrl, error: impl std::fmt::Display) -> DaemonError {
    DaemonError::Relay {
        url: url.clone(),
        reason: error.to_string(),
    }
}
