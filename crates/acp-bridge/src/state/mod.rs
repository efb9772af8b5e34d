//! What survives a restart: the store (one door per table) and the ledger,
//! the only mover of a mention's journal row.

pub(crate) mod ledger;
pub(crate) mod store;
