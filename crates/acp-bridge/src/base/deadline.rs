//! An optional deadline as a future, for `select!` loops whose timer may be
//! unset: the heart's next wake-up, a turn's timer, the breaker's reopening,
//! a relay link's refetch and authentication wait.

use tokio::time::Instant;

/// Resolves at `at`; never without one, so its `select!` arm stays idle.
pub(crate) async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
