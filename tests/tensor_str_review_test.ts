/**
 * Review of tensor printing (src/printing/tensor_str.ts): grad_fn names of
 * nodes PyTorch 1.13 names after another op, and the one-line form of a
 * tensor whose memory was released.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, tensor } from "../mod.ts";
import { backendTest, REF } from "./harness.ts";

/** The device suffix that `format()` adds off the default device. */
const dev = (d: Device) => d === REF ? "" : `, device='${d}'`;

backendTest("narrow and square print PyTorch 1.13's grad_fn names", async (d) => {
  const x = tensor([[1, 2, 3], [4, 5, 6]], { device: d, requiresGrad: true });
  // PyTorch 1.13: x[:, 1:3] and x.narrow(1, 1, 2) print grad_fn=<SliceBackward0>.
  assert.equal(
    await x.narrow(1, 1, 2).format(),
    `tensor([[2., 3.],\n        [5., 6.]]${dev(d)}, grad_fn=<SliceBackward0>)`,
  );
  // PyTorch 1.13: x.square() is pow(x, 2): grad_fn=<PowBackward0>.
  assert.equal(
    await x.square().format(),
    `tensor([[ 1.,  4.,  9.],\n        [16., 25., 36.]]${dev(d)}, grad_fn=<PowBackward0>)`,
  );
});

Deno.test("a released tensor's one-line form does not send the user to format(), which rejects", async () => {
  const t = tensor([1, 2, 3], { device: REF });
  t.storage.dispose();
  const text = Deno.inspect(t);
  assert.match(
    text,
    /^tensor\(<3 values on cpu:0: released by dispose\(\), tidy\(\) or zeroGrad\(\)>/,
  );
  assert.doesNotMatch(text, /format\(\)/);
  await assert.rejects(() => t.format(), /released/);
});

// PyTorch 1.13: F.linear(x, w, b).grad_fn / F.linear(x, w).grad_fn for x of rank 1 to 5.
const LINEAR_GRAD_FN: [number[], string, string][] = [
  [[4], "AddBackward0", "SqueezeBackward3"],
  [[3, 4], "AddmmBackward0", "MmBackward0"],
  [[2, 3, 4], "ViewBackward0", "UnsafeViewBackward0"],
  [[2, 2, 3, 4], "AddBackward0", "UnsafeViewBackward0"],
  [[1, 2, 2, 3, 4], "AddBackward0", "UnsafeViewBackward0"],
];

backendTest("F.linear's output prints PyTorch 1.13's grad_fn (by rank and bias)", async (d) => {
  const w = tensor(Array.from({ length: 20 }, (_, i) => i / 8), { shape: [5, 4], device: d });
  const b = tensor([1, 2, 3, 4, 5], { device: d, requiresGrad: true });
  for (const [shape, withBias, without] of LINEAR_GRAD_FN) {
    const n = shape.reduce((p, q) => p * q, 1);
    const x = tensor(Array.from({ length: n }, (_, i) => i % 3), { shape, device: d });
    const wg = w.detach().requiresGrad_();
    assert.match(
      await nn.functional.linear(x, wg, b).format(),
      new RegExp(`grad_fn=<${withBias}>\\)$`),
    );
    assert.match(
      await nn.functional.linear(x, wg).format(),
      new RegExp(`grad_fn=<${without}>\\)$`),
    );
    // nn.Linear, the usual way: a 2-d batch prints AddmmBackward0.
    if (shape.length === 2) {
      assert.match(
        await new nn.Linear(4, 5).to(d).forward(x).format(),
        /grad_fn=<AddmmBackward0>\)$/,
      );
    }
  }
});
