"""C emission: fill the model template's named holes with straight-line prefill/decode(/batch) bodies.

Input: the resolved, memory-planned graphs of both phases (and optionally the batch phase: one row per
sequence, per-row positions and KV slots), weight offsets, state buffers and input
hashes. Output: the text of `model.c` and `km_kernels.h` (one named prototype per selected kernel,
derived from its map's call_abi; every kernel source is compiled with it force-included, so a map
whose ABI types disagree with its C code, or a unit exporting an undeclared function, fails to build).
Generation is deterministic: no timestamps, sorted tables.

Barriers: every thread runs every op on its share (ith of nth) and a barrier follows an op unless the
next op touches nothing the ops since the last barrier write, and writes nothing they touch (arena
byte ranges from the memory plan, op scratch, KV state buffers; weights are read-only) — see
`barrier_groups`. Ops without a barrier between them compute the same bytes in any interleaving, so
no bit depends on the grouping.

Split ops: an op that streams a large weight (at least SPLIT_MIN_BYTES) and has no scratch runs as KM_SPLIT
pieces (ith = piece, nth = KM_SPLIT) that the threads claim in turn from a counter, so a thread that runs
late (another process on its core, a slower memory channel) leaves no tail: the others take its remaining
pieces. In a phase of at least SPLIT_MIN_ROWS rows (prefill), an op with a weight of at least
SPLIT_GEMM_MIN_BYTES and no scratch (the per-layer GEMMs, milliseconds each) runs as claimed pieces too,
SPLIT_GEMM_COLS output rows of the weight per piece (at most KM_SPLIT pieces), so a register-blocked GEMM
keeps whole panels, or SPLIT_GEMM_COLS_NARROW rows when that would give fewer than SPLIT_GEMM_MIN_PIECES
pieces: a 640-row weight (Gemma 3 270M's ffn_down and attn_output) in 5 pieces left one of 2 threads 3 of
them (those GEMMs scaled 1.56-1.6x at 2 threads on Zen 5, the wider ones 1.72-1.77x); in the other phases
(decode, batch) an op with a weight of at least SPLIT_GEMV_MIN_BYTES runs as pieces of SPLIT_GEMV_COLS
weight rows (Gemma 3 270M's FFN GEMVs: 8 pieces; on the quiet 2-vCPU Xeon decode speed was unchanged within
noise, and a thread descheduled mid-op no longer holds the barrier for its whole half). Every kernel
computes the same bytes for every (ith, nth) (each map's partition-invariance test), so the pieces compute
what the static split did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelmap.circuits.graph import Graph, OpNode, StateBuf
from kernelmap.circuits.hydrate import row_bytes
from kernelmap.codegen.bind import BoundCall, bind_call, c_comment, check_ident, check_label
from kernelmap.errors import CodegenError
from kernelmap.isa_flags import CPU_SUPPORTS
from kernelmap.maps.registry import Registry

__all__ = ["GCC_FEATURES", "HWCAP_FEATURES", "TEMPLATE_DIR", "GGUFCheck", "PhasePlan", "SPLIT_MIN_BYTES", "barrier_groups",
           "cpu_checks", "emit_model", "split_ops", "gguf_checksum", "kernels_header"]

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"

# ISA feature (Linux spelling, as in the maps) -> gcc __builtin_cpu_supports name, from the ISA flag
# table. Allow-list: a feature not listed there cannot be checked at start-up, so the build is refused.
GCC_FEATURES = CPU_SUPPORTS
# aarch64 feature (Linux spelling) -> (getauxval word, <asm/hwcap.h> name, bit). The start-up check
# tests the bits as numbers (the name is a comment), so old kernel headers that lack HWCAP2_I8MM still
# build; tests/aarch64 checks every value against the cross toolchain's <asm/hwcap.h>.
HWCAP_FEATURES = {
    "fp": ("AT_HWCAP", "HWCAP_FP", 0), "asimd": ("AT_HWCAP", "HWCAP_ASIMD", 1),
    "crc32": ("AT_HWCAP", "HWCAP_CRC32", 7), "atomics": ("AT_HWCAP", "HWCAP_ATOMICS", 8),
    "fphp": ("AT_HWCAP", "HWCAP_FPHP", 9), "asimdhp": ("AT_HWCAP", "HWCAP_ASIMDHP", 10),
    "asimdrdm": ("AT_HWCAP", "HWCAP_ASIMDRDM", 12),
    "asimddp": ("AT_HWCAP", "HWCAP_ASIMDDP", 20), "sve": ("AT_HWCAP", "HWCAP_SVE", 22),
    "sve2": ("AT_HWCAP2", "HWCAP2_SVE2", 1), "i8mm": ("AT_HWCAP2", "HWCAP2_I8MM", 13),
    "bf16": ("AT_HWCAP2", "HWCAP2_BF16", 14),
}
_STATE_DTYPES = ("f16", "bf16", "f32", "q8_0")  # element types a KV state buffer may hold (q8_0: blocks of 32)
SPLIT_MIN_BYTES = 16 << 20  # weight bytes from which an op runs as claimed pieces (see split_ops)
SPLIT_PIECES = 256  # pieces of such an op (KM_SPLIT in model.c.in)
SPLIT_MIN_ROWS = 16  # phases of this many rows (prefill) also split their GEMMs ...
SPLIT_GEMM_MIN_BYTES = 256 << 10  # ... of this many weight bytes ...
SPLIT_GEMM_COLS = 128  # ... in pieces of this many weight rows (output columns) ...
SPLIT_GEMM_MIN_PIECES = 8  # ... or of SPLIT_GEMM_COLS_NARROW rows when that gives fewer pieces (see split_ops)
SPLIT_GEMM_COLS_NARROW = 64
SPLIT_GEMV_MIN_BYTES = 512 << 10  # phases of fewer rows (decode, batch) split GEMVs of this many weight bytes ...
SPLIT_GEMV_COLS = 256  # ... in pieces of this many weight rows


@dataclass(frozen=True)
class GGUFCheck:
    """What the generated program checks before it maps the GGUF: its size, and a checksum of its first
    `head` bytes (metadata and tensor records: types, shapes and offsets), see `gguf_checksum`."""

    size: int
    head: int
    checksum: int
    # the byte ranges [start, end) of the file a copying load reads into private memory (4 KiB pages, sorted,
    # disjoint; see gguf_copy_ranges); empty: the whole file
    copy: tuple[tuple[int, int], ...] = ()


PAGE = 4096  # the generated program's copy granularity (one page)


def gguf_copy_ranges(size: int, head: int, dense: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The pages of a `size`-byte GGUF the program copies when it copies weights into private memory: the head
    (metadata and tensor records, `head` bytes) and every (offset, length) in `dense` (tensors some op reads
    whole), widened to whole pages and merged. The other pages stay a file mapping at the same addresses, read
    only where touched: tensors no op reads, those only repacked copies in weights.bin stand for, and tables
    read by rows chosen at run time (access "gather": one embedding row per token), which copied whole would hold
    every row in memory (Gemma's tied 262144 x 640 q8_0 embedding, 178 MB, when its LM head reads a repacked
    copy)."""
    spans = sorted((s // PAGE * PAGE, min(-(-(s + n) // PAGE) * PAGE, -(-size // PAGE) * PAGE))
                   for s, n in [(0, head), *dense] if n > 0)
    merged: list[list[int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


def gguf_checksum(data: Any) -> int:
    """The program's start-up checksum of the GGUF's head bytes: sum over little-endian 64-bit words w_i
    (zero-padded) of w_i * (2i + 1), modulo 2^64 (km_gguf_checksum in model.c computes the same)."""
    import numpy as np

    raw = bytes(data)
    raw += bytes(-len(raw) % 8)
    words = np.frombuffer(raw, dtype="<u8")
    weights = np.arange(len(words), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        return int(np.sum(words * weights, dtype=np.uint64))


def cpu_checks(features: set[str] | frozenset[str]) -> str:
    """The body of the generated start-up check for the selected variants' features: refuse to run
    (one message naming the first missing feature) on a CPU without one. x86 asks the compiler's
    __builtin_cpu_supports, aarch64 the kernel's HWCAP bits (getauxval); a build with features of one
    architecture refuses to compile for the other. No features: portable C, no check."""
    feats = sorted(features)
    if not feats:
        return ""
    arm = [f for f in feats if f in HWCAP_FEATURES]
    x86 = [f for f in feats if f in GCC_FEATURES]
    unknown = [f for f in feats if f not in HWCAP_FEATURES and f not in GCC_FEATURES]
    if unknown or (arm and x86):
        raise CodegenError("selected variants require CPU features the start-up check cannot test together",
                           value=unknown or feats, expected=sorted(GCC_FEATURES) + sorted(HWCAP_FEATURES),
                           hint="one build targets one architecture")
    arch, guard = ("aarch64", "__aarch64__") if arm else ("x86_64", "__x86_64__")
    out = [f"#if !defined({guard})",
           f'#error "this model was generated for {arch} (its kernels need {", ".join(feats)})"',
           "#endif"]

    def refuse(feat: str) -> list[str]:
        return [f'        km_set_err(err, errlen, "this model was compiled for a CPU with {feat}, '
                f'which this CPU does not have", NULL);', "        return -1;", "    }"]

    if arm:
        out.append("    const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);")
        out.append("    (void)hwcap; (void)hwcap2;")
        for feat in feats:
            word, name, bit = HWCAP_FEATURES[feat]
            var = "hwcap" if word == "AT_HWCAP" else "hwcap2"
            out.append(f"    if (!({var} & (1UL << {bit}))) {{ /* {name} */")
            out += refuse(feat)
    else:
        out.append("    __builtin_cpu_init();")
        for feat in feats:
            out.append(f'    if (!__builtin_cpu_supports("{GCC_FEATURES[feat]}")) {{')
            out += refuse(feat)
        if "amx_tile" in feats:  # Linux grants the AMX tile state only on request (arch_prctl, kernel >= 5.16)
            out += ["    {",
                    "        extern long syscall(long number, ...);",
                    "        if (syscall(158 /* SYS_arch_prctl */, 0x1023 /* ARCH_REQ_XCOMP_PERM */,",
                    "                    18 /* XFEATURE_XTILEDATA */) != 0) {",
                    '            km_set_err(err, errlen, "this model was compiled for AMX tiles, but the OS refused '
                    'the tile state (arch_prctl ARCH_REQ_XCOMP_PERM)", NULL);',
                    "            return -1;",
                    "        }",
                    "    }"]
    return "\n".join(out)


@dataclass
class PhasePlan:
    """One phase ready to emit: its graph (resolved) and its arena offsets."""

    graph: Graph
    offsets: dict[str, int]


@dataclass(frozen=True)
class _Access:
    """What one op touches: arena byte ranges it reads and writes, the state buffers it uses; `unknown`
    when a buffer has no planned offset (such an op is never grouped)."""

    reads: tuple[tuple[int, int], ...]
    writes: tuple[tuple[int, int], ...]
    state: frozenset[str]
    unknown: bool


def _tensor_bytes(graph: Graph, name: str) -> int:
    t = graph.tensors[name]
    rows = t.shape[0] if len(t.shape) > 1 else 1
    return int(rows) * row_bytes(t.dtype, int(t.shape[-1]))


def _access(op: Any, graph: Graph, offsets: dict[str, int], scratch: dict[str, int]) -> _Access:
    unknown = False

    def span(name: str, size: int) -> tuple[int, int]:
        nonlocal unknown
        if name not in offsets:
            unknown = True
            return (0, 0)
        return (offsets[name], offsets[name] + max(size, 1))

    reads = tuple(span(t, _tensor_bytes(graph, t)) for t in op.inputs.values())
    writes = [span(t, _tensor_bytes(graph, t)) for t in op.outputs.values()]
    key = f"{op.cname}__scratch_"
    writes += [span(name, size) for name, size in sorted(scratch.items()) if name.startswith(key)]
    return _Access(reads, tuple(writes), frozenset(op.state.values()), unknown)


def _overlap(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> bool:
    return any(x0 < y1 and y0 < x1 for x0, x1 in a for y0, y1 in b)


def _independent(a: _Access, b: _Access) -> bool:
    """True when a and b may run at the same time: neither writes a byte the other reads or writes,
    and they share no state buffer (a KV cache one appends to and another reads)."""
    if a.unknown or b.unknown or a.state & b.state:
        return False
    return not (_overlap(a.writes, b.reads + b.writes) or _overlap(b.writes, a.reads))


def barrier_groups(plan: PhasePlan, registry: Registry) -> list[list[int]]:
    """Split the phase's ops (in order) into runs that need no barrier inside: an op joins the current
    run when it is independent of every op already in it (see `_independent`), else a barrier ends the
    run. Order is never changed; the greedy split is deterministic."""
    from kernelmap.plan.requests import scratch_sizes

    graph = plan.graph
    scratch = scratch_sizes(graph, registry)
    groups: list[list[int]] = []
    members: list[_Access] = []
    for i, op in enumerate(graph.ops):
        acc = _access(op, graph, plan.offsets, scratch)
        if groups and all(_independent(acc, m) for m in members):
            groups[-1].append(i)
            members.append(acc)
        else:
            groups.append([i])
            members = [acc]
    return groups


def split_ops(plan: PhasePlan, registry: Registry) -> dict[int, int]:
    """The ops that run as claimed pieces, by index, with their piece counts: weights of at least
    SPLIT_MIN_BYTES (SPLIT_PIECES pieces); in a phase of at least SPLIT_MIN_ROWS rows weights of at least
    SPLIT_GEMM_MIN_BYTES (one piece per SPLIT_GEMM_COLS weight rows, per SPLIT_GEMM_COLS_NARROW rows when that gives
    fewer than SPLIT_GEMM_MIN_PIECES), in the other phases weights of at least
    SPLIT_GEMV_MIN_BYTES (one piece per SPLIT_GEMV_COLS weight rows), 2 .. SPLIT_PIECES pieces; never an op
    with scratch (its scratch is per thread)."""
    out: dict[int, int] = {}
    for i, op in enumerate(plan.graph.ops):
        if op.provider is None or registry.providers[op.provider].scratch or not op.weights:
            continue
        size = sum((ref.shape[0] if len(ref.shape) > 1 else 1) * row_bytes(ref.dtype, ref.shape[-1])
                   for ref in op.weights.values())
        if size >= SPLIT_MIN_BYTES:
            out[i] = SPLIT_PIECES
        else:
            gemm = plan.graph.max_rows >= SPLIT_MIN_ROWS
            if size < (SPLIT_GEMM_MIN_BYTES if gemm else SPLIT_GEMV_MIN_BYTES):
                continue
            rows = max(ref.shape[0] if len(ref.shape) > 1 else 1 for ref in op.weights.values())
            cols = SPLIT_GEMM_COLS if gemm else SPLIT_GEMV_COLS
            if gemm and rows // cols < SPLIT_GEMM_MIN_PIECES:
                cols = SPLIT_GEMM_COLS_NARROW
            out[i] = min(SPLIT_PIECES, max(2, rows // cols))
    return out


def last_row_ops(graph: Graph, registry: Registry | None = None) -> set[int]:
    """The prefill ops that compute only the prompt's last-row results (its logits): the ops marked rows_last
    and every op that reads only their outputs (transitively), none writing state. km_model_prefill runs
    the body once per KM_MAX_ROWS rows; these ops run in the chunk holding the last row only (the earlier
    chunks' logits were computed and overwritten: a whole LM-head GEMV per extra chunk). An op with state ports
    (the last layer's attention) counts only when `registry` shows its selected provider reading them and
    writing none (an unresolved or unknown op is taken to write)."""
    made: set[str] = set()
    head: set[int] = set()
    for i, op in enumerate(graph.ops):
        reads = list(op.inputs.values())
        if op.state and _writes_state(op, registry):
            continue
        if op.rows_last or (reads and all(t in made for t in reads)):
            head.add(i)
            made.update(op.outputs.values())
    return head


def _writes_state(op: OpNode, registry: Registry | None) -> bool:
    provider = registry.providers.get(op.provider) if registry is not None and op.provider else None
    if provider is None:
        return True
    ports = [*provider.raw.get("inputs", ()), *provider.raw.get("outputs", ())]
    return any(p.get("storage") == "state" and "write" in p.get("access", "write") for p in ports)


def _body(plan: PhasePlan, phase: str, registry: Registry, weight_offsets: dict[str, Any],
          state_index: dict[str, int], protos: dict[str, str]) -> list[str]:
    lines: list[str] = []
    last_of_group = {g[-1] for g in barrier_groups(plan, registry)}
    head = last_row_ops(plan.graph, registry) if phase == "prefill" else set()
    pieces = split_ops(plan, registry)
    claims = {i: k for k, i in enumerate(pieces)}
    for i, op in enumerate(plan.graph.ops):
        if op.provider is None or op.variant is None:
            raise CodegenError("op was not resolved", value=op.label)
        provider = registry.providers[op.provider]
        variant = next(v for v in provider.variants if v.name == op.variant)
        call: BoundCall = bind_call(op, provider.raw, variant.symbol, plan.graph, plan.offsets,
                                    weight_offsets, state_index)
        if protos.setdefault(call.symbol, call.prototype) != call.prototype:
            raise CodegenError("one symbol bound with two prototypes", value=call.symbol)
        tensors = ", ".join(ref.tensor for ref in op.weights.values())
        note = f" weights: {tensors}" if tensors else ""
        lines.append(f"    /* [{i}] {c_comment(op.label)}: {c_comment(op.provider)} ({c_comment(op.variant)}){c_comment(note)} */")
        if i in head:  # the barrier after it stays unconditional: every thread reaches it
            lines.append("    if (m->last_chunk) { /* the prompt's last row only */")
        if i in claims:
            if call.args[-2:] != ("ith", "nth"):
                raise CodegenError("a split op's call does not end with (ith, nth)", value=op.label)
            n = "KM_SPLIT" if pieces[i] == SPLIT_PIECES else str(pieces[i])
            args = ",\n            ".join((*call.args[:-2], "piece_", n))
            lines.append(f"    for (int piece_ = km_claim(m, {claims[i]}); piece_ < {n}; "
                         f"piece_ = km_claim(m, {claims[i]}))")
            lines.append(f"        {call.symbol}(\n            {args});")
        else:
            args = ",\n        ".join(call.args)
            lines.append(f"    {call.symbol}(\n        {args});")
        if i in head:
            lines.append("    }")
        if i in last_of_group:
            lines.append(f"    KM_STEP({phase}, {i});")
        else:
            lines.append(f"    /* no barrier: [{i + 1}] is independent of the ops since the last one */")
    return lines


def emit_model(prefill: PhasePlan, decode: PhasePlan, *, registry: Registry, weight_offsets: dict[str, Any],
               weights_bytes: int, state: list[StateBuf], arena_bytes: int, n_vocab: int, ctx_train: int,
               hashes: dict[str, str], features: set[str], batch: PhasePlan | None = None,
               extra_protos: dict[str, str] | None = None, gguf_check: GGUFCheck | None = None,
               ring: dict[str, tuple[int, int]] | None = None) -> tuple[str, str]:
    """Return (model.c, km_kernels.h). `batch` adds the batched decode entry's body; `extra_protos`
    declares kernels the selected ones call (a batch wrapper's callee) in km_kernels.h. `weight_offsets`
    maps each weight to its offset in weights.bin or to ("G", absolute offset) in the GGUF file;
    `gguf_check` identifies that file (when any weight is there); `ring` gives a state buffer's ring (cells,
    window) (codegen/ring.py; absent: the full context)."""
    state_index = {s.cname: i for i, s in enumerate(state)}
    protos: dict[str, str] = dict(extra_protos or {})
    prefill_body = _body(prefill, "prefill", registry, weight_offsets, state_index, protos)
    decode_body = _body(decode, "decode", registry, weight_offsets, state_index, protos)
    batch_body = _body(batch, "batch", registry, weight_offsets, state_index, protos) if batch else []
    selection = []
    phases = (("prefill", prefill), ("decode", decode), *((("batch", batch),) if batch else ()))
    for phase, plan in phases:
        for op in plan.graph.ops:
            selection.append(f'    {{"{phase}", "{check_label(op.label)}", "{check_ident(op.provider or "")}", '
                             f'"{check_ident(op.variant or "")}"}},')
    for s in state:
        if s.dtype not in _STATE_DTYPES or len(s.shape) != 3 or s.shape[1] != "C":
            raise CodegenError("unsupported state buffer", value=f"{s.cname} {s.dtype} {s.shape}")
    header = ("generated by kernelmap from the inputs below; do not edit.\n * "
              + "\n * ".join(f"{c_comment(k)}: {c_comment(v)}" for k, v in sorted(hashes.items())) + "\n ")
    holes: dict[str, Any] = {
        "HEADER": header,
        "N_STATE": len(state),
        "N_PREFILL_OPS": len(prefill.graph.ops),
        "N_DECODE_OPS": len(decode.graph.ops),
        "N_CLAIMS": max(len(split_ops(p, registry)) for _, p in phases),
        "SPLIT": SPLIT_PIECES,
        "MAX_ROWS": prefill.graph.max_rows,
        "N_VOCAB": n_vocab,
        "CTX_TRAIN": ctx_train,
        "ARENA_BYTES": arena_bytes,
        "WEIGHTS_BYTES": weights_bytes,
        "GGUF_BYTES": gguf_check.size if gguf_check else 0,
        "GGUF_HEAD_BYTES": gguf_check.head if gguf_check else 0,
        "GGUF_CHECKSUM": gguf_check.checksum if gguf_check else 0,
        "GGUF_N_COPY": len(gguf_check.copy) if gguf_check else 0,
        "GGUF_COPY": ", ".join(f"{{UINT64_C({lo}), UINT64_C({hi})}}" for lo, hi in gguf_check.copy)
        if gguf_check and gguf_check.copy else "{0, 0}",
        "SELECTION": "\n".join(selection),
        "STATE_ROW": ", ".join(str(row_bytes(s.dtype, int(s.shape[2]))) for s in state) or "0",
        "STATE_HEADS": ", ".join(str(int(s.shape[0])) for s in state) or "0",
        "STATE_RING": ", ".join(str(int((ring or {}).get(s.cname, (0, 0))[0])) for s in state) or "0",
        "STATE_WINDOW": ", ".join(str(int((ring or {}).get(s.cname, (0, 0))[1])) for s in state) or "0",
        "PREFILL_BODY": "\n".join(prefill_body),
        "DECODE_BODY": "\n".join(decode_body),
        "CPU_CHECKS": cpu_checks(features),
        "PREFILL_TOKENS_OFFSET": f"{prefill.offsets['in_tokens']}u",
        "PREFILL_LOGITS_OFFSET": f"{prefill.offsets[prefill.graph.outputs['logits']]}u",
        "DECODE_TOKENS_OFFSET": f"{decode.offsets['in_tokens']}u",
        "DECODE_LOGITS_OFFSET": f"{decode.offsets[decode.graph.outputs['logits']]}u",
        "N_BATCH_OPS": len(batch.graph.ops) if batch else 0,
        "MAX_BATCH": batch.graph.max_rows if batch else 0,
        "BATCH_BODY": "\n".join(batch_body),
        "BATCH_TOKENS_OFFSET": f"{batch.offsets['in_tokens']}u" if batch else "0u",
        "BATCH_LOGITS_OFFSET": f"{batch.offsets[batch.graph.outputs['logits']]}u" if batch else "0u",
    }
    text = (TEMPLATE_DIR / "model.c.in").read_text()
    for key, value in holes.items():
        text = text.replace(f"@@{key}@@", str(value))
    if "@@" in text:
        raise CodegenError("template hole left unfilled", value=text[text.index("@@"):][:40])
    return text, kernels_header(protos)


def kernels_header(protos: dict[str, str]) -> str:
    """The text of km_kernels.h: one prototype per selected kernel (symbol -> prototype from bind_call)."""
    return ("/* km_kernels.h — generated by kernelmap: prototypes of the selected kernels, from their maps' "
            "call_abi (types and parameter names). Do not edit.\n"
            " * Force-included into every kernel unit, so the compiler checks each definition against its map:\n"
            " * a different parameter type or count is a conflicting-types error, and a unit that exports a\n"
            " * function declared nowhere (a helper or a misnamed kernel) fails -Wmissing-prototypes. Parameter\n"
            " * names and their meaning are checked by `kernelmap maps audit` (the C definitions via gcc). */\n"
            "#ifndef KM_KERNELS_H\n#define KM_KERNELS_H\n#include <stdint.h>\n"
            "#pragma GCC diagnostic error \"-Wmissing-prototypes\"\n\n"
            + "\n".join(protos[s] for s in sorted(protos)) + "\n\n#endif\n")
