//! acp-bridge: turns Nostr @mentions of a bot key into turns of supervised
//! ACP agents.
//!
//! One module per stage of the flow (see docs/architecture.md): `intake`
//! (relay links, screening) → `gate` (who is heard) → `heart` (one owner per
//! conversation: its queue, the mode gate, the turn machines and their
//! drivers) → `pool` (agents and sessions) → `reply` (answers, notices, the
//! outbox). `ledger` moves a mention's journal row, `store` keeps what must
//! survive a restart and `housekeeping` keeps it bounded; `daemon` wires the
//! stages and owns no logic.
//!
//! Every module is private to the crate; the items below are the public
//! face, for the binaries, the benches, the fuzzers and the tests.

#![warn(unreachable_pub)]

mod backoff;
mod budget;
pub mod cli;
mod clock_skew;
mod commands;
mod config;
mod config_file;
mod daemon;
mod deadline;
mod embedded_relay;
mod flags;
mod gate;
mod groups;
mod heart;
mod housekeeping;
mod http_get;
mod http_server;
mod identity;
mod inbound;
mod intake;
mod isolation;
mod ledger;
mod loop_guard;
mod mcp;
mod media;
mod metrics_endpoint;
mod pool;
mod process_seal;
mod profiles;
mod public_address;
mod rate_limit;
mod relay_tap;
mod reply;
mod routes;
mod schedule;
mod send_file;
mod shard;
mod shutdown;
mod signer;
mod store;
mod telemetry;
mod thread_context;
mod tools;
mod transport;
mod workspace;

pub use acp_bridge_core::conversations::BATCH_CAP;
pub use acp_bridge_core::media_refs::MediaRef;
pub use acp_bridge_core::mention::{
    CommandCall, Intent, Mention, SessionPolicy, Thread, direct_thread, public_thread,
};
pub use acp_bridge_core::prompt::{
    BRIDGE_MARK, Framing, OPENING_BRACKETS, STEER_CLOSING, STEER_HEADER, fresh_prompt, merged_prompt,
    steer_text,
};
pub use config::{RunArgs, Settings};
pub use config_file::{ConfigFile, ConfigFileError, Reload, effective_configuration, reload_on_hangup};
pub use daemon::{DaemonError, run, run_reloading};
pub use embedded_relay::EmbeddedRelay;
pub use gate::attestation::{Attestation, AttestationError, Conditions, verify_tags};
pub use gate::{AuthorGate, GateRules, RespondTo};
pub use inbound::Inbound;
pub use intake::{Arrival, DEFAULT_MAX_PARKED_BYTES, FollowThreads, INTAKE_BATCH, Intake, IntakeLimits};
pub use loop_guard::{ChainBounds, LoopGuard, ReplyRecorder, loop_guard};
pub use media::{MediaArgs, MediaFetcher};
pub use pool::AGENT_ENV_BASELINE;
pub use process_seal::seal_own_process;
pub use profiles::{DEFAULT_PROFILE, Profile, ProfileTable, Profiles};
pub use reply::{Replier, ReplyMode};
pub use schedule::Schedule;
pub use shard::{Shard, ShardSpec};
pub use shutdown::Shutdown;
pub use signer::BotSigner;
pub use store::{AnsweredThreads, Finish, NewMention, OutgoingEvent, Store};
pub use telemetry::{
    LogArgs, LogFilter, LogFilterError, LogFormat, RUST_LOG_ENV, RustLogError, init_logging,
};
pub use transport::NoDelayTransport;
