#!/usr/bin/env python3
"""How closely shape follows a recorded link (`--trace`), on traces made
here (never Mahimahi's own): for each, the bytes delivered in every one
second window after the first, against what the trace allows in it,
while the sender keeps the queue full; in a pipe (`--trace`), through
the proxy (`--trace-down`: a server sends as fast as it can, and the
client reads), and through a `--serve` proxy whose `link` toxic names
the trace.

    cargo build --release && benches/trace_fidelity.py

Prints a Markdown table: trace, path, each window's delivered over
allowed, the worst window's error, and the total's.
"""
import bisect
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SHAPE = os.path.join(os.path.dirname(__file__), "..", "target", "release", "shape")
OPPORTUNITY = 1500


def trace_text(seconds):
    """A trace of one second per rate (bits a second), evenly spread."""
    lines = []
    for second, bits in enumerate(seconds):
        per_second = bits // 12_000
        for n in range(per_second):
            lines.append(second * 1000 + 1 + n * 1000 // max(per_second, 1))
    lines.append(len(seconds) * 1000)
    return "".join(f"{t}\n" for t in lines)


def allowed(text, start_ms, end_ms):
    """Bytes the trace allows in [start_ms, end_ms), repeating: the
    opportunities up to each end, as shape counts them."""
    times = [int(t) for t in text.split()]
    period = times[-1]

    def by(t):
        if t < 0:
            return 0
        whole, within = divmod(t, period)
        return whole * len(times) + bisect.bisect_right(times, within)

    return (by(end_ms - 1) - by(start_ms - 1)) * OPPORTUNITY


def read_timed(read, origin, seconds):
    """(time since the trace's start, bytes) of what `read` delivers. The
    start is `origin`, or if None the first byte's time, less the
    millisecond at which every trace here delivers first: a pipe's
    input waits from the start, so that is exact, where shape's start-up
    (a few milliseconds, more on a busy machine) would shift each
    window."""
    marks = []
    while True:
        data = read(65536)
        if not data:
            break
        now = time.monotonic()
        if origin is None:
            origin = now - 0.001
        at = now - origin
        marks.append((at, len(data)))
        if at > seconds:
            break
    return marks


def windows(marks, count):
    got = [0] * count
    for at, n in marks:
        second = int(at)
        if second < count:
            got[second] += n
    return got


def pipe(path, seconds):
    shape = subprocess.Popen([SHAPE, "-q", "--trace", path], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def feed():
        try:
            while True:
                shape.stdin.write(b"\0" * 65536)
        except (BrokenPipeError, ValueError):
            pass

    threading.Thread(target=feed, daemon=True).start()
    fd = shape.stdout.fileno()
    marks = read_timed(lambda n: os.read(fd, n), None, seconds)
    shape.kill()
    shape.wait()
    return marks


def sending_server():
    """A server that sends as fast as it can to its one client."""
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen()

    def serve():
        conn, _ = sink.accept()
        try:
            while True:
                conn.sendall(b"\0" * 65536)
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    return sink.getsockname()[1]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def connected(port):
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port))
        except OSError:
            time.sleep(0.01)


def proxy(path, seconds):
    upstream, port = sending_server(), free_port()
    shape = subprocess.Popen(
        [SHAPE, "-q", "--listen", f"127.0.0.1:{port}", "--connect", f"127.0.0.1:{upstream}",
         "--trace-down", path])
    # The trace starts as shape does, before the client connects.
    return read_through(shape, port, time.monotonic(), seconds)


def read_through(shape, port, origin, seconds):
    """What a client of `port` reads, timed from `origin`; then `shape`
    is stopped."""
    client = connected(port)
    marks = read_timed(client.recv, origin, seconds)
    client.close()
    shape.kill()
    shape.wait()
    return marks


def toxic(path, seconds):
    upstream, port, api = sending_server(), free_port(), free_port()
    shape = subprocess.Popen([SHAPE, "-q", "--serve", f"127.0.0.1:{api}"])
    connected(api).close()

    def post(where, body):
        request = urllib.request.Request(
            f"http://127.0.0.1:{api}{where}", data=json.dumps(body).encode(), method="POST")
        urllib.request.urlopen(request).read()

    post("/proxies", {"name": "p", "listen": f"127.0.0.1:{port}", "upstream": f"127.0.0.1:{upstream}"})
    # The trace starts when the toxic is made.
    origin = time.monotonic()
    post("/proxies/p/toxics", {"type": "link", "attributes": {"trace": path}})
    return read_through(shape, port, origin, seconds)


def main():
    cases = [
        ("step 1, 10, 0.5 Mbit/s", [1_000_000, 10_000_000, 500_000] * 2),
        ("2 s outage", [12_000_000, 0, 0, 12_000_000, 12_000_000]),
        ("one line (12 Mbit/s)", None),
    ]
    print("| trace | path | delivered / allowed, each second after the first | worst | total |")
    print("| --- | --- | --- | --- | --- |")
    for name, seconds in cases:
        text = "1\n" if seconds is None else trace_text(seconds)
        count = 6 if seconds is None else len(seconds)
        with tempfile.NamedTemporaryFile("w", suffix=".trace", delete=False) as f:
            f.write(text)
        for label, run in (("pipe", pipe), ("proxy", proxy), ("toxic", toxic)):
            marks = run(f.name, count)
            got = windows(marks, count)
            cells, worst, total_got, total_allowed = [], 0.0, 0, 0
            for s in range(1, count):
                allow = allowed(text, s * 1000, (s + 1) * 1000)
                total_got += got[s]
                total_allowed += allow
                if allow == 0:
                    cells.append(f"{got[s]}/0")
                    continue
                error = abs(got[s] - allow)
                if error > 2 * OPPORTUNITY:
                    worst = max(worst, error / allow)
                cells.append(f"{got[s] / allow:.3f}")
            total = abs(total_got - total_allowed) / max(total_allowed, 1)
            print(f"| {name} | {label} | {', '.join(cells)} | {worst:.1%} | {total:.2%} |")
        os.unlink(f.name)


if __name__ == "__main__":
    sys.exit(main())
