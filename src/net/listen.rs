//! Listening sockets with a backlog sized for bursts of connections.

use std::io;
use std::net::SocketAddr;

use tokio::net::{lookup_host, TcpListener, TcpSocket, ToSocketAddrs};

/// Connections the kernel completes and queues before they are accepted
/// (it caps the number at `net.core.somaxconn`). tokio's `bind` asks for
/// 128: a thousand agents connecting at once overflowed it, and each
/// connection whose SYN was dropped waited a second for the client to try
/// again.
pub const BACKLOG: u32 = 4096;

/// Binds the first address of `addr` that can be bound and listens on it
/// with [`BACKLOG`].
pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
    let mut last = None;
    for a in lookup_host(addr).await? {
        match bind_one(a) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last
        .unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to listen on")))
}

fn bind_one(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // As tokio's own `bind`: a restarted server binds its port again while
    // the old connections linger in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn listens_with_the_backlog_and_accepts() {
        let l = bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        // More connections than tokio's default backlog, none accepted yet:
        // every one completes its handshake.
        let mut open = Vec::new();
        for _ in 0..200 {
            let c = tokio::time::timeout(
                std::time::Duration::from_secs(2),
                tokio::net::TcpStream::connect(addr),
            )
            .await
            .expect("connected without waiting for accept")
            .unwrap();
            open.push(c);
        }
        assert!(l.accept().await.is_ok());
        assert!(bind("no-such-host.invalid:1").await.is_err());
    }
}
