"""A QUIC download with aioquic, for the UDP link's tests.

    quic_download.py serve CERT_DIR           # says "listening on PORT", serves until killed
    quic_download.py fetch PORT BYTES         # prints {"bytes": N, "intact": bool, "seconds": T}

The client opens one stream and asks for BYTES bytes; the server answers
them (the same bytes every time, from a seeded generator) and ends the
stream. The client checks every byte and times the download from the
first packet of the handshake to the last byte.
"""

import asyncio
import datetime
import json
import os
import random
import ssl
import sys
import time

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamDataReceived

ALPN = ["shape-test"]


def content(size):
    return random.Random(7).randbytes(size)


class Server(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked = {}

    def quic_event_received(self, event):
        if not isinstance(event, StreamDataReceived):
            return
        asked = self.asked.setdefault(event.stream_id, bytearray())
        asked += event.data
        if event.end_stream:
            size = int(asked.decode())
            self._quic.send_stream_data(event.stream_id, content(size), end_stream=True)
            self.transmit()


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.received = bytearray()
        self.done = asyncio.get_running_loop().create_future()

    async def fetch(self, size):
        stream = self._quic.get_next_available_stream_id()
        self._quic.send_stream_data(stream, str(size).encode(), end_stream=True)
        self.transmit()
        return await self.done

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived):
            self.received += event.data
            if event.end_stream and not self.done.done():
                self.done.set_result(bytes(self.received))


def certificate(directory):
    """A self-signed certificate for localhost, made once in DIRECTORY."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    cert, key_file = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    built = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    with open(cert, "wb") as out:
        out.write(built.public_bytes(serialization.Encoding.PEM))
    with open(key_file, "wb") as out:
        out.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return cert, key_file


async def run_server(directory):
    configuration = QuicConfiguration(is_client=False, alpn_protocols=ALPN)
    configuration.load_cert_chain(*certificate(directory))
    server = await serve("127.0.0.1", 0, configuration=configuration, create_protocol=Server)
    port = server._transport.get_extra_info("sockname")[1]
    print(f"listening on {port}", flush=True)
    await asyncio.Future()


async def run_client(port, size):
    configuration = QuicConfiguration(is_client=True, alpn_protocols=ALPN)
    configuration.verify_mode = ssl.CERT_NONE
    start = time.monotonic()
    async with connect("127.0.0.1", port, configuration=configuration, create_protocol=Client) as client:
        received = await client.fetch(size)
    seconds = time.monotonic() - start
    print(json.dumps({"bytes": len(received), "intact": received == content(size), "seconds": seconds}))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        asyncio.run(run_server(sys.argv[2]))
    else:
        asyncio.run(run_client(int(sys.argv[2]), int(sys.argv[3])))
