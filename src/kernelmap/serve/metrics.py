"""Prometheus metrics of one server (its own registry, so several apps can live in one process).

Input: counts and timings the app and the engine report. Output: the Prometheus text format at
GET /metrics: requests by endpoint and status, prompt and generated tokens, queue depth, active
sequences, cancelled requests, the last prefill and decode rates, batch rows per decode step and time
to first token. It measures nothing itself.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["Metrics", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    """The server's metric families, registered in a private CollectorRegistry."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("kernelmap_requests", "HTTP requests by endpoint and status", ["endpoint", "status"],
                                registry=r)
        self.prompt_tokens = Counter("kernelmap_prompt_tokens", "prompt tokens prefilled", registry=r)
        self.generated_tokens = Counter("kernelmap_generated_tokens", "tokens generated", registry=r)
        self.cancelled = Counter("kernelmap_requests_cancelled", "requests dropped because the client left",
                                 registry=r)
        self.queue_depth = Gauge("kernelmap_queue_depth", "requests waiting for a KV slot", registry=r)
        self.active = Gauge("kernelmap_active_sequences", "sequences holding a KV slot", registry=r)
        self.prefill_tps = Gauge("kernelmap_prefill_tokens_per_second", "prompt tokens/s of the last prefill",
                                 registry=r)
        self.decode_tps = Gauge("kernelmap_decode_tokens_per_second",
                                "tokens/s of the last batched decode step (rows / step time)", registry=r)
        self.decode_rows = Histogram("kernelmap_decode_batch_rows", "sequences advanced per decode step",
                                     buckets=(1, 2, 4, 8, 16, 32, 64), registry=r)
        self.ttft = Histogram("kernelmap_time_to_first_token_seconds", "from request to its first token",
                              buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
