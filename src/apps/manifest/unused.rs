//! Defines of `[source]` that no file of the app mentions.
//!
//! A misspelt define (`RINGCAP` for `RING_CAP`) compiles: the source's own `#ifndef` fallback
//! stays in force, and the app then runs at a size its manifest does not describe (out of
//! bounds, or a wrong post-condition) with nothing naming the cause. The files NVRTC may read
//! are the app's folder and its `include` folders, so a define that none of their source
//! files names as a whole word is reported, with the manifest's line. It is a warning, not an
//! error: a define may be meant for a header outside them (CCCL's, a stand-in's).

use super::error::locate;
use super::Manifest;
use std::path::{Path, PathBuf};

/// Source files read at the most, and bytes of each.
const MAX_FILES: usize = 2_000;
const MAX_BYTES: u64 = 4 << 20;

impl Manifest {
    /// One warning per define of `[source]` that no source file of the app's folder or its
    /// include folders mentions (none when no source file is found there at all).
    pub fn unused_defines(&self) -> Vec<String> {
        let dir = self.file.parent().unwrap_or(Path::new("."));
        let roots: Vec<PathBuf> = std::iter::once(dir.to_path_buf())
            .chain(self.source.include.iter().map(|i| dir.join(i)))
            .collect();
        let texts = source_texts(&roots);
        if texts.is_empty() {
            // A built-in app installed without its folder: nothing to judge by.
            return Vec::new();
        }
        (self.source.defines.iter())
            .filter(|(name, _)| !texts.iter().any(|t| mentions(t, name)))
            .map(|(name, _)| {
                let field = format!("source.defines.{name}");
                let line = locate(&self.text, &field).map_or(String::new(), |l| format!(":{l}"));
                format!(
                    "warning: {}{line}: {field}: no source file of the app's folder or its \
                     include folders mentions {name}; if it is misspelt, the source's own value \
                     stays in force",
                    self.file.display()
                )
            })
            .collect()
    }
}

/// The texts of the C, C++ and CUDA files below `roots` (at most [`MAX_FILES`]).
fn source_texts(roots: &[PathBuf]) -> Vec<String> {
    let mut texts = Vec::new();
    let mut pending: Vec<PathBuf> = roots.to_vec();
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if texts.len() == MAX_FILES {
                return texts;
            }
            if path.is_dir() {
                pending.push(path);
            } else if is_source(&path) {
                let small = path.metadata().is_ok_and(|m| m.len() <= MAX_BYTES);
                if let (true, Ok(text)) = (small, std::fs::read_to_string(&path)) {
                    texts.push(text);
                }
            }
        }
    }
    texts
}

fn is_source(path: &Path) -> bool {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    matches!(
        ext,
        "cu" | "cuh" | "h" | "hh" | "hpp" | "hxx" | "c" | "cc" | "cpp" | "cxx" | "inc" | "inl"
    )
}

/// Whether `text` holds `name` as a whole identifier.
fn mentions(text: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_counts_only_as_a_whole_identifier() {
        assert!(mentions("#ifndef RING_CAP\n", "RING_CAP"));
        assert!(mentions("int a[RING_CAP];", "RING_CAP"));
        assert!(!mentions("#ifndef RING_CAPACITY\n", "RING_CAP"));
        assert!(!mentions("MY_RING_CAP", "RING_CAP"));
    }

    /// QA bug: `RINGCAP` for the source's `RING_CAP` was accepted in silence; the source's
    /// `#ifndef` fallback stayed in force and every run crashed out of bounds.
    #[test]
    fn a_define_no_file_mentions_is_named_with_its_manifest_line() {
        let dir = tempfile::tempdir().unwrap();
        let toml = "name = \"ring\"\ndescription = \"d\"\npostcondition = \"p\"\n\n[source]\n\
                    files = [\"ring.cu\"]\ndefines = { RINGCAP = 8, ITEMS = \"n\" }\n\n\
                    [sizes]\nsim = { n = 4 }\ngpu = { n = 8 }\n\n\
                    [[buffers]]\nname = \"result\"\ntype = \"u32\"\nlength = 4\n\n\
                    [[launches]]\nkernel = \"k\"\ngrid = 1\nblock = 1\nargs = [\"result\"]\n\n\
                    [check]\nkernel = \"c\"\nargs = [\"result\"]\nresult = \"result\"\n";
        std::fs::create_dir(dir.path().join("inc")).unwrap();
        std::fs::write(dir.path().join("inc/ring.cuh"), "#ifndef ITEMS\n#endif\n").unwrap();
        std::fs::write(dir.path().join("ring.cu"), "#define RING_CAP 4\n").unwrap();
        let manifest = Manifest::parse(&dir.path().join("app.toml"), toml).unwrap();
        let warnings = manifest.unused_defines();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("app.toml:7: source.defines.RINGCAP: no source file"),
            "{warnings:?}"
        );
    }
}
