//! PolicySet: loading, indexing and what the rules read.

use super::*;

fn set(src: &str) -> Result<PolicySet, Error> {
    PolicySet::from_sources(&[("p.toml".into(), src.into())])
}

#[test]
fn embedded_policy_compiles_and_allows_by_default() {
    let p = PolicySet::embedded().unwrap();
    assert_eq!(p.default_verdict, Verdict::Allow);
    assert_eq!(p.version.len(), 12);
}

#[test]
fn rules_compile_with_globs_and_origin_lines() {
    let p = set("[defaults]\nverdict = \"allow\"\n\n[[rule]]\nname = \"no-shell\"\ntools = [\"shell_*\", \"exec\"]\nverdict = \"deny\"\n\n[[rule]]\nname = \"all\"\nverdict = \"reject\"\n").unwrap();
    assert_eq!(p.rules.len(), 2);
    assert_eq!(p.rules[0].origin, "p.toml:4");
    assert!(p.rules[0].applies_to("shell_run"));
    assert!(p.rules[0].applies_to("exec"));
    assert!(!p.rules[0].applies_to("read"));
    assert!(p.rules[1].applies_to("anything"));
    assert!(Verdict::Deny > Verdict::Reject && Verdict::Reject > Verdict::Ask);
    assert!(Verdict::Ask > Verdict::Allow);
}

#[test]
fn a_single_tool_string_is_accepted() {
    let p = set("[[rule]]\nname = \"x\"\ntools = \"a*\"\nverdict = \"deny\"\n").unwrap();
    assert!(p.rules[0].applies_to("abc"));
    assert_eq!(
        p.default_verdict,
        Verdict::Deny,
        "no [defaults] means fail closed"
    );
}

#[test]
fn a_rule_may_say_what_replaces_its_calls() {
    let p = set("[[rule]]\nname = \"r\"\nverdict = \"reject\"\nrewrite = \"resume\"\n[[rule]]\nname = \"d\"\nverdict = \"deny\"\n").unwrap();
    assert_eq!(p.rewrite_of("r"), Some(RewriteMode::Resume));
    assert_eq!(p.rewrite_of("d"), None, "unset: the config's mode");
    assert_eq!(p.rewrite_of("missing"), None);
}

#[test]
fn bad_policies_report_file_and_line() {
    for (src, line, needle) in [
        ("[[rule]]\nname = \"x\"\nverdict = \"maybe\"\n", 3, "maybe"),
        ("[[rule]]\nname = \"x\"\nverdict = \"deny\"\nwhen_typo = 1\n", 4, "when_typo"),
        ("[[rule]]\nverdict = \"deny\"\n", 1, "name"),
        ("[[rule]]\nname = \"\"\nverdict = \"deny\"\n", 2, "empty"),
        ("[[rule]]\nname = \"x\"\ntools = []\nverdict = \"deny\"\n", 3, "at least one"),
        ("[[rule]]\nname = \"x\"\nverdict = \"deny\"\n[[rule]]\nname = \"x\"\nverdict = \"allow\"\n", 4, "already used"),
        ("[[rule]]\nname = \"x\"\nverdict = \"deny\"\nrewrite = \"retry\"\n", 4, "retry"),
        ("not toml at all [", 1, ""),
    ] {
        let Err(Error::Config(d)) = set(src) else { panic!("{src} should fail") };
        assert_eq!(d[0].file, "p.toml", "{src}");
        assert_eq!(d[0].line, line, "{src}: {:?}", d);
        assert!(d[0].message.contains(needle), "{src}: {}", d[0].message);
    }
}

#[test]
fn two_defaults_conflict() {
    let r = PolicySet::from_sources(&[
        ("a.toml".into(), "[defaults]\nverdict = \"allow\"\n".into()),
        ("b.toml".into(), "[defaults]\nverdict = \"deny\"\n".into()),
    ]);
    let Err(Error::Config(d)) = r else {
        panic!("should conflict")
    };
    assert_eq!(d[0].file, "b.toml");
    assert!(d[0].message.contains("a.toml"));
}

#[test]
fn load_reads_a_dir_in_name_order() {
    let dir = std::env::temp_dir().join(format!("tg-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("20-b.toml"),
        "[[rule]]\nname = \"b\"\nverdict = \"deny\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("10-a.toml"),
        "[[rule]]\nname = \"a\"\nverdict = \"allow\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "ignored").unwrap();
    let p = PolicySet::load(Some(&dir)).unwrap();
    let names: Vec<_> = p.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
