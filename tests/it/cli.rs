//! The `toolgate` binary: `check` and `serve` exit codes and `file:line: message` errors.

use std::process::Command;

use crate::support::TempDir;

fn toolgate(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_accepts_the_embedded_default_and_the_shipped_policies() {
    let (code, err) = toolgate(&["check"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("ok: <embedded>"), "{err}");
    let dir = TempDir::new();
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let cfg = dir.0.join("t.toml");
    std::fs::write(
        &cfg,
        format!("[policy]\ndir = \"{}\"\n", policies.display()),
    )
    .unwrap();
    let (code, err) = toolgate(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/toolgate.example.toml");
    let (code, err) = toolgate(&["check", "--config", example.to_str().unwrap()]);
    assert_eq!(
        code, 0,
        "the documented example config must stay valid: {err}"
    );
}

#[test]
fn check_reports_file_and_line_for_bad_config_and_policies() {
    let dir = TempDir::new();
    let cfg = dir.0.join("bad.toml");
    std::fs::write(&cfg, "[listen]\naddr = \"127.0.0.1:0\"\nport = 9\n").unwrap();
    let (code, err) = toolgate(&["check", "--config", cfg.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("{}:3:", cfg.display())) && err.contains("port"),
        "{err}"
    );

    std::fs::create_dir_all(dir.0.join("p")).unwrap();
    std::fs::write(
        dir.0.join("p/a.toml"),
        "[[rule]]\nname = \"r\"\nverdict = \"perhaps\"\n",
    )
    .unwrap();
    std::fs::write(&cfg, "[policy]\ndir = \"p\"\n").unwrap();
    let (code, err) = toolgate(&["check", "--config", cfg.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("a.toml:3:") && err.contains("perhaps"),
        "{err}"
    );
}

#[test]
fn serve_with_bad_config_exits_64_before_binding() {
    let dir = TempDir::new();
    let cfg = dir.0.join("bad.toml");
    std::fs::write(&cfg, "[upstream]\nbase_url = \"ftp://nope\"\n").unwrap();
    let (code, err) = toolgate(&["serve", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("bad.toml:2:"), "{err}");
    let (code, _) = toolgate(&[
        "serve",
        "--config",
        dir.0.join("missing.toml").to_str().unwrap(),
    ]);
    assert_eq!(code, 64);
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(toolgate(&["frobnicate"]).0, 2);
    assert_eq!(toolgate(&["serve", "--bogus"]).0, 2);
    assert_eq!(toolgate(&["--help"]).0, 0);
}
