//! The agents people run, installed from npm at pinned versions
//! (`tests/agents/`), driven by the real daemon over a real relay against
//! the loopback fake model provider: no key, no network. Each agent's
//! offline recipe is in `tests/agents/FINDINGS.md`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nostr_sdk::hashes::Hash as _;

use crate::support::*;
use test_support::claude_agent::ClaudeAgent;
use test_support::fake_provider::{FakeProvider, RecordedRequest, ScriptedToolUse, Streaming};
use test_support::npm_agent;

/// A slow stream: a mid-turn mention lands while the model still answers.
const SLOW: Streaming = Streaming {
    chunks: 20,
    chunk_delay: Duration::from_millis(300),
};

/// An agent's program, arguments, environment and home, as the daemon is
/// to run it.
pub(crate) struct RealAgent {
    program: PathBuf,
    args: &'static str,
    env: Vec<(&'static str, String)>,
    pub(crate) home: PathBuf,
}

impl RealAgent {
    /// claude-agent-acp against the provider's Anthropic messages API.
    pub(crate) fn claude(provider: &FakeProvider) -> Self {
        let home = temp_dir("claude-home");
        let claude = ClaudeAgent::against(provider, &home);
        RealAgent {
            program: claude.program,
            args: "",
            env: claude.env,
            home,
        }
    }

    /// qwen-code against the provider's chat completions API; `credentials`
    /// says whether the OpenAI variables reach it.
    fn qwen(provider: &FakeProvider, credentials: bool) -> Self {
        let home = temp_dir("qwen-home");
        write(
            &home.join(".qwen/settings.json"),
            r#"{"general":{"enableAutoUpdate":false},"ui":{"enableFollowupSuggestions":false},
               "privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},
               "memory":{"enableManagedAutoMemory":false,"enableManagedAutoDream":false,"enableAutoSkill":false}}"#,
        );
        let mut env = vec![
            ("QWEN_USAGE_STATISTICS_ENABLED", "0".into()),
            ("QWEN_TELEMETRY_ENABLED", "0".into()),
            ("QWEN_CODE_NO_RELAUNCH", "1".into()),
        ];
        if credentials {
            env.extend([
                ("OPENAI_BASE_URL", format!("{}/v1", provider.base_url())),
                ("OPENAI_API_KEY", "dummy".into()),
                ("OPENAI_MODEL", "fake-model".into()),
            ]);
        }
        RealAgent {
            program: npm_agent("qwen"),
            args: "--acp",
            env,
            home,
        }
    }

    /// codex-acp against the provider's responses API, as a custom model
    /// provider of its config.
    fn codex(provider: &FakeProvider) -> Self {
        let home = temp_dir("codex-home");
        let codex_home = home.join(".codex");
        write(
            &codex_home.join("config.toml"),
            &format!(
                "model = \"gpt-6.1-sol\"\nmodel_provider = \"fake\"\ncheck_for_update_on_startup = false\n\n\
                 [model_providers.fake]\nname = \"Fake provider\"\nbase_url = \"{}/v1\"\n\
                 wire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n\n\
                 [analytics]\nenabled = false\n\n[feedback]\nenabled = false\n",
                provider.base_url()
            ),
        );
        RealAgent {
            program: npm_agent("codex-acp"),
            args: "",
            env: vec![
                ("CODEX_HOME", codex_home.to_string_lossy().into_owned()),
                ("OPENAI_API_KEY", "dummy".into()),
            ],
            home,
        }
    }

    /// gemini-cli against the provider's Gemini API.
    fn gemini(provider: &FakeProvider) -> Self {
        let home = temp_dir("gemini-home");
        write(
            &home.join(".gemini/settings.json"),
            r#"{"model":{"name":"gemini-2.5-flash"},"privacy":{"usageStatisticsEnabled":false},
               "telemetry":{"enabled":false},"general":{"disableAutoUpdate":true,"disableUpdateNag":true},
               "security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
        );
        RealAgent {
            program: npm_agent("gemini"),
            args: "--experimental-acp",
            env: vec![
                ("GEMINI_API_KEY", "dummy".into()),
                ("GOOGLE_GEMINI_BASE_URL", provider.base_url()),
            ],
            home,
        }
    }

    /// `acp-bridge check` of this agent; its output and whether it passed.
    fn check(&self, flags: &[&str]) -> (String, bool) {
        let names: Vec<&str> = self.env.iter().map(|(name, _)| *name).collect();
        let owner = nostr_sdk::prelude::Keys::generate().public_key().to_hex();
        let secret = nostr_sdk::prelude::Keys::generate().secret_key().to_secret_hex();
        let output = std::process::Command::new(bridge_binary())
            .args([
                "check",
                "--relay",
                "embedded",
                "--owner",
                &owner,
                "--agent-command",
            ])
            .arg(&self.program)
            .args(["--agent-env", &names.join(","), "--cwd"])
            .arg(&self.home)
            .args(flags)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("ACP_BRIDGE_SECRET_KEY", secret)
            .env("ACP_BRIDGE_AGENT_ARGS", self.args)
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .output()
            .expect("run check");
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            output.status.success(),
        )
    }

    /// A scene running this agent; `flags` go to the daemon.
    pub(crate) fn scene(&self, flags: &[&str]) -> SceneBuilder {
        let names: Vec<&str> = self.env.iter().map(|(name, _)| *name).collect();
        let agent_env = names.join(",");
        let home = self.home.to_string_lossy().into_owned();
        let mut env: Vec<(&str, &str)> = vec![("ACP_BRIDGE_AGENT_ARGS", self.args), ("HOME", &home)];
        env.extend(self.env.iter().map(|(name, value)| (*name, value.as_str())));
        let mut all_flags = vec!["--agent-env", agent_env.as_str(), "--cwd", home.as_str()];
        all_flags.extend(flags);
        Scene::builder()
            .agent_command(self.program.to_str().expect("UTF-8 path"))
            .env(&env)
            .flags(&all_flags)
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("a dir");
    std::fs::write(path, text).expect("write");
}

pub(crate) fn provider(streaming: Streaming) -> FakeProvider {
    FakeProvider::start(streaming).expect("the fake provider listens")
}

/// The turn requests whose user messages include `text`: not the agents'
/// own side requests, which quote the first message too and race the
/// answer (claude's session summary opens with `<session>`; codex asks for
/// a conversation title in the background after the first turn starts).
fn asked_about(provider: &FakeProvider, text: &str) -> Vec<RecordedRequest> {
    const SIDE_REQUESTS: [&str; 2] = ["<session>", "generate a very short title"];
    provider
        .generations()
        .into_iter()
        .filter(|request| {
            let users = request.user_texts();
            let side_request = users
                .iter()
                .any(|user| SIDE_REQUESTS.iter().any(|marker| user.contains(marker)));
            users.iter().any(|user| user.contains(text)) && !side_request
        })
        .collect()
}

/// The owner mentions the bot, and the model is being asked about it: from
/// here on the turn is live.
async fn mention_the_model_answers(
    scene: &Scene,
    provider: &FakeProvider,
    text: &str,
) -> nostr_sdk::prelude::Event {
    let mention = scene.mention("room", text).await;
    let quoted = format!("> {text}");
    let asked = provider.wait_for(|requests| {
        requests
            .iter()
            .any(|request| request.user_texts().iter().any(|user| user.contains(&quoted)))
    });
    tokio::time::timeout(PATIENCE, asked)
        .await
        .expect("the model is asked");
    mention
}

/// Every text part of a user message the model was sent.
fn user_parts(provider: &FakeProvider) -> Vec<String> {
    provider
        .generations()
        .iter()
        .flat_map(|request| request.conversation())
        .filter(|message| message.role == "user")
        .flat_map(|message| message.parts)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_answers_a_mention_with_one_reply() {
    let provider = provider(Streaming::default());
    let scene = RealAgent::claude(&provider).scene(&[]).start().await;
    let mark = scene.bridge.log.cursor();
    let mention = scene.mention("room", "what is the capital of France?").await;
    let reply = scene.reply_to(&mention).await;
    assert!(reply.content.starts_with("reply to: "), "{}", reply.content);
    assert_eq!(
        asked_about(&provider, "> what is the capital of France?").len(),
        1
    );
    let finished = scene.bridge.log.wait(mark, Line::new("turn finished")).await;
    assert_eq!(finished["outcome"], "answered");
    assert!(
        finished["tokens_out"].as_u64().is_some(),
        "usage recorded: {finished}"
    );
    scene.settle("room").await;
    assert_eq!(
        scene
            .owner
            .events_referencing(&scene.bot, &mention.id)
            .await
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_takes_a_mid_turn_mention_into_the_running_turn() {
    let provider = provider(SLOW);
    takes_a_mid_turn_mention_into_the_running_turn(&provider, RealAgent::claude(&provider)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_takes_a_mid_turn_mention_into_the_running_turn() {
    let provider = provider(SLOW);
    takes_a_mid_turn_mention_into_the_running_turn(&provider, RealAgent::codex(&provider)).await;
}

/// A mention that arrives while the model still streams is steered into the
/// running turn through `_session/steering`: one prompt, one reply for both,
/// the new message a steer of its own for the model (claude makes it a user
/// message, or a part of the pending one), never a merged re-prompt.
async fn takes_a_mid_turn_mention_into_the_running_turn(provider: &FakeProvider, agent: RealAgent) {
    let scene = agent.scene(&[]).start().await;
    let mark = scene.bridge.log.cursor();
    let first = mention_the_model_answers(&scene, provider, "write the report").await;
    let second = scene.mention("room", "also cover the budget").await;
    let steered = scene
        .bridge
        .log
        .wait(mark, Line::new("steered into the live turn"))
        .await;
    assert_eq!(steered["span"]["steer_method"], "_session/steering");

    let reply = scene.reply_to(&second).await;
    let finished = scene.bridge.log.wait(mark, Line::new("turn finished")).await;
    assert_eq!(finished["steer_path"], "native", "{finished}");
    assert_eq!(finished["returned"], 0);
    assert_eq!(
        scene
            .bridge
            .log
            .matching(mark, Line::new("prompting the agent"))
            .len(),
        1,
        "one turn, no re-prompt"
    );
    assert!(
        !asked_about(provider, "> also cover the budget").is_empty(),
        "the steer reached the model"
    );
    for part in user_parts(provider) {
        if part.contains("> also cover the budget") {
            assert!(part.contains(acp_bridge::STEER_HEADER), "steer framing: {part}");
            assert!(!part.contains("> write the report"), "merged: {part}");
        }
        assert!(
            !part.contains("Your previous turn was stopped"),
            "re-prompted: {part}"
        );
    }
    assert!(
        reply
            .tags
            .iter()
            .any(|tag| tag.content() == Some(first.id.to_hex().as_str())),
        "one reply answers both: {:?}",
        reply.tags
    );
    assert_exactly_once(scene.tally("steered", &[first, second]).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_remembers_the_conversation_across_a_daemon_restart() {
    let provider = provider(Streaming::default());
    remembers_across_a_daemon_restart(&provider, RealAgent::claude(&provider), "resumed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_remembers_the_conversation_across_a_daemon_restart() {
    let provider = provider(Streaming::default());
    remembers_across_a_daemon_restart(&provider, RealAgent::codex(&provider), "resumed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_answers_a_mention_and_a_mid_turn_one_by_cancel_and_merge() {
    let provider = provider(SLOW);
    let scene = RealAgent::gemini(&provider).scene(&[]).start().await;
    let mark = scene.bridge.log.cursor();
    let first = mention_the_model_answers(&scene, &provider, "write the report").await;
    let second = scene.mention("room", "also cover the budget").await;
    // gemini has no steering: the live turn is cancelled and re-prompted once.
    scene
        .bridge
        .log
        .wait(mark, Line::new("re-prompting with the merged messages"))
        .await;
    let reply = scene.reply_to(&second).await;
    assert!(reply.content.starts_with("reply to: "), "{}", reply.content);
    let merged = asked_about(&provider, "Your previous turn was stopped");
    assert!(!merged.is_empty(), "the merged re-prompt reached the model");
    assert_exactly_once(scene.tally("gemini merged", &[first, second]).await);
}

/// A daemon restart between two mentions: the second turn's request to the
/// model still carries the first exchange, the session reopened `how`.
async fn remembers_across_a_daemon_restart(provider: &FakeProvider, agent: RealAgent, how: &str) {
    let mut scene = agent.scene(&[]).start().await;
    let first = scene.mention("room", "my name is Ada").await;
    scene.reply_to(&first).await;
    let status = scene.bridge.terminate(PATIENCE).await;
    assert!(status.success(), "{status}");

    scene.restart(scene.spec()).await;
    let mark = scene.bridge.log.start();
    let second = scene.mention("room", "what is my name?").await;
    scene.reply_to(&second).await;
    let reopened = scene.bridge.log.wait(mark, Line::new("session reopened")).await;
    assert_eq!(reopened["how"], how);
    let asked = asked_about(provider, "> what is my name?");
    let history: Vec<String> = asked
        .last()
        .expect("the second turn reached the model")
        .user_texts();
    assert!(
        history.iter().any(|text| text.contains("> my name is Ada")),
        "the second turn carries the first exchange: {history:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qwen_answers_with_the_auth_method_it_is_given() {
    let provider = provider(Streaming::default());
    let scene = RealAgent::qwen(&provider, true)
        .scene(&["--agent-auth-method", "openai"])
        .start()
        .await;
    let mark = scene.bridge.log.cursor();
    let mention = scene.mention("room", "hello qwen").await;
    let reply = scene.reply_to(&mention).await;
    assert!(reply.content.contains("reply to: "), "{}", reply.content);
    scene
        .bridge
        .log
        .wait(mark, Line::new("authenticated").with("method", "openai"))
        .await;
    assert_eq!(asked_about(&provider, "> hello qwen").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qwen_without_credentials_says_once_what_to_set_and_does_not_loop() {
    let provider = provider(Streaming::default());
    let scene = RealAgent::qwen(&provider, false).scene(&[]).start().await;
    let mark = scene.bridge.log.cursor();
    let first = scene.mention("room", "hello?").await;
    let notice = scene.reply_to(&first).await;
    assert!(
        notice.content.contains("needs the operator"),
        "{}",
        notice.content
    );
    let line = scene
        .bridge
        .log
        .wait(
            mark,
            Line::new(
                "the agent cannot work as configured: circuit breaker open, no restarts during the cool-down",
            ),
        )
        .await;
    let failure = line["failure"].as_str().expect("failure");
    assert!(
        failure.contains("--agent-auth-method") && failure.contains("openai"),
        "{failure}"
    );
    // A second mention is told at once: no agent is started again.
    let second = scene.mention("room-2", "anyone?").await;
    scene.reply_to(&second).await;
    assert_eq!(
        scene
            .bridge
            .log
            .matching(mark, Line::new("agent initialized"))
            .len(),
        1
    );
    assert!(
        provider.generations().is_empty(),
        "no model call without credentials"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_authenticates_with_its_api_key_method_and_runs_a_turn() {
    let provider = provider(Streaming::default());
    let scene = RealAgent::codex(&provider)
        .scene(&["--agent-auth-method", "api-key"])
        .start()
        .await;
    let mark = scene.bridge.log.cursor();
    let mention = scene.mention("room", "hello codex").await;
    let reply = scene.reply_to(&mention).await;
    assert!(reply.content.contains("reply to: "), "{}", reply.content);
    scene
        .bridge
        .log
        .wait(mark, Line::new("authenticated").with("method", "api-key"))
        .await;
    assert_eq!(asked_about(&provider, "> hello codex").len(), 1);
}

#[test]
fn check_says_what_qwen_needs_to_authenticate() {
    let provider = provider(Streaming::default());
    let (stdout, passed) = RealAgent::qwen(&provider, false).check(&[]);
    assert!(!passed, "{stdout}");
    assert!(stdout.contains("auth: the agent offers openai"), "{stdout}");
    assert!(
        stdout.contains("auth: FAILED") && stdout.contains("--agent-auth-method"),
        "{stdout}"
    );

    let (stdout, passed) = RealAgent::qwen(&provider, true).check(&["--agent-auth-method", "openai"]);
    assert!(passed, "{stdout}");
    assert!(
        stdout.contains("auth: ok, authenticated with `openai`"),
        "{stdout}"
    );
}

/// The owner says `text` in `room`: the bot's answer's text.
async fn answer(scene: &Scene, text: &str) -> String {
    let mention = scene.mention("room", text).await;
    scene.reply_to(&mention).await.content
}

/// codex-acp offers its modes as a grouped config option: `!mode` lists
/// them, and `!mode ID` reaches the session at the next turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_lists_and_sets_its_mode_through_config_options() {
    let provider = provider(Streaming::default());
    let scene = RealAgent::codex(&provider).scene(&[]).start().await;
    answer(&scene, "hello codex").await;
    let listed = answer(&scene, "!mode").await;
    assert!(
        listed.contains("Modes of this conversation's session"),
        "{listed}"
    );
    assert!(listed.lines().any(|line| line.starts_with("* ")), "{listed}");
    let other = listed
        .lines()
        .find_map(|line| line.strip_prefix("- "))
        .and_then(|line| line.split_whitespace().next())
        .expect("another mode is offered")
        .to_owned();
    let chosen = answer(&scene, &format!("!mode {other}")).await;
    assert!(chosen.contains(&format!("Mode set to {other}")), "{chosen}");

    let log = &scene.bridge.log;
    let mark = log.cursor();
    answer(&scene, "hello again codex").await;
    let applied = Line::new("applied the owner's choice to the session").with("value", other.as_str());
    log.wait(mark, applied).await;
    let relisted = answer(&scene, "@again !mode").await;
    assert!(relisted.contains(&format!("* {other}")), "{relisted}");
    let models = answer(&scene, "!model").await;
    assert!(
        models.contains("Models of this conversation's session"),
        "{models}"
    );
}

/// claude-agent-acp offers its models as a config option: `!model ID` is
/// set on the session at the next turn, which asks the provider for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_lists_and_sets_its_model_through_config_options() {
    let provider = provider(Streaming::default());
    let scene = RealAgent::claude(&provider).scene(&[]).start().await;
    answer(&scene, "hello claude").await;
    let model_of = |text: &str| {
        let asked = asked_about(&provider, text);
        let request = asked.last().expect("the model was asked");
        request.body["model"].as_str().unwrap_or_default().to_owned()
    };
    assert!(!model_of("> hello claude").contains("haiku"));
    let listed = answer(&scene, "!model").await;
    assert!(
        listed.contains("Models of this conversation's session"),
        "{listed}"
    );
    assert!(listed.contains("- haiku"), "{listed}");
    let modes = answer(&scene, "!mode").await;
    assert!(modes.contains("Modes of this conversation's session"), "{modes}");

    let chosen = answer(&scene, "!model haiku").await;
    assert!(chosen.contains("Model set to haiku"), "{chosen}");
    answer(&scene, "hello again claude").await;
    let asked = model_of("> hello again claude");
    assert!(asked.contains("haiku"), "the next turn asked for {asked}");
}

/// claude's AskUserQuestion tool, which claude-agent-acp turns into a form
/// elicitation when the client advertises one (here: ask-owner), reaches the
/// owner in the thread; the owner's choice goes back to the model as the
/// tool's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_asks_the_owner_with_its_question_tool() {
    let provider = provider(Streaming::default());
    provider.use_tool(ScriptedToolUse {
        trigger: "which colour".into(),
        name: "AskUserQuestion".into(),
        input: serde_json::json!({"questions": [{
            "question": "Which colour?", "header": "Colour", "multiSelect": false,
            "options": [{"label": "Red", "description": "warm"}, {"label": "Green", "description": "calm"}],
        }]}),
    });
    let scene = RealAgent::claude(&provider)
        .scene(&["--permission-policy", "ask-owner"])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "ask me which colour").await;
    let question = owner
        .reply_containing(&bot, &mention.id, "The agent asks: Which colour?")
        .await;
    assert!(question.content.contains("2. Green"), "{}", question.content);
    owner
        .reply_in_group(&bot, "room", &mention.id, &question.id, "2")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "reply to: ").await;
    let parts = user_parts(&provider);
    assert!(
        parts
            .iter()
            .any(|part| part.contains("Which colour?") && part.contains("Green")),
        "the tool's result carries the owner's choice: {parts:?}"
    );
    println!("claude's answer after the owner's choice: {}", answer.content);
}

/// Under `--permission-policy ask-owner`, claude-agent-acp's sessions run
/// in its ask-every-time mode (`default`), not the `auto` it starts in by
/// itself, where a classifier approves calls (issue 35 §4): `check` and
/// `!status` say so, and the model's file write is put to the owner as a
/// permission question before it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_ask_owner_claude_puts_a_file_write_to_the_owner() {
    let provider = provider(Streaming::default());
    let claude = RealAgent::claude(&provider);
    // As an operator's Claude Code settings may say; without them claude
    // starts in `auto` itself where the model supports it.
    write(
        &claude.home.join(".claude/settings.json"),
        r#"{"permissions":{"defaultMode":"auto"}}"#,
    );
    let notes = claude.home.join("notes.txt");
    provider.use_tool(ScriptedToolUse {
        trigger: "write the notes".into(),
        name: "Write".into(),
        input: serde_json::json!({"file_path": notes, "content": "the notes\n"}),
    });
    let (checked, passed) = claude.check(&["--permission-policy", "ask-owner"]);
    let said = checked
        .lines()
        .find(|line| line.contains("a session opens"))
        .unwrap_or_default()
        .to_owned();
    println!("check: {said}");
    assert!(passed, "{checked}");
    assert!(
        said.contains("(mode default: --permission-policy ask-owner starts each session in it"),
        "{checked}"
    );

    let scene = claude.scene(&["--permission-policy", "ask-owner"]).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "please write the notes").await;
    let question = owner
        .reply_containing(&bot, &mention.id, "The agent asks for permission")
        .await;
    println!("the owner is asked: {}", question.content);
    assert!(!notes.exists(), "the write ran before the owner answered");
    owner
        .reply_in_group(&bot, "room", &mention.id, &question.id, "1")
        .await;
    owner.reply_containing(&bot, &mention.id, "reply to: ").await;
    let status = answer(&scene, "!status").await;
    println!("!status: {status}");
    assert!(status.contains("Its session: model "), "{status}");
    assert!(status.contains(", mode default,"), "{status}");
}

/// claude-agent-acp is offered the bridge's own MCP server (loopback HTTP,
/// a bearer token of the session), lists its tools to the model as
/// `mcp__acp_bridge__*`, and the model's `post_message` call lands in the
/// thread mid-turn as an interim message, before the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_posts_in_the_thread_mid_turn_through_the_bridge_tool() {
    claude_posts_mid_turn(&[]).await;
}

/// With `--permission-policy ask-owner`, claude asks permission for the
/// bridge's own tool like for any MCP tool; the bridge allows its own tools
/// itself (they are bounded by the bridge), so the owner is not asked and
/// the post lands all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claudes_calls_of_the_bridge_tool_are_not_put_to_the_owner() {
    claude_posts_mid_turn(&["--permission-policy", "ask-owner"]).await;
}

/// A mention whose turn makes claude call `post_message`, with `flags`:
/// the post is in the thread, interim, before the answer.
async fn claude_posts_mid_turn(flags: &[&str]) {
    let provider = provider(Streaming::default());
    provider.use_tool(ScriptedToolUse {
        trigger: "report progress".into(),
        name: "mcp__acp_bridge__post_message".into(),
        input: serde_json::json!({"text": "halfway there"}),
    });
    let mut claude = RealAgent::claude(&provider);
    // Claude Code defers MCP tools behind its ToolSearch tool; the fake
    // model calls the tool directly, so it must be offered up front.
    claude.env.push(("ENABLE_TOOL_SEARCH", "false".into()));
    let scene = claude.scene(flags).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "please report progress").await;
    let posted = owner.reply_containing(&bot, &mention.id, "halfway there").await;
    let interim = posted
        .tags
        .iter()
        .any(|tag| matches!(tag.as_slice(), [name, label, ..] if name == "l" && label == "interim"));
    assert!(interim, "a posted message is interim: {posted:?}");
    let answer = owner.reply_containing(&bot, &mention.id, "reply to: ").await;
    assert!(posted.created_at <= answer.created_at);
    let parts = user_parts(&provider);
    assert!(
        parts.iter().any(|part| part.contains("posted in the thread")),
        "the tool's result went back to the model: {parts:?}"
    );
}

/// claude-agent-acp calls the bridge's `send_file` (as
/// `mcp__acp_bridge__send_file`) on a file of its working directory: the
/// loopback Blossom server holds the file's bytes, and the thread gets the
/// caption and the link with a NIP-92 `imeta` tag, before the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_sends_a_file_through_the_bridge_tool() {
    const PDF: &[u8] = b"%PDF-1.7\nnot much of a report\n";
    let blossom = test_support::blossom::BlossomServer::start().expect("blossom server");
    let provider = provider(Streaming::default());
    provider.use_tool(ScriptedToolUse {
        trigger: "send me the report".into(),
        name: "mcp__acp_bridge__send_file".into(),
        input: serde_json::json!({"path": "report.pdf", "caption": "the report"}),
    });
    let mut claude = RealAgent::claude(&provider);
    claude.env.push(("ENABLE_TOOL_SEARCH", "false".into()));
    std::fs::write(claude.home.join("report.pdf"), PDF).expect("the file");
    let base = blossom.base_url();
    let scene = claude
        .scene(&["--blossom", &base, "--fetch-private-addresses"])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);
    let mention = scene.mention("room", "please send me the report").await;
    let posted = owner.reply_containing(&bot, &mention.id, "the report\n").await;
    let imeta = posted
        .tags
        .iter()
        .find(|tag| tag.as_slice().first().map(String::as_str) == Some("imeta"))
        .expect("an imeta tag");
    let hash = nostr_sdk::hashes::sha256::Hash::hash(PDF).to_string();
    assert!(
        imeta.as_slice().contains(&format!("x {hash}"))
            && imeta.as_slice().contains(&"m application/pdf".to_owned()),
        "{imeta:?}"
    );
    assert_eq!(
        blossom.blob(&hash).as_deref(),
        Some(PDF),
        "the server holds the file"
    );
    let answer = owner.reply_containing(&bot, &mention.id, "reply to: ").await;
    assert!(posted.created_at <= answer.created_at);
    let parts = user_parts(&provider);
    assert!(
        parts.iter().any(|part| part.contains("sent: ")),
        "the tool's result went back to the model: {parts:?}"
    );
}

/// The `claude` CLI processes below `daemon` (claude-agent-acp runs one
/// per live session), with their command lines.
fn claude_clis_below(daemon: u32) -> Vec<String> {
    descendants(daemon)
        .into_iter()
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let words: Vec<String> = cmdline
                .split(|byte| *byte == 0)
                .filter(|word| !word.is_empty())
                .map(|word| String::from_utf8_lossy(word).into_owned())
                .collect();
            let program = words.first()?;
            let serving =
                program.ends_with("/claude") && words.iter().any(|word| word.starts_with("--session-id"));
            serving.then(|| words.join(" "))
        })
        .collect()
}

/// `--session-idle` with the agent issue 27 measured: the quiet
/// conversation's session is closed (claude-agent-acp offers
/// `session/close`), which ends its `claude` CLI, and the next mention is
/// answered in the resumed session, the model sent the earlier exchange.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_holds_no_cli_for_a_quiet_conversation_and_resumes_it_with_its_context() {
    let provider = provider(Streaming::default());
    let scene = RealAgent::claude(&provider)
        .scene(&["--session-idle", "3s"])
        .start()
        .await;
    let daemon = scene.bridge.pid();
    let log = &scene.bridge.log;
    let first = scene.mention("room", "my name is Ada").await;
    scene.reply_to(&first).await;
    assert_eq!(
        claude_clis_below(daemon).len(),
        1,
        "the live session's CLI, found as this test looks for it"
    );
    let closed = log.wait(log.start(), Line::new("session closed (idle)")).await;
    assert_eq!(closed["how"], "session/close", "{closed}");
    let no_cli = async || claude_clis_below(daemon).is_empty().then_some(());
    let describe = || format!("no claude CLI left: {:?}", claude_clis_below(daemon));
    eventually(PATIENCE, no_cli, describe).await;

    let mark = log.cursor();
    let second = scene.mention("room", "what is my name?").await;
    scene.reply_to(&second).await;
    let reopened = log.wait(mark, Line::new("session reopened")).await;
    assert_eq!(reopened["how"], "resumed", "{reopened}");
    assert_eq!(reopened["session"], closed["session"], "{reopened}");
    println!("claude's session resumed in {} ms", reopened["latency_ms"]);
    let asked = asked_about(&provider, "> what is my name?");
    let history = asked
        .last()
        .expect("the second turn reached the model")
        .user_texts();
    assert!(
        history.iter().any(|text| text.contains("> my name is Ada")),
        "the resumed session carries the first exchange: {history:?}"
    );
}
