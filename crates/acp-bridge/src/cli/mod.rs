//! The operator's tools beside the daemon: `keygen`, `check` and `demo`.
//! Each is one file with one job; `main.rs` only dispatches to them.

pub mod check;
pub mod demo;
pub mod keygen;
