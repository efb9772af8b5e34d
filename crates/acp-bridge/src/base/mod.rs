//! The daemon's own plumbing, below every other wing: flag refusals, backoff,
//! deadlines, shutdown, clock-skew bounds, process isolation and the sealing
//! of the daemon's own process. Imports no other wing.

pub(crate) mod backoff;
pub(crate) mod clock_skew;
pub(crate) mod deadline;
pub(crate) mod flags;
pub(crate) mod isolation;
pub(crate) mod process_seal;
pub(crate) mod shutdown;
