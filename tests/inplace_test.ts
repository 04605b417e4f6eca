/**
 * In-place ops `zero_ fill_ copy_ add_ mul_` on every backend: values (and
 * PyTorch 1.13's, fixture `tensor_ops.inplace`), shared memory, version
 * counters, and the refusals that keep gradients right.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, noGrad, type Tensor, tensor } from "../mod.ts";
import fixtures from "./fixtures/torch_reference.json" with { type: "json" };
import { check, inp } from "./gradcheck.ts";
import { assertClose, assertTensor, backendTest, floats, on, REF } from "./harness.ts";

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
    // A fraction truncates toward zero, as PyTorch's; a value int32 cannot hold is refused.
    await assertTensor(i.fill_(-7.5), [-7, -7, -7]);
    assert.throws(() => i.fill_(2 ** 31), /int32 without overflow/);
    assert.throws(() => x.add_(on(d, [2, 2, 3], new Array(12).fill(1))), /does not fit/);
    assert.throws(() => x.copy_(on(d, [4], [1, 2, 3, 4])), /does not broadcast/);
    assert.throws(() => x.fill_(on(d, [2], [1, 2])), /one element/);
  },
);

backendTest("in place on a leaf that requires grad is refused, allowed under noGrad", async (d) => {
  const w = on(d, [3], [1, 2, 3]);
  w.requiresGrad = true;
  assert.throws(() => w.add_(1), /add_: a leaf tensor .* that requires grad .* noGrad/);
  assert.throws(() => w.zero_(), /zero_: a leaf tensor/);
  // A manual SGD step, as optimizers do it.
  w.mul(w).sum().backward();
  noGrad(() => w.add_(w.grad!, { alpha: -0.25 }));
  await assertTensor(w, [0.5, 1, 1.5]);
  assert.equal(w.requiresGrad, true);
});

/** x.grad and z.grad after `f(x, z).sum().backward()` on fresh leaves. */
async function gradsOf(
  d: Device,
  f: (x: Tensor, z: Tensor) => Tensor,
): Promise<{ y: number[]; x: number[]; z: number[] | null }> {
  const x = on(d, [2, 3], floats([2, 3], 71));
  const z = on(d, [3], floats([3], 72));
  x.requiresGrad = true;
  z.requiresGrad = true;
  const y = f(x, z);
  y.sum().backward();
  return {
    y: [...await y.data()],
    x: [...await x.grad!.data()],
    z: z.grad ? [...await z.grad.data()] : null,
  };
}

backendTest(
  "in place on a non-leaf is recorded: gradients equal the out-of-place form",
  async (d) => {
    const cases: [string, (x: Tensor, z: Tensor) => Tensor, (x: Tensor, z: Tensor) => Tensor][] = [
      ["add_ number", (x) => x.mul(2).add_(1), (x) => x.mul(2).add(1)],
      ["mul_ number", (x) => x.mul(2).mul_(3), (x) => x.mul(2).mul(3)],
      [
        "add_ tensor (broadcast, alpha)",
        (x, z) => x.mul(2).add_(z, { alpha: -2 }),
        (x, z) => x.mul(2).add(z.mul(-2)),
      ],
      ["mul_ tensor (broadcast)", (x, z) => x.mul(x).mul_(z), (x, z) => x.mul(x).mul(z)],
      ["fill_ number", (x, z) => x.mul(2).fill_(3).mul(z), (x, z) => x.mul(0).add(3).mul(z)],
      ["fill_ 0-d tensor", (x, z) => x.mul(2).fill_(z.sum()), (x, z) => x.mul(0).add(z.sum())],
      ["zero_", (x, z) => x.mul(2).zero_().add(z), (x, z) => x.mul(0).add(z)],
      ["copy_", (x, z) => x.mul(2).copy_(z.mul(z)), (x, z) => x.mul(0).add(z.mul(z))],
      [
        "add_ then mul_ chain",
        (x, z) => x.mul(3).add_(z).mul_(x),
        (x, z) => x.mul(3).add(z).mul(x),
      ],
    ];
    for (const [name, inPlace, outOfPlace] of cases) {
      const got = await gradsOf(d, inPlace);
      const want = await gradsOf(d, outOfPlace);
      assertClose(got.y, want.y, { what: `${name}: values` });
      assertClose(got.x, want.x, { what: `${name}: x.grad` });
      assertClose(got.z ?? [0, 0, 0], want.z ?? [0, 0, 0], { what: `${name}: z.grad` });
    }
    // Consumers recorded before the change keep the old history (PyTorch's edges).
    const x = on(d, [3], [1, 2, 3]);
    x.requiresGrad = true;
    const y = x.mul(2);
    const before = y.mul(3);
    y.mul_(5);
    before.add(y).sum().backward();
    await assertTensor(x.grad!, [16, 16, 16]);
    // A tensor without grad takes the history of the operand that has it.
    const plain = on(d, [3], [1, 1, 1]);
    plain.add_(x);
    assert.equal(plain.requiresGrad, true);
    assert.equal(plain.isLeaf, false);
  },
);

backendTest("in place on a non-leaf: saved values, views and grad mode", async (d) => {
  const x = on(d, [3], [0, 1, 2]);
  x.requiresGrad = true;
  const e = x.exp(); // exp saves its output
  e.mul_(2);
  assert.throws(() => e.sum().backward(), /exp backward: a tensor it saved .*modified in place/);
  const y = x.mul(2);
  const view = y.reshape([3, 1]);
  assert.throws(() => view.add_(1), /add_: a tensor .*reshape view.*CopySlices/);
  assert.throws(() => y.add_(1), /add_: a tensor .*reshape view.*CopySlices/);
  const h = x.mul(2);
  noGrad(() => h.add_(1));
  await assertTensor(h, [1, 3, 5]);
  assert.equal(h.gradFn?.name, "mul", "noGrad changes values only");
});

check(
  "a function using add_ and mul_ on intermediates",
  (a, b) => a.mul(a).add_(b, { alpha: 0.5 }).mul_(b).mul_(1.5).add_(a),
  [inp([2, 3], 81), inp([3], 82)],
);

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
