//! The dev server's connections, seen from the sockets of this process (the server runs in it).

use std::mem::ManuallyDrop;
use std::net::TcpStream;
use std::os::fd::FromRawFd;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kubewasm_devserver::{DevServer, Options};

/// `(local port, TCP_NODELAY)` of every TCP connection this process has open.
fn tcp_connections() -> Vec<(u16, bool)> {
    let mut connections = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd lists this process's fds")
    {
        let Some(fd) = entry
            .ok()
            .and_then(|e| e.file_name().to_str()?.parse::<i32>().ok())
        else {
            continue;
        };
        // Borrowed, never closed: the descriptor belongs to whoever opened it.
        // SAFETY: `ManuallyDrop` keeps the stream from closing `fd`; only getsockopt/getsockname
        // are called, which fail harmlessly on a descriptor that is no TCP socket.
        let stream = ManuallyDrop::new(unsafe { TcpStream::from_raw_fd(fd) });
        if let (Ok(local), Ok(_peer), Ok(nodelay)) =
            (stream.local_addr(), stream.peer_addr(), stream.nodelay())
        {
            connections.push((local.port(), nodelay));
        }
    }
    connections
}

/// Accepted connections send small answers at once (TCP_NODELAY): with Nagle's algorithm, an
/// answer written in parts waits for the client's delayed ACK, about 40 ms a request.
#[tokio::test]
async fn accepted_connections_have_nodelay() {
    let server = DevServer::start(Options::default()).await.expect("start");
    let port: u16 = server
        .url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the URL ends with the port");
    Api::<ConfigMap>::namespaced(server.client(), "default")
        .list(&Default::default())
        .await
        .expect("a request opens a connection");
    let accepted: Vec<bool> = tcp_connections()
        .into_iter()
        .filter(|(local, _)| *local == port)
        .map(|(_, nodelay)| nodelay)
        .collect();
    assert!(
        !accepted.is_empty(),
        "no accepted connection on port {port}"
    );
    assert!(accepted.iter().all(|nodelay| *nodelay), "{accepted:?}");
    server.shutdown().await;
}
