/**
 * In-place ops `zero_ fill_ copy_ add_ mul_` on every backend: values (and
 * PyTorch 1.13's, fixture `tensor_ops.inplace`), shared memory, version
 * counters, and the refusals that keep gradients right.
 * @module
 */

import assert from "node:assert/strict";
import { noGrad, tensor } from "../mod.ts";
import fixtures from "./fixtures/torch_reference.json" with { type: "json" };
import { assertTensor, backendTest, floats, on, REF } from "./harness.ts";

const F = fixtures.tensor_ops.inplace;

backendTest(
  "in-place ops equal PyTorch's: mul_ broadcast, add_ with alpha, copy_ broadcast",
  async (d) => {
    const x = tensor(F.x, { device: d });
    const before = x.version;
    assert.equal(x.mul_(tensor(F.y, { device: d })), x, "mul_ returns the tensor");
    await assertTensor(x, F.after_mul.flat());
    x.add_(tensor(F.z, { device: d }), { alpha: -0.5 });
    await assertTensor(x, F.after_add.flat());
    x.copy_(tensor(F.y, { device: d }));
    await assertTensor(x, F.after_copy.flat());
    assert.equal(x.version - before, F.version, "one version per in-place op, as PyTorch");
  },
);

backendTest(
  "zero_ fill_ copy_: numbers, 0-d tensors, dtypes, devices; views see the change",
  async (d) => {
    const x = on(d, [2, 3], floats([2, 3], 500));
    const view = x.reshape([3, 2]);
    x.zero_();
    await assertTensor(view, [0, 0, 0, 0, 0, 0], { what: "a view shares the memory" });
    x.fill_(2.5);
    await assertTensor(x, new Array(6).fill(2.5));
    x.fill_(tensor(-1, { device: d }));
    await assertTensor(x, new Array(6).fill(-1));
    const i = on(d, [3], [1, 2, 3], "int32");
    i.add_(4).mul_(2);
    assert.equal(i.dtype, "int32");
    await assertTensor(i, [10, 12, 14]);
    // copy_ converts the dtype (float to int truncates) and broadcasts.
    i.copy_(on(d, [1], [7.9]));
    await assertTensor(i, [7, 7, 7]);
    // From another device.
    x.copy_(on(REF, [3], [1, 2, 3]));
    await assertTensor(x, [1, 2, 3, 1, 2, 3]);
    x.add_(1, { alpha: 3 });
    await assertTensor(x, [4, 5, 6, 4, 5, 6]);
    assert.throws(() => i.add_(0.5), /cannot be stored in the int32 tensor/);
    assert.throws(() => i.fill_(0.5), /int32/);
    assert.throws(() => x.add_(on(d, [2, 2, 3], new Array(12).fill(1))), /does not fit/);
    assert.throws(() => x.copy_(on(d, [4], [1, 2, 3, 4])), /does not broadcast/);
    assert.throws(() => x.fill_(on(d, [2], [1, 2])), /one element/);
  },
);

backendTest("in place is refused on tensors autograd needs, allowed under noGrad", async (d) => {
  const w = on(d, [3], [1, 2, 3]);
  w.requiresGrad = true;
  assert.throws(() => w.add_(1), /add_: a leaf tensor that requires grad .* noGrad/);
  const h = w.mul(2);
  assert.throws(() => h.zero_(), /zero_: a tensor made by mul that autograd still needs/);
  const plain = on(d, [3], [1, 1, 1]);
  assert.throws(() => plain.add_(w), /other operand requires grad/);
  // A manual SGD step, as optimizers do it.
  w.mul(w).sum().backward();
  noGrad(() => w.add_(w.grad!, { alpha: -0.25 }));
  await assertTensor(w, [0.5, 1, 1.5]);
  assert.equal(w.requiresGrad, true);
});

backendTest("a saved tensor changed in place makes backward raise (version counter)", async (d) => {
  const w = on(d, [3], [1, 2, 3]);
  w.requiresGrad = true;
  const x = on(d, [3], [4, 5, 6]);
  const y = w.mul(x); // saves x for w's gradient
  x.mul_(10);
  assert.throws(() => y.sum().backward(), /mul backward: .*modified in place/);
  // Cloning first keeps the graph's copy intact.
  const x2 = on(d, [3], [4, 5, 6]);
  const y2 = w.mul(x2.clone());
  x2.mul_(10);
  y2.sum().backward();
  await assertTensor(w.grad!, [4, 5, 6]);
});
