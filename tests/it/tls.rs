//! The TLS listener: a `certs dev` chain end to end over h2 and HTTP/1.1,
//! mutual TLS, and certificate files reloaded on change.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::accumulate::Acc;
use crate::support::*;

fn client_config(dir: &Path, with_client_cert: bool) -> rustls::ClientConfig {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("ca.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    if with_client_cert {
        let certs = CertificateDer::pem_file_iter(dir.join("client.pem"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(dir.join("client-key.pem")).unwrap();
        b.with_client_auth_cert(certs, key).unwrap()
    } else {
        b.with_no_client_auth()
    }
}

/// POSTs a chat request over TLS to `localhost:port` (offering `h2` in ALPN
/// or only `http/1.1`); the HTTP version agreed, the status and the body, or
/// the client's error.
async fn post_tls(
    cfg: rustls::ClientConfig,
    port: u16,
    body: &serde_json::Value,
    h2: bool,
) -> Result<(http::Version, u16, Bytes), String> {
    post_tls_as(cfg, port, body, h2, None).await
}

/// [`post_tls`] with `Authorization: Bearer <token>` when given.
async fn post_tls_as(
    cfg: rustls::ClientConfig,
    port: u16,
    body: &serde_json::Value,
    h2: bool,
    token: Option<&str>,
) -> Result<(http::Version, u16, Bytes), String> {
    let b = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(cfg)
        .https_only()
        .enable_http1();
    let https = if h2 {
        b.enable_http2().build()
    } else {
        b.build()
    };
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(https);
    let mut req = Request::post(format!("https://localhost:{port}/v1/chat/completions"))
        .header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(20), client.request(req))
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| format!("{e:?}"))?;
    let (version, status) = (resp.version(), resp.status().as_u16());
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("{e:?}"))?
        .to_bytes();
    Ok((version, status, bytes))
}

fn tls_extra(certs: &Path, mtls: bool) -> String {
    let mut s = format!(
        "[policy]\nreload_secs = 1\n\n[listen.tls]\ncert = \"{}\"\nkey = \"{}\"\n",
        certs.join("server.pem").display(),
        certs.join("server-key.pem").display()
    );
    if mtls {
        s.push_str(&format!(
            "client_ca = \"{}\"\n",
            certs.join("ca.pem").display()
        ));
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dev_certificate_serves_gated_streams_over_h2_and_http1() {
    let certs = TempDir::new();
    toolgate::cli::certs::dev(&certs.0, false).unwrap();
    let stream = one_call_stream("send_email", "{}");
    let mock = start_mock(vec![Reply::sse(stream.clone()), Reply::sse(stream)]).await;
    let gate = start_gate(
        &mock.base_url(),
        &deny(&["send_email"]),
        &tls_extra(&certs.0, false),
    )
    .await;
    let port = gate.running.as_ref().unwrap().addr.port();
    let req = chat_request(true, &["send_email"]);
    for (h2, want) in [
        (true, http::Version::HTTP_2),
        (false, http::Version::HTTP_11),
    ] {
        let (version, status, body) = post_tls(client_config(&certs.0, false), port, &req, h2)
            .await
            .unwrap();
        assert_eq!((version, status), (want, 200));
        let acc = Acc::from_sse(&body);
        assert!(
            acc.calls_of(0).is_empty(),
            "the denied call was withheld over TLS too"
        );
    }
    // Plain HTTP on the TLS port gets nothing useful.
    let plain = tokio::time::timeout(
        Duration::from_secs(10),
        Client::builder(TokioExecutor::new())
            .build_http::<Full<Bytes>>()
            .get(
                format!("http://127.0.0.1:{port}/v1/models")
                    .parse()
                    .unwrap(),
            ),
    )
    .await
    .unwrap();
    assert!(plain.is_err(), "plaintext was served on the TLS port");
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_refuses_a_client_without_a_certificate() {
    let certs = TempDir::new();
    toolgate::cli::certs::dev(&certs.0, false).unwrap();
    let mock = start_mock(vec![Reply::sse(one_call_stream("t", "{}"))]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, &tls_extra(&certs.0, true)).await;
    let port = gate.running.as_ref().unwrap().addr.port();
    let req = chat_request(true, &["t"]);
    let refused = post_tls(client_config(&certs.0, false), port, &req, true).await;
    assert!(
        refused.is_err(),
        "served without a client certificate: {refused:?}"
    );
    assert!(mock.requests().is_empty(), "nothing reached the upstream");
    let (_, status, body) = post_tls(client_config(&certs.0, true), port, &req, true)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(Acc::from_sse(&body).calls_of(0).len(), 1);
    let metrics = send("GET", &format!("{}/metrics", gate.admin), &[], "").await;
    assert!(
        metrics
            .text()
            .contains("toolgate_tls_handshake_failures_total 1"),
        "{}",
        metrics.text()
    );
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_names_the_principal() {
    let certs = TempDir::new();
    toolgate::cli::certs::dev(&certs.0, false).unwrap();
    let replies = (0..3)
        .map(|_| Reply::sse(one_call_stream("t", "{}")))
        .collect();
    let mock = start_mock(replies).await;
    let extra = format!(
        "{}\n[[client]]\nname = \"dev-agent\"\ncert_uri = \"{}\"\n\n[[client]]\nname = \"ops\"\ncert_cn = \"ops-agent\"\n\n[[client]]\nname = \"token-user\"\ntoken_sha256 = \"{}\"\n",
        tls_extra(&certs.0, true),
        toolgate::cli::certs::DEV_CLIENT_URI,
        toolgate::digest::sha256_hex(b"tok-user")
    );
    let policy = "[[rule]]\nname = \"dev-only\"\ntools = [\"t\"]\nverdict = \"allow\"\nwhen = \"principal == 'dev-agent'\"\n\n[[rule]]\nname = \"others\"\ntools = [\"t\"]\nverdict = \"deny\"\nwhen = \"principal != 'dev-agent'\"\n";
    let gate = start_gate(&mock.base_url(), policy, &extra).await;
    let port = gate.running.as_ref().unwrap().addr.port();
    let req = chat_request(true, &["t"]);
    let cfg = || client_config(&certs.0, true);
    // The certificate alone, and with a placeholder key as SDKs send one.
    for token in [None, Some("sk-placeholder")] {
        let (_, status, body) = post_tls_as(cfg(), port, &req, true, token).await.unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        assert_eq!(
            Acc::from_sse(&body).calls_of(0).len(),
            1,
            "allowed as dev-agent"
        );
    }
    // Another client's token beside the certificate: one request, one identity.
    let (_, status, _) = post_tls_as(cfg(), port, &req, true, Some("tok-user"))
        .await
        .unwrap();
    assert_eq!(status, 401);
    let audit = gate.audit_flushed().await;
    let principals: Vec<&str> = audit
        .iter()
        .filter_map(|r| r["principal"].as_str())
        .collect();
    assert_eq!(principals, ["dev-agent", "dev-agent"], "{audit:?}");
    assert_eq!(mock.requests().len(), 2, "the refused request went nowhere");
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_certificate_files_are_picked_up_and_a_bad_one_keeps_the_last_good() {
    let certs = TempDir::new();
    toolgate::cli::certs::dev(&certs.0, false).unwrap();
    let old = TempDir::new();
    for f in toolgate::cli::certs::FILES {
        std::fs::copy(certs.0.join(f), old.0.join(f)).unwrap();
    }
    let replies = (0..4)
        .map(|_| Reply::sse(one_call_stream("t", "{}")))
        .collect();
    let mock = start_mock(replies).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, &tls_extra(&certs.0, false)).await;
    let port = gate.running.as_ref().unwrap().addr.port();
    let req = chat_request(true, &["t"]);
    assert!(post_tls(client_config(&old.0, false), port, &req, true)
        .await
        .is_ok());

    // A broken key file: the last good certificate keeps serving.
    std::fs::write(certs.0.join("server-key.pem"), "not a key").unwrap();
    let metrics_url = format!("{}/metrics", gate.admin);
    let mut counted = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let m = send("GET", &metrics_url, &[], "").await.text();
        if m.contains("toolgate_tls_reload_failures_total 1") {
            counted = true;
            break;
        }
    }
    assert!(counted, "the bad key was not noticed");
    assert!(post_tls(client_config(&old.0, false), port, &req, true)
        .await
        .is_ok());

    // A new chain: clients trusting only the new CA get in, the old CA no longer works.
    toolgate::cli::certs::dev(&certs.0, true).unwrap();
    let mut switched = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if post_tls(client_config(&certs.0, false), port, &req, true)
            .await
            .is_ok()
        {
            switched = true;
            break;
        }
    }
    assert!(switched, "the new certificate was not picked up");
    assert!(post_tls(client_config(&old.0, false), port, &req, true)
        .await
        .is_err());
    gate.stop().await;
}
