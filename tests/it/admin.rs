//! The admin port through the binary: bounded as the data port is and
//! never at its expense; state changes need `[admin] token_env`'s token; a
//! `Host` that names no address of the port is refused (DNS rebinding).

use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::bin::Bin;
use crate::support::*;

fn allow_all() -> [(&'static str, &'static str); 1] {
    [("p.toml", ALLOW_ALL)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_changes_need_the_token_and_hosts_must_name_the_port() {
    let mock = start_mock(vec![Reply::json(200, "{}")]).await;
    // Without a token configured, nothing may change state.
    let bin = Bin::start(&mock.base_url(), &allow_all(), "").await;
    let reload = format!("{}/reload", bin.admin);
    let r = send("POST", &reload, &[("authorization", "Bearer anything")], "").await;
    assert_eq!(r.status, 403, "{}", r.text());
    drop(bin);

    let extra = "[admin]\nhosts = [\"toolgate.internal\"]\n";
    let env = [("TOOLGATE_ADMIN_TOKEN", "admin-token-1")];
    let bin = Bin::start_env(&mock.base_url(), &allow_all(), extra, &env).await;
    let reload = format!("{}/reload", bin.admin);
    // A cross-site form: no Authorization, a simple content type.
    let form = [
        ("content-type", "application/x-www-form-urlencoded"),
        ("origin", "http://evil.example"),
    ];
    assert_eq!(send("POST", &reload, &form, "a=1").await.status, 401);
    let wrong = [("authorization", "Bearer admin-token-2")];
    assert_eq!(send("POST", &reload, &wrong, "").await.status, 401);
    let right = [("authorization", "Bearer admin-token-1")];
    assert_eq!(send("POST", &reload, &right, "").await.status, 202);
    // DNS rebinding: a page from evil.example rebound to this address.
    let metrics = format!("{}/metrics", bin.admin);
    let rebound = [("host", "evil.example:9090")];
    let r = send("GET", &metrics, &rebound, "").await;
    assert_eq!(r.status, 421, "{}", r.text());
    assert!(!r.text().contains("toolgate_"));
    let r = send("POST", &reload, &[("host", "evil.example"), right[0]], "").await;
    assert_eq!(r.status, 421);
    let named = [("host", "toolgate.internal:9090")];
    assert_eq!(send("GET", &metrics, &named, "").await.status, 200);
    assert_eq!(send("GET", &metrics, &[], "").await.status, 200);
    // The token never reaches the log.
    assert!(!bin.stderr().contains("admin-token-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_flood_never_stops_the_data_port() {
    let whole = json!({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "hi"}}]});
    let mock = start_mock(vec![Reply::json(200, whole.to_string())]).await;
    // 256 descriptors: without a cap, 400 idle admin connections would take
    // every one the data port needs.
    let bin = Bin::start_limited(
        &mock.base_url(),
        &allow_all(),
        "limits.header_read_timeout_secs = 2",
        256,
    )
    .await;
    let admin = bin.admin.trim_start_matches("http://").to_string();
    let mut idle = Vec::new();
    for _ in 0..400 {
        if let Ok(s) = tokio::net::TcpStream::connect(&admin).await {
            idle.push(s);
        }
    }
    // Some send half a head and stop.
    for s in idle.iter_mut().take(20) {
        let _ = s
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Over the cap (64) the admin port closes a connection at once: it
    // holds no descriptor the data port keeps room for.
    let mut buf = [0u8; 1];
    let closed = idle
        .iter()
        .filter(|s| matches!(s.try_read(&mut buf), Ok(0)))
        .count();
    assert!(
        closed >= idle.len() - 64,
        "{closed} of {} closed",
        idle.len()
    );
    for i in 0..5 {
        let url = format!("{}/v1/chat/completions", bin.url);
        let body = chat_request(false, &["t"]).to_string();
        let a = send("POST", &url, &[("content-type", "application/json")], body).await;
        assert_eq!(a.status, 200, "request {i} on the data port: {}", a.text());
    }
    // The idle ones are closed by the head timeout; then the admin port answers again.
    let mut healthy = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if try_get(&format!("{}/healthz", bin.admin)).await == Some(200) {
            healthy = true;
            break;
        }
    }
    assert!(healthy, "the admin port answers once the flood is reaped");
    drop(idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_however_many_admin_connections_sit_idle_or_slow() {
    let mock = start_mock(vec![]).await;
    let bin = Bin::start(&mock.base_url(), &allow_all(), "").await;
    let admin = bin.admin.trim_start_matches("http://").to_string();
    // More than the cap (64), each sending one byte and then nothing, held
    // for longer than a probe's patience and within the head timeout.
    let mut slow = Vec::new();
    for _ in 0..100 {
        let mut s = tokio::net::TcpStream::connect(&admin).await.unwrap();
        let _ = s.write_all(b"G").await;
        slow.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for probe in ["healthz", "readyz", "healthz"] {
        let url = format!("{}/{probe}", bin.admin);
        let got = tokio::time::timeout(Duration::from_secs(2), try_get(&url)).await;
        assert_eq!(got, Ok(Some(200)), "{probe} while {} sit idle", slow.len());
    }
    drop(slow);
}
