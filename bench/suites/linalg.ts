/**
 * `linalg`: the decompositions `eigh` (of A + Aᵀ), `svd` and `qr` of a
 * float32 randn [n, n] at n = 64, 256, 512, and `nn.init.orthogonal_` of a
 * [1024, 1024] weight, milliseconds per op (median of runs, each ending with
 * a 1-element read), next to PyTorch 1.13's time for the same op
 * (`bench/linalg_torch.py`, 1 thread, LAPACK; see {@link PYTORCH_MS}). On cpu
 * the backend's `eigh`/`svd`/`qr` kernels run (`--quick`: n = 64 only);
 * webgpu composes them from tensor ops, at n = 32 only. A case whose first
 * run takes over a second is timed once more only.
 * @module
 */

import { type Device, linalg, nn, randn, type Tensor, tidy, zeros } from "../../mod.ts";
import { type BenchResult, measure, type Suite, type SuiteContext, Table } from "./_common.ts";

/**
 * PyTorch 1.13's median ms on this machine (`python3 bench/linalg_torch.py`,
 * 2026-11-27, 1 thread, load 0.9-3), by case name.
 */
export const PYTORCH_MS: Readonly<Record<string, number>> = {
  "eigh [64,64]": 0.385,
  "svd [64,64]": 0.599,
  "qr [64,64]": 0.0837,
  "eigh [256,256]": 5.51,
  "svd [256,256]": 13.2,
  "qr [256,256]": 2.66,
  "eigh [512,512]": 24.7,
  "svd [512,512]": 69.9,
  "qr [512,512]": 15.3,
  "orthogonal_ [1024,1024]": 97.6,
};

/** One case: a name, the square input's size and the op (returning a tensor to read). */
interface LinalgCase {
  readonly name: string;
  readonly n: number;
  readonly op: (x: Tensor) => Tensor;
}

/** The cases at each size of `sizes`, and orthogonal_ at `weight` (0: none). */
export function linalgCases(sizes: readonly number[], weight: number): LinalgCase[] {
  const cases: LinalgCase[] = [];
  for (const n of sizes) {
    const shape = `[${n},${n}]`;
    cases.push(
      { name: `eigh ${shape}`, n, op: (x) => linalg.eigh(x.add(x.transpose(0, 1)))[1] },
      { name: `svd ${shape}`, n, op: (x) => linalg.svd(x)[0] },
      { name: `qr ${shape}`, n, op: (x) => linalg.qr(x)[0] },
    );
  }
  if (weight > 0) {
    cases.push({
      name: `orthogonal_ [${weight},${weight}]`,
      n: weight,
      op: (x) => nn.init.orthogonal_(x),
    });
  }
  return cases;
}

async function once(x: Tensor, op: (x: Tensor) => Tensor): Promise<void> {
  const probe = tidy(() => op(x).reshape([-1]).narrow(0, 0, 1));
  await probe.data();
  probe.dispose();
}

/** Times every case on one device. */
export async function benchLinalg(
  device: Device,
  cases: readonly LinalgCase[],
  budgetS: number,
): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  for (const c of cases) {
    const x = c.name.startsWith("orthogonal_")
      ? zeros([c.n, c.n], { device })
      : randn([c.n, c.n], { device });
    try {
      const t0 = performance.now();
      await once(x, c.op);
      const first = performance.now() - t0;
      const slow = first > 1000;
      const timing = await measure(() => once(x, c.op), {
        warmup: 0,
        minRuns: slow ? 1 : 3,
        maxRuns: slow ? 1 : 30,
        budgetS,
      });
      const torch = PYTORCH_MS[c.name];
      results.push({
        suite: "linalg",
        backend: device.backend,
        case: c.name,
        value: timing.medianMs,
        unit: "ms",
        runs: timing.runs,
        medianMs: timing.medianMs,
        extra: {
          firstMs: first,
          minMs: timing.minMs,
          maxMs: timing.maxMs,
          ...(torch === undefined ? {} : { pytorchMs: torch, vsPytorch: timing.medianMs / torch }),
        },
      });
    } finally {
      x.dispose();
    }
  }
  return results;
}

/** The linalg suite. */
export const linalgSuite: Suite = {
  name: "linalg",
  description:
    "eigh/svd/qr [n,n] at n = 64, 256, 512 and orthogonal_ [1024,1024] -> ms, vs PyTorch",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const table = new Table(
      "linalg: float32 randn, ms per op (median of runs; run = op + a 1-element read)",
      [
        { title: "backend", width: 7, right: false },
        { title: "case", width: 24, right: false },
        { title: "runs", width: 4 },
        { title: "median ms", width: 9 },
        { title: "min ms", width: 8 },
        { title: "PyTorch ms", width: 10 },
        { title: "x PyTorch", width: 9 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    for (const backend of ctx.backends) {
      const [device] = await ctx.devices(backend, 1);
      // Without the kernels (webgpu) a 256 eigh composes ~6,000 rounds of products: minutes.
      const cases = backend !== "cpu"
        ? linalgCases([32], 0)
        : ctx.quick
        ? linalgCases([64], 0)
        : linalgCases([64, 256, 512], 1024);
      for (const r of await benchLinalg(device, cases, ctx.budgetS)) {
        results.push(r);
        const torch = r.extra!.pytorchMs as number | undefined;
        table.row([
          backend,
          r.case,
          r.runs!,
          r.value,
          r.extra!.minMs as number,
          torch ?? NaN,
          torch === undefined ? NaN : r.value / torch,
        ]);
      }
    }
    return results;
  },
};
