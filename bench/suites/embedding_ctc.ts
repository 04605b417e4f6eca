/**
 * `embeddingbag` and `ctc`: `nn.functional.embeddingBag` (modes sum, mean,
 * max; 100k x 64 weight, 4096 bags of 10 to 30 indices given by offsets) and
 * `nn.functional.ctcLoss` (T 100, N 16, C 30, padded targets of 20 to 40
 * labels), forward + backward, milliseconds per run (median; a run ends with
 * reads of the loss and of the gradient). Where `/usr/bin/python3` has torch,
 * PyTorch 1.13 runs the same cases (`bench/embedding_ctc_torch.py --serve`)
 * round-robin with multigrad's, so both see the same machine load. Smaller
 * sizes on webgpu and in `--quick` runs (then without PyTorch).
 * @module
 */

import { type Device, nn, randint, randn, type Tensor, tensor, tidy } from "../../mod.ts";
import {
  type BenchResult,
  measureInterleaved,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";
import { type PytorchPeer, startPytorch } from "../peers/pytorch.ts";

const SCRIPT = new URL("../embedding_ctc_torch.py", import.meta.url);

/** The sizes of one run (as `sizes()` of the PyTorch script). */
interface Sizes {
  readonly num: number;
  readonly dim: number;
  readonly bags: number;
  readonly per: number;
  readonly T: number;
  readonly N: number;
  readonly C: number;
  readonly S: number;
}

function sizesFor(small: boolean): Sizes {
  return small
    ? { num: 10000, dim: 64, bags: 512, per: 20, T: 50, N: 4, C: 30, S: 20 }
    : { num: 100000, dim: 64, bags: 4096, per: 20, T: 100, N: 16, C: 30, S: 40 };
}

/** One case: its name (the PyTorch script's too) and a run on `device`, with its inputs made once. */
interface Case {
  readonly name: string;
  readonly make: (device: Device, s: Sizes) => { run: () => Promise<void>; dispose: () => void };
}

function bagCase(mode: "sum" | "mean" | "max"): Case {
  return {
    name: `embeddingBag ${mode}`,
    make(device, s) {
      const weight = randn([s.num, s.dim], { device, requiresGrad: true });
      const lengths = Array.from({ length: s.bags }, (_, b) => s.per / 2 + (b * 7) % (s.per + 1));
      const starts = lengths.map((_, b) => lengths.slice(0, b).reduce((a, c) => a + c, 0));
      const n = lengths.reduce((a, c) => a + c, 0);
      const index = randint(0, s.num, [n], { device, dtype: "int32" });
      const offsets = tensor(starts, { dtype: "int32", device });
      return {
        async run() {
          const loss = tidy(() => {
            const l = nn.functional.embeddingBag(index, weight, offsets, { mode }).sum();
            l.backward();
            return l;
          });
          await loss.data();
          loss.dispose();
          await weight.grad!.reshape([-1]).narrow(0, 0, 1).data();
          weight.grad = null;
        },
        dispose: () => [weight, index, offsets].forEach((t) => t.dispose()),
      };
    },
  };
}

const ctcCase: Case = {
  name: "ctcLoss",
  make(device, s) {
    const lp = tidy(() => randn([s.T, s.N, s.C], { device }).logSoftmax(2));
    lp.requiresGrad = true;
    const targets = randint(1, s.C, [s.N, s.S], { device, dtype: "int32" });
    const targetLengths = Array.from({ length: s.N }, (_, i) => s.S / 2 + (i * 7) % (s.S / 2 + 1));
    const inputLengths = Array.from({ length: s.N }, () => s.T);
    return {
      async run() {
        const loss = tidy(() => {
          const l = nn.functional.ctcLoss(lp, targets, inputLengths, targetLengths);
          l.backward();
          return l;
        });
        await loss.data();
        loss.dispose();
        await (lp.grad as Tensor).reshape([-1]).narrow(0, 0, 1).data();
        lp.grad = null;
      },
      dispose: () => [lp, targets].forEach((t) => t.dispose()),
    };
  },
};

async function runCases(
  ctx: SuiteContext,
  suite: string,
  cases: readonly Case[],
): Promise<BenchResult[]> {
  const torch: PytorchPeer | string = ctx.quick
    ? "not in --quick runs"
    : await startPytorch("/usr/bin/python3", SCRIPT);
  const table = new Table(
    `${suite}: forward + backward, ms per run (median of runs interleaved with PyTorch's)`,
    [
      { title: "backend", width: 7, right: false },
      { title: "case", width: 18, right: false },
      { title: "runs", width: 4 },
      { title: "median ms", width: 9 },
      { title: "min ms", width: 8 },
      { title: "torch ms", width: 8 },
      { title: "x torch", width: 7 },
    ],
    ctx.log,
  );
  if (typeof torch === "string") table.note(`PyTorch not run: ${torch}`);
  else table.note(`PyTorch: ${torch.info} (cpu; its sizes are the cpu ones)`);
  const results: BenchResult[] = [];
  try {
    for (const backend of ctx.backends) {
      const [device] = await ctx.devices(backend, 1);
      const small = ctx.quick || backend !== "cpu";
      const s = sizesFor(small);
      for (const c of cases) {
        const { run, dispose } = c.make(device, s);
        try {
          const runs: (() => Promise<void | number>)[] = [run];
          // PyTorch's sizes are the cpu ones: compare only there.
          if (typeof torch !== "string" && !small) runs.push(() => torch.run(c.name));
          const [own, peer] = await measureInterleaved(runs, {
            warmup: 1,
            minRuns: 3,
            maxRuns: 30,
            budgetS: ctx.budgetS,
          });
          const ratio = peer ? own.medianMs / peer.medianMs : NaN;
          table.row([
            backend,
            c.name,
            own.runs,
            own.medianMs,
            own.minMs,
            peer ? peer.medianMs : "",
            peer ? ratio : "",
          ]);
          results.push({
            suite,
            backend,
            case: c.name,
            value: own.medianMs,
            unit: "ms",
            runs: own.runs,
            medianMs: own.medianMs,
            extra: {
              minMs: own.minMs,
              maxMs: own.maxMs,
              ...(peer ? { torchMs: peer.medianMs, torchMinMs: peer.minMs } : {}),
            },
            note: JSON.stringify(s),
          });
        } finally {
          dispose();
        }
      }
    }
  } finally {
    if (typeof torch !== "string") await torch.close();
  }
  return results;
}

/** The embeddingBag suite. */
export const embeddingBagSuite: Suite = {
  name: "embeddingbag",
  description: "embeddingBag sum/mean/max, 100k x 64, 4096 bags of ~20, fwd+bwd -> ms (vs PyTorch)",
  run: (ctx) => runCases(ctx, "embeddingbag", [bagCase("sum"), bagCase("mean"), bagCase("max")]),
};

/** The ctcLoss suite. */
export const ctcSuite: Suite = {
  name: "ctc",
  description: "ctcLoss T 100, N 16, C 30, targets of 20-40, fwd+bwd -> ms (vs PyTorch)",
  run: (ctx) => runCases(ctx, "ctc", [ctcCase]),
};
