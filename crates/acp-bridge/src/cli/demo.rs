//! `acp-bridge demo`: the whole path on embedded defaults, narrated.
//!
//! Starts the embedded relay, a bridge with a generated bot key and owner
//! key, the built-in scripted agent, and a simulated owner who mentions the
//! bot, mentions it again while the agent works, and then replies in the
//! bot's thread without mentioning it. Then it asks for work that uses the
//! bridge's own tools (MCP): the agent posts progress in the thread and
//! delegates a task to a fresh session, whose result the bridge steers
//! into the agent's live turn. The daemon's own log events are narrated as
//! the conversation happens (mention, accepted, steered, reply); the demo
//! exits 0 only when the second mention was folded into the live turn, one
//! reply answered both, the follow-up was answered in the thread, and the
//! progress message and the task's result both reached the thread and the
//! turn. No API key, no network.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

use nostr_sdk::prelude::{
    Client, Event, EventBuilder, EventId, Filter, JsonUtil, Keys, Kind, RelayPoolNotification, Tag, TagKind,
    Timestamp,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::Settings;
use crate::edge::embedded_relay::EmbeddedRelay;

/// The whole demo must finish within this.
const DEMO_TIMEOUT: Duration = Duration::from_secs(60);
/// The scripted agent's pace: slow enough to steer into, quick to watch.
const AGENT_ROUNDS: &str = "4";
const AGENT_ROUND_DELAY_MS: &str = "600";
const FIRST_MENTION: &str = "Please draft the release notes for v1.2.";
const SECOND_MENTION: &str = "Also mention the fixed crash on start-up.";
/// A reply in the bot's thread that does not mention it.
const FOLLOW_UP: &str = "Thanks! Keep them under ten lines, please.";
/// Work for the agent's hands: the scripted agent follows the `[...]`
/// directives (a model would decide this itself): post progress through
/// the bridge's `post_message`, `delegate` a task, and work long enough
/// for the task's result to come back into this turn.
const HANDS_MENTION: &str = "Get v1.2 ready to ship, and have a helper count the open issues meanwhile. \
     [mcp-post=On it: checking the build first.] [mcp-delegate=Count the open issues.] [rounds=10]";

/// Runs the demo; the exit status says whether the steer folded in.
pub async fn run() -> Result<(), String> {
    let (narration_tx, narration) = mpsc::unbounded_channel();
    let mut narration = Narrative::new(narration);
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
    println!(
        "  bot    {}",
        acp_bridge_core::mention::short_npub(&bot.public_key())
    );
    println!(
        "  owner  {}",
        acp_bridge_core::mention::short_npub(&owner.public_key())
    );
    println!("  agent  scripted agent (built in), native steer on");
    println!("         no model: it echoes its whole prompt as its answer, after a few");
    println!("         rounds of pretend work (the [acp-bridge] lines are the bridge's framing)\n");

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
    settings.turns.idle_timeout = DEMO_TIMEOUT;
    settings.turns.max_turn_duration = DEMO_TIMEOUT;
    Ok(settings)
}

/// The simulated owner's side: two mentions, the reply, a follow-up
/// without a mention, its reply.
async fn converse(
    relay: &EmbeddedRelay,
    bot: &Keys,
    owner: &Keys,
    narration: &mut Narrative,
) -> Result<(), String> {
    narration.wait_for("ready: subscribed to mentions").await;
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

    say(&client, owner, Some(bot), FIRST_MENTION, &[]).await?;
    narration.wait_for("agent run started").await;
    let second = say(&client, owner, Some(bot), SECOND_MENTION, &[]).await?;
    let turn = narration.wait_for("turn finished").await;
    // The reply answers the batch in the thread of its newest mention.
    let reply = reply_to(&mut incoming, second.id).await?;
    let folded = reply.content.contains(&format!("> {SECOND_MENTION}")) && reply.content.contains("steer: ");
    let native = turn.get("steer_path").map(String::as_str) == Some("native");
    let same_turn = turn.get("stop_reason").map(String::as_str) == Some("end_turn");
    if !(folded && native && same_turn) {
        return Err(format!(
            "the steer did not fold into the live turn (folded: {folded}, native: {native}, end_turn: {same_turn}); raw reply: {}",
            reply.as_json()
        ));
    }
    println!("\ndemo ok: the second mention was steered into the live turn, which ended end_turn");
    println!("         and answered both mentions in one reply (no cancel, no second turn).\n");

    // The bot now follows its thread: a reply there needs no mention.
    narration.wait_for("following the answered threads").await;
    let thread = [
        Tag::parse(["e", &second.id.to_hex(), "", "root"]).map_err(|error| error.to_string())?,
        Tag::parse(["e", &reply.id.to_hex(), "", "reply"]).map_err(|error| error.to_string())?,
    ];
    let follow_up = say(&client, owner, None, FOLLOW_UP, &thread).await?;
    narration.wait_for("turn finished").await;
    let answer = reply_to(&mut incoming, follow_up.id).await?;
    if !answer.content.contains(&format!("> {FOLLOW_UP}")) {
        return Err(format!(
            "the follow-up was not answered in the thread; raw reply: {}",
            answer.as_json()
        ));
    }
    println!("\ndemo ok: the reply in the bot's thread, without a mention, was answered there.\n");

    let outcome = use_the_tools(&client, bot, owner, narration, &mut incoming).await;
    client.shutdown().await;
    outcome
}

/// The agent's hands: a mention whose turn posts progress through the
/// bridge's MCP server and delegates a task, whose result is steered into
/// the same turn.
async fn use_the_tools(
    client: &Client,
    bot: &Keys,
    owner: &Keys,
    narration: &mut Narrative,
    incoming: &mut tokio::sync::broadcast::Receiver<RelayPoolNotification>,
) -> Result<(), String> {
    let mention = say(client, owner, Some(bot), HANDS_MENTION, &[]).await?;
    let progress = reply_to(incoming, mention.id).await?;
    if !crate::outbound::reply::is_interim(&progress.tags) || !progress.content.contains("checking the build")
    {
        return Err(format!(
            "the agent's progress message did not come first; raw event: {}",
            progress.as_json()
        ));
    }
    narration.wait_for("task result steered into the live turn").await;
    let turn = narration.wait_for("turn finished").await;
    let answer = reply_to(incoming, mention.id).await?;
    let steered_result = answer
        .content
        .split_once("steer: ")
        .is_some_and(|(_, steered)| steered.contains("Result of task t1"));
    let same_turn = turn.get("stop_reason").map(String::as_str) == Some("end_turn");
    if steered_result && same_turn && !crate::outbound::reply::is_interim(&answer.tags) {
        println!("\ndemo ok: the agent posted progress mid-turn, and the task it delegated ran on a");
        println!("         fresh session whose result was steered into the live turn and answered.");
        Ok(())
    } else {
        Err(format!(
            "the task's result did not land in the live turn (steered: {steered_result}, end_turn: {same_turn}); raw reply: {}",
            answer.as_json()
        ))
    }
}

/// Sends the owner's group message, mentioning `bot` if given.
async fn say(
    client: &Client,
    owner: &Keys,
    bot: Option<&Keys>,
    text: &str,
    thread: &[Tag],
) -> Result<Event, String> {
    match bot {
        Some(_) => println!("owner  → @bot: \"{text}\""),
        None => println!("owner  → (a reply in the bot's thread, no mention): \"{text}\""),
    }
    let mut builder = EventBuilder::new(Kind::Custom(9), text)
        .tag(Tag::custom(TagKind::h(), ["demo".to_owned()]))
        .tags(thread.iter().cloned());
    if let Some(bot) = bot {
        builder = builder.tag(Tag::public_key(bot.public_key()));
    }
    let event = builder.sign_with_keys(owner).map_err(|error| error.to_string())?;
    client
        .send_event(&event)
        .await
        .map_err(|error| error.to_string())?;
    Ok(event)
}

/// Waits for the bot's group message replying to `mentioned`, and shows it.
async fn reply_to(
    incoming: &mut tokio::sync::broadcast::Receiver<RelayPoolNotification>,
    mentioned: EventId,
) -> Result<Event, String> {
    let mentioned = mentioned.to_hex();
    let replies = |event: &Event| {
        event.kind == Kind::Custom(9)
            && event
                .tags
                .iter()
                .any(|tag| tag.kind() == TagKind::e() && tag.content() == Some(mentioned.as_str()))
    };
    let reply = loop {
        match incoming.recv().await {
            Ok(RelayPoolNotification::Event { event, .. }) if replies(&event) => break *event,
            Ok(_) => {}
            Err(error) => return Err(format!("lost the relay: {error}")),
        }
    };
    println!("bot    → reply ({} bytes):", reply.content.len());
    for line in reply.content.lines() {
        println!("         │ {line}");
    }
    Ok(reply)
}

/// The daemon's events as they come, printed as they are read.
struct Narrative {
    events: mpsc::UnboundedReceiver<Narration>,
    /// Events read while waiting for another, by message (the last of
    /// each), so that waiting for one that already came returns at once.
    passed: HashMap<String, BTreeMap<String, String>>,
}

impl Narrative {
    fn new(events: mpsc::UnboundedReceiver<Narration>) -> Self {
        Narrative {
            events,
            passed: HashMap::new(),
        }
    }

    /// Prints narration until the event `message` appears (or returns at
    /// once if it came while waiting for another); returns its fields.
    async fn wait_for(&mut self, message: &str) -> BTreeMap<String, String> {
        if let Some(fields) = self.passed.remove(message) {
            return fields;
        }
        while let Some(event) = self.events.recv().await {
            if let Some(line) = narrate(&event) {
                println!("{line}");
            }
            if event.message == message {
                return event.fields;
            }
            self.passed.insert(event.message, event.fields);
        }
        BTreeMap::new()
    }
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
        "posted a message for the agent mid-turn" => {
            "agent  ✎ posted progress in the thread (the bridge's post_message tool)".to_owned()
        }
        "task started" => format!(
            "agent  ⇢ delegated task {} to a fresh session (the bridge's delegate tool)",
            field("task_id")
        ),
        "task ended" => format!("task   ✓ task {} ended: {}", field("task_id"), field("outcome")),
        "task result steered into the live turn" => format!(
            "bridge ↪ task {}'s result steered into the delegating agent's live turn",
            field("task_id")
        ),
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
