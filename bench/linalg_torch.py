"""PyTorch 1.13 reference timings for bench/suites/linalg.ts (median ms per op, cpu, float32).

    python3 bench/linalg_torch.py [threads]

Inputs as the suite's: eigh of a symmetric A + Aᵀ (A randn), svd / qr of randn, all [n, n];
orthogonal_ of a [1024, 1024] weight.
"""

import statistics
import sys
import time

import torch

if len(sys.argv) > 1:
    torch.set_num_threads(int(sys.argv[1]))
torch.manual_seed(0)


def median_ms(fn, budget=3.0, max_runs=30):
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < budget and len(times) < max_runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), min(times)


print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
for n in (64, 256, 512):
    a = torch.randn(n, n)
    sym = a + a.T
    for name, fn in (
        ("eigh", lambda: torch.linalg.eigh(sym)),
        ("svd", lambda: torch.linalg.svd(a)),
        ("qr", lambda: torch.linalg.qr(a)),
    ):
        med, low = median_ms(fn)
        print(f"{name} [{n},{n}]: median {med:.3g} ms, min {low:.3g} ms")
w = torch.empty(1024, 1024)
med, low = median_ms(lambda: torch.nn.init.orthogonal_(w))
print(f"orthogonal_ [1024,1024]: median {med:.3g} ms, min {low:.3g} ms")
