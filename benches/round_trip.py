#!/usr/bin/env python3
"""Round trips of 16 bytes through shape's proxy in front of an echo server
on loopback: what --delay and --jitter add to a round trip.

    cargo build --release && benches/round_trip.py [SHAPE FLAGS...]
    benches/round_trip.py --delay 100ms --jitter 20ms
"""
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

SHAPE = os.path.join(os.path.dirname(__file__), "..", "target", "release", "shape")
ROUNDS = 50


def echo_server():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def serve(conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := conn.recv(65536):
            conn.sendall(data)
        conn.close()

    def accept():
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    upstream, front = echo_server(), free_port()
    proxy = subprocess.Popen(
        [SHAPE, "--listen", f"127.0.0.1:{front}", "--connect", f"127.0.0.1:{upstream}"]
        + sys.argv[1:]
    )
    try:
        for _ in range(500):
            try:
                client = socket.create_connection(("127.0.0.1", front))
                break
            except ConnectionRefusedError:
                time.sleep(0.01)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rtts = []
        for _ in range(ROUNDS):
            started = time.monotonic()
            client.sendall(b"x" * 16)
            got = b""
            while len(got) < 16:
                got += client.recv(16 - len(got))
            rtts.append((time.monotonic() - started) * 1000)
    finally:
        proxy.kill()
    flags = " ".join(sys.argv[1:]) or "(no flags)"
    print(
        f"| {flags} | {min(rtts):.2f} | {statistics.median(rtts):.2f} | {max(rtts):.2f} |"
    )


if __name__ == "__main__":
    main()
