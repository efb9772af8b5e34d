//! acp-bridge: turns Nostr @mentions of a bot key into turns of supervised
//! ACP agents.
//!
//! The modules are grouped in wings that follow a mention's way (see
//! docs/architecture.md, "Wings"; `tests/e2e/module_graph.rs` enforces
//! which wing may import which): `base` and `telemetry` below everything,
//! `edge` (sockets to the outside world), `state` (the store and the
//! ledger), `policy` (who is heard, budgets, rate limits), `intake` (relay
//! links, screening), `outbound` (replies and where they go), `agents`
//! (the pool and workspaces), `tools` (the bridge's MCP tools and server),
//! `heart` (one owner per conversation, the turns' drivers, the owner's
//! commands); `config`, `config_file`, `cli` and `daemon` on top wire
//! them, and `housekeeping` keeps the state bounded. The pure logic (the
//! turn machine, conversations, mentions, prompts) is `acp-bridge-core`.
//!
//! Every module is private to the crate; the items below are the public
//! face, for the binaries, the benches, the fuzzers and the tests.

#![warn(unreachable_pub)]

mod agents;
mod base;
pub mod cli;
mod config;
mod config_file;
mod daemon;
mod edge;
mod heart;
mod housekeeping;
mod intake;
mod outbound;
mod policy;
mod state;
mod telemetry;
mod tools;

pub use acp_bridge_core::conversations::BATCH_CAP;
pub use acp_bridge_core::media_refs::MediaRef;
pub use acp_bridge_core::mention::{
    CommandCall, Intent, Mention, SessionPolicy, Thread, direct_thread, public_thread,
};
pub use acp_bridge_core::prompt::{
    BRIDGE_MARK, Framing, OPENING_BRACKETS, STEER_CLOSING, STEER_HEADER, fresh_prompt, merged_prompt,
    steer_text,
};
pub use agents::pool::AGENT_ENV_BASELINE;
pub use base::process_seal::seal_own_process;
pub use base::shutdown::Shutdown;
pub use config::{RunArgs, Settings};
pub use config_file::{ConfigFile, ConfigFileError, Reload, effective_configuration, reload_on_hangup};
pub use daemon::{DaemonError, run, run_reloading};
pub use edge::embedded_relay::EmbeddedRelay;
pub use edge::signer::BotSigner;
pub use edge::transport::NoDelayTransport;
pub use heart::profiles::{DEFAULT_PROFILE, Profile, ProfileTable, Profiles};
pub use heart::schedule::Schedule;
pub use intake::inbound::Inbound;
pub use intake::media::{MediaArgs, MediaFetcher};
pub use intake::{
    Arrival, DEFAULT_MAX_PARKED_BYTES, FollowThreads, INTAKE_BATCH, Intake, IntakeLimits, RecogniseCommand,
};
pub use outbound::reply::{Replier, ReplyMode};
pub use policy::gate::attestation::{Attestation, AttestationError, Conditions, verify_tags};
pub use policy::gate::{AuthorGate, GateRules, RespondTo};
pub use policy::loop_guard::{ChainBounds, LoopGuard, ReplyRecorder, loop_guard};
pub use policy::shard::{Shard, ShardSpec};
pub use state::store::{AnsweredThreads, Finish, NewMention, OutgoingEvent, Store};
pub use telemetry::{
    LogArgs, LogFilter, LogFilterError, LogFormat, RUST_LOG_ENV, RustLogError, init_logging,
};
