"""An HTTP/1.1 upstream for the tests of shape's HTTP faults, on Python's
own http.server: it says "listening PORT" on its first line, then one
"request METHOD PATH" line for every request it is sent, so that a test
counts what reached it.

  GET /bytes/N          N bytes drawn from a seed, chunked
  POST or PUT anything  the body (by Content-Length or chunked) read, and
                        its sha256 answered
  anything else         the path, as the body
"""

import hashlib
import random
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def drawn(length):
    """The bytes /bytes/N gives: the same for the client that checks them."""
    return random.Random(7).randbytes(length)


class Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def said(self):
        print(f"request {self.command} {self.path}", flush=True)

    def answer(self, body, status=200):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        self.said()
        if self.path.startswith("/bytes/"):
            body = drawn(int(self.path.split("/")[2]))
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for at in range(0, len(body), 1 << 16):
                piece = body[at : at + (1 << 16)]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.answer(self.path.encode())

    do_HEAD = do_GET

    def do_POST(self):
        self.said()
        digest = hashlib.sha256()
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                left = size
                while left:
                    piece = self.rfile.read(min(left, 1 << 16))
                    digest.update(piece)
                    left -= len(piece)
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left:
                piece = self.rfile.read(min(left, 1 << 16))
                if not piece:
                    break
                digest.update(piece)
                left -= len(piece)
        self.answer(digest.hexdigest().encode())

    do_PUT = do_POST


server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
