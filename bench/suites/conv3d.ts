/**
 * `conv3d`: realistic 3-d CNN layers, forward + backward (input, weight and
 * bias gradients, read back), milliseconds per run (median):
 * `nn.functional.conv3d` N 4, 16 -> 32 channels, 16³, k 3, padding 1; N 2,
 * 3 -> 16, 32³, k 3, stride 2, padding 1; and `convTranspose3d` N 4,
 * 32 -> 16, 8³ -> 16³, k 3, stride 2, padding 1, outputPadding 1. Where
 * `/usr/bin/python3` has torch, PyTorch 1.13 runs the same layers
 * (`bench/conv3d_torch.py --serve`) round-robin with multigrad's. Smaller
 * batches on webgpu and in `--quick` runs (then without PyTorch).
 * @module
 */

import { type Device, nn, randn, tidy } from "../../mod.ts";
import {
  type BenchResult,
  measureInterleaved,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";
import { type PytorchPeer, startPytorch } from "../peers/pytorch.ts";

const SCRIPT = new URL("../conv3d_torch.py", import.meta.url);

/** One layer (as CASES of the PyTorch script). */
interface Layer {
  readonly name: string;
  readonly transposed: boolean;
  readonly n: number;
  readonly cin: number;
  readonly cout: number;
  readonly size: number;
  readonly k: number;
  readonly stride: number;
  readonly padding: number;
  readonly outputPadding: number;
}

const LAYERS: readonly Layer[] = [
  {
    name: "conv3d 16->32 16^3 k3 p1",
    ...{ transposed: false, n: 4, cin: 16, cout: 32, size: 16, k: 3 },
    ...{ stride: 1, padding: 1, outputPadding: 0 },
  },
  {
    name: "conv3d 3->16 32^3 k3 s2 p1",
    ...{ transposed: false, n: 2, cin: 3, cout: 16, size: 32, k: 3 },
    ...{ stride: 2, padding: 1, outputPadding: 0 },
  },
  {
    name: "convT3d 32->16 8^3 k3 s2 p1 op1",
    ...{ transposed: true, n: 4, cin: 32, cout: 16, size: 8, k: 3 },
    ...{ stride: 2, padding: 1, outputPadding: 1 },
  },
];

/** One forward + backward of `layer` (batch `n`) on `device`, gradients read back. */
function makeRun(
  device: Device,
  layer: Layer,
  n: number,
): { run: () => Promise<void>; dispose: () => void } {
  const { cin, cout, size, k, stride, padding, outputPadding } = layer;
  const x = randn([n, cin, size, size, size], { device, requiresGrad: true });
  const w = randn(layer.transposed ? [cin, cout, k, k, k] : [cout, cin, k, k, k], {
    device,
    requiresGrad: true,
  });
  const b = randn([cout], { device, requiresGrad: true });
  const F = nn.functional;
  const forward = () =>
    layer.transposed
      ? F.convTranspose3d(x, w, { bias: b, stride, padding, outputPadding })
      : F.conv3d(x, w, b, { stride, padding });
  const g = tidy(() => randn([...forward().shape], { device }));
  return {
    async run() {
      tidy(() => forward().mul(g).sum().backward());
      await x.grad!.data();
      await w.grad!.data();
      await b.grad!.data();
      for (const t of [x, w, b]) t.grad = null;
    },
    dispose: () => [x, w, b, g].forEach((t) => t.dispose()),
  };
}

/** The conv3d suite. */
export const conv3dSuite: Suite = {
  name: "conv3d",
  description: "conv3d / convTranspose3d 3-d CNN layers, fwd+bwd -> ms (vs PyTorch)",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const torch: PytorchPeer | string = ctx.quick
      ? "not in --quick runs"
      : await startPytorch("/usr/bin/python3", SCRIPT);
    const table = new Table(
      "conv3d: forward + backward (input, weight, bias gradients), ms per run " +
        "(median of runs interleaved with PyTorch's)",
      [
        { title: "backend", width: 7, right: false },
        { title: "case", width: 34, right: false },
        { title: "runs", width: 4 },
        { title: "median ms", width: 9 },
        { title: "min ms", width: 8 },
        { title: "torch ms", width: 8 },
        { title: "x torch", width: 7 },
      ],
      ctx.log,
    );
    if (typeof torch === "string") table.note(`PyTorch not run: ${torch}`);
    else table.note(`PyTorch: ${torch.info} (cpu, full batch only)`);
    const results: BenchResult[] = [];
    try {
      for (const backend of ctx.backends) {
        const [device] = await ctx.devices(backend, 1);
        const small = ctx.quick || backend !== "cpu";
        for (const layer of LAYERS) {
          const n = small ? 1 : layer.n;
          const { run, dispose } = makeRun(device, layer, n);
          try {
            const runs: (() => Promise<void | number>)[] = [run];
            if (typeof torch !== "string" && !small) runs.push(() => torch.run(layer.name));
            const [own, peer] = await measureInterleaved(runs, {
              warmup: 1,
              minRuns: 3,
              maxRuns: 30,
              budgetS: ctx.budgetS,
            });
            const ratio = peer ? own.medianMs / peer.medianMs : NaN;
            const name = small ? `${layer.name} n1` : layer.name;
            table.row([
              backend,
              name,
              own.runs,
              own.medianMs,
              own.minMs,
              peer ? peer.medianMs : "",
              peer ? ratio : "",
            ]);
            results.push({
              suite: "conv3d",
              backend,
              case: name,
              value: own.medianMs,
              unit: "ms",
              runs: own.runs,
              medianMs: own.medianMs,
              extra: {
                minMs: own.minMs,
                maxMs: own.maxMs,
                ...(peer ? { torchMs: peer.medianMs, torchMinMs: peer.minMs } : {}),
              },
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
  },
};
