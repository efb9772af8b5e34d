//! A service manager's notification socket, bound by the test: what the
//! daemon tells systemd under `Type=notify` (`READY=1`, `STOPPING=1`)
//! through `$NOTIFY_SOCKET`.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;

use super::temp_dir;

#[derive(Debug)]
pub struct NotifySocket {
    socket: UnixDatagram,
    path: PathBuf,
}

impl NotifySocket {
    /// Binds a datagram socket in a fresh directory.
    pub fn bind() -> Self {
        let path = temp_dir("notify").join("notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind the notify socket");
        socket.set_nonblocking(true).expect("non-blocking");
        NotifySocket { socket, path }
    }

    /// `NOTIFY_SOCKET` for the daemon's environment.
    pub fn env(&self) -> (&str, &str) {
        ("NOTIFY_SOCKET", self.path.to_str().expect("utf-8 path"))
    }

    /// Every state received so far, in order (one per line of each
    /// datagram): read once the daemon has exited, it is all it said.
    pub fn received(&self) -> Vec<String> {
        let mut states = Vec::new();
        let mut buffer = [0u8; 4096];
        while let Ok(length) = self.socket.recv(&mut buffer) {
            let datagram = String::from_utf8_lossy(&buffer[..length]);
            states.extend(datagram.lines().map(str::to_owned));
        }
        states
    }
}
