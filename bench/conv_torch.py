#!/usr/bin/python3
"""The conv bench suite's step in PyTorch: Conv2d(64, 64, 3, padding=1) on a
[32, 64, 28, 28] input, forward plus input and weight gradients, in GFLOP/s
(3 * 2*N*Cout*H*W*Cin*9 per step), for bench/NOTES.md.

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/conv_torch.py
"""

import time

import torch

torch.manual_seed(0)
x = torch.randn(32, 64, 28, 28, requires_grad=True)
conv = torch.nn.Conv2d(64, 64, 3, padding=1)
g = torch.randn(32, 64, 28, 28)


def step():
    conv.zero_grad()
    x.grad = None
    (conv(x) * g).sum().backward()


step()
times = []
for _ in range(5):
    t0 = time.perf_counter()
    step()
    times.append(time.perf_counter() - t0)
median = sorted(times)[len(times) // 2]
flop = 3 * 2 * 32 * 64 * 28 * 28 * 64 * 9
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads: "
      f"median {median * 1e3:.1f} ms, {flop / median / 1e9:.1f} GFLOP/s")
