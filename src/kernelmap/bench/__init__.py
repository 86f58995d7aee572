"""Bench stage: time kernel-map providers at the default model's shapes and measure read bandwidth.

Input: the kernel maps and bench/shapes.json. Output: a `BenchReport` and rows appended to a
measurements TOML file. It does not check numerics and is never part of a timed test.
"""

from kernelmap.bench.providers import load_providers
from kernelmap.bench.record import default_measurements_path, write_measurements
from kernelmap.bench.runner import BenchReport, BenchResult, measure_bandwidth, run_bench

__all__ = ["BenchReport", "BenchResult", "default_measurements_path", "load_providers",
           "measure_bandwidth", "run_bench", "write_measurements"]
