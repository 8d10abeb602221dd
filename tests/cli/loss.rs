//! `--loss`: packet loss as TCP meets it. Real clients download through
//! the proxy and under `--exec` over a lossy link: every byte arrives
//! (sha256), and the time is what TCP's bound on throughput under loss
//! gives (Mathis et al.: MSS / (RTT · √(2p/3))), never less, and loosely
//! more on a busy machine. `--drop`, which deletes bytes, is the other.

use crate::exec::Web;
use crate::harness::{Listening, installed, random_bytes, shape};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::Instant;

/// The link: 25 ms each way, 5% loss, a fixed seed.
const LINK: [&str; 6] = ["--delay", "25ms", "--loss", "5%", "--seed", "3"];
/// What TCP's congestion control carries over it, in bytes a second:
/// 1448 / (0.05 · √(2 · 0.05 / 3)).
const BOUND: f64 = 158_626.0;
/// The body each client downloads.
const SIZE: usize = 256 * 1024;

/// `took` seconds for `bytes` is within the bound's band: never sooner
/// than the bound lets them through (less a segment's share), at most
/// loosely later.
fn at_the_bound(what: &str, bytes: usize, took: f64) {
    let model = bytes as f64 / BOUND;
    assert!(
        took >= model * 0.9 && took <= model + 6.0,
        "{what}: {bytes} bytes took {took:.2} s; the model gives {model:.2} s"
    );
}

#[test]
fn a_download_through_the_proxy_is_whole_and_slowed_as_tcp_is_by_loss() {
    let body = random_bytes(SIZE, 5);
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let server_at = server.local_addr().unwrap().to_string();
    let sent = body.clone();
    std::thread::spawn(move || {
        for mut stream in server.incoming().flatten() {
            let _ = stream.write_all(&sent);
        }
    });
    let mut command = shape(["--listen", "127.0.0.1:0", "--connect", &server_at]);
    command.args(LINK);
    let proxy = Listening::start(command, Stdio::null());
    let start = Instant::now();
    let mut client = TcpStream::connect(&proxy.address).unwrap();
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap();
    let took = start.elapsed().as_secs_f64();
    assert!(
        got == body,
        "the stream changed: {} bytes of {}",
        got.len(),
        body.len()
    );
    at_the_bound("through the proxy", SIZE, took);
}

#[test]
fn curl_python_node_and_go_under_exec_download_whole_at_the_bound() {
    let body = random_bytes(SIZE, 6);
    let web = Web::start(body.clone());
    let url = web.url();
    let scratch = crate::harness::Scratch::new("exec-loss");
    let out = scratch.path().join("got");
    let out = out.to_str().unwrap();
    let python = "import sys, urllib.request\n\
                  open(sys.argv[2], 'wb').write(urllib.request.urlopen(sys.argv[1]).read())";
    let node = "const fs = require('fs'); const chunks = [];\n\
                require('http').get(process.argv[1], r => {\n\
                \x20 r.on('data', c => chunks.push(c));\n\
                \x20 r.on('end', () => fs.writeFileSync(process.argv[2], Buffer.concat(chunks))); });";
    let mut clients: Vec<(&str, Vec<String>)> = Vec::new();
    if installed("curl") {
        let curl = ["curl", "-sS", "-o", out, &url];
        clients.push(("curl", curl.map(String::from).to_vec()));
    }
    clients.push((
        "python",
        ["python3", "-c", python, &url, out]
            .map(String::from)
            .to_vec(),
    ));
    if installed("node") {
        let node = ["node", "-e", node, &url, out];
        clients.push(("node", node.map(String::from).to_vec()));
    }
    let go;
    if installed("go") {
        let source = scratch.file(
            "main.go",
            br#"package main

import (
	"io"
	"net/http"
	"os"
)

func main() {
	r, err := http.Get(os.Args[1])
	if err != nil {
		os.Exit(1)
	}
	f, _ := os.Create(os.Args[2])
	if _, err := io.Copy(f, r.Body); err != nil {
		os.Exit(2)
	}
}
"#,
        );
        go = crate::exec::static_go(&scratch, &source, "fetch");
        let go = [go.to_str().unwrap(), &url, out];
        clients.push(("a static Go binary", go.map(String::from).to_vec()));
    }
    for (what, client) in clients {
        let _ = std::fs::remove_file(out);
        let mut command = shape(LINK);
        command.arg("--exec").args(&client).stdin(Stdio::null());
        let start = Instant::now();
        let output = command.output().unwrap();
        let took = start.elapsed().as_secs_f64();
        assert!(output.status.success(), "{what}: {output:?}");
        let got = std::fs::read(out).unwrap();
        assert!(got == body, "{what}: {} bytes of {}", got.len(), body.len());
        at_the_bound(what, SIZE, took);
    }
}

#[test]
fn loss_is_refused_for_a_pipe_which_has_no_packets() {
    let output = shape(["--loss", "1%"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("shape: --loss applies to a proxy"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
