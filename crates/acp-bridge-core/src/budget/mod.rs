//! A budget's arithmetic: the amounts limits are written in and the UTC
//! periods they count over. The limits, the spend and the check stay with
//! the daemon's `budget` stage.

pub mod amount;
pub mod period;
