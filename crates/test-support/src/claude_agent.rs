//! claude-agent-acp set up to run against a [`FakeProvider`]: which program,
//! which environment, and the settings file in its `HOME`.
//!
//! Shared by the end-to-end tests that drive claude (`tests/e2e/real_agents.rs`)
//! and by `acp-bridge-bench sessions`, which measures what its sessions cost.
//! It owns only the launch; how the daemon is started around it is the
//! caller's.

use std::path::{Path, PathBuf};

use crate::fake_provider::FakeProvider;
use crate::npm_agent;

/// What a daemon needs to run claude-agent-acp against a fake provider.
#[derive(Debug)]
pub struct ClaudeAgent {
    /// The `claude-agent-acp` executable of the pinned npm agents.
    pub program: PathBuf,
    /// Variables the agent must get (pass their names with `--agent-env`).
    pub env: Vec<(&'static str, String)>,
}

impl ClaudeAgent {
    /// claude-agent-acp against `provider`'s Anthropic messages API, with
    /// `home` as its `HOME` (its settings are written there; no update
    /// checks, telemetry or error reports leave the machine).
    pub fn against(provider: &FakeProvider, home: &Path) -> ClaudeAgent {
        let settings = home.join(".claude").join("settings.json");
        std::fs::create_dir_all(settings.parent().expect("a parent")).expect("claude's settings dir");
        // The default `auto` mode adds a notice of its own to the first turn.
        std::fs::write(&settings, r#"{"permissions":{"defaultMode":"default"}}"#).expect("claude's settings");
        ClaudeAgent {
            program: npm_agent("claude-agent-acp"),
            env: vec![
                ("ANTHROPIC_BASE_URL", provider.base_url()),
                ("ANTHROPIC_API_KEY", "dummy".into()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                ("DISABLE_AUTOUPDATER", "1".into()),
                ("DISABLE_TELEMETRY", "1".into()),
                ("DISABLE_ERROR_REPORTING", "1".into()),
            ],
        }
    }
}
