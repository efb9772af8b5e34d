//! What `/healthz` asks of the agent pool. A trait here, below both, so
//! that neither the pool (which records its metrics through `telemetry`)
//! nor the endpoint that serves `/healthz` (`metrics_endpoint`, with the
//! sockets) imports the other.

/// The agent pool's circuit, as `/healthz` sees it.
pub(crate) trait AgentCircuit: std::fmt::Debug + Send + Sync {
    /// Why agents are not started now (the agent cannot start, or keeps
    /// crashing), or `None` while they are.
    fn unhealthy(&self) -> Option<String>;
}
