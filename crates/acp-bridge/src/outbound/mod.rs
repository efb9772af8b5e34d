//! What goes out: replies, notices and the outbox (`reply`), which relays
//! each event goes to (`routes`), the bot's profile and relay lists
//! (`identity`), NIP-29 groups (`groups`) and Marmot encrypted groups
//! (`marmot`).

pub(crate) mod groups;
pub(crate) mod identity;
pub(crate) mod marmot;
pub(crate) mod reply;
pub(crate) mod routes;
