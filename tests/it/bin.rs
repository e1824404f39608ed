//! The released program itself: a `toolgate serve` child process on real
//! ports, with its config and policy files in a scratch dir, for tests that
//! must see what a user runs (exit paths, reload, memory, the audit sink).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::support::{send, TempDir, KEY_ENV, UPSTREAM_KEY};

/// A port that was free a moment ago (the binary binds it itself).
pub fn free_port() -> u16 {
    free_ports::<1>()[0]
}

/// `N` different ports that were free a moment ago: each is held until all
/// are picked (one picked after another was let go could be the same).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let held: [std::net::TcpListener; N] =
        std::array::from_fn(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    held.map(|l| l.local_addr().unwrap().port())
}

pub struct Bin {
    child: tokio::process::Child,
    pub url: String,
    pub admin: String,
    pub dir: TempDir,
}

/// Sections a `section.key = value` line of `extra` may name.
const SECTIONS: [&str; 6] = ["upstream", "audit", "policy", "limits", "listen", "fence"];

impl Bin {
    /// Starts the binary in front of `upstream` with these policy files (name,
    /// text). `extra` lines `section.key = value` go into that section; other
    /// lines are appended as written.
    pub async fn start(upstream: &str, files: &[(&str, &str)], extra: &str) -> Bin {
        Bin::start_args(upstream, files, extra, &[]).await
    }

    /// As [`Bin::start`], with these arguments before `serve`'s.
    pub async fn start_args(
        upstream: &str,
        files: &[(&str, &str)],
        extra: &str,
        args: &[&str],
    ) -> Bin {
        Bin::launch(upstream, files, extra, args, None, &[]).await
    }

    /// As [`Bin::start`], with these environment variables set.
    pub async fn start_env(
        upstream: &str,
        files: &[(&str, &str)],
        extra: &str,
        env: &[(&str, &str)],
    ) -> Bin {
        Bin::launch(upstream, files, extra, &[], None, env).await
    }

    /// As [`Bin::start`], under an open-file limit of `nofile` (soft and
    /// hard, set by `sh`'s `ulimit -n` before the program starts).
    pub async fn start_limited(
        upstream: &str,
        files: &[(&str, &str)],
        extra: &str,
        nofile: u64,
    ) -> Bin {
        Bin::launch(upstream, files, extra, &[], Some(nofile), &[]).await
    }

    async fn launch(
        upstream: &str,
        files: &[(&str, &str)],
        extra: &str,
        args: &[&str],
        nofile: Option<u64>,
        env: &[(&str, &str)],
    ) -> Bin {
        let dir = TempDir::new();
        std::fs::create_dir_all(dir.0.join("policies")).unwrap();
        for (name, text) in files {
            std::fs::write(dir.0.join("policies").join(name), text).unwrap();
        }
        let [port, admin] = free_ports();
        let mut sections: Vec<(String, String)> = vec![
            (
                "listen".into(),
                format!(
                    "addr = \"127.0.0.1:{port}\"\nadmin = \"127.0.0.1:{admin}\"\ndrain_secs = 5\n"
                ),
            ),
            (
                "upstream".into(),
                format!(
                    "base_url = \"{upstream}\"\napi_key_env = \"{KEY_ENV}\"\ntimeout_secs = 30\n"
                ),
            ),
            ("audit".into(), "path = \"audit.jsonl\"\n".into()),
            ("policy".into(), "dir = \"policies\"\n".into()),
            ("limits".into(), String::new()),
            ("fence".into(), String::new()),
        ];
        let mut rest = String::new();
        for line in extra.lines() {
            let section = line
                .split_once('.')
                .filter(|(s, kv)| SECTIONS.contains(s) && kv.contains('='));
            match section {
                Some((s, kv)) => {
                    let (_, body) = sections.iter_mut().find(|(n, _)| n == s).unwrap();
                    // A later line for the same key wins over the default.
                    let key = kv.split('=').next().unwrap().trim();
                    *body = body
                        .lines()
                        .filter(|l| l.split('=').next().unwrap().trim() != key)
                        .map(|l| format!("{l}\n"))
                        .collect();
                    body.push_str(kv);
                    body.push('\n');
                }
                None => {
                    rest.push_str(line);
                    rest.push('\n');
                }
            }
        }
        let mut cfg = String::new();
        for (name, body) in &sections {
            cfg.push_str(&format!("[{name}]\n{body}\n"));
        }
        cfg.push_str(&rest);
        std::fs::write(dir.0.join("toolgate.toml"), &cfg).unwrap();
        let stderr = std::fs::File::create(dir.0.join("stderr.log")).unwrap();
        let program = env!("CARGO_BIN_EXE_toolgate");
        let mut command = match nofile {
            None => tokio::process::Command::new(program),
            Some(n) => {
                let mut c = tokio::process::Command::new("sh");
                c.args([
                    "-c",
                    &format!("ulimit -n {n} && exec \"$0\" \"$@\""),
                    program,
                ]);
                c
            }
        };
        let child = command
            .args(args)
            .args(["serve", "--config"])
            .arg(dir.0.join("toolgate.toml"))
            .env(KEY_ENV, UPSTREAM_KEY)
            .env("TOOLGATE_LOG", "info")
            .envs(env.iter().copied())
            .stderr(stderr)
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let bin = Bin {
            child,
            url: format!("http://127.0.0.1:{port}"),
            admin: format!("http://127.0.0.1:{admin}"),
            dir,
        };
        for _ in 0..200 {
            let probe = crate::support::try_get(&format!("{}/readyz", bin.admin)).await;
            if probe == Some(200) {
                return bin;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("toolgate did not become ready:\n{}\n{cfg}", bin.stderr());
    }

    /// Stops the binary as an orchestrator does (SIGTERM) and waits for it
    /// to exit; true when it exited with success.
    pub async fn terminate(&mut self) -> bool {
        let pid = self.child.id().unwrap().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("toolgate did not exit after SIGTERM")
            .unwrap();
        status.success()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.0.join(rel)
    }

    /// What the binary logged so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.path("stderr.log")).unwrap_or_default()
    }

    /// The audit trail's lines as written so far.
    pub fn audit_lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.path("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    /// The audit records of the requests: the trail's own left out.
    pub fn audit(&self) -> Vec<Value> {
        self.audit_lines()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|r| !crate::support::trail_record(r))
            .collect()
    }

    /// A `/proc/<pid>/status` figure in KiB (`VmRSS`, `VmHWM`).
    pub fn memory_kib(&self, field: &str) -> u64 {
        let pid = self.child.id().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    }

    /// `/metrics` on the admin port.
    pub async fn metrics(&self) -> String {
        send("GET", &format!("{}/metrics", self.admin), &[], "")
            .await
            .text()
    }
}
