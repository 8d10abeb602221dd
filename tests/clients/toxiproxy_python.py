"""toxiproxy-python, the client from PyPI, drives a toxiproxy server: the
scenario every client must pass. Usage: toxiproxy_python.py API_PORT
UPSTREAM, where UPSTREAM echoes what it is sent. Prints 'ok' at the end;
any failure raises."""

import socket
import sys
import time

from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer


def round_trip(listen, message=b"ping"):
    """Seconds for one echo of `message` through `listen`."""
    host, port = listen.rsplit(":", 1)
    start = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(message)
        back = b""
        while len(back) < len(message):
            piece = conn.recv(len(message) - len(back))
            assert piece, "the connection ended early"
            back += piece
    assert back == message, back
    return time.monotonic() - start


def refused(listen):
    host, port = listen.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def main():
    APIConsumer.host, APIConsumer.port = "127.0.0.1", int(sys.argv[1])
    upstream = sys.argv[2]
    server = Toxiproxy()
    assert server.running()
    assert server.version()

    proxy = server.create(upstream=upstream, name="python_client", listen="127.0.0.1:0")
    assert proxy.listen.startswith("127.0.0.1:") and not proxy.listen.endswith(":0"), proxy.listen
    assert "python_client" in server.proxies()
    assert round_trip(proxy.listen) < 0.25

    proxy.add_toxic(type="latency", attributes={"latency": 300})
    toxic = proxy.get_toxic("latency_downstream")
    assert toxic.attributes == {"latency": 300, "jitter": 0}, toxic.attributes
    took = round_trip(proxy.listen)
    assert 0.3 <= took < 0.3 + 0.4, took

    with proxy.down():
        assert refused(proxy.listen), "a proxy taken down refuses"
        assert not server.get_proxy("python_client").enabled
    assert server.get_proxy("python_client").enabled
    assert round_trip(proxy.listen) >= 0.3, "up again, with its toxic"

    proxy.destroy_toxic("latency_downstream")
    assert proxy.toxics() == {}
    assert round_trip(proxy.listen) < 0.25

    proxy.add_toxic(type="bandwidth", stream="upstream", attributes={"rate": 100})
    assert server.reset()
    assert proxy.toxics() == {}, "reset removes every toxic"

    proxy.destroy()
    assert server.get_proxy("python_client") is None
    assert refused(proxy.listen)
    print("ok")


main()
