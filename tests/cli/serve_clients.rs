//! `shape --serve` driven by toxiproxy's real clients: toxiproxy-python
//! from PyPI and toxiproxy-node-client from npm, each through the same
//! scenario (create, a toxic and its effect on a real connection, down and
//! up, remove, reset), in `tests/clients`. `tests/clients/setup` installs
//! them in target/clients (`.ci/run` calls it); without them a test is
//! skipped, except under CI. With `SHAPE_TOXIPROXY` the scenarios run
//! against the real toxiproxy.

use crate::serve::{Toxiproxy, echo_server};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's `path`.
fn ours(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// True if `path` exists; if not, the test is skipped, except under CI.
fn set_up(path: &Path) -> bool {
    if path.exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is missing; .ci/run installs it with tests/clients/setup",
        path.display()
    );
    eprintln!(
        "skipped: {} is missing (run tests/clients/setup)",
        path.display()
    );
    false
}

/// Runs `command` with the API's port and an echo server's address, and
/// expects it to say `ok` and exit 0.
fn scenario(mut command: Command) {
    let server = Toxiproxy::start(&[]);
    let port = server.api.rsplit(':').next().unwrap().to_string();
    let output = command
        .arg(port)
        .arg(echo_server())
        .output()
        .expect("the client runs");
    let said = String::from_utf8_lossy(&output.stdout);
    let complained = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && said.trim() == "ok",
        "{:?}\n{said}\n{complained}\nshape said: {}",
        output.status,
        server.stderr()
    );
}

#[test]
fn toxiproxy_python_drives_the_server() {
    let python = ours("target/clients/venv/bin/python");
    if !set_up(&python) {
        return;
    }
    let mut command = Command::new(python);
    command.arg(ours("tests/clients/toxiproxy_python.py"));
    scenario(command);
}

#[test]
fn toxiproxy_node_client_drives_the_server() {
    let modules = ours("target/clients/node/node_modules");
    if !set_up(&modules.join("toxiproxy-node-client")) {
        return;
    }
    let mut command = Command::new("node");
    command
        .arg(ours("tests/clients/toxiproxy_node.js"))
        .env("NODE_PATH", modules);
    scenario(command);
}
