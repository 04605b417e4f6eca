/**
 * Conformance of convolution, transposed convolution, pooling, padding and
 * interpolation (the `im2col` and `col2im` kernels under them) on every
 * backend against the cpu reference: larger shapes than the PyTorch
 * fixtures, NaN and infinities, and hand-computed values.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, type Tensor } from "../mod.ts";
import { fold2d } from "../src/ops/window.ts";
import { assertClose, assertTensor, backendTest, floats, matchesCpu, on, REF } from "./harness.ts";

const F = nn.functional;

/** Forward and the gradients of every input that requires grad. */
function withGrads(d: Device, shapes: number[][], seed: number, fn: (...xs: Tensor[]) => Tensor) {
  const xs = shapes.map((s, i) => {
    const x = on(d, s, floats(s, seed + i, -1, 1));
    x.requiresGrad = true;
    return x;
  });
  const y = fn(...xs);
  y.mul(on(d, [...y.shape], floats([...y.shape], seed + 99, -1, 1))).sum().backward();
  return [y, ...xs.map((x) => x.grad!)];
}

const TOL = { atol: 1e-4, rtol: 1e-4 };

backendTest(
  "conv2d [4,16,20,20] 3x3 and strided/grouped/dilated forms, with gradients",
  async (d) => {
    const cases: [string, number[], number[], nn.functional.Conv2dOptions][] = [
      ["3x3 pad 1", [4, 16, 20, 20], [24, 16, 3, 3], { padding: 1 }],
      ["5x5 stride 2 dilation 2 groups 4", [2, 16, 21, 19], [8, 4, 5, 5], {
        stride: 2,
        dilation: 2,
        padding: 3,
        groups: 4,
      }],
      ["1x1", [3, 8, 9, 7], [5, 8, 1, 1], {}],
      ["depthwise 3x3 same", [2, 6, 10, 11], [6, 1, 3, 3], { padding: "same", groups: 6 }],
    ];
    for (const [name, xs, ws, opts] of cases) {
      await matchesCpu(
        d,
        (dev) => withGrads(dev, [xs, ws, [ws[0]]], 400, (x, w, b) => F.conv2d(x, w, b, opts)),
        {
          ...TOL,
          what: name,
        },
      );
    }
  },
);

backendTest(
  "convTranspose2d [3,16,9,11] and fold2d (col2im into an image the windows do not fill), with gradients",
  async (d) => {
    const cases: [string, number[], number[], nn.functional.ConvTranspose2dOptions][] = [
      ["4x4 stride 2 pad 1", [3, 16, 9, 11], [16, 8, 4, 4], { padding: 1, stride: 2 }],
      ["3x3 stride 2 outputPadding 1 groups 4", [2, 16, 7, 6], [16, 3, 3, 3], {
        stride: 2,
        outputPadding: 1,
        groups: 4,
      }],
      ["3x2 stride [3,1] dilation [1,3] outputPadding [2,2]", [2, 6, 5, 8], [6, 5, 3, 2], {
        stride: [3, 1],
        dilation: [1, 3],
        padding: [2, 0],
        outputPadding: [2, 2],
      }],
    ];
    for (const [name, xs, ws, opts] of cases) {
      const cout = ws[1] * (opts.groups ?? 1);
      await matchesCpu(
        d,
        (dev) =>
          withGrads(
            dev,
            [xs, ws, [cout]],
            460,
            (x, w, b) => F.convTranspose2d(x, w, { ...opts, bias: b }),
          ),
        { ...TOL, what: name },
      );
    }
    // fold2d alone: its kernel (col2im) must write 0 where no tap lands (the
    // even rows and the last 3 columns here), whatever the image's memory held before
    // (a freed NaN image of the same size is likely reused).
    const window = {
      kernel: [3, 2] as const,
      stride: [2, 3] as const,
      padding: [1, 1] as const,
      dilation: [2, 1] as const,
      out: [4, 5] as const,
    };
    const shape = [2, 3, 3, 2, 4, 5];
    const outs = await matchesCpu(d, (dev) =>
      withGrads(dev, [shape], 470, (cols) => {
        fold2d(on(dev, shape, new Array(720).fill(Number.NaN)), [11, 16], window).dispose();
        return fold2d(cols, [11, 16], window).exp();
      }), TOL);
    assert.deepEqual([...outs[0].shape], [2, 3, 11, 16]);
    const reached = (dim: 0 | 1) =>
      new Set(
        Array.from({ length: window.out[dim] * window.kernel[dim] }, (_, i) =>
          Math.floor(i / window.kernel[dim]) * window.stride[dim] - window.padding[dim] +
          (i % window.kernel[dim]) * window.dilation[dim]),
      );
    const [rows, cols] = [reached(0), reached(1)];
    const img = await outs[0].data();
    let unreached = 0;
    for (let p = 0; p < 6; p++) {
      for (let h = 0; h < 11; h++) {
        for (let w = 0; w < 16; w++) {
          if (rows.has(h) && cols.has(w)) continue;
          unreached++;
          assert.equal(img[(p * 11 + h) * 16 + w], 1, `exp(0) at ${p},${h},${w}`);
        }
      }
    }
    // Rows 1, 3, ..., 9 and 9 of the columns are reached.
    assert.equal(unreached, 6 * (11 * 16 - 5 * 9));
  },
);

backendTest("interpolate nearest/bilinear/linear over [3,4,13,10] with gradients", async (d) => {
  await matchesCpu(
    d,
    (dev) =>
      withGrads(
        dev,
        [[3, 4, 13, 10]],
        480,
        (x) =>
          F.interpolate(x, { scaleFactor: 1.7, mode: "bilinear" }).sum()
            .add(
              F.interpolate(x, { size: [29, 7], mode: "bilinear", alignCorners: true }).square()
                .sum(),
            )
            .add(F.interpolate(x, { scaleFactor: [0.6, 2.5] }).square().sum())
            .add(
              F.interpolate(x.reshape([3, 52, 10]), { size: 23, mode: "linear" }).square().sum(),
            ),
      ),
    TOL,
  );
});

backendTest("pooling and padding over [3,5,17,15] with gradients", async (d) => {
  await matchesCpu(
    d,
    (dev) =>
      withGrads(
        dev,
        [[3, 5, 17, 15]],
        410,
        (x) =>
          F.maxPool2d(x, 3, { stride: 2, padding: 1, ceilMode: true }).sum()
            .add(F.maxPool2d(x, [2, 3], { stride: [1, 2], dilation: 2 }).mean())
            .add(F.avgPool2d(x, 3, { stride: 2, padding: 1, countIncludePad: false }).sum())
            .add(F.adaptiveAvgPool2d(x, [4, 6]).sum())
            .add(F.pad(x, [2, 1, 3, 0], { mode: "reflect" }).square().sum())
            .add(F.pad(x, [1, 1, 1, 1], { mode: "replicate" }).mean())
            .add(F.pad(x, [-1, 2, 0, 1], { value: 2 }).sum()),
      ),
    TOL,
  );
});

backendTest(
  "batchNorm [8,6,9,7] training (fused on cpu) with gradients and running stats",
  async (d) => {
    await matchesCpu(d, (dev) => {
      const mean = on(dev, [6], floats([6], 440, -1, 1));
      const variance = on(dev, [6], floats([6], 441, 0.5, 2));
      const outs = withGrads(dev, [[8, 6, 9, 7], [6], [6]], 442, (x, w, b) =>
        F.maxPool2d(
          F.batchNorm(x.mul(3).add(1), mean, variance, {
            weight: w,
            bias: b,
            training: true,
            momentum: 0.2,
          }),
          2,
        ));
      return [...outs, mean, variance];
    }, TOL);
  },
);

backendTest("maxPool2d: NaN wins its window, -inf and +inf, padding never wins", async (d) => {
  const x = on(d, [1, 1, 2, 4], [NaN, 1, -Infinity, -Infinity, 2, 3, Infinity, -5]);
  await assertTensor(F.maxPool2d(x, 2), [NaN, Infinity], { shape: [1, 1, 1, 2] });
  const neg = on(d, [1, 1, 2, 2], [-7, -8, -9, -6]);
  // With padding, windows still pick a real element (the padding is -inf).
  await assertTensor(F.maxPool2d(neg, 2, { stride: 1, padding: 1 }), [
    -7,
    -7,
    -8,
    -7,
    -6,
    -6,
    -9,
    -6,
    -6,
  ]);
  await matchesCpu(d, (dev) => {
    const v = floats([2, 3, 6, 6], 420);
    for (const [i, s] of [[3, NaN], [40, Infinity], [77, -Infinity], [100, NaN]]) v[i] = s;
    return F.maxPool2d(on(dev, [2, 3, 6, 6], v), 3, { stride: 2, ceilMode: true });
  }, { exact: true });
  // The gradient goes to the arg-max only (first on ties).
  const t = on(d, [1, 1, 2, 2], [1, 4, 4, 2]);
  t.requiresGrad = true;
  F.maxPool2d(t, 2).sum().backward();
  await assertTensor(t.grad!, [0, 1, 0, 0]);
});

backendTest("conv2d and avgPool2d with inf/NaN inputs match cpu", async (d) => {
  await matchesCpu(d, (dev) => {
    const v = floats([1, 2, 5, 5], 430);
    v[6] = Infinity;
    v[30] = NaN;
    const x = on(dev, [1, 2, 5, 5], v);
    const w = on(dev, [2, 2, 2, 2], floats([2, 2, 2, 2], 431));
    return [F.conv2d(x, w, null, { padding: 1 }), F.avgPool2d(x, 2, { stride: 1 })];
  }, TOL);
});

backendTest("conv2d hand-computed: a 2x2 box filter with padding and stride", async (d) => {
  const x = on(d, [1, 1, 3, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  const w = on(d, [1, 1, 2, 2], [1, 1, 1, 1]);
  await assertTensor(F.conv2d(x, w), [12, 16, 24, 28], { shape: [1, 1, 2, 2] });
  await assertTensor(F.conv2d(x, w, on(d, [1], [0.5]), { padding: 1, stride: 2 }), [
    1.5,
    5.5,
    11.5,
    28.5,
  ], { shape: [1, 1, 2, 2] });
  await assertTensor(F.avgPool2d(x, 2, { stride: 1 }), [3, 4, 6, 7]);
  await assertTensor(F.adaptiveAvgPool2d(x, 1), [5], { shape: [1, 1, 1, 1] });
  await assertTensor(F.pad(on(d, [1, 3], [1, 2, 3]), [2, 2], { mode: "reflect" }), [
    3,
    2,
    1,
    2,
    3,
    2,
    1,
  ]);
  assert.throws(() => F.conv2d(x, on(d, [1, 2, 2, 2], new Array(8).fill(1))), /channels/);
  assert.throws(() => F.conv2d(x, on(d, [1, 1, 4, 4], new Array(16).fill(1))), /larger/);
  assert.throws(() => F.maxPool2d(x, 2, { padding: 2 }), /half the kernel/);
  assert.throws(() => F.pad(on(d, [1, 3], [1, 2, 3]), [3, 0], { mode: "reflect" }), /less than/);
});

backendTest("unbatched inputs and a large im2col (several dispatch rows)", async (d) => {
  const x = floats([3, 9, 9], 440);
  const w = floats([4, 3, 3, 3], 441);
  const out = await matchesCpu(
    d,
    (dev) => F.conv2d(on(dev, [3, 9, 9], x), on(dev, [4, 3, 3, 3], w)),
    TOL,
  );
  assert.deepEqual([...out[0].shape], [4, 7, 7]);
  // A 590k-entry im2col and its col2im.
  const got = withGrads(
    d,
    [[1, 64, 32, 32], [2, 64, 3, 3]],
    450,
    (a, b) => F.conv2d(a, b, null, { padding: 1 }),
  );
  const want = withGrads(
    REF,
    [[1, 64, 32, 32], [2, 64, 3, 3]],
    450,
    (a, b) => F.conv2d(a, b, null, { padding: 1 }),
  );
  for (let i = 0; i < 3; i++) {
    assertClose(await got[i].data(), await want[i].data(), { ...TOL, what: `big ${i}` });
  }
});
