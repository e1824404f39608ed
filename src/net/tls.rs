//! TLS on the data port: a rustls server config from PEM files (ALPN `h2` and
//! `http/1.1`, optional client-certificate verification), rebuilt when the files change.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::Tls;
use crate::digest::stamp::{self, Stamp};
use crate::error::Error;

fn bad(path: &Path, message: String) -> Error {
    Error::config(path.display().to_string(), 1, message)
}

/// Every certificate in a PEM file; an unreadable file or one without a
/// certificate is an error naming the file.
pub fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| bad(path, format!("cannot read {what}: {e}")))?;
    if certs.is_empty() {
        return Err(bad(path, format!("no certificate in {what}")));
    }
    Ok(certs)
}

fn roots(path: &Path) -> Result<RootCertStore, Error> {
    let mut roots = RootCertStore::empty();
    for c in read_certs(path, "client CA file")? {
        roots
            .add(c)
            .map_err(|e| bad(path, format!("bad CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// Builds the server config from the files as they are now.
pub fn server_config(tls: &Tls) -> Result<ServerConfig, Error> {
    let certs = read_certs(&tls.cert, "certificate file")?;
    let key = PrivateKeyDer::from_pem_file(&tls.key)
        .map_err(|e| bad(&tls.key, format!("cannot read private key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(&tls.cert, e.to_string()))?;
    let builder = match &tls.client_ca {
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider)
                    .build()
                    .map_err(|e| bad(ca, format!("client CA: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder
        .with_single_cert(certs, key)
        .map_err(|e| bad(&tls.cert, format!("certificate and key do not match: {e}")))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

/// The current server config, and the file stamps it was built from.
pub struct Certs {
    tls: Tls,
    paths: Vec<PathBuf>,
    current: RwLock<(Arc<ServerConfig>, Vec<Stamp>)>,
}

impl Certs {
    /// Loads the files; any problem is an error before a port is bound.
    pub fn load(tls: &Tls) -> Result<Certs, Error> {
        let mut paths = vec![tls.cert.clone(), tls.key.clone()];
        paths.extend(tls.client_ca.clone());
        let s = stamp::of_files(&paths);
        let cfg = server_config(tls)?;
        Ok(Certs {
            tls: tls.clone(),
            paths,
            current: RwLock::new((Arc::new(cfg), s)),
        })
    }

    /// The config new connections are accepted with.
    pub fn config(&self) -> Arc<ServerConfig> {
        match self.current.read() {
            Ok(g) => g.0.clone(),
            Err(p) => p.into_inner().0.clone(),
        }
    }

    /// Rebuilds the config when a file changed. On failure the last good
    /// config stays and the error is returned; `Ok(true)` means reloaded.
    pub fn reload_if_changed(&self) -> Result<bool, Error> {
        let now = stamp::of_files(&self.paths);
        let same = match self.current.read() {
            Ok(g) => g.1 == now,
            Err(p) => p.into_inner().1 == now,
        };
        if same {
            return Ok(false);
        }
        let built = server_config(&self.tls);
        let mut g = match self.current.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        // Remember the stamp either way, so a bad file is reported once per change.
        g.1 = now;
        g.0 = Arc::new(built?);
        Ok(true)
    }
}
