"""LKB stage: the Latent Kernel Blueprint on CPU classes: class chain, families registry, evidence, metrics.

Input: `lkb/classes/*/` TOML files, DEVICES.toml, the kernel maps, a measurements file, step profiles
and campaign ledgers. Output: resolved families per class, the provider check, evidence envelopes, the
gap/residual/yield report, promotion checks and ledgers. It never chooses kernels (the resolver does).
"""

from kernelmap.lkb.coverage import ProviderCheck, check_providers
from kernelmap.lkb.evidence import Envelope, Measurement, envelope, load_measurements
from kernelmap.lkb.promote import PromotionReport, promote_check
from kernelmap.lkb.registry import Chain, Family, Point, load_chain
from kernelmap.lkb.report import build_report, report_lines

__all__ = [
    "Chain",
    "Envelope",
    "Family",
    "Measurement",
    "Point",
    "PromotionReport",
    "ProviderCheck",
    "build_report",
    "check_providers",
    "envelope",
    "load_chain",
    "load_measurements",
    "promote_check",
    "report_lines",
]
