//! A real toolgate on real ports, in process, with a policy and config
//! lines of the test's own ([`start_gate`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::Value;

use super::*;

/// Whether an audit record is the trail's own (the one opening a file, a seal).
pub fn trail_record(r: &Value) -> bool {
    matches!(r["event"].as_str(), Some("opened" | "seal"))
}

/// Config lines that send `/v1/messages` to `upstream` with the test key.
pub fn messages_upstream(upstream: &str) -> String {
    format!("[upstream.messages]\nbase_url = \"{upstream}\"\napi_key_env = \"{KEY_ENV}\"\ntimeout_secs = 20\n")
}

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "toolgate-it-{}-{}",
            std::process::id(),
            DIRS.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running toolgate with its scratch dir.
pub struct Gate {
    pub running: Option<toolgate::server::Running>,
    pub url: String,
    pub admin: String,
    pub dir: TempDir,
}

impl Gate {
    /// The audit records of the requests: the trail's own (`opened`,
    /// `seal`) left out.
    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.0.join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|r: &Value| !trail_record(r))
            .collect()
    }

    pub async fn audit_flushed(&self) -> Vec<Value> {
        self.running
            .as_ref()
            .unwrap()
            .state
            .audit
            .flush()
            .await
            .unwrap();
        self.audit()
    }

    /// Stops toolgate (draining and flushing the audit trail); the scratch dir outlives it.
    pub async fn stop(self) -> TempDir {
        let Gate { running, dir, .. } = self;
        if let Some(r) = running {
            r.stop().await;
        }
        dir
    }
}

/// Starts toolgate in front of `upstream` with the given policy file text and extra config.
pub async fn start_gate(upstream: &str, policy: &str, extra: &str) -> Gate {
    start_gate_with(upstream, policy, extra, Vec::new()).await
}

/// The same, with extra gates appended to the pipeline.
pub async fn start_gate_with(
    upstream: &str,
    policy: &str,
    extra: &str,
    gates: Vec<Arc<dyn toolgate::gate::Gate>>,
) -> Gate {
    let files = [
        (
            "00-default.toml".to_string(),
            toolgate::policy::DEFAULT_POLICY.to_string(),
        ),
        ("50-test.toml".to_string(), policy.to_string()),
    ];
    launch(upstream, &files, extra, gates).await
}

/// Writes the policy files and a config in a scratch dir, then starts toolgate on port 0.
async fn launch(
    upstream: &str,
    files: &[(String, String)],
    extra: &str,
    gates: Vec<Arc<dyn toolgate::gate::Gate>>,
) -> Gate {
    // The same value every time, so tests running in parallel agree.
    std::env::set_var(KEY_ENV, UPSTREAM_KEY);
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.0.join("policies")).unwrap();
    for (name, text) in files {
        std::fs::write(dir.0.join("policies").join(name), text).unwrap();
    }
    let (mut upstream_extra, rest) = split_upstream(extra);
    if !upstream_extra
        .lines()
        .any(|l| l.trim_start().starts_with("timeout_secs"))
    {
        upstream_extra.push_str("timeout_secs = 20\n");
    }
    let cfg = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\ndrain_secs = 5\n\n[upstream]\nbase_url = \"{upstream}\"\napi_key_env = \"{KEY_ENV}\"\n{upstream_extra}\n[audit]\npath = \"audit.jsonl\"\n\n{rest}\n"
    );
    let cfg = if cfg.contains("[policy]") {
        cfg.replacen("[policy]", "[policy]\ndir = \"policies\"", 1)
    } else {
        format!("{cfg}\n[policy]\ndir = \"policies\"\n")
    };
    std::fs::write(dir.0.join("toolgate.toml"), &cfg).unwrap();
    let config = toolgate::Config::load(&dir.0.join("toolgate.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{cfg}"));
    let mut state = toolgate::app::build(config).await.unwrap();
    for g in gates {
        state.add_gate(g);
    }
    let running = toolgate::server::start(state).await.unwrap();
    Gate {
        url: format!("http://{}", running.addr),
        admin: format!("http://{}", running.admin_addr),
        running: Some(running),
        dir,
    }
}

/// Lines of `extra` starting with `upstream.` go into `[upstream]`; the rest stays as written.
fn split_upstream(extra: &str) -> (String, String) {
    let mut up = String::new();
    let mut rest = String::new();
    for line in extra.lines() {
        match line.strip_prefix("upstream.") {
            Some(l) => {
                up.push_str(l);
                up.push('\n');
            }
            None => {
                rest.push_str(line);
                rest.push('\n');
            }
        }
    }
    (up, rest)
}

/// Nothing beyond the default policy (which allows declared, valid calls).
pub const ALLOW_ALL: &str = "rule = []\n";

pub fn deny(tools: &[&str]) -> String {
    if tools.is_empty() {
        return ALLOW_ALL.to_string();
    }
    let list: Vec<String> = tools.iter().map(|t| format!("\"{t}\"")).collect();
    format!(
        "[[rule]]\nname = \"test-deny\"\ntools = [{}]\nverdict = \"deny\"\n",
        list.join(", ")
    )
}

/// The shipped policy files (relative to `policies/`) as one policy text each, for a test dir.
pub fn shipped(files: &[&str]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|f| {
            let p = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("policies")
                .join(f);
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

/// Starts toolgate with exactly these policy files (name, text) in its policy dir.
pub async fn start_gate_files(upstream: &str, files: &[(String, String)], extra: &str) -> Gate {
    launch(upstream, files, extra, Vec::new()).await
}
