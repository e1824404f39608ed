//! Unit tests of config parsing and validation.
use super::*;

#[test]
fn embedded_has_the_documented_defaults() {
    let c = Config::embedded().unwrap();
    assert_eq!(c.listen.addr.to_string(), "127.0.0.1:8080");
    assert_eq!(c.listen.admin.to_string(), "127.0.0.1:9090");
    assert_eq!(c.upstream.origin.to_string(), "https://openrouter.ai/");
    assert_eq!(c.upstream.path_prefix, "/api/v1");
    assert_eq!(
        c.upstream.api_key_env,
        ["OPENROUTER_API_KEY", "OPENAI_API_KEY"]
    );
    assert_eq!(c.limits.max_request_bytes, 16 << 20);
    assert_eq!(c.audit.path, AuditPath::Stdout);
}

#[test]
fn unknown_key_is_an_error_with_its_line() {
    let err = Config::from_toml(
        "[listen]\naddr = \"127.0.0.1:1\"\nbogus = 1\n",
        "t.toml",
        Path::new("."),
    )
    .unwrap_err();
    let Error::Config(d) = err else {
        panic!("not a config error")
    };
    assert_eq!(d[0].file, "t.toml");
    assert_eq!(d[0].line, 3);
    assert!(d[0].message.contains("bogus"), "{}", d[0].message);
}

#[test]
fn bad_values_are_reported_with_lines() {
    let src = "[listen]\naddr = \"nope\"\n[upstream]\nbase_url = \"ftp://x\"\n";
    let Error::Config(d) = Config::from_toml(src, "t.toml", Path::new(".")).unwrap_err() else {
        panic!("not a config error")
    };
    assert_eq!(d.len(), 2);
    assert_eq!((d[0].line, d[1].line), (2, 4));
}

#[test]
fn api_key_env_takes_one_name_or_a_list() {
    let c = Config::from_toml("[upstream]\napi_key_env = \"K\"\n", "t", Path::new(".")).unwrap();
    assert_eq!(c.upstream.api_key_env, ["K"]);
}

#[test]
fn http2_is_offered_unless_turned_off_and_messages_follows_upstream() {
    let on = Config::embedded().unwrap();
    assert!(on.upstream.http2 && on.upstream_section(Some("messages")).http2);
    let off = |src: &str| Config::from_toml(src, "t", Path::new(".")).unwrap();
    let c = off("[upstream]\nhttp2 = false\n");
    assert!(!c.upstream.http2 && !c.upstream_section(Some("messages")).http2);
    let c = off("[upstream]\nhttp2 = false\n[upstream.messages]\nhttp2 = true\n");
    assert!(!c.upstream.http2 && c.upstream_section(Some("messages")).http2);
    assert!(Config::from_toml("[upstream]\nhttp2 = 1\n", "t", Path::new(".")).is_err());
}

#[test]
fn named_upstreams_take_their_own_defaults_and_key_headers() {
    let parse = |src: &str| Config::from_toml(src, "t", Path::new("."));
    let c = Config::embedded().unwrap();
    let g = c.upstream_section(Some("gemini"));
    assert_eq!(
        g.origin.to_string(),
        "https://generativelanguage.googleapis.com/"
    );
    assert_eq!(g.api_key_env, ["GEMINI_API_KEY", "GOOGLE_API_KEY"]);
    assert_eq!(g.key_header, KeyHeader::Named("x-goog-api-key"));
    let m = c.upstream_section(Some("messages"));
    assert_eq!(m.key_header, KeyHeader::Named("x-api-key"));
    assert_eq!(m.api_key_env, ["ANTHROPIC_API_KEY"]);
    // Each section's documented spelling, and the other's, mean "its own header".
    for (section, auth) in [
        ("messages", "x-api-key"),
        ("gemini", "x-goog-api-key"),
        ("gemini", "header"),
    ] {
        let c = parse(&format!("[upstream.{section}]\nauth = \"{auth}\"\n")).unwrap();
        assert!(matches!(
            c.upstream_section(Some(section)).key_header,
            KeyHeader::Named(_)
        ));
    }
    let c = parse("[upstream.gemini]\nauth = \"bearer\"\ntimeout_secs = 7\n").unwrap();
    let g = c.upstream_section(Some("gemini"));
    assert_eq!((g.key_header, g.timeout.as_secs()), (KeyHeader::Bearer, 7));
    assert!(parse("[upstream.gemini]\nbase = \"x\"\n").is_err());
    assert!(parse("[upstream.gemini]\nbase_url = \"ftp://x\"\n").is_err());
    let tokens = "[[client]]\nname = \"a\"\ntoken_sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n";
    let e = parse(&format!(
        "{tokens}[upstream.gemini]\nauth = \"passthrough\"\n"
    ));
    assert!(e.is_err_and(|e| e.to_string().contains("upstream.gemini.auth")));
}

#[test]
fn mcp_servers_are_checked() {
    let parse = |src: &str| Config::from_toml(src, "t", Path::new("."));
    let c = parse("[[mcp]]\nname = \"crm\"\nurl = \"http://127.0.0.1:9/mcp\"\n").unwrap();
    assert_eq!(
        (c.mcp[0].name.as_str(), c.mcp[0].timeout.as_secs()),
        ("crm", 60)
    );
    assert!(c.mcp[0].auth.is_none());
    let c = parse("[[mcp]]\nname = \"a\"\nurl = \"https://x/m\"\nauth_header = \"Authorization\"\nauth_env = \"E\"\n").unwrap();
    assert_eq!(c.mcp[0].auth, Some(("authorization".into(), "E".into())));
    for bad in [
        "[[mcp]]\nname = \"CRM\"\nurl = \"http://x/m\"\n",
        "[[mcp]]\nname = \"a/b\"\nurl = \"http://x/m\"\n",
        "[[mcp]]\nname = \"a\"\nurl = \"ftp://x/m\"\n",
        "[[mcp]]\nname = \"a\"\nurl = \"http://x/m\"\nauth_env = \"E\"\n",
        "[[mcp]]\nname = \"a\"\nurl = \"http://x/m\"\ntimeout_secs = 0\n",
        "[[mcp]]\nname = \"a\"\nurl = \"http://x/m\"\n[[mcp]]\nname = \"a\"\nurl = \"http://y/m\"\n",
        "[[mcp]]\nname = \"a\"\nurl = \"http://x/m\"\ncommand = \"x\"\n",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn relative_paths_are_relative_to_the_config_file() {
    let c = Config::from_toml(
        "[policy]\ndir = \"p\"\n[audit]\npath = \"a.jsonl\"\n",
        "t",
        Path::new("/etc/tg"),
    )
    .unwrap();
    assert_eq!(c.policy.dir.as_deref(), Some(Path::new("/etc/tg/p")));
    assert_eq!(c.audit.path, AuditPath::File("/etc/tg/a.jsonl".into()));
}

#[test]
fn rewrite_resume_settings_are_read_and_bounded() {
    let c = Config::from_toml(
        "[rewrite]\nmode = \"resume\"\nmax_resumes = 3\n",
        "t.toml",
        Path::new("."),
    )
    .unwrap();
    assert_eq!(c.rewrite.mode, crate::policy::RewriteMode::Resume);
    assert_eq!(c.rewrite.max_resumes, 3);
    assert_eq!(
        &*c.rewrite.neutral_result,
        "The action could not be completed."
    );
    let default = Config::embedded().unwrap();
    assert_eq!(default.rewrite.mode, crate::policy::RewriteMode::Drop);
    for (src, line, what) in [
        ("[rewrite]\nmax_resumes = 9\n", 2, "max_resumes"),
        ("[rewrite]\nneutral_result = \" \"\n", 2, "neutral_result"),
        ("[rewrite]\nmode = \"retry\"\n", 2, "retry"),
    ] {
        let Error::Config(d) = Config::from_toml(src, "t.toml", Path::new(".")).unwrap_err() else {
            panic!("not a config error: {src}")
        };
        assert_eq!(d[0].line, line, "{src}: {}", d[0].message);
        assert!(d[0].message.contains(what), "{src}: {}", d[0].message);
    }
}

#[test]
fn approval_is_checked_with_lines_and_has_defaults() {
    let c = Config::embedded().unwrap();
    assert_eq!(c.approval.timeout, Duration::from_secs(120));
    assert_eq!(c.approval.keepalive, Duration::from_secs(5));
    assert_eq!(c.approval.max_pending, 1000);
    assert_eq!(c.approval.token_env, "TOOLGATE_APPROVAL_TOKEN");
    // The short names read as the same keys.
    let c = Config::from_toml(
        "[approval]\ntimeout = 30\nkeepalive = 0.5\n",
        "t.toml",
        Path::new("."),
    )
    .unwrap();
    assert_eq!(
        (c.approval.timeout, c.approval.keepalive),
        (Duration::from_secs(30), Duration::from_millis(500))
    );
    let src = "[approval]\ntimeout_secs = 600\nkeepalive_secs = 0\nmax_pending = 0\nwebhook = \"ftp://x\"\n";
    let Error::Config(d) = Config::from_toml(src, "t.toml", Path::new(".")).unwrap_err() else {
        panic!("not a config error")
    };
    let lines: Vec<(usize, bool)> = d
        .iter()
        .map(|d| (d.line, d.message.starts_with("approval.")))
        .collect();
    assert_eq!(
        lines,
        [(2, true), (3, true), (4, true), (5, true), (5, true)],
        "{d:?}"
    );
    // A webhook needs its signing key: an error where it runs, deferred for `check`.
    let src = "[approval]\nwebhook = \"https://hooks.example\"\nsecret_env = \"TOOLGATE_UNIT_NO_SUCH_SECRET\"\n";
    let Error::Config(d) = Config::from_toml(src, "t.toml", Path::new(".")).unwrap_err() else {
        panic!("not a config error")
    };
    assert!(
        d[0].message.contains("TOOLGATE_UNIT_NO_SUCH_SECRET"),
        "{d:?}"
    );
    let c = Config::parse(src, "t.toml", Path::new("."), true).unwrap();
    assert!(
        c.deferred
            .iter()
            .any(|d| d.contains("TOOLGATE_UNIT_NO_SUCH_SECRET")),
        "{:?}",
        c.deferred
    );
}

#[test]
fn state_defaults_to_memory_and_redis_needs_a_redis_url() {
    let c = Config::embedded().unwrap();
    assert_eq!(c.state.backend, Backend::Memory);
    assert_eq!(c.state.on_error, OnError::FailClosed);
    let c = Config::from_toml(
        "[state]\nbackend = \"redis\"\nurl = \"redis://:pw@10.0.0.5:6379/2\"\non_error = \"local\"\n",
        "t.toml",
        Path::new("."),
    )
    .unwrap();
    assert_eq!(
        (c.state.backend, c.state.on_error),
        (Backend::Redis, OnError::Local)
    );
    assert!(
        !format!("{:?}", c.state).contains("pw"),
        "the URL's password stays out of debug output"
    );
    for (src, says) in [
        ("[state]\nbackend = \"redis\"\n", "needs url or url_env"),
        (
            "[state]\nbackend = \"redis\"\nurl = \"redis://h\"\nca_file = \"ca.pem\"\n",
            "rediss:// (TLS)",
        ),
        (
            "[state]\nbackend = \"redis\"\nurl = \"http://h\"\n",
            "redis:// or rediss:// URL",
        ),
        (
            "[state]\nbackend = \"redis\"\nurl_env = \"TOOLGATE_UNIT_NO_SUCH_URL\"\n",
            "TOOLGATE_UNIT_NO_SUCH_URL",
        ),
        ("[state]\nbackend = \"disk\"\n", "unknown variant"),
        ("[state]\nttl = 3\n", "unknown field"),
    ] {
        let Error::Config(d) = Config::from_toml(src, "t.toml", Path::new(".")).unwrap_err() else {
            panic!("not a config error")
        };
        assert!(d.iter().any(|d| d.message.contains(says)), "{src}: {d:?}");
    }
}
