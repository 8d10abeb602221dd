#!/usr/bin/env python3
"""Draws what each shaper's reader sees: the bytes of every 10 ms window
over time, for shape, pv -L, cstream -t and mbuffer -R at 1 MiB/s and
200 MiB/s, one panel per tool and rate, the target drawn beneath. The
meter (examples/meter.rs --windows) records the arrivals; matplotlib
draws benches/smoothness.png.

    python3 benches/picture.py [OUTPUT.png]

Tools that are not installed are left out and said so; matplotlib must be
installed (pip install matplotlib)."""
import os
import shutil
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SHAPE = os.path.join(ROOT, "target", "release", "shape")
METER = os.path.join(ROOT, "target", "release", "examples", "meter")
SECONDS = 3.0
RATES = [("1 MiB/s", 1 << 20), ("200 MiB/s", 200 << 20)]


def tools(bps):
    """Each tool's name and command at `bps` bytes a second."""
    return [
        ("shape", [SHAPE, "--rate", str(bps), "-q"]),
        ("pv -L", ["pv", "-q", "-L", str(bps)]),
        ("cstream -t", ["cstream", "-t", str(bps)]),
        ("mbuffer -R", ["mbuffer", "-q", "-m", "1M", "-R", str(bps)]),
    ]


def windows(command, bps, scratch):
    """The (seconds, bytes) of every 10 ms window the meter saw."""
    path = os.path.join(scratch, "windows.csv")
    with open("/dev/zero", "rb") as zero:
        subprocess.run(
            [METER, "--label", "x", "--rate", str(bps), "--seconds", str(SECONDS),
             "--windows", path, "--", *command],
            stdin=zero, stdout=subprocess.DEVNULL, check=True)
    with open(path) as lines:
        pairs = [line.strip().split(",") for line in lines if line.strip()]
    return [float(t) for t, _ in pairs], [int(b) for _, b in pairs]


def main():
    output = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "benches", "smoothness.png")
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "shape",
                    "--example", "meter"], cwd=ROOT, check=True)
    present = [name for name, command in tools(1) if shutil.which(command[0])]
    for name, command in tools(1):
        if name not in present:
            print(f"skipped: {command[0]} is not installed", file=sys.stderr)
    figure, axes = plt.subplots(len(present), len(RATES), figsize=(12, 2.2 * len(present)),
                                sharex=True, squeeze=False)
    with tempfile.TemporaryDirectory() as scratch:
        for column, (label, bps) in enumerate(RATES):
            rows = [(n, c) for n, c in tools(bps) if n in present]
            for row, (name, command) in enumerate(rows):
                times, sizes = windows(command, bps, scratch)
                axis = axes[row][column]
                axis.axhline(bps * 0.01 / 1024, color="red", linewidth=2.5, alpha=0.3, zorder=1)
                axis.plot(times, [s / 1024 for s in sizes], linewidth=0.7, zorder=2)
                axis.set_title(f"{name} at {label}", fontsize=9)
                axis.set_ylabel("KiB per 10 ms", fontsize=8)
                # The first burst would dwarf the rest: show the steady flow
                # up to five times the target.
                axis.set_ylim(0, bps * 0.01 / 1024 * 5)
                axis.set_xlim(0, SECONDS)
    for axis in axes[-1]:
        axis.set_xlabel("seconds")
    figure.suptitle("Bytes the reader got in each 10 ms window (the target in pale red)")
    figure.tight_layout()
    figure.savefig(output, dpi=90)
    print(output)


if __name__ == "__main__":
    main()
