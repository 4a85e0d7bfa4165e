#!/usr/bin/env python3
"""truncate-stall.py — how long fdatasync waits while a big file shrinks.

    python3 scripts/truncate-stall.py DIR [STEP_MB ...]

Writes a 363 MB file in DIR (the size of the heap of 2,000,000 deliveries),
then, for each STEP_MB (default: 363 64 16), shrinks a fresh copy of it to
zero STEP_MB at a time (ftruncate + fsync, 50 ms apart) while another
thread writes 8 KB and calls fdatasync every 2 ms on a second file in DIR,
as Postgres's WAL writer does. It prints the longest waits of that loop.
Run it on the filesystem of Postgres's data directory: dropping a relation
frees its file the way one 363 MB step does (bench/scale.md, "Stop 21").
Everything it writes is removed before it exits.
"""
import os
import sys
import threading
import time

SIZE_MB = 363


def run(directory, step_mb):
    path = os.path.join(directory, "truncate-stall.big")
    probe_path = os.path.join(directory, "truncate-stall.probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        block = os.urandom(1 << 20)
        for _ in range(SIZE_MB):
            os.write(fd, block)
        os.fsync(fd)
        time.sleep(2)  # let the writeback settle before measuring

        waits, stop = [], threading.Event()

        def probe():
            pf = os.open(probe_path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                while not stop.is_set():
                    t0 = time.monotonic()
                    os.pwrite(pf, b"x" * 8192, 0)
                    os.fdatasync(pf)
                    waits.append(time.monotonic() - t0)
                    time.sleep(0.002)
            finally:
                os.close(pf)

        th = threading.Thread(target=probe)
        th.start()
        time.sleep(0.5)
        size, t0 = SIZE_MB << 20, time.monotonic()
        while size > 0:
            size = max(0, size - (step_mb << 20))
            os.ftruncate(fd, size)
            os.fsync(fd)
            if size > 0:
                time.sleep(0.05)
        took = time.monotonic() - t0
        time.sleep(0.5)
        stop.set()
        th.join()
        waits.sort(reverse=True)
        top = ", ".join(f"{w * 1000:.1f}" for w in waits[:5])
        print(f"{step_mb:4d} MB steps: shrinking took {took * 1000:.0f} ms; "
              f"{len(waits)} fdatasync calls, the longest {top} ms")
    finally:
        os.close(fd)
        for p in (path, probe_path):
            if os.path.exists(p):
                os.unlink(p)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    steps = [int(a) for a in sys.argv[2:]] or [SIZE_MB, 64, 16]
    for step in steps:
        run(sys.argv[1], step)


if __name__ == "__main__":
    main()
