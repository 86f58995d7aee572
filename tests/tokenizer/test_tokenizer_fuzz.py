"""Hostile tokenizer metadata: random keys, types and values give a Tokenizer or a TokenizerError, never
another exception; encoding with whatever survives validation fails only with TokenizerError."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tok_helpers import P, bpe_metadata, spm_metadata

from kernelmap.errors import TokenizerError
from kernelmap.tokenizer import Tokenizer

_BASES = [spm_metadata({"a": -1.0, "b": -2.0, "ab": -0.5, "\u2581": -3.0}, user=("  ",), control=("<c>",)),
          bpe_metadata(["a b", "ab c"], pre="qwen2", control=("<|x|>",))]
_KEYS = ["model", "pre", "tokens", "scores", "token_type", "merges", "bos_token_id", "eos_token_id",
         "unknown_token_id", "eot_token_id", "add_bos_token", "add_eos_token", "add_space_prefix"]
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**40), st.floats(allow_nan=True),
                     st.text(max_size=8), st.binary(max_size=8))
_values = st.one_of(
    _scalars,
    st.lists(_scalars, max_size=6),
    st.lists(st.text(max_size=4), min_size=1, max_size=300),
    st.builds(lambda n, dt: np.zeros(n, dtype=dt), st.integers(0, 300),
              st.sampled_from([np.uint8, np.int32, np.float32, np.float64, np.int64, np.bool_])),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([0, 1]), st.dictionaries(st.sampled_from(_KEYS), _values, max_size=4),
       st.text(max_size=30))
def test_tokenizer_fuzzed_metadata_fails_only_with_tokenizer_error(base, changes, text):
    md = dict(_BASES[base])
    for k, v in changes.items():
        if v is None:
            md.pop(P + k, None)
        else:
            md[P + k] = v
    try:
        tok = Tokenizer.from_metadata(md)
    except TokenizerError:
        return
    try:
        ids = tok.encode(text)
        tok.decode(ids, special=True)
    except TokenizerError:
        pass
