#!/usr/bin/env python3
"""--loss against the model it follows: 1 MiB downloaded through the proxy
and under --exec (curl) over `--link slow-4g --loss P`, for 1%, 2% and 5%,
each beside what TCP's bound on throughput under loss gives (Mathis,
Semke, Mahdavi and Ott, "The macroscopic behavior of the TCP congestion
avoidance algorithm", CCR 27(3), 1997): MSS / (RTT * sqrt(2p/3)), with
MSS 1448 bytes and slow-4g's 150 ms round trip, or the link's rate where
that is less. Every download is checked byte for byte (sha256).

    python3 benches/loss.py [SHAPE]     # target/release/shape by default
"""

import hashlib
import http.server
import math
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

SHAPE = sys.argv[1] if len(sys.argv) > 1 else "target/release/shape"
SIZE = 1 << 20
MSS = 1448
RTT = 0.150
RATE = 200_000  # slow-4g's 1.6 Mbit/s down
BODY = os.urandom(SIZE)
DIGEST = hashlib.sha256(BODY).hexdigest()


def model(p):
    """Seconds for SIZE bytes at the bound, or the link's rate if less."""
    bound = MSS / (RTT * math.sqrt(2 * p / 3))
    return SIZE / min(bound, RATE)


def serve():
    """A server that sends BODY to each connection (raw) and over HTTP."""
    raw = socket.socket()
    raw.bind(("127.0.0.1", 0))
    raw.listen(16)

    def send_all():
        while True:
            conn, _ = raw.accept()
            conn.sendall(BODY)
            conn.close()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(SIZE))
            self.end_headers()
            self.wfile.write(BODY)

        def log_message(self, *_):
            pass

    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=send_all, daemon=True).start()
    threading.Thread(target=web.serve_forever, daemon=True).start()
    return raw.getsockname()[1], web.server_address[1]


def through_proxy(port, loss, seed):
    proxy = subprocess.Popen(
        [SHAPE, "--listen", "127.0.0.1:0", "--connect", f"127.0.0.1:{port}",
         "--link", "slow-4g", "--loss", loss, "--seed", str(seed)],
        stderr=subprocess.PIPE, text=True)
    line = proxy.stderr.readline()
    listening = int(re.search(r"127\.0\.0\.1:(\d+)", line).group(1))
    start = time.monotonic()
    client = socket.create_connection(("127.0.0.1", listening))
    got = bytearray()
    while chunk := client.recv(65536):
        got += chunk
    took = time.monotonic() - start
    proxy.terminate()
    proxy.wait()
    return took, hashlib.sha256(got).hexdigest()


def under_exec(port, loss, seed):
    with tempfile.NamedTemporaryFile() as out:
        start = time.monotonic()
        subprocess.run(
            [SHAPE, "--link", "slow-4g", "--loss", loss, "--seed", str(seed), "-q",
             "--exec", "curl", "-sS", "-o", out.name, f"http://127.0.0.1:{port}/"],
            check=True, stdin=subprocess.DEVNULL)
        took = time.monotonic() - start
        return took, hashlib.sha256(open(out.name, "rb").read()).hexdigest()


def main():
    raw, web = serve()
    print("| loss | model (s) | proxy (s) | proxy / model | --exec curl (s) | curl / model | sha256 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for loss, p in (("1%", 0.01), ("2%", 0.02), ("5%", 0.05)):
        expected = model(p)
        proxied, proxied_digest = through_proxy(raw, loss, 7)
        execed, execed_digest = under_exec(web, loss, 7)
        intact = proxied_digest == DIGEST and execed_digest == DIGEST
        worst = max(worst, abs(proxied / expected - 1), abs(execed / expected - 1))
        print(f"| {loss} | {expected:.2f} | {proxied:.2f} | {proxied / expected:.3f} "
              f"| {execed:.2f} | {execed / expected:.3f} | {'intact' if intact else 'CHANGED'} |")
        if not intact:
            sys.exit("a download changed")
    print(f"worst distance from the model: {worst:.1%}")


if __name__ == "__main__":
    main()
