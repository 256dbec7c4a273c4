//! Build script: records the commit the binary is built from, so `gpuwmm --version` names it.

use std::path::Path;
use std::process::Command;

fn main() {
    let version = env!("CARGO_PKG_VERSION");
    let described = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => format!("{version} (commit {commit})"),
        None => format!("{version} (commit unknown: not built from a git checkout)"),
    };
    println!("cargo:rustc-env=GPUWMM_VERSION={described}");
    watch_head();
}

/// Asks cargo to run this script again when HEAD or the branch it names moves (and only then).
fn watch_head() {
    let (Some(git_dir), Some(common)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) else {
        return;
    };
    let mut watched = vec![Path::new(&git_dir).join("HEAD")];
    if let Some(branch) = git(&["rev-parse", "--symbolic-full-name", "HEAD"]) {
        watched.push(Path::new(&common).join(branch));
    }
    watched.push(Path::new(&common).join("packed-refs"));
    // A path that does not exist would make cargo run the script on every build.
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}
