"""toxiproxy-python, the client from PyPI, creates shape's `http` toxic
(its type is a string to every client), then urllib3 meets it through the
proxy: the first two requests are answered 503 by shape, and Retry gets
the upstream's 200. Usage: http_toxic_python.py API_PORT UPSTREAM. Prints
the final status and body, then the toxic as the API gives it back."""

import sys

import urllib3
from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer
from urllib3.util.retry import Retry

APIConsumer.host, APIConsumer.port = "127.0.0.1", int(sys.argv[1])
server = Toxiproxy()
proxy = server.create(upstream=sys.argv[2], name="web", listen="127.0.0.1:0")
proxy.add_toxic(
    type="http",
    name="first_two",
    attributes={"status": 503, "body": "try later", "first": 2, "path": "/api/*"},
)
pool = urllib3.PoolManager()
retries = Retry(total=3, status_forcelist=[503], backoff_factor=0)
response = pool.request("GET", f"http://{proxy.listen}/api/cart", retries=retries)
print(response.status, response.data.decode())
toxic = proxy.get_toxic("first_two")
print(toxic.type, sorted(toxic.attributes.items()))
