/**
 * Max pooling and max/min reductions with several NaN in one window or row
 * (NaN next to ±inf, ties) against PyTorch 1.13 cpu
 * (tests/fixtures/torch_nan_pooling.json) on every backend: values, the
 * returned indices and where the gradient goes. PyTorch's pools take the
 * last NaN of a window, its reductions along a dim the first, its
 * whole-tensor max/min split the gradient over every NaN and amax/amin give
 * NaN gradients; the fused pool kernels (the cpu 2x2 WebAssembly path, the
 * generic cpu loop, WGSL) and the composed paths (adaptive pools, the
 * unfold + argmax path of maxPool2d) are each held to it.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, type Tensor, tensor } from "../mod.ts";
import {
  assertClose,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
} from "./harness.ts";
import { poolArgmax } from "../src/nn/functional/pool_argmax.ts";
import fixtures from "./fixtures/torch_nan_pooling.json" with { type: "json" };

const F = nn.functional;

interface PoolCase {
  op: string;
  options: Record<string, unknown>;
  input: FixtureValues;
  g: FixtureValues;
  output: FixtureValues;
  indices: FixtureValues;
  grad: FixtureValues;
}

interface ReductionCase {
  op: "max" | "min" | "amax" | "amin";
  dim: number | null;
  input: FixtureValues;
  g: FixtureValues;
  output: FixtureValues;
  indices?: FixtureValues;
  arg?: FixtureValues;
  grad: FixtureValues;
}

const POOLS = fixtures.pools as PoolCase[];
const REDUCTIONS = fixtures.reductions as ReductionCase[];

/** Runs a pool case: the output and, where multigrad returns them, the indices. */
function runPool(c: PoolCase, x: Tensor): [Tensor, Tensor | null] {
  const { kernelSize, outputSize, ...rest } = c.options;
  switch (c.op) {
    case "maxPool1d":
      return F.maxPool1d(x, kernelSize as number, { ...rest, returnIndices: true });
    case "maxPool2d":
      return F.maxPool2d(x, kernelSize as number, { ...rest, returnIndices: true });
    case "maxPool3d":
      return [F.maxPool3d(x, kernelSize as number, rest), null];
    case "adaptiveMaxPool1d":
      return [F.adaptiveMaxPool1d(x, outputSize as number), null];
    case "adaptiveMaxPool2d":
      return [F.adaptiveMaxPool2d(x, outputSize as [number, number]), null];
    case "adaptiveMaxPool3d":
      return [F.adaptiveMaxPool3d(x, outputSize as [number, number, number]), null];
  }
  throw new Error(`unknown pool ${c.op}`);
}

async function checkPool(c: PoolCase, device: Device, what: string): Promise<void> {
  const x = fixtureTensor(c.input, device, { requiresGrad: true });
  const [y, indices] = runPool(c, x);
  assertClose(await y.data(), decodeFixture(c.output), { what: `${what} output` });
  if (indices) {
    assert.deepEqual(Array.from(await indices.data()), decodeFixture(c.indices), `${what} indices`);
  }
  y.mul(fixtureTensor(c.g, device)).sum().backward();
  assertClose(await x.grad!.data(), decodeFixture(c.grad), {
    what: `${what} grad`,
    atol: 1e-6,
  });
}

POOLS.forEach((c, i) => {
  const what = `${c.op} #${i} ${JSON.stringify(c.options)}`;
  backendTest(`nan pooling ${what} matches PyTorch (last NaN wins)`, async (device) => {
    await checkPool(c, device, what);
  });
});

backendTest("nan pooling maxPool2d's composed path matches PyTorch", async (device) => {
  // The unfold + argmax path runs where a backend has no maxPool2d kernel:
  // hide this one's for the call.
  const kernels = device.backendDevice.kernels as Record<string, unknown>;
  const fused = kernels.maxPool2d;
  let count = 0;
  try {
    delete kernels.maxPool2d;
    for (const [i, c] of POOLS.entries()) {
      if (c.op !== "maxPool1d" && c.op !== "maxPool2d" && c.op !== "maxPool3d") continue;
      await checkPool(c, device, `composed ${c.op} #${i}`);
      count++;
    }
  } finally {
    kernels.maxPool2d = fused;
  }
  assert.equal(count, 8);
});

backendTest("nan pooling poolArgmax: first maximum, last NaN", async (device) => {
  const x = fixtureTensor(
    [[1, NaN, 2, NaN, 3], [1, Infinity, NaN, Infinity, NaN], [2, 3, 3, -Infinity, 1], [
      -Infinity,
      -Infinity,
      -Infinity,
      -Infinity,
      -Infinity,
    ]].map((r) => r.map((v) => Number.isFinite(v) ? v : String(v))),
    device,
  );
  assert.deepEqual(Array.from(await poolArgmax(x, 1).data()), [3, 4, 1, 0]);
  assert.deepEqual(Array.from(await poolArgmax(x.t(), 0).data()), [3, 4, 1, 0]);
});

REDUCTIONS.forEach((c, i) => {
  const what = `${c.op}(${c.dim ?? "all"}) #${i}`;
  backendTest(`nan reductions ${what} matches PyTorch`, async (device) => {
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    let y: Tensor;
    if (c.dim === null) {
      y = c.op === "max" ? x.max() : x.min();
      y.mul(c.g as number).backward();
    } else {
      y = c.op === "max"
        ? x.max(c.dim)
        : c.op === "min"
        ? x.min(c.dim)
        : c.op === "amax"
        ? x.amax(c.dim)
        : x.amin(c.dim);
      y.mul(fixtureTensor(c.g, device)).sum().backward();
    }
    assertClose(await y.data(), decodeFixture(c.output), { what: `${what} output` });
    assertClose(await x.grad!.data(), decodeFixture(c.grad), { what: `${what} grad`, atol: 1e-6 });
    if (c.arg !== undefined) {
      const arg = c.op === "max" ? x.argmax(c.dim ?? undefined) : x.argmin(c.dim ?? undefined);
      assert.deepEqual(Array.from(await arg.data()), decodeFixture(c.arg), `${what} arg`);
      if (c.indices !== undefined) {
        assert.deepEqual(decodeFixture(c.indices), decodeFixture(c.arg), `${what} indices`);
      }
    }
  });
});

backendTest(
  "nan pooling 2x2 windows in large planes (the cpu WebAssembly path)",
  async (device) => {
    // Case #3 tiled 32 x 26 times: planes of 128 x 260 (input and output past the size at which
    // the cpu backend keeps float32 arrays in WebAssembly memory, where its
    // 2x2 pool runs SIMD); every 2x2 window stays inside one tile.
    const c = POOLS[3];
    assert.equal(c.op, "maxPool2d");
    const [ty, tx, h, w] = [32, 26, 4, 10];
    const [H, W, oh, ow] = [h * ty, w * tx, h / 2, w / 2];
    const planes = 2;
    const input = decodeFixture(c.input);
    const g = decodeFixture(c.g);
    const indices = decodeFixture(c.indices);
    const grad = decodeFixture(c.grad);
    const x = new Float32Array(planes * H * W);
    const gBig = new Float32Array(planes * (H / 2) * (W / 2));
    const want = new Int32Array(gBig.length);
    const wantGrad = new Float32Array(x.length);
    for (let p = 0; p < planes; p++) {
      for (let r = 0; r < H; r++) {
        for (let col = 0; col < W; col++) {
          const local = p * h * w + (r % h) * w + (col % w);
          x[p * H * W + r * W + col] = input[local];
          wantGrad[p * H * W + r * W + col] = grad[local];
        }
      }
      for (let r = 0; r < H / 2; r++) {
        for (let col = 0; col < W / 2; col++) {
          const local = p * oh * ow + (r % oh) * ow + (col % ow);
          const at = p * (H / 2) * (W / 2) + r * (W / 2) + col;
          gBig[at] = g[local];
          const li = indices[local];
          const [tr, tc] = [Math.floor(r / oh), Math.floor(col / ow)];
          want[at] = (tr * h + Math.floor(li / w)) * W + tc * w + (li % w);
        }
      }
    }
    const xt = tensor(x, { shape: [1, planes, H, W], device, requiresGrad: true });
    const [y, at] = F.maxPool2d(xt, 2, { returnIndices: true });
    const got = await at.data();
    const bad = want.findIndex((v, i) => got[i] !== v);
    assert.equal(bad, -1, `index ${bad}: ${got[bad]}, expected ${want[bad]}`);
    y.mul(tensor(gBig, { shape: [1, planes, H / 2, W / 2], device })).sum().backward();
    assertClose(await xt.grad!.data(), wantGrad, { what: "grad", atol: 1e-6 });
  },
);
