"""The aarch64 kernel suite's machinery: every map variant run on aarch64 (qemu-aarch64) and x86_64 on the same bytes.

Data-driven from the kernel maps: for a map it builds one driver program (kernel_driver.c plus call
trampolines generated from the map's call_abi by kernelmap.bench.runner.trampoline_source) holding
the ref and the map's aarch64 variants, cross-compiled with aarch64-linux-gnu-gcc and run under
`qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu <model>`, and the same driver with the ref only, built
and run natively on x86_64. Inputs come from the bench workload generator of the map's interface
(kernelmap.bench.workload, the inputs `kernelmap bench` and the LKB promotion check use; q8
activations made legal by kernelmap.lkb.promote.legal_activations): the smallest bench shape that
fits the map, the same shape with every dim grown to a ragged value, at several row counts. Each
call runs ith = 0 .. nth-1 over buffers at odd offsets from a 64-byte boundary, guarded on both sides.
It decides nothing about what a kernel should compute: the tests compare outputs.
"""

from __future__ import annotations

import math
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.bench.providers import BenchVariant
from kernelmap.bench.runner import _slots, trampoline_source
from kernelmap.bench.workload import bench_cases, evaluate, make_workload, weight_data
from kernelmap.build.driver import BASE_CFLAGS, KERNEL_ROOT
from kernelmap.lkb.promote import legal_activations
from kernelmap.target import arch_of, cross_compiler

DRIVER_C = Path(__file__).with_name("kernel_driver.c")
MAPS_DIR = KERNEL_ROOT.parent / "kernel_maps"
SYSROOT = Path("/usr/aarch64-linux-gnu")
# qemu CPU models, cheapest first, with the aarch64 features (Linux spelling) each reports; a variant
# runs on the first model that has its requires ("max": every extension qemu emulates, incl. SVE).
QEMU_CPUS: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("cortex-a53", frozenset({"fp", "asimd"})),  # Armv8.0-A: no dotprod, the baseline neon variants' CPU
    ("max", None),
)
ROWS = (1, 2, 3, 5, 16, 17)   # activation rows M: tile tails of every prefill schedule, decode (1)
NTHS = (1, 2, 3)              # partitions: every ith of each nth, in order
DIM_CAP = 4096                # bench dims are model-sized; capped like the LKB promotion check
_POINTER_KINDS = ("output", "activation", "weight", "weight_opt", "state", "scratch")
_MAGIC = 0x3130305652444D4B   # "KMDRV001"


@dataclass(frozen=True)
class Toolchain:
    cc: str
    qemu: str
    sysroot: Path


def find_toolchain() -> Toolchain | str:
    """The cross gcc and qemu-aarch64 (with the arm64 libc as sysroot), or why they are unavailable."""
    cc = os.environ.get("KERNELMAP_AARCH64_CC") or cross_compiler("aarch64")
    missing = [name for name in (cc, "qemu-aarch64") if shutil.which(name) is None]
    if not (SYSROOT / "lib").is_dir():
        missing.append(f"{SYSROOT} (libc6-dev-arm64-cross)")
    if missing:
        return ("aarch64 toolchain missing: " + ", ".join(missing) + " (`make test` installs gcc-aarch64-linux-gnu, "
                "libc6-dev-arm64-cross and qemu-user when run as root)")
    return Toolchain(cc, shutil.which("qemu-aarch64") or "qemu-aarch64", SYSROOT)


def read_maps() -> dict[str, dict[str, Any]]:
    import json

    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(MAPS_DIR.glob("*.json"))
            if not p.stem.isupper()}


def arch_variants(raw: dict[str, Any], arch: str) -> list[dict[str, Any]]:
    """The map's variants whose requires are features of `arch` (file order)."""
    return [v for v in raw["variants"] if arch_of(v.get("requires", ())) == arch]


def qemu_cpu(requires: Sequence[str]) -> str:
    """The cheapest qemu CPU model that reports every feature in `requires`."""
    for name, feats in QEMU_CPUS:
        if feats is None or set(requires) <= feats:
            return name
    raise AssertionError(f"no qemu CPU model has {sorted(requires)}")


# ---- inputs -------------------------------------------------------------------------------------

@dataclass
class Case:
    """One input set: a label, the workload (dims, buffers by port name) and its slot encoding."""

    label: str
    rows: int
    work: Any
    names: list[str] = field(default_factory=list)   # buffer order in the input file
    slots: list[tuple[int, int]] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


def _capped(case: dict[str, Any]) -> dict[str, Any]:
    return {**case, "dims": {k: min(int(v), DIM_CAP) for k, v in case.get("dims", {}).items()}}


def _fits(raw: dict[str, Any], entry: dict[str, Any], case: dict[str, Any]) -> bool:
    return all(not isinstance(make_workload(raw, entry, case, r, weights={}), str) for r in ROWS)


def _odd(v: int) -> int:
    return v | 1


def _ragged(raw: dict[str, Any], entry: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """The case with each dim, one at a time, shrunk to about half and made ragged (odd, or an odd count of
    the dim's `multiple`), where the map's constraints still hold; otherwise the dim is kept."""
    out = {**case, "dims": dict(case["dims"]), "label": case.get("label", "") + " ragged"}
    rules = raw.get("constraints", {}) or {}
    for name in sorted(out["dims"]):
        v = out["dims"][name]
        tries = [_odd(v // 2 + 1)]
        for kind, arg in sorted(rules.get(name, {}).items()):
            if kind == "multiple":
                try:
                    m = int(evaluate(arg, out["dims"]))
                except (KeyError, ValueError, ZeroDivisionError):
                    continue
                if m > 0:
                    tries.append(m * _odd((v // m) // 2 + 1))
        for value in tries:
            trial = {**out, "dims": {**out["dims"], name: min(value, DIM_CAP)}}
            if _fits(raw, entry, trial):
                out = trial
                break
    return out


def _rounded(raw: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """The case with each dim that has a `multiple` constraint rounded up to that multiple (an interface's
    bench shapes are model shapes; a map may need, e.g., D a multiple of 256 where the model has 640)."""
    dims = dict(case["dims"])
    for name, rule in sorted((raw.get("constraints", {}) or {}).items()):
        if name in dims and "multiple" in rule:
            try:
                m = int(evaluate(rule["multiple"], dims))
            except (KeyError, ValueError, ZeroDivisionError):
                continue
            if m > 0:
                dims[name] = -(-dims[name] // m) * m
    return {**case, "dims": dims}


def shapes(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The smallest bench shape of the map's interface that fits it (dims capped; multiples rounded up
    where no shape fits as it is), and its ragged form."""
    entry, cases = bench_cases(raw["interface"])
    fitting = [c for c in map(_capped, cases) if _fits(raw, entry, c)]
    if not fitting:
        fitting = [c for c in (_rounded(raw, _capped(c)) for c in cases) if _fits(raw, entry, c)]
    if not fitting:
        return []
    small = min(fitting, key=lambda c: (math.prod(c["dims"].values()), c.get("label", "")))
    out = [small]
    rag = _ragged(raw, entry, small)
    if rag["dims"] != small["dims"]:
        out.append(rag)
    return out


def cases(raw: dict[str, Any], seed: int = 5) -> list[Case]:
    """Every input set of the map: shapes() x ROWS, buffers filled by the bench workload generator."""
    entry, _ = bench_cases(raw["interface"])
    out = []
    params = raw["call_abi"]["params"]
    for i, shape in enumerate(shapes(raw)):
        weights = weight_data(raw, {"M": 1, **shape["dims"]}, seed=seed + 100 * i)  # one copy for all rows
        for rows in ROWS:
            work = make_workload(raw, entry, shape, rows, weights=weights, seed=seed + 100 * i + rows)
            assert not isinstance(work, str), work
            legal_activations(raw, work)
            names = sorted(work.buffers)
            index = {n: k for k, n in enumerate(names)}
            values = _slots(raw, work)
            slots = []
            for j, p in enumerate(params):
                kind, _, name = p["source"].partition(":")
                if kind in _POINTER_KINDS:
                    slots.append((1, index[name]) if name in index else (2, 0))
                else:
                    slots.append((0, int(values[j])))
            written = sorted({p["name"] for key in ("inputs", "outputs", "state") for p in raw.get(key, []) or []
                              if p.get("access") in ("write", "read_write")})
            out.append(Case(f"{shape.get('label', '?')} dims={dict(sorted(work.dims.items()))}", rows, work,
                            names, slots, written))
    return out


# ---- build and run ------------------------------------------------------------------------------

def _bench_variants(variants: Sequence[dict[str, Any]]) -> list[BenchVariant]:
    return [BenchVariant(v["name"], v["symbol"], v["source"], tuple(v.get("requires", ())),
                         tuple(v.get("cflags", ())), int(v.get("priority", 0))) for v in variants]


def driver_source(raw: dict[str, Any], variants: Sequence[dict[str, Any]]) -> str:
    """Trampolines for `variants` plus the function table kernel_driver.c calls through."""
    text = trampoline_source(raw, _bench_variants(variants))
    table = ", ".join(f"km_bench_t{i}" for i in range(len(variants)))
    return (text + "typedef void (*km_driver_fn)(const uint64_t *s, int ith, int nth);\n"
            f"extern const km_driver_fn km_driver_fns[];\nextern const int km_driver_nfns;\n"
            f"const km_driver_fn km_driver_fns[] = {{{table}}};\nconst int km_driver_nfns = {len(variants)};\n")


def build_driver(raw: dict[str, Any], variants: Sequence[dict[str, Any]], cc: str, out: Path) -> Path:
    """Compile the driver for `variants` of one map with `cc` (each source with its variant's cflags)."""
    out.mkdir(parents=True, exist_ok=True)
    gen = out / "trampolines.c"
    gen.write_text(driver_source(raw, variants))
    units = {v["source"]: tuple(v.get("cflags", ())) for v in variants}
    jobs = [(KERNEL_ROOT / src, flags) for src, flags in sorted(units.items())] + [(gen, ()), (DRIVER_C, ())]
    objs, procs = [], []
    for i, (src, flags) in enumerate(jobs):
        obj = out / f"u{i}.o"
        objs.append(str(obj))
        cmd = [cc, *BASE_CFLAGS, *flags, f"-I{KERNEL_ROOT / 'common'}", "-c", str(src), "-o", str(obj)]
        procs.append((cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    for cmd, proc in procs:
        text, _ = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise AssertionError(f"{raw['id']}: compile failed: {' '.join(cmd)}\n{text[-3000:]}")
    exe = out / "driver"
    link = subprocess.run([cc, "-o", str(exe), *objs, "-lm", "-lpthread"], capture_output=True, text=True)
    if link.returncode != 0:
        raise AssertionError(f"{raw['id']}: link failed: {link.stderr[-2000:]}")
    return exe


@dataclass(frozen=True)
class Call:
    case: int      # index into the case list
    fn: int        # index into the driver's variants
    nth: int


def write_input(path: Path, case_list: Sequence[Case], calls: Sequence[Call]) -> None:
    """The driver input: the buffers of every case used (offsets odd mod 64), then the calls."""
    used = sorted({c.case for c in calls})
    index: dict[tuple[int, str], int] = {}   # (case, port) -> buffer number in the file
    shared: dict[int, int] = {}              # read-only buffers shared by cases (weights) are written once
    blobs: list[bytes] = []
    for i in used:
        case = case_list[i]
        for j, name in enumerate(case.names):
            arr = case.work.buffers[name]
            if name not in case.outputs and id(arr) in shared:
                index[(i, name)] = shared[id(arr)]
                continue
            data = np.ascontiguousarray(arr).view(np.uint8).reshape(-1).tobytes()
            blobs.append(struct.pack("<QQ", len(data), (2 + 36 * j) % 64) + data + b"\0" * (-len(data) % 8))
            index[(i, name)] = len(blobs) - 1
            if name not in case.outputs:
                shared[id(arr)] = len(blobs) - 1
    words: list[bytes] = [struct.pack("<QQ", _MAGIC, len(blobs)), *blobs, struct.pack("<Q", len(calls))]
    for call in calls:
        case = case_list[call.case]
        words.append(struct.pack("<QQQ", call.fn, call.nth, len(case.slots)))
        for kind, value in case.slots:
            words.append(struct.pack("<QQ", kind, index[(call.case, case.names[value])] if kind == 1 else value))
        outs = [index[(call.case, n)] for n in case.outputs]
        words.append(struct.pack("<Q", len(outs)) + b"".join(struct.pack("<Q", o) for o in outs))
    path.write_bytes(b"".join(words))


def run_driver(exe: Path, case_list: Sequence[Case], calls: Sequence[Call], *, qemu: Toolchain | None = None,
               cpu: str = "max", timeout: float = 600) -> list[dict[str, bytes]]:
    """Run the calls (natively, or under qemu-aarch64 -cpu `cpu`); per call, the bytes of each written port."""
    with tempfile.TemporaryDirectory(prefix="km-a64-") as tmp:
        src, dst = Path(tmp) / "in.bin", Path(tmp) / "out.bin"
        write_input(src, case_list, calls)
        cmd = [str(exe), str(src), str(dst)]
        if qemu is not None:
            cmd = [qemu.qemu, "-L", str(qemu.sysroot), "-cpu", cpu, *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd[:6])}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
        blob = dst.read_bytes()
    out, pos = [], 0
    for call in calls:
        case = case_list[call.case]
        got = {}
        for name in case.outputs:
            size = case.work.buffers[name].nbytes
            got[name] = blob[pos:pos + size]
            pos += size
        out.append(got)
    if pos != len(blob):
        raise AssertionError(f"{exe}: output has {len(blob)} bytes, expected {pos}")
    return out


def first_mismatches(want: bytes, got: bytes, dtype: str, show: int = 6) -> str:
    """The first differing elements (as the port dtype when it is a float type, else bytes)."""
    kind = {"f32": np.float32, "f16": np.float16}.get(dtype, np.uint8)
    a = np.frombuffer(want[: len(want) - len(want) % np.dtype(kind).itemsize], kind)
    b = np.frombuffer(got[: len(got) - len(got) % np.dtype(kind).itemsize], kind)
    bits = np.dtype(f"u{np.dtype(kind).itemsize}")
    bad = np.flatnonzero(a.view(bits) != b.view(bits))
    items = ", ".join(f"[{int(i)}] {a[i]!r} vs {b[i]!r}" for i in bad[:show])
    return f"{bad.size} of {a.size} {dtype if kind is not np.uint8 else 'bytes'} differ; first: {items}"
