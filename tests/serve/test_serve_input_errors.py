"""Request bodies that used to crash the server (HTTP 500 with a traceback in its log) are 400s naming the field:
strings that are not Unicode text (JSON's lone-surrogate escapes) and JSON nested too deeply. Also the serving
options checked before compiling (grace) and the context default that fits the model."""

from __future__ import annotations

import math

import httpx
import pytest

from kernelmap.compiler import CompileOptions
from kernelmap.errors import ModelError
from kernelmap.serve import ServeOptions, build_state
from kernelmap.serve.server import check_options

PARALLEL = 4  # as conftest.py's `live` server: the same build is reused
COMPILE = CompileOptions(max_rows=8)


def _post(live, path: str, body: str) -> httpx.Response:
    return httpx.post(f"{live.url}{path}", content=body.encode(), timeout=30,
                      headers={"content-type": "application/json"})


def _healthy(live) -> None:
    r = httpx.get(f"{live.url}/health", timeout=10)
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    out = live.client().completions.create(model="synth", prompt="the cat", max_tokens=2, temperature=0)
    assert out.usage.completion_tokens == 2


@pytest.mark.parametrize("path, body, param", [
    ("/v1/completions", r'{"prompt": "\ud800"}', "prompt"),
    ("/v1/completions", r'{"prompt": ["the \udcff"], "max_tokens": 2}', "prompt[0]"),
    ("/v1/completions", r'{"model": "x\ud800", "prompt": "the cat"}', "model"),
    ("/v1/chat/completions", r'{"messages": [{"role": "user", "content": "ok"}, '
                             r'{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}]}',
     "messages[1].content[0].text"),
], ids=["prompt", "prompt-list", "model", "chat-part"])
def test_serve_lone_surrogate_is_a_400_naming_the_field(live, path, body, param):
    r = _post(live, path, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert (err["param"], err["code"], err["type"]) == (param, "invalid_text", "invalid_request_error")
    at = 4 if param == "prompt[0]" else 1 if param == "model" else 0
    code = {"prompt": "D800", "prompt[0]": "DCFF", "model": "D800"}.get(param, "DFFF")
    assert err["message"] == f"'{param}' is not valid UTF-8 text: lone surrogate U+{code} at character {at}"
    _healthy(live)


def test_serve_lone_surrogate_in_a_key_is_a_400(live):
    r = _post(live, "/v1/completions", r'{"prompt": "the cat", "\ud800": 1}')
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "body"
    assert err["message"] == "a key of the body is not valid UTF-8 text: lone surrogate U+D800 at character 0"


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_serve_deeply_nested_json_is_a_400(live, path):
    r = _post(live, path, '{"prompt": ' + "[" * 2000 + "]" * 2000 + "}")
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_json"
    assert err["message"] == ("We could not parse the JSON body of your request (nested too deeply: 2001 levels, "
                              "at most 200)")
    _healthy(live)


@pytest.mark.parametrize("grace", [math.nan, math.inf, -1.0])
def test_serve_options_refuse_a_grace_that_is_not_a_finite_number_of_seconds(grace):
    with pytest.raises(ModelError) as info:
        check_options(ServeOptions(grace=grace))
    assert info.value.pointer == "--grace"
    assert info.value.expected == "0..86400 seconds"


def test_serve_default_context_fits_a_model_trained_for_less(live, synth_gguf):
    state = build_state(synth_gguf, ServeOptions(parallel=PARALLEL, ctx=None, threads=1, compile=COMPILE))
    try:
        assert state.limits.n_ctx == state.engine.model.n_ctx == 256  # the synthetic model's trained context
    finally:
        state.engine.close()
