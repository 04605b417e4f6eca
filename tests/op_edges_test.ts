/**
 * Ops at their edges, as PyTorch 1.13 (numbers from `/usr/bin/python3`): gradients where the plain
 * formula gives 0·∞ (std where it is 0, pow at base 0), a full max/min sharing its gradient among
 * ties, gather's index check, ops that refuse a 0-d tensor, and type promotion with a 0-d tensor.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, tensor, zeros } from "../mod.ts";
import { assertClose, backendTest } from "./harness.ts";

const on = (device: Device) => ({ device, requiresGrad: true });

backendTest("std: a row whose std is 0 gets gradient 0, not NaN", async (device) => {
  const x = tensor([[1, 2, 4], [3, 3, 3]], on(device));
  const s = x.std(1);
  s.sum().backward();
  assertClose(await s.data(), [1.5275251865386963, 0], { what: "std" });
  assertClose(await x.grad!.data(), [
    -0.4364357590675354,
    -0.10910891741514206,
    0.5455447435379028,
    0,
    0,
    0,
  ], { atol: 1e-6, what: "grad" });
  const flat = tensor([5, 5, 5, 5], on(device));
  flat.std().backward();
  assert.deepEqual(Array.from(await flat.grad!.data()), [0, 0, 0, 0]);
});

backendTest("max() and min() of all elements share the gradient among ties", async (device) => {
  const x = tensor([1, 3, 3, 2], on(device));
  x.max().backward();
  assert.deepEqual(Array.from(await x.grad!.data()), [0, 0.5, 0.5, 0]);
  const y = tensor([[1, 0.5], [0.5, 4]], on(device));
  y.min().add(y.max()).backward();
  assert.deepEqual(Array.from(await y.grad!.data()), [0, 0.5, 0.5, 1]);
});

Deno.test("max() of all elements: NaN ties NaN, as PyTorch (cpu)", async () => {
  const x = tensor([1, NaN, NaN], { requiresGrad: true });
  x.max().backward();
  assert.deepEqual(Array.from(await x.grad!.data()), [0, 0.5, 0.5]);
});

backendTest("pow: gradients at base 0 are PyTorch's, not NaN", async (device) => {
  const x = tensor([0, 2], on(device));
  x.pow(0).sum().backward();
  assert.deepEqual(Array.from(await x.grad!.data()), [0, 0]);
  const e = tensor(2, on(device));
  tensor([0, 3], { device }).pow(e).sum().backward();
  assertClose(await e.grad!.data(), [9.887510299682617], { what: "d/de" });
  const base = tensor([0, 3], on(device));
  const exponent = tensor([2, 0.5], on(device));
  base.pow(exponent).sum().backward();
  assertClose(await base.grad!.data(), [0, 0.28867512941360474], { what: "d/dbase" });
  assertClose(await exponent.grad!.data(), [0, 1.9028522968292236], { what: "d/dexponent" });
});

backendTest(
  "pow at base ±0: C's values (0 or inf, the sign of -0 for odd integer exponents)",
  async (device) => {
    const exponents = [-3, -2, -1.5, -0.5, 0.5, 1.5, 3, 4, -Infinity, Infinity];
    const zeros = tensor(exponents.map(() => 0), { device });
    const negativeZeros = zeros.neg();
    const e = tensor(exponents, { device });
    assert.deepEqual(Array.from(await zeros.pow(e).data()), exponents.map((y) => Math.pow(0, y)));
    assert.deepEqual(
      Array.from(await negativeZeros.pow(e).data()),
      exponents.map((y) => Math.pow(-0, y)),
    );
    // The gradient of x^0.5 at 0 is inf, as PyTorch's.
    const x = tensor([0, 4], on(device));
    x.pow(0.5).sum().backward();
    assert.deepEqual(Array.from(await x.grad!.data()), [Infinity, 0.25]);
  },
);

backendTest("gather: an index outside the dim is an error naming it", async (device) => {
  const x = tensor([[1, 2, 3], [4, 5, 6]], { device });
  assert.throws(
    () => x.gather(1, tensor([[-1, 0], [0, 1]], { device, dtype: "int32" })),
    /gather: index -1 is out of range for dim 1 of size 3 \(shape \[2, 3\]\)/,
  );
  // An index the device computed is checked at the next read.
  const computed = tensor([[0, 1], [1, 2]], { device, dtype: "int32" }).add(1);
  const picked = x.gather(1, computed);
  await assert.rejects(() => picked.data(), /gather: index 3 is out of range for dim 1 of size 3/);
  const fine = x.gather(1, tensor([[2, 0], [1, 1]], { device, dtype: "int32" }));
  assert.deepEqual(Array.from(await fine.data()), [3, 1, 5, 5]);
});

backendTest("select, narrow, split, unbind and chunk refuse a 0-d tensor", (device) => {
  const s = tensor(5, { device });
  for (
    const [op, run] of [
      ["select", () => s.select(0, 0)],
      ["narrow", () => s.narrow(0, 0, 1)],
      ["split", () => s.split(1)],
      ["unbind", () => s.unbind()],
      ["chunk", () => s.chunk(2)],
    ] as const
  ) {
    assert.throws(run, new RegExp(`${op}: cannot be applied to a 0-dim tensor`));
  }
});

backendTest(
  "flatten refuses startDim after endDim; an int add_ refuses a fractional alpha",
  (device) => {
    assert.throws(
      () => zeros([2, 3], { device }).flatten(1, 0),
      /flatten: startDim 1 comes after endDim 0/,
    );
    const ints = tensor([1, 2], { device, dtype: "int32" });
    assert.throws(
      () => ints.add_(tensor([1, 1], { device, dtype: "int32" }), { alpha: 0.5 }),
      /add_: alpha 0.5 is not an integer, and the tensor is int32/,
    );
  },
);

// float64: cpu only (WebGPU has no float64).
Deno.test("a 0-d tensor does not widen a dimensioned one of its kind (cpu)", async () => {
  const device = "cpu";
  const f32 = tensor([1, 2], { device });
  const sum = f32.add(tensor(1, { device, dtype: "float64" }));
  assert.equal(sum.dtype, "float32");
  assert.deepEqual(Array.from(await sum.data()), [2, 3]);
  // Of another kind it does (int32 + a float 0-d is float), and two 0-d tensors promote as usual.
  assert.equal(
    tensor([1, 2], { device, dtype: "int32" }).add(tensor(1.5, { device })).dtype,
    "float32",
  );
  assert.equal(tensor(1, { device }).add(tensor(1, { device, dtype: "float64" })).dtype, "float64");
  // The 0-d operand still gets its gradient, in its own dtype.
  const w = tensor(3, { device, dtype: "float64", requiresGrad: true });
  f32.mul(w).sum().backward();
  assert.equal(w.grad!.dtype, "float64");
  assert.deepEqual(Array.from(await w.grad!.data()), [3]);
  // In place, a float64 operand goes into a float32 tensor (PyTorch's can_cast), not into int32.
  const target = tensor([1, 2]);
  target.add_(tensor([0.5, 0.25], { dtype: "float64" }));
  assert.equal(target.dtype, "float32");
  assert.deepEqual(Array.from(await target.data()), [1.5, 2.25]);
  assert.throws(
    () => tensor([1, 2], { dtype: "int32" }).add_(tensor([0.5, 0.5])),
    /add_: the result type float32 cannot be stored in the int32 tensor/,
  );
});

backendTest("argmax of all elements with keepdim keeps every dim as 1", async (device) => {
  const i = tensor([[1, 2], [3, 0]], { device }).argmax(undefined, true);
  assert.deepEqual([...i.shape], [1, 1]);
  assert.deepEqual(Array.from(await i.data()), [2]);
});

backendTest(
  "matmul: a batch of 1 broadcasts against a batch of 0 (an empty result, zero gradients)",
  async (device) => {
    // Before, the batch was max(1, 0) = 1: the kernel read past an empty operand (a crash on cpu).
    const a = tensor([[1, 2, 3], [4, 5, 6]], on(device));
    const b = zeros([0, 3, 4], on(device));
    const c = a.matmul(b);
    assert.deepEqual(c.shape, [0, 2, 4]);
    c.sum().backward();
    assert.deepEqual(Array.from(await a.grad!.data()), [0, 0, 0, 0, 0, 0]);
    assert.deepEqual(b.grad!.shape, [0, 3, 4]);
    const d = zeros([1, 0, 3], on(device)).matmul(zeros([0, 3, 2], on(device)));
    assert.deepEqual(d.shape, [0, 0, 2]);
  },
);
