//! Marmot (MLS) encrypted groups as a member sees them (docs/marmot.md):
//! the flags (`args`) and what the bot publishes so that others can add it
//! to a group (`key_packages`). The MLS state itself is the state wing's
//! (`crate::state::mls`).

pub(crate) mod args;
pub(crate) mod key_packages;
