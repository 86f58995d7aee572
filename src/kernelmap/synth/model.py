"""Synthetic models, weights part: write a GGUF of a circuit's architecture with seeded random weights.

Input: an architecture and dims (synth/archs.json, synth/dims.json), a tokenizer (synth/vocab.py) and a
seed. Output: an F16 GGUF written with gguf-py's writer (matrices and embeddings f16, norms, biases, the
MoE router and RoPE factors f32), tensor by tensor so a full-size model never sits in memory. The same
inputs give the same bytes. Tensor names and metadata keys are data; nothing here knows a family.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.circuits.expr import evaluate
from kernelmap.errors import ModelError, closest
from kernelmap.synth.vocab import TokenizerKeys

__all__ = ["ARCHS_FILE", "DIMS_FILE", "archs", "named_dims", "presets", "resolve_dims", "write_model"]

ARCHS_FILE = Path(__file__).resolve().parent / "archs.json"
DIMS_FILE = Path(__file__).resolve().parent / "dims.json"
TINY = "tiny"


@functools.cache
def archs() -> dict[str, Any]:
    """Architecture -> what synth writes for it (archs.json)."""
    return json.loads(ARCHS_FILE.read_text(encoding="utf-8"))["archs"]


@functools.cache
def _dims_doc() -> dict[str, Any]:
    return json.loads(DIMS_FILE.read_text(encoding="utf-8"))


def named_dims() -> dict[str, dict[str, Any]]:
    """Dims name -> dims of a real model (dims.json)."""
    return _dims_doc()["dims"]


def presets() -> dict[str, dict[str, Any]]:
    """Preset name (F16, Q8_0, ...) -> {ftype, source?} (dims.json)."""
    return _dims_doc()["presets"]


def resolve_dims(arch: str | None, dims: str) -> tuple[str, dict[str, Any]]:
    """(architecture, dims) for `--arch`/`--dims`: `tiny` needs an architecture; a named model implies one."""
    if dims == TINY:
        if arch not in archs():
            raise ModelError("unknown architecture", pointer="--arch", value=arch, expected=sorted(archs()),
                             hint="--dims tiny needs --arch")
        return arch, {**archs()[arch][TINY], "vocab_name": archs()[arch]["vocab"]}
    table = named_dims()
    if dims not in table:
        near = closest(dims, [*table, TINY])
        raise ModelError("unknown dims", pointer="--dims", value=dims, expected=sorted([*table, TINY]),
                         hint=f"closest: {near}" if near else None)
    spec = dict(table[dims])
    found = spec.pop("arch")
    if arch is not None and arch != found:
        raise ModelError(f"dims {dims} are of another architecture", pointer="--arch", value=arch, expected=found)
    return found, {**spec, "vocab_name": spec.pop("vocab")}


def _rope_freqs(env: Mapping[str, Any], n: int) -> np.ndarray:
    """Llama 3's RoPE frequency factors: 1 for short wavelengths, `rope_factor` for long, smooth between."""
    base, head_dim = float(env["rope_base"]), int(env["head_dim"])
    factor, low, high, orig = (float(env[k]) for k in ("rope_factor", "rope_low", "rope_high", "rope_orig_ctx"))
    out = np.empty(n, np.float32)
    for i in range(n):
        wavelen = 2 * math.pi / base ** (2 * i / head_dim)
        if wavelen < orig / high:
            out[i] = 1.0
        elif wavelen > orig / low:
            out[i] = factor
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out[i] = 1.0 / ((1 - smooth) / factor + smooth)
    return out


def _draw(kind: str, shape: tuple[int, ...], rng: np.random.Generator, env: Mapping[str, Any]) -> np.ndarray:
    """One tensor in numpy order (ne0 last) for GGUF shape `shape` (ne0 first)."""
    np_shape = tuple(reversed(shape))
    normal: Callable[[], np.ndarray] = lambda: rng.standard_normal(np_shape, dtype=np.float32)  # noqa: E731
    if kind == "norm":
        return 1.0 + 0.1 * normal()
    if kind in ("linear", "router"):
        return normal() / np.float32(math.sqrt(shape[0]))
    if kind == "embedding":
        return 0.05 * normal()
    if kind == "bias":
        return 0.5 * normal()
    if kind == "rope_freqs":
        return _rope_freqs(env, shape[0])
    raise ModelError("unknown draw in archs.json", path=ARCHS_FILE, value=kind,
                     expected=["bias", "embedding", "linear", "norm", "rope_freqs", "router"])


_F16_DRAWS = ("linear", "embedding")
_VALUE_TYPES = {"u32": 4, "f32": 6, "bool": 7, "str": 8}


def _plan(arch: str, env: dict[str, Any]) -> list[tuple[str, tuple[int, ...], str]]:
    """(tensor name, GGUF shape, draw) of every tensor, in file order: header tensors, then layer by layer."""
    where = str(ARCHS_FILE)
    rows = []
    specs = archs()[arch]["tensors"]
    shared = [s for s in specs if "{layer}" not in s["name"]]
    per_layer = [s for s in specs if "{layer}" in s["name"]]
    blocks = [(-1, shared)] + [(i, per_layer) for i in range(int(env["n_layers"]))]
    for layer, group in blocks:
        for spec in group:
            if "when" in spec and not evaluate(spec["when"], env, where=where, pointer=spec["name"]):
                continue
            shape = tuple(int(evaluate(d, env, where=where, pointer=spec["name"])) for d in spec["shape"])
            rows.append((spec["name"].replace("{layer}", str(layer)), shape, spec["draw"]))
    return rows


def write_model(path: str | os.PathLike[str], arch: str, dims: dict[str, Any], tokenizer: TokenizerKeys, *,
                seed: int = 0, name: str = "synthetic") -> Path:
    """Write the F16 source model; atomic (temp file + rename)."""
    import gguf

    if arch not in archs():
        raise ModelError("unknown architecture", pointer="--arch", value=arch, expected=sorted(archs()))
    env = {**dims, "vocab": tokenizer.n_vocab}
    env.pop("vocab_name", None)
    out = Path(path)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    rng = np.random.default_rng(seed)
    plan = _plan(arch, env)
    w = gguf.GGUFWriter(str(tmp), arch)
    try:
        w.add_name(name)
        w.add_file_type(int(presets()["F16"]["ftype"]))
        for meta in archs()[arch]["metadata"]:
            key = meta["key"].replace("{arch}", arch)
            if "when" in meta and not evaluate(meta["when"], env):
                continue
            if meta["value"] not in env:
                continue
            value = env[meta["value"]]
            vtype = gguf.GGUFValueType(_VALUE_TYPES[meta["type"]])
            w.add_key_value(key, float(value) if meta["type"] == "f32" else value, vtype)
        for key, value, vtype, etype in tokenizer.rows:
            w.add_key_value(key, value, gguf.GGUFValueType(vtype),
                            sub_type=gguf.GGUFValueType(etype) if etype is not None else None)
        for tname, shape, kind in plan:
            dtype = np.float16 if kind in _F16_DRAWS else np.float32
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            w.add_tensor_info(tname, tuple(reversed(shape)), np.dtype(dtype), nbytes)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for _tname, shape, kind in plan:
            data = _draw(kind, shape, rng, env)
            w.write_tensor_data(data.astype(np.float16 if kind in _F16_DRAWS else np.float32))
        w.close()
        os.replace(tmp, out)
    except OSError as exc:
        w.close()
        tmp.unlink(missing_ok=True)
        raise ModelError(f"cannot write the model: {exc.strerror}", path=out, pointer="-o") from None
    except BaseException:
        w.close()
        tmp.unlink(missing_ok=True)
        raise
    return out
