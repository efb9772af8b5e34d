//! The shutdown signal: SIGTERM or SIGINT.
//!
//! One small type, handed to whoever must stop cleanly, instead of flags
//! spread through the main loop. The first signal starts a graceful stop
//! ([`Shutdown::token`]: stop listening, let turns finish within the grace,
//! flush the outbox); a second one is for an operator who does not want to
//! wait ([`Shutdown::forced`]): the binary then returns at once with exit
//! code 130, from `main`, not from a task.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct Shutdown {
    graceful: CancellationToken,
    forced: CancellationToken,
}

impl Shutdown {
    /// Starts listening for SIGTERM and SIGINT.
    pub fn listen() -> Self {
        let shutdown = Shutdown {
            graceful: CancellationToken::new(),
            forced: CancellationToken::new(),
        };
        let (graceful, forced) = (shutdown.graceful.clone(), shutdown.forced.clone());
        tokio::spawn(async move {
            let (Ok(mut term), Ok(mut int)) =
                (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
            else {
                tracing::error!("cannot listen for SIGTERM/SIGINT; stop the daemon with SIGKILL");
                return;
            };
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received: shutting down"),
                _ = int.recv() => tracing::info!("SIGINT received: shutting down"),
            }
            graceful.cancel();
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            tracing::warn!("second signal: exiting at once");
            forced.cancel();
        });
        shutdown
    }

    /// Cancelled when shutdown begins.
    pub fn token(&self) -> CancellationToken {
        self.graceful.clone()
    }

    /// Resolves on the second signal.
    pub async fn forced(&self) {
        self.forced.cancelled().await;
    }
}
