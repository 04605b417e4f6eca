"""PyTorch 1.13 reference timings for the `embeddingbag` and `ctc` bench
suites (bench/suites/embedding_ctc.ts): the same sizes, forward + backward.

  /usr/bin/python3 bench/embedding_ctc_torch.py [--quick]   # prints ms per case
  /usr/bin/python3 bench/embedding_ctc_torch.py --serve [--quick]

With --serve it reads one JSON command per line ({"info": true} or
{"case": NAME}) and answers one JSON line ({"ms": ...}), timing one run
itself, so that the suites interleave PyTorch and multigrad runs.
"""
import json
import sys
import time

import torch
import torch.nn.functional as F


def sizes(quick):
    if quick:
        return {"num": 10000, "dim": 64, "bags": 512, "per": 20,
                "T": 50, "N": 4, "C": 30, "S": 20}
    return {"num": 100000, "dim": 64, "bags": 4096, "per": 20,
            "T": 100, "N": 16, "C": 30, "S": 40}


def setup(quick):
    s = sizes(quick)
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(s["num"], s["dim"], generator=gen).requires_grad_()
    n = s["bags"] * s["per"]
    # Bags of per +- per/2 indices (the same lengths as the multigrad suite).
    lengths = [s["per"] // 2 + (b * 7) % (s["per"] + 1) for b in range(s["bags"])]
    offsets = torch.tensor([0] + lengths[:-1]).cumsum(0)
    n = sum(lengths)
    index = torch.randint(0, s["num"], (n,), generator=gen)
    T, N, C, S = s["T"], s["N"], s["C"], s["S"]
    lp = torch.randn(T, N, C, generator=gen).log_softmax(2).detach().requires_grad_()
    targets = torch.randint(1, C, (N, S), generator=gen)
    target_lengths = torch.tensor([S // 2 + (i * 7) % (S // 2 + 1) for i in range(N)])
    input_lengths = torch.full((N,), T)

    def bag(mode):
        def run():
            out = F.embedding_bag(index, weight, offsets, mode=mode)
            out.sum().backward()
            weight.grad = None
        return run

    def ctc():
        loss = F.ctc_loss(lp, targets, input_lengths, target_lengths)
        loss.backward()
        lp.grad = None

    return {"embeddingBag sum": bag("sum"), "embeddingBag mean": bag("mean"),
            "embeddingBag max": bag("max"), "ctcLoss": ctc}


def timed(run):
    t0 = time.perf_counter()
    run()
    return (time.perf_counter() - t0) * 1000


def main():
    quick = "--quick" in sys.argv
    cases = setup(quick)
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
        ms = sorted(timed(run) for _ in range(20))
        print(f"{name:20s} median {ms[10]:8.2f} ms  min {ms[0]:8.2f} ms")


if __name__ == "__main__":
    main()
