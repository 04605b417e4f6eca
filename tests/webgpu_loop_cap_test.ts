/**
 * llvmpipe (Mesa's gallivm: the Vulkan and GL adapters these tests run on) silently ends any
 * shader loop after 65,535 iterations, the iterations of the loops nested in it counted
 * together, with no error: a kernel whose one invocation walks a whole long axis gave wrong
 * numbers past that. Each case here takes an axis (or a nest of loops) just past the cap through
 * one kernel and compares it with the cpu backend; run it with DENO_WEBGPU_BACKEND=vulkan and
 * =gl. Every kernel of src/backends/webgpu/kernels with a loop whose trip count grows with the
 * data has a case (the scatter and segment kernels' are in embedding_ctc_kernels_test.ts).
 * @module
 */

import { type Device, nn, type Tensor, tensor } from "../mod.ts";
import { backendTest, type Build, type CloseOptions, floats, matchesCpu } from "./harness.ts";

const F = nn.functional;

/** Just past llvmpipe's 65,535 iterations. */
const N = 70000;

/** Runs `build` on `device` and on cpu; cpu itself is the reference, so it is skipped. */
function pastCap(
  name: string,
  build: Build,
  options: CloseOptions & { exact?: boolean } = {},
): void {
  backendTest(`${name} (no shader loop past 65,535 iterations)`, async (device: Device) => {
    if (device.backend === "cpu") return;
    await matchesCpu(device, build, { what: name, ...options });
  });
}

function t(d: Device, shape: number[], seed: number, requiresGrad = false): Tensor {
  return tensor(floats(shape, seed), { shape, device: d, requiresGrad });
}

/** `x` and its gradient after `loss(x).backward()` (with `g` as the output's gradient). */
function withGrad(
  d: Device,
  shape: number[],
  seed: number,
  fn: (x: Tensor) => Tensor,
): Tensor[] {
  const x = t(d, shape, seed, true);
  const y = fn(x);
  const g = t(d, [...y.shape], seed + 1);
  y.mul(g).sum().backward();
  return [y.detach(), x.grad!];
}

// Reductions: one workgroup tree per chunk of a row, or one invocation per column chunk.
pastCap("sum of 70,000", (d) => t(d, [N], 1).sum(), { rtol: 1e-4, atol: 1e-3 });
pastCap("argmax of 70,000", (d) => t(d, [N], 2).argmax(), { exact: true });
pastCap("max over dim 0 of [70000, 3]", (d) => t(d, [N, 3], 3).amax(0), { exact: true });
pastCap("logsumexp of 70,000", (d) => t(d, [N], 4).logsumexp(0), { rtol: 1e-4 });

// Softmax: a workgroup per contiguous row, one invocation per strided column.
pastCap("softmax of a row of 70,000", (d) => withGrad(d, [2, N], 5, (x) => x.softmax(1)));
pastCap(
  "softmax over dim 0 of [70000, 2]",
  (d) => withGrad(d, [N, 2], 6, (x) => x.softmax(0)),
);
pastCap(
  "logSoftmax over dim 0 of [70000, 2]",
  (d) => withGrad(d, [N, 2], 7, (x) => F.logSoftmax(x, 0)),
  { rtol: 1e-4, atol: 1e-4 },
);

// Scans (composed of elementwise steps) and sort (bitonic stages).
pastCap("cumsum of 70,000", (d) => t(d, [N], 8).cumsum(0), { rtol: 1e-4, atol: 1e-3 });
pastCap("sort of 70,000", (d) => {
  const { values, indices } = t(d, [N], 9).sort(0);
  return [values, indices];
}, { exact: true });
pastCap("topk 5 of 70,000", (d) => {
  const { values, indices } = t(d, [N], 10).topk(5);
  return [values, indices];
}, { exact: true });

// Matmul: one invocation walks all of k (four at a time where aligned).
pastCap("matmul with k = 70,000, m = n = 1", (d) => t(d, [1, N], 11).matmul(t(d, [N, 1], 12)), {
  rtol: 1e-4,
  atol: 1e-2,
});
pastCap(
  "matmul with k = 270,000 (vec4 steps past the cap), m = n = 4",
  (d) => t(d, [4, 270000], 13).matmul(t(d, [270000, 4], 14)),
  { rtol: 1e-4, atol: 5e-2 },
);
pastCap("matmul with k = 70,000, odd n (no vec4 loads)", (d) => {
  const a = t(d, [3, N], 15);
  return a.matmul(t(d, [N, 5], 16));
}, { rtol: 1e-4, atol: 2e-2 });
pastCap("linear + gelu over 270,000 input features (bias and GELU epilogues)", (d) => {
  const w = t(d, [4, 270000], 29, true);
  const b = t(d, [4], 30, true);
  const [y, gx] = withGrad(d, [2, 270000], 31, (x) => F.gelu(F.linear(x, w, b)));
  return [y, gx, w.grad!, b.grad!];
}, { rtol: 1e-3, atol: 5e-2 });
pastCap("a linear layer's weight gradient over 70,000 rows (k = 70,000)", (d) => {
  const w = t(d, [3, 2], 17, true);
  const b = t(d, [3], 18, true);
  const y = F.linear(t(d, [N, 2], 19), w, b);
  y.mul(t(d, [N, 3], 20)).sum().backward();
  return [w.grad!, b.grad!];
}, { rtol: 1e-4, atol: 5e-2 });

// Batch norm: one workgroup per channel walks the channel's N·H·W values (the fused kernels
// run for an affine layer only).
function affineBatchNorm(d: Device, shape: number[], seed: number): Tensor[] {
  const weight = t(d, [shape[1]], seed + 2, true);
  const bias = t(d, [shape[1]], seed + 3, true);
  const [y, gx] = withGrad(
    d,
    shape,
    seed,
    (x) => F.batchNorm(x, null, null, { training: true, weight, bias }),
  );
  return [y, gx, weight.grad!, bias.grad!];
}
pastCap(
  "batchNorm with N = 34,000 rows of 32 in each of 2 channels (row walk)",
  (d) => affineBatchNorm(d, [34000, 2, 32], 21),
  { rtol: 1e-3, atol: 1e-3 },
);
// The unchunked kernel walks the channel three times, and llvmpipe's count runs over every loop
// of the invocation, each loop's exit check included: 8,192 rows of 64 cost 3 steps a row (the
// row's, the inner loop's one step and its exit), 73,728 in all, though no walk alone is near.
pastCap(
  "batchNorm with 8,192 rows of 64 (three unchunked walks of one row step each)",
  (d) => affineBatchNorm(d, [8192, 1, 64], 32),
  { rtol: 1e-3, atol: 1e-3 },
);
pastCap(
  "batchNorm with 5,461 rows of 128 (three unchunked walks of two row steps each)",
  (d) => affineBatchNorm(d, [5461, 1, 128], 33),
  { rtol: 1e-3, atol: 1e-3 },
);
pastCap(
  "batchNorm with N·H·W = 4,200,000 per channel (flat walk)",
  (d) => affineBatchNorm(d, [4200000, 1], 22),
  { rtol: 1e-3, atol: 1e-3 },
);

// Cross-entropy: one invocation (or one workgroup's invocation) per row walks its classes.
function targets(d: Device, rows: number, classes: number): Tensor {
  return tensor(Array.from({ length: rows }, (_, i) => (i * 7919) % classes), {
    dtype: "int32",
    device: d,
  });
}
for (const reduction of ["none", "mean", "sum"] as const) {
  pastCap(
    `crossEntropy over 70,000 classes, reduction ${reduction}`,
    (d) =>
      withGrad(d, [2, N], 23, (x) => {
        const loss = F.crossEntropy(x, targets(d, 2, N), { reduction });
        return reduction === "none" ? loss : loss.reshape([1]);
      }),
    { rtol: 1e-4, atol: 1e-4 },
  );
}
pastCap(
  "crossEntropy mean over 20,000 rows of 80 classes (rows nested in one workgroup)",
  (d) => withGrad(d, [20000, 80], 24, (x) => F.crossEntropy(x, targets(d, 20000, 80)).reshape([1])),
  { rtol: 1e-4, atol: 1e-5 },
);

// Window kernels: on CPU adapters one invocation walks a whole output row (and its window).
pastCap(
  "conv1d over a width of 70,000 (im2col and col2im rows)",
  (d) => {
    const w = t(d, [2, 1, 3], 25, true);
    const [y, gx] = withGrad(d, [1, 1, N], 26, (x) => F.conv1d(x, w, null, { padding: 1 }));
    return [y, gx, w.grad!];
  },
  { rtol: 1e-4, atol: 1e-2 },
);
pastCap(
  "maxPool1d over a width of 70,000, kernel 2",
  (d) => withGrad(d, [1, 1, N], 27, (x) => F.maxPool1d(x, 2)),
  { exact: true },
);
pastCap(
  "maxPool2d 3x3 stride 1 over a row of 8,000 (window loops nested in the row walk)",
  (d) => withGrad(d, [1, 1, 3, 8000], 28, (x) => F.maxPool2d(x, 3, { stride: 1 })),
  { exact: true },
);
