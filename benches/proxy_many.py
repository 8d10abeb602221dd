#!/usr/bin/env python3
"""Many active connections through the proxy: an upstream sends as fast as
each connection takes, N clients read through a release shape proxy, and
after a warm-up the script reports the total rate over the target, the
slowest and fastest connection, and the proxy's CPU per second of wall
time (from /proc/PID/task/*/schedstat). One thread, selectors, loopback.

    python3 benches/proxy_many.py [N] [SECONDS] [-- SHAPE ARGS...]

Default: 100 connections, 10 s, `--rate 100MiB` (a shared 100 MiB/s, so
1 MiB/s each). Pass `-- --per-connection --rate 1MiB` for a bucket each;
--rate is given in KiB, MiB or GiB."""
import glob
import os
import selectors
import socket
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SHAPE = os.path.join(ROOT, "target", "release", "shape")
WARM_UP = 2.0


def cpu_seconds(pid):
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        with open(path) as stat:
            total += int(stat.read().split()[0])
    return total / 1e9


def main():
    args = sys.argv[1:]
    extra = ["--rate", "100MiB"]
    if "--" in args:
        at = args.index("--")
        args, extra = args[:at], args[at + 1:]
    count = int(args[0]) if args else 100
    seconds = float(args[1]) if len(args) > 1 else 10.0
    # The target: --rate's value (in KiB, MiB or GiB a second), for every
    # connection with --per-connection.
    rate = extra[extra.index("--rate") + 1]
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    target = float(rate[:-3]) * units[rate[-3:]]
    if "--per-connection" in extra:
        target *= count

    upstream = socket.socket()
    upstream.bind(("127.0.0.1", 0))
    upstream.listen(1024)
    upstream.setblocking(False)
    proxy = subprocess.Popen(
        [SHAPE, "--listen", "127.0.0.1:0", "--connect",
         "127.0.0.1:%d" % upstream.getsockname()[1], *extra],
        stderr=subprocess.PIPE)
    host, port = proxy.stderr.readline().decode().strip().rsplit(" ", 1)[1].rsplit(":", 1)

    selector = selectors.DefaultSelector()
    selector.register(upstream, selectors.EVENT_READ, ("accept", None))
    zeros = bytes(64 * 1024)
    received = {}
    for i in range(count):
        client = socket.create_connection((host, int(port)))
        client.setblocking(False)
        received[i] = 0
        selector.register(client, selectors.EVENT_READ, ("read", i))

    began = time.monotonic()
    marks = None
    while True:
        now = time.monotonic()
        if marks is None and now - began >= WARM_UP:
            marks = (now, dict(received), cpu_seconds(proxy.pid))
        if now - began >= WARM_UP + seconds:
            break
        for key, _ in selector.select(timeout=0.1):
            what, index = key.data
            if what == "accept":
                server, _ = upstream.accept()
                server.setblocking(False)
                # Deep send buffers, so that every connection always has
                # data waiting at the proxy and the sender never decides
                # who gets more.
                server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
                selector.register(server, selectors.EVENT_WRITE, ("send", None))
            elif what == "send":
                try:
                    key.fileobj.send(zeros)
                except BlockingIOError:
                    pass
            else:
                try:
                    received[index] += len(key.fileobj.recv(1 << 20))
                except BlockingIOError:
                    pass
    end = time.monotonic()
    cpu = cpu_seconds(proxy.pid) - marks[2]
    proxy.kill()
    span = end - marks[0]
    each = [(received[i] - marks[1][i]) / span for i in range(count)]
    total = sum(each)
    mib = 1 << 20
    print(f"| {count} connections, shape {' '.join(extra)} | {total / mib:.2f} MiB/s | "
          f"{total / target:.5f} | {min(each) / mib:.3f}-{max(each) / mib:.3f} MiB/s | "
          f"{cpu / span:.3f} |")


if __name__ == "__main__":
    main()
