//! `toolgate mock`, the scripted provider the compose setup, the benchmarks
//! and `demo` run: as a child process on a real port, in each wire format,
//! streamed and whole, read by the reference readers directly and through
//! toolgate (which denies one of its calls).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use crate::accumulate::Acc;
use crate::messages_reader::Reader;
use crate::support::*;

struct Running(Child, String);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `toolgate mock` with `args`, and the base URL it printed.
fn mock(args: &[&str]) -> Running {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("mock")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().rsplit(' ').next().unwrap().to_string();
    Running(child, format!("http://{addr}/v1"))
}

fn request(path: &str, stream: bool, prompt: &str) -> Value {
    let tools = ["get_weather", "comm.email"];
    match path {
        "chat/completions" => json!({"model": "m", "stream": stream,
            "messages": [{"role": "user", "content": prompt}],
            "tools": tools.map(|t| json!({"type": "function", "function": {"name": t}}))}),
        "responses" => json!({"model": "m", "stream": stream, "input": prompt,
            "tools": tools.map(|t| json!({"type": "function", "name": t, "parameters": {}}))}),
        _ => json!({"model": "m", "stream": stream, "max_tokens": 100,
            "messages": [{"role": "user", "content": prompt}],
            "tools": tools.map(|t| json!({"name": t, "input_schema": {"type": "object"}}))}),
    }
}

/// The (name, arguments) of the calls in an answer, read by the reference readers.
fn calls(path: &str, stream: bool, body: &[u8]) -> Vec<(String, Value)> {
    match (path, stream) {
        ("chat/completions", true) => Acc::from_sse(body).all_calls(),
        ("chat/completions", false) => Acc::from_json(body).all_calls(),
        ("responses", _) => {
            let r = match stream {
                true => responses_final(body),
                false => serde_json::from_slice(body).unwrap(),
            };
            return r["output"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["type"] == "function_call")
                .map(|i| {
                    let args = i["arguments"].as_str().unwrap();
                    (
                        i["name"].as_str().unwrap().to_string(),
                        serde_json::from_str(args).unwrap(),
                    )
                })
                .collect();
        }
        (_, true) => {
            return Reader::read(body)
                .unwrap()
                .calls()
                .into_iter()
                .map(|(_, n, a)| (n, a))
                .collect()
        }
        (_, false) => {
            let m: Value = serde_json::from_slice(body).unwrap();
            return crate::messages_reader::calls_of(m["content"].as_array().unwrap())
                .into_iter()
                .map(|(_, n, a)| (n, a))
                .collect();
        }
    }
    .into_iter()
    .map(|c| (c.name, serde_json::from_str(&c.arguments).unwrap()))
    .collect()
}

const WIRES: [&str; 3] = ["chat/completions", "responses", "messages"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_script_speaks_each_wire_format_streamed_and_whole() {
    let m = mock(&[]);
    for path in WIRES {
        for stream in [true, false] {
            let url = format!("{}/{path}", m.1);
            let a = send(
                "POST",
                &url,
                &[],
                request(path, stream, "Email Bob").to_string(),
            )
            .await;
            assert_eq!(a.status, 200, "{path} {stream}: {}", a.text());
            let want =
                json!({"to": "bob@example.com", "subject": "Agenda", "body": "Day 1: planning."});
            assert_eq!(
                calls(path, stream, &a.body),
                vec![("comm.email".to_string(), want)],
                "{path} {stream}"
            );
            let a = send(
                "POST",
                &url,
                &[],
                request(path, stream, "weather?").to_string(),
            )
            .await;
            assert_eq!(
                calls(path, stream, &a.body),
                vec![("get_weather".to_string(), json!({"city": "Lisbon"}))],
                "{path} {stream}"
            );
        }
    }
    // Not a model endpoint, and not JSON: errors in the provider's shapes.
    let a = send("POST", &format!("{}/embeddings", m.1), &[], "{}").await;
    assert_eq!(a.status, 404);
    let a = send("POST", &format!("{}/messages", m.1), &[], "{oops").await;
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["type"], "error", "{}", a.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_toolgate_each_wire_format_is_gated() {
    let dir = TempDir::new();
    let script = dir.0.join("two.toml");
    std::fs::write(
        &script,
        "fragments = 5\n[[rule]]\ntext = \"On it.\"\n\
         [[rule.call]]\nname = \"get_weather\"\narguments = { city = \"Oslo\" }\n\
         [[rule.call]]\nname = \"comm.email\"\narguments = { to = \"eve@example.com\" }\n",
    )
    .unwrap();
    let m = mock(&["--script", script.to_str().unwrap()]);
    let gate = start_gate(&m.1, &deny(&["comm.email"]), &messages_upstream(&m.1)).await;
    for path in WIRES {
        for stream in [true, false] {
            let mut headers = vec![("authorization", "Bearer t")];
            if path == "messages" {
                headers = vec![("x-api-key", "t"), ("anthropic-version", "2023-06-01")];
            }
            let url = format!("{}/v1/{path}", gate.url);
            let a = send(
                "POST",
                &url,
                &headers,
                request(path, stream, "go").to_string(),
            )
            .await;
            assert_eq!(a.status, 200, "{path} {stream}: {}", a.text());
            assert_eq!(
                calls(path, stream, &a.body),
                vec![("get_weather".to_string(), json!({"city": "Oslo"}))],
                "{path} {stream}: {}",
                a.text()
            );
        }
    }
    let denied = gate.audit_flushed().await;
    let denied = denied
        .iter()
        .filter(|r| r["tool"] == "comm.email" && r["verdict"] == "deny");
    assert_eq!(denied.count(), 6);
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_with_a_delay_answers_after_it_and_others_at_once() {
    let dir = TempDir::new();
    let script = dir.0.join("judge.toml");
    std::fs::write(
        &script,
        "[[rule]]\ncue = \"evaluate\"\ndelay_ms = 300\ntext = '{\"decision\": \"approve\"}'\n\
         [[rule]]\ntext = \"Hello.\"\n",
    )
    .unwrap();
    let m = mock(&["--script", script.to_str().unwrap()]);
    let url = format!("{}/chat/completions", m.1);
    let started = std::time::Instant::now();
    let a = send(
        "POST",
        &url,
        &[],
        request("chat/completions", false, "Evaluate this").to_string(),
    )
    .await;
    let judged = started.elapsed();
    assert_eq!(
        a.json()["choices"][0]["message"]["content"],
        r#"{"decision": "approve"}"#,
        "{}",
        a.text()
    );
    assert!(
        judged >= std::time::Duration::from_millis(300),
        "{judged:?}"
    );
    let a = send(
        "POST",
        &url,
        &[],
        request("chat/completions", false, "hi").to_string(),
    )
    .await;
    assert_eq!(a.json()["choices"][0]["message"]["content"], "Hello.");
}

#[test]
fn a_script_with_an_unknown_key_is_refused_with_its_line() {
    let dir = TempDir::new();
    let script = dir.0.join("bad.toml");
    std::fs::write(
        &script,
        "fragments = 2\n[[rule]]\ntext = \"x\"\nwhen = \"always\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "mock",
            "--listen",
            "127.0.0.1:0",
            "--script",
            script.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:4") && err.contains("when"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_it_is_reached_through_toolgate() {
    let certs = TempDir::new();
    toolgate::cli::certs::dev(&certs.0, false).unwrap();
    let (cert, key) = (certs.0.join("server.pem"), certs.0.join("server-key.pem"));
    let m = mock(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let port = m.1.rsplit(':').next().unwrap().trim_end_matches("/v1");
    let url = format!("https://localhost:{port}/v1");
    let ca = format!(
        "upstream.ca_file = \"{}\"\n",
        certs.0.join("ca.pem").display()
    );
    let gate = start_gate(&url, &deny(&[]), &ca).await;
    for stream in [true, false] {
        let a = post_chat(&gate, &request("chat/completions", stream, "weather?")).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(
            calls("chat/completions", stream, &a.body),
            vec![("get_weather".to_string(), json!({"city": "Lisbon"}))]
        );
    }
    gate.stop().await;
    // Plain HTTP to it gets no HTTP answer.
    let mut plain = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    plain
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    std::io::Write::write_all(&mut plain, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut back = Vec::new();
    let _ = std::io::Read::read_to_end(&mut plain, &mut back);
    assert!(!back.starts_with(b"HTTP/"), "{back:?}");
}

#[test]
fn a_certificate_without_its_key_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["mock", "--tls-cert", "cert.pem"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-key"));
}
