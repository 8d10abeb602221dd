#!/usr/bin/env python3
"""Members of one fleet share, measured over one common window.

Starts MEMBERS shapes on SHARE (each with a runtime directory of its own,
so that they cannot meet through a local share), reads every member's
output in a thread of its own, and counts bytes per 10 ms window on one
clock. Over the window from --skip seconds to the end less half a second,
prints each member's rate and part of the total, its CV per 100 ms and per
10 ms and its empty 100 ms windows, and then the total against the share's
rate. --share given more than once puts the members at those addresses in
turn: members at different distances from one Redis. --freeze PID:AT:FOR
stops Redis (SIGSTOP) AT seconds in for FOR seconds, and then says what the
members spent per 100 ms from the freeze, and over the 1.5 s that start
0.5 s after Redis wakes. --end SIGNAL:AT ends the first shape with SIGNAL (TERM
or KILL) AT seconds in, and says when the others' pace over 100 ms first
reaches 95% of the share after it.

    benches/fleet_members.py --shape target/release/shape --share redis://... \\
        --rate 8MiB --members 4 --seconds 8
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

UNITS = {"": 1, "k": 1000, "ki": 1024, "m": 1000**2, "mi": 1024**2, "gi": 1024**3}


def size(text):
    """A rate as shape reads it (8MiB, 500k, 1000) in bytes a second."""
    match = re.fullmatch(r"([0-9.]+)\s*([a-z]*?)b?", text.lower())
    return float(match.group(1)) * UNITS[match.group(2)]


def cv(values):
    mean = statistics.fmean(values)
    return statistics.pstdev(values) / mean if mean else float("inf")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", required=True)
    parser.add_argument(
        "--share",
        required=True,
        action="append",
        help="the share's address; given more than once, the members take them in turn "
        "(members at different distances from Redis, each through a proxy of its own)",
    )
    parser.add_argument("--rate", required=True, help="the share's rate, e.g. 8MiB")
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--skip", type=float, default=1.5)
    parser.add_argument("--label", default="")
    parser.add_argument("--extra", default="", help="more arguments for every shape")
    parser.add_argument("--freeze", help="PID:AT:FOR: stop Redis AT s in for FOR s")
    parser.add_argument("--end", help="SIGNAL:AT: end the first shape with SIGNAL AT s in")
    args = parser.parse_args()

    rate = size(args.rate)
    scratch = tempfile.mkdtemp()
    start = time.monotonic()
    counts = []
    children = []
    readers = []
    for i in range(args.members):
        runtime = os.path.join(scratch, f"m{i}")
        os.mkdir(runtime, 0o700)
        env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
        share = args.share[i % len(args.share)]
        command = [args.shape, "--share", share, "--rate", args.rate, "-q"]
        command += args.extra.split()
        child = subprocess.Popen(
            command, stdin=open("/dev/zero", "rb"), stdout=subprocess.PIPE, env=env
        )
        windows = [0] * (int(args.seconds * 100) + 200)
        counts.append(windows)
        children.append(child)

        def read(pipe=child.stdout, windows=windows):
            while True:
                chunk = pipe.read1(1 << 20)
                if not chunk:
                    return
                slot = int((time.monotonic() - start) * 100)
                if slot < len(windows):
                    windows[slot] += len(chunk)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        readers.append(reader)
    woke = None
    if args.freeze:
        pid, at, length = args.freeze.split(":")
        pid, at, length = int(pid), float(at), float(length)
        time.sleep(max(0.0, start + at - time.monotonic()))
        os.kill(pid, signal.SIGSTOP)
        frozen = time.monotonic()
        time.sleep(length)
        os.kill(pid, signal.SIGCONT)
        woke = time.monotonic()
    ended = None
    if args.end:
        name, at = args.end.split(":")
        time.sleep(max(0.0, start + float(at) - time.monotonic()))
        children[0].send_signal(getattr(signal, "SIG" + name))
        ended = time.monotonic()
    time.sleep(max(0.0, start + args.seconds - time.monotonic()))
    for child in children:
        child.kill()
    for child in children:
        child.wait()

    first, last = int(args.skip * 100), int((args.seconds - 0.5) * 100)
    span = (last - first) / 100
    total = 0.0
    rows = []
    for i, windows in enumerate(counts):
        tens = windows[first:last]
        hundreds = [sum(tens[j : j + 10]) for j in range(0, len(tens) - 9, 10)]
        each = sum(tens) / span
        total += each
        rows.append((i + 1, each, cv(hundreds), cv(tens), hundreds.count(0)))
    label = args.label or " ".join(args.share)
    if ended is not None:
        first = int((ended - start) * 100)
        others = [sum(windows[j] for windows in counts[1:]) for j in range(len(counts[0]))]
        back = next(
            (j for j in range(first + 10, len(others)) if sum(others[j - 10 : j]) * 10 >= 0.95 * rate),
            None,
        )
        after = "never" if back is None else f"{(back - first) / 100:.2f} s"
        print(f"| {label} | the others at 95% of the share after the first shape ended | {after} |")
        counts = counts[1:]
    if woke is not None:
        whole = [sum(windows[j] for windows in counts) for j in range(len(counts[0]))]

        def share(t0, t1):
            first, last = int((t0 - start) * 100), int((t1 - start) * 100)
            return sum(whole[first:last]) / ((last - first) / 100) / rate

        tenths = [share(t, t + 0.1) for t in (frozen + k / 10 for k in range(int((woke - frozen) * 10) + 30))]
        print(f"| {label} | per 100 ms from the freeze | " + " ".join(f"{x:.2f}" for x in tenths) + " |")
        print(f"| {label} | from 0.5 s to 2 s after Redis woke | {share(woke + 0.5, woke + 2.0):.3f} of the share |")
    for member, each, cv100, cv10, empty in rows:
        print(
            f"| {label} | member {member} | {each / 1048576:.3f} MiB/s | "
            f"{each / total * len(counts):.3f} | {cv100:.3f} | {cv10:.3f} | {empty} |"
        )
    print(f"| {label} | total | {total / 1048576:.3f} MiB/s | {total / rate:.4f} of the share | | | |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
