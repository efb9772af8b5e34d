//! Sockets to the outside world: the websocket transport and its tap, the
//! embedded relay, the bounded HTTP client and server, the metrics endpoint,
//! the rule for public addresses, and the signer.

pub(crate) mod embedded_relay;
pub(crate) mod http_get;
pub(crate) mod http_server;
pub(crate) mod metrics_endpoint;
pub(crate) mod public_address;
pub(crate) mod relay_tap;
pub(crate) mod seen_ids;
pub(crate) mod signer;
pub(crate) mod transport;
