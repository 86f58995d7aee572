"""Runtime stage: load a compiled model, sample, and generate (see model.py and sampler.py)."""

from kernelmap.runtime.model import GenerationStats, Model, default_model_path, load
from kernelmap.runtime.sampler import Sampler, SamplerConfig

__all__ = ["GenerationStats", "Model", "Sampler", "SamplerConfig", "default_model_path", "load"]
