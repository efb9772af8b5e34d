//! The agents: the pool of agent processes and their sessions, and the
//! workspaces they work in.

pub(crate) mod pool;
pub(crate) mod workspace;
