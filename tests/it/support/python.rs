//! The Python SDK scripts under `tests/sdk/`, run with the project's venv.

use std::path::PathBuf;

use serde_json::Value;

/// The Python with `openai` (and `kubernetes-validate`) installed:
/// `TOOLGATE_PYTHON`, else `.venv/bin/python`.
pub fn python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("TOOLGATE_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    venv.exists().then_some(venv)
}

/// [`run_python`] from async code (off the runtime's threads).
pub async fn run_sdk(script: &'static str, args: Vec<String>) -> Option<Value> {
    tokio::task::spawn_blocking(move || run_python(script, args))
        .await
        .unwrap()
}

/// Runs `tests/sdk/<script>` with `args` under [`python`] and reads its JSON
/// answer; `None` (a skip, never in CI) when no Python with the SDKs is set up.
pub fn run_python(script: &str, args: Vec<String>) -> Option<Value> {
    let Some(py) = python() else {
        assert!(
            std::env::var("CI").is_err(),
            "CI must provide the Python SDKs (TOOLGATE_PYTHON or .venv)"
        );
        eprintln!("SKIPPED: no Python with the SDKs (run `bash .ci/test`, which creates .venv)");
        return None;
    };
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sdk")
        .join(script);
    let out = std::process::Command::new(py)
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout))),
    )
}
