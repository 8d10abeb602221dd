//! The committed man page and completions are what the binary generates
//! now; a stale file fails here with the command that refreshes it.

use crate::harness::*;
use std::process::Stdio;

// The committed files are the full build's.
#[cfg(all(feature = "serve", feature = "exec", feature = "fleet"))]
#[test]
fn committed_man_page_and_completions_are_fresh() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = [
        ("man/shape.1", "man"),
        ("completions/shape.bash", "bash"),
        ("completions/_shape", "zsh"),
        ("completions/shape.fish", "fish"),
        ("completions/shape.elv", "elvish"),
        ("completions/_shape.ps1", "powershell"),
    ];
    let mut stale = Vec::new();
    for (path, what) in files {
        let run = run(shape(["--generate", what]), Stdio::null());
        assert_eq!(run.code(), 0, "{}", run.stderr);
        let committed = std::fs::read(root.join(path)).unwrap_or_default();
        if committed != run.stdout {
            stale.push(format!("cargo run --quiet -- --generate {what} > {path}"));
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files; refresh them with:\n{}",
        stale.join("\n")
    );
}

#[test]
fn help_and_the_man_page_name_no_path_of_a_developers_machine() {
    let manifest = env!("CARGO_MANIFEST_DIR");
    for args in [
        &["--help"][..],
        &["-h"],
        &["--generate", "man"],
        &["--version"],
    ] {
        let run = run(shape(args), Stdio::null());
        assert_eq!(run.code(), 0, "{args:?}: {}", run.stderr);
        let text = String::from_utf8_lossy(&run.stdout);
        for local in [manifest, "/root", "/home/", "target/", ".cargo", "/work"] {
            assert!(!text.contains(local), "{args:?} names {local}");
        }
    }
}
