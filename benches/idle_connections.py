#!/usr/bin/env python3
"""Memory a proxy holds per idle connection: N clients connect through a
release shape proxy to an upstream that accepts and holds them, nobody
sends, and the proxy's RSS is read before and after. Usage:
benches/idle_connections.py [N] (N up to about half the hard limit on open
files, as this one process holds both ends of every connection)."""
import os, resource, socket, subprocess, sys, threading, time
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],)*2)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 9900
SHAPE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "release", "shape")
up = socket.socket(); up.bind(("127.0.0.1", 0)); up.listen(65535)
held = []
def accept():
    while True:
        c, _ = up.accept(); held.append(c)
threading.Thread(target=accept, daemon=True).start()
p = subprocess.Popen([SHAPE, "--listen", "127.0.0.1:0", "--connect", "127.0.0.1:%d" % up.getsockname()[1], "--rate", "100MiB"], stderr=subprocess.PIPE)
line = p.stderr.readline().decode()
addr = line.strip().rsplit(" ", 1)[1]; host, port = addr.rsplit(":", 1)
def rss():
    for l in open("/proc/%d/status" % p.pid):
        if l.startswith("VmRSS"): return int(l.split()[1])
time.sleep(0.3); before = rss()
clients = []
for i in range(N):
    s = socket.create_connection((host, int(port))); clients.append(s)
while len(held) < N: time.sleep(0.05)
time.sleep(1); after = rss()
print("connections %d: RSS before %d KiB, after %d KiB, per connection %.2f KiB" % (N, before, after, (after - before) / N))
p.kill()
