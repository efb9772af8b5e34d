//! The end-to-end harness: a real relay in the test process, the real
//! `acp-bridge` binary as a child process, the scripted agent (run through
//! the binary's hidden `scripted-agent` subcommand), and people with keys of
//! their own who mention the bot and read its replies.

#![allow(dead_code)] // each test file uses a different part of the harness

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use acp_bridge::EmbeddedRelay;
use nostr_sdk::prelude::*;

/// How long a test waits for something the daemon should do.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The daemon binary under test.
pub fn bridge_binary() -> &'static str {
    env!("CARGO_BIN_EXE_acp-bridge")
}

/// A fresh directory under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "acp-bridge-e2e-{name}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// A relay in the test process, restartable on the same port.
pub struct TestRelay {
    pub port: u16,
    relay: Option<EmbeddedRelay>,
}

impl TestRelay {
    pub async fn start() -> Self {
        Self::start_on(free_port()).await
    }

    pub async fn start_on(port: u16) -> Self {
        let relay = EmbeddedRelay::start(Some(port)).await.expect("relay starts");
        TestRelay {
            port,
            relay: Some(relay),
        }
    }

    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    /// Stops the relay (its events are gone: it keeps them in memory).
    pub fn stop(&mut self) {
        if let Some(relay) = self.relay.take() {
            relay.shutdown();
        }
    }

    /// Starts it again on the same port.
    pub async fn restart(&mut self) {
        self.stop();
        for _ in 0..50 {
            if let Ok(relay) = EmbeddedRelay::start(Some(self.port)).await {
                self.relay = Some(relay);
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("relay did not restart on port {}", self.port);
    }
}

/// Options of a bridge under test.
#[derive(Clone)]
pub struct BridgeSpec {
    pub relay_url: String,
    pub bot: Keys,
    pub owner: PublicKey,
    pub state_dir: PathBuf,
    /// Flags of the scripted agent.
    pub agent_flags: Vec<String>,
    /// Further daemon flags.
    pub flags: Vec<String>,
    /// Another agent than the built-in scripted one.
    pub agent_command: Option<String>,
}

impl BridgeSpec {
    pub fn new(relay_url: &str, owner: PublicKey) -> Self {
        BridgeSpec {
            relay_url: relay_url.to_owned(),
            bot: Keys::generate(),
            owner,
            state_dir: temp_dir("state"),
            agent_flags: vec![
                "--round-delay-ms".into(),
                "20".into(),
                "--rounds".into(),
                "2".into(),
            ],
            flags: Vec::new(),
            agent_command: None,
        }
    }

    pub fn agent(mut self, flags: &[&str]) -> Self {
        self.agent_flags = flags.iter().map(|flag| (*flag).to_owned()).collect();
        self
    }

    pub fn agent_command(mut self, command: &str) -> Self {
        self.agent_command = Some(command.to_owned());
        self
    }

    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.flags.extend(flags.iter().map(|flag| (*flag).to_owned()));
        self
    }
}

/// The daemon as a child process; killed when dropped.
pub struct Bridge {
    child: Child,
    pub log_path: PathBuf,
    pub spec: BridgeSpec,
}

impl Bridge {
    pub fn start(spec: &BridgeSpec) -> Self {
        Self::start_full(spec, &[], "info,acp_bridge=debug")
    }

    /// With `RUST_LOG` set to `filter`.
    pub fn start_with_log_filter(spec: &BridgeSpec, filter: &str) -> Self {
        Self::start_full(spec, &[], filter)
    }

    /// With extra variables in the daemon's environment.
    pub fn start_with_env(spec: &BridgeSpec, env: &[(&str, &str)]) -> Self {
        Self::start_full(spec, env, "info,acp_bridge=debug")
    }

    fn start_full(spec: &BridgeSpec, env: &[(&str, &str)], rust_log: &str) -> Self {
        let log_path = spec
            .state_dir
            .with_extension(format!("log-{}", COUNTER.fetch_add(1, Ordering::Relaxed)));
        let log = std::fs::File::create(&log_path).expect("log file");
        let mut agent_args = vec!["scripted-agent".to_owned()];
        agent_args.extend(spec.agent_flags.iter().cloned());
        let child = Command::new(bridge_binary())
            .arg("--relay")
            .arg(&spec.relay_url)
            .arg("--owner")
            .arg(spec.owner.to_hex())
            .arg("--state-dir")
            .arg(&spec.state_dir)
            .arg("--agent-command")
            .arg(spec.agent_command.as_deref().unwrap_or(bridge_binary()))
            .arg("--log-format")
            .arg("json")
            .args(&spec.flags)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("ACP_BRIDGE_SECRET_KEY", spec.bot.secret_key().to_secret_hex())
            .env("ACP_BRIDGE_AGENT_ARGS", agent_args.join(" "))
            .env("RUST_LOG", rust_log)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn acp-bridge");
        Bridge {
            child,
            log_path,
            spec: spec.clone(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Waits until the log has a line containing `needle`.
    pub async fn wait_for_log(&self, needle: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while tokio::time::Instant::now() < deadline {
            if self.log().contains(needle) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "no log line with `{needle}` within {PATIENCE:?}; log:\n{}",
            self.log()
        );
    }

    /// Waits for readiness (subscribed to mentions).
    pub async fn ready(self) -> Self {
        self.wait_for_log("ready: subscribed to mentions").await;
        self
    }

    /// SIGTERM, then the exit status (within `within`).
    pub async fn terminate(mut self, within: Duration) -> ExitStatus {
        signal(self.child.id(), libc_sigterm());
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "acp-bridge did not exit within {within:?} of SIGTERM; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL, no grace.
    pub fn kill_hard(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn libc_sigterm() -> &'static str {
    "-TERM"
}

fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(signal)
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(status.success());
}

/// Someone with a key, connected to the relay.
pub struct Person {
    pub keys: Keys,
    pub client: Client,
}

impl Person {
    pub async fn join(relay_url: &str) -> Self {
        Self::join_as(Keys::generate(), relay_url).await
    }

    pub async fn join_as(keys: Keys, relay_url: &str) -> Self {
        let client = Client::builder().signer(keys.clone()).build();
        client.add_relay(relay_url).await.expect("add relay");
        client.connect().await;
        client.wait_for_connection(Duration::from_secs(5)).await;
        Person { keys, client }
    }

    pub fn public_key(&self) -> PublicKey {
        self.keys.public_key()
    }

    /// Publishes a signed event built from `builder`.
    pub async fn publish(&self, builder: EventBuilder) -> Event {
        let event = builder.sign_with_keys(&self.keys).expect("sign");
        self.send(&event).await;
        event
    }

    pub async fn send(&self, event: &Event) {
        let output = self.client.send_event(event).await.expect("send");
        assert!(
            !output.success.is_empty(),
            "relay refused the event: {:?}",
            output.failed
        );
    }

    /// A top-level group-chat (kind 9) mention of `bot` in `channel`.
    pub async fn mention_in_group(&self, bot: &PublicKey, channel: &str, text: &str) -> Event {
        self.publish(group_message(bot, channel, text, &[])).await
    }

    /// A kind-1 note mentioning `bot`.
    pub async fn mention_in_note(&self, bot: &PublicKey, text: &str) -> Event {
        self.publish(EventBuilder::text_note(text).tag(Tag::public_key(*bot)))
            .await
    }

    /// A NIP-17 DM to `bot`.
    pub async fn dm(&self, bot: &PublicKey, text: &str) {
        let wrap = EventBuilder::private_msg(&self.keys, *bot, text, [])
            .await
            .expect("gift wrap");
        self.send(&wrap).await;
    }

    /// Events by `author` that reference `event_id` in an `e` tag, waiting
    /// until `count` have arrived.
    pub async fn replies_from(&self, author: &PublicKey, event_id: &EventId, count: usize) -> Vec<Event> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let found = self.events_referencing(author, event_id).await;
            if found.len() >= count {
                return found;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "expected {count} event(s) from {author} referencing {event_id}, found {}",
                found.len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Events by `author` referencing `event_id`, as stored on the relay now.
    pub async fn events_referencing(&self, author: &PublicKey, event_id: &EventId) -> Vec<Event> {
        let filter = Filter::new().author(*author).event(*event_id);
        let mut events: Vec<Event> = self
            .client
            .fetch_events(filter, Duration::from_secs(5))
            .await
            .expect("fetch")
            .into_iter()
            .filter(|event| event.kind != Kind::Reaction)
            .collect();
        events.sort_by_key(|event| event.created_at);
        events
    }

    /// NIP-17 messages to this person from `sender`, unwrapped.
    pub async fn direct_messages_from(&self, sender: &PublicKey, count: usize) -> Vec<UnsignedEvent> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let filter = Filter::new().kind(Kind::GiftWrap).pubkey(self.public_key());
            let wraps = self
                .client
                .fetch_events(filter, Duration::from_secs(5))
                .await
                .expect("fetch");
            let mut messages = Vec::new();
            for wrap in wraps.iter() {
                if let Ok(gift) = UnwrappedGift::from_gift_wrap(&self.keys, wrap).await
                    && gift.sender == *sender
                {
                    messages.push(gift.rumor);
                }
            }
            if messages.len() >= count {
                return messages;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "expected {count} DM(s), found {}",
                messages.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A kind-9 message in `channel` mentioning `bot`, with extra tags.
pub fn group_message(bot: &PublicKey, channel: &str, text: &str, extra: &[Tag]) -> EventBuilder {
    EventBuilder::new(Kind::Custom(9), text)
        .tag(Tag::custom(TagKind::h(), [channel.to_owned()]))
        .tag(Tag::public_key(*bot))
        .tags(extra.iter().cloned())
}

/// The `e` tags of `event` as (id, marker).
pub fn e_tags(event: &Event) -> BTreeSet<(String, String)> {
    event
        .tags
        .iter()
        .filter(|tag| tag.kind() == TagKind::e())
        .map(|tag| {
            let fields = tag.as_slice();
            (
                fields.get(1).cloned().unwrap_or_default(),
                fields.get(3).cloned().unwrap_or_default(),
            )
        })
        .collect()
}

/// Whether `event` p-tags `key`.
pub fn p_tags(event: &Event, key: &PublicKey) -> bool {
    event
        .tags
        .iter()
        .any(|tag| tag.kind() == TagKind::p() && tag.content() == Some(key.to_hex().as_str()))
}

/// Lines of the JSON log whose fields match.
pub fn log_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

pub fn file_exists(path: &Path) -> bool {
    path.exists()
}

impl Bridge {
    /// Waits for the daemon's log to show `event_id` dropped for `reason`.
    pub async fn wait_for_drop(&self, event_id: &EventId, reason: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let id = event_id.to_hex();
        loop {
            let dropped = log_lines(&self.log()).iter().any(|line| {
                line["message"] == "event dropped"
                    && line["event_id"] == id.as_str()
                    && line["reason"] == reason
            });
            if dropped {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "event {id} was not dropped for `{reason}`; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Log lines with `message` equal to `text`.
    pub fn log_events(&self, text: &str) -> Vec<serde_json::Value> {
        log_lines(&self.log())
            .into_iter()
            .filter(|line| line["message"] == text)
            .collect()
    }
}

/// A TCP forwarder between the daemon and a relay that a test can cut, to
/// take the daemon off the relay while everyone else stays on it.
pub struct Proxy {
    pub port: u16,
    target: u16,
    stop: tokio_util::sync::CancellationToken,
}

impl Proxy {
    pub async fn start(target: u16) -> Self {
        let mut proxy = Proxy {
            port: free_port(),
            target,
            stop: tokio_util::sync::CancellationToken::new(),
        };
        proxy.open().await;
        proxy
    }

    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    /// Drops every forwarded connection and refuses new ones.
    pub fn cut(&mut self) {
        self.stop.cancel();
    }

    /// Accepts and forwards again.
    pub async fn restore(&mut self) {
        self.open().await;
    }

    async fn open(&mut self) {
        self.stop = tokio_util::sync::CancellationToken::new();
        let listener = loop {
            match tokio::net::TcpListener::bind(("127.0.0.1", self.port)).await {
                Ok(listener) => break listener,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        let (stop, target) = (self.stop.clone(), self.target);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((mut inbound, _)) = accepted else { continue };
                let stop = stop.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else {
                        return;
                    };
                    tokio::select! {
                        () = stop.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                });
            }
        });
    }
}

impl Bridge {
    /// Process ids of the agents the daemon runs right now.
    pub fn agent_pids(&self) -> Vec<u32> {
        let output = Command::new("pgrep")
            .arg("-P")
            .arg(self.pid().to_string())
            .output()
            .expect("pgrep");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }

    /// Waits until the daemon runs at least one agent; returns their pids.
    pub async fn wait_for_agents(&self) -> Vec<u32> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let pids = self.agent_pids();
            if !pids.is_empty() {
                return pids;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no agent process appeared"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Methods the agents received (from `--frame-log-dir` files), in order per process.
pub fn agent_methods(frame_log_dir: &Path) -> Vec<String> {
    let mut methods = Vec::new();
    let Ok(entries) = std::fs::read_dir(frame_log_dir) else {
        return methods;
    };
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines() {
            if let Ok(frame) = serde_json::from_str::<serde_json::Value>(line)
                && let Some(method) = frame.get("method").and_then(|method| method.as_str())
            {
                methods.push(method.to_owned());
            }
        }
    }
    methods
}

/// Events by `author` that quote (`q`) or reference (`e`) `event_id`.
pub async fn answers_to(person: &Person, author: &PublicKey, event_id: &EventId) -> Vec<Event> {
    let quoted = Filter::new()
        .author(*author)
        .custom_tag(SingleLetterTag::lowercase(Alphabet::Q), event_id.to_hex());
    let mut events: Vec<Event> = person
        .client
        .fetch_events(quoted, Duration::from_secs(5))
        .await
        .expect("fetch")
        .into_iter()
        .collect();
    events.extend(person.events_referencing(author, event_id).await);
    events.sort_by_key(|event| event.id);
    events.dedup_by_key(|event| event.id);
    events
}

impl Person {
    /// A kind-9 reply in `channel` to `parent` (thread `root`), p-tagging `bot`.
    pub async fn reply_in_group(
        &self,
        bot: &PublicKey,
        channel: &str,
        root: &EventId,
        parent: &EventId,
        text: &str,
    ) -> Event {
        let thread = [
            Tag::parse(["e", &root.to_hex(), "", "root"]).expect("tag"),
            Tag::parse(["e", &parent.to_hex(), "", "reply"]).expect("tag"),
        ];
        self.publish(group_message(bot, channel, text, &thread)).await
    }

    /// Waits for an event by `author` referencing `event_id` whose content
    /// contains `needle`.
    pub async fn reply_containing(&self, author: &PublicKey, event_id: &EventId, needle: &str) -> Event {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(found) = self
                .events_referencing(author, event_id)
                .await
                .into_iter()
                .find(|event| event.content.contains(needle))
            {
                return found;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no event from {author} referencing {event_id} containing `{needle}`"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
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

/// Counts, per mention, the bot's answers (replies or notices, by `e` or
/// `q` reference). Waits until every mention has one (or PATIENCE ends),
/// then a little longer to catch duplicates; prints the tally under `label`.
pub async fn tally(label: &str, person: &Person, bot: &PublicKey, mentions: &[EventId]) -> Tally {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let answers = answer_counts(person, bot, mentions).await;
        if answers.iter().all(|count| *count > 0) || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut tally = Tally {
        accepted: mentions.len(),
        ..Tally::default()
    };
    for count in answer_counts(person, bot, mentions).await {
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

/// For each mention, how many of the bot's events (reactions aside) refer
/// to it by an `e` or `q` tag; one fetch of everything the bot published.
async fn answer_counts(person: &Person, bot: &PublicKey, mentions: &[EventId]) -> Vec<usize> {
    let published = person
        .client
        .fetch_events(Filter::new().author(*bot).limit(50_000), Duration::from_secs(10))
        .await
        .expect("fetch");
    let mut counts: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for event in published.iter().filter(|event| event.kind != Kind::Reaction) {
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

/// Asserts nothing was lost and nothing answered twice.
pub fn assert_exactly_once(tally: Tally) {
    assert_eq!(tally.lost, 0, "{tally}");
    assert_eq!(tally.answered_twice, 0, "{tally}");
    assert_eq!(tally.answered, tally.accepted, "{tally}");
}

impl Bridge {
    /// Whether the daemon process is still running.
    pub fn child_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// A plain HTTP/1.1 GET, returning the whole response.
pub async fn http_get(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response))
        .await
        .expect("response in time")
        .expect("read");
    response
}

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}
