#!/usr/bin/env python3
"""shape --serve beside the real toxiproxy under hostile load, measured in
the same run, for BENCHMARKS.md. Usage:

    benches/serve_hostile.py TOXIPROXY_SERVER

with the release shape built (cargo build --release) and TOXIPROXY_SERVER
the real toxiproxy-server binary (../shared/toxiproxy/build.sh builds it).
Each server in turn, on loopback:

- slowloris: 1,000 clients each send a request's head a byte every
  100 ms, and 20 more send nothing; meanwhile 300 GET /version calls in
  turn over fresh connections: their p50 and p99, and the server's RSS
  and threads before and during.
- toxic churn: 3,000 latency toxics added one by one to a proxy with 200
  open connections, while a probe connection echoes a byte every 2 ms:
  the time taken, the probe's round trip p50, p99 and most, and the
  server's CPU seconds.
"""
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE = os.path.join(HERE, "..", "target", "release", "shape")
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def echo_server():
    """An echo server on a free port, a thread per connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)

    def serve(conn):
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                conn.sendall(data)

    def accept():
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return "127.0.0.1:%d" % listener.getsockname()[1]


class Server:
    def __init__(self, kind, binary):
        self.port = free_port()
        if kind == "shape":
            args = [SHAPE, "--serve", "127.0.0.1:%d" % self.port]
        else:
            args = [binary, "-host", "127.0.0.1", "-port", str(self.port)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port)).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.02)

    def call(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request(method, path, body=None if body is None else json.dumps(body))
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response.status, data

    def status(self, field):
        with open("/proc/%d/status" % self.process.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])

    def cpu(self):
        with open("/proc/%d/stat" % self.process.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.process.kill()
        self.process.wait()


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def slowloris(server):
    before = (server.status("VmRSS"), server.status("Threads"))
    slow = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(1000)]
    silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(20)]
    head = b"POST /proxies HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n"
    stop = False

    def drip():
        at = 0
        while not stop:
            for s in slow:
                try:
                    s.send(head[at % len(head):at % len(head) + 1])
                except OSError:
                    pass
            at += 1
            time.sleep(0.1)

    dripping = threading.Thread(target=drip)
    dripping.start()
    time.sleep(0.5)
    times = []
    for _ in range(300):
        start = time.monotonic()
        status, _ = server.call("GET", "/version")
        times.append(time.monotonic() - start)
        assert status == 200
    during = (server.status("VmRSS"), server.status("Threads"))
    stop = True
    dripping.join()
    for s in slow + silent:
        s.close()
    return "GET /version p50 %.2f ms, p99 %.2f ms; RSS %d KiB before, %d KiB during; threads %d before, %d during" % (
        percentile(times, 0.5) * 1000, percentile(times, 0.99) * 1000, before[0], during[0], before[1], during[1])


def churn(server, upstream):
    status, made = server.call("POST", "/proxies", {"name": "churn", "listen": "127.0.0.1:0", "upstream": upstream})
    assert status == 201, made
    host, port = json.loads(made)["listen"].rsplit(":", 1)
    idle = [socket.create_connection((host, int(port))) for _ in range(200)]
    probe = socket.create_connection((host, int(port)))
    probe.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    stop = False

    def probing():
        while not stop:
            start = time.monotonic()
            probe.sendall(b"x")
            probe.recv(1)
            times.append(time.monotonic() - start)
            time.sleep(0.002)

    thread = threading.Thread(target=probing)
    thread.start()
    cpu = server.cpu()
    start = time.monotonic()
    for k in range(3000):
        toxic = {"name": "t%d" % k, "type": "latency", "stream": "upstream", "attributes": {"latency": 0}}
        status, _ = server.call("POST", "/proxies/churn/toxics", toxic)
        assert status == 200
    took = time.monotonic() - start
    stop = True
    thread.join()
    for s in idle + [probe]:
        s.close()
    return "%.2f s, server CPU %.2f s; probe round trip p50 %.2f ms, p99 %.2f ms, most %.2f ms (%d probes)" % (
        took, server.cpu() - cpu, percentile(times, 0.5) * 1000, percentile(times, 0.99) * 1000,
        max(times) * 1000, len(times))


def main():
    toxiproxy = sys.argv[1]
    upstream = echo_server()
    rows = {}
    for kind in ["shape", "toxiproxy"]:
        server = Server(kind, toxiproxy)
        try:
            rows.setdefault("1,000 slowloris and 20 silent clients", {})[kind] = slowloris(server)
            rows.setdefault("3,000 toxic adds, 200 connections open", {})[kind] = churn(server, upstream)
        finally:
            server.stop()
    print("| figure | shape --serve | toxiproxy 2.12.0 |")
    print("| --- | --- | --- |")
    for figure, by in rows.items():
        print("| %s | %s | %s |" % (figure, by["shape"], by["toxiproxy"]))


main()
