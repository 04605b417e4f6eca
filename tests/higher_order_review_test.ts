/**
 * Review of `autograd.grad` and createGraph against PyTorch 1.13
 * (tests/fixtures/torch_higher_order_review.json): random small programs of
 * 2-5 ops with their first, second and third derivatives on every backend
 * (float64 on cpu, float32 elsewhere); one tensor passed as two inputs of an
 * op whose backward is recomputed under createGraph; and `zeroGrad` keeping
 * `.grad` (setToNone false) after a createGraph backward, which must drop
 * the gradient's history as PyTorch's `zero_grad` does.
 * @module
 */

import assert from "node:assert/strict";
import {
  autograd,
  cat,
  type Device,
  type DType,
  nn,
  optim,
  type Tensor,
  tensor,
  where,
} from "../mod.ts";
import { assertClose, backendTest } from "./harness.ts";
import fixtures from "./fixtures/torch_higher_order_review.json" with { type: "json" };

const F = nn.functional;

// ---- random programs: first, second and third derivatives ----

interface Step {
  op: string;
  i?: number;
  args?: number[];
  p?: Params;
}
interface Params {
  e?: number;
  dim?: number;
  keep?: boolean;
  target?: number[];
  stride?: number;
  pad?: number;
  d0?: number;
  d1?: number;
  shape?: number[];
  start?: number;
  len?: number;
  index?: number[];
  ishape?: number[];
}

const ints = (values: number[], shape: number[], d: Device) =>
  tensor(values, { dtype: "int32", shape, device: d });

/** One step of a program, as `apply` of tests/fixtures/torch_higher_order_review.py. */
function apply(step: Step, regs: Tensor[], d: Device): Tensor {
  const a = step.args!.map((i) => regs[i]);
  const [x] = a;
  const p = step.p ?? {};
  switch (step.op) {
    case "add":
      return a[0].add(a[1]);
    case "mul":
      return a[0].mul(a[1]);
    case "div":
      return a[0].div(a[1].mul(a[1]).add(0.5));
    case "pow":
      return x.pow(p.e!);
    case "powt":
      return a[0].mul(a[0]).add(0.5).pow(a[1]);
    case "exp":
      return x.exp();
    case "log":
      return x.mul(x).add(0.5).log();
    case "tanh":
      return x.tanh();
    case "sigmoid":
      return x.sigmoid();
    case "relu":
      return x.relu();
    case "gelu":
      return F.gelu(x);
    case "softplus":
      return F.softplus(x);
    case "matmul":
      return a[0].matmul(a[1]);
    case "sum":
      return x.sum(p.dim!, p.keep);
    case "mean":
      return x.mean(p.dim!, p.keep);
    case "max":
      return x.max(p.dim!, p.keep);
    case "softmax":
      return x.softmax(p.dim!);
    case "logSoftmax":
      return x.logSoftmax(p.dim!);
    case "crossEntropy":
      return F.crossEntropy(x, ints(p.target!, [p.target!.length], d));
    case "mseLoss":
      return F.mseLoss(a[0], a[1]);
    case "linear":
      return F.linear(a[0], a[1], a[2] ?? null);
    case "conv2d":
      return F.conv2d(a[0], a[1], a[2], { stride: p.stride, padding: p.pad });
    case "layerNorm":
      return F.layerNorm(x, [x.shape.at(-1)!], { weight: a[1], bias: a[2] });
    case "batchNorm":
      return F.batchNorm(x, null, null, { weight: a[1], bias: a[2], training: true });
    case "transpose":
      return x.transpose(p.d0!, p.d1!);
    case "reshape":
      return x.reshape(p.shape!);
    case "narrow":
      return x.narrow(p.dim!, p.start!, p.len!);
    case "cat":
      return cat([a[0], a[1]], p.dim!);
    case "gather":
      return x.gather(p.dim!, ints(p.index!, p.ishape!, d));
    case "indexSelect":
      return x.indexSelect(p.dim!, ints(p.index!, [p.index!.length], d));
    case "where":
      return where(a[0].gt(0), a[1], a[2]);
  }
  throw new Error(`unknown op ${step.op}`);
}

/** Σ g·v over the gradients that have a graph (null when none has). */
function contract(gs: (Tensor | null)[], vs: number[][], shapes: number[][], d: Device) {
  let total: Tensor | null = null;
  gs.forEach((g, i) => {
    if (!g?.requiresGrad) return;
    const term = g.mul(tensor(vs[i], { dtype: g.dtype, shape: shapes[i], device: d })).sum();
    total = total ? total.add(term) : term;
  });
  return total as Tensor | null;
}

/** Compares each gradient (zeros where none) against PyTorch's, relative to the largest. */
async function expectGrads(gs: (Tensor | null)[], want: number[][], d: Device, what: string) {
  const expected = want.flat();
  const scale = Math.max(1, ...expected.map(Math.abs));
  const got: number[] = [];
  for (const [i, g] of gs.entries()) {
    got.push(...(g ? Array.from(await g.data()) : want[i].map(() => 0)));
  }
  const atol = (d.backend === "cpu" ? 1e-9 : 3e-3) * scale;
  assertClose(got, expected, { atol, rtol: 0, what });
}

backendTest(
  "random programs of 2-5 ops: PyTorch's first, second and third derivatives",
  async (d) => {
    const dtype: DType = d.backend === "cpu" ? "float64" : "float32";
    for (const [n, c] of fixtures.programs.entries()) {
      const ops = c.steps.filter((s) => s.op !== "input").map((s) => s.op).join(", ");
      const what = `program ${n} (${ops})`;
      const shapes = c.inputs.map((input) => input.shape);
      const leaves = c.inputs.map((input) =>
        tensor(input.values, { dtype, shape: input.shape, device: d, requiresGrad: true })
      );
      const regs: Tensor[] = [];
      for (const step of c.steps as Step[]) {
        regs.push(step.op === "input" ? leaves[step.i!] : apply(step, regs, d));
      }
      const out = regs.at(-1)!;
      const w = tensor(c.w, { dtype, shape: c.out_shape, device: d });
      const options = { allowUnused: true, createGraph: true };
      const g1 = autograd.grad(out.mul(w).sum(), leaves, options);
      const s2 = contract(g1, c.v1, shapes, d);
      const g2 = s2 ? autograd.grad(s2, leaves, options) : leaves.map(() => null);
      const s3 = contract(g2, c.v2, shapes, d);
      const g3 = s3 ? autograd.grad(s3, leaves, { allowUnused: true }) : leaves.map(() => null);
      await expectGrads([out], [c.out], d, `${what}: output`);
      await expectGrads(g1, c.g1, d, `${what}: first derivatives`);
      await expectGrads(g2, c.g2, d, `${what}: second derivatives`);
      await expectGrads(g3, c.g3, d, `${what}: third derivatives`);
    }
  },
);

// ---- one tensor as two inputs of a recomputed backward ----

const shared = fixtures.shared_inputs;

async function expectValues(t: Tensor | null, want: number[], d: Device, what: string) {
  assert.ok(t, `${what}: got null`);
  const tol = d.backend === "cpu" ? 1e-10 : 1e-4;
  assertClose(Array.from(await t.data()), want, { atol: tol, rtol: tol, what });
}

backendTest(
  "a tensor passed as two inputs of a recomputed backward counts once (prelu(w, w), weight = bias)",
  async (d) => {
    const dtype: DType = d.backend === "cpu" ? "float64" : "float32";
    const leaf = (values: number[], shape: number[]) =>
      tensor(values, { dtype, shape, device: d, requiresGrad: true });
    // The recomputed backward gave each slot the tensor's whole gradient: twice PyTorch's.
    const p = leaf(shared.prelu.x, [1]);
    const [g] = autograd.grad(F.prelu(p, p).sum(), p, { createGraph: true });
    await expectValues(g, shared.prelu.g, d, "prelu(p, p): first derivative");
    await expectValues(autograd.grad(g!.sum(), p)[0], shared.prelu.gg, d, "second derivative");

    for (
      const [name, c, shape] of [
        ["batchNorm", shared.batch_norm, [3, 2]],
        ["instanceNorm", shared.instance_norm, [2, 1, 3]],
      ] as const
    ) {
      const x = leaf(c.x, [...shape]);
      const w = leaf(c.w, [c.w.length]);
      const y = name === "batchNorm"
        ? F.batchNorm(x, null, null, { weight: w, bias: w, training: true })
        : F.instanceNorm(x, { weight: w, bias: w });
      const v = tensor(c.v, { dtype, shape: [...shape], device: d });
      const [gx, gw] = autograd.grad(y.mul(v).sum(), [x, w], { createGraph: true });
      await expectValues(gx, c.gx, d, `${name}: input gradient`);
      await expectValues(gw, c.gw, d, `${name}: weight = bias gradient`);
      const [hx, hw] = autograd.grad(gx!.square().sum(), [x, w]);
      await expectValues(hx, c.hx, d, `${name}: second derivative in the input`);
      await expectValues(hw, c.hw, d, `${name}: second derivative in the weight`);
    }
  },
);

// ---- zeroGrad after backward({ createGraph }) ----

/** How many nodes the graph behind `t` has (0 for a tensor without history). */
function graphSize(t: Tensor): number {
  const seen = new Set<unknown>();
  const stack = t.gradFn ? [t.gradFn] : [];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (seen.has(node)) continue;
    seen.add(node);
    stack.push(...node.producers());
  }
  return seen.size;
}

backendTest(
  "zeroGrad(false) after backward({ createGraph }) detaches .grad (PyTorch's zero_grad): the graph does not grow",
  async (d) => {
    const lin = new nn.Linear(3, 1).to(d);
    const opt = new optim.SGD(lin.parameters(), { lr: 0.1 });
    const x = tensor([[1, 2, 3]], { device: d });
    const sizes: number[] = [];
    let first: number[] | null = null;
    for (let step = 0; step < 4; step++) {
      if (step % 2 === 0) opt.zeroGrad(false);
      else lin.zeroGrad(false);
      const grad = lin.weight.grad;
      if (grad) {
        assert.equal(grad.gradFn, null, `step ${step}: the zeroed .grad has no history`);
        assert.equal(grad.requiresGrad, false, `step ${step}: the zeroed .grad requires no grad`);
        assert.deepEqual(await grad.toArray(), [[0, 0, 0]]);
      }
      lin.forward(x).square().sum().backward(undefined, { createGraph: true });
      assert.ok(lin.weight.grad!.requiresGrad, "createGraph gives .grad a graph");
      sizes.push(graphSize(lin.weight.grad!));
      const values = Array.from(await lin.weight.grad!.data());
      first ??= values;
      assertClose(values, first, { what: `step ${step}: .grad is this step's gradient alone` });
    }
    // Without the detach, each step's .grad was the zeroed one plus the new: one more graph.
    assert.equal(new Set(sizes.slice(1)).size, 1, `graph sizes ${sizes}`);
  },
);

// ---- freed nodes (retainGraph false) ----

Deno.test("an input behind a freed node: PyTorch's 'a second time' error, not 'unused' or null", async () => {
  const o = { dtype: "float64" as const, requiresGrad: true };
  // exp's gradient reads exp's output, whose node the first pass freed (retainGraph false).
  const x = tensor([0.5, -1, 2], o);
  const [g] = autograd.grad(x.exp().sum(), x, { createGraph: true, retainGraph: false });
  assert.throws(
    () => autograd.grad(g!.sum(), x, { allowUnused: true }),
    /exp: backward through the graph a second time/,
  );
  // pow's gradient reads only the leaf: its freed node is not needed (PyTorch's 3x² → 6x).
  const [gp] = autograd.grad(x.pow(3).sum(), x, { createGraph: true, retainGraph: false });
  assert.deepEqual(await autograd.grad(gp!.sum(), x)[0]!.toArray(), [3, -6, 12]);
});
