/**
 * The optional kernels behind `embeddingBag` (`segmentReduce`: sums, means,
 * their adjoint and maxima; cpu and webgpu) and `ctcLoss`'s alphas (`ctcAlpha`, `ctcAlphaBackward`,
 * cpu) against the compositions the other backends run: the cpu backend with its kernels
 * and a "cpu-composed" backend (the cpu backend with those three kernels
 * taken out of its table) must give the same outputs and gradients, on
 * ties, empty bags, padding, NaN, includeLastOffset, 2-D inputs, and for
 * CTC varied lengths, impossible alignments, zeroInfinity, another blank,
 * concatenated targets and every reduction; float64 gradient checks go
 * through the kernels (and, under createGraph, through their recomputed
 * compositions). The kernels' own contract cases are in
 * backend_contract_test.ts.
 * @module
 */

import assert from "node:assert/strict";
import {
  backendNames,
  cpuBackend,
  type Device,
  nn,
  registerBackend,
  requestDevices,
  type Tensor,
  tensor,
} from "../mod.ts";
import type { Backend, BackendDevice } from "../src/backends/backend.ts";
import { hasKernel } from "../src/ops/util.ts";
import { assertClose, backendTest } from "./harness.ts";
import { gradcheck, gradgradcheck, inp } from "./gradcheck.ts";

const F = nn.functional;
const KERNELS = ["segmentReduce", "ctcAlpha", "ctcAlphaBackward"] as const;

/** The cpu backend without the kernels under test: the ops compose them. */
function composedCpu(): Backend {
  const base = cpuBackend({ threads: 1 });
  return {
    async createDevice(index: number): Promise<BackendDevice> {
      const device = await base.createDevice(index);
      const kernels = { ...device.kernels };
      for (const name of KERNELS) delete kernels[name];
      return { ...device, kernels };
    },
  };
}

if (!backendNames().includes("cpu-composed")) {
  registerBackend("cpu-composed", composedCpu, { priority: -10 });
}
const [CPU] = await requestDevices({ backend: "cpu" });
const [COMPOSED] = await requestDevices({ backend: "cpu-composed" });

const i32 = (values: number[], device: Device) => tensor(values, { dtype: "int32", device });

/** A weight with exact ties between rows, a repeated row, NaN and infinities. */
const WEIGHT = [
  [1, 2, 0.5],
  [1, 3, -Infinity],
  [0, 3, 0.5],
  [NaN, 0, -1],
  [5, NaN, 2],
  [-2, -2, -Infinity],
  [4, 1, 1],
  [0.25, -3, 7],
];

interface BagCase {
  name: string;
  input: number[] | number[][];
  offsets: number[] | null;
  options: Parameters<typeof F.embeddingBag>[3];
}

const BAG_CASES: BagCase[] = [
  { name: "ties and a repeated row", input: [0, 1, 2, 1, 2, 0, 0], offsets: [0, 3], options: {} },
  {
    name: "empty bags first, middle and last",
    input: [6, 7, 2, 0, 1],
    offsets: [0, 0, 2, 2, 5],
    options: {},
  },
  { name: "NaN after a number and first", input: [0, 3, 1, 4, 3], offsets: [0, 3], options: {} },
  { name: "-inf only", input: [5, 1, 5], offsets: [0, 1], options: {} },
  {
    name: "padding, a bag of padding only",
    input: [2, 6, 2, 2, 7, 2],
    offsets: [0, 2, 4],
    options: { paddingIdx: 2 },
  },
  {
    name: "includeLastOffset with a tail",
    input: [6, 0, 1, 7, 4, 3],
    offsets: [0, 2, 2, 4],
    options: { includeLastOffset: true },
  },
  {
    name: "2-D with padding",
    input: [[0, 1, 6], [7, 7, 2], [2, 2, 2]],
    offsets: null,
    options: {
      paddingIdx: 2,
    },
  },
  {
    name: "long bags (several scan steps)",
    input: Array.from({ length: 45 }, (_, i) => (i * 5 + (i >> 2)) % 8),
    offsets: [0, 1, 17, 17, 40],
    options: {},
  },
];

/** Output and weight gradient of embeddingBag max on `device` (g = 1, 2, 3, ... per element). */
async function bagMax(c: BagCase, device: Device): Promise<[number[], number[]]> {
  const weight = tensor(WEIGHT, { device, requiresGrad: true });
  const input = i32(c.input.flat(), device).reshape(
    Array.isArray(c.input[0]) ? [c.input.length, (c.input[0] as number[]).length] : [-1],
  );
  const offsets = c.offsets === null ? null : i32(c.offsets, device);
  const out = F.embeddingBag(input, weight, offsets, { ...c.options, mode: "max" });
  const g = tensor(Array.from({ length: out.numel() }, (_, i) => i + 1), { device })
    .reshape(out.shape);
  out.mul(g).sum().backward();
  return [await out.toArray() as number[], await weight.grad!.toArray() as number[]];
}

Deno.test("segmentReduce: cpu has the kernels; the composed backend has none of them", () => {
  for (const name of KERNELS) {
    assert.equal(hasKernel(CPU, name), true, name);
    assert.equal(hasKernel(COMPOSED, name), false, name);
  }
});

backendTest("segmentReduce: the cpu and webgpu backends launch it", (device) => {
  if (device.backend === "cpu" || device.backend === "webgpu") {
    assert.equal(hasKernel(device, "segmentReduce"), true);
  }
});

for (const c of BAG_CASES) {
  Deno.test(`embeddingBag max, kernel = composition: ${c.name}`, async () => {
    const [out, grad] = await bagMax(c, CPU);
    const [outC, gradC] = await bagMax(c, COMPOSED);
    assertClose(out, outC, { atol: 0, rtol: 0, what: "output" });
    assertClose(grad, gradC, { atol: 0, rtol: 0, what: "weight gradient" });
  });
}

Deno.test("embeddingBag max: ties go to the first row, as PyTorch 1.13", async () => {
  for (const device of [CPU, COMPOSED]) {
    // PyTorch 1.13: embedding_bag([0, 1, 2]) of rows [1, 2], [1, 3], [0, 3] in max mode is
    // [1, 3] with gradient [[1, 0], [0, 1], [0, 0]]; the reverse order [2, 1, 0] gives
    // [[0, 0], [1, 0], [0, 1]].
    const weight = tensor([[1, 2], [1, 3], [0, 3]], { device, requiresGrad: true });
    for (
      const [order, want] of [
        [[0, 1, 2], [[1, 0], [0, 1], [0, 0]]],
        [[2, 1, 0], [[0, 0], [1, 0], [0, 1]]],
      ]
    ) {
      weight.grad = null;
      const out = F.embeddingBag(i32(order.flat(), device), weight, i32([0], device), {
        mode: "max",
      });
      assert.deepEqual(await out.toArray(), [[1, 3]]);
      out.sum().backward();
      assert.deepEqual(await weight.grad!.toArray(), want, `${device.backend} ${order}`);
    }
  }
});

// PyTorch 1.13 (cpu and cuda) replaces a bag's held maximum only by a greater value: a NaN is
// kept where it comes first (padding skipped) and never wins later.
const NAN_MAX = {
  weight: [[1, 2], [NaN, 0], [5, NaN], [1, 3]],
  input: [0, 1, 2, 3, 1, 0, 3, 0, 2, 1, 3],
  offsets: [0, 4, 6, 8],
  // torch.nn.functional.embedding_bag(..., mode="max"), then backward of g = 1..8 as [4, 2].
  want: {
    none: {
      out: [[5, 3], [NaN, 2], [1, 3], [5, NaN]],
      grad: [[0, 4], [3, 0], [8, 8], [5, 8]],
    },
    padding0: {
      out: [[NaN, 3], [NaN, 0], [1, 3], [5, NaN]],
      grad: [[0, 0], [4, 4], [7, 8], [5, 8]],
    },
  },
};

backendTest(
  "embeddingBag max: a NaN wins only as its bag's first value, as PyTorch 1.13",
  async (device) => {
    for (const d of device.backend === "cpu" ? [device, COMPOSED] : [device]) {
      for (const [key, paddingIdx] of [["none", null], ["padding0", 0]] as const) {
        const weight = tensor(NAN_MAX.weight, { device: d, requiresGrad: true });
        const out = F.embeddingBag(i32(NAN_MAX.input, d), weight, i32(NAN_MAX.offsets, d), {
          mode: "max",
          paddingIdx,
        });
        const g = tensor([[1, 2], [3, 4], [5, 6], [7, 8]], { device: d });
        out.mul(g).sum().backward();
        const what = `${d.backend} ${key}`;
        assertClose(await out.toArray() as number[][], NAN_MAX.want[key].out, { atol: 0, what });
        assertClose(await weight.grad!.toArray() as number[][], NAN_MAX.want[key].grad, {
          atol: 0,
          what: `${what} weight gradient`,
        });
      }
    }
  },
);

backendTest("embeddingBag max: every backend equals the cpu kernel", async (device) => {
  for (const c of BAG_CASES) {
    const [out, grad] = await bagMax(c, CPU);
    const [outD, gradD] = await bagMax(c, device);
    assertClose(outD, out, { atol: 0, rtol: 0, what: `${c.name}: output` });
    assertClose(gradD, grad, { atol: 0, rtol: 0, what: `${c.name}: weight gradient` });
  }
});

Deno.test("embeddingBag max: an index out of range is an error naming it", async () => {
  for (const device of [CPU, COMPOSED]) {
    const weight = tensor(WEIGHT, { device });
    await assert.rejects(
      async () =>
        await F.embeddingBag(i32([1, 8], device), weight, i32([0], device), { mode: "max" })
          .data(),
      /embeddingBag: index 8 is out of range for weight with 8 rows \(0 to 7\)/,
    );
  }
});

Deno.test("gradcheck embeddingBag max through the kernel, ties broken by distinct values", () =>
  gradcheck(
    (w) =>
      F.embeddingBag(i32([0, 3, 1, 2, 4, 4, 1], w.device), w, i32([0, 2, 2, 5], w.device), {
        mode: "max",
        paddingIdx: 1,
      }),
    [inp([5, 3], 7301)],
  ));

// ---------------------------------------------------------------------- embeddingBag sum, mean

/** WEIGHT without NaN and infinities: a weight's gradient multiplies rows by 0 where none counts. */
const FINITE = WEIGHT.map((row) => row.map((v) => (Number.isFinite(v) ? v : 1.5)));

type SumMode = "sum" | "mean" | "weighted";

/**
 * Output, weight gradient and (mode "weighted": sum with perSampleWeights) their gradient of
 * embeddingBag on `device`, g = 1, 2, 3, ... per output element.
 */
async function bagSum(
  c: BagCase,
  device: Device,
  mode: SumMode,
  table: number[][] = FINITE,
): Promise<number[][]> {
  const weight = tensor(table, { device, requiresGrad: true });
  const shape = Array.isArray(c.input[0])
    ? [c.input.length, (c.input[0] as number[]).length]
    : [-1];
  const input = i32(c.input.flat(), device).reshape(shape);
  const offsets = c.offsets === null ? null : i32(c.offsets, device);
  const leaf = mode !== "weighted" ? null : tensor(
    c.input.flat().map((_, i) => ((i * 7) % 5) / 4 - 0.5),
    { device, requiresGrad: true },
  );
  const psw = leaf === null ? null : leaf.reshape(shape);
  const out = F.embeddingBag(input, weight, offsets, {
    ...c.options,
    mode: mode === "mean" ? "mean" : "sum",
    perSampleWeights: psw,
  });
  const g = tensor(Array.from({ length: out.numel() }, (_, i) => i + 1), { device })
    .reshape(out.shape);
  out.mul(g).sum().backward();
  const results = [await out.toArray() as number[], await weight.grad!.toArray() as number[]];
  if (leaf !== null) results.push(await leaf.grad!.toArray() as number[]);
  return results;
}

const WHAT = ["output", "weight gradient", "perSampleWeights gradient"];

for (const mode of ["sum", "mean", "weighted"] as const) {
  for (const c of BAG_CASES) {
    Deno.test(`embeddingBag ${mode}, kernel = composition: ${c.name}`, async () => {
      const fused = await bagSum(c, CPU, mode);
      const composed = await bagSum(c, COMPOSED, mode);
      assert.equal(fused.length, composed.length);
      fused.forEach((got, k) => assertClose(got, composed[k], { atol: 0, rtol: 0, what: WHAT[k] }));
    });
  }
}

Deno.test("embeddingBag sum and mean, kernel = composition: large (the WebAssembly loops)", async () => {
  // Every array of at least 16384 elements, so the cpu kernel runs `segment.wat` on the
  // backend's shared memory; 67 columns end in a partial 4-column block.
  for (const dim of [67, 64]) {
    const [rows, n, bags] = [300, 17000, 320];
    const table = Array.from(
      { length: rows },
      (_, r) => Array.from({ length: dim }, (_, c) => Math.sin(r * 1.3 + c * 0.7) * 3),
    );
    const input = Array.from({ length: n }, (_, i) => (i * 7919 + (i >> 3)) % rows);
    // Bags of 0 to 105 indices (some empty), the last running to the end; padding row 5.
    const offsets = Array.from({ length: bags }, (_, b) => Math.min(n, Math.floor((b * b) / 6)));
    const c: BagCase = { name: `${dim} columns`, input, offsets, options: { paddingIdx: 5 } };
    for (const mode of ["sum", "mean", "weighted"] as const) {
      const fused = await bagSum(c, CPU, mode, table);
      const composed = await bagSum(c, COMPOSED, mode, table);
      fused.forEach((got, k) =>
        assertClose(got, composed[k], { atol: 0, rtol: 0, what: `${dim} ${mode}: ${WHAT[k]}` })
      );
    }
  }
});

Deno.test("embeddingBag sum and mean, kernel = composition: NaN and infinite rows", async () => {
  for (const mode of ["sum", "mean"] as const) {
    for (const c of BAG_CASES.slice(0, 4)) {
      const fused = await bagSum(c, CPU, mode, WEIGHT);
      const composed = await bagSum(c, COMPOSED, mode, WEIGHT);
      fused.forEach((got, k) =>
        assertClose(got, composed[k], { atol: 0, rtol: 0, what: `${mode} ${c.name}: ${WHAT[k]}` })
      );
    }
  }
});

Deno.test("embeddingBag mean: a bag of padding only is 0, as PyTorch 1.13", async () => {
  // PyTorch 1.13: embedding_bag([2, 2, 0, 2], offsets [0, 2], mode="mean", padding_idx=2) of
  // rows [1, 2], [1, 3], [0, 3] is [[0, 0], [1, 2]], weight gradient [[1, 1], [0, 0], [0, 0]].
  for (const device of [CPU, COMPOSED]) {
    const weight = tensor([[1, 2], [1, 3], [0, 3]], { device, requiresGrad: true });
    const out = F.embeddingBag(i32([2, 2, 0, 2], device), weight, i32([0, 2], device), {
      mode: "mean",
      paddingIdx: 2,
    });
    assert.deepEqual(await out.toArray(), [[0, 0], [1, 2]]);
    out.sum().backward();
    assert.deepEqual(await weight.grad!.toArray(), [[1, 1], [0, 0], [0, 0]], device.backend);
  }
});

backendTest("embeddingBag sum and mean: every backend equals the cpu kernel", async (device) => {
  for (const mode of ["sum", "mean", "weighted"] as const) {
    for (const c of BAG_CASES) {
      const want = await bagSum(c, CPU, mode);
      const got = await bagSum(c, device, mode);
      got.forEach((values, k) =>
        assertClose(values, want[k], {
          atol: 1e-6,
          rtol: 1e-6,
          what: `${mode} ${c.name}: ${WHAT[k]}`,
        })
      );
    }
  }
});

// llvmpipe (Mesa's gallivm, the webgpu adapter of these tests) ends any shader loop after 65535
// iterations, nested loops' iterations counted together: a kernel invocation that walks a whole
// long bag, or every bag of a column, stops early without an error.
backendTest(
  "embeddingBag: a bag of 70,001 positions, every mode (no loop past 65535)",
  async (device) => {
    const n = 70001;
    // Row 0 everywhere but the last position, row 1: sum n + 1, mean (n + 1) / n, max 2 (the last).
    const index = i32(Array.from({ length: n }, (_, i) => (i === n - 1 ? 1 : 0)), device);
    for (const mode of ["sum", "mean", "max"] as const) {
      const weight = tensor([[1], [2]], { device, requiresGrad: true });
      const out = F.embeddingBag(index, weight, i32([0], device), { mode });
      const want = mode === "sum" ? n + 1 : mode === "mean" ? Math.fround(n + 1) / n : 2;
      assertClose(await out.toArray() as number[][], [[want]], { atol: 0, rtol: 1e-6, what: mode });
      out.sum().backward();
      const grad = mode === "sum" ? [[n - 1], [1]] : mode === "mean" ? [[(n - 1) / n], [1 / n]] : [
        [0],
        [1],
      ];
      // Mean's row 0 adds 1/n 70,000 times in float32 (as PyTorch's backward): 5e-4 off.
      assertClose(await weight.grad!.toArray() as number[][], grad, {
        atol: 0,
        rtol: mode === "mean" ? 2e-3 : 0,
        what: `${mode} weight gradient`,
      });
    }
  },
);

backendTest(
  "embeddingBag sum and mean: 20,000 bags of 2, the weight gradient (no loop past 65535)",
  async (device) => {
    const bags = 20000;
    // Positions cycle through rows 0, 1, 2: row r is looked up 13,334, 13,333, 13,333 times.
    const index = i32(Array.from({ length: 2 * bags }, (_, i) => i % 3), device);
    const offsets = i32(Array.from({ length: bags }, (_, b) => 2 * b), device);
    for (const mode of ["sum", "mean"] as const) {
      const weight = tensor([[1, 2, 3, 4, 5], [0, 1, 0, 1, 0], [2, 2, 2, 2, 2]], {
        device,
        requiresGrad: true,
      });
      F.embeddingBag(index, weight, offsets, { mode }).sum().backward();
      const per = mode === "sum" ? 1 : 0.5;
      const want = [13334, 13333, 13333].map((k) => Array(5).fill(k * per));
      assertClose(await weight.grad!.toArray() as number[][], want, {
        atol: 0,
        rtol: 0,
        what: mode,
      });
    }
  },
);

backendTest(
  "embeddingBag max: 70,000 bags, the weight gradient (no loop past 65535)",
  async (device) => {
    // The maxima's gradient is a scatter-add of [70000, dim] into the table (webgpu: an invocation
    // per table element or per column, each walking every bag). Rows [3, 2] take the first variant,
    // [300, 4] the second.
    const bags = 70000;
    for (const [rows, dim] of [[3, 2], [300, 4]]) {
      const index = i32(Array.from({ length: bags }, (_, i) => i % rows), device);
      const offsets = i32(Array.from({ length: bags }, (_, b) => b), device);
      const values = Array.from(
        { length: rows },
        (_, r) => Array.from({ length: dim }, (_, c) => r + c),
      );
      const weight = tensor(values, { device, requiresGrad: true });
      F.embeddingBag(index, weight, offsets, { mode: "max" }).sum().backward();
      const want = values.map((row, r) =>
        row.map(() => Math.floor(bags / rows) + (r < bags % rows ? 1 : 0))
      );
      assertClose(await weight.grad!.toArray() as number[][], want, {
        atol: 0,
        rtol: 0,
        what: `[${rows}, ${dim}]`,
      });
    }
  },
);

backendTest(
  "embeddingBag sum: perSampleWeights get 0 at padding with a NaN padding row, as PyTorch",
  async (device) => {
    // PyTorch 1.13: out [[0.5, 1], [-3, 1]], weight grad [[0.5, 1], [0, 0], [-3, -4]], psw grad
    // [5, 0, 5, 0] (the composition multiplied the padding row, NaN and inf, by a zero gradient).
    for (const d of device.backend === "cpu" ? [device, COMPOSED] : [device]) {
      const weight = tensor([[1, 2], [NaN, Infinity], [3, -1]], { device: d, requiresGrad: true });
      const psw = tensor([0.5, 2, -1, 4], { device: d, requiresGrad: true });
      const out = F.embeddingBag(i32([0, 1, 2, 1], d), weight, i32([0, 2], d), {
        mode: "sum",
        perSampleWeights: psw,
        paddingIdx: 1,
      });
      out.mul(tensor([[1, 2], [3, 4]], { device: d })).sum().backward();
      const what = d.backend;
      assertClose(await out.toArray() as number[][], [[0.5, 1], [-3, 1]], { atol: 0, what });
      assertClose(await weight.grad!.toArray() as number[][], [[0.5, 1], [0, 0], [-3, -4]], {
        atol: 0,
        what: `${what} weight gradient`,
      });
      assertClose(await psw.grad!.toArray() as number[], [5, 0, 5, 0], {
        atol: 0,
        what: `${what} perSampleWeights gradient`,
      });
    }
  },
);

backendTest(
  "embeddingBag sum: an empty input still gives perSampleWeights a gradient",
  async (device) => {
    // PyTorch 1.13: per_sample_weights.grad is tensor([]) (the weight's, zeros).
    const weight = tensor([[1, 2], [3, 4]], { device, requiresGrad: true });
    const psw = tensor([], { device, requiresGrad: true });
    const out = F.embeddingBag(i32([], device), weight, i32([0, 0], device), {
      mode: "sum",
      perSampleWeights: psw,
    });
    out.sum().backward();
    assert.deepEqual(await out.toArray(), [[0, 0], [0, 0]]);
    assert.deepEqual(await psw.grad?.toArray(), []);
    assert.deepEqual(await weight.grad?.toArray(), [[0, 0], [0, 0]]);
  },
);

Deno.test("embeddingBag sum: an index out of range is an error naming it", async () => {
  for (const device of [CPU, COMPOSED]) {
    const weight = tensor(WEIGHT, { device });
    await assert.rejects(
      async () =>
        await F.embeddingBag(i32([1, 9], device), weight, i32([0], device), { mode: "sum" })
          .data(),
      // The composition reports it from its lookup.
      device === CPU ? /embeddingBag: index 9 is out of range for weight with 8 rows/ : /index 9/,
    );
  }
});

/** A float64 weight [5, 3] and perSampleWeights for 7 indices in 3 bags (one empty), padding 1. */
const bagged = (w: Tensor, psw: Tensor | null, mode: "sum" | "mean") =>
  F.embeddingBag(i32([0, 3, 1, 2, 4, 4, 1], w.device), w, i32([0, 2, 2, 5], w.device), {
    mode,
    paddingIdx: 1,
    perSampleWeights: psw,
  });

Deno.test("gradcheck embeddingBag sum with perSampleWeights through the kernel", () =>
  gradcheck((w, psw) => bagged(w, psw, "sum"), [inp([5, 3], 7331), inp([7], 7332)]));

Deno.test("gradgradcheck embeddingBag sum with perSampleWeights through the kernel", () =>
  gradgradcheck((w, psw) => bagged(w, psw, "sum"), [inp([5, 3], 7341), inp([7], 7342)]));

Deno.test("gradgradcheck embeddingBag mean, 2-D input, through the kernel", () =>
  gradgradcheck(
    (w) =>
      F.embeddingBag(i32([0, 3, 1, 2, 4, 4], w.device).reshape([2, 3]), w, null, {
        mode: "mean",
        paddingIdx: 4,
      }).mul(w.sum()),
    [inp([5, 3], 7351)],
  ));

// ------------------------------------------------------------------------------------- ctcLoss

interface CtcCase {
  name: string;
  T: number;
  N: number;
  C: number;
  targets: number[] | number[][];
  inputLengths: number[];
  targetLengths: number[];
  options: Parameters<typeof F.ctcLoss>[4];
}

const CTC_CASES: CtcCase[] = [
  {
    name: "padded, varied lengths, a repeated label",
    T: 9,
    N: 3,
    C: 5,
    targets: [[1, 1, 2, 3], [4, 2, 0, 0], [3, 0, 0, 0]],
    inputLengths: [9, 6, 4],
    targetLengths: [4, 2, 1],
    options: { reduction: "none" },
  },
  {
    name: "impossible alignment, sum",
    T: 5,
    N: 2,
    C: 4,
    targets: [[1, 1, 1, 2], [2, 3, 0, 0]],
    inputLengths: [5, 5],
    targetLengths: [4, 2],
    options: { reduction: "sum" },
  },
  {
    name: "impossible alignment, zeroInfinity, mean",
    T: 5,
    N: 2,
    C: 4,
    targets: [[1, 1, 1, 2], [2, 3, 0, 0]],
    inputLengths: [5, 3],
    targetLengths: [4, 2],
    options: { zeroInfinity: true },
  },
  {
    name: "blank 2, concatenated targets, an empty target",
    T: 7,
    N: 3,
    C: 4,
    targets: [0, 1, 3, 3, 1],
    inputLengths: [7, 7, 2],
    targetLengths: [3, 0, 2],
    options: { blank: 2, reduction: "none" },
  },
  {
    name: "blank 3 (last class), mean",
    T: 6,
    N: 2,
    C: 4,
    targets: [[0, 2, 2], [1, 0, 1]],
    inputLengths: [6, 5],
    targetLengths: [3, 3],
    options: { blank: 3 },
  },
];

function logProbs(
  c: CtcCase,
  device: Device,
  seed: number,
  dtype: "float32" | "float64" = "float64",
): Tensor {
  const n = c.T * c.N * c.C;
  const raw = Array.from({ length: n }, (_, i) => Math.sin(i * 1.7 + seed) * 2);
  return tensor(raw, { device, dtype }).reshape([c.T, c.N, c.C]).logSoftmax(2);
}

async function ctc(c: CtcCase, device: Device): Promise<[number[], number[]]> {
  const logits = logProbs(c, device, 3).detach();
  logits.requiresGrad = true;
  const targets = i32(c.targets.flat(), device);
  const loss = F.ctcLoss(
    logits.logSoftmax(2),
    Array.isArray(c.targets[0]) ? targets.reshape([c.N, -1]) : targets,
    c.inputLengths,
    c.targetLengths,
    c.options,
  );
  const g = tensor(Array.from({ length: loss.numel() }, (_, i) => 1 + i / 2), {
    device,
    dtype: "float64",
  }).reshape(loss.shape);
  loss.mul(g).sum().backward();
  return [[await loss.toArray()].flat(2) as number[], await logits.grad!.toArray() as number[]];
}

for (const c of CTC_CASES) {
  Deno.test(`ctcLoss, kernel = composition: ${c.name}`, async () => {
    const [loss, grad] = await ctc(c, CPU);
    const [lossC, gradC] = await ctc(c, COMPOSED);
    assertClose(loss, lossC, { atol: 1e-12, rtol: 1e-12, what: "loss" });
    assertClose(grad, gradC, { atol: 1e-12, rtol: 1e-12, what: "gradient" });
  });
}

backendTest("ctcLoss: every backend equals the cpu kernel (float32)", async (device) => {
  for (const c of CTC_CASES) {
    const lp = (d: Device) => logProbs(c, d, 5, "float32").detach();
    const run = async (d: Device) => {
      const x = lp(d);
      x.requiresGrad = true;
      const targets = i32(c.targets.flat(), d);
      const loss = F.ctcLoss(
        x,
        Array.isArray(c.targets[0]) ? targets.reshape([c.N, -1]) : targets,
        c.inputLengths,
        c.targetLengths,
        { ...c.options, reduction: "sum" },
      );
      loss.backward();
      return [await loss.toArray() as number, await x.grad!.toArray() as number[]] as const;
    };
    const [loss, grad] = await run(CPU);
    const [lossD, gradD] = await run(device);
    assertClose(lossD, loss, { atol: 1e-4, rtol: 1e-5, what: `${c.name}: loss` });
    assertClose(gradD, grad, { atol: 1e-5, rtol: 1e-4, what: `${c.name}: gradient` });
  }
});

Deno.test("gradcheck ctcLoss through the kernels: varied input lengths, blank 1", () =>
  gradcheck(
    (x) =>
      F.ctcLoss(
        x.logSoftmax(2),
        i32([0, 2, 2, 3, 0, 0], x.device).reshape([2, 3]),
        [6, 4],
        [3, 1],
        {
          blank: 1,
          reduction: "sum",
        },
      ),
    [inp([6, 2, 4], 7311)],
    { tol: 1e-5 },
  ));

Deno.test("gradgradcheck ctcLoss through the kernels (the composition re-run)", () =>
  gradgradcheck(
    (x) =>
      F.ctcLoss(x.logSoftmax(2), i32([1, 2, 2, 0], x.device).reshape([2, 2]), [5, 3], [2, 1], {
        reduction: "sum",
      }),
    [inp([5, 2, 3], 7321)],
    { tol: 1e-5 },
  ));
