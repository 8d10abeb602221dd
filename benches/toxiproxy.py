#!/usr/bin/env python3
"""shape --serve beside the real toxiproxy, measured in the same run, for
BENCHMARKS.md. Usage:

    benches/toxiproxy.py TOXIPROXY_SERVER [--quick]

with the release shape built (cargo build --release) and TOXIPROXY_SERVER
the real toxiproxy-server binary (../shared/toxiproxy/build.sh builds it).
Each server in turn, on loopback:

- bandwidth: a client writes as fast as it can through an upstream
  bandwidth toxic at 10, 1,000 and 100,000 KB/s; the upstream timestamps
  every read. Accuracy is the bytes after the first second over the rate
  times the time; CV is the coefficient of variation of the bytes in each
  10 ms window after the first second, the mean over ten phases of the
  windows 1 ms apart (windows that start where a chunk arrives would
  count a few microseconds of jitter as a whole chunk misplaced).
- throughput: 1 GiB through one connection without toxics; the time and
  the server's CPU seconds.
- latency: 200 round trips of 64 bytes through a downstream latency of
  50 ms to an echo server; the error is each trip less 50 ms.
- API: the time of each call (GET a proxy, add a toxic, change it, remove
  it) while 100 connections stream through the proxy; p50 and p99.
- memory: the server's RSS idle, with 1,000 proxies, and with 10,000 idle
  connections spread across them; and after 100 connections' servers
  sent as fast as they could for 5 s through a downstream latency of 1 s
  to clients that read nothing.
"""
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE = os.path.join(HERE, "..", "target", "release", "shape")
QUICK = "--quick" in sys.argv
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A toxiproxy server: shape --serve, or the real one."""

    def __init__(self, kind, binary):
        self.kind = kind
        port = free_port()
        if kind == "shape":
            args = [SHAPE, "--serve", "127.0.0.1:%d" % port, "--seed", "1"]
        else:
            args = [binary, "-host", "127.0.0.1", "-port", str(port)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.api = "http://127.0.0.1:%d" % port
        for _ in range(200):
            try:
                self.call("GET", "/version")
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("%s did not start" % kind)

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.api + path, data=data, method=method)
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read()
        return json.loads(text) if text.strip() else None

    def proxy(self, name, upstream):
        made = self.call("POST", "/proxies", {"name": name, "upstream": upstream, "listen": "127.0.0.1:0"})
        host, port = made["listen"].rsplit(":", 1)
        return host, int(port)

    def cpu_seconds(self):
        fields = open("/proc/%d/stat" % self.process.pid).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_kib(self):
        for line in open("/proc/%d/status" % self.process.pid):
            if line.startswith("VmRSS"):
                return int(line.split()[1])

    def stop(self):
        self.process.kill()
        self.process.wait()


def listening(handle):
    """A loopback server running handle(conn) per connection; its address."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(4096)

    def accept():
        while True:
            conn, _ = server.accept()
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return "127.0.0.1:%d" % server.getsockname()[1]


def echo(conn):
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            conn.sendall(data)
    except OSError:
        # The client went away (a proxy deleted under it).
        pass


def bandwidth(server, rate_kb, seconds):
    """Accuracy and CV per 10 ms of an upstream bandwidth toxic."""
    reads = []
    done = threading.Event()

    def sink(conn):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        end = None
        while True:
            data = conn.recv(1 << 20)
            now = time.monotonic()
            if not data:
                break
            reads.append((now, len(data)))
            if end is None:
                end = now + seconds
            if now >= end:
                break
        done.set()

    name = "bw%d" % rate_kb
    host, port = server.proxy(name, listening(sink))
    server.call("POST", "/proxies/%s/toxics" % name,
                {"type": "bandwidth", "stream": "upstream", "attributes": {"rate": rate_kb}})
    # The source is a process of its own, so that the sink's timestamps
    # are not held up by another thread of this one.
    source = subprocess.Popen([sys.executable, "-c", SOURCE, host, str(port)])
    done.wait(seconds + 30)
    source.kill()
    source.wait()
    server.call("DELETE", "/proxies/%s" % name)
    start = reads[0][0] + 1.0
    after = [(t, n) for t, n in reads if t >= start]
    total = sum(n for _, n in after)
    span = after[-1][0] - start
    accuracy = total / span / (rate_kb * 1000)
    # Windows that start where a chunk arrives would count each chunk's
    # few microseconds of jitter as a chunk in the wrong window: the CV is
    # the mean over ten phases of the windows, 1 ms apart.
    cvs = []
    for phase in range(10):
        origin = start + phase * 0.001
        windows = [0] * (int(span / 0.01) - 1)
        for t, n in after:
            k = int((t - origin) / 0.01)
            if 0 <= k < len(windows):
                windows[k] += n
        cvs.append(statistics.pstdev(windows) / statistics.mean(windows))
    cv = statistics.mean(cvs)
    biggest = max(n for _, n in reads)
    return accuracy, cv, biggest


def throughput(server):
    """Seconds and the server's CPU seconds for 1 GiB through one
    connection without toxics."""
    total = 1 << 30
    done = threading.Event()

    def sink(conn):
        got = 0
        while got < total:
            data = conn.recv(1 << 20)
            if not data:
                break
            got += len(data)
        done.set()

    host, port = server.proxy("through", listening(sink))
    cpu = server.cpu_seconds()
    start = time.monotonic()
    source = subprocess.Popen([sys.executable, "-c", SOURCE, host, str(port), str(total)])
    done.wait(300)
    elapsed = time.monotonic() - start
    source.kill()
    source.wait()
    cpu = server.cpu_seconds() - cpu
    server.call("DELETE", "/proxies/through")
    return elapsed, total / elapsed / (1 << 20), cpu


def latency(server):
    """The error of 200 round trips through a 50 ms downstream latency."""
    host, port = server.proxy("lat", listening(echo))
    server.call("POST", "/proxies/lat/toxics", {"type": "latency", "attributes": {"latency": 50}})
    conn = socket.create_connection((host, port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    errors = []
    for _ in range(40 if QUICK else 200):
        start = time.monotonic()
        conn.sendall(b"x" * 64)
        got = 0
        while got < 64:
            got += len(conn.recv(64 - got))
        errors.append((time.monotonic() - start) * 1000 - 50)
    conn.close()
    server.call("DELETE", "/proxies/lat")
    errors.sort()
    return statistics.mean(errors), errors[int(len(errors) * 0.99) - 1], errors[0]


def api_under_load(server):
    """p50 and p99 of API calls while 100 connections stream."""
    host, port = server.proxy("busy", listening(echo))
    server.call("POST", "/proxies/busy/toxics", {"type": "bandwidth", "attributes": {"rate": 1000}})
    stop = threading.Event()

    def stream():
        conn = socket.create_connection((host, port))
        piece = b"y" * 16384
        try:
            while not stop.is_set():
                conn.sendall(piece)
                got = 0
                while got < len(piece):
                    got += len(conn.recv(len(piece) - got))
        except OSError:
            pass

    for _ in range(100):
        threading.Thread(target=stream, daemon=True).start()
    time.sleep(1)
    times = []
    for k in range(50 if QUICK else 250):
        for method, path, body in [
            ("GET", "/proxies/busy", None),
            ("POST", "/proxies/busy/toxics", {"type": "latency", "name": "l", "attributes": {"latency": 1}}),
            ("POST", "/proxies/busy/toxics/l", {"attributes": {"latency": 2}}),
            ("DELETE", "/proxies/busy/toxics/l", None),
        ]:
            start = time.monotonic()
            server.call(method, path, body)
            times.append((time.monotonic() - start) * 1000)
    stop.set()
    server.call("DELETE", "/proxies/busy")
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99) - 1], len(times)


def held_under_latency(server):
    """RSS after 100 connections' servers sent as fast as they could for
    5 s through a downstream latency of 1 s to clients that read nothing."""
    def flood(conn):
        chunk = b"z" * 65536
        try:
            while True:
                conn.sendall(chunk)
        except OSError:
            pass

    host, port = server.proxy("flooded", listening(flood))
    server.call("POST", "/proxies/flooded/toxics", {"type": "latency", "attributes": {"latency": 1000}})
    before = server.rss_kib()
    clients = [socket.create_connection((host, port)) for _ in range(100)]
    time.sleep(5)
    after = server.rss_kib()
    for client in clients:
        client.close()
    server.call("DELETE", "/proxies/flooded")
    return before, after


def memory(server):
    """RSS idle, with 1,000 proxies, and with 10,000 idle connections."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE)
    upstream = holder.stdout.readline().decode().strip()
    idle = server.rss_kib()
    listens = [server.proxy("m%d" % k, upstream) for k in range(1000)]
    time.sleep(0.5)
    proxies = server.rss_kib()
    clients = []
    for k in range(2000 if QUICK else 10000):
        clients.append(socket.create_connection(listens[k % len(listens)]))
    time.sleep(2)
    connections = server.rss_kib()
    for client in clients:
        client.close()
    holder.kill()
    return idle, proxies, connections, len(clients)


# A process of its own that writes zeros to HOST PORT as fast as it can,
# forever or LIMIT bytes.
SOURCE = """
import socket, sys
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])))
left = int(sys.argv[3]) if len(sys.argv) > 3 else -1
chunk = bytes(1 << 20)
while left != 0:
    piece = chunk if left < 0 else chunk[:min(left, len(chunk))]
    conn.sendall(piece)
    left -= len(piece) if left > 0 else 0
"""

# A process of its own that accepts and holds connections, so that this
# one holds only the clients' ends.
HOLDER = """
import resource, socket, sys, threading
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(65535)
print("127.0.0.1:%d" % s.getsockname()[1], flush=True)
held = []
while True:
    c, _ = s.accept(); held.append(c)
"""


def main():
    real = sys.argv[1]
    rows = {}
    for kind in ["shape", "toxiproxy"]:
        server = Server(kind, real)
        try:
            row = {}
            for rate, seconds in [(10, 6 if QUICK else 11), (1000, 4 if QUICK else 6), (100000, 3 if QUICK else 4)]:
                row["bandwidth %d" % rate] = bandwidth(server, rate, seconds)
            row["throughput"] = throughput(server)
            row["latency"] = latency(server)
            row["api"] = api_under_load(server)
            row["memory"] = memory(server)
            row["held"] = held_under_latency(server)
            rows[kind] = row
        finally:
            server.stop()
    print("| figure | shape --serve | toxiproxy 2.12.0 |")
    print("| --- | --- | --- |")
    for rate in [10, 1000, 100000]:
        key = "bandwidth %d" % rate
        cells = ["accuracy %.4f, CV per 10 ms %.3f, largest read %d B" % rows[k][key] for k in rows]
        print("| bandwidth %d KB/s | %s |" % (rate, " | ".join(cells)))
    cells = ["%.2f s, %.0f MiB/s, server CPU %.2f s" % rows[k]["throughput"] for k in rows]
    print("| 1 GiB through one connection, no toxic | %s |" % " | ".join(cells))
    cells = ["error mean %.2f ms, p99 %.2f ms, least %.2f ms" % rows[k]["latency"] for k in rows]
    print("| latency 50 ms, 64-byte round trips | %s |" % " | ".join(cells))
    cells = ["p50 %.2f ms, p99 %.2f ms (%d calls)" % rows[k]["api"] for k in rows]
    print("| API call while 100 connections stream | %s |" % " | ".join(cells))
    cells = ["idle %d KiB; 1,000 proxies %d KiB; + %d idle connections %d KiB" % (
        rows[k]["memory"][0], rows[k]["memory"][1], rows[k]["memory"][3], rows[k]["memory"][2]) for k in rows]
    print("| memory (RSS) | %s |" % " | ".join(cells))
    cells = ["%d KiB before, %d KiB after" % rows[k]["held"] for k in rows]
    print("| memory (RSS), 100 connections flooded for 5 s under a latency of 1 s, clients not reading | %s |" % " | ".join(cells))


main()
