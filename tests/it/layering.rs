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
