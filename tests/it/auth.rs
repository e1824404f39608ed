//! Client authentication: `[[client]]` tokens → principals; a generic 401
//! otherwise; refusing to listen beyond loopback without clients.

use std::path::Path;

use serde_json::json;

use crate::support::*;

const TOKEN: &str = "tg-client-alpha-7f3c9a2b1d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_token_names_the_principal_and_anything_else_is_a_generic_401() {
    std::env::set_var("TG_IT_CLIENT_ALPHA", TOKEN);
    let body = one_call_stream("t", "{}");
    let mock = start_mock(vec![Reply::sse(body)]).await;
    let extra = "[[client]]\nname = \"alpha\"\ntoken_env = \"TG_IT_CLIENT_ALPHA\"\n\n[[client]]\nname = \"beta\"\ntoken_sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n";
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, extra).await;
    let url = format!("{}/v1/chat/completions", gate.url);
    let mut req = chat_request(true, &["t"]);
    req["messages"] = json!([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": format!("leaked {TOKEN}")}]);
    for headers in [
        vec![],
        vec![("authorization", "Bearer wrong-token")],
        vec![("authorization", "Basic abc")],
    ] {
        let a = send("POST", &url, &headers, req.to_string()).await;
        assert_eq!(a.status, 401, "{headers:?}");
        assert_eq!(a.json()["error"]["message"], "Invalid authentication.");
        assert!(!a.text().contains("alpha") && !a.text().contains("beta"));
    }
    let a = send("GET", &format!("{}/v1/models", gate.url), &[], "").await;
    assert_eq!(a.status, 401, "pass-through paths need a token too");
    assert!(
        mock.requests().is_empty(),
        "nothing unauthenticated reaches the upstream"
    );
    let bearer = format!("Bearer {TOKEN}");
    let a = send(
        "POST",
        &url,
        &[("authorization", bearer.as_str())],
        req.to_string(),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let seen = &mock.requests()[0];
    assert_eq!(
        seen.headers["authorization"],
        format!("Bearer {UPSTREAM_KEY}"),
        "the client token is replaced by the upstream key"
    );
    assert!(
        !String::from_utf8_lossy(&seen.body).contains(TOKEN),
        "a client token in a tool result is redacted"
    );
    assert!(String::from_utf8_lossy(&seen.body).contains("[REDACTED:client_token]"));
    let audit = gate.audit_flushed().await;
    let call = audit.iter().find(|r| r["tool"] == "t").unwrap();
    assert_eq!(call["principal"], "alpha");
    assert_eq!(call["signals"]["principal"]["value"], "alpha");
    gate.stop().await;
}

#[test]
fn listening_beyond_loopback_needs_clients_or_an_explicit_anonymous() {
    let cfg = |s: &str| toolgate::Config::from_toml(s, "t.toml", Path::new("."));
    let err = cfg("[listen]\naddr = \"0.0.0.0:8080\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("t.toml:2:") && err.contains("no [[client]]"),
        "{err}"
    );
    assert!(cfg("[listen]\naddr = \"0.0.0.0:8080\"\nallow_anonymous = true\n").is_ok());
    let with_client = "[listen]\naddr = \"0.0.0.0:8080\"\n[[client]]\nname = \"a\"\ntoken_sha256 = \"00000000000000000000000000000000000000000000000000000000000000ff\"\n";
    assert!(cfg(with_client).is_ok());
    let err = cfg(&format!(
        "{with_client}[upstream]\nauth = \"passthrough\"\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("cannot be used with [[client]]"), "{err}");
    let err = cfg("[[client]]\nname = \"a\"\ntoken_env = \"TG_IT_SURELY_UNSET_VAR\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("TG_IT_SURELY_UNSET_VAR is not set"), "{err}");
    let err = cfg("[[client]]\nname = \"a\"\ntoken_sha256 = \"xyz\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("64 hex digits"), "{err}");
    // A certificate name: only one kind of credential, and only where a
    // client CA verifies the certificates that carry it.
    let err = cfg("[[client]]\nname = \"a\"\ncert_cn = \"agent\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs [listen.tls] client_ca"), "{err}");
    let err = cfg("[[client]]\nname = \"a\"\ncert_cn = \"x\"\ncert_uri = \"spiffe://x\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("set one of cert_cn and cert_uri"), "{err}");
    let err = cfg("[[client]]\nname = \"a\"\ncert_uri = \"spiffe://x\"\ntoken_sha256 = \"00000000000000000000000000000000000000000000000000000000000000ff\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("exactly one of token_env, token_sha256, cert_cn and cert_uri"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_authentication_is_warned_once_per_while_and_counted() {
    let hash = toolgate::digest::sha256_hex(TOKEN.as_bytes());
    let extra = format!("[[client]]\nname = \"alpha\"\ntoken_sha256 = \"{hash}\"\n");
    let bin =
        crate::bin::Bin::start("http://127.0.0.1:9/v1", &[("p.toml", ALLOW_ALL)], &extra).await;
    for _ in 0..5 {
        let a = send(
            "POST",
            &format!("{}/v1/chat/completions", bin.url),
            &[("authorization", "Bearer not-the-token")],
            "{}",
        )
        .await;
        assert_eq!(a.status, 401);
    }
    let metrics = send("GET", &format!("{}/metrics", bin.admin), &[], "")
        .await
        .text();
    assert!(
        metrics.contains("toolgate_auth_failures_total 5"),
        "{metrics}"
    );
    let log = bin.stderr();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("client authentication failed"))
        .collect();
    assert_eq!(lines.len(), 1, "one warning for a burst: {log}");
    assert!(
        lines[0].contains("WARN") && lines[0].contains("failures=1"),
        "{}",
        lines[0]
    );
    assert!(!log.contains("not-the-token"), "the token is never logged");
}
