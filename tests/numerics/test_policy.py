"""Tests for numerics policies: the shipped pairings, fail-closed lookups and malformed policy files."""

import json

import pytest

from kernelmap.cli import main
from kernelmap.errors import PolicyError
from kernelmap.numerics import load_policy, policy_names


@pytest.mark.parametrize(("weight", "contract", "act"), [
    ("q4_k", "linear.q4_k.q8_k.ggml.v1", "q8_k"),
    ("q6_k", "linear.q6_k.q8_k.ggml.v1", "q8_k"),
    ("q5_0", "linear.q5_0.q8_0.ggml.v1", "q8_0"),
    ("q8_0", "linear.q8_0.q8_0.ggml.v1", "q8_0"),
    ("q4_0", "linear.q4_0.q8_0.ggml.v1", "q8_0"),
    ("f32", "linear.f32.f32.ggml.v1", "f32"),
])
def test_llama_cpu_linear_pairs_weight_with_activation(weight, contract, act):
    rule = load_policy("llama-cpu").rule_for("linear", weight=weight)
    assert (rule.contract, rule.activation) == (contract, act)


@pytest.mark.parametrize("weight", ["q4_k", "q6_k", "q5_0", "q8_0", "q4_0", "f32"])
def test_kernelmap_fast_linear_uses_kernelmap_orders_with_same_activations(weight):
    fast = load_policy("kernelmap-fast").rule_for("linear", weight=weight)
    exact = load_policy("llama-cpu").rule_for("linear", weight=weight)
    assert fast.contract == f"linear.{weight}.{exact.activation}.f32.v1" and fast.activation == exact.activation


def test_llama_cpu_attention_and_kv_use_f16_cache():
    pol = load_policy()
    assert pol.name == "llama-cpu"
    assert (pol.rule_for("attention").contract, pol.rule_for("attention").kv) == ("attention.f16kv.ggml_fa.v1", "f16")
    assert pol.rule_for("kv_append", cache="k").contract == "kv_append.f16.v1"
    fast = load_policy("kernelmap-fast")
    assert (fast.rule_for("attention").contract, fast.rule_for("attention").kv) == ("attention.f16kv.f32.v1", "f16")


@pytest.mark.parametrize("dtype", ["q8_0", "q4_k", "q6_k", "q5_0", "f16", "f32"])
def test_policies_embedding_contract_follows_table_dtype(dtype):
    for name in ("llama-cpu", "f32-reference"):
        assert load_policy(name).rule_for("embedding", weight=dtype).contract == f"embedding.{dtype}.f32.v1"


@pytest.mark.parametrize(("op", "keys", "contract"), [
    ("rmsnorm", {}, "rmsnorm.f32.v1"), ("qk_norm", {}, "qk_norm.f32.v1"),
    ("rope", {"style": "neox"}, "rope.neox.f32.v1"), ("rope", {"style": "normal"}, "rope.normal.f32.v1"),
    ("geglu", {}, "geglu.tanh.f32.v1"), ("swiglu", {}, "swiglu.f32.ggml.v1"),
    ("residual_add", {}, "residual_add.f32.v1"), ("residual_save", {}, "residual_save.copy.v1"),
    ("argmax", {}, "argmax.f32.v1"), ("quantize_act", {"activation": "q8_k"}, "quantize_act.q8_k.v1"),
    # llama.cpp's x86 q8_0 activation rounding (127/amax, halves to even) is its own contract (commit adc685d)
    ("quantize_act", {"activation": "q8_0"}, "quantize_act.q8_0.rne.v1"),
])
def test_llama_cpu_single_contract_ops(op, keys, contract):
    assert load_policy().rule_for(op, **keys).contract == contract


def test_rule_extra_keys_do_not_prevent_a_match():
    assert load_policy().rule_for("rmsnorm", weight="f32").contract == "rmsnorm.f32.v1"


def test_f32_reference_pairs_and_f32_cache():
    pol = load_policy("f32-reference")
    assert pol.rule_for("linear", weight="q8_0").contract == "linear.q8_0.f32.f32.v1"
    assert pol.rule_for("linear", weight="q8_0").activation == "f32"
    assert pol.rule_for("linear", weight="f32").contract == "linear.f32.f32.f32.v1"
    assert pol.rule_for("attention").kv == "f32"
    assert pol.rule_for("kv_append").contract == "kv_append.f32.v1"


def test_f32_reference_refuses_q4_k_weights_without_fallback():
    pol = load_policy("f32-reference")
    with pytest.raises(PolicyError) as exc:
        pol.rule_for("linear", weight="q4_k")
    text = str(exc.value)
    assert "f32-reference.json" in text and "linear" in text and "weight=q4_k" in text
    assert "no fallback" in text and "weight=q8_0" in text


def test_policy_unknown_op_names_op_and_closest():
    with pytest.raises(PolicyError) as exc:
        load_policy().rule_for("rmsnrom")
    assert "rmsnrom" in str(exc.value) and exc.value.hint == "closest: rmsnorm"


def test_policy_missing_key_is_refused():
    with pytest.raises(PolicyError, match="no rule for op \"rope\" with no keys"):
        load_policy().rule_for("rope")


def test_llama_cpu_kvq8_policy_selects_the_rotated_q8_0_cache_for_k_and_v():
    pol = load_policy("llama-cpu-kvq8")
    assert (pol.rule_for("attention").contract, pol.rule_for("attention").kv) == ("attention.q8_0kv_rot.ggml_fa.v1",
                                                                                  "q8_0")
    assert pol.rule_for("attention_kq").contract == "attention_kq.q8_0kv_rot.ggml_fa.v1"
    assert pol.rule_for("kv_append", cache="k").contract == "kv_append.q8_0.rot_k.v1"
    assert pol.rule_for("kv_append", cache="v").contract == "kv_append.q8_0.rot_v.v1"
    # everything else is llama-cpu's
    assert pol.rule_for("linear", weight="q4_k").contract == load_policy().rule_for("linear", weight="q4_k").contract


def test_llama_cpu_avx2_t2_policy_is_the_avx2_build_on_two_threads_and_keeps_its_scope():
    pol, base = load_policy("llama-cpu-avx2-t2"), load_policy("llama-cpu-avx2")
    assert pol.rule_for("attention").contract == "attention.f16kv.ggml_fa_dot32_split2.v1"
    assert pol.rule_for("attention_kq").contract == "attention_kq.f16kv.ggml_fa_dot32_split2.v1"
    assert pol.rule_for("linear", weight="q5_0").contract == base.rule_for("linear", weight="q5_0").contract
    assert pol.rule_for("linear", weight="q4_0").contract == "linear.q4_0.q8_0.ggml.v1"
    for t in ("f16", "bf16", "f32"):  # the AVX2 build's 8-lane float dots
        assert pol.rule_for("linear", weight=t).contract == f"linear.{t}.{t}.ggml_dot32.v1"
    assert base.rule_for("attention_kq").contract == "attention_kq.f16kv.ggml_fa_dot32.v1"  # its one-thread order
    for p in (pol, base):  # that build never repacks q2_K: its vec_dot order at every N
        assert p.rule_for("linear", weight="q2_k").contract == "linear.q2_k.q8_k.ggml_vecdot.v1"
        assert p.rule_for("swiglu").contract == "swiglu.f32.ggml_exp8.v1"  # that build's 8-lane exp
        assert p.rule_for("moe_router", weight="f32").contract == "moe_router.f32.ggml_dot32.v1"
        with pytest.raises(PolicyError):  # fail-closed: no family fixture has q5_0 experts on that build
            p.rule_for("moe_linear", weight="q5_0")
        with pytest.raises(PolicyError):
            p.rule_for("rope_ff", style="neox")
        for op, weight in (("moe_linear", "f16"), ("embedding", "q5_0")):  # the README's other refusals there
            with pytest.raises(PolicyError, match=f'no rule for op "{op}" with weight={weight}'):
                p.rule_for(op, weight=weight)
    assert load_policy("llama-cpu").rule_for("embedding", weight="q5_0").contract == "embedding.q5_0.f32.v1"


def test_policy_unknown_name_lists_shipped_policies():
    assert policy_names() == ["f32-reference", "kernelmap-fast", "llama-cpu", "llama-cpu-avx2", "llama-cpu-avx2-t2",
                              "llama-cpu-kvq8", "llama-cpu-t2", "llama-cpu-t4"]
    with pytest.raises(PolicyError) as exc:
        load_policy("llama-cpuu")
    assert exc.value.hint == "closest: llama-cpu"


def test_policy_hash_is_sha256_of_bytes():
    import hashlib

    pol = load_policy()
    assert pol.hash == hashlib.sha256(pol.path.read_bytes()).hexdigest()


def _write(tmp_path, rules, **extra):
    doc = {"schema": "kernelmap.numerics_policy/1", "name": "t", "rules": rules, **extra}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("rules", "extra", "fragment", "pointer"), [
    ([{"op": "linear", "match": {}, "contract": "a.v1"}, {"op": "linear", "match": {"weight": "q8_0"},
                                                          "contract": "b.v1"}], {}, "rule overlaps /rules/0",
     "/rules/1"),
    ([{"op": "linear", "match": {"weight": "q8_0"}, "contract": "a.v1"},
      {"op": "linear", "match": {"weight": "q8_0"}, "contract": "b.v1"}], {}, "rule overlaps", "/rules/1"),
    ([{"op": "linear", "match": {}, "contract": "not a contract"}], {}, "malformed contract", "/rules/0/contract"),
    ([{"op": "linear", "match": {}, "contract": "a.v1", "activation": "q8"}], {}, "unknown dtype",
     "/rules/0/activation"),
    ([{"op": "linear", "contract": "a.v1"}], {}, 'missing field "match"', "/rules/0/match"),
    ([], {}, "rules has fewer than 1 items", "/rules"),
    ([{"op": "linear", "match": {}, "contract": "a.v1"}], {"extra": 1}, 'unknown field "extra"', "/extra"),
])
def test_policy_malformed_file_names_pointer(tmp_path, rules, extra, fragment, pointer):
    path = _write(tmp_path, rules, **extra)
    with pytest.raises(PolicyError) as exc:
        load_policy(path)
    assert fragment in exc.value.line() and exc.value.pointer == pointer and exc.value.path == str(path)


def test_policy_ambiguous_match_at_lookup_names_both_rules(tmp_path):
    path = _write(tmp_path, [{"op": "linear", "match": {"weight": "q8_0"}, "contract": "a.v1"},
                             {"op": "linear", "match": {"activation": "f32"}, "contract": "b.v1"}])
    with pytest.raises(PolicyError, match="2 rules match op \"linear\""):
        load_policy(path).rule_for("linear", weight="q8_0", activation="f32")


def test_cli_resolve_bad_policy_file_exits_1_one_line(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text("{\"schema\": \"kernelmap.numerics_policy/1\", \"name\": \"x\", \"rules\": [")
    rc = main(["resolve", "--op", "linear", "--phase", "decode", "--dtype", "weight=q8_0", "--policy", str(path)])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith(f"error: {path}: /: not valid JSON") and "Traceback" not in err


@pytest.mark.parametrize(("name", "n"), [("llama-cpu-t2", 2), ("llama-cpu-t4", 4)])
def test_llama_cpu_tn_is_llama_cpu_with_the_n_thread_attention_split(name, n):
    base, derived = load_policy("llama-cpu"), load_policy(name)
    assert derived.rule_for("attention").contract == f"attention.f16kv.ggml_fa_split{n}.v1"
    assert derived.rule_for("attention").kv == "f16"
    # llama.cpp splits the kq-scaled attention (Llama / Qwen) on n threads too
    assert derived.rule_for("attention_kq").contract == f"attention_kq.f16kv.ggml_fa_split{n}.v1"
    split = ("attention", "attention_kq")
    others = {(r.op, r.match): (r.contract, r.activation, r.kv) for r in base.rules if r.op not in split}
    assert {(r.op, r.match): (r.contract, r.activation, r.kv) for r in derived.rules if r.op not in split} == others
    inherited = derived.rule_for("linear", weight="q8_0")
    assert inherited.pointer.startswith("llama-cpu:/rules/"), inherited.pointer


def test_extends_hash_covers_the_base(tmp_path):
    path = _write(tmp_path, [{"op": "attention", "match": {}, "contract": "a.v1"}], extends="llama-cpu")
    pol = load_policy(path)
    import hashlib

    assert pol.hash != hashlib.sha256(path.read_bytes()).hexdigest()
    assert pol.rule_for("attention").contract == "a.v1" and pol.rule_for("rmsnorm").contract == "rmsnorm.f32.v1"


def test_extends_refuses_a_cycle_and_an_unknown_base(tmp_path):
    path = _write(tmp_path, [{"op": "attention", "match": {}, "contract": "a.v1"}], extends="t")
    with pytest.raises(PolicyError, match="policy extends itself"):
        load_policy(path)
    path = _write(tmp_path, [{"op": "attention", "match": {}, "contract": "a.v1"}], extends="llama-cpuu")
    with pytest.raises(PolicyError) as exc:
        load_policy(path)
    assert exc.value.hint == "closest: llama-cpu"


def test_extends_new_rule_overlapping_an_inherited_one_is_refused(tmp_path):
    path = _write(tmp_path, [{"op": "rope", "match": {}, "contract": "a.v1"}], extends="llama-cpu")
    with pytest.raises(PolicyError, match="rule overlaps llama-cpu:/rules/"):
        load_policy(path)
