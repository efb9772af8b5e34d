//! What survives a restart: the store (one door per table), the ledger,
//! the only mover of a mention's journal row, and `mls`, the Marmot groups' MLS state.

pub(crate) mod ledger;
pub(crate) mod mls;
pub(crate) mod store;
