"""`kernelmap serve -ctk q8_0 -ctv q8_0`: the server on a q8_0 KV cache (policy llama-cpu-kvq8, whose batch phase
runs the q8_0 rows wrappers). Concurrent greedy requests are batched and give the text they give alone; the
row-level bit identity with the decode path is tests/e2e/test_kv_ring_model.py's."""

from __future__ import annotations

import concurrent.futures

import pytest
from live_server import start
from synth_model import write_synth_model

from kernelmap.cli.run_cmd import cache_policy
from kernelmap.compiler import CompileOptions

PROMPTS = ["the cat sat", "a dog", "the mat is on the", "cat dog mat"]


@pytest.fixture(scope="module")
def live_q8(tmp_path_factory):
    from kernelmap.serve import ServeOptions, build_state

    gguf = write_synth_model(tmp_path_factory.mktemp("serve_q8") / "synth.gguf", head_dim=64)
    policy = cache_policy(None, "q8_0", "q8_0")  # what the CLI flags pick
    state = build_state(gguf, ServeOptions(parallel=4, ctx=64, threads=2,
                                           compile=CompileOptions(policy=policy, max_rows=8)))
    server = start(state)
    yield server
    server.stop()


def _complete(live, prompt: str) -> tuple[str, int]:
    out = live.client().completions.create(model="synth", prompt=prompt, max_tokens=12, temperature=0)
    return out.choices[0].text, out.usage.completion_tokens


def test_serve_q8_0_cache_batches_requests_that_give_the_text_they_give_alone(live_q8):
    assert live_q8.state.engine.model.info["policy"] == "llama-cpu-kvq8"
    alone = [_complete(live_q8, p) for p in PROMPTS]
    assert all(n == 12 for _, n in alone)
    before = live_q8.state.metrics.decode_rows.collect()[0].samples
    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS) * 2) as pool:
        together = list(pool.map(lambda p: _complete(live_q8, p), PROMPTS * 2))
    assert together == alone * 2
    after = live_q8.state.metrics.decode_rows.collect()[0].samples

    def count(samples, le=None):  # decode steps (of a single row, with le="1.0")
        if le is None:
            return next(s.value for s in samples if s.name.endswith("_count"))
        return next(s.value for s in samples if s.name.endswith("_bucket") and s.labels["le"] == le)

    assert count(after, "1.0") - count(before, "1.0") < count(after) - count(before), "no step ran two rows"
