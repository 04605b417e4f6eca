/**
 * The optional `scatterReduce` kernel (cpu) against the composition the
 * other backends run (a stable sort per column and segmented scans): the cpu
 * backend with its kernel and a "cpu-noscatter" backend (the cpu backend
 * with `scatterReduce` taken out of its table) must give the same outputs
 * and gradients for `scatter`, `scatterAdd`, `scatterReduce` (every
 * reduction, includeSelf both ways) and `indexReduce`, on random shapes
 * (index smaller than src and than the input in dims other than dim), NaN,
 * ±inf, ties of -0 and +0 (the sign as PyTorch 1.13's), float32, float64,
 * int32 and empty indices. Float64 gradient checks go through the kernel.
 * The kernel's contract case is in backend_contract_test.ts; PyTorch's
 * numbers in data_index_test.ts.
 * @module
 */

import assert from "node:assert/strict";
import {
  backendNames,
  cpuBackend,
  type Device,
  type DType,
  indexReduce,
  registerBackend,
  requestDevices,
  scatter,
  scatterAdd,
  scatterReduce,
  type ScatterReduction,
  type Tensor,
  tensor,
} from "../mod.ts";
import type { Backend, BackendDevice } from "../src/backends/backend.ts";
import { hasKernel } from "../src/ops/util.ts";
import { assertClose } from "./harness.ts";
import { check, distinct, gradgradcheck, inp } from "./gradcheck.ts";

/** The cpu backend without `scatterReduce`: the ops compose it. */
function composedCpu(): Backend {
  const base = cpuBackend({ threads: 1 });
  return {
    async createDevice(index: number): Promise<BackendDevice> {
      const device = await base.createDevice(index);
      const kernels = { ...device.kernels };
      delete kernels.scatterReduce;
      return { ...device, kernels };
    },
  };
}

if (!backendNames().includes("cpu-noscatter")) {
  registerBackend("cpu-noscatter", composedCpu, { priority: -10 });
}
const [CPU] = await requestDevices({ backend: "cpu" });
const [COMPOSED] = await requestDevices({ backend: "cpu-noscatter" });

/** A deterministic generator of floats in [0, 1) (a 32-bit LCG). */
function rng(seed: number): () => number {
  let s = (seed * 2654435761) >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Ties, both zeros, NaN and the infinities; small enough that sums and products are exact. */
const FLOAT_POOL = [-2, -1, -0, 0, 0, 0.5, 1, 1, 3, NaN, Infinity, -Infinity];
const INT_POOL = [-3, -2, -1, 0, 1, 1, 2, 3];

/** One random scatter: shapes, dim, the index's values and pools of values. */
interface Case {
  readonly name: string;
  readonly xShape: number[];
  readonly dim: number;
  readonly indexShape: number[];
  readonly srcShape: number[];
  readonly index: number[];
  readonly seed: number;
}

function randomCase(seed: number): Case {
  const next = rng(seed);
  const pick = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const ndim = pick(1, 3);
  const dim = pick(0, ndim - 1);
  const xShape = Array.from({ length: ndim }, () => pick(1, 4));
  // The index no larger than the input off dim (and often smaller), src no smaller than it.
  const indexShape = xShape.map((n, k) => (k === dim ? pick(1, 6) : pick(1, n)));
  const srcShape = indexShape.map((n) => n + (next() < 0.3 ? 1 : 0));
  const count = indexShape.reduce((a, b) => a * b, 1);
  const index = Array.from({ length: count }, () => pick(0, xShape[dim] - 1));
  const name = `#${seed} x [${xShape}] dim ${dim} index [${indexShape}] src [${srcShape}]`;
  return { name, xShape, dim, indexShape, srcShape, index, seed };
}

function fill(shape: number[], next: () => number, dtype: DType): number[] {
  const pool = dtype === "int32" ? INT_POOL : FLOAT_POOL;
  const n = shape.reduce((a, b) => a * b, 1);
  return Array.from({ length: n }, () => pool[Math.floor(next() * pool.length)]);
}

/** Asserts equal values; `exact` also the sign of zero (NaN equals NaN). */
function assertSame(got: ArrayLike<number>, want: ArrayLike<number>, exact: boolean, what: string) {
  assertClose(got, want, { atol: 0, rtol: 0, what });
  if (!exact) return;
  for (let i = 0; i < want.length; i++) {
    if (want[i] === 0) {
      assert.ok(
        Object.is(got[i], want[i]),
        `${what}: element ${i} is ${got[i]}, expected ${want[i]}`,
      );
    }
  }
}

type Op = "scatter" | "scatterAdd" | ScatterReduction;
const OPS: Op[] = ["scatter", "scatterAdd", "sum", "prod", "mean", "amax", "amin"];

function apply(op: Op, x: Tensor, c: Case, index: Tensor, src: Tensor, includeSelf: boolean) {
  if (op === "scatter") return scatter(x, c.dim, index, src);
  if (op === "scatterAdd") return scatterAdd(x, c.dim, index, src);
  return scatterReduce(x, c.dim, index, src, op, { includeSelf });
}

/** Runs `op` on `device` forward (and backward for float64), returning what is compared. */
async function runOn(
  device: Device,
  op: Op,
  c: Case,
  dtype: DType,
  includeSelf: boolean,
): Promise<number[][]> {
  const next = rng(c.seed + 1000);
  const grad = dtype === "float64";
  const x = tensor(fill(c.xShape, next, dtype), {
    shape: c.xShape,
    dtype,
    device,
    requiresGrad: grad,
  });
  const src = tensor(fill(c.srcShape, next, dtype), {
    shape: c.srcShape,
    dtype,
    device,
    requiresGrad: grad,
  });
  const index = tensor(c.index, { shape: c.indexShape, dtype: "int32", device });
  const out = apply(op, x, c, index, src, includeSelf);
  const results = [[...await out.data()]];
  if (grad) {
    const w = tensor(fill(c.xShape, rng(c.seed + 2000), "int32"), {
      shape: c.xShape,
      dtype,
      device,
    });
    out.mul(w).sum().backward();
    results.push([...await x.grad!.data()], [...await src.grad!.data()]);
  }
  return results;
}

for (const seed of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]) {
  const c = randomCase(seed);
  Deno.test(`scatter kernel equals the composition: ${c.name}`, async () => {
    for (const op of OPS) {
      for (const dtype of ["float32", "float64", "int32"] as const) {
        const selfs = op === "scatter" || op === "scatterAdd" ? [true] : [true, false];
        for (const includeSelf of selfs) {
          const what = `${op} ${dtype} includeSelf ${includeSelf} ${c.name}`;
          const got = await runOn(CPU, op, c, dtype, includeSelf);
          const want = await runOn(COMPOSED, op, c, dtype, includeSelf);
          // The sign of zero: exact where nothing is added (a sum's 0 + -0 is +0 either way,
          // but the composition adds 0 to the input where nothing was written).
          const exact = op === "scatter" || op === "amax" || op === "amin";
          assertSame(got[0], want[0], exact, what);
          if (got.length > 1) {
            assertClose(got[1], want[1], { atol: 1e-12, rtol: 1e-12, what: `${what}: x.grad` });
            assertClose(got[2], want[2], { atol: 1e-12, rtol: 1e-12, what: `${what}: src.grad` });
          }
        }
      }
    }
  });
}

Deno.test("scatter kernel equals the composition on random normal values (rounding)", async () => {
  const next = rng(77);
  const [rows, cols, targets] = [300, 5, 17];
  const values = Array.from({ length: rows * cols }, () => next() * 4 - 2);
  const base = Array.from({ length: targets * cols }, () => next() * 4 - 2);
  const at = Array.from({ length: rows * cols }, () => Math.floor(next() * targets));
  for (const dtype of ["float32", "float64"] as const) {
    for (const reduce of ["sum", "prod", "mean", "amax", "amin"] as const) {
      for (const includeSelf of [true, false]) {
        const outs = await Promise.all([CPU, COMPOSED].map((device) => {
          const x = tensor(base, { shape: [targets, cols], dtype, device });
          const src = tensor(values, { shape: [rows, cols], dtype, device });
          const index = tensor(at, { shape: [rows, cols], dtype: "int32", device });
          return scatterReduce(x, 0, index, src, reduce, { includeSelf }).data();
        }));
        // Sums and products in another order (the composition's scan is a tree).
        const tol = dtype === "float32" ? 1e-5 : 1e-12;
        assertClose(outs[0], outs[1], {
          atol: tol,
          rtol: tol,
          what: `${reduce} ${dtype} includeSelf ${includeSelf}`,
        });
      }
    }
  }
});

Deno.test("scatter kernel: -0 and +0 ties keep the sign PyTorch 1.13 gives", async () => {
  // torch.tensor([0., -0., 0., -0., 1.]).scatter_reduce(0, tensor([0, 1, 0, 1]),
  // tensor([-0., 0., -0., 0.]), reduce, include_self=...) in PyTorch 1.13.
  const want: Record<string, number[]> = {
    "amax true": [0, -0, 0, -0, 1],
    "amax false": [-0, 0, 0, -0, 1],
    "amin true": [0, -0, 0, -0, 1],
    "amin false": [-0, 0, 0, -0, 1],
    "prod true": [0, -0, 0, -0, 1],
    "prod false": [0, 0, 0, -0, 1],
    "sum false": [0, 0, 0, -0, 1],
    "mean false": [0, 0, 0, -0, 1],
  };
  for (const device of [CPU, COMPOSED]) {
    for (const [key, expected] of Object.entries(want)) {
      const [reduce, self] = key.split(" ") as [ScatterReduction, string];
      const x = tensor([0, -0, 0, -0, 1], { device });
      const out = scatterReduce(
        x,
        0,
        tensor([0, 1, 0, 1], { dtype: "int32", device }),
        tensor([-0, 0, -0, 0], { device }),
        reduce,
        { includeSelf: self === "true" },
      );
      assertSame(await out.data(), expected, true, `${key} on ${device.backend}`);
    }
  }
});

Deno.test("scatter kernel: NaN propagates through amax and amin, as PyTorch", async () => {
  // torch.tensor([1., nan, 3.]).scatter_reduce(0, tensor([0, 0, 1, 2, 2]),
  // tensor([nan, 2., 5., 1., nan]), "amax") is [nan, nan, nan].
  for (const device of [CPU, COMPOSED]) {
    for (const reduce of ["amax", "amin"] as const) {
      const out = scatterReduce(
        tensor([1, NaN, 3], { device }),
        0,
        tensor([0, 0, 1, 2, 2], { dtype: "int32", device }),
        tensor([NaN, 2, 5, 1, NaN], { device }),
        reduce,
      );
      assertClose(await out.data(), [NaN, NaN, NaN], { what: `${reduce} on ${device.backend}` });
    }
  }
});

Deno.test("scatter kernel: int32 mean rounds down, int32 sums and products wrap", async () => {
  for (const device of [CPU, COMPOSED]) {
    const i32 = (v: number[]) => tensor(v, { dtype: "int32", device });
    const mean = scatterReduce(i32([1, 2, 3]), 0, i32([0, 0]), i32([-7, 2]), "mean", {
      includeSelf: false,
    });
    assert.deepEqual([...await mean.data()], [-3, 2, 3], device.backend);
    const big = 2 ** 30;
    const sum = scatterReduce(i32([big, 0]), 0, i32([0, 0]), i32([big, big]), "sum");
    assert.deepEqual([...await sum.data()], [-(2 ** 30), 0], device.backend);
    const prod = scatterReduce(i32([65536, 1]), 0, i32([0]), i32([65537]), "prod");
    assert.deepEqual([...await prod.data()], [65536, 1], device.backend); // 2^32 + 2^16 wraps
  }
});

Deno.test("scatter kernel: indexReduce and an empty index equal the composition", async () => {
  const next = rng(5);
  const source = Array.from({ length: 6 * 4 }, () => FLOAT_POOL[Math.floor(next() * 12)]);
  const base = Array.from({ length: 3 * 4 }, () => FLOAT_POOL[Math.floor(next() * 12)]);
  for (const reduce of ["prod", "mean", "amax", "amin"] as const) {
    for (const includeSelf of [true, false]) {
      const [got, want] = await Promise.all([CPU, COMPOSED].map((device) => {
        const x = tensor(base, { shape: [4, 3], device });
        const src = tensor(source, { shape: [4, 6], device });
        const index = tensor([2, 0, 2, 2, 1, 0], { dtype: "int32", device });
        return indexReduce(x, 1, index, src, reduce, { includeSelf }).data();
      }));
      assertSame(got, want, reduce !== "prod", `indexReduce ${reduce} includeSelf ${includeSelf}`);
    }
  }
  for (const device of [CPU, COMPOSED]) {
    const x = tensor([[1, -0], [NaN, 4]], { device });
    for (const shape of [[0], [0, 2], [2, 0]]) {
      const index = tensor([], { shape, dtype: "int32", device });
      const src = tensor([], { shape, device });
      const out = scatterReduce(x, 0, index, src, "amax", { includeSelf: false });
      assertSame(await out.data(), [1, -0, NaN, 4], true, `empty index [${shape}]`);
    }
  }
});

Deno.test("scatter kernel: the cpu backend has it and the ops launch it once per scatter", () => {
  assert.ok(hasKernel(CPU, "scatterReduce"));
  assert.ok(!hasKernel(COMPOSED, "scatterReduce"));
  const table = CPU.backendDevice.kernels as unknown as Record<string, (a: unknown) => void>;
  const saved = table.scatterReduce;
  let calls = 0;
  table.scatterReduce = (args) => {
    calls++;
    saved(args);
  };
  try {
    const x = tensor([[1, 2], [3, 4]], { device: CPU });
    const index = tensor([[1, 0, 1]], { dtype: "int32", device: CPU });
    scatterReduce(x, 1, index.narrow(1, 0, 2), tensor([[5, 6, 7]], { device: CPU }), "amax");
    scatter(x, 0, index.narrow(1, 0, 2), 9);
  } finally {
    table.scatterReduce = saved;
  }
  assert.equal(calls, 2);
});

// Float64 gradients through the kernel (cpu), a 3-D input scattered along dim 1 by an index
// smaller than src and than the input elsewhere.
const index3 = () => tensor([0, 2, 2, 1, 0, 2, 1, 1], { shape: [2, 2, 2], dtype: "int32" });
for (const reduce of ["sum", "prod", "mean", "amax", "amin"] as const) {
  for (const includeSelf of [true, false]) {
    check(
      `scatterReduce kernel ${reduce} includeSelf ${includeSelf} (3-D, dim 1, small index)`,
      (x, s) => scatterReduce(x, 1, index3(), s, reduce, { includeSelf }),
      [
        { shape: [3, 3, 2], values: distinct([3, 3, 2], 4101, 0.5, 0.05) },
        { shape: [2, 3, 3], values: distinct([2, 3, 3], 4102, -2, 0.05) },
      ],
    );
  }
}
check("scatter kernel src (3-D, dim 1, small index)", (x, s) => scatter(x, 1, index3(), s), [
  inp([3, 3, 2], 4103),
  inp([2, 3, 3], 4104),
]);

Deno.test("gradgradcheck through the scatter kernel (mean, amax, prod)", async () => {
  for (const reduce of ["mean", "amax", "prod"] as const) {
    await gradgradcheck(
      (x, s) => scatterReduce(x, 1, index3(), s, reduce, { includeSelf: reduce !== "mean" }),
      [
        { shape: [3, 3, 2], values: distinct([3, 3, 2], 4111, 0.5, 0.05) },
        { shape: [2, 3, 3], values: distinct([2, 3, 3], 4112, -2, 0.05) },
      ],
    );
  }
});
