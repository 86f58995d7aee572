"""The runtime on the synthetic model: thread counts never change bits, the default thread count is the
physical cores, and tensors mapped from the GGUF are checked against the file the build was made from."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from synth_model import write_synth_model

from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.errors import ModelError
from kernelmap.runtime.model import Model
from kernelmap.runtime.topology import physical_cores

PROMPT = [2, *range(270, 290)]  # 21 tokens: three prefill chunks of at most 8 rows


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("runtime_synth")
    return {"f32": write_synth_model(d / "f32.gguf"), "q8_0": write_synth_model(d / "q8.gguf", weight_type="q8_0"),
            "q4_0": write_synth_model(d / "q4.gguf", weight_type="q4_0"), "dir": d}


def _trajectory(compiled, threads: int) -> list[np.ndarray]:
    """Logits of a chunked prefill and of 6 decode steps (greedy), all copied."""
    m = Model(compiled, n_ctx=64, threads=threads)
    try:
        out = [m.prefill(PROMPT).copy()]
        for _ in range(6):
            out.append(m.decode(int(np.argmax(out[-1]))).copy())
        return out
    finally:
        m.close()


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_synth_logits_bitwise_identical_for_1_2_3_4_threads(synth, weights):
    compiled = compile_model(synth[weights], CompileOptions(max_rows=8))
    base = _trajectory(compiled, 1)
    for threads in (2, 3, 4):
        got = _trajectory(compiled, threads)
        for step, (a, b) in enumerate(zip(base, got, strict=True)):
            diff = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
            assert diff.size == 0, (f"{weights}: {threads} threads differ from 1 at step {step} (0 = prefill), "
                                    f"first logits {diff[:5].tolist()}: {a[diff[:5]]} vs {b[diff[:5]]}")


def test_model_default_threads_are_the_physical_cores(synth):
    m = Model(compile_model(synth["f32"], CompileOptions(max_rows=8)), n_ctx=32)
    try:
        assert m.threads == physical_cores() >= 1
    finally:
        m.close()


def test_model_maps_tensors_from_the_gguf_it_is_given_now(synth, tmp_path):
    """A cached build found through another copy of the same file maps that copy (the first may be gone)."""
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    shutil.copyfile(synth["q8_0"], a)
    shutil.copyfile(synth["q8_0"], b)
    first = compile_model(a, CompileOptions(max_rows=8))
    assert first.info["weights"]["mapped_from_gguf"] > 0
    want = _trajectory(first, 2)
    a.unlink()
    second = compile_model(b, CompileOptions(max_rows=8))
    assert second.build_dir == first.build_dir and second.gguf == b
    for x, y in zip(want, _trajectory(second, 2), strict=True):
        assert np.array_equal(x, y)


def test_weights_copied_to_huge_pages_or_mapped_give_the_same_bits(synth, monkeypatch):
    """KERNELMAP_WEIGHTS=copy reads each weight file into huge-page memory, =map maps it: same logits either way,
    and the model says which it got (q4_0: repacked weights in weights.bin and tensors read from the model file)."""
    compiled = compile_model(synth["q4_0"], CompileOptions(max_rows=8))
    assert compiled.info["weights"]["packed_bytes"] > 0 and compiled.info["weights"]["mapped_from_gguf"] > 0
    runs = {}
    for mode, want in (("map", "file mapping"), ("copy", "huge-page copy")):
        monkeypatch.setenv("KERNELMAP_WEIGHTS", mode)
        m = Model(compiled, n_ctx=64, threads=2)
        try:
            assert m.weights_memory == {"weights.bin": want, "model file": want}
        finally:
            m.close()
        runs[mode] = _trajectory(compiled, 2)
    for step, (a, b) in enumerate(zip(runs["map"], runs["copy"], strict=True)):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), f"step {step} differs"


def test_copying_load_reads_only_the_gguf_pages_some_op_reads_whole(synth, monkeypatch):
    """The copy (KERNELMAP_WEIGHTS=copy) holds the GGUF head and the tensors some op reads whole; a table only an
    embedding reads (access "gather") and tensors only their repacked copies stand for stay the file's mapping:
    their pages are in no copied range, and the logits are those of the plain mapping."""
    from kernelmap.gguf import open_gguf
    from kernelmap.weights import load_manifest

    compiled = compile_model(synth["q8_0"], CompileOptions(max_rows=8))
    text = (compiled.build_dir / "gen" / "model.c").read_text()
    table = re.search(r"km_gguf_copy\[\]\[2\] = \{(.*)\};", text).group(1)
    ranges = [(int(a), int(b)) for a, b in re.findall(r"\{UINT64_C\((\d+)\), UINT64_C\((\d+)\)\}", table)]
    gguf = open_gguf(synth["q8_0"])
    assert ranges and ranges[0][0] == 0 and ranges[0][1] >= gguf.data_offset
    assert all(a % 4096 == 0 and b % 4096 == 0 and a < b for a, b in ranges)
    assert all(b < c for (_, b), (c, _) in zip(ranges, ranges[1:], strict=False)), "ranges overlap or touch unmerged"

    def copied(start: int, size: int) -> bool:
        return all(any(a <= p < b for a, b in ranges) for p in (start, start + size - 1))

    entries = load_manifest(compiled.build_dir / "weights.json").entries
    mapped = {e.tensor for e in entries if e.file == "gguf"}
    embd = gguf.tensors["token_embd.weight"]
    # the synthetic model's q8_0 linears read their 16-row copies; its embedding rows come from the GGUF
    assert "token_embd.weight" in mapped and any(e.layout == "q8_0_c16" for e in entries)
    assert not any(a < embd.offset + embd.n_bytes - 4096 and embd.offset + 4096 <= b for a, b in ranges), (
        "the gathered embedding table was copied")
    for e in entries:
        if e.file == "gguf" and e.tensor != "token_embd.weight":
            assert copied(e.offset, e.size), f"{e.name} is read whole but not copied"
    runs = {}
    for mode in ("map", "copy"):
        monkeypatch.setenv("KERNELMAP_WEIGHTS", mode)
        runs[mode] = _trajectory(compiled, 2)
    for step, (a, b) in enumerate(zip(runs["map"], runs["copy"], strict=True)):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), f"step {step} differs"


@pytest.mark.parametrize("mode", ["map", "copy"])
def test_model_refuses_a_truncated_model_file_whichever_way_it_is_read(synth, tmp_path, monkeypatch, mode):
    monkeypatch.setenv("KERNELMAP_WEIGHTS", mode)
    compiled = compile_model(synth["q8_0"], CompileOptions(max_rows=8))
    short = tmp_path / "short.gguf"
    short.write_bytes(synth["q8_0"].read_bytes()[:-64])
    from dataclasses import replace

    with pytest.raises(ModelError, match="cannot map the model file: wrong size"):
        Model(replace(compiled, gguf=short), n_ctx=32, threads=1)


def test_an_unknown_weights_memory_mode_is_refused_by_name(synth, monkeypatch):
    monkeypatch.setenv("KERNELMAP_WEIGHTS", "hugepages")
    compiled = compile_model(synth["q4_0"], CompileOptions(max_rows=8))
    with pytest.raises(ModelError, match="KERNELMAP_WEIGHTS") as exc:
        Model(compiled, n_ctx=32, threads=1)
    assert "hugepages" in str(exc.value) and "map or copy" in str(exc.value)
    # the generated program refuses it on its own too (the standalone CLI has no Python in front of it)
    import ctypes

    from kernelmap.runtime.model import _Lib

    lib = _Lib(compiled.library).lib
    err = ctypes.create_string_buffer(512)
    handle = lib.km_model_create(str(compiled.weights).encode(), str(compiled.gguf).encode(), 32, 1, err, len(err))
    assert not handle and err.value.decode() == "KERNELMAP_WEIGHTS must be map or copy: hugepages"


def test_model_refuses_a_gguf_whose_head_differs_from_the_one_it_was_built_from(synth, tmp_path):
    compiled = compile_model(synth["q8_0"], CompileOptions(max_rows=8))
    data = bytearray(synth["q8_0"].read_bytes())
    at = bytes(data).index(b"synthetic")
    data[at:at + 9] = b"synthetiX"  # same size, other metadata
    other = tmp_path / "other.gguf"
    other.write_bytes(bytes(data))
    from dataclasses import replace

    with pytest.raises(ModelError, match="not the one this program was built from"):
        Model(replace(compiled, gguf=other), n_ctx=32, threads=1)
    other.write_bytes(bytes(data[:-64]))
    with pytest.raises(ModelError, match="cannot map the model file: wrong size"):
        Model(replace(compiled, gguf=other), n_ctx=32, threads=1)


def test_physical_cores_counts_each_core_once_over_its_smt_siblings(tmp_path):
    # 6 CPUs: package 0 cores 0 and 1 with two threads each, package 1 core 0 with two threads
    layout = {0: (0, 0), 1: (0, 1), 2: (0, 0), 3: (0, 1), 4: (1, 0), 5: (1, 0)}
    for cpu, (package, core) in layout.items():
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{package}\n")
        (topo / "core_id").write_text(f"{core}\n")
    assert physical_cores(range(6), sysfs=tmp_path) == 3
    assert physical_cores([0, 2], sysfs=tmp_path) == 1  # the two threads of one core
    assert physical_cores([0, 1, 4], sysfs=tmp_path) == 3
    assert physical_cores([0, 7], sysfs=tmp_path) == 2  # no topology for cpu7: count CPUs


def test_chunked_prefill_runs_the_logits_ops_in_the_last_chunk_only(synth):
    """A prompt longer than max_rows runs the prefill body once per chunk; the last layer's query path, its
    attention (it reads the KV cache and writes none of it), the ops after it, the final norm, its quantize and the
    LM head (the prompt's last row only) are guarded by last_chunk in the generated C, so the earlier chunks skip
    them; the last-row query's rope and attention run at the chunk's last position (pos + n_tokens - 1); and the
    last row's logits equal a one-chunk build's bit for bit (no output depends on M)."""
    chunked = compile_model(synth["q8_0"], CompileOptions(max_rows=8))
    whole = compile_model(synth["q8_0"], CompileOptions(max_rows=32))
    source = (chunked.build_dir / "gen" / "model.c").read_text(encoding="utf-8")
    prefill_body = source[source.index("static void km_prefill_body"):source.index("static void km_decode_body")]
    guarded = re.findall(r"/\* \[\d+\] ([^:]+):[^\n]*\*/\n    if \(m->last_chunk\) \{", prefill_body)
    # the synthetic model has 2 layers: layer 1's query path, attention and the ops after it compute only the last
    # row (rows_when), fused as in every build (q norm + rope, the residual + norm pairs and the GEGLU with their
    # quantizers), then the footer; K and V (every row's, for the cache) are not guarded
    assert guarded == ["blk.1.attn_q", "blk.1.q_norm.blk1_q_rope", "blk.1.attn", "blk.1.attn.quantize_q8_0",
                       "blk.1.attn_out", "blk.1.post_attn_norm", "blk.1.attn_residual.blk1_ffn_norm.quant_h_3_q8_0",
                       "blk.1.ffn_gate", "blk.1.ffn_up", "blk.1.ffn_act.quant_gu_1_q8_0", "blk.1.ffn_down",
                       "blk.1.post_ffn_norm", "blk.1.ffn_residual.op_final_norm.quant_xf_0_q8_0", "logits"], guarded
    assert not any(label.startswith("blk.0.") for label in guarded)
    calls = {label: call for label, call in re.findall(r"/\* \[\d+\] ([^:]+):[^\n]*\*/\n(.*?);\n", prefill_body, re.S)}
    for label in ("blk.1.q_norm.blk1_q_rope", "blk.1.attn"):
        assert "(pos + n_tokens - 1)" in calls[label], calls[label]
    for label in ("blk.0.attn", "blk.1.k_norm.blk1_k_rope"):
        assert "(pos + n_tokens - 1)" not in calls[label] and "pos," in calls[label], calls[label]
    assert "last_chunk" not in source[source.index("static void km_decode_body"):source.index("int km_model_prefill")]
    logits = []
    for compiled in (chunked, whole):
        m = Model(compiled, n_ctx=64, threads=2)
        try:
            logits.append(m.prefill(PROMPT).copy())
        finally:
            m.close()
    diff = np.flatnonzero(logits[0].view(np.uint32) != logits[1].view(np.uint32))
    assert diff.size == 0, f"3 chunks of 8 rows vs 1 of 32 differ at logits {diff[:5].tolist()}"


@pytest.mark.parametrize("weight_type", ["q5_1", "q4_1"])
def test_last_row_ops_read_q8_1_activations_at_the_last_row(synth, weight_type):
    """q4_1 / q5_1 projections read Q8_1 activations (36-byte blocks: f16 d, f16 s, 32 quants); a last-row op reads
    its input at the last row's offset, which must use that size (gguf-py's table says 40: with it, the last layer's
    q projection of Gemma 3 Q5_K_M read the wrong row). The prompt's logits of a 3-chunk build equal those of a
    one-chunk build and of a build where every op computes every row (a plain full prefill, then the last row)."""
    gguf_path = write_synth_model(synth["dir"] / f"{weight_type}.gguf", weight_type=weight_type)
    chunked = compile_model(gguf_path, CompileOptions(max_rows=8))
    whole = compile_model(gguf_path, CompileOptions(max_rows=32))
    assert any(prov.startswith(f"linear_{weight_type}_q8_1") for ph, label, prov, *_ in chunked.info["selection"]
               if label == "blk.1.attn_q")
    got = []
    for compiled in (chunked, whole):
        m = Model(compiled, n_ctx=64, threads=2)
        try:
            got.append(m.prefill(PROMPT).copy())
            m.reset()
            m.prefill(PROMPT[:-1])
            got.append(m.decode(PROMPT[-1]).copy())  # the last row alone, through the decode body
        finally:
            m.close()
    for i, other in enumerate(got[1:], 1):
        diff = np.flatnonzero(got[0].view(np.uint32) != other.view(np.uint32))
        assert diff.size == 0, f"logits {i} differ from the 3-chunk prefill's at {diff[:5].tolist()}"


def _counting_lib(freed: list[int]):
    """Model's _Lib with the library's km_model_free calls recorded in `freed`."""
    from kernelmap.runtime.model import _Lib

    class Counting(_Lib):
        def __init__(self, path):
            super().__init__(path)
            real = self.lib.km_model_free

            def free(handle):
                freed.append(handle.value)
                real(handle)

            self.lib.km_model_free = free

    return Counting


def test_a_tokenizer_failure_frees_the_model_created_beside_it(synth, monkeypatch):
    """Model() creates the C model on a thread while it builds the tokenizer: a tokenizer error is raised after the
    C call, and the model it created is freed; a model the C side refuses is named first (its error is the more
    specific one: the file does not match the build)."""
    from dataclasses import replace

    from kernelmap.errors import TokenizerError
    from kernelmap.runtime import model as runtime_model

    compiled = compile_model(synth["q8_0"], CompileOptions(max_rows=8))
    freed: list[int] = []
    monkeypatch.setattr(runtime_model, "_Lib", _counting_lib(freed))

    def broken(self):
        raise TokenizerError("no vocabulary", path="x.gguf")

    monkeypatch.setattr(runtime_model.Model, "_make_tokenizer", broken)
    with pytest.raises(TokenizerError, match="no vocabulary"):
        Model(compiled, n_ctx=32, threads=1)
    assert len(freed) == 1 and freed[0]
    short = synth["dir"] / "short_tok.gguf"
    short.write_bytes(synth["q8_0"].read_bytes()[:-64])
    with pytest.raises(ModelError, match="cannot map the model file: wrong size"):
        Model(replace(compiled, gguf=short), n_ctx=32, threads=1)
    assert len(freed) == 1
