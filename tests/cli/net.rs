//! Sockets in and out: `--listen` and `--connect` on TCP and Unix sockets
//! over loopback, byte-exact, and every error naming its address.

use crate::harness::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Stdio;
use std::time::Duration;

#[test]
fn listen_on_tcp_reads_one_connection_byte_exact() {
    let data = random_bytes(8 << 20, 21);
    let shape = Listening::start(
        shape(["--listen", "127.0.0.1:0", "--rate", "200MiB"]),
        Stdio::piped(),
    );
    assert!(
        shape.address.starts_with("127.0.0.1:") && !shape.address.ends_with(":0"),
        "{}",
        shape.address
    );
    let mut stream = TcpStream::connect(&shape.address).unwrap();
    let sender = {
        let data = data.clone();
        std::thread::spawn(move || stream.write_all(&data).unwrap())
    };
    let said = shape.stderr();
    let (status, got) = shape.finish();
    sender.join().unwrap();
    assert!(status.success(), "{said}");
    assert!(got == data);
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
    // shape has shut down its side and now waits for ours, however long:
    // a while of it is the subject.
    sleep_for(Duration::from_millis(300));
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
    let socket = dir.path().join("in.sock");
    let address = format!("unix:{}", socket.display());
    let shape_in = Listening::start(shape(["--listen", &address]), Stdio::piped());
    assert_eq!(shape_in.address, address);
    let mut stream = UnixStream::connect(&socket).unwrap();
    let sender = {
        let data = data.clone();
        std::thread::spawn(move || stream.write_all(&data).unwrap())
    };
    let (status, got) = shape_in.finish();
    assert!(status.success());
    sender.join().unwrap();
    assert!(got == data);
    assert!(
        !socket.exists(),
        "the socket path is removed once a peer is in"
    );
    // Out: shape connects.
    let socket = dir.path().join("out.sock");
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
    let (_refusing, port) = refusing_port();
    let refused = run(
        shape(["--connect", &format!("127.0.0.1:{port}")]),
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

    let any_port = run(shape(["--connect", "127.0.0.1:0"]), Stdio::null());
    assert_eq!(any_port.code(), 2);
    assert!(
        any_port.stderr.contains("--connect") && any_port.stderr.contains("only --listen"),
        "{}",
        any_port.stderr
    );
    for bad in ["9000", "host:", "host:99999", "::1:80", "unix:", "a b:80"] {
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

#[test]
fn quiet_listening_says_nothing() {
    let dir = Scratch::new("listen-quiet");
    let socket = dir.path().join("quiet.sock");
    let child = shape(["--listen", &format!("unix:{}", socket.display()), "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its one connection is the first that gets in.
    let mut stream = None;
    wait_until("shape to listen", || {
        stream = UnixStream::connect(&socket).ok();
        stream.is_some()
    });
    let mut stream = stream.unwrap();
    stream.write_all(b"quiet").unwrap();
    drop(stream);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    assert_eq!(output.stdout, b"quiet");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

#[test]
fn a_socket_left_by_a_killed_listener_is_replaced_and_nothing_else_is() {
    let dir = Scratch::new("stale");
    // Left behind: bound, then its listener gone without removing it.
    let stale = dir.path().join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let address = format!("unix:{}", stale.display());
    let shape_in = Listening::start(shape(["--listen", &address]), Stdio::piped());
    assert_eq!(shape_in.address, address);
    let mut stream = UnixStream::connect(&stale).unwrap();
    stream.write_all(b"through").unwrap();
    drop(stream);
    let (status, got) = shape_in.finish();
    assert!(status.success());
    assert_eq!(got, b"through");

    // A socket someone accepts on, and a plain file, stay.
    let live = dir.path().join("live.sock");
    let _listener = UnixListener::bind(&live).unwrap();
    let plain = dir.file("plain", b"not a socket");
    for path in [&live, &plain] {
        let refused = run(
            shape(["--listen", &format!("unix:{}", path.display())]),
            Stdio::null(),
        );
        assert_eq!(refused.code(), 1, "{}", refused.stderr);
        assert_says(&refused.stderr, "in use");
        assert!(path.exists());
    }
    assert_eq!(std::fs::read(&plain).unwrap(), b"not a socket");
}
