//! `shape --serve` driven by toxiproxy's real clients: toxiproxy-python
//! from PyPI and toxiproxy-node-client from npm, each through the same
//! scenario (create, a toxic and its effect on a real connection, down and
//! up, remove, reset), in `tests/clients`. `tests/clients/setup` installs
//! them in target/clients (`.ci/run` calls it); without them a test is
//! skipped, except under CI. With `SHAPE_TOXIPROXY` the scenarios run
//! against the real toxiproxy.
//!
//! toxiproxy's Go client (`github.com/Shopify/toxiproxy/v2/client`) is in
//! no registry these machines reach (Go modules come from a proxy they
//! cannot reach, and Debian does not package it), so its scenario,
//! `tests/clients/toxiproxy_go.go`, runs only where `SHAPE_TOXIPROXY_GOPATH`
//! names a GOPATH that holds the client's source: it is built there with
//! Go in GOPATH mode. Without it the test says it was skipped, under CI
//! too.

use crate::harness::{ours, set_up};
use crate::serve::{Toxiproxy, echo_server};
use std::process::Command;

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

#[test]
fn toxiproxy_go_client_drives_the_server() {
    let Some(gopath) = std::env::var_os("SHAPE_TOXIPROXY_GOPATH") else {
        crate::harness::skipped(
            "toxiproxy's Go client needs SHAPE_TOXIPROXY_GOPATH, a GOPATH holding \
             github.com/Shopify/toxiproxy/v2/client",
        );
        return;
    };
    assert!(crate::harness::installed("go"));
    let scratch = crate::harness::Scratch::new("go-client");
    let source = scratch.path().join("main.go");
    std::fs::copy(ours("tests/clients/toxiproxy_go.go"), &source).unwrap();
    let binary = scratch.path().join("toxiproxy_go");
    let mut gopaths = std::ffi::OsString::from(&gopath);
    gopaths.push(":/usr/share/gocode");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(&source)
        .env("GO111MODULE", "off")
        .env("GOPATH", gopaths)
        .env("GOCACHE", scratch.path().join("cache"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    scenario(Command::new(binary));
}
