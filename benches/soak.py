#!/usr/bin/env python3
"""A soak: shape's proxy, `--serve` and `--exec` under churn for a while,
on loopback only, with a bounded number of clients. It fails if memory or
descriptors grow, if a byte of any transfer is lost or changed, or if an
event loop stalls.

    python3 benches/soak.py [--seconds 1800] [--warmup 120] [--csv F] [--png F]

What runs, all at once, for --seconds:
- an echo server (threads of this script) behind everything;
- `shape --listen --connect` (two loops, a rate file): clients stream
  random blocks through it and check each echo's sha256; every few
  seconds the rate changes, by SIGHUP on a rewritten rate file or by
  `shape --remote`;
- `shape --serve` (two loops): proxies are created and deleted through
  the API, toxics (latency, bandwidth, slicer, slow_close) added and
  removed on a lasting proxy while clients stream through it;
- `shape --rate ... --exec python3 soak.py --exec-client`: a program
  whose own connections stream through the shaped sockets, checking
  every echo the same way;
- clients that hang up mid-request: half a request to the API, half a
  block to a proxy, then a close or a reset;
- a probe through the proxy and through a proxy of `--serve`: a small
  message every 20 ms; an echo that takes over 100 ms more than the link
  asks is a stall.

Each second, the resident memory and the open descriptors of the three
shapes are sampled. After --warmup, the median of the last fifth of the
samples may exceed that of the first fifth by 5% at most (and by more
than 2 MiB or 16 descriptors, so that tiny counts are not judged by a
few). The samples go to --csv, and a picture of them to --png (with
matplotlib).
"""
import argparse
import hashlib
import http.client
import json
import os
import random
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SHAPE = os.environ.get("SHAPE", os.path.join(ROOT, "target", "release", "shape"))
STALL = 0.100
BLOCKS = (16 << 10, 2 << 20)


class Failures:
    """What broke, said once each, and counts of what went right."""

    def __init__(self):
        self.lock = threading.Lock()
        self.said = []
        self.counts = {}
        self.started = time.monotonic()

    def fail(self, what):
        with self.lock:
            if len(self.said) < 50:
                self.said.append(what)
            at = time.monotonic() - self.started
            print(f"soak: FAIL at {at:.0f} s: {what}", file=sys.stderr, flush=True)

    def count(self, what, n=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n


def echo_server():
    """An echo server on a free port of 127.0.0.1, each client on a thread."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)

    def serve(conn):
        with conn:
            try:
                while data := conn.recv(1 << 20):
                    conn.sendall(data)
            except OSError:
                pass

    def accept():
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1]


def transfer(port, size, rng):
    """Streams `size` random bytes to the echo at `port` and checks the
    echo: None if it came back whole, else what went wrong."""
    data = rng.randbytes(size)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        sender = threading.Thread(target=lambda: (conn.sendall(data), conn.shutdown(socket.SHUT_WR)))
        sender.start()
        back = hashlib.sha256()
        got = 0
        while chunk := conn.recv(1 << 20):
            back.update(chunk)
            got += len(chunk)
        sender.join()
    if got != size or back.digest() != hashlib.sha256(data).digest():
        return f"{size} bytes sent through port {port}, {got} came back, sha256 {'differs' if got == size else 'not checked'}"
    return None


def streamer(port, failures, until, seed, label):
    """Transfers blocks of random sizes through `port` until `until`."""
    rng = random.Random(seed)
    while time.monotonic() < until:
        try:
            wrong = transfer(port, rng.randint(*BLOCKS), rng)
        except OSError as err:
            wrong = str(err)
        if wrong:
            failures.fail(f"{label}: {wrong}")
        else:
            failures.count(f"{label} transfers")


def hang_ups(ports, api, failures, until, seed):
    """Clients that go away mid-request: half a block to a proxy, half an
    HTTP request to the API, each then closed or reset."""
    rng = random.Random(seed)
    while time.monotonic() < until:
        port = rng.choice(ports)
        try:
            conn = socket.create_connection(("127.0.0.1", port), timeout=10)
            conn.sendall(rng.randbytes(rng.randint(1, 256 << 10)))
            if rng.random() < 0.5:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
            conn = socket.create_connection(("127.0.0.1", api), timeout=10)
            body = b'{"name": "half", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"}'
            request = b"POST /proxies HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
            conn.sendall(request[: rng.randint(1, len(request) - 1)])
            conn.close()
            failures.count("hang-ups")
        except OSError as err:
            failures.fail(f"hang-up: {err}")
        time.sleep(0.05)


def probe(port, failures, until, label, stalls):
    """A small message every 20 ms through `port`, timed: an echo that
    takes over STALL is a stall of the loop."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while time.monotonic() < until:
            started = time.monotonic()
            conn.sendall(b"ping")
            got = b""
            while len(got) < 4:
                chunk = conn.recv(4 - len(got))
                if not chunk:
                    failures.fail(f"{label} probe: closed")
                    return
                got += chunk
            took = time.monotonic() - started
            stalls.append((label, took))
            if took > STALL:
                failures.fail(f"{label} probe: an echo took {took * 1000:.0f} ms")
            failures.count(f"{label} probes")
            time.sleep(0.02)


class Api:
    """The toxiproxy API of a `shape --serve`."""

    def __init__(self, port):
        self.port = port

    def call(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request(method, path, json.dumps(body) if body is not None else None)
        reply = conn.getresponse()
        text = reply.read()
        conn.close()
        return reply.status, json.loads(text) if text else None


def api_churn(api, upstream, failures, until, seed):
    """Proxies made, streamed through and deleted; toxics added to and
    removed from the lasting proxy."""
    rng = random.Random(seed)
    toxics = [
        {"type": "latency", "attributes": {"latency": 20, "jitter": 5}},
        {"type": "bandwidth", "attributes": {"rate": 50_000}},
        {"type": "slicer", "attributes": {"average_size": 2000, "size_variation": 500, "delay": 10}},
        {"type": "slow_close", "attributes": {"delay": 50}},
    ]
    n = 0
    while time.monotonic() < until:
        n += 1
        name = f"passing-{n}"
        status, made = api.call("POST", "/proxies", {"name": name, "listen": "127.0.0.1:0", "upstream": f"127.0.0.1:{upstream}"})
        if status != 201:
            failures.fail(f"create {name}: {status} {made}")
            continue
        port = int(made["listen"].rsplit(":", 1)[1])
        wrong = transfer(port, rng.randint(*BLOCKS), rng)
        if wrong:
            failures.fail(f"through {name}: {wrong}")
        if api.call("DELETE", f"/proxies/{name}")[0] != 204:
            failures.fail(f"delete {name}")
        toxic = dict(rng.choice(toxics), name="churn", stream=rng.choice(["upstream", "downstream"]))
        status, _ = api.call("POST", "/proxies/lasting/toxics", toxic)
        if status != 200:
            failures.fail(f"add toxic: {status}")
        time.sleep(rng.uniform(0.1, 0.5))
        if api.call("DELETE", "/proxies/lasting/toxics/churn")[0] != 204:
            failures.fail("remove toxic")
        failures.count("proxies made and deleted")


def rate_changes(proxy, rate_file, env, failures, until):
    """The proxy's rate, changed every two seconds: by SIGHUP on a
    rewritten rate file, or by `shape --remote`."""
    rates = ["300MiB", "150MiB", "unlimited", "80MiB"]
    n = 0
    while time.monotonic() < until:
        time.sleep(2)
        n += 1
        rate = rates[n % len(rates)]
        if n % 2:
            with open(rate_file, "w") as file:
                file.write(f"{rate}\n")
            proxy.send_signal(signal.SIGHUP)
        else:
            done = subprocess.run([SHAPE, "--remote", str(proxy.pid), "--rate", rate], capture_output=True, text=True, env=env)
            if done.returncode != 0:
                failures.fail(f"--remote --rate {rate}: {done.stderr.strip()}")
        failures.count("rate changes")


def said_port(process, prefix):
    """The port a shape says it listens on, in its first line that starts
    with `prefix`."""
    for line in process.stderr:
        if line.startswith(prefix):
            threading.Thread(target=lambda: process.stderr.read(), daemon=True).start()
            return int(line.rsplit(":", 1)[1])
    raise RuntimeError(f"{process.args[0]} ended before saying where it listens")


def sample(pid):
    """Resident memory in KiB and open descriptors of process `pid`."""
    with open(f"/proc/{pid}/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def grew(samples, warmup, total):
    """How the medians of the first and last fifths after the warm-up
    compare, per kind: a list of what grew too much."""
    kept = [s for s in samples if s[0] >= warmup]
    fifth = max(1, len(kept) // 5)
    growth = []
    for index, (kind, slack) in enumerate([("RSS KiB", 2048), ("descriptors", 16)]):
        first = statistics.median(s[1 + index] for s in kept[:fifth])
        last = statistics.median(s[1 + index] for s in kept[-fifth:])
        if last > first * 1.05 and last - first > slack:
            growth.append(f"{kind}: {first:.0f} to {last:.0f}")
    return growth


def exec_client(args):
    """Run by `shape --exec`: transfers through its own (shaped) sockets
    until told seconds have passed; exit status 1 if any came back wrong."""
    rng = random.Random(7)
    until = time.monotonic() + args.seconds
    wrong = 0
    done = 0
    while time.monotonic() < until:
        failure = transfer(args.exec_client, rng.randint(*BLOCKS), rng)
        if failure:
            print(f"soak: FAIL exec: {failure}", file=sys.stderr, flush=True)
            wrong += 1
        done += 1
    print(f"exec transfers {done}", flush=True)
    sys.exit(1 if wrong else 0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=1800)
    parser.add_argument("--warmup", type=float, default=120)
    parser.add_argument("--csv")
    parser.add_argument("--png")
    parser.add_argument("--exec-client", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.exec_client:
        return exec_client(args)

    failures = Failures()
    upstream = echo_server()
    # A control directory of the soak's own (mkdtemp makes it private),
    # where `--remote` finds the proxy.
    scratch = tempfile.mkdtemp(prefix="shape-soak-")
    rate_file = os.path.join(scratch, "rate")
    with open(rate_file, "w") as file:
        file.write("300MiB\n")
    env = dict(os.environ, XDG_RUNTIME_DIR=scratch)
    proxy = subprocess.Popen(
        [SHAPE, "--listen", "127.0.0.1:0", "--connect", f"127.0.0.1:{upstream}", "--rate-file", rate_file, "--loops", "2"],
        stderr=subprocess.PIPE, text=True, env=env)
    proxy_port = said_port(proxy, "shape: listening on ")
    server = subprocess.Popen([SHAPE, "--serve", "127.0.0.1:0", "--loops", "2"], stderr=subprocess.PIPE, text=True, env=env)
    api = Api(said_port(server, "shape: serving the toxiproxy API on "))
    made = {}
    for name in ["lasting", "probe"]:
        status, made[name] = api.call("POST", "/proxies", {"name": name, "listen": "127.0.0.1:0", "upstream": f"127.0.0.1:{upstream}"})
        assert status == 201, made[name]
    lasting = int(made["lasting"]["listen"].rsplit(":", 1)[1])
    probe_port = int(made["probe"]["listen"].rsplit(":", 1)[1])
    exec_run = subprocess.Popen(
        [SHAPE, "--rate", "100MiB", "--quiet", "--exec", sys.executable, os.path.abspath(__file__),
         "--seconds", str(args.seconds), "--exec-client", str(upstream)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    started = time.monotonic()
    until = started + args.seconds
    stalls = []
    threads = [
        threading.Thread(target=streamer, args=(proxy_port, failures, until, 1, "proxy")),
        threading.Thread(target=streamer, args=(proxy_port, failures, until, 2, "proxy")),
        threading.Thread(target=streamer, args=(lasting, failures, until, 3, "lasting")),
        threading.Thread(target=api_churn, args=(api, upstream, failures, until, 4)),
        threading.Thread(target=hang_ups, args=([proxy_port, lasting], api.port, failures, until, 5)),
        threading.Thread(target=rate_changes, args=(proxy, rate_file, env, failures, until)),
        threading.Thread(target=probe, args=(proxy_port, failures, until, "proxy", stalls)),
        threading.Thread(target=probe, args=(probe_port, failures, until, "serve", stalls)),
    ]
    for thread in threads:
        thread.daemon = True
        thread.start()
    samples = {"proxy": [], "serve": [], "exec": []}
    processes = {"proxy": proxy, "serve": server, "exec": exec_run}
    while (now := time.monotonic()) < until:
        for name, process in processes.items():
            if process.poll() is not None and name != "exec":
                failures.fail(f"{name} ended: status {process.returncode}")
                until = now
            elif process.poll() is None:
                samples[name].append((now - started, *sample(process.pid)))
        time.sleep(1)
    for thread in threads:
        thread.join(timeout=120)
    out, err = exec_run.communicate(timeout=120)
    if exec_run.returncode != 0:
        failures.fail(f"exec: status {exec_run.returncode}: {err.strip()[-500:]}")
    failures.count("exec transfers", int(out.split()[-1]) if out.split() else 0)
    for process in (proxy, server):
        process.terminate()
        process.wait(timeout=10)

    for name, kept in samples.items():
        for growth in grew(kept, args.warmup, args.seconds):
            failures.fail(f"{name} grew: {growth}")
    if args.csv:
        with open(args.csv, "w") as file:
            file.write("process,seconds,rss_kib,descriptors\n")
            for name, kept in samples.items():
                for seconds, rss, fds in kept:
                    file.write(f"{name},{seconds:.1f},{rss},{fds}\n")
    if args.png:
        draw(samples, args.png, args.warmup)
    slowest = {label: max((t for l, t in stalls if l == label), default=0) for label in ("proxy", "serve")}
    print(f"soak: {args.seconds:.0f} s, " + ", ".join(f"{k} {v}" for k, v in sorted(failures.counts.items())))
    print("soak: slowest probe echo: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in slowest.items()))
    for name, kept in samples.items():
        after = [s for s in kept if s[0] >= args.warmup] or kept
        if after:
            print(f"soak: {name}: RSS {min(s[1] for s in after)}-{max(s[1] for s in after)} KiB, "
                  f"descriptors {min(s[2] for s in after)}-{max(s[2] for s in after)} after the warm-up")
    if failures.said:
        print(f"soak: {len(failures.said)} failure(s)", file=sys.stderr)
        sys.exit(1)
    print("soak: ok")


def draw(samples, path, warmup):
    """RSS and descriptors of each shape over time, one panel each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (memory, descriptors) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for name, kept in samples.items():
        minutes = [s[0] / 60 for s in kept]
        memory.plot(minutes, [s[1] / 1024 for s in kept], label=f"shape ({name})")
        descriptors.plot(minutes, [s[2] for s in kept], label=f"shape ({name})")
    for axes in (memory, descriptors):
        axes.axvline(warmup / 60, color="grey", linestyle=":", linewidth=1)
        axes.grid(alpha=0.3)
    memory.set_ylabel("resident memory, MiB")
    descriptors.set_ylabel("open descriptors")
    descriptors.set_xlabel("minutes")
    memory.legend(loc="upper left")
    memory.set_title("shape under churn: proxy, --serve and --exec (dotted: end of warm-up)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
