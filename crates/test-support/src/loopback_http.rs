//! A loopback HTTP/1 server on a thread and runtime of its own, the ground
//! the tests' stand-ins (the fake model provider, the Blossom server) stand
//! on: it serves sync tests, async tests and tests with a paused clock
//! alike, and stops when dropped.

use std::convert::Infallible;
use std::future::Future;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::thread::JoinHandle;

use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A running server; stops when dropped.
#[derive(Debug)]
pub(crate) struct LoopbackHttp {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl LoopbackHttp {
    /// Serves on a free loopback port, on a thread named `name-PORT`; each
    /// request is answered by `answer(request, the server's address)`.
    pub(crate) fn start<A, Fut, B>(name: &str, answer: A) -> std::io::Result<LoopbackHttp>
    where
        A: Fn(Request<Incoming>, SocketAddr) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Response<B>> + Send + 'static,
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let listener = StdTcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel();
        let name = format!("{name}-{}", addr.port());
        let thread = std::thread::Builder::new().name(name.clone()).spawn(move || {
            runtime.block_on(async move {
                let listener = match TcpListener::from_std(listener) {
                    Ok(listener) => listener,
                    Err(error) => panic!("{name} cannot listen on {addr}: {error}"),
                };
                tokio::select! {
                    _ = stopped => {}
                    () = accept_loop(listener, addr, answer) => {}
                }
            });
        })?;
        Ok(LoopbackHttp {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

async fn accept_loop<A, Fut, B>(listener: TcpListener, addr: SocketAddr, answer: A)
where
    A: Fn(Request<Incoming>, SocketAddr) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let answer = answer.clone();
        let service = service_fn(move |request| {
            let answered = answer(request, addr);
            async move { Ok::<_, Infallible>(answered.await) }
        });
        tokio::spawn(async move {
            // A client hanging up mid-answer ends the connection with an
            // error; there is nothing more to do with it.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

impl Drop for LoopbackHttp {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
