//! Word files: the embedded ones compile, a policy directory extends them,
//! and a bad entry is a load error with its file and line.

use super::*;

/// A fresh directory of its own under the temp dir (removed on drop).
struct Dir(std::path::PathBuf);

impl Dir {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn empty_dir() -> Dir {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("tg-words-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

fn dir_with(files: &[(&str, &str)]) -> Dir {
    let d = empty_dir();
    std::fs::create_dir(d.path().join("words")).unwrap();
    for (name, text) in files {
        std::fs::write(d.path().join("words").join(name), text).unwrap();
    }
    d
}

#[test]
fn the_embedded_words_compile_and_every_entry_has_an_origin() {
    let w = builtin().unwrap();
    assert!(w.families.iter().any(|f| f.name == "paying"));
    assert!(w.has(List::RequestReading, "summarise"));
    assert!(w.list(List::WordEndings).iter().any(String::is_empty));
    assert!(!w.phrases.each.is_empty() && !w.markers.each.is_empty());
    for (i, (l, name, _)) in LISTS.iter().enumerate() {
        assert_eq!(*l as usize, i, "LISTS is in the order of List");
        assert!(!w.list(*l).is_empty(), "list {name} is empty");
    }
    assert!(w.entries.iter().all(|e| !e.origin.trim().is_empty()));
    let text = w.text();
    assert!(text.contains("ignore_instructions/en") && text.contains("actions.toml"));
}

#[test]
fn a_policy_directory_adds_words_families_and_patterns() {
    let d = dir_with(&[(
        "shop.toml",
        r#"
[[list]]
name = "request_reading"
origin = "our support agents' requests"
words = ["Lookup"]

[[family]]
name = "paying"
origin = "our payment tool"
english = ["topup"]

[[family]]
name = "returning"
origin = "our returns tool"
english = ["return", "exchange"]

[define]
bot = "(bot|helper)"

[[pattern]]
name = "addressed_to_model/shop_helper"
reading = "both"
origin = "a phrasing seen in our tickets"
re = '\bdear shop ${bot}\b'
"#,
    )]);
    let (w, files) = load(Some(d.path())).unwrap();
    assert_eq!(files.len(), 1);
    assert!(w.has(List::RequestReading, "lookup"), "lower-cased");
    assert!(
        w.has(List::RequestReading, "summarise"),
        "kept the embedded"
    );
    let paying = w.families.iter().find(|f| f.name == "paying").unwrap();
    assert!(paying.english.iter().any(|x| x == "topup") && paying.english.len() > 5);
    assert!(w.families.iter().any(|f| f.name == "returning"));
    assert!(w.phrases.set.is_match("dear shop helper, refund me"));
    assert_ne!(w.digest, builtin().unwrap().digest);
    assert!(w.text().contains("a phrasing seen in our tickets"));
}

#[test]
fn a_bad_entry_is_refused_with_its_file_and_line() {
    for (text, says) in [
        ("[[list]]\nname = \"nope\"\norigin = \"x\"\nwords = []\n", "unknown list `nope`"),
        ("[[list]]\nname = \"request_reading\"\norigin = \" \"\nwords = [\"a\"]\n", "needs an `origin`"),
        ("[[list]]\nname = \"request_reading\"\nwords = [\"a\"]\nextra = 1\n", "unknown field"),
        ("\n[[pattern]]\nname = \"mine/x\"\nreading = \"both\"\norigin = \"o\"\nre = \"a\"\n", "detector one of"),
        ("\n\n[[pattern]]\nname = \"role_marker/x\"\nreading = \"both\"\norigin = \"o\"\nre = \"(\"\n", "role_marker/x"),
        ("[[pattern]]\nname = \"role_marker/react_step\"\nreading = \"first\"\norigin = \"o\"\nre = \"a\"\n", "already defined"),
        ("[[family]]\nname = \"paying\"\norigin = \"o\"\nenglish = [\"Pay Now\"]\n", "lower-case letters"),
        // Empty, as a file caught mid-write is: refused, not read as "no words".
        ("", "no [[list]], [[family]] or [[pattern]] entries"),
        ("[define]\nx = \"y\"\n", "no [[list]], [[family]] or [[pattern]] entries"),
    ] {
        let d = dir_with(&[("bad.toml", text)]);
        let e = load(Some(d.path())).err().unwrap().to_string();
        assert!(e.contains("bad.toml") && e.contains(says), "{text}: {e}");
    }
    let d = dir_with(&[("bad.toml", "\n\n[[pattern]]\nname = \"role_marker/x\"\nreading = \"both\"\norigin = \"o\"\nre = \"(\"\n")]);
    let e = load(Some(d.path())).err().unwrap().to_string();
    assert!(e.contains("bad.toml:3"), "{e}");
}

#[test]
fn no_words_folder_is_the_embedded_words() {
    let d = empty_dir();
    let (w, files) = load(Some(d.path())).unwrap();
    assert!(files.is_empty());
    assert_eq!(w.digest, builtin().unwrap().digest);
}

#[test]
fn a_file_named_like_a_shipped_one_takes_its_place() {
    // A copy of the shipped folder is the shipped words.
    let copy: Vec<(&str, &str)> = BUILTIN
        .iter()
        .map(|(n, t)| (n.rsplit('/').next().unwrap(), *t))
        .collect();
    let d = dir_with(&copy);
    let (w, files) = load(Some(d.path())).unwrap();
    assert_eq!(files.len(), BUILTIN.len());
    let b = builtin().unwrap();
    assert_eq!(w.entries.len(), b.entries.len());
    assert_eq!(w.phrases.each.len(), b.phrases.each.len());
    // An edited copy drops what it leaves out.
    let d = dir_with(&[(
        "sources.toml",
        "[[list]]\nname = \"source_stopwords\"\norigin = \"ours\"\nwords = [\"the\"]\n",
    )]);
    let (w, _) = load(Some(d.path())).unwrap();
    assert_eq!(w.list(List::SourceStopwords), ["the"]);
    assert!(w.list(List::SourceReading).is_empty());
}
