//! Records the version `shape --version` prints: the package's, and the
//! git commit it was built from when it is built from a checkout.

use std::path::Path;
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
    println!("cargo:rerun-if-changed=.git/HEAD");
    let head = std::fs::read_to_string(".git/HEAD").ok()?;
    if let Some(branch) = head.strip_prefix("ref: ") {
        let branch = Path::new(".git").join(branch.trim());
        if branch.exists() {
            println!("cargo:rerun-if-changed={}", branch.display());
        }
    }
    if Path::new(".git/packed-refs").exists() {
        println!("cargo:rerun-if-changed=.git/packed-refs");
    }
    let output = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    let commit = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !commit.trim().is_empty()).then(|| commit.trim().to_string())
}
