"""End to end on a tiny synthetic model: compile, run, and check numerics, determinism and safety."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from synth_model import write_synth_model

from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.errors import CircuitError, ModelError
from kernelmap.runtime.model import Model
from kernelmap.target import LEVELS, target_features

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
PROMPT = [2, 270, 271, 272, 273, 274, 275, 276, 277, 300, 301, 302]


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    return {"f32": write_synth_model(d / "f32.gguf"), "q8_0": write_synth_model(d / "q8.gguf", weight_type="q8_0"),
            "dir": d}


@pytest.fixture(scope="module")
def model(synth):
    m = Model(compile_model(synth["f32"], CompileOptions(max_rows=8)), n_ctx=64, threads=2)
    yield m
    m.close()


def test_synth_logits_match_numpy_reference(synth, model):
    from kernelmap.reference.forward import Reference

    ref = Reference(synth["f32"], n_ctx=64)
    expected = ref.forward(PROMPT)[-1]
    got = model.logits(PROMPT)
    np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2e-3)
    assert int(np.argmax(got)) == int(np.argmax(expected))


def test_synth_prefill_equals_prefill_then_decode(model):
    full = model.logits(PROMPT)
    model.reset()
    model.prefill(PROMPT[:5])
    for tok in PROMPT[5:-1]:
        model.decode(tok)
    stepped = model.decode(PROMPT[-1]).copy()
    np.testing.assert_allclose(stepped, full, rtol=1e-5, atol=1e-5)


def test_synth_results_identical_for_one_and_two_threads_and_repeated_runs(synth, model):
    two = [model.logits(PROMPT) for _ in range(3)]
    assert all(np.array_equal(two[0], x) for x in two[1:])
    one = Model(model.compiled, n_ctx=64, threads=1)
    try:
        assert np.array_equal(one.logits(PROMPT), two[0])
    finally:
        one.close()


def _q8_0_logits(synth, policy: str) -> np.ndarray:
    m = Model(compile_model(synth["q8_0"], CompileOptions(max_rows=8, policy=policy)), n_ctx=64, threads=2)
    try:
        return m.logits(PROMPT)
    finally:
        m.close()


def test_synth_q8_0_weights_run_and_match_reference(synth):
    from kernelmap.reference.forward import Reference

    expected = Reference(synth["q8_0"], n_ctx=64).forward(PROMPT)[-1]
    # kernelmap-fast's block-partial order rounds close to the reference's float64 dots: no activation
    # quantization step flips on this model, so the logits agree tightly.
    np.testing.assert_allclose(_q8_0_logits(synth, "kernelmap-fast"), expected, rtol=5e-3, atol=5e-3)
    # The default (llama.cpp's 8-lane order) differs from the float64 dots in the last bit more often; a
    # last-bit difference can move one 8-bit activation code by one step, which shifts these logits by
    # up to ~0.05. The bound is on the mean and the top token, as in `kernelmap parity` tier 2.
    got = _q8_0_logits(synth, "llama-cpu")
    assert float(np.mean(np.abs(got - expected))) <= 0.05
    assert int(np.argmax(got)) == int(np.argmax(expected))


def test_synth_prompt_longer_than_context_is_refused(model):
    with pytest.raises(ModelError, match="longer than the context"):
        model.logits(list(range(2, 80)))


def test_synth_context_beyond_training_is_refused(model):
    with pytest.raises(ModelError, match="context length out of range"):
        Model(model.compiled, n_ctx=100_000)


def test_other_architecture_is_refused(tmp_path):
    import gguf

    w = gguf.GGUFWriter(str(tmp_path / "other.gguf"), "mamba9")
    w.add_block_count(1)
    w.add_tensor("x", np.zeros(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(CircuitError, match="no circuit file"):
        compile_model(tmp_path / "other.gguf")


def _generated_c(gguf: Path, out: Path) -> str:
    isa = frozenset(LEVELS["avx2"]) & target_features()
    compiled = compile_model(gguf, CompileOptions(max_rows=8, isa=isa), out_dir=out)
    return (compiled.build_dir / "gen" / "model.c").read_text()


def test_generated_c_is_deterministic_and_matches_golden(synth, request):
    a = _generated_c(synth["f32"], synth["dir"] / "build_a")
    b = _generated_c(synth["f32"], synth["dir"] / "build_b")
    assert a == b
    golden = GOLDEN / "synth_model.c"
    if request.config.getoption("--update-golden"):
        golden.write_text(a)
    if "avx2" not in target_features():
        pytest.skip("golden file was generated for an avx2 host")
    assert golden.is_file(), "run pytest --update-golden to create tests/golden/synth_model.c"
    assert a == golden.read_text(), "generated C changed: review and run pytest --update-golden"


def test_hostile_metadata_never_reaches_generated_c(tmp_path):
    gguf = write_synth_model(tmp_path / "hostile.gguf", hostile=True, hostile_tensors=False)
    text = _generated_c(gguf, tmp_path / "build")
    for needle in ("evil", "#define x", "system(", "\u00e9", "??/", "int x;", "hostile.key"):
        assert needle not in text
    assert text.isascii()


def test_hostile_tensor_names_are_refused_before_anything_is_written(tmp_path):
    gguf = write_synth_model(tmp_path / "hostile.gguf", hostile=True)
    with pytest.raises(ModelError, match="not read by the gemma3 circuit") as err:
        compile_model(gguf, CompileOptions(max_rows=8), out_dir=tmp_path / "build")
    assert "\n" not in err.value.line() and err.value.line().isascii()
    assert not (tmp_path / "build").exists()


def test_bundle_builds_with_make_and_matches_python_runtime(synth, model, tmp_path):
    from kernelmap.codegen.bundle import write_bundle

    out = write_bundle(model.compiled, tmp_path / "bundle")
    subprocess.run(["make", "-s", "-j2", "-C", str(out)], check=True, capture_output=True, timeout=300)
    ids = " ".join(map(str, PROMPT))
    proc = subprocess.run([str(out / "model"), "-n", "6", "-c", "64", "-t", "2"], input=ids, text=True,
                          capture_output=True, cwd=out, check=True, timeout=60)
    bundle_tokens = [int(t) for t in proc.stdout.split()]
    python_tokens = list(model.stream(PROMPT, 6))
    assert bundle_tokens[: len(python_tokens)] == python_tokens


@pytest.fixture(scope="module")
def driver(model, tmp_path_factory):
    """A bundle of the synthetic model with its driver built (`make model`)."""
    from kernelmap.codegen.bundle import write_bundle

    out = write_bundle(model.compiled, tmp_path_factory.mktemp("driver") / "bundle")
    subprocess.run(["make", "-s", "-j2", "-C", str(out), "model"], check=True, capture_output=True, timeout=300)
    return out


@pytest.mark.parametrize("args,stdin,message", [
    (["-t", "0"], "2 3", 'error: -t: not an integer in 1..512 (found "0")'),
    (["-t", "100000"], "2 3", 'error: -t: not an integer in 1..512 (found "100000")'),
    (["-c", "12abc"], "2 3", 'error: -c: not an integer in 1..2147483647 (found "12abc")'),
    (["-n", "-2"], "2 3", 'error: -n: not an integer in -1..2147483647 (found "-2")'),
    ([], "2 3 x 4", 'error: stdin: token id 3 is not an integer (found "x")'),
    ([], "2 -3", "error: stdin: token id 2 out of range (found -3; expected 0..2147483647)"),
    ([], "", "error: stdin: no token ids"),
    (["-c", "257"], "2 3", "error: weights.bin: context length out of range (found 257; expected 1..256, the trained "
                           "context)"),
], ids=["threads-0", "threads-huge", "ctx-text", "n-negative", "stdin-text", "stdin-negative", "stdin-empty",
        "ctx-over-trained"])
def test_bundle_driver_refuses_bad_options_and_input_in_one_line(driver, args, stdin, message):
    """The standalone driver (templates/main.c) fails closed: an option that is not an integer in its range, and
    stdin text that is not a token id, exit 1 with one line and print nothing (a stray word used to end the
    prompt silently, the ids before it run as if they were all of it)."""
    proc = subprocess.run([str(driver / "model"), "-c", "64", *args], input=stdin, text=True, capture_output=True,
                          cwd=driver, timeout=60)
    assert (proc.returncode, proc.stderr.strip(), proc.stdout) == (1, message, "")


def test_bundle_driver_default_context_fits_a_model_trained_for_less_than_4096(driver):
    """Without -c the driver takes 4096 or the model's trained context when that is shorter (the synthetic model's
    256): it used to ask for 4096 and refuse every such model unless -c was given."""
    ids = " ".join(map(str, PROMPT))
    plain = subprocess.run([str(driver / "model"), "-n", "4"], input=ids, text=True, capture_output=True, cwd=driver,
                           timeout=60)
    assert plain.returncode == 0, plain.stderr
    full = subprocess.run([str(driver / "model"), "-n", "4", "-c", "256"], input=ids, text=True, capture_output=True,
                          cwd=driver, timeout=60)
    assert plain.stdout == full.stdout and len(plain.stdout.split()) == 4


def test_bundle_driver_n_minus_one_decodes_until_the_context_is_full(driver):
    """-n -1 (llama.cpp's "infinity"): greedy ids until the context is full: with -c 16 and a 4-token prompt,
    13 ids (the last sampled from position 15's logits), the first of them those of a plain -n run."""
    ids = " ".join(map(str, PROMPT[:4]))
    proc = subprocess.run([str(driver / "model"), "-n", "-1", "-c", "16"], input=ids, text=True, capture_output=True,
                          cwd=driver, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = proc.stdout.split()
    assert len(got) == 16 - 4 + 1
    few = subprocess.run([str(driver / "model"), "-n", "5", "-c", "16"], input=ids, text=True, capture_output=True,
                         cwd=driver, timeout=60)
    assert few.stdout.split() == got[:5]


def test_profiled_bundle_keeps_its_per_op_timers(synth, tmp_path):
    """`kernelmap compile --profile -o DIR`: the bundle's Makefile builds model.c with KM_PROFILE as the compiler did
    (it had dropped it, so the bundle's km_model_profile read zeros); an unprofiled bundle's does not."""
    import ctypes

    from kernelmap.codegen.bundle import _makefile, write_bundle

    assert "-DKM_PROFILE" not in _makefile([("kernels/linear/a_avx2.c", ["-mavx2"])], "x86_64")
    compiled = compile_model(synth["f32"], CompileOptions(max_rows=8, profile=True))
    out = write_bundle(compiled, tmp_path / "bundle")
    subprocess.run(["make", "-s", "-j2", "-C", str(out), "libkmmodel.so"], check=True, capture_output=True,
                   timeout=300)
    lib = ctypes.CDLL(str(out / "libkmmodel.so"))
    assert lib.km_model_profiling() == 1
    lib.km_model_create.restype = ctypes.c_void_p
    lib.km_model_create.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int, ctypes.c_char_p,
                                    ctypes.c_size_t]
    lib.km_model_decode.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64]
    lib.km_model_profile.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_int]
    lib.km_model_free.argtypes = [ctypes.c_void_p]
    err = ctypes.create_string_buffer(256)
    gguf = out / "model.gguf"
    m = lib.km_model_create(str(out / "weights.bin").encode(), str(gguf).encode() if gguf.exists() else None, 16, 1,
                            err, len(err))
    assert m, err.value
    try:
        for pos in range(3):
            assert lib.km_model_decode(m, PROMPT[pos], pos) == 0
        buf = (ctypes.c_double * 4096)()
        n = lib.km_model_profile(m, 1, buf, len(buf))
        assert 0 < n <= len(buf) and sum(buf[:n]) > 0.0
    finally:
        lib.km_model_free(m)


def test_compile_cli_unwritable_output_is_one_line_error(synth, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env = {**os.environ}
    proc = subprocess.run([sys.executable, "-m", "kernelmap", "compile", "-m", str(synth["f32"]), "-o",
                           str(blocker / "sub"), "-q"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2


def test_synth_kv_cache_larger_than_available_memory_is_refused_before_allocating(model, monkeypatch):
    import kernelmap.runtime.model as runtime_model

    monkeypatch.setattr(runtime_model, "_mem_available", lambda: 1024)
    with pytest.raises(ModelError, match="not enough memory"):
        Model(model.compiled, n_ctx=64)


def test_bundle_copies_headers_reached_by_relative_includes():
    """A kernel unit may include another directory's header by a relative path (fused/geglu_quantize_body.h includes
    ../geglu/geglu_body.h, which includes gelu_table.h beside it): the bundle follows quoted includes transitively,
    beside the including file first, then in kernels/common, as the compiler does."""
    from kernelmap.build.driver import KERNEL_ROOT
    from kernelmap.codegen.bundle import _quoted_includes

    root = KERNEL_ROOT.resolve()
    got = {p.relative_to(root).as_posix() for p in _quoted_includes(KERNEL_ROOT / "fused/geglu_quantize_q8_k_neon.c")}
    assert {"fused/geglu_quantize_body.h", "geglu/geglu_body.h", "geglu/gelu_table.h", "common/km_lanes_neon.h",
            "common/km_actquant.h"} <= got, got
    assert not any(name.endswith("km_kernels.h") for name in got)  # generated, not part of the kernel tree
