#!/usr/bin/env python3
"""The dashboard of `shape --serve` in headless Chromium (Debian's
chromium and chromium-driver; Selenium from tests/clients/setup's venv).

    cargo build --release
    target/clients/venv/bin/python benches/dashboard.py screenshot [PNG]
    target/clients/venv/bin/python benches/dashboard.py bench

`screenshot` makes three proxies with toxics, streams through two of them
for 40 s, and saves the page at 1280x800 (README's picture,
benches/dashboard.png unless told). `bench` measures what the issue
asks: the server's CPU while the page is open and idle (60 s), and how
long the page takes to be ready with 1,000 proxies (five loads).
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE = os.path.join(HERE, "..", "target", "release", "shape")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def echo_server():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve(conn):
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept():
        while True:
            conn, _ = server.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return "127.0.0.1:%d" % server.getsockname()[1]


class Server:
    def __init__(self):
        self.port = free_port()
        self.process = subprocess.Popen([SHAPE, "-q", "--serve", f"127.0.0.1:{self.port}"])
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port)).close()
                break
            except OSError:
                time.sleep(0.01)

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method)
        with urllib.request.urlopen(request) as answer:
            text = answer.read()
            return json.loads(text) if text else None

    def cpu_seconds(self):
        with open(f"/proc/{self.process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.process.kill()
        self.process.wait()


def browser(width=1280, height=800):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", f"--window-size={width},{height}",
                     "--hide-scrollbars"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def ready(driver, port):
    """Seconds from asking for the page to its first state shown."""
    started = time.monotonic()
    driver.get(f"http://127.0.0.1:{port}/")
    WebDriverWait(driver, 30, poll_frequency=0.01).until(
        lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    return time.monotonic() - started


def stream(address, rate, stop):
    """Sends about `rate` bytes a second through `address`, reading back."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as conn:
        chunk = b"x" * 8192
        while not stop.is_set():
            started = time.monotonic()
            conn.sendall(chunk)
            got = 0
            while got < len(chunk):
                got += len(conn.recv(65536))
            time.sleep(max(0.0, len(chunk) / rate - (time.monotonic() - started)))


def screenshot(path):
    server = Server()
    upstream = echo_server()
    made = [
        ("api", {"type": "latency", "attributes": {"latency": 100, "jitter": 10}}),
        ("redis", {"type": "bandwidth", "stream": "downstream", "attributes": {"rate": 200}}),
        ("mobile", {"type": "link", "attributes": {"profile": "slow-4g"}}),
    ]
    stop = threading.Event()
    for name, toxic in made:
        proxy = server.call("POST", "/proxies", {"name": name, "listen": "127.0.0.1:0",
                                                 "upstream": upstream})
        server.call("POST", f"/proxies/{name}/toxics", toxic)
        if name != "mobile":
            rate = 150_000 if name == "api" else 400_000
            threading.Thread(target=stream, args=(proxy["listen"], rate, stop),
                             daemon=True).start()
    server.call("POST", "/proxies/mobile", {"enabled": False})
    driver = browser()
    # The page itself at 1280x800, without the window's own frame.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    try:
        ready(driver, server.port)
        time.sleep(40)
        driver.save_screenshot(path)
    finally:
        stop.set()
        driver.quit()
        server.stop()
    print(f"saved {path}")


def idle(server, label):
    """The server's CPU over 60 s with the page open and nothing flowing,
    after 5 s to settle."""
    time.sleep(5)
    before, started = server.cpu_seconds(), time.monotonic()
    time.sleep(60)
    used = server.cpu_seconds() - before
    print(f"page open, idle, {label}: {used:.2f} CPU s in "
          f"{time.monotonic() - started:.0f} s ({used / 60:.2%} of a core)")


def bench():
    server = Server()
    upstream = echo_server()
    driver = browser()
    try:
        ready(driver, server.port)
        idle(server, "no proxies")
        for n in range(1000):
            server.call("POST", "/proxies", {"name": f"p{n:04}", "listen": "127.0.0.1:0",
                                             "upstream": upstream})
        times = sorted(ready(driver, server.port) for _ in range(5))
        print("1,000 proxies, page ready in (s): " + ", ".join(f"{t:.3f}" for t in times))
        idle(server, "1,000 proxies")
    finally:
        driver.quit()
        server.stop()


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "screenshot":
        screenshot(sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "dashboard.png"))
    elif what == "bench":
        bench()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
