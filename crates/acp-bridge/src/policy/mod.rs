//! Who is heard and how much: the author gate, budgets, rate limits, the loop
//! guard and shards.

pub(crate) mod budget;
pub(crate) mod gate;
pub(crate) mod loop_guard;
pub(crate) mod rate_limit;
pub(crate) mod shard;
