//! The profile-guided build: the rustc wrapper adds the profile to optimised
//! builds only, with an absolute path, and only for an LLVM that can read
//! it; and the profile in `pgo/` is the one whose id `.cargo/config.toml`
//! carries (else cargo would not rebuild with it).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A "rustc" that prints its arguments, one a line, and answers `-vV` with
/// the LLVM version in `FAKE_LLVM`.
fn fake_rustc() -> PathBuf {
    static FAKE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FAKE.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("tg-fake-rustc-{}", std::process::id()));
        let script = "#!/bin/sh\nif [ \"$1\" = -vV ]; then echo \"rustc 1.0.0\"; echo \"LLVM version: $FAKE_LLVM\"; exit 0; fi\nprintf '%s\\n' \"$@\"\n";
        std::fs::write(&path, script).expect("write the fake rustc");
        let mut perms = std::fs::metadata(&path).expect("metadata").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&path, perms).expect("chmod");
        path
    })
    .clone()
}

/// The LLVM major version the profile was written with.
fn profile_llvm() -> u32 {
    let text =
        std::fs::read_to_string(repo().join("pgo/toolgate.llvm")).expect("pgo/toolgate.llvm");
    text.trim().parse().expect("a major version")
}

/// The arguments `scripts/rustc-pgo` hands on to the fake rustc, whose LLVM is `llvm`.
fn wrapped(args: &[&str], llvm: &str, env: &[(&str, &str)]) -> Vec<String> {
    let mut cmd = Command::new(repo().join("scripts/rustc-pgo"));
    cmd.arg(fake_rustc())
        .args(args)
        .env("FAKE_LLVM", llvm)
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

/// The profile's LLVM as rustc prints it.
fn same_llvm() -> String {
    format!("{}.1.2", profile_llvm())
}

fn profile() -> PathBuf {
    repo().join("pgo/toolgate.profdata")
}

#[test]
fn optimised_builds_get_the_profile_by_its_absolute_path() {
    let args = ["--crate-name", "x", "-C", "opt-level=3", "src/lib.rs"];
    let got = wrapped(&args, &same_llvm(), &[]);
    let flag = format!("-Cprofile-use={}", profile().display());
    assert!(Path::new(&flag["-Cprofile-use=".len()..]).is_absolute());
    assert_eq!(got[..args.len()], args.map(str::to_string));
    assert_eq!(
        got[args.len()..],
        [flag, "-Cllvm-args=-no-pgo-warn-mismatch".to_string()]
    );
    // The joined spelling too.
    let got = wrapped(&["-Copt-level=3"], &same_llvm(), &[]);
    assert!(got.iter().any(|a| a.starts_with("-Cprofile-use=")));
    // A newer LLVM reads an older profile.
    let newer = format!("{}.0.0", profile_llvm() + 1);
    let got = wrapped(&["-Copt-level=3"], &newer, &[]);
    assert!(got.iter().any(|a| a.starts_with("-Cprofile-use=")));
}

#[test]
fn other_builds_run_rustc_as_they_are() {
    for args in [
        // the test profile
        vec!["--crate-name", "x", "-C", "debuginfo=2", "src/lib.rs"],
        vec!["-C", "opt-level=2"],
        // a build that brings its own profile flags (scripts/pgo.sh)
        vec!["-C", "opt-level=3", "-Cprofile-generate=/tmp/x"],
        vec!["-C", "opt-level=3", "-C", "profile-use=/tmp/other.profdata"],
    ] {
        assert_eq!(wrapped(&args, &same_llvm(), &[]), args, "{args:?}");
    }
    // cargo asking rustc what it is: the answer is rustc's own
    let llvm = same_llvm();
    assert_eq!(
        wrapped(&["-vV"], &llvm, &[]),
        ["rustc 1.0.0".to_string(), format!("LLVM version: {llvm}")]
    );
    let args = ["-C", "opt-level=3"];
    assert_eq!(wrapped(&args, &same_llvm(), &[("TOOLGATE_PGO", "0")]), args);
    // An older LLVM may not read the profile's format: the build goes on without it.
    let older = format!("{}.1.8", profile_llvm() - 1);
    assert_eq!(wrapped(&args, &older, &[]), args);
    // A rustc whose LLVM cannot be told is not trusted with it either.
    assert_eq!(wrapped(&args, "unknown", &[]), args);
}

#[test]
fn the_profile_is_the_one_the_cargo_config_names() {
    let bytes = std::fs::read(profile()).expect("pgo/toolgate.profdata");
    // An indexed LLVM instrumentation profile (what rustc's -Cprofile-use reads).
    assert_eq!(&bytes[..8], b"\xfflprofi\x81", "not an indexed profile");
    let id = toolgate::digest::sha256_hex(&bytes)[..12].to_string();
    let config = std::fs::read_to_string(repo().join(".cargo/config.toml")).expect("config");
    assert!(
        config.contains(&format!("toolgate_pgo=\\\"{id}\\\"")),
        "the profile changed without its id in .cargo/config.toml (run scripts/pgo.sh)"
    );
    assert!(config.contains("rustc-wrapper = \"scripts/rustc-pgo\""));
}
