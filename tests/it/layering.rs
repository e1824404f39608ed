//! The module layering is a test: every top-level module of `src/` sits in
//! one layer of `docs/ARCHITECTURE.md`'s "Layers" list and imports
//! (`crate::…`) only from layers below its own, so there is no cycle and no
//! import against the stated order. Test code is not counted (`#[cfg(test)]`
//! modules, files named `tests.rs` or `*_tests.rs`, and `tests/` folders).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The layers as the document lists them: `N. \`a\`, \`b\` — what they are`.
fn layers() -> BTreeMap<String, usize> {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let section = doc
        .split("\n## Layers\n")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has a '## Layers' section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let item = Regex::new(r"^(\d+)\. (.*)$").unwrap();
    let name = Regex::new(r"`(\w+)`").unwrap();
    let mut out = BTreeMap::new();
    for line in section.lines() {
        let Some(c) = item.captures(line) else {
            continue;
        };
        let n: usize = c[1].parse().unwrap();
        let names = c[2].split(" — ").next().unwrap_or("");
        for m in name.captures_iter(names) {
            assert!(
                out.insert(m[1].to_string(), n).is_none(),
                "{} listed twice",
                &m[1]
            );
        }
    }
    out
}

/// `#[cfg(test)] mod x { … }` blocks removed, by brace matching.
fn without_test_blocks(text: &str) -> String {
    let start = Regex::new(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{").unwrap();
    let mut out = String::new();
    let mut i = 0;
    for m in start.find_iter(text) {
        if m.start() < i {
            continue;
        }
        out.push_str(&text[i..m.start()]);
        let mut depth = 1;
        let mut j = m.end();
        for (k, ch) in text[m.end()..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                j = m.end() + k + 1;
                break;
            }
        }
        i = j;
    }
    out.push_str(&text[i..]);
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            if name != "tests" {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(p);
        }
    }
}

/// Each top-level module and the top-level modules it imports.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join("src");
    let mut modules = BTreeMap::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if name == "main" || name == "lib" {
            continue;
        }
        let mut files = Vec::new();
        if p.is_dir() {
            rust_files(&p, &mut files);
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p.clone());
        }
        modules.entry(name).or_insert_with(Vec::new).extend(files);
    }
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    let comment = Regex::new(r"//[^\n]*").unwrap();
    let path = Regex::new(r"\bcrate::(\w+)").unwrap();
    let group = Regex::new(r"(?s)use\s+crate::\{([^;]*)\}").unwrap();
    let part = Regex::new(r"(?:^|[,{\s])(\w+)(?:::|\s*[,}]|$)").unwrap();
    let mut out = BTreeMap::new();
    for (m, files) in &modules {
        let mut to = BTreeSet::new();
        for f in files {
            let text = std::fs::read_to_string(f).unwrap();
            let text = comment
                .replace_all(&without_test_blocks(&text), "")
                .to_string();
            for c in path.captures_iter(&text) {
                to.insert(c[1].to_string());
            }
            for g in group.captures_iter(&text) {
                for c in part.captures_iter(&g[1]) {
                    to.insert(c[1].to_string());
                }
            }
        }
        to.retain(|t| t != m && names.contains(t));
        out.insert(m.clone(), to);
    }
    out
}

#[test]
fn modules_import_only_from_the_layers_below_theirs() {
    let layers = layers();
    let imports = imports();
    let unplaced: Vec<&String> = imports
        .keys()
        .filter(|m| !layers.contains_key(*m))
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules missing from the Layers list: {unplaced:?}"
    );
    let gone: Vec<&String> = layers
        .keys()
        .filter(|m| !imports.contains_key(*m))
        .collect();
    assert!(
        gone.is_empty(),
        "the Layers list names modules that are not in src/: {gone:?}"
    );
    let mut wrong = Vec::new();
    for (m, to) in &imports {
        for t in to {
            if layers[t] >= layers[m] {
                wrong.push(format!(
                    "{m} (layer {}) imports {t} (layer {})",
                    layers[m], layers[t]
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layering:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_sees_an_import_against_the_order() {
    // The reader finds a `crate::` path, a grouped `use`, and skips test blocks and comments.
    let text = "use crate::{call::Call, digest};\nfn f() { crate::policy::x(); }\n// crate::server\n#[cfg(test)]\nmod tests { use crate::proxy; }\n";
    let stripped = without_test_blocks(text);
    assert!(!stripped.contains("proxy"));
    assert!(stripped.contains("crate::policy"));
}

/// What names a wire format: the `Protocol` variants, the codec folders
/// under `src/protocol/`, and the labels `Protocol::label` gives them.
struct WireNames {
    variants: Vec<String>,
    codecs: Vec<String>,
    labels: Vec<String>,
}

fn wire_names() -> WireNames {
    let text = std::fs::read_to_string(root().join("src/protocol/mod.rs")).unwrap();
    let body = text
        .split("pub enum Protocol {")
        .nth(1)
        .and_then(|b| b.split('}').next())
        .expect("src/protocol/mod.rs declares `pub enum Protocol`");
    let variant = Regex::new(r"(?m)^\s*(\w+),").unwrap();
    let variants: Vec<String> = variant
        .captures_iter(body)
        .map(|c| c[1].to_string())
        .collect();
    // Each codec says its label in its `Codec::label`.
    let label = Regex::new(r#"fn label\(&self\) -> &'static str \{\s*"(\w+)""#).unwrap();
    let mut labels = Vec::new();
    for e in std::fs::read_dir(root().join("src/protocol")).unwrap() {
        let p = e.unwrap().path().join("codec.rs");
        if let Ok(t) = std::fs::read_to_string(&p) {
            labels.extend(label.captures_iter(&t).map(|c| c[1].to_string()));
        }
    }
    let mut codecs = Vec::new();
    for e in std::fs::read_dir(root().join("src/protocol")).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && p.join("stream.rs").exists() {
            codecs.push(p.file_name().unwrap().to_string_lossy().to_string());
        }
    }
    assert!(
        variants.len() >= 3 && labels.len() == variants.len() && codecs.len() == variants.len(),
        "read {variants:?}, {labels:?}, {codecs:?}"
    );
    WireNames {
        variants,
        codecs,
        labels,
    }
}

/// The lines of `text` (test blocks and comments removed) that decide by a
/// wire format: a `Protocol` variant, a codec's module path, or a label
/// compared or matched as a string.
fn wire_matches(text: &str, w: &WireNames) -> Vec<String> {
    let comment = Regex::new(r"//[^\n]*").unwrap();
    let code = comment
        .replace_all(&without_test_blocks(text), "")
        .to_string();
    let v = w.variants.join("|");
    let c = w.codecs.join("|");
    let l = w.labels.join("|");
    let pats = [
        format!(r"\bProtocol::({v})\b"),
        format!(r"\bprotocol::({c})\b"),
        format!(r"\bprotocol::\{{[^}}]*\b({c})\b"),
        format!(r#"(==|!=)\s*"({l})"|"({l})"\s*(==|!=|=>|\|)"#),
    ];
    let res: Vec<Regex> = pats.iter().map(|p| Regex::new(p).unwrap()).collect();
    code.lines()
        .filter(|line| res.iter().any(|r| r.is_match(line)))
        .map(|line| line.trim().to_string())
        .collect()
}

/// Adding a wire format means its folder under `src/protocol/` (its codec,
/// route rows included), its line in the registry and its upstream's
/// config section: nothing else in `src/` decides by a wire format.
#[test]
fn no_wire_format_is_matched_outside_protocol_and_the_config() {
    let w = wire_names();
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let allowed = |p: &Path| {
        let rel = p
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        rel.starts_with("protocol/") || rel.starts_with("config/")
    };
    let mut found = Vec::new();
    for f in files.iter().filter(|f| !allowed(f)) {
        let text = std::fs::read_to_string(f).unwrap();
        for line in wire_matches(&text, &w) {
            found.push(format!(
                "{}: {line}",
                f.strip_prefix(&src).unwrap().display()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "wire formats decided outside protocol/ and the config:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_wire_check_sees_a_match_on_a_protocol() {
    let w = wire_names();
    let seen = |t: &str| !wire_matches(t, &w).is_empty();
    assert!(seen("if p == Protocol::Responses { x() }"));
    assert!(seen("use crate::protocol::{chat, Options};"));
    assert!(seen("let b = crate::protocol::messages::error_body(e);"));
    assert!(seen(r#"match label { "responses" => 1, _ => 2 }"#));
    assert!(seen(r#"if ctx.protocol == "chat_completions" {}"#));
    assert!(!seen(r#"let body = json!({"messages": []});"#));
    assert!(!seen(
        "#[cfg(test)]\nmod tests { use crate::protocol::chat; }\n"
    ));
    assert!(!seen("let u = state.upstream_for(protocol);"));
}

/// The top-level modules whose code (tests aside) names hyper.
fn hyper_users() -> BTreeSet<String> {
    let src = root().join("src");
    let uses = Regex::new(r"\b(hyper|hyper_util)::").unwrap();
    let comment = Regex::new(r"//[^\n]*").unwrap();
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        let mut files = Vec::new();
        match p.is_dir() {
            true => rust_files(&p, &mut files),
            false => files.push(p.clone()),
        }
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            if uses.is_match(&comment.replace_all(&without_test_blocks(&text), "")) {
                out.insert(name.clone());
            }
        }
    }
    out
}

#[test]
fn only_the_serving_parts_the_mock_and_the_cli_clients_touch_hyper() {
    let allowed: BTreeSet<String> = ["proxy", "upstream", "server", "mock", "cli"]
        .map(String::from)
        .into();
    let users = hyper_users();
    assert!(
        users.contains("proxy") && users.contains("server"),
        "{users:?}"
    );
    let others: Vec<&String> = users.difference(&allowed).collect();
    assert!(
        others.is_empty(),
        "hyper used outside the parts docs/ARCHITECTURE.md names: {others:?}"
    );
}
