//! acp-bridge's pure core: the decisions of the daemon, without its I/O.
//!
//! As quinn-proto is to quinn, this crate is to `acp-bridge`: state
//! machines and arithmetic that take their inputs (events, answers, `now`)
//! as values and hand back what to do. It depends on no async runtime, no
//! socket and no store, so the compiler, not a convention, keeps them free
//! of I/O, and their tests build in seconds. The daemon's stages are the
//! shells that drive them (docs/architecture.md).

#![warn(unreachable_pub)]

pub mod approvals;
pub mod budget;
pub mod choice;
pub mod comment;
pub mod conversations;
pub mod live_sessions;
pub mod media_refs;
pub mod mention;
pub mod mode_gate;
pub mod prompt;
pub mod slash;
pub mod standing;
pub mod turn;
pub mod waiting;
pub mod work;
