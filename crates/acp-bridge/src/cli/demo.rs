//! `acp-bridge demo`: the whole path on embedded defaults, narrated.
//!
//! Starts the embedded relay, a bridge with a generated bot key and owner
//! key, the built-in scripted agent, and a simulated owner who mentions the
//! bot and then mentions it again while the agent works. The daemon's own
//! log events are narrated as the conversation happens (mention, accepted,
//! steered, reply); the demo exits 0 only when the second mention was folded
//! into the live turn and one reply answered both. No API key, no network.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use nostr_sdk::prelude::{
    Client, EventBuilder, Filter, JsonUtil, Keys, Kind, RelayPoolNotification, Tag, TagKind, Timestamp,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::Settings;
use crate::embedded_relay::EmbeddedRelay;

/// The whole demo must finish within this.
const DEMO_TIMEOUT: Duration = Duration::from_secs(60);
/// The scripted agent's pace: slow enough to steer into, quick to watch.
const AGENT_ROUNDS: &str = "4";
const AGENT_ROUND_DELAY_MS: &str = "600";
const FIRST_MENTION: &str = "Please draft the release notes for v1.2.";
const SECOND_MENTION: &str = "Also mention the fixed crash on start-up.";

/// Runs the demo; the exit status says whether the steer folded in.
pub async fn run() -> Result<(), String> {
    let (narration_tx, mut narration) = mpsc::unbounded_channel();
    let subscriber = tracing_subscriber::registry().with(
        Narrator { events: narration_tx }
            .with_filter(EnvFilter::new("acp_bridge=debug,acp_client=off,nostr=off")),
    );
    // Global: the daemon's tasks run on every worker thread.
    tracing::subscriber::set_global_default(subscriber).map_err(|error| format!("logging: {error}"))?;

    let relay = EmbeddedRelay::start(None)
        .await
        .map_err(|error| format!("embedded relay: {error}"))?;
    let bot = Keys::generate();
    let owner = Keys::generate();
    let state_dir = std::env::temp_dir().join(format!("acp-bridge-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state_dir);
    println!("acp-bridge demo");
    println!("  relay  {} (embedded, in-process)", relay.url());
    println!("  bot    {}", crate::mention::short_npub(&bot.public_key()));
    println!("  owner  {}", crate::mention::short_npub(&owner.public_key()));
    println!("  agent  scripted agent (built in), native steer on\n");

    let settings = demo_settings(&relay, &bot, &owner, &state_dir)?;
    let stop = CancellationToken::new();
    let daemon = tokio::spawn(crate::daemon::run(settings, stop.clone()));

    let outcome = tokio::time::timeout(DEMO_TIMEOUT, converse(&relay, &bot, &owner, &mut narration)).await;
    stop.cancel();
    let _ = daemon.await;
    relay.shutdown();
    let _ = std::fs::remove_dir_all(&state_dir);
    match outcome {
        Ok(result) => result,
        Err(_) => Err(format!("the demo did not finish within {DEMO_TIMEOUT:?}")),
    }
}

/// The demo's configuration: built directly rather than from flags, so an
/// operator's `ACP_BRIDGE_*` environment (a container's key file and state
/// dir, say) cannot change it.
fn demo_settings(
    relay: &EmbeddedRelay,
    bot: &Keys,
    owner: &Keys,
    state_dir: &std::path::Path,
) -> Result<Settings, String> {
    let program = std::env::current_exe().map_err(|error| format!("cannot find this program: {error}"))?;
    let args = [
        "scripted-agent",
        "--rounds",
        AGENT_ROUNDS,
        "--round-delay-ms",
        AGENT_ROUND_DELAY_MS,
    ];
    let mut settings = Settings::local(
        relay.url().clone(),
        bot.clone(),
        owner.public_key(),
        state_dir.to_path_buf(),
        (program.display().to_string(), args.map(str::to_owned).to_vec()),
    );
    settings.agent.idle_timeout = DEMO_TIMEOUT;
    settings.agent.max_turn_duration = DEMO_TIMEOUT;
    Ok(settings)
}

/// The simulated owner's side: two mentions, then the reply.
async fn converse(
    relay: &EmbeddedRelay,
    bot: &Keys,
    owner: &Keys,
    narration: &mut mpsc::UnboundedReceiver<Narration>,
) -> Result<(), String> {
    wait_for(narration, "ready: subscribed to mentions").await;
    let client = Client::builder().signer(owner.clone()).build();
    client
        .add_relay(relay.url().clone())
        .await
        .map_err(|error| error.to_string())?;
    client.connect().await;
    client.wait_for_connection(Duration::from_secs(5)).await;
    let replies = Filter::new()
        .author(bot.public_key())
        .kind(Kind::Custom(9))
        .since(Timestamp::now());
    client
        .subscribe(replies, None)
        .await
        .map_err(|error| error.to_string())?;
    let mut incoming = client.notifications();

    say(&client, owner, bot, FIRST_MENTION).await?;
    wait_for(narration, "agent run started").await;
    say(&client, owner, bot, SECOND_MENTION).await?;
    let turn = wait_for(narration, "turn finished").await;

    let reply = loop {
        match incoming.recv().await {
            Ok(RelayPoolNotification::Event { event, .. }) if event.kind == Kind::Custom(9) => break event,
            Ok(_) => {}
            Err(error) => return Err(format!("lost the relay: {error}")),
        }
    };
    println!("bot    → reply ({} bytes):", reply.content.len());
    for line in reply.content.lines() {
        println!("         │ {line}");
    }
    client.shutdown().await;

    let folded = reply.content.contains(&format!("> {SECOND_MENTION}")) && reply.content.contains("steer: ");
    let native = turn.get("steer_path").map(String::as_str) == Some("native");
    let same_turn = turn.get("stop_reason").map(String::as_str) == Some("end_turn");
    if folded && native && same_turn {
        println!("\ndemo ok: the second mention was steered into the live turn, which ended end_turn");
        println!("         and answered both mentions in one reply (no cancel, no second turn).");
        Ok(())
    } else {
        Err(format!(
            "the steer did not fold into the live turn (folded: {folded}, native: {native}, end_turn: {same_turn}); raw reply: {}",
            reply.as_json()
        ))
    }
}

async fn say(client: &Client, owner: &Keys, bot: &Keys, text: &str) -> Result<(), String> {
    println!("owner  → @bot: \"{text}\"");
    let event = EventBuilder::new(Kind::Custom(9), text)
        .tag(Tag::custom(TagKind::h(), ["demo".to_owned()]))
        .tag(Tag::public_key(bot.public_key()))
        .sign_with_keys(owner)
        .map_err(|error| error.to_string())?;
    client
        .send_event(&event)
        .await
        .map_err(|error| error.to_string())?;
    Ok(())
}

/// Prints narration until the event `message` appears; returns its fields.
async fn wait_for(
    narration: &mut mpsc::UnboundedReceiver<Narration>,
    message: &str,
) -> BTreeMap<String, String> {
    while let Some(event) = narration.recv().await {
        if let Some(line) = narrate(&event) {
            println!("{line}");
        }
        if event.message == message {
            return event.fields;
        }
    }
    BTreeMap::new()
}

/// A friendly line for the daemon's events worth showing.
fn narrate(event: &Narration) -> Option<String> {
    let field = |name: &str| event.fields.get(name).cloned().unwrap_or_default();
    Some(match event.message.as_str() {
        "mention accepted" => format!("bridge ✓ mention accepted from {} (reacted 👀)", field("author")),
        "prompting the agent" => format!(
            "bridge → prompting the agent ({} mention(s) in the prompt)",
            field("mentions")
        ),
        "agent run started" => format!("agent  … working (run {})", field("run_id")),
        "steered into the live turn" => {
            format!(
                "bridge ↪ steered into the live turn (native steer, message {})",
                field("message_id")
            )
        }
        "native steer not possible; falling back to cancel + merge" => {
            "bridge ↪ native steer refused: cancel + merge".to_owned()
        }
        "turn finished" => format!(
            "bridge ✓ turn finished: outcome {}, stop reason {}, steer path {}, agent time {} ms",
            field("outcome"),
            field("stop_reason"),
            field("steer_path"),
            field("agent_ms")
        ),
        _ => return None,
    })
}

/// One event of the daemon's log.
#[derive(Debug)]
struct Narration {
    message: String,
    fields: BTreeMap<String, String>,
}

/// A tracing layer that forwards the daemon's events to the demo.
struct Narrator {
    events: mpsc::UnboundedSender<Narration>,
}

impl<S: tracing::Subscriber> Layer<S> for Narrator {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut visitor = FieldText::default();
        event.record(&mut visitor);
        let message = visitor.fields.remove("message").unwrap_or_default();
        let _ = self.events.send(Narration {
            message,
            fields: visitor.fields,
        });
    }
}

#[derive(Default)]
struct FieldText {
    fields: BTreeMap<String, String>,
}

impl Visit for FieldText {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        self.fields.insert(field.name().to_owned(), text);
    }
}
