//! `--exec` with a link (`--delay`, `--jitter`, a stream's faults): the
//! command's TCP connections take the link's round trip to connect and
//! for every exchange, in blocking programs and in event loops (Python's
//! asyncio, Node, Go's netpoller in a static binary, curl), as clients
//! and as servers; readiness says the truth, so an idle program does not
//! spin and one slow connection holds up no other. Each time is at least
//! the link's (exactly: shape never delivers early) and at most loosely
//! more, for a busy machine.

use crate::exec::Web;
use crate::harness::{installed, random_bytes, shape, skipped};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

/// The link's delay each way in most tests here: a round trip of 100 ms.
const DELAY: &str = "50ms";
const ROUND_TRIP_MS: f64 = 100.0;

/// An echo server on loopback: every connection gets back what it sends.
fn echo_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().port().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = stream.set_nodelay(true);
                let mut reading = stream.try_clone().unwrap();
                let mut writing = stream;
                let _ = std::io::copy(&mut reading, &mut writing);
            });
        }
    });
    address
}

/// A UDP echo server on loopback: every datagram goes back where it came
/// from.
fn udp_echo_server() -> String {
    let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port().to_string();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 2048];
        while let Ok((n, peer)) = server.recv_from(&mut buffer) {
            let _ = server.send_to(&buffer[..n], peer);
        }
    });
    port
}

/// Runs `args` under `--delay DELAY` and more `flags`, and returns its
/// output, which must be a success.
fn linked(flags: &[&str], args: &[&str]) -> Output {
    let mut command = shape(["--delay", DELAY]);
    command.args(flags).arg("--exec").args(args);
    let output = command.stdin(Stdio::null()).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    output
}

/// The numbers a program printed after `label` on its lines.
fn figures(output: &Output, label: &str) -> Vec<f64> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix(label))
        .flat_map(|rest| rest.split_whitespace().map(|n| n.parse::<f64>().unwrap()))
        .collect()
}

/// Each of `times` (ms) is at least `least` round trips of the link, and
/// their median at most a loose bound more.
fn round_trips(what: &str, times: &[f64], least: f64) {
    assert!(!times.is_empty(), "{what}: nothing measured");
    let floor = least * ROUND_TRIP_MS - 2.0;
    for &time in times {
        assert!(
            time >= floor,
            "{what}: {time} ms, under {floor} ms: {times:?}"
        );
    }
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let ceiling = least * ROUND_TRIP_MS + 400.0;
    assert!(median <= ceiling, "{what}: median {median} ms: {times:?}");
}

#[test]
fn a_blocking_client_connects_and_exchanges_in_a_round_trip_each() {
    let port = echo_server();
    let script = "import socket, sys, time\n\
                  t = time.monotonic()\n\
                  s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
                  print('connect', (time.monotonic() - t) * 1000)\n\
                  s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)\n\
                  sent = bytes(range(256)) * 40\n\
                  for i in range(5):\n\
                  \x20   t = time.monotonic()\n\
                  \x20   s.sendall(sent)\n\
                  \x20   got = b''\n\
                  \x20   while len(got) < len(sent): got += s.recv(65536)\n\
                  \x20   assert got == sent\n\
                  \x20   print('exchange', (time.monotonic() - t) * 1000)\n\
                  s.close()";
    let output = linked(&[], &["python3", "-c", script, &port]);
    round_trips("connect", &figures(&output, "connect"), 1.0);
    round_trips("exchange", &figures(&output, "exchange"), 1.0);
}

#[test]
fn without_pidfd_getfd_and_process_vm_calls_the_link_is_the_same() {
    // As under Docker's default profile, a client and a server.
    let port = echo_server();
    let script = "import socket, sys, time\n\
                  t = time.monotonic()\n\
                  s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
                  print('connect', (time.monotonic() - t) * 1000)\n\
                  for i in range(3):\n\
                  \x20   t = time.monotonic()\n\
                  \x20   s.sendall(b'x' * 3000)\n\
                  \x20   got = b''\n\
                  \x20   while len(got) < 3000: got += s.recv(65536)\n\
                  \x20   print('exchange', (time.monotonic() - t) * 1000)";
    let output = crate::exec::shape_without(
        &crate::exec::PTRACE_CALLS,
        &["--delay", DELAY, "--exec", "python3", "-c", script, &port],
    );
    assert!(output.status.success(), "{output:?}");
    round_trips("connect", &figures(&output, "connect"), 1.0);
    round_trips("exchange", &figures(&output, "exchange"), 1.0);
}

#[test]
fn asyncio_connections_at_once_are_not_held_up_by_each_other() {
    let port = echo_server();
    // Ten connections at once, each a connect and three exchanges: four
    // round trips each, 400 ms together, where one after another would
    // take four seconds.
    let script = "import asyncio, sys, time\n\
                  async def one(i):\n\
                  \x20   t = time.monotonic()\n\
                  \x20   r, w = await asyncio.open_connection('127.0.0.1', int(sys.argv[1]))\n\
                  \x20   print('connect', (time.monotonic() - t) * 1000)\n\
                  \x20   for n in range(3):\n\
                  \x20       t = time.monotonic()\n\
                  \x20       sent = bytes([i, n]) * 500\n\
                  \x20       w.write(sent); await w.drain()\n\
                  \x20       assert await r.readexactly(len(sent)) == sent\n\
                  \x20       print('exchange', (time.monotonic() - t) * 1000)\n\
                  \x20   w.close(); await w.wait_closed()\n\
                  async def main():\n\
                  \x20   t = time.monotonic()\n\
                  \x20   await asyncio.gather(*[one(i) for i in range(10)])\n\
                  \x20   print('all', (time.monotonic() - t) * 1000)\n\
                  asyncio.run(main())";
    let output = linked(&[], &["python3", "-c", script, &port]);
    round_trips("connect", &figures(&output, "connect"), 1.0);
    round_trips("exchange", &figures(&output, "exchange"), 1.0);
    let all = figures(&output, "all")[0];
    assert!(
        (4.0 * ROUND_TRIP_MS - 2.0..2_500.0).contains(&all),
        "ten connections of four round trips each took {all} ms together"
    );
}

#[test]
fn node_connects_and_exchanges_in_a_round_trip_each() {
    if !installed("node") {
        return;
    }
    let port = echo_server();
    let script = "const net = require('net');\n\
                  let t = process.hrtime.bigint(); const ms = () => Number(process.hrtime.bigint() - t) / 1e6;\n\
                  const s = net.connect(Number(process.argv[1]), '127.0.0.1', () => {\n\
                  \x20 console.log('connect', ms()); let n = 0; let got = Buffer.alloc(0);\n\
                  \x20 const ask = () => { t = process.hrtime.bigint(); s.write(Buffer.alloc(3000, n)); };\n\
                  \x20 s.on('data', d => { got = Buffer.concat([got, d]); if (got.length < 3000) return;\n\
                  \x20   if (!got.equals(Buffer.alloc(3000, n))) process.exit(3);\n\
                  \x20   console.log('exchange', ms()); got = Buffer.alloc(0);\n\
                  \x20   if (++n < 5) ask(); else s.end(); });\n\
                  \x20 ask(); });";
    let output = linked(&[], &["node", "-e", script, &port]);
    round_trips("connect", &figures(&output, "connect"), 1.0);
    round_trips("exchange", &figures(&output, "exchange"), 1.0);
}

#[test]
fn a_static_go_program_with_goroutines_on_the_netpoller_keeps_each_round_trip() {
    if !installed("go") {
        return;
    }
    let scratch = crate::harness::Scratch::new("exec-link-go");
    let source = scratch.file(
        "main.go",
        br#"package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

func main() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := time.Now()
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			t := time.Now()
			c, err := net.Dial("tcp", "127.0.0.1:"+os.Args[1])
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			connect := time.Since(t)
			sent := bytes.Repeat([]byte{byte(i)}, 2000)
			got := make([]byte, len(sent))
			var exchanges []time.Duration
			for n := 0; n < 3; n++ {
				t = time.Now()
				c.Write(sent)
				if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, sent) {
					os.Exit(2)
				}
				exchanges = append(exchanges, time.Since(t))
			}
			c.Close()
			mu.Lock()
			fmt.Println("connect", float64(connect.Microseconds())/1000)
			for _, e := range exchanges {
				fmt.Println("exchange", float64(e.Microseconds())/1000)
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	fmt.Println("all", float64(time.Since(start).Microseconds())/1000)
}
"#,
    );
    let binary = crate::exec::static_go(&scratch, &source, "pinger");
    let port = echo_server();
    let output = linked(&[], &[binary.to_str().unwrap(), &port]);
    round_trips("connect", &figures(&output, "connect"), 1.0);
    round_trips("exchange", &figures(&output, "exchange"), 1.0);
    let all = figures(&output, "all")[0];
    assert!(all < 2_500.0, "eight goroutines at once took {all} ms");
}

#[test]
fn curl_fetches_at_the_rate_after_the_links_round_trips() {
    if !installed("curl") {
        return;
    }
    let body = random_bytes(1 << 20, 81);
    let web = Web::start(body.clone());
    let start = Instant::now();
    let output = linked(
        &["--rate", "512KiB"],
        &["curl", "-sS", "-w", "\nconnect %{time_connect}", &web.url()],
    );
    let took = start.elapsed().as_secs_f64();
    let (fetched, said) = output.stdout.split_at(body.len());
    assert!(fetched == body, "curl's download changed");
    let said = String::from_utf8_lossy(said);
    let connect: f64 = said
        .trim()
        .strip_prefix("connect ")
        .unwrap()
        .parse()
        .unwrap();
    assert!(connect >= 0.098, "curl connected in {connect} s");
    // A round trip to connect, one for the request's first byte, then
    // 1 MiB at 512 KiB/s less its burst.
    assert!(
        (1.9..12.0).contains(&took),
        "1 MiB at 512 KiB/s took {took:.2}s"
    );
}

/// A server under `--exec` that echoes one connection, started, with the
/// port it listens on.
fn echoing_under_exec(flags: &[&str]) -> (Child, u16) {
    let serve = "import socket\n\
                 l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n\
                 print(l.getsockname()[1], flush=True)\n\
                 c, peer = l.accept()\n\
                 assert peer[0] == '127.0.0.1', peer\n\
                 while True:\n\
                 \x20   b = c.recv(65536)\n\
                 \x20   if not b: break\n\
                 \x20   c.sendall(b)\n\
                 print('done', flush=True)";
    let mut command = shape(["--delay", DELAY]);
    command.args(flags).args(["--exec", "python3", "-c", serve]);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.as_mut().unwrap());
    out.read_line(&mut line).unwrap();
    (child, line.trim().parse().unwrap())
}

#[test]
fn a_server_under_exec_answers_each_exchange_a_round_trip_later() {
    let (mut child, port) = echoing_under_exec(&[]);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut times = Vec::new();
    for n in 0..4u8 {
        let sent = vec![n; 5000];
        let start = Instant::now();
        stream.write_all(&sent).unwrap();
        let mut got = vec![0; sent.len()];
        stream.read_exact(&mut got).unwrap();
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        assert!(got == sent, "exchange {n} changed");
    }
    drop(stream);
    assert!(child.wait().unwrap().success());
    round_trips("a server's exchange", &times, 1.0);
}

/// A port of loopback that refuses connects: bound and not listening,
/// for as long as what is returned is kept.
fn closed_port() -> (rustix::fd::OwnedFd, String) {
    use rustix::net::{AddressFamily, SocketType};
    let socket = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    rustix::net::bind(&socket, &loopback).unwrap();
    let at = rustix::net::getsockname(&socket).unwrap();
    let port = std::net::SocketAddr::try_from(at)
        .unwrap()
        .port()
        .to_string();
    (socket, port)
}

#[test]
fn a_refused_connect_is_refused_a_round_trip_late_blocking_or_not() {
    let (_closed, port) = closed_port();
    let script = "import errno, select, socket, sys, time\n\
                  t = time.monotonic()\n\
                  try:\n\
                  \x20   socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
                  except ConnectionRefusedError:\n\
                  \x20   print('blocking', (time.monotonic() - t) * 1000)\n\
                  s = socket.socket(); s.setblocking(False)\n\
                  t = time.monotonic()\n\
                  assert s.connect_ex(('127.0.0.1', int(sys.argv[1]))) == errno.EINPROGRESS\n\
                  select.select([], [s], [])\n\
                  err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)\n\
                  assert err == errno.ECONNREFUSED, errno.errorcode.get(err)\n\
                  print('nonblocking', (time.monotonic() - t) * 1000)";
    let output = linked(&[], &["python3", "-c", script, &port]);
    round_trips(
        "a refused blocking connect",
        &figures(&output, "blocking"),
        1.0,
    );
    round_trips(
        "a refused connect in progress",
        &figures(&output, "nonblocking"),
        1.0,
    );
}

#[test]
fn node_go_and_curl_are_refused_not_reset_a_round_trip_late() {
    let (_closed, port) = closed_port();
    if installed("node") {
        let script = "const t = process.hrtime.bigint();\n\
                      require('net').connect(Number(process.argv[1]), '127.0.0.1')\n\
                      \x20 .on('error', e => console.log(e.code, Number(process.hrtime.bigint() - t) / 1e6));";
        let output = linked(&[], &["node", "-e", script, &port]);
        round_trips("node's refusal", &figures(&output, "ECONNREFUSED"), 1.0);
    }
    if installed("go") {
        let scratch = crate::harness::Scratch::new("exec-link-go-refused");
        let source = scratch.file(
            "main.go",
            br#"package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

func main() {
	t := time.Now()
	_, err := net.Dial("tcp", "127.0.0.1:"+os.Args[1])
	if !errors.Is(err, syscall.ECONNREFUSED) {
		fmt.Println("not refused:", err)
		os.Exit(1)
	}
	fmt.Println("refused", float64(time.Since(t).Microseconds())/1000)
}
"#,
        );
        let binary = crate::exec::static_go(&scratch, &source, "refused");
        let output = linked(&[], &[binary.to_str().unwrap(), &port]);
        round_trips("go's refusal", &figures(&output, "refused"), 1.0);
    }
    if installed("curl") {
        let url = format!("http://127.0.0.1:{port}/");
        let mut command = shape(["--delay", DELAY, "--exec", "curl", "-sSv", &url]);
        let started = Instant::now();
        let output = command.stdin(Stdio::null()).output().unwrap();
        let took = started.elapsed().as_secs_f64() * 1000.0;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(7), "{stderr}");
        assert!(stderr.contains("failed: Connection refused"), "{stderr}");
        assert!(took >= ROUND_TRIP_MS - 2.0, "refused after {took} ms");
    }
}

#[test]
fn an_idle_program_holding_a_delayed_connection_costs_no_cpu() {
    let port = echo_server();
    // Connected, it waits two seconds in select for bytes that never
    // come: shape must sleep too.
    let script = "import select, socket, sys\n\
                  s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
                  print('idle', flush=True)\n\
                  assert select.select([s], [], [], 2) == ([], [], [])\n\
                  print('done', flush=True)\n\
                  sys.stdin.read()";
    let mut child = shape(["--delay", DELAY, "--exec", "python3", "-c", script, &port])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let cpu = |pid: u32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after_name.split(' ').collect();
        // utime and stime, the 14th and 15th fields, in clock ticks.
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    assert_eq!(out.next().unwrap().unwrap(), "idle");
    let before = cpu(child.id());
    assert_eq!(out.next().unwrap().unwrap(), "done");
    let spent = cpu(child.id()) - before;
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    // Ticks are 10 ms: two seconds idle may cost a few, never a spin's.
    assert!(
        spent <= 10,
        "shape spent {spent} ticks while the command sat idle"
    );
}

#[test]
fn a_stream_fault_under_exec_cuts_the_commands_download_where_asked() {
    if !installed("curl") {
        skipped("curl is not installed");
        return;
    }
    let body = random_bytes(200_000, 82);
    let web = Web::start(body.clone());
    let scratch = crate::harness::Scratch::new("exec-link-cut");
    let (headers, out) = (scratch.path().join("headers"), scratch.path().join("out"));
    let mut command = shape(["--cut-after", "down:20000", "--exec", "curl", "-sS", "-D"]);
    command.arg(&headers).arg("-o").arg(&out).arg(web.url());
    let output = command.stdin(Stdio::null()).output().unwrap();
    // 18: the transfer ended before the length the headers gave.
    assert_eq!(output.status.code(), Some(18), "{output:?}");
    let headers = std::fs::read(headers).unwrap();
    let out = std::fs::read(out).unwrap();
    assert_eq!(headers.len() + out.len(), 20_000);
    assert!(out == body[..out.len()], "what came is not the start");
}

/// A DNS server for one name, on port 53 of its namespace's loopback:
/// `shape-test.invalid` is 127.0.0.2 (an A record; no AAAA), and a file
/// says when it listens.
const DNS_SERVER: &str = "import socket, struct, sys\n\
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', 53))\n\
    open(sys.argv[1], 'w').close()\n\
    while True:\n\
    \x20   q, peer = s.recvfrom(512)\n\
    \x20   end = q.index(b'\\0', 12) + 5\n\
    \x20   kind = struct.unpack('>H', q[end - 4:end - 2])[0]\n\
    \x20   answers = b'\\xc0\\x0c\\0\\1\\0\\1\\0\\0\\0\\x3c\\0\\4\\x7f\\0\\0\\2' if kind == 1 else b''\n\
    \x20   head = q[:2] + b'\\x81\\x80' + q[4:6] + struct.pack('>HHH', 1 if answers else 0, 0, 0)\n\
    \x20   s.sendto(head + q[12:end] + answers, peer)";

#[test]
fn a_name_looked_up_by_the_c_library_takes_the_links_round_trip() {
    if !crate::harness::mount_namespaces() || !installed("ip") {
        return;
    }
    let scratch = crate::harness::Scratch::new("exec-link-dns");
    let resolv = scratch.file("resolv.conf", b"nameserver 127.0.0.1\noptions attempts:1\n");
    let listening = scratch.path().join("listening");
    let lookup = "import socket, time\n\
                  t = time.monotonic()\n\
                  found = {a[4][0] for a in socket.getaddrinfo('shape-test.invalid', 80)}\n\
                  print('lookup', (time.monotonic() - t) * 1000)\n\
                  print('found', *found)";
    // A network namespace of the test's own, whose loopback has the
    // server on port 53, and whose /etc/resolv.conf names it.
    let script = "ip link set lo up && mount --bind \"$1\" /etc/resolv.conf || exit 1\n\
                  python3 -c \"$2\" \"$3\" & server=$!\n\
                  while [ ! -e \"$3\" ]; do sleep 0.01; done\n\
                  shift 3; \"$@\"; status=$?; kill $server; exit $status";
    let output = Command::new("unshare")
        .args([
            "--map-root-user",
            "--mount",
            "--net",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(&resolv)
        .arg(DNS_SERVER)
        .arg(&listening)
        .arg(env!("CARGO_BIN_EXE_shape"))
        .args(["--delay", DELAY, "--exec", "python3", "-c", lookup])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.contains("found 127.0.0.2\n"), "{said}");
    round_trips("a lookup", &figures(&output, "lookup"), 1.0);
}

#[test]
fn datagrams_take_the_links_round_trip_and_its_losses_and_copies() {
    let port = udp_echo_server();
    // Each datagram sent to the server, unconnected and then connected,
    // comes back from the server's own address.
    let script = "import socket, sys, time\n\
                  server = ('127.0.0.1', int(sys.argv[1]))\n\
                  n = int(sys.argv[2])\n\
                  s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)\n\
                  got = 0\n\
                  for i in range(n):\n\
                  \x20   t = time.monotonic(); s.sendto(b'%d' % i, server)\n\
                  \x20   try:\n\
                  \x20       while True:\n\
                  \x20           d, a = s.recvfrom(100)\n\
                  \x20           assert a == server, a\n\
                  \x20           got += 1\n\
                  \x20           if d == b'%d' % i: break\n\
                  \x20       print('exchange', (time.monotonic() - t) * 1000)\n\
                  \x20   except socket.timeout: pass\n\
                  c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.connect(server)\n\
                  t = time.monotonic(); c.send(b'hi'); assert c.recv(10) == b'hi'\n\
                  print('connected', (time.monotonic() - t) * 1000)\n\
                  print('got', got)";
    let output = linked(&[], &["python3", "-c", script, &port, "5"]);
    round_trips("a datagram's", &figures(&output, "exchange"), 1.0);
    round_trips(
        "a connected datagram's",
        &figures(&output, "connected"),
        1.0,
    );
    assert_eq!(figures(&output, "got"), [5.0]);

    // Every datagram copied each way: each comes back four times.
    let mut command = shape([
        "--duplicate",
        "1",
        "--exec",
        "python3",
        "-c",
        script,
        &port,
        "3",
    ]);
    let output = command.stdin(Stdio::null()).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let got = figures(&output, "got")[0];
    assert!(
        got >= 3.0 * 2.0,
        "{got} datagrams came back for 3 sent twice"
    );

    // Every datagram lost: none comes back, and the exchange times out.
    let lost = "import socket, sys\n\
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.5)\n\
                s.sendto(b'x', ('127.0.0.1', int(sys.argv[1])))\n\
                try: s.recvfrom(10); print('came')\n\
                except socket.timeout: print('lost')";
    let mut command = shape(["-q", "--drop", "1", "--exec", "python3", "-c", lost, &port]);
    let output = command.stdin(Stdio::null()).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "lost\n",
        "{output:?}"
    );
}

#[test]
fn a_datagram_with_control_data_on_an_unconnected_socket_passes_and_is_said_once() {
    let port = udp_echo_server();
    // sendmsg with a control message (IP_TOS): the kernel sends it where
    // the command said, which shape cannot turn to the link.
    let script = "import socket, struct, sys\n\
                  server = ('127.0.0.1', int(sys.argv[1]))\n\
                  s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)\n\
                  for i in range(2):\n\
                  \x20   tos = [(socket.IPPROTO_IP, socket.IP_TOS, struct.pack('i', 16))]\n\
                  \x20   s.sendmsg([b'x'], tos, 0, server)\n\
                  \x20   print(s.recvfrom(10)[0].decode())";
    let output = linked(&[], &["python3", "-c", script, &port]);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "x\nx\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("control data").count(), 1, "{stderr}");
}

#[test]
fn a_client_and_a_server_both_of_the_command_cross_the_link_once() {
    // A test suite's client and its own server on loopback, in one
    // process: each exchange takes one round trip, not two.
    let script = "import socket, threading, time\n\
                  l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n\
                  def serve():\n\
                  \x20   c, _ = l.accept()\n\
                  \x20   while (b := c.recv(100)): c.sendall(b)\n\
                  threading.Thread(target=serve, daemon=True).start()\n\
                  t = time.monotonic()\n\
                  c = socket.create_connection(l.getsockname())\n\
                  print('connect', (time.monotonic() - t) * 1000)\n\
                  for i in range(3):\n\
                  \x20   t = time.monotonic(); c.sendall(b'ping')\n\
                  \x20   assert c.recv(100) == b'ping'\n\
                  \x20   print('exchange', (time.monotonic() - t) * 1000)";
    let output = linked(&[], &["python3", "-c", script]);
    round_trips("connect", &figures(&output, "connect"), 1.0);
    let exchanges = figures(&output, "exchange");
    round_trips("exchange", &exchanges, 1.0);
    assert!(
        exchanges.iter().all(|&ms| ms < 2.0 * ROUND_TRIP_MS - 5.0),
        "an exchange crossed the link twice: {exchanges:?}"
    );
}

#[test]
fn a_datagram_client_and_server_both_of_the_command_cross_the_link_once() {
    // The server answers where the datagram came from: the link's own
    // socket, whose datagram crossed the link already.
    let script = "import socket, threading, time\n\
                  server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
                  server.bind(('127.0.0.1', 0))\n\
                  def serve():\n\
                  \x20   while True:\n\
                  \x20       d, peer = server.recvfrom(100); server.sendto(d, peer)\n\
                  threading.Thread(target=serve, daemon=True).start()\n\
                  c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.settimeout(5)\n\
                  for i in range(3):\n\
                  \x20   t = time.monotonic(); c.sendto(b'%d' % i, server.getsockname())\n\
                  \x20   d, peer = c.recvfrom(100)\n\
                  \x20   assert d == b'%d' % i and peer == server.getsockname(), (d, peer)\n\
                  \x20   print('exchange', (time.monotonic() - t) * 1000)";
    let output = linked(&[], &["python3", "-c", script]);
    let exchanges = figures(&output, "exchange");
    round_trips("exchange", &exchanges, 1.0);
    assert!(
        exchanges.iter().all(|&ms| ms < 1.5 * ROUND_TRIP_MS),
        "an exchange crossed the link more than once each way: {exchanges:?}"
    );
}

#[test]
fn a_running_commands_link_is_changed_by_remote_and_one_without_cannot_be() {
    let port = echo_server();
    let runtime = crate::harness::Runtime::new("exec-link-remote");
    // An exchange each time a line comes on its input; the connection
    // stays open across the change.
    let script = "import socket, sys, time\n\
                  s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
                  for line in sys.stdin:\n\
                  \x20   t = time.monotonic(); s.sendall(b'x'); assert s.recv(10) == b'x'\n\
                  \x20   print('exchange', (time.monotonic() - t) * 1000, flush=True)";
    let mut command = runtime.shape(["--delay", "10ms", "--exec", "python3", "-c", script]);
    let mut child = command
        .arg(&port)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    runtime.wait_registered(pid);
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut exchange = || -> f64 {
        input.write_all(b"go\n").unwrap();
        let line = output.next().unwrap().unwrap();
        line.strip_prefix("exchange ").unwrap().parse().unwrap()
    };
    let before = exchange();
    assert!(
        (19.0..400.0).contains(&before),
        "{before} ms at 10 ms each way"
    );
    let remote = runtime.remote(pid, ["--delay", "100ms"]);
    assert!(remote.status.success(), "{}", remote.stderr);
    let after = exchange();
    assert!(after >= 198.0, "{after} ms at 100 ms each way");
    drop(input);
    assert!(child.wait().unwrap().success());

    // Without a link at start, there is none to change: said, and refused.
    let mut command = runtime.shape(["--rate", "1MiB", "--exec", "cat"]);
    let mut child = command.stdin(Stdio::piped()).spawn().unwrap();
    runtime.wait_registered(child.id());
    let remote = runtime.remote(child.id(), ["--delay", "100ms"]);
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    assert!(!remote.status.success());
    assert!(
        remote.stderr.contains("without a link"),
        "{}",
        remote.stderr
    );
}
