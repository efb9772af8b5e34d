//! The shutdown signal: SIGTERM or SIGINT, once.
//!
//! One small type, handed to whoever must stop cleanly, instead of flags
//! spread through the main loop. The first signal starts a graceful stop
//! (stop listening, let turns finish within the grace, flush the outbox);
//! a second one ends the process at once, for an operator who does not want
//! to wait.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    /// Starts listening for SIGTERM and SIGINT.
    pub fn listen() -> Self {
        let token = CancellationToken::new();
        let trigger = token.clone();
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
            trigger.cancel();
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            tracing::warn!("second signal: exiting at once");
            std::process::exit(130);
        });
        Shutdown { token }
    }

    /// Cancelled when shutdown begins.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }
}
