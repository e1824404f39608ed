//! `toolgate health`: asks a running toolgate's admin port whether it is ready;
//! the container HEALTHCHECK (distroless images have no curl).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::error::Error;

/// `Ok(())` when `GET http://ADDR/readyz` answers 200 within two seconds.
pub async fn check(addr: &str) -> Result<(), Error> {
    let uri: http::Uri = format!("http://{addr}/readyz")
        .parse()
        .map_err(|_| Error::BadRequest(format!("not a host:port: {addr}")))?;
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let why = match tokio::time::timeout(Duration::from_secs(2), client.get(uri)).await {
        Ok(Ok(r)) if r.status() == http::StatusCode::OK => return Ok(()),
        Ok(Ok(r)) => format!("/readyz answered {}", r.status()),
        Ok(Err(e)) => format!("{e}"),
        Err(_) => "no answer in 2 s".to_string(),
    };
    Err(Error::io(
        format!("toolgate at {addr} is not ready"),
        std::io::Error::other(why),
    ))
}
