//! Which agent a benched daemon runs, and how: the built-in scripted agent
//! (every section's default, runs anywhere) or claude-agent-acp against the
//! loopback fake model provider (what a real conversation costs).
//!
//! It owns the agent's program, arguments and environment; the daemon's own
//! flags and its process are the harness's.

use std::path::PathBuf;

use test_support::claude_agent::ClaudeAgent;
use test_support::fake_provider::{FakeProvider, Streaming};

use crate::paths::{bridge_binary, temp_dir};

/// An agent as the daemon is told to run it.
pub struct AgentLaunch {
    /// `--agent-command`.
    pub command: PathBuf,
    /// `ACP_BRIDGE_AGENT_ARGS`, as shell words.
    pub args: String,
    /// Variables the agent gets (their names go to `--agent-env`).
    pub env: Vec<(&'static str, String)>,
    /// The agent's `HOME` and `--cwd`, when it needs one of its own.
    pub home: Option<PathBuf>,
    /// The model provider behind the agent; it stops when this is dropped.
    _provider: Option<FakeProvider>,
}

impl AgentLaunch {
    /// The scripted agent (this binary's sibling) with its flags.
    pub fn scripted(agent_args: &str) -> AgentLaunch {
        AgentLaunch {
            command: bridge_binary(),
            args: format!("scripted-agent {agent_args}"),
            env: Vec::new(),
            home: None,
            _provider: None,
        }
    }

    /// claude-agent-acp (installed under `target/npm-agents` on first use)
    /// against a fake provider started for it, with a home of its own.
    pub fn claude() -> AgentLaunch {
        let provider = FakeProvider::start(Streaming::default()).expect("the fake provider listens");
        let home = temp_dir("claude-home");
        let claude = ClaudeAgent::against(&provider, &home);
        AgentLaunch {
            command: claude.program,
            args: String::new(),
            env: claude.env,
            home: Some(home),
            _provider: Some(provider),
        }
    }

    /// The daemon flags this launch needs beside `--agent-command`.
    pub fn daemon_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if !self.env.is_empty() {
            let names: Vec<&str> = self.env.iter().map(|(name, _)| *name).collect();
            flags.extend(["--agent-env".to_owned(), names.join(",")]);
        }
        if let Some(home) = &self.home {
            flags.extend(["--cwd".to_owned(), home.display().to_string()]);
        }
        flags
    }
}
