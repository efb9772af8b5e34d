//! The one rule for where a URL someone else wrote may take the daemon: an
//! address on the public internet, checked on the address actually
//! connected to (resolve, vet each answer, connect to a vetted one), so a
//! second DNS answer (rebinding) cannot slip past the check.
//!
//! Used by every connection to a host the operator did not name: the
//! bounded HTTP client (`http_get`: media, NIP-11, Blossom) and the
//! websocket transport to other people's relays (`transport`).
//!
//! The classification is a hand list of the IANA special-purpose address
//! registries (IPv4 and IPv6, as of 2025) plus multicast, broadcast and
//! IPv4's reserved 240/4: std's `is_global` is unstable, and no small,
//! kept crate classifies all of them (with the IPv6 forms that embed an
//! IPv4 address: mapped, compatible, NAT64 and 6to4, whose embedded address
//! is classified instead). Every range is unit-tested below.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::net::TcpStream;

/// Whether a connection may reach loopback and private addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrivateAddresses {
    /// Public addresses only: a URL someone else wrote cannot reach the
    /// daemon's own host or network.
    Refused,
    /// Any address (the operator's own relays, a test's loopback server).
    Allowed,
}

/// Why no connection was made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the host resolves to a private or loopback address ({0})")]
    PrivateAddress(IpAddr),
}

/// Connects to the first address of `host` that answers, among those
/// `private` allows; the address vetted is the address connected to.
pub(crate) async fn connect(
    host: &str,
    port: u16,
    private: PrivateAddresses,
) -> Result<TcpStream, ConnectError> {
    let mut refused = None;
    let mut last_error = None;
    for address in tokio::net::lookup_host((host, port)).await? {
        if private == PrivateAddresses::Refused && !is_public(address.ip()) {
            refused.get_or_insert(address.ip());
            continue;
        }
        match TcpStream::connect(SocketAddr::new(address.ip(), port)).await {
            Ok(stream) => return Ok(stream),
            Err(error) => last_error = Some(error),
        }
    }
    Err(match (last_error, refused) {
        (Some(error), _) => ConnectError::Io(error),
        (None, Some(address)) => ConnectError::PrivateAddress(address),
        (None, None) => ConnectError::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the host resolves to no address",
        )),
    })
}

/// Whether `address` is on the public internet: in no special-purpose
/// range that is not globally reachable, not multicast or broadcast. An
/// IPv6 address that embeds an IPv4 one (mapped, compatible, NAT64, 6to4)
/// is as public as the address it embeds.
pub(crate) fn is_public(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

/// IPv4 ranges that are not public (IANA IPv4 special-purpose registry
/// entries not globally reachable, multicast, reserved, broadcast).
const NOT_PUBLIC_V4: &[(Ipv4Addr, u8)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8),       // "this network"
    (Ipv4Addr::new(10, 0, 0, 0), 8),      // private
    (Ipv4Addr::new(100, 64, 0, 0), 10),   // shared (CGNAT)
    (Ipv4Addr::new(127, 0, 0, 0), 8),     // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),  // link-local (cloud metadata)
    (Ipv4Addr::new(172, 16, 0, 0), 12),   // private
    (Ipv4Addr::new(192, 0, 0, 0), 24),    // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),    // documentation
    (Ipv4Addr::new(192, 88, 99, 0), 24),  // 6to4 relay anycast (deprecated)
    (Ipv4Addr::new(192, 168, 0, 0), 16),  // private
    (Ipv4Addr::new(198, 18, 0, 0), 15),   // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation
    (Ipv4Addr::new(203, 0, 113, 0), 24),  // documentation
    (Ipv4Addr::new(224, 0, 0, 0), 4),     // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),     // reserved, and the broadcast address
];

fn is_public_v4(address: Ipv4Addr) -> bool {
    let bits = u32::from(address);
    !NOT_PUBLIC_V4.iter().any(|(network, prefix)| {
        let mask = u32::MAX << (32 - u32::from(*prefix));
        bits & mask == u32::from(*network)
    })
}

/// The IPv4 address inside an IPv6 one that stands for it: IPv4-mapped
/// (`::ffff:0:0/96`), IPv4-compatible (`::/96`, but `::` and `::1`),
/// NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`, bits 16 to 48).
fn embedded_v4(address: Ipv6Addr) -> Option<Ipv4Addr> {
    let bits = u128::from(address);
    let low = Ipv4Addr::from(bits as u32);
    let segments = address.segments();
    match segments {
        [0, 0, 0, 0, 0, 0xffff, ..] => Some(low),
        [0, 0, 0, 0, 0, 0, ..] if bits > 1 => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(low),
        [0x2002, high, low_half, ..] => Some(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low_half))),
        _ => None,
    }
}

/// IPv6 ranges inside global unicast (`2000::/3`) that are not public
/// (IANA IPv6 special-purpose registry).
const NOT_PUBLIC_V6: &[(Ipv6Addr, u8)] = &[
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23), // IETF protocol assignments (Teredo, ORCHID, ...)
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20), // documentation
];

/// Only global unicast (`2000::/3`) is public: that leaves out the
/// unspecified and loopback addresses, `64:ff9b:1::/48` (local NAT64),
/// `100::/64` (discard), unique-local `fc00::/7`, link-local `fe80::/10`,
/// site-local `fec0::/10` and multicast `ff00::/8`; then the registry's
/// entries inside it, and `5f00::/16` (SRv6) is outside it too.
fn is_public_v6(address: Ipv6Addr) -> bool {
    let bits = u128::from(address);
    let in_prefix = |network: Ipv6Addr, prefix: u8| {
        let mask = u128::MAX << (128 - u32::from(prefix));
        bits & mask == u128::from(network)
    };
    in_prefix(Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3)
        && !NOT_PUBLIC_V6
            .iter()
            .any(|(network, prefix)| in_prefix(*network, *prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(address: &str) -> bool {
        is_public(address.parse().expect(address))
    }

    /// One address at each end of each range, and the public neighbours.
    #[test]
    fn every_special_purpose_range_is_not_public_and_its_neighbours_are() {
        for not_public in [
            "0.0.0.0",
            "0.255.255.255",
            "10.0.0.0",
            "10.255.255.255",
            "100.64.0.0",
            "100.127.255.255",
            "127.0.0.1",
            "127.255.255.255",
            "169.254.0.0",
            "169.254.169.254",
            "172.16.0.0",
            "172.31.255.255",
            "192.0.0.0",
            "192.0.0.255",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.0.0",
            "192.168.255.255",
            "198.18.0.0",
            "198.19.255.255",
            "198.51.100.1",
            "203.0.113.1",
            "224.0.0.1",
            "239.255.255.255",
            "240.0.0.0",
            "255.255.255.254",
            "255.255.255.255",
        ] {
            assert!(!public(not_public), "{not_public}");
        }
        for neighbour in [
            "1.0.0.0",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.0",
            "192.0.3.0",
            "192.88.98.255",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "203.0.112.255",
            "223.255.255.255",
            "93.184.216.34",
        ] {
            assert!(public(neighbour), "{neighbour}");
        }
    }

    #[test]
    fn every_ipv6_range_that_is_not_global_unicast_or_is_special_is_not_public() {
        for not_public in [
            "::",
            "::1",
            "64:ff9b:1::1",
            "100::1",
            "100::ffff:ffff:ffff:ffff",
            "2001::1",
            "2001:1ff:ffff::1",
            "2001:db8::1",
            "3fff::1",
            "3fff:fff:ffff::1",
            "5f00::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "feff::1",
            "ff02::1",
            "1fff:ffff::1",
            "4000::1",
        ] {
            assert!(!public(not_public), "{not_public}");
        }
        for global in [
            "2001:200::1",
            "2606:4700::1111",
            "2a00:1450::1",
            "3fff:1000::1",
            "2001:db9::1",
        ] {
            assert!(public(global), "{global}");
        }
    }

    /// Mapped, compatible, NAT64 and 6to4 addresses are as public as the
    /// IPv4 address they carry.
    #[test]
    fn an_ipv6_address_embedding_an_ipv4_one_is_classified_by_it() {
        for not_public in [
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::c612:1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2002:c0a8:101::",
            "2002:f000::",
        ] {
            assert!(!public(not_public), "{not_public}");
        }
        for public_inside in [
            "::ffff:1.1.1.1",
            "::8.8.8.8",
            "64:ff9b::1.1.1.1",
            "2002:0101:0101::1",
        ] {
            assert!(public(public_inside), "{public_inside}");
        }
    }

    #[tokio::test]
    async fn a_host_resolving_to_loopback_is_refused_and_connected_when_allowed() {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(matches!(
            connect("localhost", port, PrivateAddresses::Refused).await,
            Err(ConnectError::PrivateAddress(_))
        ));
        connect("127.0.0.1", port, PrivateAddresses::Allowed)
            .await
            .expect("allowed");
    }
}
