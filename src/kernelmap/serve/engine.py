"""The scheduler: one thread owns the model and runs up to N sequences at once in its KV slots.

Input: validated `GenRequest`s from the HTTP layer (any thread or event loop). Output: per request, a
stream of events (text pieces, then one finish with usage, or an error) delivered to the caller's
event loop. Each loop turn admits waiting requests into free slots (prefill, first token from the
prompt's logits), then advances every active sequence by one token with ONE batched decode call
(`Model.decode_batch`: per-row positions and slots), samples each row with the request's own sampler,
and frees the slot of every sequence that finished or was cancelled at once. A sequence's tokens do not
depend on what else runs (the batch rows are bit-identical with decoding alone). It does not parse
HTTP (protocol.py) nor serve it (app.py).
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from kernelmap.runtime.sampler import Sampler
from kernelmap.serve.protocol import APIError, GenRequest, stop_prefix_hold
from kernelmap.tokenizer import StreamDecoder

__all__ = ["Engine", "Event", "Handle"]


@dataclass(frozen=True)
class Event:
    """What a request's consumer receives: kind "text" (text), "done" (finish, prompt/completion
    token counts) or "error" (error: an APIError)."""

    kind: str
    text: str = ""
    finish: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: APIError | None = None


class Handle:
    """The consumer's side of one request: `events()` yields Events; `cancel()` frees its slot."""

    def __init__(self, engine: Engine, req: GenRequest, loop: asyncio.AbstractEventLoop) -> None:
        self._engine = engine
        self.req = req
        self._loop = loop
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self.cancelled = False
        self.finished = False
        self.submitted = time.perf_counter()
        self.first_token: float | None = None

    def _put(self, event: Event) -> None:  # engine thread
        if event.kind != "text":
            self.finished = True
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)
        except RuntimeError:  # the consumer's loop is closed: nobody is listening
            self.cancelled = True

    async def events(self) -> AsyncIterator[Event]:
        """Events until (and including) the finish or error."""
        while True:
            event = await self._queue.get()
            yield event
            if event.kind != "text":
                return

    def cancel(self) -> None:
        """The client went away: the engine drops the request (frees its slot) at its next turn."""
        if not self.finished:
            self.cancelled = True
            self._engine._wake()


@dataclass
class _Seq:
    handle: Handle
    slot: int
    sampler: Sampler
    decoder: StreamDecoder
    pos: int = 0
    last: int = 0
    n_out: int = 0
    held: str = ""  # text not yet sent: could be the start of a stop string
    history: list[int] = field(default_factory=list)


class Engine:
    """Owns a loaded `Model` (compiled with batch rows >= parallel) and its scheduler thread."""

    def __init__(self, model: Any, *, parallel: int, queue_size: int = 64, metrics: Any = None) -> None:
        if model.max_batch < parallel:
            from kernelmap.errors import ModelError

            raise ModelError("the model was compiled for fewer batch rows than --parallel", pointer="--parallel",
                             value=parallel, expected=f"at most {model.max_batch}",
                             hint="compile with CompileOptions(batch_rows=N) (kernelmap serve does)")
        self.model = model
        self.parallel = parallel
        self.queue_size = queue_size
        self.metrics = metrics
        model.set_slots(parallel)
        self._waiting: collections.deque[Handle] = collections.deque()
        self._active: dict[int, _Seq] = {}
        self._free = list(range(parallel))[::-1]
        self._cond = threading.Condition()
        self._stopping = False  # no new requests
        self._deadline: float | None = None  # active sequences end (told) after this time
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="kernelmap-engine", daemon=True)
        self._thread.start()

    # ---- the consumer side (event-loop threads) ----

    def submit(self, req: GenRequest) -> Handle:
        """Queue a request; APIError 503 when the queue is full or the server is shutting down."""
        handle = Handle(self, req, asyncio.get_running_loop())
        with self._cond:
            if self._stopping or self._closed:
                raise APIError(503, "the server is shutting down", type="server_error", code="shutting_down")
            if len(self._waiting) >= self.queue_size:
                raise APIError(503, f"the server is busy: {len(self._waiting)} requests are waiting (queue full)",
                               type="server_error", code="queue_full")
            self._waiting.append(handle)
            self._gauge()
            self._cond.notify()
        return handle

    def stats(self) -> dict[str, int]:
        with self._cond:
            return {"active": len(self._active), "waiting": len(self._waiting), "slots": self.parallel}

    def begin_shutdown(self, grace: float) -> None:
        """Stop taking requests; tell the waiting ones; let the active ones run for `grace` seconds."""
        with self._cond:
            self._stopping = True
            self._deadline = time.monotonic() + grace
            self._tell_waiting()
            self._cond.notify()

    def _tell_waiting(self) -> None:  # holding self._cond
        while self._waiting:
            self._waiting.popleft()._put(Event("error", error=APIError(
                503, "the server is shutting down", type="server_error", code="shutting_down")))
        self._gauge()

    def idle(self) -> bool:
        with self._cond:
            return not self._active and not self._waiting

    def close(self) -> None:
        """End the scheduler thread (after telling anything left) and free the model."""
        with self._cond:
            self._stopping = True
            self._closed = True
            self._deadline = time.monotonic()
            self._tell_waiting()  # else the scheduler would wait for them forever (nothing admits them now)
            self._cond.notify()
        self._thread.join()
        self.model.close()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def _gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.queue_depth.set(len(self._waiting))
            self.metrics.active.set(len(self._active))

    # ---- the scheduler thread ----

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._active and not self._closed:
                    self._cond.wait()
                if self._closed and not self._active and not self._waiting:
                    return
                expired = self._deadline is not None and time.monotonic() >= self._deadline
                admit: list[tuple[Handle, int]] = []
                while self._waiting and self._free and not self._stopping:
                    handle = self._waiting.popleft()
                    if handle.cancelled:
                        self._count_cancel()
                        continue
                    admit.append((handle, self._free.pop()))
                self._gauge()
            try:
                if expired:
                    for seq in list(self._active.values()):
                        self._finish(seq, error=APIError(503, "the server shut down before this request finished",
                                                         type="server_error", code="shutting_down"))
                    continue
                for handle, slot in admit:
                    self._start(handle, slot)
                self._drop_cancelled()
                if self._active:
                    self._step()
            except Exception as exc:  # noqa: BLE001 - a model failure ends every request, not the thread
                for seq in list(self._active.values()):
                    self._finish(seq, error=APIError(500, f"internal error: {exc}", type="server_error"))

    def _count_cancel(self) -> None:
        if self.metrics is not None:
            self.metrics.cancelled.inc()

    def _drop_cancelled(self) -> None:
        for seq in list(self._active.values()):
            if seq.handle.cancelled:
                self._count_cancel()
                self._release(seq)

    def _release(self, seq: _Seq) -> None:
        with self._cond:
            self._active.pop(seq.slot, None)
            self._free.append(seq.slot)
            self._gauge()

    def _start(self, handle: Handle, slot: int) -> None:
        req = handle.req
        seq = _Seq(handle, slot, Sampler(req.sampler), StreamDecoder(self.model.tokenizer),
                   history=list(req.prompt_ids))
        t0 = time.perf_counter()
        logits = self.model.prefill_slot(slot, req.prompt_ids, 0)
        dt = time.perf_counter() - t0
        if self.metrics is not None:
            self.metrics.prompt_tokens.inc(len(req.prompt_ids))
            self.metrics.prefill_tps.set(len(req.prompt_ids) / dt if dt > 0 else 0.0)
        seq.pos = len(req.prompt_ids)
        with self._cond:
            self._active[slot] = seq
            self._gauge()
        if req.max_tokens == 0:
            self._finish(seq, "length")
            return
        self._accept(seq, seq.sampler.sample(logits, seq.history))

    def _step(self) -> None:
        seqs = sorted(self._active.values(), key=lambda s: s.slot)
        t0 = time.perf_counter()
        logits = self.model.decode_batch([s.last for s in seqs], [s.slot for s in seqs], [s.pos for s in seqs])
        dt = time.perf_counter() - t0
        if self.metrics is not None:
            self.metrics.decode_tps.set(len(seqs) / dt if dt > 0 else 0.0)
            self.metrics.decode_rows.observe(len(seqs))
        for r, seq in enumerate(seqs):
            seq.pos += 1
            self._accept(seq, seq.sampler.sample(logits[r], seq.history))

    def _accept(self, seq: _Seq, tok: int) -> None:
        """One sampled token: stop token, text (held back while it could start a stop string), budget."""
        handle, req = seq.handle, seq.handle.req
        if handle.first_token is None:
            handle.first_token = time.perf_counter()
            if self.metrics is not None:
                self.metrics.ttft.observe(handle.first_token - handle.submitted)
        if tok in req.stop_ids:
            self._finish(seq, "stop")
            return
        seq.history.append(tok)
        seq.last = tok
        seq.n_out += 1
        if self.metrics is not None:
            self.metrics.generated_tokens.inc()
        seq.held += seq.decoder.push(tok)
        if self._emit(seq, final=False):
            return
        if seq.n_out >= req.max_tokens or seq.pos >= self.model.n_ctx:
            seq.held += seq.decoder.flush()
            if not self._emit(seq, final=True):
                self._finish(seq, "length")

    def _emit(self, seq: _Seq, *, final: bool) -> bool:
        """Send what is decided of the held text; True (and finish "stop") when a stop string appeared."""
        stops = seq.handle.req.stop_strings
        hits = [(seq.held.find(s), s) for s in stops if s in seq.held]
        if hits:
            at = min(hits)[0]
            if at:
                seq.handle._put(Event("text", text=seq.held[:at]))
            seq.held = ""
            self._finish(seq, "stop")
            return True
        keep = 0 if final else stop_prefix_hold(seq.held, stops)
        out, seq.held = seq.held[:len(seq.held) - keep], seq.held[len(seq.held) - keep:]
        if out:
            seq.handle._put(Event("text", text=out))
        return False

    def _finish(self, seq: _Seq, finish: str = "", *, error: APIError | None = None) -> None:
        if error is not None:
            seq.handle._put(Event("error", error=error))
        else:
            if seq.held:
                seq.handle._put(Event("text", text=seq.held))
                seq.held = ""
            seq.handle._put(Event("done", finish=finish, prompt_tokens=len(seq.handle.req.prompt_ids),
                                  completion_tokens=seq.n_out))
        self._release(seq)
