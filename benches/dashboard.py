#!/usr/bin/env python3
"""The dashboard of `shape --serve` in headless Chromium (Debian's
chromium and chromium-driver; Selenium from tests/clients/setup's venv).

    cargo build --release
    target/clients/venv/bin/python benches/dashboard.py screenshot [PNG]
    target/clients/venv/bin/python benches/dashboard.py bench

`screenshot` makes three proxies with toxics, streams through two of them
for 40 s, and saves the page at 1280x800 (GUIDE.md's picture,
benches/dashboard.png unless told). `bench` measures, with no proxies and
with 1,000 (ten of them streaming): the server's CPU and Chromium's
renderer's while the page is open (60 s), the page's long tasks (over
50 ms) meanwhile, how late the page took keys typed into its filter
(Event Timing's input delay), and how long the page takes to be ready
(five loads). SHAPE names another build to measure.
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
SHAPE = os.environ.get("SHAPE") or os.path.join(HERE, "..", "target", "release", "shape")

# Registered before the page's own script: every long task, and every
# key's input delay (Event Timing gives events of 16 ms or more, which
# any delay over 16 ms makes).
WATCH = """
window.__long = [];
window.__delays = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__long.push(e.duration);
}).observe({ type: "longtask", buffered: true });
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__delays.push(e.processingStart - e.startTime);
}).observe({ type: "event", durationThreshold: 16, buffered: true });
"""


def cpu_of(pid):
    """CPU seconds `pid` has used, or 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def renderers():
    """Chromium's renderer processes: the page's work is done there."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                # Chromium rewrites its children's command lines as one
                # string, the words apart by spaces.
                line = cmdline.read().replace(b"\0", b" ")
        except OSError:
            continue
        if b"chrom" in line.split(b" ")[0] and b" --type=renderer" in line:
            found.append(int(entry))
    return found


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
        return cpu_of(self.process.pid)

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


def watched(driver, port):
    """The page, opened with its long tasks and input delays recorded."""
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
    return ready(driver, port)


def typing(driver):
    """Types into the filter and takes it back, a key at a time, as the
    state comes in: input delays are recorded."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    found = driver.find_elements(By.ID, "filter")
    if found:
        search = found[0]
    else:
        # A build without the filter: the new proxy's name takes the keys.
        driver.find_element(By.CSS_SELECTOR, "#create summary").click()
        search = driver.find_element(By.CSS_SELECTOR, "#new-proxy [name=name]")
    for _ in range(10):
        for key in "p09":
            search.send_keys(key)
            time.sleep(0.1)
        for _ in range(3):
            search.send_keys(Keys.BACKSPACE)
            time.sleep(0.1)


def open_for_a_minute(server, driver, label):
    """The server's and the renderer's CPU over 60 s with the page open
    and left alone, after 5 s to settle, and the page's long tasks
    meanwhile; then keys typed into the filter, with their input delays
    and what the renderer spent on them."""
    time.sleep(5)
    driver.execute_script("window.__long = []; window.__delays = [];")
    pages = renderers()
    renderer = lambda: sum(cpu_of(pid) for pid in pages)
    before = server.cpu_seconds(), renderer()
    started = time.monotonic()
    time.sleep(60)
    spent = time.monotonic() - started
    used = server.cpu_seconds() - before[0], renderer() - before[1]
    long_tasks = driver.execute_script("return window.__long")
    print(f"page open, {label}, {spent:.0f} s: server {used[0]:.2f} CPU s "
          f"({used[0] / spent:.1%} of a core), renderer {used[1]:.2f} CPU s "
          f"({used[1] / spent:.1%} of a core); long tasks: {len(long_tasks)}"
          + (f", longest {max(long_tasks):.0f} ms" if long_tasks else ""))
    before, started = renderer(), time.monotonic()
    typing(driver)
    spent, used = time.monotonic() - started, renderer() - before
    delays = driver.execute_script("return window.__delays")
    long_tasks = driver.execute_script("return window.__long")
    print(f"  90 keys typed in {spent:.0f} s: renderer {used:.2f} CPU s; longest input delay "
          + (f"{max(delays):.0f} ms" if delays else "under 16 ms")
          + f"; long tasks: {len(long_tasks)}"
          + (f", longest {max(long_tasks):.0f} ms" if long_tasks else ""))


def bench():
    server = Server()
    upstream = echo_server()
    driver = browser()
    stop = threading.Event()
    try:
        watched(driver, server.port)
        open_for_a_minute(server, driver, "no proxies")
        for n in range(1000):
            proxy = server.call("POST", "/proxies", {"name": f"p{n:04}", "listen": "127.0.0.1:0",
                                                     "upstream": upstream})
            if n % 100 == 0:
                threading.Thread(target=stream, args=(proxy["listen"], 100_000, stop),
                                 daemon=True).start()
        times = sorted(watched(driver, server.port) for _ in range(5))
        print("1,000 proxies, page ready in (s): " + ", ".join(f"{t:.3f}" for t in times))
        open_for_a_minute(server, driver, "1,000 proxies, 10 streaming")
    finally:
        stop.set()
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
