//! A directory read whole (a build output), and which of its files mention a word.

use std::collections::BTreeMap;
use std::path::Path;

/// Every file under `dir` (recursively), by its path relative to `dir`, with its bytes.
pub fn read_tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read a directory of the tree") {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(dir)
                    .expect("a path under the tree's root")
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&p).expect("read a file of the tree"));
            }
        }
    }
    out
}

/// The files of `all` whose text mentions `word` (lowercase: compared case-insensitively), the
/// files named in `except` left out.
pub fn files_mentioning(
    all: &BTreeMap<String, Vec<u8>>,
    word: &str,
    except: &[&str],
) -> Vec<String> {
    all.iter()
        .filter(|(n, _)| !except.contains(&n.as_str()))
        .filter(|(_, b)| String::from_utf8_lossy(b).to_lowercase().contains(word))
        .map(|(n, _)| n.clone())
        .collect()
}
