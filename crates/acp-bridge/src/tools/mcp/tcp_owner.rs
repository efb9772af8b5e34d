//! Which user holds the far end of a loopback TCP connection, from the
//! kernel's socket table (`/proc/net/tcp`), as an ident server finds it.
//!
//! A Unix socket tells its peer's credentials (`SO_PEERCRED`); TCP does
//! not, and the MCP server's HTTP listener is TCP on `127.0.0.1` because
//! that is what agents take. Agents may put the server's bearer token in a
//! child's command line (the Claude Agent SDK passes its MCP servers to
//! the `claude` CLI as `--mcp-config <json>`, headers and environment
//! included), which every local user can read in `/proc/<pid>/cmdline`.
//! So the listener also asks who connected, and serves only the agents'
//! user and the daemon's own: a token read off another user's command
//! line is then worth nothing to that user.
//!
//! The table is read for the connection's two ends, after `accept`: the
//! client's socket is the row whose local address is the peer and whose
//! remote address is the listener's end. The table is the network
//! namespace's: agents share the daemon's (they get PID namespaces, not
//! network ones).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// The kernel's IPv4 TCP socket table.
const TCP_TABLE: &str = "/proc/net/tcp";

/// The uid owning the socket at the far end (`peer`) of the connection
/// accepted on `local`, if the table shows it (IPv4 only: the listener is
/// on `127.0.0.1`).
pub(super) fn owner_uid(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    let (SocketAddr::V4(local), SocketAddr::V4(peer)) = (local, peer) else {
        return None;
    };
    let table = std::fs::read_to_string(TCP_TABLE).ok()?;
    find(&table, local, peer)
}

/// The `uid` column of the row of `table` whose local address is `peer`
/// and remote address `local`.
fn find(table: &str, local: SocketAddrV4, peer: SocketAddrV4) -> Option<u32> {
    table.lines().skip(1).find_map(|row| {
        // sl local_address rem_address st queues timer retransmits uid ...
        let columns: Vec<&str> = row.split_whitespace().collect();
        let (near, far, uid) = (columns.get(1)?, columns.get(2)?, columns.get(7)?);
        (address(near)? == peer && address(far)? == local)
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// `0100007F:1F90`: the address as the kernel keeps it (network byte
/// order, printed as a number of the host's order) and the port.
fn address(text: &str) -> Option<SocketAddrV4> {
    let (ip, port) = text.split_once(':')?;
    let ip = u32::from_str_radix(ip, 16).ok()?;
    let port = u16::from_str_radix(port, 16).ok()?;
    Some(SocketAddrV4::new(Ipv4Addr::from(ip.to_ne_bytes()), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_row_of_a_connection_names_its_user() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        let local = server.local_addr().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert_eq!(owner_uid(local, peer), Some(nix::unistd::geteuid().as_raw()));
        // The listener's own row (its ends swapped) is not the client's.
        let unknown = SocketAddr::from(([127, 0, 0, 1], 1));
        assert_eq!(owner_uid(local, unknown), None);
    }

    #[test]
    fn rows_are_read_by_both_ends() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000 65534        0 1 1 0000000000000000 20 4 30 10 -1\n\
   1: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1\n";
        let server = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0x1F90);
        let client = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0x9C40);
        assert_eq!(find(table, server, client), Some(65534));
        assert_eq!(find(table, client, server), Some(0));
        assert_eq!(
            find(table, server, SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1)),
            None
        );
    }
}
