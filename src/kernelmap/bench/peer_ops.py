"""Peer side of `kernelmap bench --peer`: llama.cpp's own time for one MUL_MAT of a given weight type and shape.

Runs in the peer's interpreter (llama-cpp-python; no kernelmap import): reads a JSON list of points
{type, N, K, M, threads, min_time, cold_bytes} on stdin and prints one JSON list of {..., "seconds": median,
"reps": n, "copies": c}. Each point is a one-node ggml graph y = mul_mat(W, x) computed by the CPU backend with
`threads` threads: W
[N, K] of the GGML type (valid blocks from ggml_quantize_chunk on random values), x [M, K] f32, the weight in
llama.cpp's repack buffer when llama.cpp would repack it (q4_0 / q4_K / iq4_nl with N % 8 == 0 on AVX2,
q2_K on AVX-512) so the timed path is the one a model load takes. The time includes what the node does in a model:
the activation conversion (quantize_row_* / quantize_mat) and the matmul, but not graph scheduling; the
threads come from one persistent ggml threadpool (default polling), as in a llama.cpp context.
With cold_bytes > 0 there are c = ceil(cold_bytes / bytes of W) copies of W (at most 4096), one graph each,
and successive timed calls rotate over them, as `kernelmap bench` does without --hot.
"""

import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q2_k": 10, "q3_k": 11,
         "q4_k": 12, "q5_k": 13, "q6_k": 14, "iq4_nl": 20, "bf16": 30}
# llama.cpp's x86 repack types on this build (ggml_repack_get_optimal_repack_type)
REPACK = {"q4_0", "q4_k", "q2_k", "iq4_nl"}


class _Params(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


def _libs():
    import llama_cpp

    d = Path(llama_cpp.__file__).resolve().parent / "lib"
    base = ctypes.CDLL(str(d / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(str(d / "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
    vp, i64, i32, sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_size_t
    sig = {
        (base, "ggml_init"): ([_Params], vp), (base, "ggml_new_tensor_2d"): ([vp, i32, i64, i64], vp),
        (base, "ggml_mul_mat"): ([vp, vp, vp], vp), (base, "ggml_new_graph_custom"): ([vp, sz, ctypes.c_bool], vp),
        (base, "ggml_graph_overhead_custom"): ([sz, ctypes.c_bool], sz), (base, "ggml_row_size"): ([i32, i64], sz),
        (base, "ggml_build_forward_expand"): ([vp, vp], None), (base, "ggml_free"): ([vp], None),
        (base, "ggml_tensor_overhead"): ([], sz), (base, "ggml_graph_overhead"): ([], sz),
        (base, "ggml_nbytes"): ([vp], sz), (base, "ggml_backend_graph_compute"): ([vp, vp], i32),
        (base, "ggml_backend_tensor_set"): ([vp, vp, sz, sz], None),
        (base, "ggml_backend_alloc_ctx_tensors_from_buft"): ([vp, vp], vp),
        (base, "ggml_backend_alloc_ctx_tensors"): ([vp, vp], vp), (base, "ggml_backend_cpu_buffer_type"): ([], vp),
        (base, "ggml_backend_buffer_free"): ([vp], None), (base, "ggml_backend_free"): ([vp], None),
        (base, "ggml_quantize_chunk"): ([i32, vp, vp, i64, i64, i64, vp], sz),
        (cpu, "ggml_cpu_init"): ([], None), (cpu, "ggml_backend_cpu_init"): ([], vp),
        (cpu, "ggml_backend_cpu_set_n_threads"): ([vp, i32], None),
        (cpu, "_Z35ggml_backend_cpu_repack_buffer_typev"): ([], vp),
        (base, "ggml_threadpool_params_init"): ([vp, i32], None), (cpu, "ggml_threadpool_new"): ([vp], vp),
        (cpu, "ggml_threadpool_free"): ([vp], None), (cpu, "ggml_backend_cpu_set_threadpool"): ([vp, vp], None),
    }
    fns = {}
    for (lib, name), (args, res) in sig.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
        fns[name.removeprefix("_Z35").removesuffix("v") if name.startswith("_Z") else name] = fn
    fns["ggml_cpu_init"]()
    return fns


def _weight_bytes(g, typ: str, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    vals = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    if typ == "f32":
        return vals.view(np.uint8).reshape(-1)
    if typ == "f16":
        return vals.astype(np.float16).view(np.uint8).reshape(-1)
    if typ == "bf16":
        return (vals.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(-1)
    out = np.zeros(n * k * 4, np.uint8)  # an upper bound of any quantized size
    size = g["ggml_quantize_chunk"](TYPES[typ], vals.ctypes.data, out.ctypes.data, 0, n, k, None)
    return out[:size].copy()


def time_point(g, p: dict) -> dict:
    """Median seconds of one mul_mat node for point p (rotating over weight copies when cold)."""
    typ, n, k, m, threads = p["type"], int(p["N"]), int(p["K"]), int(p["M"]), int(p["threads"])
    rng = np.random.default_rng(0)
    wbytes = g["ggml_row_size"](TYPES[typ], k) * n
    copies = max(1, min(4096, -(-int(p.get("cold_bytes", 0)) // wbytes)))
    tensor_oh, graph_oh = g["ggml_tensor_overhead"](), g["ggml_graph_overhead_custom"](4, False)
    ctx_w = g["ggml_init"](_Params(tensor_oh * (copies + 1), None, True))
    ctx_x = g["ggml_init"](_Params(tensor_oh * (copies + 2) + graph_oh * (copies + 1), None, True))
    ws = [g["ggml_new_tensor_2d"](ctx_w, TYPES[typ], k, n) for _ in range(copies)]
    x = g["ggml_new_tensor_2d"](ctx_x, TYPES["f32"], k, m)
    graphs = []
    for w in ws:
        graph = g["ggml_new_graph_custom"](ctx_x, 4, False)
        g["ggml_build_forward_expand"](graph, g["ggml_mul_mat"](ctx_x, w, x))
        graphs.append(graph)
    backend = g["ggml_backend_cpu_init"]()
    g["ggml_backend_cpu_set_n_threads"](backend, threads)
    tp_params = ctypes.create_string_buffer(1024)  # struct ggml_threadpool_params (about 530 bytes), filled by init
    g["ggml_threadpool_params_init"](tp_params, threads)
    pool = g["ggml_threadpool_new"](tp_params)  # one persistent pool, as a llama.cpp context keeps
    g["ggml_backend_cpu_set_threadpool"](backend, pool)
    repack = typ in REPACK and n % 8 == 0
    buft = g["ggml_backend_cpu_repack_buffer_type"]() if repack else g["ggml_backend_cpu_buffer_type"]()
    buf_w = g["ggml_backend_alloc_ctx_tensors_from_buft"](ctx_w, buft)
    buf_x = g["ggml_backend_alloc_ctx_tensors"](ctx_x, backend)
    data = _weight_bytes(g, typ, n, k, rng)
    if data.size != g["ggml_nbytes"](ws[0]):
        raise SystemExit(f"{typ} {n}x{k}: {data.size} bytes, ggml wants {g['ggml_nbytes'](ws[0])}")
    for w in ws:
        g["ggml_backend_tensor_set"](w, data.ctypes.data, 0, data.size)
    xv = rng.standard_normal((m, k)).astype(np.float32)
    g["ggml_backend_tensor_set"](x, xv.ctypes.data, 0, xv.nbytes)
    for graph in graphs[: min(copies, 8)]:
        g["ggml_backend_graph_compute"](backend, graph)  # warm-up (thread pool, code)
    times = []
    t_end = time.perf_counter() + float(p.get("min_time", 0.2))
    i = 0
    while time.perf_counter() < t_end or len(times) < 5:
        graph = graphs[i % copies]
        i += 1
        t0 = time.perf_counter()
        g["ggml_backend_graph_compute"](backend, graph)
        times.append(time.perf_counter() - t0)
    for buf in (buf_w, buf_x):
        g["ggml_backend_buffer_free"](buf)
    g["ggml_backend_free"](backend)
    g["ggml_threadpool_free"](pool)
    g["ggml_free"](ctx_w)
    g["ggml_free"](ctx_x)
    return dict(p, seconds=statistics.median(times), reps=len(times), repacked=repack, copies=copies)


def main() -> None:
    points = json.loads(sys.stdin.read())
    g = _libs()
    print(json.dumps([time_point(g, p) for p in points]))


if __name__ == "__main__":
    main()
