"""The float bit ranges on which the vector expf (km_lanes.h's kl_fv_expf) is checked against expf in `make test`.

Shared by tests/kernels/test_attention_ggmlfa.py (the x86 lanes, through the attention unit's test hook) and
tests/aarch64/test_aarch64_expf.py (the NEON lanes under qemu-aarch64, and their bits against the x86 lanes').
Data only: what to compare and how is each test's.
"""

from __future__ import annotations

__all__ = ["EXPF_SAMPLE"]

# (lo, n): the patterns lo .. lo + n - 1. Around +-0, the edges of glibc's main range (|x| < 0x1.6p6), the
# underflow region, +-inf and NaNs, the scores' usual [-30, 0], and 64 slices spread over all 2^32 patterns.
EXPF_SAMPLE: list[tuple[int, int]] = [
    (0x00000000, 1 << 20), (0x80000000, 1 << 20), (0x42B00000 - (1 << 19), 1 << 20),
    (0xC2B00000 - (1 << 19), 1 << 20), (0xC2CE0000, 1 << 19), (0x7F800000 - 16, 1 << 16),
    (0xFF800000 - 16, 1 << 16), (0xFFFF0000, 1 << 16), (0xBF800000, 1 << 21), (0xC1F00000, 1 << 20),
] + [(k << 26, 1 << 16) for k in range(64)]
