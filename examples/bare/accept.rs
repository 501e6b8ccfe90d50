//! What the floors of the load scripts (`bare_handler`, `bare_ext_authz`) share: the runtime
//! `psp-gateway serve` runs on (a multi-thread tokio runtime with its default worker count)
//! and a listener that serves each accepted connection, with `TCP_NODELAY`, on a task of its
//! own.

use std::future::Future;
use std::net::SocketAddr;

use tokio::net::TcpStream;

/// Serves every connection accepted on `addr` with `serve`, for ever.
pub fn serve_connections<F, Fut>(addr: SocketAddr, serve: F)
where
    F: Fn(TcpStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(serve(stream));
        }
    });
}
