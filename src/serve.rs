//! Serving a hyper 1 HTTP/1 service on a listener until told to stop: the accept loop the
//! bridge and the scripted model server share.

use std::future::Future;

use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The two ends of an accepted connection.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    /// The address the server accepted the connection at.
    pub local: std::net::SocketAddr,
    /// The client's address.
    pub remote: std::net::SocketAddr,
}

/// Accept connections and serve each with `handle` until `stop` changes; then abort the
/// open connections and wait for them.
pub async fn accept_loop<H, Fut, B>(
    listener: TcpListener,
    handle: H,
    mut stop: watch::Receiver<bool>,
) where
    H: Fn(Peer, Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => {
                let Ok((stream, remote)) = accepted else {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                };
                let Ok(local) = stream.local_addr() else { continue };
                let peer = Peer { local, remote };
                let h = handle.clone();
                conns.spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let fut = h(peer, req);
                        async move { Ok::<_, std::convert::Infallible>(fut.await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}
