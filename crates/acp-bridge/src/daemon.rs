//! Wires the stages together and owns their lifetimes; no business logic.
//!
//! The data flow, as [`Stages::wire`] connects it: relay links → intake →
//! heart (turn drivers → agent pool) → replier → outbox publisher, with
//! housekeeping pruning the state dir beside them. [`Stages::run`] runs
//! them until stop, and [`Stopping`] then stops what is left in order:
//! stop listening (the links close their subscriptions and the intake
//! stops with the stop signal), let the heart drain its turns within the
//! grace while the outbox publishes their answers, stop the agents, flush
//! the outbox, and only then close the relay connections.

use std::sync::Arc;
use std::time::Duration;

use nostr_sdk::prelude::{Client, ClientOptions, Kind, Relay, RelayOptions, RelayUrl};
use sd_notify::NotifyState;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agents::pool::{McpOffer, Pools, reaper};
use crate::base::isolation;
use crate::config::Settings;
use crate::config_file::Reload;
use crate::edge::embedded_relay::EmbeddedRelay;
use crate::edge::embedded_relay::RelaySpec;
use crate::edge::metrics_endpoint::{self, Health};
use crate::edge::relay_tap::RelayTaps;
use crate::edge::signer::{BotSigner, SignerOpenError};
use crate::edge::transport::NoDelayTransport;
use crate::heart::{Heart, TurnServices};
use crate::housekeeping::Housekeeping;
use crate::intake::inbound::Inbound;
use crate::intake::interest::Interest;
use crate::intake::media::MediaCache;
use crate::intake::relay_link::{LinkCues, LinkDoors, LinkStatus, LinkTap, RelayLink};
use crate::intake::{Intake, RateLimit};
use crate::outbound::groups::GroupDirectory;
use crate::outbound::groups::membership::Membership;
use crate::outbound::identity::{Identity, Wanted};
use crate::outbound::reply::Replier;
use crate::outbound::reply::publisher::Publisher;
use crate::outbound::routes::{BotRelays, OutboundRelays, RelayDirectory, Routes};
use crate::policy::gate::{AuthorGate, GateRules};
use crate::policy::loop_guard;
use crate::state::ledger::Ledger;
use crate::state::store::{
    AgentGroups, AnsweredThreads, Controls, JoinedGroups, Outbox, Questions, Sessions, Store, StoreError,
    Watermarks,
};
use crate::telemetry::metrics;
use crate::tools::mcp::McpOffers;

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
    #[error("the bridge's MCP server cannot listen on loopback: {0}")]
    Mcp(String),
    #[error("signer: {0}")]
    Signer(#[from] SignerOpenError),
    #[error("--owner is the bot's own key (as the remote signer says); the owner must be a different key")]
    OwnerIsBot,
    #[error("{0}")]
    Marmot(String),
}

/// Runs the daemon until `stop` is cancelled, then stops it cleanly.
pub async fn run(settings: Settings, stop: CancellationToken) -> Result<(), DaemonError> {
    let (_none, reloads) = mpsc::unbounded_channel();
    run_reloading(settings, stop, reloads).await
}

/// [`run`], applying each [`Reload`] of the config file (SIGHUP) that
/// arrives on `reloads` while it runs.
pub async fn run_reloading(
    settings: Settings,
    stop: CancellationToken,
    mut reloads: mpsc::UnboundedReceiver<Reload>,
) -> Result<(), DaemonError> {
    tracing::info!(config = %settings.summary(), "starting acp-bridge");
    match Stages::wire(settings, &stop).await {
        Ok((stages, mut reloader)) => {
            tokio::spawn(async move {
                while let Some(reload) = reloads.recv().await {
                    reloader.apply(reload);
                }
            });
            stages.run(stop).await
        }
        // Stopped while waiting for the remote signer: a clean stop.
        Err(DaemonError::Signer(SignerOpenError::Stopped)) => {}
        Err(error) => return Err(error),
    }
    tracing::info!("acp-bridge stopped");
    Ok(())
}

/// Every stage, built and connected, not yet running.
#[derive(Debug)]
struct Stages {
    links: Vec<RelayLink>,
    relays_connected: Vec<watch::Receiver<bool>>,
    relays_listening: Vec<watch::Receiver<bool>>,
    intake: Intake,
    arrivals: mpsc::Receiver<crate::intake::Arrival>,
    heart: Heart,
    inbound: mpsc::Receiver<Inbound>,
    /// The `[[schedule]]` runs (`None`: no schedules to run).
    scheduler: Option<crate::heart::schedule::Scheduler>,
    /// Calls of the bridge's MCP tools, for the heart.
    tool_requests: mpsc::Receiver<crate::tools::ToolRequest>,
    /// Stops the MCP server's listener, after the heart.
    mcp_stop: CancellationToken,
    housekeeping: Housekeeping,
    publisher: Arc<Publisher>,
    identity: Identity,
    /// The bot's Marmot key packages and its groups' feed (`None`:
    /// `--marmot` is off).
    marmot: Option<(
        crate::outbound::marmot::key_packages::KeyPackages,
        crate::intake::marmot::MarmotFeed,
    )>,
    membership: Membership,
    pool: Pools,
    client: Client,
    /// The links to the bot's DM inbox relays that are not among its
    /// relays (`--dm-relays`): apart, so nothing else publishes there.
    inbox_client: Client,
    embedded: Option<EmbeddedRelay>,
    metrics_stop: CancellationToken,
    shutdown_grace: Duration,
}

/// What a reload of the config file reaches in the running stages.
#[derive(Debug)]
struct Reloader {
    /// The bot's identity, published again when its profile changes.
    identity: Identity,
    stop: CancellationToken,
    /// The author gate's rules, whose allowlist a reload replaces.
    gate_rules: GateRules,
    /// The intake's rate limits.
    rate_limits: watch::Sender<RateLimit>,
}

impl Reloader {
    fn apply(&mut self, reload: Reload) {
        if let Some(profile) = reload.profile {
            self.identity = self.identity.with_profile(profile);
            tokio::spawn(self.identity.clone().run(self.stop.clone()));
            tracing::info!(key = "identity.profile", "SIGHUP: configuration reloaded");
        }
        if let Some(allowlist) = reload.allowlist {
            let keys = allowlist.len();
            self.gate_rules.set_allowlist(allowlist);
            tracing::info!(key = "gate.allowlist", keys, "SIGHUP: configuration reloaded");
        }
        if let Some(rate) = reload.rate_limit {
            self.rate_limits.send_replace(rate);
            tracing::info!(
                key = "gate.rate-limit-burst,gate.rate-limit-refill",
                burst = rate.burst,
                refill_ms = u64::try_from(rate.refill.as_millis()).unwrap_or(u64::MAX),
                "SIGHUP: configuration reloaded"
            );
        }
    }
}

impl Stages {
    /// Builds the stages and connects them. Fails (before anything runs)
    /// when the state dir, a relay or the metrics address is unusable, or
    /// when stopped while a remote signer has not answered yet.
    async fn wire(settings: Settings, stop: &CancellationToken) -> Result<(Stages, Reloader), DaemonError> {
        // First, so that nothing recorded while wiring (the signer's state,
        // an agent started early) is lost, and the zeros are true.
        let recorder = match settings.metrics_addr {
            Some(_) => {
                let recorder = metrics_endpoint::install_recorder().map_err(DaemonError::Metrics)?;
                metrics::register_at_zero();
                metrics::register_profiles_at_zero(
                    settings
                        .agent_profiles
                        .all()
                        .iter()
                        .map(|profile| profile.name.as_str()),
                );
                Some(recorder)
            }
            None => None,
        };
        let store = Arc::new(Store::open(&settings.state_dir)?);
        let signer = BotSigner::open(
            &settings.signer.source,
            &settings.state_dir,
            settings.signer.timeout,
            stop,
        )
        .await?;
        if settings.gate.owner == Some(signer.public_key()) {
            return Err(DaemonError::OwnerIsBot);
        }
        isolation::prepare(
            settings.agent.user.as_ref(),
            &settings.agent.cwd,
            &settings.state_dir,
        );
        let agent_groups = AgentGroups::new(Arc::clone(&store));
        reaper::sweep(&agent_groups).await;
        let (embedded, relay_urls) = relay_urls(&settings.relays.bot).await?;
        // The daemon's own subscriptions are read off the wire (relay_tap).
        let taps = RelayTaps::default();
        let (client, relays) = relay_client(&settings, &signer, &relay_urls, &taps).await?;
        let inbox_only = inbox_only_relays(&settings, &relay_urls);
        let (inbox_client, inbox_relays) = relay_client(&settings, &signer, &inbox_only, &taps).await?;

        let (reply_recorder, loop_guard) = loop_guard::loop_guard();
        let groups = GroupDirectory::new(&settings.groups);
        // `--marmot`: the MLS state, shared by the replier (which encrypts
        // into the groups), the intake (welcomes, decryption) and the key
        // packages; `groups_changed` tells the feed and the key packages
        // that the bot joined or left a group.
        let (mls, groups_changed) = match settings.marmot.enabled {
            true => (
                Some(
                    crate::state::mls::MlsState::open(
                        &settings.state_dir,
                        settings.marmot.key_file.as_deref(),
                    )
                    .map_err(|error| DaemonError::Marmot(error.to_string()))?,
                ),
                Some(watch::Sender::new(0u64)),
            ),
            false => (None, None),
        };
        let replier = Replier::new(
            signer.clone(),
            Arc::clone(&store),
            settings.replies.mode,
            settings.replies.reactions,
            reply_recorder,
        )
        .with_shard(settings.shard)
        .with_groups(groups.clone());
        let replier = match &mls {
            Some(mls) => replier.with_marmot(mls.clone()),
            None => replier,
        };
        // Bound before any agent starts: sessions are offered its address.
        let (tool_tx, tool_requests) = mpsc::channel(crate::tools::mcp::TOOL_REQUEST_QUEUE);
        let mcp_stop = CancellationToken::new();
        let profiles = &settings.agent_profiles;
        let agent_uids = profiles
            .all()
            .iter()
            .filter_map(|profile| profile.agent.user.as_ref().map(|user| user.uid));
        let mcp = crate::tools::mcp::start(settings.mcp.clone(), agent_uids, tool_tx, mcp_stop.clone())
            .await
            .map_err(|error| DaemonError::Mcp(error.to_string()))?;
        // Each profile offers the bridge's own server beside its operator's.
        let offer = |servers| {
            McpOffers::for_profile(mcp.as_ref(), servers).map(|offers| Arc::new(offers) as Arc<dyn McpOffer>)
        };
        let pool = Pools::start(
            profiles
                .all()
                .iter()
                .map(|profile| (profile.name.as_str(), &profile.agent, offer(&profile.mcp))),
            &profiles.default_profile().name,
            // Questions reach a person only with ask-owner (docs/owner.md);
            // the bridge's own tools are never asked about.
            (settings.turns.asks_owner(), crate::tools::mcp::SERVER_NAME),
            (
                &Sessions::new(Arc::clone(&store)),
                &crate::state::store::AgentUids::new(Arc::clone(&store)),
            ),
            &agent_groups,
        );
        let gate_rules = settings.gate.rules();
        let mut services = turn_services(&settings, &pool, &replier, &store, &groups, &signer);
        services.gate = Some(gate_rules.clone());
        let rate_limits = watch::Sender::new(settings.intake.rate_limit());
        services.context = settings.context.for_turns(
            &client,
            &taps,
            &store,
            signer.public_key(),
            &gate_rules,
            settings.intake.max_content_bytes,
        );
        // Which shard asked each question: the intake learns it, the heart reads it.
        let question_askers = crate::policy::shard::QuestionAskers::default();
        let mut heart_settings =
            settings
                .turns
                .heart(&settings.agent, settings.shard, question_askers.clone());
        // Turn slots are global: every profile's agents' turns.
        heart_settings.capacity = settings.agent_profiles.capacity();
        // The chat's schedule commands reach the scheduler through the planner.
        let (planner, schedule_changes) = crate::heart::schedule::Planner::new(
            crate::state::store::ChatSchedules::new(Arc::clone(&store)),
            crate::heart::schedule::Board::default(),
        );
        heart_settings.schedules = settings.gate.owner.map(|_| planner.clone());
        let heart = Heart::new(services, Ledger::new(Arc::clone(&store)), heart_settings);

        // Events waiting between the relay links and the intake: as many
        // as the SDK buffers per relay (`--relay-buffer`).
        let (arrivals_tx, arrivals) = mpsc::channel(settings.relays.buffer);
        let (inbound_tx, inbound) = mpsc::channel(INBOUND_QUEUE);
        let interest = Interest {
            bot: signer.public_key(),
            kinds: settings.intake.kinds.clone(),
            follow_threads: settings.intake.follow_threads,
            groups: Vec::new(),
        };
        let mut announced_kinds = interest.kinds.clone();
        announced_kinds.extend(settings.marmot.enabled.then_some(Kind::MlsGroupMessage));
        let scheduler = crate::heart::schedule::Scheduler::new(
            settings.schedules.clone(),
            settings.gate.owner,
            settings.intake.session_policy,
            settings.shard,
            &store,
            (inbound_tx.clone(), replier.clone()),
            (&planner, schedule_changes),
        );
        let gate = AuthorGate::new(gate_rules.clone(), client.clone());
        let mut intake = Intake::new(
            signer.clone(),
            Arc::clone(&store),
            gate,
            replier.clone(),
            loop_guard,
            settings.intake.clone(),
            inbound_tx,
        )
        .with_owner_commands(crate::heart::commands::recognise)
        .with_shard(settings.shard)
        .with_question_askers(question_askers)
        .with_groups(groups.clone())
        .with_reply_lookup(client.clone())
        .with_rate_limits(rate_limits.subscribe());
        if let (Some(mls), Some(groups_changed)) = (&mls, &groups_changed) {
            intake = intake.with_marmot(crate::intake::marmot::MarmotIntake {
                mls: mls.clone(),
                groups_changed: groups_changed.clone(),
            });
        }
        if settings.shard.count() > 1 {
            tracing::info!(shard = %settings.shard, "a shard of the bot: answering only the conversations that hash to this index");
        }
        let (mut relays_connected, mut relays_listening) = (Vec::new(), Vec::new());
        let link_doors = LinkDoors {
            ledger: Ledger::new(Arc::clone(&store)),
            answered: AnsweredThreads::new(Arc::clone(&store)),
            watermarks: Watermarks::new(Arc::clone(&store)),
        };
        let mut link = |relay: Relay, interest: Interest, status: LinkStatus| {
            let refetch = intake.refetch_requests(relay.url().clone());
            RelayLink::new(
                relay,
                interest,
                link_doors.clone(),
                arrivals_tx.clone(),
                status,
                LinkCues {
                    refetch,
                    threads: replier.threads_answered(),
                },
                LinkTap {
                    taps: &taps,
                    buffer: settings.relays.buffer,
                },
            )
        };
        let mut links: Vec<RelayLink> = relays
            .into_iter()
            .map(|relay| {
                let status = LinkStatus::default();
                relays_connected.push(status.connected.subscribe());
                relays_listening.push(status.listening.subscribe());
                let relay_interest = Interest {
                    groups: settings.groups.ids_on(relay.url()),
                    ..interest.clone()
                };
                link(relay, relay_interest, status)
            })
            .collect();
        // The bot's own DM inbox relays that are not among its relays: a
        // link each that reads DMs only (its health is not the bot's).
        let dms_only = Interest {
            kinds: vec![Kind::GiftWrap],
            follow_threads: false,
            ..interest.clone()
        };
        links.extend(
            inbox_relays
                .into_iter()
                .map(|relay| link(relay, dms_only.clone(), LinkStatus::default())),
        );
        let signer_answering = signer.answering();
        let identity = Identity {
            client: client.clone(),
            signer: signer.clone(),
            outbox: Outbox::new(Arc::clone(&store)),
            outlet: replier.outlet(),
            wanted: Wanted::new(
                settings.profile.clone(),
                relay_urls.clone(),
                settings.relays.dm_inbox.clone(),
            )
            // The kinds announced are the ones the relay links listen to,
            // and an encrypted group's messages where `--marmot` reads them.
            .announcing(settings.groups.groups.clone(), announced_kinds),
        };
        let marmot = match (mls, groups_changed) {
            (Some(mls), Some(groups_changed)) => Some((
                crate::outbound::marmot::key_packages::KeyPackages {
                    mls: mls.clone(),
                    signer: signer.clone(),
                    outbox: Outbox::new(Arc::clone(&store)),
                    outlet: replier.outlet(),
                    relays: relay_urls.clone(),
                    groups_changed: groups_changed.subscribe(),
                },
                crate::intake::marmot::MarmotFeed {
                    client: client.clone(),
                    mls,
                    groups_changed: groups_changed.subscribe(),
                    arrivals: arrivals_tx.clone(),
                },
            )),
            _ => None,
        };
        let outbound = Arc::new(OutboundRelays::new(
            signer.clone(),
            settings.relays.strangers(&relay_urls),
        ));
        let routes = Routes {
            directory: RelayDirectory::new(
                client.clone(),
                settings.relays.directory.clone(),
                Arc::clone(&outbound),
            ),
            outbound,
            bot: signer.public_key(),
            bot_relays: BotRelays {
                dm: identity.wanted.dm_relays().to_vec(),
                directory: settings.relays.directory.clone(),
            },
        };
        let membership = Membership {
            client: client.clone(),
            signer,
            joined: JoinedGroups::new(Arc::clone(&store)),
            settings: settings.groups.clone(),
            directory: groups,
            relays: relay_urls
                .iter()
                .cloned()
                .zip(relays_connected.iter().cloned())
                .collect(),
        };
        let housekeeping = Housekeeping {
            journal: Ledger::new(Arc::clone(&store)),
            watermarks: Watermarks::new(Arc::clone(&store)),
            threads: AnsweredThreads::new(Arc::clone(&store)),
            outbox: Outbox::new(Arc::clone(&store)),
            spend: crate::state::store::SpendBook::new(Arc::clone(&store)),
            relays: relay_urls.into_iter().chain(inbox_only).collect(),
            floors: intake.floors(),
            retention: settings.retention,
            workspaces: settings
                .agent
                .workspaces(&crate::state::store::AgentUids::new(Arc::clone(&store))),
            pools: pool.watch_statuses(),
        };
        let publisher = Arc::new(Publisher::new(
            client.clone(),
            Outbox::new(Arc::clone(&store)),
            replier.outlet(),
            routes,
        ));

        let metrics_stop = CancellationToken::new();
        if let (Some(addr), Some(recorder)) = (settings.metrics_addr, recorder) {
            // A key file's signer never reports its state: it is up.
            metrics::signer_up(*signer_answering.borrow());
            let health = Health {
                relays_connected: relays_connected.clone(),
                agents: Arc::new(pool.clone()),
                signer_answering: signer_answering.clone(),
            };
            metrics_endpoint::bind(addr, recorder, health, metrics_stop.clone())
                .await
                .map_err(|error| DaemonError::Metrics(format!("cannot listen on {addr}: {error}")))?;
        }
        let reloader = Reloader {
            identity: identity.clone(),
            stop: stop.clone(),
            gate_rules,
            rate_limits,
        };
        let stages = Stages {
            links,
            relays_connected,
            relays_listening,
            intake,
            arrivals,
            heart,
            scheduler,
            inbound,
            tool_requests,
            mcp_stop,
            housekeeping,
            publisher,
            identity,
            marmot,
            membership,
            pool,
            client,
            inbox_client,
            embedded,
            metrics_stop,
            shutdown_grace: settings.shutdown_grace,
        };
        Ok((stages, reloader))
    }

    /// Runs every stage until `stop`, then stops them in order.
    async fn run(mut self, stop: CancellationToken) {
        // Listening stops with `stop` itself: the links close their
        // subscriptions and end (the connections stay up for the outbox
        // until `Stopping` closes them), the intake drains what they
        // queued, housekeeping ends. The publisher runs on meanwhile, so
        // what the turns answer within the grace goes out at once.
        let mut listening: Vec<JoinHandle<()>> = self
            .links
            .into_iter()
            .map(|link| tokio::spawn(link.run(stop.clone())))
            .collect();
        listening.push(tokio::spawn(self.intake.run(self.arrivals)));
        listening.push(tokio::spawn(self.housekeeping.run(stop.clone())));
        if let Some(scheduler) = self.scheduler {
            listening.push(tokio::spawn(scheduler.run(stop.clone())));
        }
        let publisher_stop = CancellationToken::new();
        let publishing = tokio::spawn({
            let (publisher, publisher_stop) = (Arc::clone(&self.publisher), publisher_stop.clone());
            async move { publisher.run(publisher_stop).await }
        });
        tokio::spawn({
            let (connected, stop) = (self.relays_connected.clone(), stop.clone());
            let identity = self.identity;
            async move {
                if any_relay(connected, &stop).await {
                    identity.run(stop).await;
                }
            }
        });
        tokio::spawn(self.membership.run(stop.clone()));
        if let Some((key_packages, feed)) = self.marmot {
            let (connected, key_stop) = (self.relays_connected.clone(), stop.clone());
            tokio::spawn(async move {
                if any_relay(connected, &key_stop).await {
                    key_packages.run(key_stop).await;
                }
            });
            listening.push(tokio::spawn(feed.run(stop.clone())));
        }
        listening.push(tokio::spawn(announce(self.relays_listening, stop.clone())));

        self.heart.resume();
        self.heart
            .run(self.inbound, self.tool_requests, stop, self.shutdown_grace)
            .await;
        self.mcp_stop.cancel();

        Stopping {
            listening,
            pool: self.pool,
            publisher: self.publisher,
            publisher_stop,
            publishing,
            clients: [self.client, self.inbox_client],
            metrics_stop: self.metrics_stop,
            embedded: self.embedded,
        }
        .finish()
        .await;
    }
}

/// What runs after the heart drained its turns, stopped in order: the
/// listening tasks (told to stop already), the agents, the outbox, the
/// relay connections, the metrics endpoint, the embedded relay.
#[derive(Debug)]
struct Stopping {
    listening: Vec<JoinHandle<()>>,
    pool: Pools,
    publisher: Arc<Publisher>,
    publisher_stop: CancellationToken,
    publishing: JoinHandle<()>,
    clients: [Client; 2],
    metrics_stop: CancellationToken,
    embedded: Option<EmbeddedRelay>,
}

impl Stopping {
    async fn finish(self) {
        for task in self.listening {
            let _ = task.await;
        }
        self.pool.shutdown().await;
        self.publisher_stop.cancel();
        let _ = self.publishing.await;
        if tokio::time::timeout(OUTBOX_FLUSH_TIMEOUT, self.publisher.flush()).await != Ok(true) {
            tracing::warn!("some replies are still unsent; they are published at the next start");
        }
        self.publisher.close().await;
        for client in self.clients {
            client.shutdown().await;
        }
        self.metrics_stop.cancel();
        if let Some(relay) = self.embedded {
            relay.shutdown();
        }
    }
}

/// What every turn needs from the other stages.
fn turn_services(
    settings: &Settings,
    pool: &Pools,
    replier: &Replier,
    store: &Arc<Store>,
    groups: &GroupDirectory,
    signer: &BotSigner,
) -> TurnServices {
    TurnServices {
        pool: pool.clone(),
        forgetting: crate::heart::Forgetting::new(
            pool.clone(),
            crate::state::store::ConversationRecords::new(Arc::clone(store)),
        ),
        profiles: crate::heart::profiles::ProfileBook::new(
            settings.agent_profiles.clone(),
            crate::state::store::ConversationProfiles::new(Arc::clone(store)),
        ),
        replier: replier.clone(),
        options: settings.turns.turn_options(settings.replies.max_reply_bytes),
        owner: settings.gate.owner.filter(|_| settings.turns.asks_owner()),
        outbox: Outbox::new(Arc::clone(store)),
        controls: Controls::new(Arc::clone(store)),
        sessions: Sessions::new(Arc::clone(store)),
        questions: Questions::new(Arc::clone(store)),
        approvals: crate::state::store::Approvals::new(Arc::clone(store)),
        budget: crate::policy::budget::Budget::new(
            &settings.budget,
            settings.gate.owner,
            crate::state::store::SpendBook::new(Arc::clone(store)),
        ),
        reply_content: settings.replies.content,
        context: None,
        gate: None,
        groups: groups.clone(),
        media: settings.media,
        files: crate::tools::upload::FileSender::new(
            settings.files.clone(),
            settings
                .agent
                .workspaces(&crate::state::store::AgentUids::new(Arc::clone(store))),
            signer.clone(),
            settings.media.private_addresses,
        ),
        media_cache: MediaCache::default(),
        takes_seen: Default::default(),
        work_summary: settings.replies.work_summary,
        progress: settings.replies.progress,
    }
}

/// The relays to listen on, starting the embedded one if configured.
async fn relay_urls(specs: &[RelaySpec]) -> Result<(Option<EmbeddedRelay>, Vec<RelayUrl>), DaemonError> {
    let mut embedded = None;
    let mut urls = Vec::new();
    for spec in specs {
        match spec {
            RelaySpec::Embedded => {
                let relay = EmbeddedRelay::start(None)
                    .await
                    .map_err(|error| DaemonError::EmbeddedRelay(error.to_string()))?;
                urls.push(relay.url().clone());
                embedded = Some(relay);
            }
            RelaySpec::Url(url) => urls.push(url.clone()),
        }
    }
    Ok((embedded, urls))
}

/// The bot's DM inbox relays (`--dm-relays`) that are not among its relays
/// `urls`, when it reads DMs: each gets a link of its own.
fn inbox_only_relays(settings: &Settings, urls: &[RelayUrl]) -> Vec<RelayUrl> {
    if !settings.intake.kinds.contains(&Kind::GiftWrap) {
        return Vec::new();
    }
    settings
        .relays
        .dm_inbox
        .iter()
        .filter(|url| !urls.contains(url))
        .cloned()
        .collect()
}

/// The signing client, with each relay added but not connected: the relay
/// links connect (and reconnect) them.
async fn relay_client(
    settings: &Settings,
    signer: &BotSigner,
    urls: &[RelayUrl],
    taps: &RelayTaps,
) -> Result<(Client, Vec<Relay>), DaemonError> {
    let client = Client::builder()
        .signer(signer.clone())
        .database(crate::edge::seen_ids::tracker())
        .websocket_transport(NoDelayTransport::tapped(taps.clone()))
        // Relays that ask for NIP-42 authentication get it: the SDK signs
        // their challenge through the bot's signer and sends the subscriptions
        // and events they refused `auth-required:` again (the SDK's
        // default, stated here because the relay links rely on it).
        .opts(
            ClientOptions::new()
                .autoconnect(false)
                .automatic_authentication(true),
        )
        .build();
    let mut relays = Vec::new();
    for url in urls {
        let relay_error = |error: &dyn std::fmt::Display| DaemonError::Relay {
            url: url.clone(),
            reason: error.to_string(),
        };
        client
            .pool()
            .add_relay(
                url.clone(),
                RelayOptions::new()
                    .reconnect(false)
                    .notification_channel_size(settings.relays.buffer),
            )
            .await
            .map_err(|error| relay_error(&error))?;
        relays.push(
            client
                .relay(url.clone())
                .await
                .map_err(|error| relay_error(&error))?,
        );
    }
    Ok((client, relays))
}

/// Says where the daemon stands, in the log and to systemd
/// (`Type=notify`): `ready` and READY=1 once the first relay has taken the
/// subscriptions (`listening`), unless shutdown began first; STOPPING=1
/// as shutdown begins. Ends then. A daemon told to stop is never reported
/// ready, so a service manager never waits on a start that is over.
async fn announce(listening: Vec<watch::Receiver<bool>>, stop: CancellationToken) {
    if any_relay(listening, &stop).await && !stop.is_cancelled() {
        tracing::info!("ready: subscribed to mentions");
        notify_systemd(&[NotifyState::Ready]);
    }
    stop.cancelled().await;
    notify_systemd(&[NotifyState::Stopping]);
}

/// Waits until the first of `relays` is true (true) or `stop` (false,
/// also when both came at once).
async fn any_relay(relays: Vec<watch::Receiver<bool>>, stop: &CancellationToken) -> bool {
    let waits = relays.into_iter().map(|mut up| {
        Box::pin(async move {
            let _ = up.wait_for(|up| *up).await;
        })
    });
    tokio::select! {
        biased;
        () = stop.cancelled() => false,
        _ = futures_util::future::select_all(waits) => true,
    }
}

/// Tells systemd (`Type=notify`) about readiness and stopping; a no-op
/// outside systemd (no `$NOTIFY_SOCKET`).
fn notify_systemd(states: &[NotifyState]) {
    if let Err(error) = sd_notify::notify(states) {
        tracing::debug!(%error, "sd_notify failed");
    }
}
