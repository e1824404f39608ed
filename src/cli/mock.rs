//! `toolgate mock`: the scripted provider ([`crate::mock`]) on a port, until
//! SIGINT or SIGTERM.

use std::io::Write as _;
use std::sync::Arc;

use crate::cli::args::MockArgs;
use crate::config::Tls;
use crate::error::Error;
use crate::mock::{Provider, Script};

/// Serves the script; the address it listens on is the one line on stdout.
pub async fn run(a: &MockArgs) -> Result<(), Error> {
    let mut script = match &a.script {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
            Script::parse(&path.display().to_string(), &text)?
        }
        None => Script::builtin()?,
    };
    if let Some(ms) = a.event_delay_ms {
        script.event_delay_ms = ms;
    }
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => {
            let cfg = crate::net::tls::server_config(&Tls {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: None,
            })?;
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(cfg)))
        }
        _ => None,
    };
    let provider = Provider::serve(&a.listen, vec![script.reply()], tls, 0).await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "toolgate mock: listening on {}", provider.addr)
        .and_then(|_| out.flush())
        .map_err(|e| Error::io("cannot write to stdout", e))?;
    drop(out);
    crate::server::signal::wait().await;
    Ok(())
}
