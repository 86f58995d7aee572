"""Reference forward pass: GGUF file + token ids -> logits, in NumPy, with a KV cache for step-by-step decode.

The layer structure comes from `recipes.json` (looked up by the GGUF's general.architecture, checked
against llama.cpp's graph builder); the sizes come from the GGUF metadata; every op is a function of
`kernelmap.reference.ops`. This is a test oracle: it holds dequantized float64 weights (about 2 GB
for a 270M-parameter model), runs on one thread of NumPy, and does not plan memory or pick kernels.

Per layer, the recipe's flags select this sequence (x is the residual stream, f32 [M, d]):
  h = rmsnorm(x, attn_norm); q, k, v = linear(h, Wq|Wk|Wv); q, k = qk_norm then rope (the recipe's
  mode; sliding layers use the recipe's swa rope base, full layers the GGUF base); append k, v to the
  cache; a = attention(q, cache, scale, window if sliding else 0); x = x + rmsnorm(linear(a, Wo),
  post_attention_norm); h = rmsnorm(x, ffn_norm); x = x + rmsnorm(linear(act(h Wg) * (h Wu), Wd),
  post_ffn_norm). Layer i is sliding when i % swa_pattern < swa_pattern - 1. Input rows are the
  embedding rows times the recipe's embedding scale; logits = linear(rmsnorm(x, output_norm), output),
  the output matrix being the token embedding when the file has no separate output tensor.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.errors import GGUFError, ModelError
from kernelmap.reference import ops

__all__ = ["Numerics", "POLICIES", "Reference", "load_recipe", "numerics_from_policy", "policy_numerics"]

_RECIPES = Path(__file__).with_name("recipes.json")


@dataclass(frozen=True)
class Numerics:
    """The contract choices the reference applies (each one names a kernel contract's decision)."""

    q8_0_rule: str = "x86"  # activation quantizer rounding, see ops.quantize_q8_0
    gelu_rule: str = "f16_table"  # llama.cpp's "f16_table" or the "exact" float32 tanh GELU
    rope_theta_rule: str = "ggml"  # iterated float32 angles (ggml) or "exact"
    kv_dtype: str = "f16"  # KV cache storage
    attn_q_f16: bool = False  # round q to f16 before q.k (llama.cpp's non-flash path does)
    attn_p_f16: bool = False  # round softmax probabilities to f16 before p.v (likewise)
    activations: tuple[tuple[str, str], ...] = tuple(sorted(ops.ACTIVATION_FOR_WEIGHT.items()))  # weight -> act


# What each kernel contract decides for the reference (contract name -> Numerics field, value).
_CONTRACT_CHOICES: dict[str, tuple[str, Any]] = {
    "quantize_act.q8_0.v1": ("q8_0_rule", "ref"),
    "quantize_act.q8_0.rne.v1": ("q8_0_rule", "x86"),
    "attention.f16kv.f32.v1": ("kv_dtype", "f16"),
    "attention.f32kv.f32.v1": ("kv_dtype", "f32"),
    "geglu.tanh.f32.v1": ("gelu_rule", "f16_table"),
}
_POLICY_DIR = Path(__file__).resolve().parents[1] / "numerics" / "policies"


def numerics_from_policy(path: Path) -> Numerics:
    """The reference choices a numerics policy file implies (its linear pairings and named contracts)."""
    try:
        rules = json.loads(path.read_text(encoding="utf-8"))["rules"]
    except (OSError, ValueError, KeyError) as exc:
        raise ModelError(f"cannot read numerics policy: {exc}", path=path, pointer="/rules") from exc
    fields: dict[str, Any] = {}
    acts: dict[str, str] = {}
    for i, rule in enumerate(rules):
        choice = _CONTRACT_CHOICES.get(rule.get("contract", ""))
        if choice:
            fields[choice[0]] = choice[1]
        if rule.get("op") == "linear":
            weight, act = rule.get("match", {}).get("weight"), rule.get("activation")
            if not weight or not act:
                raise ModelError("linear rule without match.weight and activation", path=path,
                                 pointer=f"/rules/{i}")
            acts[weight] = act
    return replace(Numerics(), activations=tuple(sorted(acts.items())), **fields)


# "llama-cpp-cpu" imitates llama.cpp's x86 CPU backend more closely than our kernels do (f16 query and
# probabilities in its non-flash attention path) for parity experiments; every other policy name is
# read from src/kernelmap/numerics/policies/<name>.json, so the reference follows the kernels' contracts.
POLICIES: dict[str, Numerics] = {
    "llama-cpp-cpu": Numerics(q8_0_rule="x86", gelu_rule="f16_table", attn_q_f16=True, attn_p_f16=True),
}


def policy_numerics(policy: str) -> Numerics:
    """Numerics for a policy name: a built-in experiment or a numerics policy file."""
    if policy in POLICIES:
        return POLICIES[policy]
    path = _POLICY_DIR / f"{policy}.json"
    if not path.is_file():
        known = sorted(set(POLICIES) | {p.stem for p in _POLICY_DIR.glob("*.json")})
        raise ModelError("unknown reference numerics policy", pointer="policy", value=policy, expected=known)
    return numerics_from_policy(path)


def load_recipe(arch: str, path: Path = _RECIPES) -> dict[str, Any]:
    """The recipe dict for one architecture name; ModelError if the table has none."""
    table = json.loads(path.read_text())["architectures"]
    if arch not in table:
        raise ModelError("no reference recipe for this architecture", path=path, pointer="/architectures",
                         value=arch, expected=sorted(table),
                         hint="add an entry to recipes.json after checking llama.cpp's graph for it")
    return table[arch]


def _field(reader: Any, key: str, path: str, default: Any = None, required: bool = True) -> Any:
    field = reader.fields.get(key)
    if field is None:
        if required and default is None:
            raise GGUFError("missing metadata key", path=path, pointer=key,
                            hint="the file lacks a value the reference needs")
        return default
    return field.contents()


class Reference:
    """A NumPy model: `prefill(tokens)` and `decode(token)` give float32 logits; the KV cache persists."""

    def __init__(self, model_path: str | Path, policy: str = "llama-cpu", n_ctx: int = 2048,
                 numerics: Numerics | None = None) -> None:
        from gguf import GGUFReader

        self.path = str(model_path)
        self.numerics = numerics if numerics is not None else policy_numerics(policy)
        try:
            reader = GGUFReader(self.path)
        except (OSError, ValueError) as exc:
            raise GGUFError(f"cannot read gguf: {exc}", path=self.path) from exc
        arch = _field(reader, "general.architecture", self.path)
        self.arch = arch
        self.recipe = load_recipe(arch)
        p = arch + "."
        cfg: dict[str, Any] = {
            "n_embd": int(_field(reader, p + "embedding_length", self.path)),
            "n_layer": int(_field(reader, p + "block_count", self.path)),
            "n_ff": int(_field(reader, p + "feed_forward_length", self.path)),
            "n_head": int(_field(reader, p + "attention.head_count", self.path)),
            "eps": float(_field(reader, p + "attention.layer_norm_rms_epsilon", self.path)),
            "rope_freq_base": float(_field(reader, p + "rope.freq_base", self.path, 10000.0)),
            "n_ctx_train": int(_field(reader, p + "context_length", self.path)),
            "sliding_window": int(_field(reader, p + "attention.sliding_window", self.path, 0, required=False)),
        }
        cfg["n_head_kv"] = int(_field(reader, p + "attention.head_count_kv", self.path, cfg["n_head"]))
        cfg["head_dim"] = int(_field(reader, p + "attention.key_length", self.path,
                                     cfg["n_embd"] // cfg["n_head"]))
        factor = _field(reader, p + "rope.scaling.factor", self.path, 0.0, required=False)
        cfg["rope_freq_scale"] = 1.0 / float(factor) if factor else 1.0
        self.config = cfg
        if n_ctx > cfg["n_ctx_train"]:
            raise ModelError("context longer than the trained context", path=self.path, pointer="n_ctx",
                             value=n_ctx, expected=f"<= {cfg['n_ctx_train']}")
        self.n_ctx = n_ctx
        self._tensors = {t.name: t for t in reader.tensors}
        self._load_weights()
        self.reset()

    # weights -------------------------------------------------------------------------------
    def _tensor(self, key: str, layer: int | None = None, optional: bool = False) -> Any:
        name = self.recipe["tensors"][key].format(i=layer)
        t = self._tensors.get(name)
        if t is None and not optional:
            raise ModelError("missing tensor", path=self.path, pointer=name,
                             hint=f"the {self.arch} recipe needs it")
        return t

    def _matrix(self, t: Any) -> tuple[np.ndarray, str]:
        kind = t.tensor_type.name.lower()
        return ops.dequantize_rows(np.asarray(t.data), kind).astype(np.float64), kind

    def _vector(self, t: Any) -> np.ndarray:
        return np.asarray(t.data, dtype=np.float32).reshape(-1)

    def _load_weights(self) -> None:
        r = self.recipe
        cfg = self.config
        self.layers: list[dict[str, Any]] = []
        for i in range(cfg["n_layer"]):
            lw: dict[str, Any] = {}
            for key in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
                lw[key] = self._matrix(self._tensor(key, i))
            norms = ["attn_norm", "ffn_norm"]
            norms += ["attn_q_norm", "attn_k_norm"] if r["qk_norm"] else []
            norms += ["post_attention_norm"] if r["post_attention_norm"] else []
            norms += ["post_ffn_norm"] if r["post_ffn_norm"] else []
            for key in norms:
                lw[key] = self._vector(self._tensor(key, i))
            self.layers.append(lw)
        emb = self._tensor("token_embd")
        self.embd_type = emb.tensor_type.name.lower()
        self.embd_rows = np.asarray(emb.data)
        self.n_vocab = int(self.embd_rows.shape[0])
        self.output_norm = self._vector(self._tensor("output_norm"))
        self._output_t = self._tensor("output", optional=True) or emb
        self._output: tuple[np.ndarray, str] | None = None

    def _output_matrix(self) -> tuple[np.ndarray, str]:
        if self._output is None:
            self._output = self._matrix(self._output_t)
        return self._output

    # per-layer attributes --------------------------------------------------------------------
    def layer_attrs(self, i: int) -> dict[str, Any]:
        """Sliding flag, window, rope base and scale of layer i (the recipe's rule on the config)."""
        cfg, r = self.config, self.recipe
        pattern = int(r.get("swa_pattern") or 0)
        sliding = pattern > 0 and cfg["sliding_window"] > 0 and i % pattern < pattern - 1
        if sliding:
            return {"sliding": True, "window": cfg["sliding_window"],
                    "freq_base": float(r["swa_rope_freq_base"]), "freq_scale": float(r["swa_rope_freq_scale"])}
        return {"sliding": False, "window": 0, "freq_base": cfg["rope_freq_base"],
                "freq_scale": cfg["rope_freq_scale"]}

    def attention_scale(self) -> float:
        rule = self.recipe["attention_scale"]
        if rule != "inv_sqrt_head_dim":
            raise ModelError("unknown attention_scale rule in recipe", path=_RECIPES, value=rule,
                             expected=["inv_sqrt_head_dim"])
        return float(np.float32(1.0) / np.sqrt(np.float32(self.config["head_dim"])))

    def embedding_scale(self) -> float:
        rule = self.recipe["embedding_scale"]
        if rule == "sqrt_embedding_length":
            return float(np.sqrt(np.float32(self.config["n_embd"]), dtype=np.float32))
        if rule == "none":
            return 1.0
        raise ModelError("unknown embedding_scale rule in recipe", path=_RECIPES, value=rule,
                         expected=["none", "sqrt_embedding_length"])

    # running -----------------------------------------------------------------------------------
    def reset(self) -> None:
        """Empty the KV cache."""
        cfg = self.config
        shape = (cfg["n_head_kv"], self.n_ctx, cfg["head_dim"])
        self.k_cache = [np.zeros(shape, np.float32) for _ in range(cfg["n_layer"])]
        self.v_cache = [np.zeros(shape, np.float32) for _ in range(cfg["n_layer"])]
        self.n_past = 0

    def _linear(self, x: np.ndarray, w: tuple[np.ndarray, str]) -> np.ndarray:
        acts = dict(self.numerics.activations)
        if w[1] not in acts:
            raise ModelError("the numerics policy has no linear rule for this weight type", pointer="activations",
                             value=w[1], expected=sorted(acts))
        return ops.linear(x, w[0], w[1], acts[w[1]], q8_0_rule=self.numerics.q8_0_rule)

    def _ffn(self, h: np.ndarray, lw: dict[str, Any]) -> np.ndarray:
        g = self._linear(h, lw["ffn_gate"])
        u = self._linear(h, lw["ffn_up"])
        kind = self.recipe["ffn"]
        if kind == "geglu":
            a = ops.geglu(g, u, self.numerics.gelu_rule)
        elif kind == "swiglu":
            a = ops.swiglu(g, u)
        else:
            raise ModelError("unknown ffn kind in recipe", path=_RECIPES, value=kind, expected=["geglu", "swiglu"])
        return self._linear(a, lw["ffn_down"])

    def _layer(self, i: int, x: np.ndarray, pos0: int) -> np.ndarray:
        cfg, r, nm = self.config, self.recipe, self.numerics
        lw = self.layers[i]
        at = self.layer_attrs(i)
        eps, hq, hkv = cfg["eps"], cfg["n_head"], cfg["n_head_kv"]
        m = x.shape[0]
        h = ops.rmsnorm(x, lw["attn_norm"], eps)
        q = self._linear(h, lw["attn_q"])
        k = self._linear(h, lw["attn_k"])
        v = self._linear(h, lw["attn_v"])
        if r["qk_norm"]:
            q = ops.qk_norm(q, lw["attn_q_norm"], hq, eps)
            k = ops.qk_norm(k, lw["attn_k_norm"], hkv, eps)
        q = ops.rope(q, hq, pos0, at["freq_base"], at["freq_scale"], r["rope_mode"], nm.rope_theta_rule)
        k = ops.rope(k, hkv, pos0, at["freq_base"], at["freq_scale"], r["rope_mode"], nm.rope_theta_rule)
        d = cfg["head_dim"]
        kh = k.reshape(m, hkv, d).transpose(1, 0, 2)
        vh = v.reshape(m, hkv, d).transpose(1, 0, 2)
        if nm.kv_dtype == "f16":
            kh = kh.astype(np.float16).astype(np.float32)
            vh = vh.astype(np.float16).astype(np.float32)
        self.k_cache[i][:, pos0:pos0 + m] = kh
        self.v_cache[i][:, pos0:pos0 + m] = vh
        a = ops.attention(q, self.k_cache[i], self.v_cache[i], hq, pos0, self.attention_scale(), at["window"],
                          nm.kv_dtype, nm.attn_q_f16, nm.attn_p_f16)
        o = self._linear(a, lw["attn_output"])
        if r["post_attention_norm"]:
            o = ops.rmsnorm(o, lw["post_attention_norm"], eps)
        x = ops.residual_add(o, x)
        h = ops.rmsnorm(x, lw["ffn_norm"], eps)
        f = self._ffn(h, lw)
        if r["post_ffn_norm"]:
            f = ops.rmsnorm(f, lw["post_ffn_norm"], eps)
        return ops.residual_add(f, x)

    def forward(self, tokens: Sequence[int], logits_rows: str | Sequence[int] = "last") -> np.ndarray:
        """Run tokens at positions n_past.. (appending to the cache); logits f32 [rows, V] for the rows asked.

        logits_rows: "last", "all", "none" or row indices into `tokens`.
        """
        ids = np.asarray(list(tokens), dtype=np.int64)
        m = ids.size
        if m == 0:
            raise ModelError("no tokens to run", pointer="tokens")
        if self.n_past + m > self.n_ctx:
            raise ModelError("tokens exceed the reference context", pointer="tokens",
                             value=self.n_past + m, expected=f"<= {self.n_ctx}")
        if ids.min() < 0 or ids.max() >= self.n_vocab:
            raise ModelError("token id out of range", pointer="tokens", value=int(ids.max()),
                             expected=f"0..{self.n_vocab - 1}")
        pos0 = self.n_past
        x = ops.embedding(self.embd_rows, ids, self.embd_type, self.embedding_scale())
        for i in range(self.config["n_layer"]):
            x = self._layer(i, x, pos0)
        self.n_past += m
        if isinstance(logits_rows, str):
            rows = {"last": [m - 1], "all": list(range(m)), "none": []}[logits_rows]
        else:
            rows = [int(r) for r in logits_rows]
        if not rows:
            return np.zeros((0, self.n_vocab), np.float32)
        return self.head(x[rows])

    def head(self, x: np.ndarray) -> np.ndarray:
        """Final norm and output projection of residual rows x [R, d] -> f32 [R, V]."""
        h = ops.rmsnorm(x, self.output_norm, self.config["eps"])
        w = self._output_matrix()
        out = np.concatenate([self._linear(h[r:r + 32], w) for r in range(0, h.shape[0], 32)])
        cap = self.recipe.get("final_logit_softcapping")
        if cap:
            out = (np.tanh(out.astype(np.float64) / cap) * cap).astype(np.float32)
        return out

    def prefill(self, tokens: Sequence[int], logits_rows: str | Sequence[int] = "all") -> np.ndarray:
        """Reset the cache and run tokens from position 0; logits [rows, V]."""
        self.reset()
        return self.forward(tokens, logits_rows)

    def logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Logits f32 [V] of the last token of `tokens`, from an empty cache (like runtime Model.logits)."""
        return self.prefill(tokens, "last")[0]

    def decode(self, token: int) -> np.ndarray:
        """Run one token at the next position; logits f32 [V]."""
        return self.forward([token], "last")[0]

    def greedy(self, prompt: Sequence[int], n: int) -> list[int]:
        """Greedy continuation of n tokens (prefill, then decode step by step)."""
        out: list[int] = []
        logits = self.prefill(prompt, "last")[0]
        for step in range(n):
            tok = int(ops.argmax(logits[None])[0])
            out.append(tok)
            if step + 1 < n:
                logits = self.decode(tok)
        return out

    def teacher_forced(self, tokens: Sequence[int], start: int = 0) -> np.ndarray:
        """Logits [len(tokens) - start, V] for rows start.. in one prefill (row i predicts token i+1)."""
        return self.prefill(tokens, list(range(start, len(tokens))))
