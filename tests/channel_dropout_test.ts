/**
 * Dropout1d, Dropout2d and AlphaDropout (and their functional forms): whole
 * channels dropped (statistics of the fraction, the 1 / (1 - p) scale, the
 * gradient), PyTorch 1.13's reading of a 3D input to Dropout2d as [N, C, L],
 * evaluation as the identity, seeded masks equal on every backend, alpha
 * dropout's mean and variance, and errors naming the bad value or shape.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, manualSeed, nn, ones, randn, type Tensor, tensor } from "../mod.ts";
import { assertClose, backendTest, REF } from "./harness.ts";

const F = nn.functional;

/**
 * Checks that every slice of `y` over the dims from `from` on (a channel) is all 0 or all
 * `scale`, for `y` computed from ones; returns the fraction of channels dropped.
 */
async function channelFraction(y: Tensor, from: number, scale: number): Promise<number> {
  const values = await y.data();
  const size = y.shape.slice(from).reduce((a, b) => a * b, 1);
  let dropped = 0;
  for (let start = 0; start < values.length; start += size) {
    const first = values[start];
    if (first === 0) dropped++;
    else assertClose(first, scale, { rtol: 1e-6, what: `kept channel at ${start}` });
    for (let i = start; i < start + size; i++) {
      assert.equal(values[i], first, `element ${i} differs from its channel's first`);
    }
  }
  return dropped / (values.length / size);
}

function assertFraction(fraction: number, p: number, channels: number, what: string): void {
  const sd = Math.sqrt(p * (1 - p) / channels);
  assert.ok(Math.abs(fraction - p) < 5 * sd, `${what}: fraction dropped ${fraction}, p ${p}`);
}

backendTest(
  "Dropout2d: whole [H, W] channels dropped with probability p, the rest scaled by 1 / (1 - p); gradient is the mask",
  async (device) => {
    manualSeed(11);
    for (const p of [0.2, 0.5]) {
      const x = ones([32, 64, 3, 4], { device, requiresGrad: true });
      const y = new nn.Dropout2d(p).forward(x);
      const fraction = await channelFraction(y, 2, 1 / (1 - p));
      assertFraction(fraction, p, 32 * 64, `p=${p}`);
      y.sum().backward();
      assert.deepEqual(await x.grad!.data(), await y.data());
    }
  },
);

backendTest(
  "Dropout1d: whole L rows of [N, C, L] and of unbatched [C, L] inputs",
  async (device) => {
    manualSeed(12);
    const p = 0.3;
    const batched = new nn.Dropout1d(p).forward(ones([40, 50, 7], { device }));
    assert.deepEqual([...batched.shape], [40, 50, 7]);
    assertFraction(await channelFraction(batched, 2, 1 / (1 - p)), p, 2000, "batched");
    const unbatched = F.dropout1d(ones([2000, 5], { device }), p);
    assert.deepEqual([...unbatched.shape], [2000, 5]);
    assertFraction(await channelFraction(unbatched, 1, 1 / (1 - p)), p, 2000, "unbatched");
  },
);

backendTest(
  "Dropout2d of a 3D input drops rows of [N, C, L], as PyTorch 1.13 (not an unbatched [C, H, W])",
  async (device) => {
    manualSeed(13);
    // As [C, H, W] each of the 40 channels would be dropped as a whole; as [N, C, L] each of the
    // 40·30 rows of 6 is, so the fraction over the 40 leading slices differs per slice.
    const y = F.dropout2d(ones([40, 30, 6], { device }), 0.5);
    assertFraction(await channelFraction(y, 2, 2), 0.5, 1200, "rows");
    const values = await y.data();
    const slicesWhole = Array.from({ length: 40 }, (_, n) => {
      const slice = values.subarray(n * 180, (n + 1) * 180);
      return slice.every((v) => v === 0) || slice.every((v) => v === 2);
    });
    assert.ok(slicesWhole.filter(Boolean).length < 5, "the leading slices are not dropped whole");
  },
);

backendTest(
  "channel dropout: evaluation, p = 0 and training false return the input; p = 1 multiplies by 0",
  async (device) => {
    const x = randn([2, 3, 4, 5], { device });
    for (const m of [new nn.Dropout1d(), new nn.Dropout2d(), new nn.AlphaDropout()]) {
      m.eval();
      const input = m instanceof nn.Dropout1d ? x.reshape([6, 4, 5]) : x;
      assert.equal(m.forward(input), input, `${m} in evaluation`);
    }
    assert.equal(F.dropout2d(x, 0), x);
    assert.equal(F.dropout2d(x, 0.5, false), x);
    assert.equal(F.dropout1d(x.reshape([6, 20]), 0.5, false).shape.length, 2);
    // alpha_dropout's functional form is off unless asked, as PyTorch's (training=False).
    assert.equal(F.alphaDropout(x, 0.5), x);
    const special = tensor([1, -2, Infinity, NaN], { shape: [2, 2], device });
    assertClose(await F.dropout2d(special, 1).data(), [0, 0, NaN, NaN], { what: "dropout2d p=1" });
    assertClose(await new nn.AlphaDropout(1).forward(special).data(), [0, 0, NaN, NaN], {
      what: "AlphaDropout p=1",
    });
  },
);

backendTest(
  "channel dropout masks come from the seeded stream: equal on every backend",
  async (device) => {
    const run = (d: Device) => {
      manualSeed(14);
      return [
        F.dropout2d(ones([4, 6, 2, 2], { device: d }), 0.5),
        F.dropout1d(ones([5, 3], { device: d }), 0.4),
        F.alphaDropout(ones([16], { device: d }), 0.3, true),
      ];
    };
    const expected = await Promise.all(run(REF).map((t) => t.data()));
    const actual = await Promise.all(run(device).map((t) => t.data()));
    for (let i = 0; i < expected.length; i++) {
      assertClose(actual[i], expected[i], { atol: 1e-6, rtol: 1e-6, what: `output ${i}` });
    }
    manualSeed(14);
    const again = await F.dropout2d(ones([4, 6, 2, 2], { device }), 0.5).data();
    assert.deepEqual(Array.from(again), Array.from(actual[0]));
  },
);

backendTest(
  "AlphaDropout keeps zero mean and unit variance; dropped elements take SELU's saturation",
  async (device) => {
    manualSeed(15);
    const n = 200_000;
    const p = 0.2;
    const x = randn([n], { device, requiresGrad: true });
    const y = new nn.AlphaDropout(p).forward(x);
    const alpha = 1.7580993408473766;
    const a = 1 / Math.sqrt((alpha * alpha * p + 1) * (1 - p));
    const dropped = -alpha * a * (1 - p);
    const xs = await x.data();
    const ys = await y.data();
    let count = 0;
    let sum = 0;
    let sq = 0;
    for (let i = 0; i < n; i++) {
      sum += ys[i];
      sq += ys[i] * ys[i];
      if (Math.abs(ys[i] - dropped) < 1e-6 && Math.abs(xs[i] * a + alpha * a * p - ys[i]) > 1e-5) {
        count++;
      } else {
        assertClose(ys[i], xs[i] * a + alpha * a * p, { atol: 1e-5, what: `kept element ${i}` });
      }
    }
    const mean = sum / n;
    assertFraction(count / n, p, n, "dropped");
    assert.ok(Math.abs(mean) < 0.02, `mean ${mean}`);
    assert.ok(Math.abs(sq / n - mean * mean - 1) < 0.03, `variance ${sq / n - mean * mean}`);
    y.sum().backward();
    // The gradient is a where kept, 0 where dropped.
    const g = await x.grad!.data();
    for (let i = 0; i < n; i += 997) assert.ok(g[i] === 0 || Math.abs(g[i] - a) < 1e-6);
  },
);

Deno.test("channel dropout errors name the bad value or shape; reprs as PyTorch", () => {
  assert.throws(
    () => new nn.Dropout2d(1.5),
    /Dropout2d: dropout probability has to be between 0 and 1, but got 1.5/,
  );
  assert.throws(
    () => new nn.Dropout1d(-0.1),
    /Dropout1d: dropout probability has to be between 0 and 1, but got -0.1/,
  );
  assert.throws(() => new nn.AlphaDropout(NaN), /AlphaDropout: .* but got NaN/);
  const x4 = ones([2, 3, 4, 5]);
  assert.throws(() => F.dropout2d(x4, 2), /dropout2d: dropout probability .* but got 2/);
  assert.throws(
    () => F.dropout1d(x4),
    /dropout1d: expected a 2D \[C, L\] or 3D \[N, C, L\] input, got shape \[2, 3, 4, 5\] \(4D\)/,
  );
  assert.throws(
    () => new nn.Dropout1d().forward(ones([5])),
    /dropout1d: expected a 2D \[C, L\] or 3D \[N, C, L\] input, got shape \[5\] \(1D\)/,
  );
  assert.throws(
    () => F.dropout2d(ones([5])),
    /dropout2d: expected a 4D \[N, C, H, W\] input, got shape \[5\] \(1D\)/,
  );
  assert.throws(
    () => F.dropout2d(tensor([[1, 2]], { dtype: "int32" })),
    /dropout2d: expected a floating-point input, got int32 \(shape \[1, 2\]\)/,
  );
  assert.equal(new nn.Dropout1d().toString(), "Dropout1d(p=0.5, inplace=False)");
  assert.equal(new nn.Dropout2d(0.3).toString(), "Dropout2d(p=0.3, inplace=False)");
  assert.equal(new nn.AlphaDropout().toString(), "AlphaDropout(p=0.5, inplace=False)");
  assert.deepEqual(Object.keys(new nn.Dropout2d().stateDict()), []);
});
