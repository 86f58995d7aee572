"""The OpenAI wire format: request bodies -> validated generation requests, results -> response JSON.

Input: the parsed JSON of POST /v1/completions and /v1/chat/completions, the model's tokenizer and
chat template, and the server's limits. Output: a `GenRequest` (token ids, sampling, stops, limits)
or an `APIError` carrying the HTTP status and OpenAI's error object ({message, type, param, code}).
It builds the response and stream-chunk dicts too. It runs no model and holds no state.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelmap.errors import KernelmapError
from kernelmap.runtime.sampler import SamplerConfig

__all__ = ["APIError", "GenRequest", "KNOWN_KEYS", "Limits", "parse_completion", "parse_chat", "completion_response",
           "chat_response", "completion_chunk", "chat_chunk", "usage"]

MAX_STOPS = 4
MAX_REPEAT_PENALTY = 100.0  # a penalty of 100 already rules out every recent token


class APIError(Exception):
    """An error returned to the client: HTTP status plus OpenAI's error object."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


@dataclass(frozen=True)
class Limits:
    """What the server accepts: its model id, context per sequence and default sampling."""

    model_id: str
    n_ctx: int
    top_k: int = 40


@dataclass
class GenRequest:
    """One validated generation: prompt ids, sampling, stop conditions and token budget."""

    kind: str  # "completion" | "chat"
    prompt_ids: list[int]
    max_tokens: int
    sampler: SamplerConfig
    stop_ids: frozenset[int]
    stop_strings: tuple[str, ...]
    stream: bool
    include_usage: bool = False
    created: int = field(default_factory=lambda: int(time.time()))
    id: str = ""


def _number(body: Mapping[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= float(value) <= hi:
        raise bad(f"'{key}' must be a number in [{lo:g}, {hi:g}] (found {value!r})", key)
    return float(value)


def _int(body: Mapping[str, Any], key: str, lo: int, hi: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(f"'{key}' must be an integer (found {value!r})", key)
    if value < lo or (hi is not None and value > hi):
        want = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise bad(f"'{key}' must be {want} (found {value})", key)
    return value


# Every request key each endpoint knows. A key outside its set is refused by name: a parameter this server
# silently ignored (a `response_format` asking for JSON, llama.cpp's `mirostat` or `grammar`, a typo of
# `max_tokens`) would return output the client did not ask for. The official clients send only the keys their
# caller set, so they never trip this. The keys in _NO_EFFECT are accepted because they cannot change the output
# (an end-user id, request metadata, asking to store the completion — this server stores nothing —, parallel
# tool calls without tools); the others below are either implemented or refused by value in _unsupported.
_COMMON_KEYS = frozenset({"model", "stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature",
                          "top_p", "top_k", "min_p", "repeat_penalty", "repeat_last_n", "seed", "stop", "n",
                          "logprobs", "logit_bias", "presence_penalty", "frequency_penalty"})
_NO_EFFECT = frozenset({"user", "metadata", "store", "parallel_tool_calls"})
KNOWN_KEYS = {
    "completion": _COMMON_KEYS | _NO_EFFECT | {"prompt", "echo", "suffix", "best_of"},
    "chat": _COMMON_KEYS | _NO_EFFECT | {"messages", "top_logprobs", "tools", "functions", "tool_choice",
                                         "function_call", "response_format"},
}


def _known(body: Mapping[str, Any], kind: str) -> None:
    for key in body:
        if key not in KNOWN_KEYS[kind]:
            raise bad(f"unrecognized request parameter '{key}' (this server implements: "
                      f"{', '.join(sorted(KNOWN_KEYS[kind] - _NO_EFFECT))})", key, "unknown_parameter")


def _unsupported(body: Mapping[str, Any]) -> None:
    """Refuse parameters whose meaning this server does not implement (never silently ignored)."""
    n = body.get("n", 1)
    if n is not None and (isinstance(n, bool) or n != 1):
        raise bad(f"only n=1 is supported (found {n!r})", "n")
    for key in ("logprobs", "top_logprobs", "echo", "suffix", "tools", "functions", "logit_bias"):
        value = body.get(key)
        if value not in (None, False, 0, [], {}):
            raise bad(f"'{key}' is not supported by this server", key)
    best_of = body.get("best_of")
    if best_of not in (None, 1):
        raise bad("'best_of' is not supported by this server (only 1)", "best_of")
    for key in ("presence_penalty", "frequency_penalty"):
        value = body.get(key)
        if value not in (None, 0, 0.0):
            raise bad(f"'{key}' is not supported by this server (only 0)", key)
    for key in ("tool_choice", "function_call"):  # without tools there is nothing to call: only "none" means that
        value = body.get(key)
        if value not in (None, "none"):
            raise bad(f"'{key}' is not supported by this server (only \"none\": it has no tools)", key)
    fmt = body.get("response_format")
    if fmt is not None and fmt != {"type": "text"}:
        raise bad("'response_format' is not supported by this server (only {\"type\": \"text\"}: output is not "
                  "constrained to JSON)", "response_format")


def _model(body: Mapping[str, Any], limits: Limits) -> None:
    model = body.get("model")
    if model is None:
        return
    if not isinstance(model, str):
        raise bad(f"'model' must be a string (found {model!r})", "model")
    if model != limits.model_id:
        raise APIError(404, f"The model '{model}' does not exist (this server serves '{limits.model_id}')",
                       param="model", code="model_not_found")


def _stops(body: Mapping[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    items = [stop] if isinstance(stop, str) else stop
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise bad("'stop' must be a string or a list of strings", "stop")
    if len(items) > MAX_STOPS:
        raise bad(f"'stop' has {len(items)} sequences (at most {MAX_STOPS})", "stop")
    return tuple(s for s in items if s)


def _sampling(body: Mapping[str, Any], limits: Limits) -> SamplerConfig:
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
    if top_p == 0.0:
        top_p = 1e-9  # keep only the most likely token, as top_p -> 0 does
    top_k = _int(body, "top_k", 0)
    seed = _int(body, "seed", -(2**63), 2**64 - 1)
    if seed is None:
        seed = int.from_bytes(os.urandom(8), "little")
    # llama.cpp's server extensions, the same sampler steps as `kernelmap run --min-p --repeat-penalty`
    min_p = _number(body, "min_p", 0.0, 0.0, 1.0)
    if min_p == 1.0:
        raise bad("'min_p' must be a number in [0, 1) (found 1)", "min_p")
    repeat_penalty = _number(body, "repeat_penalty", 1.0, 0.0, MAX_REPEAT_PENALTY)
    if repeat_penalty == 0.0:
        raise bad(f"'repeat_penalty' must be a number in (0, {MAX_REPEAT_PENALTY:g}] (found 0)", "repeat_penalty")
    last_n = _int(body, "repeat_last_n", -1)  # -1: the whole context, as llama.cpp reads it
    last_n = 64 if last_n is None else limits.n_ctx if last_n == -1 else last_n
    return SamplerConfig(temperature=temperature, top_k=limits.top_k if top_k is None else top_k, top_p=top_p,
                         min_p=min_p, repeat_penalty=repeat_penalty, repeat_last_n=last_n,
                         seed=seed % 2**64).check()


def _budget(body: Mapping[str, Any], n_prompt: int, limits: Limits, default: int | None) -> int:
    if n_prompt > limits.n_ctx:
        raise bad(f"This model's maximum context length is {limits.n_ctx} tokens. However, your prompt is "
                  f"{n_prompt} tokens. Please reduce the length of the prompt.", "messages" if default is None
                  else "prompt", "context_length_exceeded")
    keys = ("max_completion_tokens", "max_tokens")
    given = [k for k in keys if body.get(k) is not None]
    value = _int(body, given[0], 0) if given else None
    if value is None:
        value = default if default is not None else limits.n_ctx
    # generation stops at the end of the context ("length"): the first token comes from the prompt's
    # logits, each further one needs a KV row
    return min(int(value), limits.n_ctx - n_prompt + 1)


def _utf8(text: str, param: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise bad(f"{what} is not valid UTF-8 text: lone surrogate U+{ord(text[exc.start]):04X} at character "
                  f"{exc.start}", param, "invalid_text") from None


def _text(body: Any) -> None:
    """Refuse any string, key or value, that is not Unicode text: JSON's \\ud800 escapes decode to lone
    surrogates, which no tokenizer and no UTF-8 response can carry. The first one in document order is named."""
    stack: list[tuple[Any, str]] = [(body, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            _utf8(value, where, f"'{where}'")
        elif isinstance(value, dict):
            for key in value:
                _utf8(key, where or "body", f"a key of '{where}'" if where else "a key of the body")
            stack.extend(reversed([(v, f"{where}.{k}" if where else k) for k, v in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([(v, f"{where}[{i}]") for i, v in enumerate(value)]))


def _common(body: Any, limits: Limits, kind: str) -> None:
    if not isinstance(body, dict):
        raise bad("the request body must be a JSON object")
    _text(body)
    _known(body, kind)
    _model(body, limits)
    _unsupported(body)
    if not isinstance(body.get("stream", False), bool):
        raise bad("'stream' must be a boolean", "stream")
    if body.get("stream_options") is not None and not body.get("stream", False):
        raise bad("'stream_options' is only allowed when 'stream' is true", "stream_options")


def _include_usage(body: Mapping[str, Any]) -> bool:
    opts = body.get("stream_options")
    if opts is None:
        return False
    if not isinstance(opts, dict):
        raise bad("'stream_options' must be an object", "stream_options")
    return bool(opts.get("include_usage", False))


def parse_completion(body: Any, tokenizer: Any, limits: Limits) -> GenRequest:
    """POST /v1/completions: prompt (a string, or token ids, or a list holding one of them)."""
    _common(body, limits, "completion")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        try:
            ids = tokenizer.encode(prompt)
        except KernelmapError as exc:
            raise bad(f"cannot tokenize the prompt: {exc}", "prompt") from None
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        ids = list(prompt)
        if any(not 0 <= t < tokenizer.n_vocab for t in ids):
            raise bad(f"prompt token ids must be in [0, {tokenizer.n_vocab})", "prompt")
    elif prompt is None:
        raise bad("'prompt' is required", "prompt")
    else:
        raise bad("'prompt' must be a string or a list of token ids (one prompt per request)", "prompt")
    if not ids:
        raise bad("the prompt is empty", "prompt")
    return GenRequest("completion", ids, _budget(body, len(ids), limits, 16), _sampling(body, limits),
                      frozenset(tokenizer.eot_ids), _stops(body), bool(body.get("stream", False)),
                      _include_usage(body), id=f"cmpl-{uuid.uuid4().hex}")


def _content(value: Any, i: int) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for j, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad("only text content parts are supported", f"messages[{i}].content[{j}]")
            parts.append(part["text"])
        return "".join(parts)
    raise bad("message content must be a string or a list of text parts", f"messages[{i}].content")


def parse_chat(body: Any, tokenizer: Any, template: Any, limits: Limits) -> GenRequest:
    """POST /v1/chat/completions: messages rendered with the model's chat template."""
    _common(body, limits, "chat")
    if template is None:
        raise bad("this model has no chat template; use /v1/completions", "messages")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("'messages' must be a non-empty list", "messages")
    msgs: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise bad("each message must be an object with role and content", f"messages[{i}]")
        for key, value in m.items():  # an assistant message sent back as the client returned it carries
            # refusal / tool_calls / audio as null; a value there (a participant name, tool calls) would be lost
            if key not in ("role", "content") and value not in (None, [], {}, ""):
                raise bad(f"message field '{key}' is not supported by this server (only role and content)",
                          f"messages[{i}].{key}")
        role = m.get("role")
        role = "system" if role == "developer" else role
        msgs.append({"role": role, "content": _content(m.get("content"), i)})
    try:
        ids = template.encode(tokenizer, msgs)
    except KernelmapError as exc:
        raise bad(str(exc).splitlines()[0], "messages") from None
    return GenRequest("chat", ids, _budget(body, len(ids), limits, None), _sampling(body, limits),
                      frozenset(template.stop_ids(tokenizer)), _stops(body), bool(body.get("stream", False)),
                      _include_usage(body), id=f"chatcmpl-{uuid.uuid4().hex}")


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion_response(req: GenRequest, model: str, text: str, finish: str, n_out: int) -> dict[str, Any]:
    return {"id": req.id, "object": "text_completion", "created": req.created, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
            "usage": usage(len(req.prompt_ids), n_out)}


def chat_response(req: GenRequest, model: str, text: str, finish: str, n_out: int) -> dict[str, Any]:
    return {"id": req.id, "object": "chat.completion", "created": req.created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                         "finish_reason": finish}],
            "usage": usage(len(req.prompt_ids), n_out)}


def completion_chunk(req: GenRequest, model: str, text: str, finish: str | None,
                     usage_: dict[str, int] | None = None) -> dict[str, Any]:
    choices = [] if usage_ is not None else [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}]
    out = {"id": req.id, "object": "text_completion", "created": req.created, "model": model, "choices": choices}
    if usage_ is not None:
        out["usage"] = usage_
    return out


def chat_chunk(req: GenRequest, model: str, delta: dict[str, str], finish: str | None,
               usage_: dict[str, int] | None = None) -> dict[str, Any]:
    choices = [] if usage_ is not None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    out = {"id": req.id, "object": "chat.completion.chunk", "created": req.created, "model": model,
           "choices": choices}
    if usage_ is not None:
        out["usage"] = usage_
    return out


def stop_prefix_hold(text: str, stops: Sequence[str]) -> int:
    """How many trailing characters of `text` could begin a stop string (held back until decided)."""
    hold = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), hold, -1):
            if text.endswith(s[:k]):
                hold = k
                break
    return hold
