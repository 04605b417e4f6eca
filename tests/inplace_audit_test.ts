/**
 * In-place ops on results PyTorch returns as new tensors: after Linear,
 * matmul, conv and a reduction with keepdim (their internal reshapes no
 * longer mark the memory shared), on repeat, tile, rot90, kron, ... (no
 * longer refused as copies made by a view op), and the refusals that stay
 * (a user-visible reshape view, a copy where PyTorch has a view, a saved
 * tensor). The audit compares every case of the fixture
 * `torch_inplace_audit.json` (PyTorch 1.13: is the result a view, does
 * `add_(1)` work, without grad and on a non-leaf with backward) with multigrad.
 * @module
 */

import assert from "node:assert/strict";
import * as mg from "../mod.ts";
import { type Device, nn, type Tensor, tensor } from "../mod.ts";
import audit from "./fixtures/torch_inplace_audit.json" with { type: "json" };
import { assertClose, backendTest, floats, on } from "./harness.ts";

const refusedShared = /shares its memory/;

/** `build(x)` with x a non-leaf requiring grad; returns x's leaf gradient after `after(result)`. */
async function leafGrad(
  d: Device,
  shape: number[],
  build: (x: Tensor) => Tensor,
  after: (r: Tensor) => void,
): Promise<number[]> {
  const leaf = on(d, shape, floats(shape, 7)).requiresGrad_();
  const r = build(leaf.mul(1));
  after(r);
  r.sum().backward();
  return Array.from(await leaf.grad!.data());
}

backendTest(
  "relu_ after nn.Linear, matmul and conv2d: allowed, gradient as out of place",
  async (d) => {
    mg.manualSeed(0); // layers whose relu keeps some output of each case
    const lin = new nn.Linear(3, 4, { device: d });
    const conv = new nn.Conv2d(2, 3, 2, { device: d });
    const w = on(d, [3, 4], floats([3, 4], 3));
    const cases: [string, number[], (x: Tensor) => Tensor][] = [
      ["Linear 2-D", [5, 3], (x) => lin.forward(x)],
      ["Linear 3-D", [2, 5, 3], (x) => lin.forward(x)],
      ["Linear 1-D", [3], (x) => lin.forward(x)],
      ["matmul", [5, 3], (x) => x.matmul(w)],
      ["matmul vector", [3], (x) => x.matmul(w)],
      ["conv2d", [1, 2, 4, 4], (x) => conv.forward(x)],
      ["sum keepdim", [5, 3], (x) => x.sum(1, true)],
    ];
    for (const [name, shape, f] of cases) {
      const inPlace = await leafGrad(d, shape, f, (r) => r.relu_());
      const outOfPlace = await leafGrad(d, shape, (x) => f(x).relu(), () => {});
      assertClose(inPlace, outOfPlace, { atol: 1e-6 });
      assert.ok(inPlace.some((v) => v !== 0), `${name}: some gradient reaches the input`);
    }
    // In a chain, as PyTorch's nn.ReLU(inplace=True) after a Linear.
    const x = on(d, [5, 3], floats([5, 3], 1)).requiresGrad_();
    lin.forward(x).relu_().sum().backward();
    assert.ok(x.grad);
  },
);

backendTest(
  "the refusals stay: a user-visible reshape view, a view's copy, a saved tensor",
  (d) => {
    const lin = new nn.Linear(3, 4, { device: d });
    const x = on(d, [5, 3], floats([5, 3], 2)).requiresGrad_();
    // A reshape the user holds: a recorded change to one would not reach the other's history.
    const z = lin.forward(x);
    const flat = z.reshape([20]);
    assert.throws(() => z.relu_(), refusedShared);
    assert.throws(() => flat.relu_(), refusedShared);
    // The input of a linear is no alias of its output, and stays changeable.
    const h = x.mul(2);
    lin.forward(h);
    h.add_(1);
    // A tensor a backward saved: its version check catches the change at backward.
    const y = lin.forward(x);
    const sq = y.mul(y);
    y.add_(1);
    assert.throws(() => sq.sum().backward(), /modified in place/);
    // A copy where PyTorch has a view: a change would not reach the source.
    const s = on(d, [3, 4], floats([3, 4], 4));
    for (
      const v of [s.t(), s.narrow(1, 0, 2), s.permute([1, 0]), s.unsqueeze(0).expand([2, 3, 4])]
    ) {
      assert.throws(() => v.add_(1), /is a copy made by/);
    }
  },
);

backendTest(
  "repeat, tile, rot90, kron, roll, diag...: in place on the new tensor, the source unchanged",
  async (d) => {
    const vals = floats([4, 4], 5);
    const builds: [string, (x: Tensor) => Tensor][] = [
      ["repeat", (x) => x.repeat([2, 1])],
      ["tile", (x) => x.tile([2])],
      ["rot90", (x) => x.rot90()],
      ["rot90 k=3", (x) => x.rot90(3)],
      ["kron", (x) => mg.kron(x, mg.ones([2, 2], { device: d }))],
      ["roll", (x) => x.roll(1)],
      ["diag", (x) => x.diag()],
      ["diag of a vector", (x) => x.diag().diag()],
      ["diagEmbed", (x) => x.diagEmbed()],
      ["diagflat", (x) => x.narrow(0, 0, 1).diagflat()],
      ["repeatInterleave", (x) => x.repeatInterleave(2)],
      ["narrowCopy", (x) => x.narrowCopy(1, 1, 2)],
      ["take", (x) => x.take(tensor([0, 5], { dtype: "int32", device: d }))],
      ["pixelShuffle", (x) => nn.functional.pixelShuffle(x.reshape([1, 4, 2, 2]), 2)],
    ];
    for (const [name, f] of builds) {
      const x = on(d, [4, 4], vals);
      const r = f(x);
      const expected = Array.from(await r.data()).map((v) => v + 1);
      r.add_(1);
      assertClose(Array.from(await r.data()), expected, { atol: 1e-6 });
      assertClose(Array.from(await x.data()), vals, { atol: 0 });
      // Recorded on a non-leaf: the gradient is the out-of-place one.
      const g1 = await leafGrad(d, [4, 4], f, (t) => t.mul_(3));
      const g2 = await leafGrad(d, [4, 4], (t) => f(t).mul(3), () => {});
      assertClose(g1, g2, { atol: 1e-5 });
      assert.ok(g1.some((v) => v !== 0), name);
    }
  },
);

backendTest(
  "the caller's input stays changeable after ops that reshape it internally; saved ones are caught",
  async (d) => {
    mg.manualSeed(0);
    const conv = new nn.Conv2d(2, 3, 2, { device: d });
    const ops: [string, number[], (x: Tensor) => Tensor][] = [
      ["kron", [2, 2], (x) => mg.kron(x, mg.ones([2, 2], { device: d }))],
      ["conv2d", [1, 2, 3, 3], (x) => conv.forward(x)],
      ["repeat", [3], (x) => x.repeat([2])],
      ["stack", [3, 4], (x) => mg.stack([x, x], 1)],
      ["max of all", [3, 4], (x) => x.max()],
      [
        "indexAdd",
        [3, 4],
        (x) =>
          x.indexAdd(0, tensor([0, 2], { dtype: "int32", device: d }), x.narrow(0, 0, 2).clone()),
      ],
      [
        "embedding",
        [3, 4],
        (x) => nn.functional.embedding(tensor([0, 2], { dtype: "int32", device: d }), x),
      ],
    ];
    // Gradients of the input and of conv's weight, with `change` applied to x after the op.
    const grads = async (shape: number[], f: (x: Tensor) => Tensor, change: boolean) => {
      conv.weight.grad = null;
      const leaf = on(d, shape, floats(shape, 2)).requiresGrad_();
      const x = leaf.mul(1);
      const y = f(x);
      if (change) x.add_(1); // allowed, as in PyTorch
      y.sum().backward();
      const wg = conv.weight.grad as Tensor | null;
      const w: number[] = wg ? Array.from(await wg.data()) : [];
      return [...Array.from(await leaf.grad!.data()), ...w];
    };
    for (const [name, shape, f] of ops) {
      // Either the op saved x for its gradient and backward names the change, or the gradients
      // are those without it: never a gradient computed from changed values.
      let changed: number[] | null = null;
      try {
        changed = await grads(shape, f, true);
      } catch (e) {
        assert.match(String(e), /modified in place/, name);
      }
      if (changed) assertClose(changed, await grads(shape, f, false), { atol: 1e-5 });
    }
    // argmax/argmin of all elements (no gradient) leave their input changeable too.
    const z = on(d, [3, 4], floats([3, 4], 4)).requiresGrad_().mul(1);
    const picked = [z.argmax(), z.argmin(), z.argmax(undefined, true)];
    z.add_(1);
    assert.deepEqual(picked.map((p) => p.shape), [[], [], [1, 1]]);
    // A result that is a reshape view of the input keeps both refused.
    const x = on(d, [3, 4], floats([3, 4], 3)).requiresGrad_().mul(1);
    const flat = x.flatten();
    assert.throws(() => x.add_(1), refusedShared);
    assert.throws(() => flat.add_(1), refusedShared);
    assert.equal(x.flatten(1), x); // nothing to flatten: the input itself, as PyTorch
  },
);

backendTest("alias in-place forms equal their ops", async (d) => {
  const vals = [0.5, -0.25, 0.75, -0.9];
  const other = [0.5, 0.5, -1, 2];
  const t = () => on(d, [4], vals);
  const o = on(d, [4], other);
  const pairs: [Tensor, Tensor][] = [
    [t().arcsin_(), t().asin()],
    [t().arccos_(), t().acos()],
    [t().arctan_(), t().atan()],
    [t().arcsinh_(), t().asinh()],
    [t().arctanh_(), t().atanh()],
    [t().abs().add(1).arccosh_(), t().abs().add(1).acosh()],
    [t().negative_(), t().neg()],
    [t().absolute_(), t().abs()],
    [t().mul(3).fix_(), t().mul(3).trunc()],
    [t().sgn_(), t().sign()],
    [t().arctan2_(o), t().atan2(o)],
    [t().subtract_(o, { alpha: 2 }), t().sub(o.mul(2))],
    [t().multiply_(o), t().mul(o)],
    [t().divide_(o, { roundingMode: "floor" }), t().div(o).floor()],
    [t().trueDivide_(o), t().div(o)],
    [t().greater_(o), t().gt(o).float()],
    [t().greaterEqual_(o), t().ge(o).float()],
    [t().less_(o), t().lt(o).float()],
    [t().lessEqual_(o), t().le(o).float()],
    [t().notEqual_(o), t().ne(o).float()],
  ];
  for (const [a, b] of pairs) assertClose(Array.from(await a.data()), Array.from(await b.data()));
});

/**
 * Where multigrad still differs from PyTorch, with the reason (see FEATURES.md's in-place row).
 * The audit fails when this list is wrong either way: a case fixed, or a new difference.
 */
const KNOWN: Record<string, string> = {};

/**
 * Ops that still leave the caller's input marked as shared by an internal reshape of it (PyTorch
 * lets `x.add_(1)` follow any op that returns no view of `x`). The audit requires this exact list.
 */
const KNOWN_INPUT: Record<string, string> = {};

Deno.test("audit: in place on each op's result where PyTorch allows it, unless a PyTorch view", async () => {
  const first = (r: unknown) => (Array.isArray(r) ? r[0] : r) as Tensor;
  const fails = (f: () => void) => {
    try {
      f();
      return false;
    } catch {
      return true;
    }
  };
  const found: string[] = [];
  const inputMarked: string[] = [];
  for (const c of audit.cases) {
    const build = new Function("x", "mg", `return ${c.ts};`) as (
      x: Tensor,
      m: typeof mg,
    ) => unknown;
    const noGradRefused = fails(() => first(build(mg.randn(c.shape), mg)).add_(1));
    let gradRefused = false;
    let wrongGrad = false;
    try {
      const leaf = mg.randn(c.shape, { requiresGrad: true });
      const x = leaf.detach();
      mg.manualSeed(1); // the same weights and dropout masks for the reference below
      const r = first(build(leaf.mul(1), mg));
      r.add_(1);
      if (r.requiresGrad) {
        r.sum().backward();
        // Allowed, the gradient must be the one without the add_ (no saved value read changed).
        const ref = x.clone().requiresGrad_();
        mg.manualSeed(1);
        first(build(ref.mul(1), mg)).sum().backward();
        const [a, b] = [await leaf.grad!.data(), await ref.grad!.data()];
        wrongGrad = a.some((v, i) => Math.abs(v - b[i]) > 1e-4 * (1 + Math.abs(b[i])));
      }
    } catch {
      gradRefused = true;
    }
    assert.ok(!wrongGrad, `${c.name}: in place gave a wrong gradient`);
    const differs = (!c.isView && ((c.nograd && noGradRefused) || (c.grad && gradRefused))) ||
      (!c.nograd && !noGradRefused && !c.isView);
    if (differs) found.push(c.name);
    if (!c.isView) { // the op's input, a non-leaf, stays changeable in place
      const leaf = mg.randn(c.shape, { requiresGrad: true });
      const input = leaf.mul(1);
      mg.manualSeed(1);
      const r = first(build(input, mg));
      if (fails(() => input.add_(1))) inputMarked.push(c.name);
      else if (r.requiresGrad) {
        // Backward names the change (a saved input), or the gradient is the one without it.
        try {
          r.sum().backward();
        } catch (e) {
          assert.match(String(e), /modified in place/, c.name);
          continue;
        }
        const ref = leaf.detach().clone().requiresGrad_();
        mg.manualSeed(1);
        first(build(ref.mul(1), mg)).sum().backward();
        const [a, b] = [await leaf.grad!.data(), await ref.grad!.data()];
        const off = a.some((v, i) => Math.abs(v - b[i]) > 1e-4 * (1 + Math.abs(b[i])));
        assert.ok(!off, `${c.name}: a change of the input gave a wrong gradient`);
      }
    }
  }
  assert.deepEqual(found.sort(), Object.keys(KNOWN).sort());
  assert.deepEqual(inputMarked.sort(), Object.keys(KNOWN_INPUT).sort());
  assert.ok(audit.cases.length >= 200);
});
