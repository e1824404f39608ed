//! The deployment files, checked offline: the Kubernetes manifests against the
//! Kubernetes schemas, the compose file, the Dockerfiles, every shipped config
//! through `toolgate check`; and the compose setup's example agent (the openai
//! SDK) and mock upstream run for real through toolgate.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::support::*;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python with the test requirements, or a skip (an error under CI).
fn python_or_skip() -> Option<PathBuf> {
    let py = python();
    if py.is_none() {
        assert!(
            std::env::var("CI").is_err(),
            "CI must provide .venv (bash .ci/test)"
        );
        eprintln!("SKIPPED: no .venv with the test requirements (run `bash .ci/test`)");
    }
    py
}

#[test]
fn deployment_files_validate_offline() {
    let Some(py) = python_or_skip() else { return };
    let out = Command::new(py)
        .arg(repo().join("deploy/validate.py"))
        .args(["--toolgate", env!("CARGO_BIN_EXE_toolgate")])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("objects checked against the 1.33.0 schemas"),
        "{text}"
    );
    assert!(
        text.contains("deployment files: all checks passed"),
        "{text}"
    );
}

/// Kills the child when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_example_agent_and_mock_upstream_work_through_toolgate() {
    let Some(py) = python_or_skip() else { return };
    // The compose setup's mock upstream is `toolgate mock` on its built-in script.
    let mut mock = Child(
        Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["mock", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    BufReader::new(mock.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first.trim().rsplit(' ').next().unwrap().to_string();
    std::env::set_var("TG_IT_COMPOSE_AGENT_TOKEN", "compose-agent-token-1");
    let extra = "[[client]]\nname = \"example-agent\"\ntoken_env = \"TG_IT_COMPOSE_AGENT_TOKEN\"\n";
    let gate = start_gate(&format!("http://{addr}/v1"), ALLOW_ALL, extra).await;
    let agent = tokio::process::Command::new(&py)
        .arg(repo().join("deploy/compose/agent/agent.py"))
        .env("OPENAI_BASE_URL", format!("{}/v1", gate.url))
        .env("OPENAI_API_KEY", "compose-agent-token-1")
        .output()
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&agent.stdout).into_owned();
    assert!(
        agent.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&agent.stderr)
    );
    let (planning, execution) = out.split_once("[execution]").unwrap();
    assert!(planning.contains("tool calls: none"), "{out}");
    assert!(
        planning.contains("I wasn't able to complete that action."),
        "{out}"
    );
    assert!(planning.contains("finish_reason: stop"), "{out}");
    assert!(
        execution.contains(r#"tool calls: get_weather({"city":"Lisbon"})"#),
        "{out}"
    );
    let audit = gate.audit_flushed().await;
    let email = audit.iter().find(|r| r["tool"] == "comm.email").unwrap();
    assert_eq!(email["verdict"], "deny");
    assert_eq!(email["rule"], "phase-gate-comm");
    assert_eq!(email["principal"], "example-agent");
    gate.stop().await;
}
