#!/usr/bin/env python3
"""A UDP link's loss models, set against measured: a million numbered
datagrams through `shape --listen udp: --connect udp: --drop MODEL`, the
share the link lost (its own count, SIGUSR1) and the mean length of a run
of losses (from the numbers that arrive) set beside their closed forms.
The sender is paced and the receiver's buffer large, so that the kernel
drops few; those it drops (what the receiver missed beyond the link's
count) are shown, since they lengthen the runs seen.

    cargo build --release && benches/udp_loss.py [target/release/shape] [DATAGRAMS]

Prints a Markdown table.
"""

import re
import signal
import socket
import subprocess
import sys
import threading
import time

SHAPE = sys.argv[1] if len(sys.argv) > 1 else "target/release/shape"
COUNT = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
PACE = 50_000  # datagrams a second


def gemodel(p, r, bad=1.0, good=0.0):
    """netem's Gilbert-Elliott: the share lost, and the mean run of losses
    where it has a closed form (simple Gilbert: lost in the bad state only,
    every time)."""
    in_bad = p / (p + r)
    share = in_bad * bad + (1 - in_bad) * good
    run = 1 / r if (bad, good) == (1.0, 0.0) else None
    return share, run


def four_state(p13, p31, p32, p23, p14):
    """netem's 4-state model: the share lost, from the stationary weights
    of its states (1 : p13 p32 / (p31 p23) : p13 / p31 : p14)."""
    weights = [1, p13 * p32 / (p31 * p23), p13 / p31, p14]
    return (weights[2] + weights[3]) / sum(weights), None


MODELS = [
    ("0", (0.0, None)),
    ("2%", (0.02, 1 / 0.98)),
    ("30%", (0.30, 1 / 0.70)),
    ("gemodel:1%,30%", gemodel(0.01, 0.30)),
    ("gemodel:5%,50%", gemodel(0.05, 0.50)),
    ("gemodel:2%,10%,60%,0.5%", gemodel(0.02, 0.10, 0.60, 0.005)),
    ("state:1%,30%,20%,40%,0.5%", four_state(0.01, 0.30, 0.20, 0.40, 0.005)),
]


def through(model):
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        receiver.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE, as root
    except OSError:
        receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    receiver.bind(("127.0.0.1", 0))
    upstream = receiver.getsockname()[1]
    link = subprocess.Popen(
        [SHAPE, "--listen", "udp:127.0.0.1:0", "--connect", f"udp:127.0.0.1:{upstream}",
         "--drop", model, "--seed", "1"],
        stderr=subprocess.PIPE, text=True)
    first = link.stderr.readline()
    port = int(re.search(r"udp:127\.0\.0\.1:(\d+)", first).group(1))
    seen = bytearray(COUNT)
    done = threading.Event()

    def receive():
        receiver.settimeout(0.5)
        while not done.is_set():
            try:
                data = receiver.recv(64)
            except socket.timeout:
                continue
            seen[int.from_bytes(data, "big")] = 1

    reader = threading.Thread(target=receive)
    reader.start()
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    start = time.monotonic()
    for number in range(COUNT):
        sender.sendto(number.to_bytes(8, "big"), ("127.0.0.1", port))
        if number % 20 == 19:
            ahead = start + (number + 1) / PACE - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    time.sleep(1)
    done.set()
    reader.join()
    link.send_signal(signal.SIGUSR1)
    said = ""
    while "up: " not in said:
        said = link.stderr.readline()
    link.terminate()
    link.wait()
    counted = re.search(r"(\d+) lost", said.split("; down:")[0])
    counted = int(counted.group(1)) if counted else 0
    lost = COUNT - sum(seen)
    runs, length = [], 0
    for arrived in seen:
        if arrived:
            if length:
                runs.append(length)
            length = 0
        else:
            length += 1
    if length:
        runs.append(length)
    mean_run = sum(runs) / len(runs) if runs else 0.0
    return lost, counted, mean_run


def main():
    print("| --drop | datagrams | the link lost | share set | share lost | mean run set | mean run seen | also dropped by the kernel |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for model, (share, run) in MODELS:
        lost, counted, mean_run = through(model)
        print(f"| `{model}` | {COUNT:,} | {counted:,} | {share:.4%} | {counted / COUNT:.4%} | "
              f"{'' if run is None else f'{run:.3f}'} | {mean_run:.3f} | {lost - counted:,} |", flush=True)


if __name__ == "__main__":
    main()
