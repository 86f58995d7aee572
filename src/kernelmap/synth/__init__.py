"""Synthetic models of real shapes: `kernelmap synth` writes a GGUF of any circuit's architecture.

Seeded random weights of realistic scale (synth/model.py), a real tokenizer copied from a vocab GGUF
(synth/vocab.py), then llama.cpp's own quantizer for each preset (synth/quantize.py). What each
architecture's file holds, and the dims of named real models, are data (archs.json, dims.json).
"""

from kernelmap.synth.model import archs, named_dims, presets, resolve_dims, write_model
from kernelmap.synth.quantize import peer_python, quantize
from kernelmap.synth.vocab import read_tokenizer, vocab_path

__all__ = ["archs", "named_dims", "presets", "resolve_dims", "write_model", "peer_python", "quantize",
           "read_tokenizer", "vocab_path"]
