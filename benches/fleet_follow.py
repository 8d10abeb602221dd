#!/usr/bin/env python3
"""Members of one fleet share while something happens to Redis.

Starts MEMBERS shapes on SHARE (each with a runtime directory of its own),
runs EVENT (a bash command) AT seconds in, and prints what the members
said on standard error and when, and the share's total rate per 100 ms
from half a second before the event to the end, as parts of the share's
rate, with the least of them.

    benches/fleet_follow.py --shape target/release/shape --share redis://... \\
        --rate 8MiB --members 2 --at 3 --event 'redis-cli -p 7001 ...'
"""

import argparse
import os
import subprocess
import tempfile
import threading
import time

from fleet_members import size


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", required=True)
    parser.add_argument("--share", required=True)
    parser.add_argument("--rate", required=True)
    parser.add_argument("--members", type=int, default=2)
    parser.add_argument("--at", type=float, default=3.0)
    parser.add_argument("--after", type=float, default=3.0)
    parser.add_argument("--event", required=True)
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    rate = size(args.rate)
    scratch = tempfile.mkdtemp()
    start = time.monotonic()
    seconds = args.at + args.after
    windows = [0] * (int(seconds * 10) + 20)
    said = []
    lock = threading.Lock()
    children = []
    for i in range(args.members):
        runtime = os.path.join(scratch, f"m{i}")
        os.mkdir(runtime, 0o700)
        env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
        command = [args.shape, "--share", args.share, "--rate", args.rate, "--progress", "none"]
        child = subprocess.Popen(
            command,
            stdin=open("/dev/zero", "rb"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        children.append(child)

        def read(pipe=child.stdout):
            while True:
                chunk = pipe.read1(1 << 20)
                if not chunk:
                    return
                slot = int((time.monotonic() - start) * 10)
                with lock:
                    if slot < len(windows):
                        windows[slot] += len(chunk)

        def listen(pipe=child.stderr, member=i + 1):
            for line in pipe:
                said.append((time.monotonic() - start, member, line.decode().rstrip()))

        threading.Thread(target=read, daemon=True).start()
        threading.Thread(target=listen, daemon=True).start()
    time.sleep(args.at)
    event = time.monotonic() - start
    subprocess.run(["bash", "-c", args.event], check=False)
    done = time.monotonic() - start
    time.sleep(max(0.0, seconds - done))
    for child in children:
        child.kill()
    for child in children:
        child.wait()

    label = args.label or args.event
    print(f"{label}: the event took {done - event:.3f} s")
    for at, member, line in said:
        print(f"  {at - event:+.3f} s member {member}: {line}")
    first, last = int((event - 0.5) * 10), int((seconds - 0.2) * 10)
    parts = [windows[j] * 10 / rate for j in range(first, last)]
    print(
        "  per 100 ms, from 0.5 s before the event, in parts of the share: "
        + " ".join(f"{p:.2f}" for p in parts)
    )
    print(f"  least 100 ms: {min(parts):.2f} of the share")


if __name__ == "__main__":
    main()
