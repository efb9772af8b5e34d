//! The one end-to-end fixture: a relay, the owner on it, and the daemon
//! (with its bot key) subscribed to it, in the variations the tests need.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use futures_util::future::join_all;
use nostr_sdk::prelude::*;

use super::bridge::{Bridge, BridgeSpec};
use super::log::Line;
use super::people::{Person, channel_of};
use super::relay::{Proxy, RelayServer, TestRelay};
use super::{PATIENCE, eventually, owned, temp_dir};

/// How a test wants its scene. Everything is optional: by default the
/// owner-only daemon runs the quick scripted agent on one embedded relay.
#[derive(Debug, Default)]
pub struct SceneBuilder {
    agent_flags: Option<Vec<String>>,
    flags: Vec<String>,
    agent_command: Option<String>,
    env: Vec<(String, String)>,
    log_filter: Option<String>,
    frame_log: bool,
    metrics: bool,
    proxy: bool,
    mirror: bool,
}

impl SceneBuilder {
    /// The scripted agent's flags (instead of the quick default).
    pub fn agent(mut self, flags: &[&str]) -> Self {
        self.agent_flags = Some(owned(flags));
        self
    }

    /// Further daemon flags.
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.flags.extend(owned(flags));
        self
    }

    /// Another agent program than the built-in scripted one.
    pub fn agent_command(mut self, command: &str) -> Self {
        self.agent_command = Some(command.to_owned());
        self
    }

    /// Extra variables in the daemon's environment.
    pub fn env(mut self, vars: &[(&str, &str)]) -> Self {
        self.env.extend(
            vars.iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned())),
        );
        self
    }

    /// The daemon's `RUST_LOG` (debug for the bridge by default).
    pub fn log_filter(mut self, filter: &str) -> Self {
        self.log_filter = Some(filter.to_owned());
        self
    }

    /// The scripted agent logs the frames it receives (see
    /// [`Scene::agent_methods`]).
    pub fn frame_log(mut self) -> Self {
        self.frame_log = true;
        self
    }

    /// Serves /metrics and /healthz on a free port (see
    /// [`Scene::metrics_port`]).
    pub fn metrics(mut self) -> Self {
        self.metrics = true;
        self
    }

    /// The daemon reaches the relay through a [`Proxy`] the test can cut,
    /// while the people stay connected.
    pub fn through_proxy(mut self) -> Self {
        self.proxy = true;
        self
    }

    /// A second relay that the owner and the daemon use too, so that each
    /// of the owner's events reaches the daemon twice.
    pub fn mirrored(mut self) -> Self {
        self.mirror = true;
        self
    }

    /// Relay, owner and a ready daemon.
    pub async fn start(self) -> Scene {
        self.stage().await.start().await
    }

    /// The same on a relay the test brings.
    pub async fn start_on<R: RelayServer>(self, relay: R) -> Scene<R> {
        self.stage_on(relay).await.start().await
    }

    /// Relay and owner, the daemon not started yet: for what must happen
    /// before it starts.
    pub async fn stage(self) -> Stage {
        self.stage_on(TestRelay::start().await).await
    }

    pub async fn stage_on<R: RelayServer>(self, relay: R) -> Stage<R> {
        let mirror = match self.mirror {
            true => Some(TestRelay::start().await),
            false => None,
        };
        let proxy = match self.proxy {
            true => Some(Proxy::start(relay.port()).await),
            false => None,
        };
        let owner = Person::join(&relay.url()).await;
        if let Some(mirror) = &mirror {
            owner.client.add_relay(mirror.url()).await.expect("add relay");
            owner.client.connect().await;
            owner.client.wait_for_connection(Duration::from_secs(5)).await;
        }
        let mut relays = vec![proxy.as_ref().map_or_else(|| relay.url(), Proxy::url)];
        relays.extend(mirror.as_ref().map(RelayServer::url));
        let mut spec = BridgeSpec::new(&relays.join(","), owner.public_key());
        if let Some(flags) = self.agent_flags {
            spec.agent_flags = flags;
        }
        spec.flags = self.flags;
        spec.agent_command = self.agent_command;
        spec.env = self.env;
        if let Some(filter) = self.log_filter {
            spec.log_filter = filter;
        }
        spec.frame_log_dir = self.frame_log.then(|| temp_dir("frames"));
        if self.metrics {
            // Port 0: the daemon binds one the kernel picks and logs it (a
            // port picked here and bound there can be taken in between).
            spec.flags.push("--metrics-addr".to_owned());
            spec.flags.push("127.0.0.1:0".to_owned());
        }
        Stage {
            relay,
            owner,
            bot: spec.bot.public_key(),
            spec,
            extras: Extras {
                proxy,
                mirror,
                metrics: self.metrics,
            },
        }
    }
}

/// A scene before its daemon starts.
#[derive(Debug)]
pub struct Stage<R = TestRelay> {
    pub relay: R,
    pub owner: Person,
    pub bot: PublicKey,
    /// The daemon it is going to start.
    pub spec: BridgeSpec,
    extras: Extras,
}

/// What a scene keeps beyond its main actors.
#[derive(Debug)]
struct Extras {
    proxy: Option<Proxy>,
    /// Kept running for the scene's life.
    mirror: Option<TestRelay>,
    metrics: bool,
}

impl<R: RelayServer> Stage<R> {
    /// Someone else on the relay.
    pub async fn join(&self) -> Person {
        Person::join(&self.relay.url()).await
    }

    /// Starts the daemon and waits until it is ready.
    pub async fn start(self) -> Scene<R> {
        let scene = self.launch();
        scene.bridge.ready().await;
        scene
    }

    /// Starts the daemon without waiting for it to be ready.
    pub fn launch(self) -> Scene<R> {
        Scene {
            bridge: Bridge::start(&self.spec),
            relay: self.relay,
            owner: self.owner,
            bot: self.bot,
            extras: self.extras,
        }
    }
}

/// A relay, the owner on it, and the daemon with its bot key.
#[derive(Debug)]
pub struct Scene<R = TestRelay> {
    pub relay: R,
    pub owner: Person,
    pub bot: PublicKey,
    pub bridge: Bridge,
    extras: Extras,
}

impl Scene {
    pub fn builder() -> SceneBuilder {
        SceneBuilder::default()
    }
}

impl<R: RelayServer> Scene<R> {
    /// Someone else on the relay.
    pub async fn join(&self) -> Person {
        Person::join(&self.relay.url()).await
    }

    /// Connects the owner afresh, as after a relay restart: a client's own
    /// reconnection backs off for seconds, and the daemon is under test,
    /// not the owner's client.
    pub async fn reconnect_owner(&mut self) {
        self.owner = Person::join_as(self.owner.keys.clone(), &self.relay.url()).await;
    }

    /// The running daemon's options, to restart it with changes.
    pub fn spec(&self) -> BridgeSpec {
        self.bridge.spec.clone()
    }

    /// Starts a daemon on `spec` (the same state dir and key for a
    /// restart) in place of the current one, which must have exited.
    pub async fn restart(&mut self, spec: BridgeSpec) {
        assert!(
            !self.bridge.alive(),
            "stop the running daemon before starting another"
        );
        self.bot = spec.bot.public_key();
        self.bridge = Bridge::start(&spec);
        self.bridge.ready().await;
    }

    /// The proxy between the daemon and the relay.
    pub fn proxy(&mut self) -> &mut Proxy {
        self.extras
            .proxy
            .as_mut()
            .expect("a scene built .through_proxy()")
    }

    /// Cuts the proxy and waits until the daemon has noticed that it is off
    /// the relay (the people stay on it).
    pub async fn cut_proxy(&mut self) {
        let mark = self.bridge.log.cursor();
        self.proxy().cut();
        let lost = Line::new("relay connection lost");
        self.bridge.log.wait(mark, lost).await;
    }

    /// The second relay of a scene built `.mirrored()`.
    pub fn mirror_url(&self) -> String {
        let mirror = self.extras.mirror.as_ref();
        mirror.expect("a scene built .mirrored()").url()
    }

    /// The port the running daemon serves /metrics and /healthz on, from
    /// its start-up log line.
    pub fn metrics_port(&self) -> u16 {
        assert!(self.extras.metrics, "a scene built .metrics()");
        let log = &self.bridge.log;
        let serving = log.matching(log.start(), Line::new("serving /metrics and /healthz"));
        let addr = serving
            .last()
            .and_then(|line| line["addr"].as_str())
            .expect("the daemon logged its metrics address");
        addr.parse::<std::net::SocketAddr>()
            .expect("a socket address")
            .port()
    }

    /// Methods the agents received, in order per agent process.
    pub fn agent_methods(&self) -> Vec<String> {
        let frames = self.agent_frames();
        let methods = frames.iter().filter_map(|frame| frame.get("method")?.as_str());
        methods.map(str::to_owned).collect()
    }

    /// Every frame the agents received (requests, notifications, and the
    /// bridge's answers to the agents' own requests), in order per process.
    pub fn agent_frames(&self) -> Vec<serde_json::Value> {
        let dir = self.bridge.spec.frame_log_dir.as_deref();
        agent_frames(dir.expect("a scene built .frame_log()"))
    }

    /// The method and the bridge's MCP bearer token (`Authorization`) of
    /// each `session/new`, `/load` and `/resume` the agents received, in
    /// order per process.
    pub fn offered_mcp_tokens(&self) -> Vec<(String, String)> {
        self.agent_frames()
            .iter()
            .filter(|frame| {
                matches!(
                    frame["method"].as_str(),
                    Some("session/new" | "session/load" | "session/resume")
                )
            })
            .map(|frame| {
                let value = &frame["params"]["mcpServers"][0]["headers"][0]["value"];
                (
                    frame["method"].as_str().unwrap_or_default().to_owned(),
                    value.as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// The owner mentions the bot in the group `channel`.
    pub async fn mention(&self, channel: &str, text: &str) -> Event {
        self.owner.mention_in_group(&self.bot, channel, text).await
    }

    /// Waits for the bot's first threaded answer (reply or notice) to
    /// `mention`.
    /// The owner's `!cancel` in `channel`, answered, then the notice that
    /// ends the cancelled `work`, checked to say so.
    pub async fn cancel_by_owner(&self, channel: &str, work: &Event) -> Event {
        let cancel = self.mention(channel, "!cancel").await;
        self.reply_to(&cancel).await;
        let notice = self.reply_to(work).await;
        assert!(
            notice.content.contains("Cancelled by the owner"),
            "{}",
            notice.content
        );
        notice
    }

    pub async fn reply_to(&self, mention: &Event) -> Event {
        let probe = async || {
            let answers = self.owner.events_referencing(&self.bot, &mention.id).await;
            answers.into_iter().next()
        };
        let describe = || {
            format!(
                "the bot's answer to {}; log tail:\n{}",
                mention.id,
                self.bridge.log.tail(40)
            )
        };
        eventually(PATIENCE, probe, describe).await
    }

    /// The owner mentions the bot in `channel`, and the agent starts a run
    /// for it: from here on, the mention is mid-turn.
    pub async fn mention_mid_turn(&self, channel: &str, text: &str) -> Event {
        let mark = self.bridge.log.cursor();
        let mention = self.mention(channel, text).await;
        let run = Line::new("agent run started").in_turn(&mention.id);
        self.bridge.log.wait(mark, run).await;
        mention
    }

    /// Proves the daemon is done with everything sent to `channel` so far:
    /// turns of a conversation run one at a time, so once a later mention
    /// there is answered, anything still due for the earlier ones (a retry,
    /// a replay, a resume) was answered before it or with it. Returns the
    /// later mention.
    pub async fn settle(&self, channel: &str) -> Event {
        let mention = self.mention(channel, "settle [rounds=1]").await;
        self.reply_to(&mention).await;
        mention
    }

    /// Counts, per mention, the bot's answers (replies or notices, by `e`
    /// or `q` reference) once each is answered and every conversation
    /// involved is settled; prints the tally under `label`.
    pub async fn tally(&self, label: &str, mentions: &[Event]) -> Tally {
        let ids: Vec<EventId> = mentions.iter().map(|mention| mention.id).collect();
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut counts = self.answer_counts(&ids).await;
        while counts.contains(&0) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(300)).await;
            counts = self.answer_counts(&ids).await;
        }
        // A lost mention fails the tally anyway; settling would only wait.
        if !counts.contains(&0) {
            let channels: BTreeSet<&str> = mentions.iter().filter_map(channel_of).collect();
            join_all(channels.into_iter().map(|channel| self.settle(channel))).await;
            counts = self.answer_counts(&ids).await;
        }
        let mut tally = Tally {
            accepted: mentions.len(),
            ..Tally::default()
        };
        for count in counts {
            match count {
                0 => tally.lost += 1,
                1 => tally.answered += 1,
                _ => {
                    tally.answered += 1;
                    tally.answered_twice += 1;
                }
            }
        }
        println!("{label}: {tally}");
        tally
    }

    /// For each mention, how many of the bot's events (reactions aside)
    /// refer to it by an `e` or `q` tag; one fetch of everything the bot
    /// published.
    async fn answer_counts(&self, mentions: &[EventId]) -> Vec<usize> {
        let published = self
            .owner
            .client
            .fetch_events(
                Filter::new().author(self.bot).limit(50_000),
                Duration::from_secs(10),
            )
            .await
            .expect("fetch");
        let mut counts: HashMap<String, usize> = HashMap::new();
        // A reply sent as a numbered series counts once, by its first part.
        let answers = published
            .iter()
            .filter(|event| event.kind != Kind::Reaction && !continues_a_series(event));
        for event in answers {
            let referenced: BTreeSet<String> = event
                .tags
                .iter()
                .filter(|tag| tag.kind() == TagKind::e() || tag.kind() == TagKind::q())
                .filter_map(|tag| tag.content().map(str::to_owned))
                .collect();
            for id in referenced {
                *counts.entry(id).or_default() += 1;
            }
        }
        mentions
            .iter()
            .map(|mention| counts.get(&mention.to_hex()).copied().unwrap_or(0))
            .collect()
    }
}

/// A part after the first of a reply sent as a numbered series: its
/// content starts `(k/n) ` with 1 < k <= n.
fn continues_a_series(event: &Event) -> bool {
    let label = event
        .content
        .strip_prefix('(')
        .and_then(|rest| rest.split_once(") "))
        .and_then(|(numbers, _)| numbers.split_once('/'));
    match label.map(|(k, n)| (k.parse::<usize>(), n.parse::<usize>())) {
        Some((Ok(k), Ok(n))) => 1 < k && k <= n,
        _ => false,
    }
}

/// Frames the agents received (from `--frame-log-dir` files), in order per process.
fn agent_frames(frame_log_dir: &Path) -> Vec<serde_json::Value> {
    let mut frames = Vec::new();
    let Ok(entries) = std::fs::read_dir(frame_log_dir) else {
        return frames;
    };
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        frames.extend(text.lines().filter_map(|line| serde_json::from_str(line).ok()));
    }
    frames
}

/// How a set of accepted mentions ended, as the people see it on the relay.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub accepted: usize,
    pub answered: usize,
    pub answered_twice: usize,
    pub lost: usize,
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "accepted {} · answered {} · answered twice {} · lost {}",
            self.accepted, self.answered, self.answered_twice, self.lost
        )
    }
}

/// Asserts nothing was lost and nothing answered twice.
pub fn assert_exactly_once(tally: Tally) {
    assert_eq!(tally.lost, 0, "{tally}");
    assert_eq!(tally.answered_twice, 0, "{tally}");
    assert_eq!(tally.answered, tally.accepted, "{tally}");
}
