/**
 * The CNN's fused kernels (`batchNorm`, `batchNormBackward`, `maxPool2d`)
 * and the gradient scatter under max pooling on every backend against the
 * cpu: odd shapes, both loop forms of the per-channel kernels, NaN (decided
 * by bits on GL), ties (the first maximum wins, as PyTorch), padding,
 * stride, dilation, `ceilMode`, and the running statistics (momentum and
 * the cumulative average) through evaluation. A backend whose table has a
 * kernel must run it: the tests count its launches.
 * @module
 */

import assert from "node:assert/strict";
import {
  type Device,
  manualSeed,
  nn,
  type OptionalKernelName,
  type Tensor,
  type WrappedDevice,
} from "../mod.ts";
import type { WebGPUDevice } from "../src/backends/webgpu/device.ts";
import { assertClose, backendTest, floats, ints, matchesCpu, on } from "./harness.ts";

const F = nn.functional;

/** Calls of kernel `name` while `fn` runs on `device` (the table entry wrapped). */
function countCalls<T>(device: Device, name: OptionalKernelName, fn: () => T): [T, number] {
  const table = device.backendDevice.kernels as unknown as Record<string, (a: unknown) => void>;
  const saved = table[name];
  if (!saved) return [fn(), 0];
  let calls = 0;
  table[name] = (args) => {
    calls++;
    saved(args);
  };
  try {
    return [fn(), calls];
  } finally {
    table[name] = saved;
  }
}

/** Whether `device` is a webgpu-like device (its table then must fuse the CNN's kernels). */
function isGpu(device: Device): boolean {
  return device.backend !== "cpu";
}

/** `fn(x)` and the gradients of x and `extra` (leaves made here) under a weighted sum. */
function withGrads(
  d: Device,
  shape: number[],
  values: number[],
  fn: (x: Tensor) => Tensor,
  extra: Tensor[] = [],
): Tensor[] {
  const x = on(d, shape, values);
  x.requiresGrad = true;
  const y = fn(x);
  const weights = on(d, [...y.shape], floats([...y.shape], 77, -1, 1));
  y.mul(weights).sum().backward();
  return [y, x.grad!, ...extra.map((t) => t.grad!)];
}

const BN_SHAPES: number[][] = [
  [8, 6, 9, 7], // rows of 63: walked row by row
  [5, 3, 4], // rows of 4: one flat range
  [300, 7], // BatchNorm1d over features: rows of 1
  [2, 4, 40, 40], // several rounds of the workgroup per row
  [3, 2, 1, 1],
  [2, 65537], // more channels than one grid row of workgroups
];

backendTest("fused batchNorm: outputs, batch statistics and gradients match cpu", async (d) => {
  for (const [s, shape] of BN_SHAPES.entries()) {
    const c = shape[1];
    let calls = [0, 0];
    await matchesCpu(d, (dev) => {
      const w = on(dev, [c], floats([c], 500 + s, 0.5, 2));
      const b = on(dev, [c], floats([c], 510 + s));
      w.requiresGrad = true;
      b.requiresGrad = true;
      const mean = on(dev, [c], floats([c], 520 + s));
      const variance = on(dev, [c], floats([c], 530 + s, 0.5, 2));
      const run = () =>
        withGrads(
          dev,
          shape,
          floats(shape, 540 + s),
          (x) =>
            F.batchNorm(x.mul(2).add(0.5), mean, variance, {
              weight: w,
              bias: b,
              training: true,
              momentum: 0.3,
            }),
          [w, b],
        );
      const [forward, n] = countCalls(
        dev,
        "batchNorm",
        () => countCalls(dev, "batchNormBackward", run),
      );
      if (dev === d) calls = [n, forward[1]];
      return [...forward[0], mean, variance];
    }, { atol: 1e-4, rtol: 1e-4, what: `shape [${shape}]` });
    if (isGpu(d)) assert.deepEqual(calls, [1, 1], `[${shape}]: one batchNorm, one backward`);
  }
});

backendTest("fused batchNorm: a large mean against a small spread does not cancel", async (d) => {
  const shape = [4, 3, 10, 10];
  const values = floats(shape, 550, -1, 1).map((v) => Math.fround(1000 + 0.01 * v));
  await matchesCpu(d, (dev) => {
    const w = on(dev, [3], [1, 2, 0.5]);
    const b = on(dev, [3], [0, 1, -1]);
    const y = F.batchNorm(on(dev, shape, values), null, null, {
      weight: w,
      bias: b,
      training: true,
    });
    return [y];
  }, { atol: 2e-3, rtol: 2e-3 });
});

backendTest("fused batchNorm: NaN and inf spoil their own channel only", async (d) => {
  const shape = [3, 4, 5, 6];
  const values = floats(shape, 560);
  values[31] = NaN; // channel 1 of sample 0
  values[2 * 120 + 3 * 30 + 7] = Infinity; // channel 3 of sample 2
  const [y, gx] = await matchesCpu(d, (dev) => {
    const w = on(dev, [4], floats([4], 561, 0.5, 2));
    const b = on(dev, [4], floats([4], 562));
    w.requiresGrad = true;
    b.requiresGrad = true;
    return withGrads(
      dev,
      shape,
      values,
      (x) => F.batchNorm(x, null, null, { weight: w, bias: b, training: true }),
      [w, b],
    );
  }, { atol: 1e-4, rtol: 1e-4 });
  const [out, grad] = [await y.data(), await gx.data()];
  for (let i = 0; i < out.length; i++) {
    const channel = Math.floor(i / 30) % 4;
    if (channel === 1 || channel === 3) {
      assert.ok(Number.isNaN(out[i]), `output ${i} (channel ${channel}) is NaN`);
      assert.ok(Number.isNaN(grad[i]), `gradient ${i} (channel ${channel}) is NaN`);
    } else {
      assert.ok(Number.isFinite(out[i]) && Number.isFinite(grad[i]), `element ${i} is finite`);
    }
  }
});

backendTest(
  "BatchNorm2d: running statistics (momentum 0.3 and null) and evaluation match cpu",
  async (d) => {
    for (const momentum of [0.3, null]) {
      await matchesCpu(d, (dev) => {
        manualSeed(5);
        const layer = new nn.BatchNorm2d(3, { momentum, device: dev });
        const outs: Tensor[] = [];
        for (let step = 0; step < 3; step++) {
          const x = on(dev, [4, 3, 5, 5], floats([4, 3, 5, 5], 570 + step, -2, 4));
          outs.push(layer.forward(x));
        }
        layer.eval();
        outs.push(layer.forward(on(dev, [2, 3, 5, 5], floats([2, 3, 5, 5], 580))));
        return [...outs, layer.runningMean!, layer.runningVar!];
      }, { atol: 1e-4, rtol: 1e-4, what: `momentum ${momentum}` });
    }
  },
);

/** Max-pool cases: input shape, kernel size and options. */
const POOLS: [number[], nn.functional.Size2, nn.functional.MaxPool2dOptions][] = [
  [[2, 3, 8, 8], 2, {}],
  [[2, 3, 7, 9], 2, {}], // odd sizes: the last row and column are dropped
  [[2, 3, 7, 9], 2, { ceilMode: true }], // ... or make windows of their own
  [[1, 4, 11, 10], 3, { stride: 2, padding: 1, ceilMode: true }],
  [[2, 2, 9, 12], [2, 3], { stride: [1, 2], dilation: 2 }],
  [[1, 3, 6, 5], 3, { stride: 1, padding: 1 }], // overlapping windows share maxima
  [[3, 2, 5, 5], [3, 1], { stride: [2, 1], padding: [1, 0], dilation: [2, 1] }],
];

backendTest("fused maxPool2d: maxima and gradients equal cpu's (shapes, options)", async (d) => {
  for (const [i, [shape, kernel, options]] of POOLS.entries()) {
    let calls = 0;
    await matchesCpu(d, (dev) => {
      const [outs, n] = countCalls(
        dev,
        "maxPool2d",
        () => withGrads(dev, shape, floats(shape, 600 + i), (x) => F.maxPool2d(x, kernel, options)),
      );
      if (dev === d) calls = n;
      return outs;
    }, { exact: true, what: JSON.stringify([shape, kernel, options]) });
    if (isGpu(d)) assert.equal(calls, 1, `case ${i}: one maxPool2d launch`);
  }
});

backendTest("fused maxPool2d: ties go to the first maximum, NaN wins, -inf windows", async (d) => {
  for (const [i, [shape, kernel, options]] of POOLS.entries()) {
    // Few distinct values: most windows hold a tie.
    const values = ints(shape, 610 + i, 0, 3);
    values[1] = NaN;
    values[values.length - 1] = NaN;
    values[5] = -Infinity;
    values[6] = Infinity;
    await matchesCpu(
      d,
      (dev) => withGrads(dev, shape, values, (x) => F.maxPool2d(x, kernel, options)),
      {
        exact: true,
        what: `ties, case ${i}`,
      },
    );
  }
  // Hand-checked: the first of two equal maxima takes the gradient; a
  // window of -inf picks its first element; NaN beats +inf.
  const x = on(d, [1, 1, 2, 6], [
    3,
    1,
    -Infinity,
    -Infinity,
    Infinity,
    2,
    1,
    3,
    -Infinity,
    -Infinity,
    NaN,
    5,
  ]);
  x.requiresGrad = true;
  const y = F.maxPool2d(x, 2);
  y.sum().backward();
  assertClose(await y.data(), [3, -Infinity, NaN]);
  assertClose(await x.grad!.data(), [1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
});

backendTest(
  "gather's gradient (scatterAdd) with many sources per column equals cpu's",
  async (d) => {
    // [64, 500] gathered at 300 places per row, and [50, 7] at 80 rows along
    // dim 0: long columns (webgpu sums them one column per invocation).
    await matchesCpu(d, (dev) => {
      const a = on(dev, [64, 500], floats([64, 500], 620));
      a.requiresGrad = true;
      const ia = on(dev, [64, 300], ints([64, 300], 621, 0, 500), "int32");
      const b = on(dev, [50, 7], floats([50, 7], 622));
      b.requiresGrad = true;
      const ib = on(dev, [80, 7], ints([80, 7], 623, 0, 50), "int32");
      a.gather(1, ia).mul(on(dev, [64, 300], floats([64, 300], 624))).sum().backward();
      b.gather(0, ib).mul(on(dev, [80, 7], floats([80, 7], 625))).sum().backward();
      return [a.grad!, b.grad!];
    }, { exact: true });
  },
);

backendTest("binary ops of [N, C, HW] against one value per channel match cpu", async (d) => {
  // The conv bias and batch-norm shapes (webgpu reads the channel value once
  // per 4 outputs); values with NaN and infinities, both operand orders.
  const ops = ["add", "sub", "mul", "div", "maximum", "minimum", "pow", "lt", "ge", "eq"] as const;
  for (const [shape, channelShape] of [[[3, 5, 8], [5, 1]], [[2, 3, 12], [3, 1]]]) {
    const values = floats(shape, 630);
    values[3] = NaN;
    values[17] = Infinity;
    const perChannel = floats(channelShape, 631);
    perChannel[1] = NaN;
    for (const op of ops) {
      await matchesCpu(d, (dev) => {
        const x = on(dev, shape, values);
        const c = on(dev, channelShape, perChannel);
        return [x[op](c), c[op](x)];
      }, { atol: 1e-6, rtol: 1e-6, what: `${op} [${shape}] with [${channelShape}]` });
    }
    await matchesCpu(d, (dev) => {
      const x = on(dev, shape, ints(shape, 632), "int32");
      const c = on(dev, channelShape, ints(channelShape, 633, 1, 5), "int32");
      return [x.add(c), c.mul(x)];
    }, { exact: true, what: `int32 [${shape}]` });
    // True division of int32 gives float32, and WGSL lets f32 division be
    // 2.5 ulp off (NVIDIA's Vulkan driver gives -5 / 3 one ulp off).
    await matchesCpu(d, (dev) => {
      const x = on(dev, shape, ints(shape, 632), "int32");
      const c = on(dev, channelShape, ints(channelShape, 633, 1, 5), "int32");
      return [x.div(c), c.div(x)];
    }, { atol: 0, rtol: 1e-6, what: `int32 [${shape}] true division` });
  }
});

backendTest("reductions over many long contiguous rows match cpu (NaN, ties)", async (d) => {
  // A conv bias gradient's shape (webgpu on a CPU adapter sums such rows
  // serially, one invocation per row, in passes of at most 1024).
  for (const shape of [[100, 700], [70, 3000], [64, 257]]) {
    const values = floats(shape, 640);
    values[5] = NaN;
    values[shape[1] * 3 + 7] = Infinity;
    values[shape[1] * 4 + 1] = 10;
    values[shape[1] * 4 + 2] = 10; // a tie: the first wins
    await matchesCpu(d, (dev) => {
      const x = on(dev, shape, values);
      return [x.sum(1), x.mean(1), x.max(1), x.min(1)];
    }, { atol: 1e-3, rtol: 1e-5, what: `[${shape}]` });
    await matchesCpu(d, (dev) => {
      const x = on(dev, shape, values);
      return [x.argmax(1), x.argmin(1)];
    }, { exact: true, what: `arg [${shape}]` });
  }
});

backendTest(
  "window kernels' per-element variants (as on GPU adapters) match cpu",
  async (_d, devices) => {
    // CPU adapters walk rows (im2col, col2im, maxPool2d); a GPU takes one
    // invocation per element. Here the second device is told it is a GPU.
    const d = devices[1];
    if (d.backend === "cpu") return;
    const runtime = (d.backendDevice as WrappedDevice<WebGPUDevice>).impl.runtime as unknown as {
      isCpuAdapter: boolean;
    };
    const saved = runtime.isCpuAdapter;
    runtime.isCpuAdapter = false;
    try {
      for (const [i, [shape, kernel, options]] of POOLS.entries()) {
        await matchesCpu(
          d,
          (dev) =>
            withGrads(dev, shape, floats(shape, 650 + i), (x) => F.maxPool2d(x, kernel, options)),
          { exact: true, what: `maxPool2d case ${i}` },
        );
      }
      const convs: [number[], number[], nn.functional.Conv2dOptions][] = [
        [[2, 3, 9, 8], [4, 3, 3, 3], { padding: 1 }],
        [[1, 4, 11, 10], [2, 4, 3, 2], { stride: [2, 3], padding: [1, 0], dilation: [2, 1] }],
      ];
      for (const [i, [xs, ws, options]] of convs.entries()) {
        await matchesCpu(d, (dev) => {
          const w = on(dev, ws, floats(ws, 660 + i));
          w.requiresGrad = true;
          return withGrads(dev, xs, floats(xs, 670 + i), (x) => F.conv2d(x, w, null, options), [w]);
        }, { atol: 1e-4, rtol: 1e-4, what: `conv2d case ${i}` });
      }
      // Transposed: col2im forward into an image with rows and columns no
      // tap reaches (outputPadding with padding 0), im2col backward.
      const transposed: [number[], number[], nn.functional.ConvTranspose2dOptions][] = [
        [[2, 4, 5, 6], [4, 3, 3, 3], { stride: 2, outputPadding: 1 }],
        [[1, 4, 4, 5], [4, 1, 2, 3], {
          stride: [1, 3],
          dilation: [2, 1],
          outputPadding: [1, 2],
          groups: 2,
        }],
      ];
      for (const [i, [xs, ws, options]] of transposed.entries()) {
        await matchesCpu(d, (dev) => {
          const w = on(dev, ws, floats(ws, 680 + i));
          w.requiresGrad = true;
          return withGrads(
            dev,
            xs,
            floats(xs, 690 + i),
            (x) => F.convTranspose2d(x, w, options),
            [w],
          );
        }, { atol: 1e-4, rtol: 1e-4, what: `convTranspose2d case ${i}` });
      }
    } finally {
      runtime.isCpuAdapter = saved;
    }
  },
);
