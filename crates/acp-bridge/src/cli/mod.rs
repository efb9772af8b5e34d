//! The operator's tools beside the daemon: `keygen`, `check` and `demo`.
//! Each is one file with one job; `main.rs` only dispatches to them.

pub mod check;
mod check_groups;
pub mod demo;
pub mod keygen;
