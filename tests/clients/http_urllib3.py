"""urllib3 against shape's HTTP faults.

  retry URL   GET with Retry(total=3, status_forcelist=[503]); prints the
              final status and body
  sha URL     a 64 MiB chunked upload to URL/upload and a 64 MiB chunked
              download from URL/bytes/N; prints "ok" if both arrive whole
"""

import hashlib
import random
import sys

import urllib3
from urllib3.util.retry import Retry

MIB = 1 << 20


def retry(url):
    pool = urllib3.PoolManager()
    retries = Retry(total=3, status_forcelist=[503], backoff_factor=0)
    response = pool.request("GET", url, retries=retries)
    print(response.status, response.data.decode())


def sha(url):
    pool = urllib3.PoolManager()
    body = random.Random(7).randbytes(64 * MIB)

    def pieces():
        for at in range(0, len(body), 1 << 16):
            yield body[at : at + (1 << 16)]

    sent = hashlib.sha256(body).hexdigest()
    response = pool.request("POST", url + "/upload", body=pieces(), chunked=True)
    if response.data.decode() != sent:
        sys.exit(f"the upload arrived as {response.data!r}, not {sent}")
    response = pool.request("GET", url + f"/bytes/{64 * MIB}", preload_content=False)
    digest = hashlib.sha256()
    for piece in response.stream(1 << 16):
        digest.update(piece)
    if digest.hexdigest() != sent:
        sys.exit(f"the download arrived as {digest.hexdigest()}, not {sent}")
    print("ok")


{"retry": retry, "sha": sha}[sys.argv[1]](sys.argv[2])
