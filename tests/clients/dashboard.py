#!/usr/bin/env python3
"""The dashboard of `shape --serve`, driven in a real headless Chromium
(Debian's chromium and chromium-driver, through Selenium).

    dashboard.py API_PORT UPSTREAM SERVER_PID

Through the page alone, with the keyboard, following where focus goes:
creates a proxy to UPSTREAM, sees the API's own error beside the form
that caused it, adds a toxic through its form (and checks the API has
it), edits it through one form, removes another only once asked, sees
the graph's numbers and scale move while data streams through the
proxy, disables the proxy through the confirmation, and reads every
toxic's values and buttons at 400 px wide. Opened again, the page shows
the last minute at once. A UDP proxy's card counts its flows; the filter
shows the cards it names. With the server stopped (SIGSTOP to
SERVER_PID) every card greys out, and comes back with it. Then a page of
another origin tries the API with fetch and a form POST, and is refused.
Says `ok` and exits 0, or fails with what it saw.
"""
import http.server
import json
import os
import signal
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
    port, upstream, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    driver = browser()
    try:
        drive(driver, port, upstream, pid)
    finally:
        driver.quit()
    print("ok")


def focused(driver):
    return driver.switch_to.active_element


def in_view(driver, element):
    """True if all of `element` is inside the window, and none of its
    text is cut."""
    return driver.execute_script(
        """const e = arguments[0], r = e.getBoundingClientRect();
        return r.left >= 0 && r.right <= window.innerWidth && r.top >= 0
            && r.bottom <= window.innerHeight && e.scrollWidth <= e.clientWidth + 1;""",
        element)


def confirm(driver, answer):
    """Answers the confirmation open now: `ok` or `cancel`, by keyboard."""
    dialog = driver.find_element(By.ID, "confirm")
    until(driver, lambda d: dialog.is_displayed())
    text = dialog.text
    button = "confirm-ok" if answer == "ok" else None
    if button:
        driver.find_element(By.ID, button).send_keys(Keys.ENTER)
    else:
        dialog.find_element(By.CSS_SELECTOR, 'button[value="cancel"]').send_keys(Keys.ENTER)
    until(driver, lambda d: not dialog.is_displayed())
    return text


def toxic_item(card, name):
    return card.find_element(By.CSS_SELECTOR, f'li[data-toxic="{name}"]')


def drive(driver, port, upstream, pid):
    page = f"http://127.0.0.1:{port}/"
    driver.get(page)
    until(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    assert fits(driver), "the page scrolls sideways at 1280x800"

    # A proxy, created with the keyboard: focus goes into the form as it
    # opens, and back to what opened it once it is used.
    create = driver.find_element(By.CSS_SELECTOR, "#create summary")
    create.send_keys(Keys.ENTER)
    form = driver.find_element(By.ID, "new-proxy")
    until(driver, lambda d: focused(d).get_attribute("name") == "name")
    focused(driver).send_keys("web")
    form.find_element(By.NAME, "listen").send_keys("127.0.0.1:0")
    form.find_element(By.NAME, "upstream").send_keys(upstream, Keys.ENTER)
    card = until(driver, lambda d: d.find_element(By.CSS_SELECTOR, 'article[data-name="web"]'))
    until(driver, lambda d: focused(d) == create)
    listen = api(port, "GET", "/proxies/web")["listen"]
    assert listen.startswith("127.0.0.1:") and not listen.endswith(":0"), listen

    # The same name again: the API's own error, beside the form, in view.
    create.send_keys(Keys.ENTER)
    until(driver, lambda d: focused(d).get_attribute("name") == "name")
    focused(driver).send_keys("web")
    form.find_element(By.NAME, "upstream").send_keys(upstream, Keys.ENTER)
    error = form.find_element(By.CSS_SELECTOR, ".error")
    until(driver, lambda d: error.is_displayed() and "already exists" in error.text)
    assert in_view(driver, error), "the form's error is out of view"
    assert not driver.find_element(By.ID, "message").is_displayed()
    create.send_keys(Keys.ENTER)  # closed: its error goes with it
    until(driver, lambda d: not error.is_displayed())

    # A latency toxic through its form, with the keyboard.
    adding = card.find_element(By.CSS_SELECTOR, ".add-toxic summary")
    adding.send_keys(Keys.ENTER)
    toxic_form = until(driver, lambda d: card.find_element(By.CSS_SELECTOR, ".add-toxic form"))
    until(driver, lambda d: focused(d).get_attribute("name") == "type")
    Select(toxic_form.find_element(By.NAME, "type")).select_by_value("latency")
    latency = toxic_form.find_element(By.CSS_SELECTOR, '[data-attribute="latency"]')
    latency.send_keys(Keys.CONTROL, "a")
    latency.send_keys("100", Keys.ENTER)
    until(driver, lambda d: "latency" in card.find_element(By.CSS_SELECTOR, ".toxics").text)
    until(driver, lambda d: focused(d) == adding)
    toxics = api(port, "GET", "/proxies/web/toxics")
    assert [(t["type"], t["attributes"]["latency"]) for t in toxics] == [("latency", 100)], toxics
    api(port, "POST", "/proxies/web/toxics",
        {"name": "slow", "type": "bandwidth", "stream": "upstream", "attributes": {"rate": 500}})
    until(driver, lambda d: "slow" in card.find_element(By.CSS_SELECTOR, ".toxics").text)

    # Edit opens one form, however often it is pressed; focus goes into
    # it, and back to Edit after.
    edit = toxic_item(card, "latency_downstream").find_element(By.CSS_SELECTOR, '[data-action="edit"]')
    edit.send_keys(Keys.ENTER)
    edit.send_keys(Keys.ENTER)
    forms = card.find_elements(By.CSS_SELECTOR, ".toxics form")
    assert len(forms) == 1, f"{len(forms)} edit forms"
    until(driver, lambda d: focused(d).get_attribute("name") == "toxicity")
    # Edit on another toxic: its form takes the place of the first, and
    # focus goes into it.
    toxic_item(card, "slow").find_element(By.CSS_SELECTOR, '[data-action="edit"]').send_keys(Keys.ENTER)
    forms = card.find_elements(By.CSS_SELECTOR, ".toxics form")
    assert len(forms) == 1, f"{len(forms)} edit forms"
    assert forms[0].find_element(By.XPATH, "ancestor::li").get_attribute("data-toxic") == "slow"

    def focus_in(d, toxic, attribute, value):
        now = d.switch_to.active_element
        return (now.get_attribute(attribute) == value
                and now.find_element(By.XPATH, "ancestor::li").get_attribute("data-toxic") == toxic)

    until(driver, lambda d: focus_in(d, "slow", "name", "toxicity"))
    time.sleep(0.2)  # a frame or two: nothing takes focus away after
    assert focus_in(driver, "slow", "name", "toxicity"), focused(driver).get_attribute("outerHTML")
    focused(driver).send_keys(Keys.ENTER)
    until(driver, lambda d: not card.find_elements(By.CSS_SELECTOR, ".toxics form"))
    until(driver, lambda d: focus_in(d, "slow", "data-action", "edit"))

    # Data through the proxy: the graph's numbers move, under a scale.
    stop = threading.Event()
    streaming = threading.Thread(target=stream, args=(listen, stop), daemon=True)
    streaming.start()
    down = card.find_element(By.CSS_SELECTOR, '[data-rate="down"]')
    until(driver, lambda d: int(down.get_attribute("data-bytes-per-second") or 0) > 0)
    seen = down.text
    assert seen.endswith("/s"), seen
    graph = card.find_element(By.CSS_SELECTOR, "canvas.graph")
    until(driver, lambda d: graph.get_attribute("data-scale") not in (None, "", "1 KiB/s"))
    assert graph.get_attribute("data-scale").endswith("/s"), graph.get_attribute("data-scale")
    stop.set()
    streaming.join(timeout=10)

    # At 400 px, every toxic's values and buttons in view.
    driver.set_window_size(400, 800)
    until(driver, lambda d: fits(d))
    for name in ("latency_downstream", "slow"):
        item = toxic_item(card, name)
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", item)
        for part in item.find_elements(By.CSS_SELECTOR, "dd, button"):
            assert in_view(driver, part), f"{name}: {part.text!r} is cut or out of view at 400 px"
    rate = toxic_item(card, "slow").find_element(By.CSS_SELECTOR, "dd")
    assert rate.text == "500 KB/s", rate.text
    driver.set_window_size(1280, 800)

    # Removing a toxic asks first; cancelled, it stays.
    remove = toxic_item(card, "slow").find_element(By.CSS_SELECTOR, '[data-action="remove"]')
    remove.send_keys(Keys.ENTER)
    assert "Remove toxic slow" in confirm(driver, "cancel")
    until(driver, lambda d: focused(d) == remove)
    assert len(api(port, "GET", "/proxies/web/toxics")) == 2
    remove.send_keys(Keys.ENTER)
    confirm(driver, "ok")
    until(driver, lambda d: len(api(port, "GET", "/proxies/web/toxics")) == 1)
    # The toxic gone, focus goes to what adds one.
    until(driver, lambda d: focused(d) == card.find_element(By.CSS_SELECTOR, ".add-toxic summary"))

    # Disabled through the confirmation, answered with the keyboard.
    toggle = card.find_element(By.CSS_SELECTOR, ".actions button")
    assert toggle.text == "Disable", toggle.text
    toggle.send_keys(Keys.ENTER)
    assert "Disable proxy web?" in confirm(driver, "ok")
    until(driver, lambda d: api(port, "GET", "/proxies/web")["enabled"] is False)
    until(driver, lambda d: toggle.text == "Enable")

    # Opened again, the page shows what flowed before: the server's
    # minute, at once.
    driver.get(page)
    until(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    graph = driver.find_element(By.CSS_SELECTOR, 'article[data-name="web"] canvas.graph')
    until(driver, lambda d: graph.get_attribute("data-seconds"))
    assert int(graph.get_attribute("data-seconds")) >= 3, graph.get_attribute("data-seconds")
    assert "peak 0 B/s" not in graph.get_attribute("aria-label"), graph.get_attribute("aria-label")

    # A UDP proxy counts its flows, in numbers.
    udp = api(port, "POST", "/proxies", {"name": "dns", "protocol": "udp",
                                         "listen": "127.0.0.1:0", "upstream": "127.0.0.1:9"})
    host, udp_port = udp["listen"].rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
        client.sendto(b"hello", (host, int(udp_port)))
        count = until(driver, lambda d: d.find_element(
            By.CSS_SELECTOR, 'article[data-name="dns"] .count'))
        until(driver, lambda d: count.text == "1 flow")

    # The filter shows the cards it names.
    search = driver.find_element(By.ID, "filter")
    search.send_keys("DN")
    web = driver.find_element(By.CSS_SELECTOR, 'article[data-name="web"]')
    until(driver, lambda d: not web.is_displayed())
    assert driver.find_element(By.ID, "filter-count").text == "1 of 2 shown"
    search.send_keys(Keys.BACKSPACE, Keys.BACKSPACE)
    until(driver, lambda d: web.is_displayed())

    # The server stopped: every card greyed, until it answers again.
    os.kill(pid, signal.SIGSTOP)
    try:
        until(driver, lambda d: "gone" in d.find_element(By.TAG_NAME, "body").get_attribute("class"))
        totals = driver.find_element(By.ID, "totals").text
        assert totals.startswith("Not answering"), totals
        for article in driver.find_elements(By.CSS_SELECTOR, "article.proxy"):
            seen = article.value_of_css_property("filter")
            assert "grayscale" in seen, seen
    finally:
        os.kill(pid, signal.SIGCONT)
    until(driver, lambda d: "gone" not in (d.find_element(By.TAG_NAME, "body").get_attribute("class") or ""))
    api(port, "DELETE", "/proxies/dns")

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
