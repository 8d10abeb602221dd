#!/usr/bin/env python3
"""How evenly the proxy passes what it paces, for BENCHMARKS.md. Usage:

    benches/evenness.py [SHAPE ...]

For each shape binary (default: target/release/shape), on loopback:

- one connection: a source process writes as fast as it can through
  `shape --listen --connect --rate R` at 200 KiB/s, 1 MiB/s and 10 MiB/s
  for 6 s, and the upstream timestamps every read. Accuracy is the bytes
  after the first second over the rate times the time; CV is the
  coefficient of variation of the bytes in each 10 ms (and 100 ms) window
  after the first second, the mean over ten phases of the windows 1 ms
  apart, as benches/toxiproxy.py counts it, but half a millisecond off the
  first read: paced chunks leave on a grid of 2 ms, so windows on whole
  milliseconds from a chunk's arrival would start where chunks arrive,
  and count their microseconds of jitter as chunks in the wrong window.
- connections sharing a rate: 8 connections through one `--rate 1MiB`
  (no --per-connection) for 6 s; each one's bytes after the first second
  over an even part of the total, least and most.

Set AS to run shape as another user (AS="setpriv --reuid 65534 --regid
65534 --clear-groups").
"""
import os
import shlex
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SECONDS = 6.0
SOURCE = r"""
import socket, sys
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])))
chunk = b"x" * (1 << 16)
try:
    while True:
        conn.sendall(chunk)
except OSError:
    pass
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proxy(shape, rate, upstream, per_connection):
    front = free_port()
    args = shlex.split(os.environ.get("AS", "")) + [shape, "-q", "--listen", "127.0.0.1:%d" % front,
                                                    "--connect", "127.0.0.1:%d" % upstream, "--rate", rate]
    if per_connection:
        args.append("--per-connection")
    process = subprocess.Popen(args)
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", front)).close()
            return process, front
        except OSError:
            time.sleep(0.01)
    raise SystemExit("shape did not listen")


def sinks(count):
    """A listener whose `count` connections after the first are read to the
    end, each read timestamped."""
    listener = socket.create_server(("127.0.0.1", 0))
    reads = [[] for _ in range(count)]

    def drain(conn, into):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        end = time.monotonic() + SECONDS + 5
        while time.monotonic() < end:
            data = conn.recv(1 << 20)
            if not data:
                break
            into.append((time.monotonic(), len(data)))

    def accept():
        # The first is the proxy's, made when it was seen to listen.
        listener.accept()[0].close()
        for k in range(count):
            conn, _ = listener.accept()
            threading.Thread(target=drain, args=(conn, reads[k]), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1], reads


def run(shape, rate, connections, per_connection):
    upstream, reads = sinks(connections)
    server, front = proxy(shape, rate, upstream, per_connection)
    sources = [subprocess.Popen([sys.executable, "-c", SOURCE, "127.0.0.1", str(front)])
               for _ in range(connections)]
    time.sleep(SECONDS)
    for source in sources:
        source.kill()
        source.wait()
    server.terminate()
    server.wait()
    return reads


def cv(after, start, span, window):
    cvs = []
    for phase in range(10):
        origin = start + phase * 0.001 + 0.0005
        windows = [0] * (int(span / window) - 1)
        for t, n in after:
            k = int((t - origin) / window)
            if 0 <= k < len(windows):
                windows[k] += n
        cvs.append(statistics.pstdev(windows) / statistics.mean(windows))
    return statistics.mean(cvs)


def one_connection(shape, rate, per_second):
    reads = run(shape, rate, 1, True)[0]
    start = reads[0][0] + 1.0
    after = [(t, n) for t, n in reads if t >= start]
    span = after[-1][0] - start
    accuracy = sum(n for _, n in after) / span / per_second
    return accuracy, cv(after, start, span, 0.01), cv(after, start, span, 0.1)


def shared(shape):
    reads = run(shape, "1MiB", 8, False)
    start = min(r[0][0] for r in reads if r) + 1.0
    parts = [sum(n for t, n in r if t >= start) for r in reads]
    even = sum(parts) / len(parts)
    return min(parts) / even, max(parts) / even


def main():
    shapes = sys.argv[1:] or [os.path.join(HERE, "..", "target", "release", "shape")]
    print("| shape | rate | accuracy | CV per 10 ms | CV per 100 ms |")
    print("| --- | --- | --- | --- | --- |")
    for shape in shapes:
        for rate, per_second in (("200KiB", 200 * 1024), ("1MiB", 1 << 20), ("10MiB", 10 << 20)):
            accuracy, cv10, cv100 = one_connection(shape, rate, per_second)
            print("| %s | %s | %.4f | %.3f | %.3f |" % (os.path.basename(shape), rate, accuracy, cv10, cv100))
    for shape in shapes:
        least, most = shared(shape)
        print("| %s | 8 connections sharing 1 MiB/s | parts %.3f to %.3f of an even part | | |"
              % (os.path.basename(shape), least, most))


if __name__ == "__main__":
    main()
