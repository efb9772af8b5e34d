//! Steer latency: from a mid-turn mention arriving at the bridge to the
//! steer reaching the agent, natively and through cancel + merge.
//!
//! The daemon runs in this process so that the arrival of each mention is
//! timestamped where it happens (the `acp_bridge::arrival` trace event);
//! the scripted agent stamps every frame it reads (`--frame-log-dir`). Both
//! use the wall clock of this machine. "Read by the agent" bounds "written
//! to its stdin" from above by the pipe hand-over, microseconds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_bridge::EmbeddedRelay;
use acp_bridge::Settings;
use nostr_sdk::prelude::*;
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

use crate::harness::{Owner, frames, percentiles};
use crate::paths::{bridge_binary, temp_dir};

/// Arrival times (unix ns) by event id, recorded from the daemon's trace.
#[derive(Clone, Default)]
pub struct Arrivals(Arc<Mutex<HashMap<String, u128>>>);

impl Arrivals {
    /// Installs the recorder as this process's tracing subscriber.
    pub fn install() -> Self {
        let arrivals = Arrivals::default();
        let filter = tracing_subscriber::filter::Targets::new()
            .with_target("acp_bridge::arrival", tracing::Level::TRACE);
        let subscriber = tracing_subscriber::registry().with(arrivals.clone().with_filter(filter));
        tracing::subscriber::set_global_default(subscriber).expect("the bench installs the only subscriber");
        arrivals
    }

    fn of(&self, event_id: &str) -> Option<u128> {
        self.0.lock().expect("arrivals").get(event_id).copied()
    }
}

impl<S: tracing::Subscriber> Layer<S> for Arrivals {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let at = crate::harness::unix_ns();
        let mut visitor = EventIdField::default();
        event.record(&mut visitor);
        if let Some(id) = visitor.0 {
            self.0.lock().expect("arrivals").insert(id, at);
        }
    }
}

#[derive(Default)]
struct EventIdField(Option<String>);

impl Visit for EventIdField {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "event_id" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

/// Which path a run measures.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SteerPath {
    /// goose's `_goose/unstable/session/steer`.
    Native,
    /// The cross-vendor `_session/steering` (claude-agent-acp, codex-acp).
    SessionSteering,
    /// Cancel + merge (an agent without native steer).
    Fallback,
}

/// Latencies (arrival → the steer, or the merged re-prompt, read by the agent).
pub async fn measure(
    arrivals: &Arrivals,
    path: SteerPath,
    samples: usize,
    spacing: Duration,
) -> Vec<Duration> {
    let relay = EmbeddedRelay::start(None).await.expect("relay");
    let owner_keys = Keys::generate();
    let bot = Keys::generate();
    let frame_dir = temp_dir("steer-frames");
    let mut agent_args: Vec<String> = [
        "scripted-agent",
        "--rounds",
        "1000000",
        "--round-delay-ms",
        "10",
        "--frame-log-dir",
    ]
    .map(str::to_owned)
    .to_vec();
    agent_args.push(frame_dir.display().to_string());
    match path {
        SteerPath::Native => {}
        SteerPath::SessionSteering => agent_args.push("--session-steering".to_owned()),
        SteerPath::Fallback => agent_args.push("--no-steer".to_owned()),
    }
    let mut settings = Settings::local(
        relay.url().clone(),
        bot.clone(),
        owner_keys.public_key(),
        temp_dir("steer-state"),
        (bridge_binary().display().to_string(), agent_args),
    );
    settings.replies.reactions = false;
    let stop = CancellationToken::new();
    let daemon = tokio::spawn(acp_bridge::run(settings, stop.clone()));
    let owner = Owner::connect(&relay, owner_keys, bot.public_key()).await;

    // A turn that runs for the whole measurement.
    let _ = owner.mention(&bot.public_key(), "bench", "a long task").await;
    wait_for_method(&frame_dir, "session/prompt", 1).await;
    let method = match path {
        SteerPath::Native => "_goose/unstable/session/steer",
        SteerPath::SessionSteering => "_session/steering",
        SteerPath::Fallback => "session/prompt",
    };
    let already = if path == SteerPath::Fallback { 1 } else { 0 };
    let mut sent = Vec::new();
    for n in 0..samples {
        let (id, _, _) = owner
            .mention(&bot.public_key(), "bench", &format!("addendum {n}"))
            .await;
        sent.push(id.to_hex());
        tokio::time::sleep(spacing).await;
    }
    wait_for_method(&frame_dir, method, already + samples).await;

    let mut latencies = Vec::new();
    for frame in frames(&frame_dir)
        .iter()
        .filter(|frame| frame["method"] == method)
    {
        let text = frame["params"]["prompt"][0]["text"].as_str().unwrap_or_default();
        let read_at = frame["receivedAtUnixNs"].as_u64().map(u128::from).unwrap_or(0);
        // A merged re-prompt quotes earlier mentions too: time the newest.
        let newest = sent.iter().rev().find(|id| text.contains(id.as_str()));
        if let Some(arrived) = newest.and_then(|id| arrivals.of(id)) {
            latencies.push(Duration::from_nanos(read_at.saturating_sub(arrived) as u64));
        }
    }
    stop.cancel();
    let _ = daemon.await;
    relay.shutdown();
    latencies
}

async fn wait_for_method(dir: &std::path::Path, method: &str, count: usize) {
    let deadline = tokio::time::Instant::now() + crate::harness::PATIENCE;
    while frames(dir)
        .iter()
        .filter(|frame| frame["method"] == method)
        .count()
        < count
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the agent never saw {count} × {method}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn summary(latencies: &mut [Duration]) -> String {
    let (p50, p99) = percentiles(latencies);
    format!(
        "p50 {} · p99 {} ({} samples)",
        crate::harness::ms(p50),
        crate::harness::ms(p99),
        latencies.len()
    )
}
