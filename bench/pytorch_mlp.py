"""PyTorch reference timings for multigrad's speed targets (bench/NOTES.md).

Run with the Debian PyTorch and its threaded OpenBLAS:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/pytorch_mlp.py

Cases (the same shapes as multigrad's bench):
  matmul  f32 1024x1024 @ 1024x1024 (torch.mm), GFLOP/s
  mlp     784-512-512-10 ReLU, batch 256, cross-entropy, SGD lr 0.01: one step
  demo    2-64-64-3 GELU (the demo's model), batch 128, cross-entropy, Adam lr 0.01

Without arguments it times each case and prints medians. With --serve it
reads one JSON command per line on stdin and answers one JSON line on stdout,
so that `deno task bench --peers` can interleave PyTorch with multigrad run
by run (the machine is shared; interleaving makes both see the same load):

  {"case": "mlp"}            -> {"ms": 23.1}   one timed step (or matmul)
  {"info": true}             -> {"torch": "1.13.0", "threads": 2, ...}
"""

import json
import statistics
import sys
import time

import torch


def matmul_case(n=1024):
    g = torch.Generator().manual_seed(0)
    a = torch.rand(n, n, generator=g) * 2 - 1
    b = torch.rand(n, n, generator=g) * 2 - 1

    def run():
        c = torch.mm(a, b)
        return float(c[0, 0])  # the "read" of the result

    return run


def train_case(sizes, batch, activation, make_opt):
    torch.manual_seed(0)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(activation())
    model = torch.nn.Sequential(*layers)
    opt = make_opt(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, sizes[0])
    y = torch.randint(0, sizes[-1], (batch,))

    def run():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()  # read the loss every step, as multigrad's bench does

    return run


CASES = {
    "matmul": lambda: matmul_case(1024),
    "mlp": lambda: train_case(
        [784, 512, 512, 10], 256, torch.nn.ReLU, lambda p: torch.optim.SGD(p, lr=0.01)
    ),
    "demo": lambda: train_case(
        [2, 64, 64, 3], 128, torch.nn.GELU, lambda p: torch.optim.Adam(p, lr=0.01)
    ),
}

FLOP = {"matmul": 2 * 1024**3}


def timed(run):
    t0 = time.perf_counter()
    run()
    return (time.perf_counter() - t0) * 1000


def info():
    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "blas": "openblas" if "openblas" in torch.__config__.show().lower() else "?",
    }


def serve():
    runs = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("info"):
            out = info()
        else:
            name = cmd["case"]
            if name not in runs:
                runs[name] = CASES[name]()
                for _ in range(3):
                    runs[name]()  # warm-up
            out = {"ms": timed(runs[name])}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


def main():
    print(json.dumps(info()))
    for name, make in CASES.items():
        run = make()
        for _ in range(3):
            run()
        times = []
        start = time.perf_counter()
        while len(times) < 5 or (time.perf_counter() - start < 3 and len(times) < 200):
            times.append(timed(run))
        ms = statistics.median(times)
        extra = f", {FLOP[name] / ms / 1e6:.1f} GFLOP/s" if name in FLOP else ""
        print(f"{name}: median {ms:.3f} ms of {len(times)}{extra}")


if __name__ == "__main__":
    serve() if "--serve" in sys.argv else main()
