//! A TCP proxy for partitions against any server, TLS included (bytes pass through unchanged,
//! so a client keeps verifying the server's own certificate). [`SilencingProxy::silence`] makes
//! every connection open at that moment stop forwarding, both ways, while staying open: as a
//! proxy or NAT that dropped its flows without telling either end. Connections opened later
//! work, so a client that finds its connection dead and opens another gets through, unless
//! [`SilencingProxy::refuse_new`] cut the rest of the path as well (then each new connection
//! is closed as soon as it is accepted), or [`SilencingProxy::black_hole_new`] made it drop
//! packets silently (then each new connection is accepted and never answered: a TLS client's
//! handshake hangs, as its connect would on a path that drops packets).

use std::net::SocketAddr;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The proxy; it stops (and drops every connection) when dropped.
pub struct SilencingProxy {
    addr: SocketAddr,
    /// Bumped by each [`SilencingProxy::silence`]; a connection follows the value it was
    /// opened under and goes silent when it changes.
    silence: watch::Sender<u64>,
    /// New connections are closed at once.
    refusing: Arc<AtomicBool>,
    /// New connections are held open and never answered.
    black_holing: Arc<AtomicBool>,
    accept: tokio::task::JoinHandle<()>,
}

impl SilencingProxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<SilencingProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let silence = watch::Sender::new(0);
        let switch = silence.clone();
        let refusing = Arc::new(AtomicBool::new(false));
        let refuse = refusing.clone();
        let black_holing = Arc::new(AtomicBool::new(false));
        let black_hole = black_holing.clone();
        let accept = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        if refuse.load(Ordering::SeqCst) {
                            drop(client);
                        } else if black_hole.load(Ordering::SeqCst) {
                            connections.spawn(async move {
                                let _held = client;
                                std::future::pending::<()>().await;
                            });
                        } else {
                            connections.spawn(forward(client, upstream, switch.subscribe()));
                        }
                    }
                    Some(_) = connections.join_next() => {}
                }
            }
        });
        Ok(SilencingProxy {
            addr,
            silence,
            refusing,
            black_holing,
            accept,
        })
    }

    /// Where clients connect: `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every connection open now goes silent for good; later ones are forwarded.
    pub fn silence(&self) {
        self.silence.send_modify(|n| *n += 1);
    }

    /// From now on every new connection is closed as soon as it is accepted (the open ones
    /// are left as they are: [`SilencingProxy::silence`] them too for a full partition).
    pub fn refuse_new(&self) {
        self.refusing.store(true, Ordering::SeqCst);
    }

    /// From now on every new connection is accepted and then neither forwarded nor closed:
    /// nothing it sends is answered (the open ones are left as they are).
    pub fn black_hole_new(&self) {
        self.black_holing.store(true, Ordering::SeqCst);
    }
}

impl Drop for SilencingProxy {
    /// Aborting the accept loop drops its `JoinSet`, which aborts every connection.
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copies bytes both ways until either side closes or the switch moves; then holds both
/// sockets open and silent until the proxy stops.
async fn forward(mut client: TcpStream, upstream: SocketAddr, mut silence: watch::Receiver<u64>) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    silence.borrow_and_update();
    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        tokio::select! {
            // The switch first: once it has moved, not one more byte is forwarded.
            biased;
            changed = silence.changed() => {
                if changed.is_ok() {
                    std::future::pending::<()>().await;
                }
                return;
            }
            read = client.read(&mut up) => {
                let Ok(n @ 1..) = read else { return };
                if server.write_all(&up[..n]).await.is_err() {
                    return;
                }
            }
            read = server.read(&mut down) => {
                let Ok(n @ 1..) = read else { return };
                if client.write_all(&down[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// An echo server: each connection gets back what it sends.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n @ 1..) = socket.read(&mut buf).await {
                        if socket.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn round_trip(socket: &mut TcpStream, wait: Duration) -> Option<Vec<u8>> {
        socket.write_all(b"ping").await.ok()?;
        let mut buf = [0u8; 4];
        match tokio::time::timeout(wait, socket.read_exact(&mut buf)).await {
            Ok(Ok(_)) => Some(buf.to_vec()),
            _ => None,
        }
    }

    /// An open connection stops carrying bytes (and is not closed); a new one works.
    #[tokio::test]
    async fn silenced_connections_stay_open_and_mute_while_new_ones_work() {
        let proxy = SilencingProxy::start(echo().await).await.unwrap();
        let mut old = TcpStream::connect(proxy.addr()).await.unwrap();
        let patience = Duration::from_secs(10);
        assert_eq!(
            round_trip(&mut old, patience).await.as_deref(),
            Some(&b"ping"[..])
        );
        proxy.silence();
        // The switch is seen by the connection's task before it reads again: a bounded wait
        // for an answer that must never come (no other condition shows a silence).
        assert_eq!(round_trip(&mut old, Duration::from_millis(500)).await, None);
        let mut new = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(
            round_trip(&mut new, patience).await.as_deref(),
            Some(&b"ping"[..])
        );
        let mut byte = [0u8; 1];
        let closed = tokio::time::timeout(Duration::from_millis(200), old.read(&mut byte)).await;
        assert!(
            closed.is_err(),
            "the silenced connection is held open: {closed:?}"
        );
    }

    /// A black-holed path: new connections are accepted and never answered nor closed, while
    /// the one already open keeps working.
    #[tokio::test]
    async fn black_holed_new_connections_are_held_open_and_unanswered() {
        let proxy = SilencingProxy::start(echo().await).await.unwrap();
        let mut old = TcpStream::connect(proxy.addr()).await.unwrap();
        let patience = Duration::from_secs(10);
        assert_eq!(
            round_trip(&mut old, patience).await.as_deref(),
            Some(&b"ping"[..])
        );
        proxy.black_hole_new();
        let mut new = TcpStream::connect(proxy.addr()).await.unwrap();
        // A bounded wait for an answer that must never come.
        assert_eq!(round_trip(&mut new, Duration::from_millis(500)).await, None);
        let mut byte = [0u8; 1];
        let closed = tokio::time::timeout(Duration::from_millis(200), new.read(&mut byte)).await;
        assert!(
            closed.is_err(),
            "the new connection is held open: {closed:?}"
        );
        assert_eq!(
            round_trip(&mut old, patience).await.as_deref(),
            Some(&b"ping"[..])
        );
    }
}
