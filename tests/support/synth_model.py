"""A tiny synthetic model of the real model's architecture, written with gguf-py's GGUFWriter.

Used by the golden-codegen, hostile-metadata and end-to-end tests: small enough to compile and run in
seconds, shaped like the real file (same tensor names and metadata keys), with q8_0 embeddings,
projection weights in f32, q8_0, q5_0, q4_0, q5_1 or q4_1 (gguf-py's quantizer) or q4_k / q6_k (random blocks with
finite scales: gguf-py cannot quantize K-quants), one type for all or one per projection, and a tiny
SentencePiece-style vocabulary so the tokenizer loads. K-quant projections need d, ffn and
n_heads * head_dim to be multiples of 256.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

import gguf

__all__ = ["write_synth_model", "ARCH"]

ARCH = "gemma3"

_QUANTIZED = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q5_0": gguf.GGMLQuantizationType.Q5_0,
              "q4_0": gguf.GGMLQuantizationType.Q4_0, "q5_1": gguf.GGMLQuantizationType.Q5_1,
              "q4_1": gguf.GGMLQuantizationType.Q4_1}
# K-quant type -> (GGML type, bytes per 256-element block, byte offsets of its f16 scales, scale magnitude)
_K_QUANTS = {"q4_k": (gguf.GGMLQuantizationType.Q4_K, 144, (0, 2), 2e-4),
             "q6_k": (gguf.GGMLQuantizationType.Q6_K, 210, (208,), 1e-4)}


def _random_k_blocks(rng: np.random.Generator, kind: str, rows: int, cols: int) -> np.ndarray:
    """uint8 [rows, cols / 256 * block bytes]: random codes and sub-block scales, finite f16 super-block
    scales small enough that the weights stay around 0.1."""
    _, block, scale_offsets, magnitude = _K_QUANTS[kind]
    if cols % 256:
        raise ValueError(f"synth_model: {kind} needs a row length that is a multiple of 256, not {cols}")
    nb = cols // 256
    raw = rng.integers(0, 256, size=(rows, nb, block), dtype=np.uint8)
    for off in scale_offsets:
        d = (rng.uniform(0.5, 1.0, size=(rows, nb)) * magnitude).astype(np.float16)
        raw[:, :, off:off + 2] = d.view(np.uint8).reshape(rows, nb, 2)
    return raw.reshape(rows, nb * block)


def _vocab(n: int) -> tuple[list[str], list[float], list[int]]:
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    types = [3, 3, 3, 2, 3, 3]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    words = ["\u2581the", "\u2581a", "\u2581cat", "\u2581dog", "\u2581sat", "\u2581on", "\u2581mat", "\u2581is",
             "\u2581", "t", "h", "e", "a", "c", "o", "n", "s", "m", "i", "d", "g", "th", "he", "at"]
    tokens += words
    types += [1] * len(words)
    while len(tokens) < n:
        tokens.append(f"\u2581w{len(tokens)}")
        types.append(1)
    scores = [0.0] * 6 + [0.0] * 256 + [-float(i) for i in range(len(tokens) - 262)]
    return tokens[:n], scores[:n], types[:n]


def write_synth_model(path: Path, *, n_layers: int = 2, d: int = 64, n_heads: int = 2, n_kv: int = 1,
                      head_dim: int = 32, ffn: int = 128, vocab: int = 320, window: int = 8,
                      weight_type: str = "f32", weight_types: Mapping[str, str] | None = None, seed: int = 0,
                      hostile: bool = False, hostile_tensors: bool = True) -> Path:
    """Write a tiny model; `hostile` adds metadata (and, unless hostile_tensors=False, unused tensors) whose
    text attacks C emission.

    `weight_types` maps a projection ("attn_q", ..., "ffn_down", or "blk.1.attn_q" for one layer) to its
    type; projections it does not name use `weight_type`.
    """
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), ARCH)
    w.add_name("synthetic */ int evil(void); /*" if hostile else "synthetic")
    w.add_context_length(256)
    w.add_embedding_length(d)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(n_heads)
    w.add_head_count_kv(n_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1000000.0)
    w.add_sliding_window(window)
    tokens, scores, types = _vocab(vocab)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(False)
    if hostile:
        w.add_string("general.description", 'quote " backslash \\ trigraph ??/ newline\n\t\x01 \u00e9 */ #include')
        w.add_string("hostile.key */ int x;", "value */")

    def f32(*shape: int, scale: float = 0.1) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def add_matrix(name: str, rows: int, cols: int, kind: str) -> None:
        data = f32(rows, cols, scale=1.0 / np.sqrt(cols))
        if kind in _QUANTIZED:
            q = gguf.quants.quantize(data, _QUANTIZED[kind])
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=_QUANTIZED[kind])
        elif kind in _K_QUANTS:
            q = _random_k_blocks(rng, kind, rows, cols)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=_K_QUANTS[kind][0])
        elif kind != "f32" and kind.upper() in gguf.GGMLQuantizationType.__members__:
            # any other GGML type by name: random block bytes (for refusal tests)
            qtype = gguf.GGMLQuantizationType[kind.upper()]
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            raw = rng.integers(0, 256, size=(rows, cols // block * size), dtype=np.uint8)
            w.add_tensor(name, raw, raw_dtype=qtype)
        elif kind == "f32":
            w.add_tensor(name, data)
        else:
            raise ValueError(f"synth_model: no weight type {kind!r}")

    def kind_of(layer: int, proj: str) -> str:
        types = weight_types or {}
        return types.get(f"blk.{layer}.{proj}", types.get(proj, weight_type))

    add_matrix("token_embd.weight", vocab, d, "q8_0")
    w.add_tensor("output_norm.weight", 1.0 + f32(d))
    for i in range(n_layers):
        p = f"blk.{i}."
        for norm, n in (("attn_norm", d), ("post_attention_norm", d), ("ffn_norm", d), ("post_ffw_norm", d),
                        ("attn_q_norm", head_dim), ("attn_k_norm", head_dim)):
            w.add_tensor(p + norm + ".weight", 1.0 + f32(n))
        for proj, rows, cols in (("attn_q", n_heads * head_dim, d), ("attn_k", n_kv * head_dim, d),
                                 ("attn_v", n_kv * head_dim, d), ("attn_output", d, n_heads * head_dim),
                                 ("ffn_gate", ffn, d), ("ffn_up", ffn, d), ("ffn_down", d, ffn)):
            add_matrix(f"{p}{proj}.weight", rows, cols, kind_of(i, proj))
    if hostile and hostile_tensors:
        w.add_tensor("evil */ #define x \\ ??/", f32(4))
        w.add_tensor("\u00e9\u00e9.weight; system(\"rm\")", f32(4))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
