//! One upstream socket, plain TCP or TLS, opened within the connect timeout.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::resolve::Resolver;
use crate::error::{Error, Fault};

/// Where connections go: host, port and, for `https`, the TLS settings.
pub struct Target {
    resolver: Resolver,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    connect_timeout: Duration,
    /// HTTP/2 is offered to a TLS upstream.
    http2: bool,
}

/// An open connection, and whether TLS chose HTTP/2 for it.
pub struct Opened {
    pub stream: Stream,
    pub h2: bool,
}

impl Target {
    /// `tls` is the client config for an `https` origin (ALPN is set here:
    /// HTTP/2 and HTTP/1.1, or HTTP/1.1 alone without `http2`).
    pub fn new(
        authority: &http::uri::Authority,
        tls: Option<rustls::ClientConfig>,
        connect_timeout: Duration,
        http2: bool,
    ) -> Result<Target, Error> {
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = authority
            .port_u16()
            .unwrap_or(if tls.is_some() { 443 } else { 80 });
        let tls = match tls {
            Some(mut cfg) => {
                cfg.alpn_protocols = match http2 {
                    true => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
                    false => vec![b"http/1.1".to_vec()],
                };
                let name = ServerName::try_from(host.clone()).map_err(|_| {
                    Error::config("<config>", 1, "the upstream host is not a valid TLS name")
                })?;
                Some((TlsConnector::from(Arc::new(cfg)), name))
            }
            None => None,
        };
        Ok(Target {
            resolver: Resolver::new(&host, port),
            tls,
            connect_timeout,
            http2,
        })
    }

    /// Whether connections may choose HTTP/2: TLS, with HTTP/2 offered.
    pub fn offers_h2(&self) -> bool {
        self.tls.is_some() && self.http2
    }

    /// Opens a connection (name lookup, TCP, TLS) within the connect timeout.
    pub async fn open(&self) -> Result<Opened, Error> {
        match tokio::time::timeout(self.connect_timeout, self.open_now()).await {
            Ok(r) => r,
            Err(_) => {
                // The name may have moved on from the addresses tried.
                self.resolver.forget();
                Err(Error::UpstreamConnect(
                    Fault::ConnectTimeout,
                    "connect timed out".into(),
                ))
            }
        }
    }

    async fn open_now(&self) -> Result<Opened, Error> {
        let unreachable = |e: io::Error| Error::UpstreamConnect(Fault::Refused, e.to_string());
        let addrs = self.resolver.addrs().await.map_err(unreachable)?;
        let tcp = match TcpStream::connect(&addrs[..]).await {
            Ok(tcp) => tcp,
            Err(e) => {
                self.resolver.forget();
                return Err(unreachable(e));
            }
        };
        tcp.set_nodelay(true).map_err(unreachable)?;
        let Some((connector, name)) = &self.tls else {
            return Ok(Opened {
                stream: Stream::Plain(tcp),
                h2: false,
            });
        };
        let tls = connector
            .connect(name.clone(), tcp)
            .await
            .map_err(|e| Error::UpstreamConnect(Fault::Tls, e.to_string()))?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        Ok(Opened {
            stream: Stream::Tls(Box::new(tls)),
            h2,
        })
    }
}

/// A plain or TLS socket, read and written alike.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
