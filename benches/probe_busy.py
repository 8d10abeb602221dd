#!/usr/bin/env python3
"""What a delay keeps when a test suite's load takes the machine's CPU.

A Python echo server (a thread per connection) on loopback; a Python
load of N connections through the proxy (a thread each), each writing as
fast as the proxy takes it and reading its echo back on a second thread;
and, after two seconds of that, a probe: one more connection whose round
trips of 4 bytes are timed, one every 100 ms. Unlike
benches/probe_under_load.go, whose load is Go's and light on the CPU,
this load is as heavy as a Python suite's: the interpreters take the
cores, and the proxy runs where they leave it room.

    python3 benches/probe_busy.py [-n 200] [--rounds 60] -- COMMAND...

The command runs with FRONT and ECHO in its environment (a shell expands
them): it must listen on 127.0.0.1:$FRONT and relay to 127.0.0.1:$ECHO,
for example

    python3 benches/probe_busy.py -- target/release/shape -q --listen '127.0.0.1:$FRONT' \\
        --connect '127.0.0.1:$ECHO' --delay 25ms --rate 200KiB --per-connection

Prints the probe's round trips in ms (min, median, p90, p99, max) and
what the load moved meanwhile.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def echo_server():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)

    def serve(conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while data := conn.recv(65536):
                conn.sendall(data)
        except OSError:
            pass
        conn.close()

    def accept():
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1]


def wait_for(port):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def load(port, count, moved, stop):
    block = b"x" * 16384

    def writer(conn):
        try:
            while not stop.is_set():
                conn.sendall(block)
        except OSError:
            pass

    def reader(conn):
        try:
            while data := conn.recv(65536):
                moved[0] += len(data)
        except OSError:
            pass

    conns = []
    for _ in range(count):
        conn = socket.create_connection(("127.0.0.1", port))
        conns.append(conn)
        threading.Thread(target=writer, args=(conn,), daemon=True).start()
        threading.Thread(target=reader, args=(conn,), daemon=True).start()
    return conns


def probe(port, rounds):
    conn = socket.create_connection(("127.0.0.1", port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    for _ in range(rounds):
        start = time.monotonic()
        conn.sendall(b"ping")
        got = b""
        while len(got) < 4:
            got += conn.recv(4 - len(got))
        times.append((time.monotonic() - start) * 1000)
        time.sleep(0.1)
    conn.close()
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=200, help="load connections")
    parser.add_argument("--rounds", type=int, default=60, help="probe round trips")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = [word for word in args.command if word != "--"]
    echo = echo_server()
    front = free_port()
    env = dict(os.environ, FRONT=str(front), ECHO=str(echo))
    proxy = subprocess.Popen(["sh", "-c", "exec " + " ".join(command)], env=env)
    try:
        wait_for(front)
        moved, stop = [0], threading.Event()
        conns = load(front, args.n, moved, stop)
        time.sleep(2)
        before, began = moved[0], time.monotonic()
        times = probe(front, args.rounds)
        rate = (moved[0] - before) / (time.monotonic() - began)
        stop.set()
        for conn in conns:
            conn.close()
    finally:
        proxy.terminate()
        proxy.wait()
    times.sort()
    pick = lambda q: times[min(len(times) - 1, int(q * len(times)))]
    print(f"round trips (ms): min {times[0]:.1f}, median {statistics.median(times):.1f}, "
          f"p90 {pick(0.9):.1f}, p99 {pick(0.99):.1f}, max {times[-1]:.1f}; "
          f"load echoed {rate / 1e6:.1f} MB/s")


if __name__ == "__main__":
    main()
