"""PyTorch 1.13 reference timings for the `conv3d` bench suite
(bench/suites/conv3d.ts): the same layers, forward + backward (input,
weight and bias gradients).

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/conv3d_torch.py
  /usr/bin/python3 bench/conv3d_torch.py --serve [--quick]

With --serve it reads one JSON command per line ({"info": true} or
{"case": NAME}) and answers one JSON line ({"ms": ...}), timing one run
itself, so that the suite interleaves PyTorch and multigrad runs.
"""
import json
import sys
import time

import torch
import torch.nn.functional as F

# name: (transposed, N, Cin, Cout, size, k, stride, padding, output_padding); as CASES of the suite.
CASES = {
    "conv3d 16->32 16^3 k3 p1": (False, 4, 16, 32, 16, 3, 1, 1, 0),
    "conv3d 3->16 32^3 k3 s2 p1": (False, 2, 3, 16, 32, 3, 2, 1, 0),
    "convT3d 32->16 8^3 k3 s2 p1 op1": (True, 4, 32, 16, 8, 3, 2, 1, 1),
}


def setup():
    gen = torch.Generator().manual_seed(0)
    runs = {}
    for name, (transposed, n, cin, cout, size, k, stride, padding, op) in CASES.items():
        x = torch.randn(n, cin, size, size, size, generator=gen).requires_grad_()
        if transposed:
            w = torch.randn(cin, cout, k, k, k, generator=gen).requires_grad_()
        else:
            w = torch.randn(cout, cin, k, k, k, generator=gen).requires_grad_()
        b = torch.randn(cout, generator=gen).requires_grad_()

        def forward(x=x, w=w, b=b, transposed=transposed, stride=stride, padding=padding, op=op):
            if transposed:
                return F.conv_transpose3d(x, w, b, stride=stride, padding=padding,
                                          output_padding=op)
            return F.conv3d(x, w, b, stride=stride, padding=padding)

        g = torch.randn(forward().shape, generator=gen)

        def run(x=x, w=w, b=b, g=g, forward=forward):
            (forward() * g).sum().backward()
            x.grad = None
            w.grad = None
            b.grad = None

        runs[name] = run
    return runs


def timed(run):
    t0 = time.perf_counter()
    run()
    return (time.perf_counter() - t0) * 1000


def main():
    cases = setup()
    if "--serve" in sys.argv:
        for line in sys.stdin:
            cmd = json.loads(line)
            if cmd.get("info"):
                out = {"torch": torch.__version__, "threads": torch.get_num_threads()}
            else:
                out = {"ms": timed(cases[cmd["case"]])}
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name, run in cases.items():
        run()
        ms = sorted(timed(run) for _ in range(11))
        print(f"{name:34s} median {ms[5]:8.2f} ms  min {ms[0]:8.2f} ms")


if __name__ == "__main__":
    main()
