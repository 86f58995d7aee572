"""Print this machine's streaming-read bandwidth (GB/s, 1e9 bytes/s) for 1 and 2 threads, as JSON.

The figure is the ceiling `kernelmap bench` divides by: an AVX2 (or scalar) read of a buffer far
larger than the last-level cache, timed by the bench's C pthread harness (median of several passes).
Usage: .venv/bin/python benchmarks/bandwidth.py [--mib 512] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import json

from kernelmap.bench import measure_bandwidth
from kernelmap.bench.record import machine_name
from kernelmap.target import host_class


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="buffer size in MiB (default 512)")
    parser.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    args = parser.parse_args()
    threads = tuple(int(t) for t in args.threads.split(",") if t.strip())
    bw = measure_bandwidth(threads, args.mib << 20)
    print(json.dumps({"machine": machine_name(), "class": host_class(), "buffer_mib": args.mib,
                      "read_gbps": {str(k): round(v, 2) for k, v in sorted(bw.items())}}))


if __name__ == "__main__":
    main()
