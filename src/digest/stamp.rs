//! File change stamps: sizes and modification times, compared to notice edits
//! (policy and schema files, fact files, trace findings, certificates).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A file's size and modification time (`(0, None)` when it cannot be read).
pub type Stamp = (u64, Option<SystemTime>);

/// The stamp of each path, in order.
pub fn of_files(paths: &[PathBuf]) -> Vec<Stamp> {
    paths.iter().map(|p| of_file(p)).collect()
}

fn of_file(p: &Path) -> Stamp {
    match std::fs::metadata(p) {
        Ok(m) => (m.len(), m.modified().ok()),
        Err(_) => (0, None),
    }
}

/// Names and stamps of a dir's `*.ext` files and of `extra` files, sorted.
pub fn of_dir(dir: &Path, ext: &str, extra: &[PathBuf]) -> Vec<(PathBuf, Stamp)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == ext))
                .collect()
        })
        .unwrap_or_default();
    files.extend(extra.iter().cloned());
    files.sort();
    files.dedup();
    files
        .into_iter()
        .map(|p| {
            let s = of_file(&p);
            (p, s)
        })
        .collect()
}
