/**
 * Unflatten: the inverse of Flatten, PyTorch's repr and errors, on every
 * backend, with a float64 gradient check.
 * @module
 */

import assert from "node:assert/strict";
import { nn, tensor } from "../mod.ts";
import { assertTensor, backendTest } from "./harness.ts";
import { check, inp } from "./gradcheck.ts";

backendTest("Unflatten undoes Flatten, -1 resolved, gradients pass through", async (device) => {
  const values = Array.from({ length: 24 }, (_, i) => i);
  const x = tensor(values, { shape: [2, 3, 4], device, requiresGrad: true });
  const flat = new nn.Flatten().forward(x);
  assert.deepEqual([...flat.shape], [2, 12]);
  const back = new nn.Unflatten(1, [3, -1]).forward(flat);
  assert.deepEqual([...back.shape], [2, 3, 4]);
  await assertTensor(back, values);
  assert.deepEqual([...new nn.Unflatten(-1, [2, 2]).forward(x).shape], [2, 3, 2, 2]);
  back.mul(back).sum().backward();
  await assertTensor(x.grad!, values.map((v) => 2 * v));
});

backendTest("Unflatten prints PyTorch's repr and names bad sizes", (device) => {
  assert.equal(new nn.Unflatten(1, [2, 5]).toString(), "Unflatten(dim=1, unflattened_size=(2, 5))");
  assert.equal(new nn.Unflatten(-1, [4]).toString(), "Unflatten(dim=-1, unflattened_size=(4,))");
  const x = tensor(Array.from({ length: 6 }, (_, i) => i), { shape: [2, 3], device });
  assert.throws(
    () => new nn.Unflatten(1, [2, 2]).forward(x),
    /Unflatten: sizes \(2, 2\) do not multiply to 3, dim 1 of input of shape \[2, 3\]/,
  );
  assert.throws(() => new nn.Unflatten(2, [3]).forward(x), /dim 2 is out of range/);
  assert.throws(() => new nn.Unflatten(0, []), /non-empty array of sizes/);
  assert.throws(
    () => new nn.Unflatten(0, [-1, -1]).forward(x),
    /sizes \(-1, -1\) do not multiply to 2/,
  );
});

check("Unflatten", (x) => new nn.Unflatten(1, [2, 3]).forward(x).exp(), [inp([2, 6], 1700)]);
