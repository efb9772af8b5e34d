//! A forwarder to a server on loopback that holds what it carries for half
//! a round trip each way, as a distant link does: a message sent through
//! it is answered a round trip later at the earliest, and messages sent
//! together overlap their waits (it delays, it does not queue), so a
//! client that pipelines its requests shows it and one that waits for
//! each answer before the next does not. Its connections end with the
//! peers'; dropping it stops accepting.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::task::JoinHandle;

/// A slow link to `127.0.0.1:<target>`, listening on `127.0.0.1:<port>`.
#[derive(Debug)]
pub struct SlowLink {
    pub port: u16,
    accepting: JoinHandle<()>,
}

impl SlowLink {
    pub async fn start(target: u16, round_trip: Duration) -> Self {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind the slow link");
        let port = listener.local_addr().expect("its address").port();
        let accepting = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let _ = inbound.set_nodelay(true);
                tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else {
                        return;
                    };
                    let _ = outbound.set_nodelay(true);
                    let (from_client, to_client) = inbound.into_split();
                    let (from_server, to_server) = outbound.into_split();
                    let one_way = round_trip / 2;
                    tokio::join!(
                        held(from_client, to_server, one_way),
                        held(from_server, to_client, one_way)
                    );
                });
            }
        });
        SlowLink { port, accepting }
    }

    /// The link as a websocket URL.
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }
}

impl Drop for SlowLink {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Copies `from` to `to`, each chunk written `delay` after it was read.
async fn held(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (chunks, mut due) = tokio::sync::mpsc::unbounded_channel();
    let reading = async move {
        let mut buffer = vec![0; 16 * 1024];
        while let Ok(read @ 1..) = from.read(&mut buffer).await {
            let at = tokio::time::Instant::now() + delay;
            if chunks.send((at, buffer[..read].to_vec())).is_err() {
                break;
            }
        }
    };
    let writing = async move {
        while let Some((at, chunk)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reading, writing);
}
