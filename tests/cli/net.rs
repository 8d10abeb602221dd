//! Sockets in and out: `--listen` and `--connect` on TCP and Unix sockets
//! over loopback, byte-exact, and every error naming its address.

use crate::harness::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Connects to `connect`, retrying while shape is still setting up.
fn connect_when_ready<T>(mut connect: impl FnMut() -> std::io::Result<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match connect() {
            Ok(stream) => return stream,
            Err(err) if Instant::now() < deadline => {
                let _ = err;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(err) => panic!("shape never listened: {err}"),
        }
    }
}

#[test]
fn listen_on_tcp_reads_one_connection_byte_exact() {
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let data = random_bytes(8 << 20, 21);
    let child = shape(["--listen", &address, "--rate", "200MiB"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stream = connect_when_ready(|| TcpStream::connect(&address));
    let sender = {
        let data = data.clone();
        std::thread::spawn(move || stream.write_all(&data).unwrap())
    };
    let output = child.wait_with_output().unwrap();
    sender.join().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.stdout == data);
}

#[test]
fn connect_over_tcp_delivers_everything_and_waits_for_the_peer_to_close() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let data = random_bytes(6 << 20, 22);
    let dir = Scratch::new("connect-tcp");
    let input = std::fs::File::open(dir.file("in", &data)).unwrap();
    let mut child = shape(["--connect", &address])
        .stdin(Stdio::from(input))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    let mut got = Vec::new();
    peer.read_to_end(&mut got).unwrap();
    assert!(got == data, "{} of {} bytes", got.len(), data.len());
    // shape has shut down its side and now waits for ours.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "shape left before the peer closed"
    );
    drop(peer);
    assert!(child.wait().unwrap().success());
}

#[test]
fn unix_sockets_work_both_ways() {
    let dir = Scratch::new("unix");
    let data = random_bytes(3 << 20, 23);
    // In: shape listens.
    let socket = dir.0.join("in.sock");
    let address = format!("unix:{}", socket.display());
    let child = shape(["--listen", &address])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stream = connect_when_ready(|| UnixStream::connect(&socket));
    let sender = {
        let data = data.clone();
        std::thread::spawn(move || stream.write_all(&data).unwrap())
    };
    let output = child.wait_with_output().unwrap();
    sender.join().unwrap();
    assert!(output.status.success());
    assert!(output.stdout == data);
    assert!(
        !socket.exists(),
        "the socket path is removed once a peer is in"
    );
    // Out: shape connects.
    let socket = dir.0.join("out.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let address = format!("unix:{}", socket.display());
    let input = std::fs::File::open(dir.file("in", &data)).unwrap();
    let mut child = shape(["--connect", &address, "--rate", "100MiB"])
        .stdin(Stdio::from(input))
        .spawn()
        .unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    let mut got = Vec::new();
    peer.read_to_end(&mut got).unwrap();
    drop(peer);
    assert!(child.wait().unwrap().success());
    assert!(got == data);
}

#[test]
fn socket_errors_name_the_address() {
    let refused = run(
        shape(["--connect", &format!("127.0.0.1:{}", free_port())]),
        Stdio::null(),
    );
    assert_eq!(refused.code(), 1);
    assert!(
        refused.stderr.starts_with("shape: connect to 127.0.0.1:")
            && refused.stderr.contains("Connection refused"),
        "{}",
        refused.stderr
    );

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let in_use = run(shape(["--listen", &address]), Stdio::null());
    assert_eq!(in_use.code(), 1);
    assert_eq!(
        in_use.stderr,
        format!("shape: listen on {address}: Address already in use\n")
    );

    let missing = run(
        shape(["--connect", "unix:/nonexistent/shape.sock"]),
        Stdio::null(),
    );
    assert_eq!(missing.code(), 1);
    assert!(
        missing
            .stderr
            .contains("connect to unix:/nonexistent/shape.sock: No such file or directory"),
        "{}",
        missing.stderr
    );

    for bad in [
        "9000",
        "host:",
        "host:0",
        "host:99999",
        "::1:80",
        "unix:",
        "a b:80",
    ] {
        for flag in ["--listen", "--connect"] {
            let run = run(shape([flag, bad]), Stdio::null());
            assert_eq!(run.code(), 2, "{flag} {bad}: {}", run.stderr);
            assert!(
                run.stderr.contains(flag) && run.stderr.contains("e.g."),
                "{}",
                run.stderr
            );
        }
    }
}
