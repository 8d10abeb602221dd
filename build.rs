//! Records the version `shape --version` prints: the package's, and the
//! git commit it was built from when it is built from a checkout.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let version = env!("CARGO_PKG_VERSION");
    let commit = Path::new(".git").exists().then(watch_head).flatten();
    let full = match commit {
        Some(commit) => format!("{version} ({commit})"),
        None => version.to_string(),
    };
    println!("cargo:rustc-env=SHAPE_VERSION={full}");
}

/// The commit checked out, and asks to be run again when it changes.
fn watch_head() -> Option<String> {
    let git = git_dir()?;
    let head_file = git.join("HEAD");
    println!("cargo:rerun-if-changed={}", head_file.display());
    let head = std::fs::read_to_string(&head_file).ok()?;
    if let Some(branch) = head.strip_prefix("ref: ") {
        // A worktree's branches live in the repository it belongs to.
        let common = std::fs::read_to_string(git.join("commondir"))
            .map(|dir| git.join(dir.trim()))
            .unwrap_or_else(|_| git.clone());
        for refs in [common.join(branch.trim()), common.join("packed-refs")] {
            if refs.exists() {
                println!("cargo:rerun-if-changed={}", refs.display());
            }
        }
    }
    let output = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    let commit = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !commit.trim().is_empty()).then(|| commit.trim().to_string())
}

/// The checkout's git directory: `.git` itself, or where a worktree's
/// `.git` file points (`gitdir: PATH`).
fn git_dir() -> Option<PathBuf> {
    let dot_git = Path::new(".git");
    if dot_git.is_dir() {
        return Some(dot_git.to_path_buf());
    }
    let pointer = std::fs::read_to_string(dot_git).ok()?;
    let dir = PathBuf::from(pointer.strip_prefix("gitdir:")?.trim());
    dir.is_dir().then_some(dir)
}
