#!/usr/bin/env python3
"""The dashboard of `shape --serve`, driven in a real headless Chromium
(Debian's chromium and chromium-driver, through Selenium).

    dashboard.py API_PORT UPSTREAM

Through the page alone, with the keyboard: creates a proxy to UPSTREAM,
adds a latency toxic through its form (and checks the API has it), sees
the graph's numbers move while data streams through the proxy, sees the
API's own error when a change is refused, and disables the proxy through
the confirmation. Then a page of another origin tries the API with
fetch and a form POST, and is refused. The page is read at 1280x800 and
at 400 px wide. Says `ok` and exits 0, or fails with what it saw.
"""
import http.server
import json
import socket
import sys
import threading
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

PATIENCE = 20


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,800"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def api(port, method, path, body=None):
    """A plain client's call, as curl would make it."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    with urllib.request.urlopen(request) as answer:
        text = answer.read()
        return json.loads(text) if text else None


def until(driver, what, seconds=PATIENCE):
    return WebDriverWait(driver, seconds, poll_frequency=0.05).until(lambda d: what(d))


def stream(address, stop):
    """Sends through the proxy to the echo server, reading back, until
    `stop` is set."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as conn:
        conn.settimeout(5)
        chunk = b"x" * 16384
        while not stop.is_set():
            conn.sendall(chunk)
            got = 0
            while got < len(chunk):
                got += len(conn.recv(len(chunk) - got))


def fits(driver):
    """True if the page needs no sideways scrolling."""
    return driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth")


class Foreign(http.server.BaseHTTPRequestHandler):
    """A page of another origin (another port) that tries the API."""

    api_port = 0

    def do_GET(self):
        api_url = f"http://127.0.0.1:{self.api_port}"
        page = f"""<!doctype html><title>trying</title>
<form id="f" method="post" action="{api_url}/proxies" enctype="text/plain">
<input name='{{"name": "evil-form", "upstream": "127.0.0.1:1", "x": "' value='"}}'>
</form>
<script>
const outcomes = [];
async function attempt(init) {{
  try {{ const r = await fetch("{api_url}/proxies", init); outcomes.push(r.status); }}
  catch (e) {{ outcomes.push("failed"); }}
}}
(async () => {{
  await attempt({{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
                 body: JSON.stringify({{name: "evil-simple", upstream: "127.0.0.1:1"}})}});
  await attempt({{method: "POST", headers: {{"Content-Type": "application/json"}},
                 body: JSON.stringify({{name: "evil-json", upstream: "127.0.0.1:1"}})}});
  document.title = "tried " + outcomes.join(",");
}})();
</script>"""
        body = page.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


def main():
    port, upstream = sys.argv[1], sys.argv[2]
    driver = browser()
    try:
        drive(driver, port, upstream)
    finally:
        driver.quit()
    print("ok")


def drive(driver, port, upstream):
    page = f"http://127.0.0.1:{port}/"
    driver.get(page)
    until(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    assert fits(driver), "the page scrolls sideways at 1280x800"

    # A proxy, created with the keyboard.
    create = driver.find_element(By.CSS_SELECTOR, "#create summary")
    create.send_keys(Keys.ENTER)
    form = driver.find_element(By.ID, "new-proxy")
    form.find_element(By.NAME, "name").send_keys("web")
    form.find_element(By.NAME, "listen").send_keys("127.0.0.1:0")
    form.find_element(By.NAME, "upstream").send_keys(upstream, Keys.ENTER)
    card = until(driver, lambda d: d.find_element(By.CSS_SELECTOR, 'article[data-name="web"]'))
    listen = api(port, "GET", "/proxies/web")["listen"]
    assert listen.startswith("127.0.0.1:") and not listen.endswith(":0"), listen

    # The same name again: the API's own error, shown.
    form.find_element(By.NAME, "name").send_keys("web")
    form.find_element(By.NAME, "upstream").send_keys(upstream, Keys.ENTER)
    message = driver.find_element(By.ID, "message")
    until(driver, lambda d: message.is_displayed() and "already exists" in message.text)

    # A latency toxic through its form, with the keyboard.
    adding = card.find_element(By.CSS_SELECTOR, ".add-toxic summary")
    adding.send_keys(Keys.ENTER)
    toxic_form = until(driver, lambda d: card.find_element(By.CSS_SELECTOR, ".add-toxic form"))
    Select(toxic_form.find_element(By.NAME, "type")).select_by_value("latency")
    latency = toxic_form.find_element(By.CSS_SELECTOR, '[data-attribute="latency"]')
    latency.send_keys(Keys.CONTROL, "a")
    latency.send_keys("100", Keys.ENTER)
    until(driver, lambda d: "latency" in card.find_element(By.CSS_SELECTOR, ".toxics").text)
    toxics = api(port, "GET", "/proxies/web/toxics")
    assert [(t["type"], t["attributes"]["latency"]) for t in toxics] == [("latency", 100)], toxics

    # Data through the proxy: the graph's numbers move.
    stop = threading.Event()
    streaming = threading.Thread(target=stream, args=(listen, stop), daemon=True)
    streaming.start()
    down = card.find_element(By.CSS_SELECTOR, '[data-rate="down"]')
    until(driver, lambda d: int(down.get_attribute("data-bytes-per-second") or 0) > 0)
    seen = down.text
    assert seen.endswith("/s"), seen
    stop.set()
    streaming.join(timeout=10)

    # Disabled through the confirmation, answered with the keyboard.
    toggle = card.find_element(By.CSS_SELECTOR, ".actions button")
    assert toggle.text == "Disable", toggle.text
    toggle.send_keys(Keys.ENTER)
    dialog = driver.find_element(By.ID, "confirm")
    until(driver, lambda d: dialog.is_displayed())
    assert "Disable proxy web?" in dialog.text, dialog.text
    driver.find_element(By.ID, "confirm-ok").send_keys(Keys.ENTER)
    until(driver, lambda d: api(port, "GET", "/proxies/web")["enabled"] is False)
    until(driver, lambda d: toggle.text == "Enable")

    # Read at 400 px wide.
    driver.set_window_size(400, 800)
    until(driver, lambda d: fits(d))
    driver.set_window_size(1280, 800)

    # Another origin's page is refused, by fetch and by a form.
    Foreign.api_port = int(port)
    foreign = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Foreign)
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    driver.get(f"http://127.0.0.1:{foreign.server_address[1]}/")
    until(driver, lambda d: d.title.startswith("tried "))
    # A no-cors request is sent and its answer hidden (0); the JSON one
    # stops at its preflight.
    assert driver.title == "tried 0,failed", driver.title
    driver.execute_script("document.getElementById('f').submit()")
    until(driver, lambda d: "User agent not allowed" in d.page_source)
    foreign.shutdown()
    names = sorted(api(port, "GET", "/proxies"))
    assert names == ["web"], names


if __name__ == "__main__":
    main()
