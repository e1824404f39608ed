//! The profile-guided build: the rustc wrapper adds the profile to optimised
//! builds only, with an absolute path, and the profile in `pgo/` is the one
//! whose id `.cargo/config.toml` carries (else cargo would not rebuild with it).

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The arguments `scripts/rustc-pgo` hands on to a "rustc" that prints them.
fn wrapped(args: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let mut cmd = Command::new(repo().join("scripts/rustc-pgo"));
    cmd.arg("printf")
        .arg("%s\\n")
        .args(args)
        .env_remove("TOOLGATE_PGO");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the wrapper runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_string)
        .collect()
}

fn profile() -> PathBuf {
    repo().join("pgo/toolgate.profdata")
}

#[test]
fn optimised_builds_get_the_profile_by_its_absolute_path() {
    let args = ["--crate-name", "x", "-C", "opt-level=3", "src/lib.rs"];
    let got = wrapped(&args, &[]);
    let flag = format!("-Cprofile-use={}", profile().display());
    assert!(Path::new(&flag["-Cprofile-use=".len()..]).is_absolute());
    assert_eq!(got[..args.len()], args.map(str::to_string));
    assert_eq!(
        got[args.len()..],
        [flag, "-Cllvm-args=-no-pgo-warn-mismatch".to_string()]
    );
    // The joined spelling too.
    let got = wrapped(&["-Copt-level=3"], &[]);
    assert!(got.iter().any(|a| a.starts_with("-Cprofile-use=")));
}

#[test]
fn other_builds_run_rustc_as_they_are() {
    for args in [
        // the test profile, and cargo asking rustc what it is
        vec!["--crate-name", "x", "-C", "debuginfo=2", "src/lib.rs"],
        vec!["-vV"],
        vec!["-C", "opt-level=2"],
        // a build that brings its own profile flags (scripts/pgo.sh)
        vec!["-C", "opt-level=3", "-Cprofile-generate=/tmp/x"],
        vec!["-C", "opt-level=3", "-C", "profile-use=/tmp/other.profdata"],
    ] {
        assert_eq!(wrapped(&args, &[]), args, "{args:?}");
    }
    let args = ["-C", "opt-level=3"];
    assert_eq!(wrapped(&args, &[("TOOLGATE_PGO", "0")]), args);
}

#[test]
fn the_profile_is_the_one_the_cargo_config_names() {
    let bytes = std::fs::read(profile()).expect("pgo/toolgate.profdata");
    // An indexed LLVM instrumentation profile (what rustc's -Cprofile-use reads).
    assert_eq!(&bytes[..8], b"\xfflprofi\x81", "not an indexed profile");
    let id = hex(&Sha256::digest(&bytes))[..12].to_string();
    let config = std::fs::read_to_string(repo().join(".cargo/config.toml")).expect("config");
    assert!(
        config.contains(&format!("toolgate_pgo=\\\"{id}\\\"")),
        "the profile changed without its id in .cargo/config.toml (run scripts/pgo.sh)"
    );
    assert!(config.contains("rustc-wrapper = \"scripts/rustc-pgo\""));
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
