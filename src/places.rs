//! Where gpuwmm finds and keeps its files, whether it runs from its source tree or installed.
//!
//! An installed binary (`cargo install`) must work with its source tree deleted and must write
//! nothing there: its built-in apps and default profiles are compiled in, and what it keeps
//! between runs goes to the user's folders (XDG base directories). A binary run from its own
//! build tree (`cargo run`, `./target/release/gpuwmm`, the tests) keeps the checkout's folders
//! (`.cache/`, `tuning/`, `.cuda-tools/`), as development always has. Every path decision of
//! that kind is made here, once.
//!
//! | what | variable | from the build tree | installed |
//! | --- | --- | --- | --- |
//! | PTX cache | `$GPUWMM_CACHE_DIR` | `<checkout>/.cache/ptx` | `$XDG_CACHE_HOME/gpuwmm/ptx` (`~/.cache/gpuwmm/ptx`) |
//! | chip profiles | `$GPUWMM_PROFILE_DIR` | `<checkout>/tuning` | `$XDG_DATA_HOME/gpuwmm/tuning` (`~/.local/share/gpuwmm/tuning`) |
//! | CUDA tools of `gpuwmm setup` | `$GPUWMM_CUDA_TOOLS` | `<checkout>/.cuda-tools` | `$XDG_DATA_HOME/gpuwmm/cuda-tools` |

use std::path::{Path, PathBuf};

/// Names the PTX cache folder, overriding the default (also set by `--cache-dir`).
pub const CACHE_DIR_ENV: &str = "GPUWMM_CACHE_DIR";
/// Names the folder of chip profiles, overriding the default.
pub const PROFILE_DIR_ENV: &str = "GPUWMM_PROFILE_DIR";

/// The checkout this binary was built from, when the binary runs from that checkout's build
/// tree (it lies under the checkout's folder). `None` for an installed binary, even while the
/// checkout still exists: an installed tool never writes into a source tree.
pub fn source_tree() -> Option<&'static Path> {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = std::env::current_exe().ok()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let checkout_real = checkout.canonicalize().ok()?;
    exe.starts_with(&checkout_real).then_some(checkout)
}

/// The folder of the PTX cache: `$GPUWMM_CACHE_DIR`, else the build tree's `.cache/ptx`, else
/// the user's cache folder.
pub fn ptx_cache_dir() -> PathBuf {
    env_dir(CACHE_DIR_ENV).unwrap_or_else(|| match source_tree() {
        Some(checkout) => checkout.join(".cache").join("ptx"),
        None => user_cache_dir().join("ptx"),
    })
}

/// The folder chip profiles are read from and `tune` writes to: `$GPUWMM_PROFILE_DIR`, else
/// the build tree's `tuning/`, else `tuning/` in the user's data folder.
pub fn profile_dir() -> PathBuf {
    env_dir(PROFILE_DIR_ENV).unwrap_or_else(|| match source_tree() {
        Some(checkout) => checkout.join("tuning"),
        None => user_data_dir().join("tuning"),
    })
}

/// Where `gpuwmm setup` installs the CUDA tools by default: the build tree's `.cuda-tools`,
/// else `cuda-tools` in the user's data folder.
pub fn setup_tools_dir() -> PathBuf {
    match source_tree() {
        Some(checkout) => checkout.join(".cuda-tools"),
        None => user_tools_dir(),
    }
}

/// `cuda-tools` in the user's data folder, where an installed `gpuwmm setup` puts the tools;
/// searched by every binary.
pub fn user_tools_dir() -> PathBuf {
    user_data_dir().join("cuda-tools")
}

/// `$XDG_CACHE_HOME/gpuwmm`, else `~/.cache/gpuwmm`.
pub fn user_cache_dir() -> PathBuf {
    xdg_dir("XDG_CACHE_HOME", ".cache")
}

/// `$XDG_DATA_HOME/gpuwmm`, else `~/.local/share/gpuwmm`.
pub fn user_data_dir() -> PathBuf {
    xdg_dir("XDG_DATA_HOME", ".local/share")
}

/// `$<variable>/gpuwmm` when the variable holds an absolute path (the XDG rule: a relative one
/// is ignored), else `$HOME/<fallback>/gpuwmm`, else a folder under the system's temporary one.
fn xdg_dir(variable: &str, fallback: &str) -> PathBuf {
    xdg_base(env_dir(variable), env_dir("HOME"), fallback).join("gpuwmm")
}

/// The base folder of the XDG rule, from the variable's value and `$HOME`.
fn xdg_base(xdg: Option<PathBuf>, home: Option<PathBuf>, fallback: &str) -> PathBuf {
    xdg.filter(|dir| dir.is_absolute())
        .or_else(|| home.map(|home| home.join(fallback)))
        .unwrap_or_else(|| std::env::temp_dir().join(fallback.trim_start_matches('.')))
}

/// The path an environment variable names, when it is set and not empty.
pub fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `path` made absolute, as `std::path::absolute` does, and written without `.` and `..`
/// where that names the same file (`/w/run/../apps/k` is `/w/apps/k` unless `run` is a link):
/// the paths gpuwmm records and prints stay readable when given relative to a sibling folder.
pub fn absolute(path: &Path) -> std::io::Result<PathBuf> {
    use std::path::Component;
    let spelled = std::path::absolute(path)?;
    let mut tidy = PathBuf::new();
    for part in spelled.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir if tidy.file_name().is_some() => {
                tidy.pop();
            }
            other => tidy.push(other),
        }
    }
    let same = |a: &Path, b: &Path| matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b);
    Ok(match tidy == spelled || same(&tidy, &spelled) {
        true => tidy,
        false => spelled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tests_run_from_the_build_tree_so_they_keep_the_checkouts_folders() {
        let checkout = source_tree().expect("test binaries lie under target/ of the checkout");
        assert_eq!(checkout, Path::new(env!("CARGO_MANIFEST_DIR")));
        if std::env::var_os(CACHE_DIR_ENV).is_none() {
            assert_eq!(ptx_cache_dir(), checkout.join(".cache/ptx"));
        }
        if std::env::var_os(PROFILE_DIR_ENV).is_none() {
            assert_eq!(profile_dir(), checkout.join("tuning"));
        }
    }

    #[test]
    fn an_xdg_folder_wins_over_home_unless_it_is_relative() {
        let home = Some(PathBuf::from("/home/u"));
        let xdg = |dir: &str| Some(PathBuf::from(dir));
        assert_eq!(
            xdg_base(xdg("/x/cache"), home.clone(), ".cache"),
            Path::new("/x/cache")
        );
        // The XDG base directory rule: relative paths are invalid and ignored.
        assert_eq!(
            xdg_base(xdg("rel"), home.clone(), ".cache"),
            Path::new("/home/u/.cache")
        );
        assert_eq!(
            xdg_base(None, home, ".local/share"),
            Path::new("/home/u/.local/share")
        );
        assert!(xdg_base(None, None, ".cache").starts_with(std::env::temp_dir()));
    }

    #[test]
    fn an_app_folder_given_through_a_sibling_is_recorded_without_dot_dot() {
        let dir = tempfile::tempdir().unwrap();
        let (run, apps) = (dir.path().join("run"), dir.path().join("apps/k"));
        std::fs::create_dir_all(&run).unwrap();
        std::fs::create_dir_all(&apps).unwrap();
        let through = run.join("..").join(".").join("apps/k");
        assert_eq!(absolute(&through).unwrap(), apps);
        // Through a link, `..` is the link target's parent: the path stays as spelled.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(elsewhere.path().join("apps/k")).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(elsewhere.path().join("apps"), &link).unwrap();
        let via_link = link.join("../apps/k");
        assert_eq!(absolute(&via_link).unwrap(), via_link);
    }
}
