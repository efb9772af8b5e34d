//! acp-bridge: turns Nostr @mentions of a bot key into turns of supervised
//! ACP agents.
//!
//! One module per stage of the flow (see DESIGN.md): `intake` (relay links,
//! screening) → `gate` (who is heard) → `heart` with `queue` and `mode_gate`
//! (which turn a mention joins) → `turn_runner` and `pool` (agents and
//! sessions) → `reply` (answers, notices, the outbox). `store` keeps what
//! must survive a restart and `housekeeping` keeps it bounded; `daemon`
//! wires the stages and owns no logic.

pub mod ask_owner;
pub mod backoff;
pub mod cli;
pub mod commands;
pub mod config;
pub mod daemon;
pub mod embedded_relay;
pub mod framing;
pub mod gate;
pub mod heart;
pub mod housekeeping;
pub mod intake;
pub mod ledger;
pub mod loop_guard;
pub mod mention;
pub mod mode_gate;
pub mod pool;
pub mod queue;
pub mod rate_limit;
pub mod reply;
pub mod shutdown;
pub mod store;
pub mod telemetry;
pub mod transport;
pub mod turn_runner;
