//! `toolgate certs dev`: a development CA, a server certificate for
//! `localhost`/`127.0.0.1`/`::1`, and a client certificate for mutual TLS
//! (common name `toolgate-dev-client`, URI `spiffe://toolgate.dev/client`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use crate::error::Error;

/// The files written, in order.
pub const FILES: [&str; 5] = [
    "ca.pem",
    "server.pem",
    "server-key.pem",
    "client.pem",
    "client-key.pem",
];

/// The SPIFFE-style URI the development client certificate carries
/// (`[[client]] cert_uri` can name it).
pub const DEV_CLIENT_URI: &str = "spiffe://toolgate.dev/client";

fn gen_err(e: rcgen::Error) -> Error {
    Error::config(
        "certs dev",
        0,
        format!("certificate generation failed: {e}"),
    )
}

/// Valid from the start of this year for two years: short enough for a dev
/// certificate, long enough never to surprise a developer.
fn validity(p: &mut CertificateParams) {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let year = 1970 + (secs / 31_556_952) as i32;
    p.not_before = rcgen::date_time_ymd(year, 1, 1);
    p.not_after = rcgen::date_time_ymd(year + 2, 1, 1);
}

fn leaf(
    names: &[&str],
    uri: Option<&str>,
    cn: &str,
    usage: ExtendedKeyUsagePurpose,
    ca: &Issuer<'_, KeyPair>,
) -> Result<(String, String), Error> {
    let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .map_err(gen_err)?;
    if let Some(uri) = uri {
        p.subject_alt_names
            .push(SanType::URI(uri.try_into().map_err(gen_err)?));
    }
    p.distinguished_name.push(DnType::CommonName, cn);
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![usage];
    p.use_authority_key_identifier_extension = true;
    validity(&mut p);
    let key = KeyPair::generate().map_err(gen_err)?;
    let cert = p.signed_by(&key, ca).map_err(gen_err)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn write(path: &Path, text: &str, private: bool) -> Result<(), Error> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut f = o
        .open(path)
        .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))
}

/// Generates the files into `out` (created if missing). Existing files are
/// kept unless `force`: regenerating would silently invalidate a deployed CA.
pub fn dev(out: &Path, force: bool) -> Result<Vec<PathBuf>, Error> {
    let paths: Vec<PathBuf> = FILES.iter().map(|f| out.join(f)).collect();
    if !force {
        if let Some(p) = paths.iter().find(|p| p.exists()) {
            return Err(Error::config(
                p.display().to_string(),
                0,
                "already exists; remove it or pass --force to replace the development certificates",
            ));
        }
    }
    std::fs::create_dir_all(out)
        .map_err(|e| Error::io(format!("cannot create {}", out.display()), e))?;
    let mut ca = CertificateParams::default();
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, "toolgate development CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut ca);
    let ca_key = KeyPair::generate().map_err(gen_err)?;
    let ca_pem = ca.self_signed(&ca_key).map_err(gen_err)?.pem();
    // The CA key is never written: to issue more certificates, run this again.
    let issuer = Issuer::new(ca, ca_key);
    let (server, server_key) = leaf(
        &["localhost", "127.0.0.1", "::1"],
        None,
        "localhost",
        ExtendedKeyUsagePurpose::ServerAuth,
        &issuer,
    )?;
    let (client, client_key) = leaf(
        &["toolgate-dev-client"],
        Some(DEV_CLIENT_URI),
        "toolgate-dev-client",
        ExtendedKeyUsagePurpose::ClientAuth,
        &issuer,
    )?;
    for (path, text, private) in [
        (&paths[0], &ca_pem, false),
        (&paths[1], &server, false),
        (&paths[2], &server_key, true),
        (&paths[3], &client, false),
        (&paths[4], &client_key, true),
    ] {
        write(path, text, private)?;
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Tls;

    #[test]
    fn writes_a_chain_the_server_config_accepts_and_refuses_to_overwrite() {
        let dir = std::env::temp_dir().join(format!("toolgate-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let written = dev(&dir, false).unwrap();
        assert_eq!(written.len(), 5);
        let key = std::fs::read_to_string(dir.join("server-key.pem")).unwrap();
        assert!(key.contains("PRIVATE KEY"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("server-key.pem"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "key readable by others: {mode:o}");
        }
        let tls = Tls {
            cert: dir.join("server.pem"),
            key: dir.join("server-key.pem"),
            client_ca: Some(dir.join("ca.pem")),
        };
        let cfg = crate::net::tls::server_config(&tls).unwrap();
        assert_eq!(
            cfg.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        let again = dev(&dir, false).unwrap_err().to_string();
        assert!(again.contains("already exists"), "{again}");
        assert!(dev(&dir, true).is_ok());
        // A key that does not belong to the certificate is refused.
        let mismatched = Tls {
            key: dir.join("client-key.pem"),
            ..tls
        };
        let e = crate::net::tls::server_config(&mismatched)
            .unwrap_err()
            .to_string();
        assert!(e.contains("do not match"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
