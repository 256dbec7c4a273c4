//! The local files a CUDA source includes, for the PTX cache key.
//!
//! NVRTC reads included files itself, so a cache keyed by the source text alone would hand out
//! stale PTX after a header of the app changed. This file follows `#include` lines the way the
//! preprocessor searches (a quoted name first beside the including file, then in the include
//! folders; an angled name in the include folders only), recursively, and returns every file it
//! finds with its text. It does not evaluate `#if`: a file included under any condition is
//! covered, which can only make the key stricter. Names found in no listed folder (CUDA's and
//! CCCL's headers, which the tools' version and the NVRTC options already pin) are skipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// How many files one source may pull in before the scan stops (a guard against pathological
/// trees; the files found so far still count).
const MAX_FILES: usize = 10_000;

/// Every local file `source` (the text of the file `path`) includes, directly or not, each once
/// (by canonical path) with its text, in the order first reached.
pub fn local_includes(
    path: &Path,
    source: &str,
    include_dirs: &[PathBuf],
) -> Vec<(PathBuf, String)> {
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut found = Vec::new();
    let mut pending: Vec<(PathBuf, String)> = vec![(path.to_path_buf(), source.to_string())];
    while let Some((file, text)) = pending.pop() {
        for (name, quoted) in include_names(&text) {
            let Some(target) = resolve(&file, &name, quoted, include_dirs)
                .and_then(|t| std::fs::canonicalize(t).ok())
            else {
                continue;
            };
            if found.len() >= MAX_FILES || !seen.insert(target.clone()) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&target) else {
                continue;
            };
            found.push((target.clone(), text.clone()));
            pending.push((target, text));
        }
    }
    found
}

/// The names by which `source` (the text of the file `path`) and the local files it includes
/// include each of `files` (canonical paths), each name with the file it finds: what NVRTC's
/// in-memory headers must be called to stand in for those files. An error names an include name
/// that finds one of `files` from one includer and another file from another (no in-memory
/// header could stand in for just one of them; a name found nowhere from some includer is no
/// conflict).
pub fn include_names_of(
    path: &Path,
    source: &str,
    include_dirs: &[PathBuf],
    files: &[PathBuf],
) -> Result<Vec<(String, PathBuf)>, String> {
    let mut names: Vec<(String, PathBuf)> = Vec::new();
    let mut found: Vec<(String, Option<PathBuf>)> = Vec::new();
    let includers = std::iter::once((path.to_path_buf(), source.to_string()))
        .chain(local_includes(path, source, include_dirs));
    for (file, text) in includers {
        for (name, quoted) in include_names(&text) {
            let target = resolve(&file, &name, quoted, include_dirs)
                .and_then(|t| std::fs::canonicalize(t).ok());
            found.push((name.clone(), target.clone()));
            if let Some(target) = target.filter(|t| files.contains(t)) {
                if !names.contains(&(name.clone(), target.clone())) {
                    names.push((name, target));
                }
            }
        }
    }
    for (name, target) in &names {
        if found
            .iter()
            .any(|(n, t)| n == name && t.as_ref().is_some_and(|t| t != target))
        {
            return Err(format!(
                "`#include \"{name}\"` finds {} from one file and another file from another",
                target.display()
            ));
        }
    }
    Ok(names)
}

/// The names of the `#include` lines of `text`, each with whether it is quoted (`"x.h"`) rather
/// than angled (`<x.h>`).
pub fn include_names(text: &str) -> Vec<(String, bool)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix('#')?.trim_start();
            let rest = rest.strip_prefix("include")?.trim_start();
            let (close, quoted) = match rest.chars().next()? {
                '"' => ('"', true),
                '<' => ('>', false),
                _ => return None,
            };
            let name = &rest[1..];
            let end = name.find(close)?;
            Some((name[..end].to_string(), quoted))
        })
        .collect()
}

/// Where `name`, included from `from`, is found: an absolute name as it is; a quoted one first
/// in `from`'s folder; then each include folder in order.
fn resolve(from: &Path, name: &str, quoted: bool, include_dirs: &[PathBuf]) -> Option<PathBuf> {
    let name = Path::new(name);
    if name.is_absolute() {
        return name.is_file().then(|| name.to_path_buf());
    }
    let beside = quoted
        .then(|| from.parent().map(|dir| dir.join(name)))
        .flatten();
    beside
        .into_iter()
        .chain(include_dirs.iter().map(|dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_lines_are_read_with_their_kind() {
        let text = "#include \"a.h\"\n  #  include <b/c.cuh>\n// #include \"no\"\n#define X\n";
        assert_eq!(
            include_names(text),
            [("a.h".to_string(), true), ("b/c.cuh".to_string(), false)]
        );
    }

    #[test]
    fn nested_includes_are_found_beside_their_includer_and_in_the_folders() {
        let dir = tempfile::tempdir().unwrap();
        let root = &dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("inc/sub")).unwrap();
        std::fs::create_dir_all(root.join("other")).unwrap();
        std::fs::write(root.join("inc/sub/a.cuh"), "#include \"b.cuh\"\n").unwrap();
        std::fs::write(
            root.join("inc/sub/b.cuh"),
            "#include <c.cuh>\n#include <d.h>\n",
        )
        .unwrap();
        std::fs::write(root.join("other/c.cuh"), "#include \"../inc/sub/a.cuh\"\n").unwrap();
        let main = root.join("main.cu");
        let found = local_includes(
            &main,
            "#include \"inc/sub/a.cuh\"\n#include <cub/cub.cuh>\n",
            &[root.join("other")],
        );
        let names: Vec<String> = found
            .iter()
            .map(|(p, _)| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        // `d.h` and CUB are in no listed folder; the cycle back to a.cuh ends the walk.
        assert_eq!(names, ["inc/sub/a.cuh", "inc/sub/b.cuh", "other/c.cuh"]);
    }

    #[test]
    fn a_file_is_named_as_each_of_its_includers_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = &dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("lock.cuh"), "// lock\n").unwrap();
        std::fs::write(root.join("sub/x.cuh"), "#include \"../lock.cuh\"\n").unwrap();
        let main = root.join("main.cu");
        let source = "#include \"lock.cuh\"\n#include \"sub/x.cuh\"\n";
        let lock = root.join("lock.cuh");
        let names = include_names_of(&main, source, &[], std::slice::from_ref(&lock)).unwrap();
        let expected = [("lock.cuh", &lock), ("../lock.cuh", &lock)];
        let expected: Vec<(String, PathBuf)> = expected
            .iter()
            .map(|(n, p)| (n.to_string(), (*p).clone()))
            .collect();
        assert_eq!(names, expected);
        // `lock.cuh` beside sub/x.cuh would be another file under the same name.
        std::fs::write(root.join("sub/lock.cuh"), "// another\n").unwrap();
        std::fs::write(root.join("sub/x.cuh"), "#include \"lock.cuh\"\n").unwrap();
        let error = include_names_of(&main, source, &[], &[lock]).unwrap_err();
        assert!(error.contains("`#include \"lock.cuh\"`"), "{error}");
    }
}
