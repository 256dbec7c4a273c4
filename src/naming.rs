//! Default names of journals and output folders that never collide.
//!
//! A command run twice with the same arguments must not stop at the first run's journal, nor
//! write into it. So a default name is the first of a numbered *family*: `x.csv`, then `x-2.csv`,
//! `x-3.csv`, … (for a folder `d`, then `d-2`, `d-3`, …). A new run takes the number after the
//! highest one present, so the numbers follow the order the runs started in and the highest is
//! the newest, even after older members were deleted; `--resume` looks through the family from
//! the newest down.

use std::path::{Path, PathBuf};

/// Splits a file name at its extension: `x.csv` → (`x`, `.csv`); a name without a dot has an
/// empty extension.
fn split_extension(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(dot) if dot > 0 => name.split_at(dot),
        _ => (name, ""),
    }
}

/// The name of the `n`-th member of the family of `base_name`: `base_name` itself for 1 (and 0),
/// else `<stem>-<n><extension>`.
pub fn member_name(base_name: &str, n: u32) -> String {
    if n <= 1 {
        return base_name.to_string();
    }
    let (stem, extension) = split_extension(base_name);
    format!("{stem}-{n}{extension}")
}

/// Which member of the family of `base_name` the file name `name` is: 1 for `base_name`, `n` for
/// `<stem>-<n><extension>` with `n` ≥ 2 written without leading zeros, else `None`.
pub fn member_number(base_name: &str, name: &str) -> Option<u32> {
    if name == base_name {
        return Some(1);
    }
    let (stem, extension) = split_extension(base_name);
    let digits = name
        .strip_prefix(stem)?
        .strip_prefix('-')?
        .strip_suffix(extension)?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n >= 2)
}

/// The members of `base`'s family that exist, oldest first (the newest is last).
pub fn members(base: &Path) -> Vec<PathBuf> {
    let Some(base_name) = base.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let dir = match base.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let n = member_number(base_name, name.to_str()?)?;
            Some((n, base.with_file_name(name)))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, path)| path).collect()
}

/// A member of `base`'s family that does not exist yet: `base` when no member exists, else the
/// one numbered after the newest.
pub fn fresh(base: &Path) -> PathBuf {
    let Some(base_name) = base.file_name().and_then(|n| n.to_str()) else {
        return base.to_path_buf();
    };
    let newest = members(base)
        .last()
        .and_then(|p| member_number(base_name, p.file_name()?.to_str()?));
    match newest {
        None => base.to_path_buf(),
        Some(n) => base.with_file_name(member_name(base_name, n + 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_numbered_after_the_stem_before_the_extension() {
        let base = "cbe-dot-sys-str+-sim-seed1.csv";
        assert_eq!(member_name(base, 1), base);
        assert_eq!(member_name(base, 2), "cbe-dot-sys-str+-sim-seed1-2.csv");
        assert_eq!(member_name("sim-seed1", 12), "sim-seed1-12");
        for n in [1, 2, 3, 10, 417] {
            assert_eq!(member_number(base, &member_name(base, n)), Some(n));
            assert_eq!(
                member_number("sim-seed1", &member_name("sim-seed1", n)),
                Some(n)
            );
        }
    }

    #[test]
    fn other_names_are_not_members() {
        let base = "cbe-dot-no-str--sim-seed1.csv";
        for name in [
            "cbe-dot-no-str--sim-seed1.json",
            "cbe-dot-no-str--sim-seed1-2.json",
            "cbe-dot-no-str--sim-seed12.csv",
            "cbe-dot-no-str--sim-seed1-1.csv",
            "cbe-dot-no-str--sim-seed1-02.csv",
            "cbe-dot-no-str--sim-seed1-.csv",
            "cbe-dot-no-str--sim-seed1-2x.csv",
            "cbe-dot-no-str--sim-seed1-2-3.csv",
            "cbe-dot-no-str+-sim-seed1.csv",
        ] {
            assert_eq!(member_number(base, name), None, "{name}");
        }
        assert_eq!(member_number("sim-seed1", "sim-seed1-2.csv"), None);
    }

    #[test]
    fn a_fresh_member_follows_the_newest_and_never_exists() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("j.csv");
        assert_eq!(fresh(&base), base);
        assert!(members(&base).is_empty());
        std::fs::write(&base, "").unwrap();
        assert_eq!(fresh(&base), dir.path().join("j-2.csv"));
        std::fs::write(dir.path().join("j-2.csv"), "").unwrap();
        std::fs::write(dir.path().join("j-10.csv"), "").unwrap();
        std::fs::write(dir.path().join("j-2.json"), "").unwrap();
        assert_eq!(
            members(&base),
            ["j.csv", "j-2.csv", "j-10.csv"].map(|n| dir.path().join(n))
        );
        assert_eq!(fresh(&base), dir.path().join("j-11.csv"));
        // Deleting older members does not bring their numbers back.
        std::fs::remove_file(&base).unwrap();
        std::fs::remove_file(dir.path().join("j-2.csv")).unwrap();
        assert_eq!(fresh(&base), dir.path().join("j-11.csv"));
    }

    #[test]
    fn folders_form_families_too() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("sim-seed1");
        std::fs::create_dir(&base).unwrap();
        assert_eq!(fresh(&base), dir.path().join("sim-seed1-2"));
        assert_eq!(members(&base), std::slice::from_ref(&base));
    }
}
