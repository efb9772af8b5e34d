//! A budget's arithmetic: the amounts limits are written in, the UTC
//! periods they count over, and the check of what was spent against them.
//! Which limits bind whom, and the spend's rows, stay with the daemon's
//! `budget` stage and its store.

pub mod amount;
pub mod limit;
pub mod period;
