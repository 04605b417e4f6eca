/**
 * `autograd.grad` and higher-order gradients (`createGraph`) against
 * PyTorch 1.13 (tests/fixtures/torch_higher_order.json: a WGAN-GP gradient
 * penalty, a Hessian-vector product, a full Hessian, third derivatives,
 * allowUnused, gradOutputs, backward({ createGraph }), retainGraph) on every
 * backend; float64 second-order checks (gradgradcheck) on cpu over the ops
 * of every float64 gradient check the suite registers, each of which either
 * passes or throws the named "not differentiable (createGraph)" error at the
 * second derivative (the first-order-only ops give their plain first
 * derivative under createGraph); error messages; and the default path (no
 * createGraph) unchanged.
 * @module
 */

import assert from "node:assert/strict";
import {
  autograd,
  cat,
  Function,
  type FunctionCtx,
  indexAdd,
  isGradEnabled,
  linalg,
  logcumsumexp,
  manualSeed,
  nn,
  onesLike,
  randn,
  registerPostAccumulateGradHook,
  stack,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";
import {
  assertClose,
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  shapeOf,
} from "./harness.ts";
import { CHECKS, CPU0, gradgradcheck, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_higher_order.json" with { type: "json" };
import type { Device } from "../mod.ts";

const F = nn.functional;
type Values = Parameters<typeof decodeFixture>[0];

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-5, rtol: 1e-4 } : { atol: 1e-4, rtol: 1e-3 };
}

async function expectValues(t: Tensor | null, want: Values, device: Device, what: string) {
  assert.ok(t, `${what}: got null`);
  assert.deepEqual([...t.shape], shapeOf(want), `${what}: shape`);
  await assertTensor(t, decodeFixture(want), { ...tol(device), what });
}

function loaded<M extends nn.Module>(module: M, params: Record<string, Values>, d: Device): M {
  const sd: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(params)) sd[k] = fixtureTensor(v, d);
  module.to(d).loadStateDict(sd);
  return module;
}

// ---- PyTorch 1.13 fixtures, every backend ----

backendTest(
  "WGAN-GP gradient penalty: PyTorch's penalty, loss and parameter gradients",
  async (d) => {
    const c = fixtures.wgan_gp;
    const net = loaded(
      new nn.Sequential(
        new nn.Linear(3, 8),
        new nn.GELU(),
        new nn.Linear(8, 8),
        new nn.Tanh(),
        new nn.Linear(8, 1),
      ),
      c.params,
      d,
    );
    const [real, fake, alpha] = [c.real, c.fake, c.alpha].map((v) => fixtureTensor(v, d));
    const interp = alpha.mul(real).add(alpha.neg().add(1).mul(fake));
    interp.requiresGrad = true;
    const out = net.forward(interp);
    const [g] = autograd.grad(out, interp, { gradOutputs: onesLike(out), createGraph: true });
    assert.ok(g!.requiresGrad, "the input gradient has a graph (createGraph)");
    await expectValues(g, c.input_grad, d, "input gradient");
    const penalty = g!.norm(2, 1).sub(1).square().mean();
    const loss = net.forward(fake).mean().sub(net.forward(real).mean()).add(penalty.mul(10));
    assert.ok(Math.abs((await penalty.item()) - c.penalty) <= 1e-4 * (1 + Math.abs(c.penalty)));
    assert.ok(Math.abs((await loss.item()) - c.loss) <= 1e-4 * (1 + Math.abs(c.loss)));
    loss.backward();
    for (const [name, p] of net.namedParameters()) {
      await expectValues(p.grad, c.grads[name as keyof typeof c.grads], d, `grad of ${name}`);
    }
  },
);

backendTest("Hessian-vector product of a classifier's loss: PyTorch's Hv", async (d) => {
  const c = fixtures.hvp;
  const net = loaded(
    new nn.Sequential(new nn.Linear(4, 6), new nn.Sigmoid(), new nn.Linear(6, 3)),
    c.params,
    d,
  );
  const params = net.parameters();
  const target = tensor(c.target, { dtype: "int32", device: d });
  const loss = F.crossEntropy(net.forward(fixtureTensor(c.x, d)), target);
  assert.ok(Math.abs((await loss.item()) - c.loss) <= 1e-5);
  const grads = autograd.grad(loss, params, { createGraph: true });
  for (const [i, g] of grads.entries()) await expectValues(g, c.grads[i], d, `grad ${i}`);
  const v = c.v.map((u) => fixtureTensor(u, d));
  const dot = grads.map((g, i) => g!.mul(v[i]).sum()).reduce((a, b) => a.add(b));
  const hv = autograd.grad(dot, params);
  for (const [i, h] of hv.entries()) await expectValues(h, c.hv[i], d, `Hv ${i}`);
  for (const p of params) assert.equal(p.grad, null, "autograd.grad leaves .grad alone");
});

const f3 = (x: Tensor) => {
  const [x0, x1, x2] = [0, 1, 2].map((i) => x.select(0, i));
  return x0.square().mul(x1).add(x2.sin().mul(x0)).add(x1.mul(x2).exp()).add(x0.square().log1p());
};

backendTest("the full Hessian of a 3-variable function: PyTorch's", async (d) => {
  const c = fixtures.hessian;
  const x = fixtureTensor(c.x, d, { requiresGrad: true });
  const y = f3(x);
  assert.ok(Math.abs((await y.item()) - c.value) <= 1e-5);
  const [g] = autograd.grad(y, x, { createGraph: true });
  await expectValues(g, c.grad, d, "gradient");
  const rows = [0, 1, 2].map((i) => autograd.grad(g!.select(0, i), x, { retainGraph: true })[0]!);
  for (const [i, row] of rows.entries()) await expectValues(row, c.hessian[i], d, `row ${i}`);
});

backendTest("third derivatives through createGraph twice: PyTorch's", async (d) => {
  const c = fixtures.third_order;
  const x = fixtureTensor(c.x, d, { requiresGrad: true });
  const [g1] = autograd.grad(x.pow(3).mul(x.sin()).sum(), x, { createGraph: true });
  const [g2] = autograd.grad(g1!.sum(), x, { createGraph: true });
  const [g3] = autograd.grad(g2!.sum(), x);
  await expectValues(g1, c.g1, d, "first");
  await expectValues(g2, c.g2, d, "second");
  await expectValues(g3, c.g3, d, "third");
  assert.equal(g3!.requiresGrad, false, "no createGraph: no graph");
});

backendTest(
  "allowUnused gives null for an unused input; without it, PyTorch's error",
  async (d) => {
    const c = fixtures.allow_unused;
    const x = fixtureTensor(c.x, d, { requiresGrad: true });
    const z = tensor([0.5, 0.5], { device: d, requiresGrad: true });
    const [gx, gz] = autograd.grad(x.mul(x).mul(2).sum(), [x, z], { allowUnused: true });
    await expectValues(gx, c.grad_x, d, "grad x");
    assert.equal(gz, null);
    assert.ok(
      c.error!.startsWith("One of the differentiated Tensors appears to not have been used"),
    );
    assert.throws(
      () => autograd.grad(x.mul(2).sum(), [x, z]),
      /one of the differentiated Tensors appears to not have been used in the graph \(input 1, float32 of shape \[2\]/,
    );
  },
);

backendTest(
  "gradOutputs weight a non-scalar output; several outputs, an intermediate input",
  async (d) => {
    const c = fixtures.grad_outputs;
    const x = fixtureTensor(c.x, d, { requiresGrad: true });
    const w = fixtureTensor(c.w, d);
    const y = x.tanh().mul(w);
    const [g] = autograd.grad(y, x, {
      gradOutputs: fixtureTensor(c.grad_outputs, d),
      createGraph: true,
    });
    await expectValues(g, c.grad, d, "grad");
    const [gg] = autograd.grad(g!.mul(g!).sum(), x);
    await expectValues(gg, c.grad_of_grad_norm, d, "grad of the gradient's square norm");
    const h = x.exp();
    const a = h.mul(2).sum(1);
    const b = h.pow(2).sum();
    const [gh, gx] = autograd.grad([a, b], [h, x], {
      gradOutputs: [tensor([1, -1], { device: d }), null],
    });
    await expectValues(gh, c.two_outputs.grad_h, d, "grad of the intermediate h");
    await expectValues(gx, c.two_outputs.grad_x, d, "grad of x through h");
  },
);

backendTest(
  "backward({ createGraph }): .grad has a graph; a backward through it adds on",
  async (d) => {
    const c = fixtures.backward_create_graph;
    const x = fixtureTensor(c.x, d, { requiresGrad: true });
    x.pow(3).sum().backward(undefined, { createGraph: true });
    assert.equal(c.first_has_grad_fn, true);
    assert.ok(x.grad!.gradFn !== null, "the gradient has a grad_fn");
    await expectValues(x.grad, c.first, d, "first gradient");
    x.grad!.pow(2).sum().backward();
    await expectValues(x.grad, c.after, d, ".grad after the second backward");
  },
);

backendTest(
  "retainGraph: kept by createGraph or retainGraph, freed otherwise (PyTorch's error)",
  async (d) => {
    const c = fixtures.retain_graph;
    const x = fixtureTensor(c.x, d, { requiresGrad: true });
    const y = x.exp().mul(x).sum();
    await expectValues(autograd.grad(y, x, { retainGraph: true })[0], c.grad, d, "first");
    await expectValues(autograd.grad(y, x)[0], c.grad_again, d, "second");
    assert.ok(c.error!.startsWith("Trying to backward through the graph a second time"));
    assert.throws(() => autograd.grad(y, x), /a second time.*retainGraph/);
    // createGraph retains by default, as PyTorch.
    const y2 = x.exp().mul(x).sum();
    autograd.grad(y2, x, { createGraph: true });
    await expectValues(autograd.grad(y2, x)[0], c.grad, d, "after createGraph");
  },
);

// ---- semantics (cpu) ----

Deno.test("autograd.grad touches no .grad and runs no post-accumulate hook", async () => {
  const x = tensor([1, 2, 3], { requiresGrad: true });
  let calls = 0;
  registerPostAccumulateGradHook(x, () => void calls++);
  const [g] = autograd.grad(x.mul(x).sum(), x);
  assert.deepEqual(await g!.toArray(), [2, 4, 6]);
  assert.equal(x.grad, null);
  assert.equal(calls, 0);
  x.mul(x).sum().backward();
  assert.equal(calls, 1, "backward still runs it");
});

Deno.test("only the graph between the outputs and the inputs runs", () => {
  // A Function on a branch no input depends on would throw if its backward ran.
  class Boom extends Function {
    static override forward(_ctx: FunctionCtx, x: Tensor): Tensor {
      return x.mul(1);
    }
    static override backward(): Tensor {
      throw new Error("the unneeded branch ran");
    }
  }
  const w = tensor([1, 2], { requiresGrad: true });
  const x = tensor([3, 4], { requiresGrad: true });
  const y = Boom.apply(w).mul(x).sum();
  const [gx] = autograd.grad(y, x);
  assert.ok(gx);
});

Deno.test("grad mode inside backward is on only under createGraph (ops' cue)", () => {
  const seen: boolean[] = [];
  class Probe extends Function {
    static override forward(_ctx: FunctionCtx, x: Tensor): Tensor {
      return x.mul(2);
    }
    static override backward(_ctx: FunctionCtx, g: Tensor): Tensor {
      seen.push(isGradEnabled());
      return g.mul(2);
    }
  }
  const x = tensor([1, 2], { requiresGrad: true });
  Probe.apply(x).sum().backward();
  autograd.grad(Probe.apply(x).sum(), x);
  autograd.grad(Probe.apply(x).sum(), x, { createGraph: true });
  Probe.apply(x).sum().backward(undefined, { createGraph: true });
  assert.deepEqual(seen, [false, false, true, true]);
});

Deno.test("without createGraph, gradients have no grad_fn (the default path records nothing)", () => {
  const x = tensor([[1, -2], [3, 0.5]], { requiresGrad: true });
  const w = tensor([[0.5, 1], [-1, 2]], { requiresGrad: true });
  const loss = F.gelu(x.matmul(w)).softmax(1).log().sum();
  const [gx, gw] = autograd.grad(loss, [x, w], { retainGraph: true });
  assert.equal(gx!.gradFn, null);
  assert.equal(gx!.requiresGrad, false);
  assert.equal(gw!.gradFn, null);
  loss.backward();
  assert.equal(x.grad!.gradFn, null);
  assert.equal(x.grad!.requiresGrad, false);
});

Deno.test("a custom Function's backward made of ops is differentiable; one made without a graph is caught", async () => {
  class Cube extends Function {
    static override forward(ctx: FunctionCtx, x: Tensor): Tensor {
      ctx.saveForBackward(x);
      return x.pow(3);
    }
    static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
      const [x] = ctx.savedTensors;
      return g.mul(x.square()).mul(3);
    }
  }
  await gradgradcheck((x) => Cube.apply(x), [inp([4], 5)]);
  // A backward computing from detached values: gradgradcheck must reject it.
  class Detached extends Function {
    static override forward(ctx: FunctionCtx, x: Tensor): Tensor {
      ctx.saveForBackward(x);
      return x.pow(3);
    }
    static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
      const [x] = ctx.savedTensors;
      return g.mul(x.detach().square()).mul(3);
    }
  }
  await assert.rejects(
    () => gradgradcheck((x) => Detached.apply(x), [inp([4], 5)]),
    /analytic second derivative/,
  );
});

Deno.test("autograd.grad errors name the bad output, input or gradOutputs", () => {
  const x = tensor([1, 2, 3], { requiresGrad: true });
  const y = x.mul(2);
  assert.throws(
    () => autograd.grad(y, x),
    /grad can be implicitly created only for scalar outputs; output 0 has shape \[3\]/,
  );
  assert.throws(
    () => autograd.grad(y, x, { gradOutputs: tensor([1, 1]) }),
    /mismatch in shape: gradOutputs\[0\] has a shape of \[2\] and outputs\[0\] has a shape of \[3\]/,
  );
  assert.throws(
    () => autograd.grad(y, x, { gradOutputs: [tensor([1, 1, 1]), tensor([1])] }),
    /got 2 gradOutputs for 1 outputs/,
  );
  assert.throws(
    () => autograd.grad(y.sum(), tensor([1, 2])),
    /does not require grad \(input 0, float32 of shape \[2\]/,
  );
  assert.throws(
    () => autograd.grad(tensor([1]).sum(), x),
    /element 0 of tensors does not require grad and does not have a grad_fn/,
  );
  assert.throws(() => autograd.grad([], x), /at least one output and one input, got 0 and 1/);
  assert.throws(
    () => autograd.grad(y.sum(), [x, null as unknown as Tensor]),
    /input 1 must be a Tensor, got null/,
  );
});

backendTest("gradOutputs on another device is refused, naming both", async (d, devices) => {
  if (devices.length < 2) return;
  const x = tensor([1, 2], { device: d, requiresGrad: true });
  assert.throws(
    () => autograd.grad(x.mul(2), x, { gradOutputs: tensor([1, 1], { device: devices[1] }) }),
    new RegExp(`gradOutputs\\[0\\] is on ${devices[1]}, outputs\\[0\\] on ${d}`),
  );
  await Promise.resolve();
});

Deno.test("gradOutputs of another dtype is converted to the output's (as PyTorch)", async () => {
  const x = tensor([1, 2], { requiresGrad: true });
  const [g] = autograd.grad(x.mul(3), x, {
    gradOutputs: tensor([1, 2], { dtype: "float64" }),
  });
  assert.equal(g!.dtype, "float32");
  assert.deepEqual(await g!.toArray(), [3, 6]);
});

// ---- second-order checks (float64, cpu) ----

const target = (values: number[]) => tensor(values, { dtype: "int32", device: CPU0 });

/** The ops the brief names, each with its fused (cpu kernel) path where there is one. */
const OPS: [string, (...xs: Tensor[]) => Tensor, ReturnType<typeof inp>[]][] = [
  ["pow / div / exp / log", (a, b) => a.pow(3).div(b).add(b.exp().mul(a.abs().add(1).log())), [
    inp([2, 3], 1),
    inp([3], 2, 0.5, 2),
  ]],
  [
    "tanh / sigmoid / sin / cos / sqrt",
    (a) => a.tanh().mul(a.sigmoid()).add(a.sin().mul(a.cos())).add(a.square().add(1).sqrt()),
    [
      inp([5], 3),
    ],
  ],
  ["gelu (fused backward kernel)", (a) => F.gelu(a), [inp([2, 4], 4)]],
  [
    "softplus, elu, selu, silu, mish, logsigmoid",
    (a) =>
      F.softplus(a).add(F.elu(a)).add(F.selu(a)).add(F.silu(a)).add(F.mish(a)).add(
        F.logsigmoid(a),
      ),
    [inp([6], 5, -2, 2)],
  ],
  [
    "relu, leakyRelu (times x)",
    (a) => a.relu().add(F.leakyRelu(a, { negativeSlope: 0.1 })).mul(a),
    [inp([6], 6)],
  ],
  [
    "sum / mean / max / logsumexp",
    (a) => a.sum(1).mul(a.mean(0).sum()).add(a.max(1).mul(a.logsumexp(1))),
    [inp([3, 4], 7)],
  ],
  ["var / std / norm", (a) => a.var(1).add(a.std(0).sum()).add(a.norm(2, 1)).add(a.norm(3)), [
    inp([3, 4], 8),
  ]],
  ["matmul (batched, broadcast)", (a, b) => a.matmul(b).tanh(), [
    inp([2, 2, 3], 9),
    inp([3, 2], 10),
  ]],
  ["linear with bias (fused addmm)", (x, w, b) => F.linear(x, w, b).sigmoid(), [
    inp([3, 4], 11),
    inp([2, 4], 12),
    inp([2], 13),
  ]],
  ["conv2d (stride, padding)", (x, w, b) => F.conv2d(x, w, b, { stride: 2, padding: 1 }).tanh(), [
    inp([1, 2, 5, 5], 14),
    inp([3, 2, 3, 3], 15),
    inp([3], 16),
  ]],
  ["maxPool2d (fused kernel) times x", (x) => F.maxPool2d(x.mul(x), 2).sum().mul(x), [
    { shape: [1, 1, 4, 4], values: Array.from({ length: 16 }, (_, i) => ((i * 7) % 16) / 8 - 1) },
  ]],
  ["gather / indexSelect", (x) => {
    const idx = tensor([[0, 2], [1, 1]], { dtype: "int32", device: CPU0 });
    return x.gather(1, idx).mul(x.indexSelect(1, target([2, 0]))).tanh();
  }, [inp([2, 3], 17)]],
  [
    "slice / cat / stack / transpose / expand",
    (x) =>
      cat([x.narrow(1, 1, 2), x.narrow(1, 0, 2)], 0).mul(
        x.transpose(0, 1).narrow(0, 0, 2).expand([2, 2, 2]).sum(0).repeat([2, 1]),
      ).tanh().add(stack([x, x.square()], 0).square().sum()),
    [inp([2, 3], 18)],
  ],
  ["softmax / logSoftmax", (x) => x.softmax(1).mul(x.logSoftmax(0)), [inp([3, 4], 19)]],
  ["crossEntropy (fused, reduced)", (x) => F.crossEntropy(x.mul(x), target([0, 2, 1])), [
    inp([3, 4], 20),
  ]],
  [
    "crossEntropy (fused rows, reduction none, ignoreIndex)",
    (x) => F.crossEntropy(x.mul(x), target([0, -100, 1]), { reduction: "none" }),
    [inp([3, 4], 21)],
  ],
  ["crossEntropy with class weights", (x) =>
    F.crossEntropy(x, target([0, 2, 1]), {
      weight: tensor([0.5, 1, 2, 1], { dtype: "float64", device: CPU0 }),
    }), [inp([3, 4], 22)]],
  ["mseLoss", (x, y) => F.mseLoss(x.tanh(), y), [inp([2, 3], 23), inp([2, 3], 24)]],
  ["layerNorm", (x, w, b) => F.layerNorm(x, [3], { weight: w, bias: b }), [
    inp([2, 3], 25),
    inp([3], 26),
    inp([3], 27),
  ]],
  [
    "batchNorm train (fused kernel, affine)",
    (x, w, b) => F.batchNorm(x, null, null, { weight: w, bias: b, training: true }),
    [
      inp([3, 2, 2], 28),
      inp([2], 29),
      inp([2], 30),
    ],
  ],
  [
    "batchNorm train (closed-form node, no affine)",
    (x) => F.batchNorm(x, null, null, { training: true }).square(),
    [inp([4, 2], 31)],
  ],
  ["instanceNorm", (x, w) => F.instanceNorm(x, { weight: w }).square(), [
    inp([2, 2, 3], 32),
    inp([2], 33),
  ]],
  [
    "embedding (paddingIdx) times its weight",
    (w) => F.embedding(target([0, 2, 1, 2]), w, { paddingIdx: 1 }).square(),
    [inp([3, 2], 34)],
  ],
  [
    "binaryCrossEntropy (input, target, weight)",
    (x, t, w) => F.binaryCrossEntropy(x.sigmoid(), t, { weight: w }),
    [
      inp([4], 35),
      inp([4], 36, 0.1, 0.9),
      inp([4], 37, 0.5, 2),
    ],
  ],
  [
    "where / clamp / maximum",
    (x, y) =>
      x.gt(0).where(x.square(), y.mul(x)).add(x.clamp(-0.5, 0.5).mul(x)).add(x.maximum(y).square()),
    [
      inp([5], 38),
      inp([5], 39),
    ],
  ],
  [
    "cumsum / indexAdd",
    (x, s) => x.cumsum(0).square().add(indexAdd(x, 0, target([1, 0]), s).square()),
    [
      inp([3], 40),
      inp([2], 41),
    ],
  ],
];
for (const [name, fn, inputs] of OPS) {
  Deno.test(`gradgradcheck ${name}`, () => gradgradcheck(fn, inputs, { tol: 1e-5 }));
}

/**
 * The checks the suite registers whose op's backward is not differentiable:
 * each must throw its op's error when the second derivative reaches it
 * (never give a number).
 * Matched by check name; any other check must pass gradgradcheck. None at present (qr's
 * mode "r", the one first-order-only op left here, has no registered check).
 */
const THROWS: [RegExp, string][] = [];

/**
 * Checks whose second derivative is PyTorch's rather than the limit of differences: the
 * product of all elements with two zeros has PyTorch's gradient of constant zeros, though
 * moving either zero makes the other's gradient nonzero
 * (tests/higher_order_more_test.ts checks PyTorch's numbers).
 */
const NOT_NUMERIC = [/^prod of all, two zeros$/];

// Every suite that registers float64 gradient checks (`check` of ./gradcheck.ts), found by
// reading the test files rather than listed by hand, so that a new suite's checks are covered too
// (their other tests are not registered here: Deno.test is stubbed while they load).
const SUITES = [...Deno.readDirSync(new URL(".", import.meta.url))]
  .map((entry) => entry.name)
  .filter((name) => name.endsWith("_test.ts") && name !== "higher_order_test.ts")
  .filter((name) => {
    const text = Deno.readTextFileSync(new URL(name, import.meta.url));
    return text.includes('from "./gradcheck.ts"') && /^\s*check\(/m.test(text);
  })
  .sort()
  .map((name) => `./${name}`);
const register = Deno.test;
Object.defineProperty(Deno, "test", { value: () => {}, configurable: true, writable: true });
try {
  for (const suite of SUITES) await import(suite);
} finally {
  Object.defineProperty(Deno, "test", { value: register, configurable: true, writable: true });
}
assert.ok(CHECKS.length > 300, `collected ${CHECKS.length} gradient checks`);
for (const c of CHECKS) {
  const options = { tol: Math.max(1e-5, c.options?.tol ?? 0), eps: c.options?.eps };
  const thrower = THROWS.find(([pattern]) => pattern.test(c.name))?.[1];
  if (NOT_NUMERIC.some((pattern) => pattern.test(c.name))) continue;
  Deno.test(`gradgradcheck (suite) ${c.name}`, async () => {
    if (!thrower) return await gradgradcheck(c.fn, c.inputs, options);
    await assert.rejects(
      () => gradgradcheck(c.fn, c.inputs, options),
      (e: Error) => e.message === `${thrower}'s backward is not differentiable (createGraph)`,
    );
  });
}

// ---- first-order-only backwards: a first derivative under createGraph, an error at the second ----

/**
 * Each op whose backward has no double-backward formula (as PyTorch's ops without one), with a
 * function of the leaf `x` that goes through it, `x`'s shape, and the op named by the error.
 */
const FIRST_ORDER_ONLY: [string, (x: Tensor, d: Device) => Tensor, number[]][] = [
  // Mode "r" returns no Q to carry the graph its gradient would need.
  ["linalg.qr", (x) => linalg.qr(x, { mode: "r" })[1].square(), [3, 3]],
];

backendTest(
  "first-order-only backwards: createGraph gives the plain first derivative; a second one throws",
  async (d) => {
    for (const [i, [op, f, shape]] of FIRST_ORDER_ONLY.entries()) {
      const what = `${op} (case ${i})`;
      const leaf = () => {
        manualSeed(60 + i);
        const x = randn(shape, { device: d });
        x.requiresGrad = true;
        return x;
      };
      const x = leaf();
      const [plain] = autograd.grad(f(x, d).sum(), x);
      const [g] = autograd.grad(f(x, d).sum(), x, { createGraph: true });
      assert.ok(g!.requiresGrad, `${what}: the gradient carries a node`);
      const [want, got] = [await plain!.data(), await g!.data()];
      // The same kernels in the same order: the same bits (webgpu too, where its order is fixed).
      if (d.backend === "cpu") assert.deepEqual(got, want, `${what}: bitwise`);
      else assertClose(got, want, { atol: 1e-6, rtol: 1e-6, what });
      const v = randn(shape, { device: d });
      assert.throws(
        () => autograd.grad(g!.mul(v).sum(), x),
        (e: Error) => e.message === `${op}'s backward is not differentiable (createGraph)`,
        what,
      );
    }
  },
);

backendTest(
  "WGAN-GP through cumprod: the penalty needs no second derivative of it, and trains",
  async (d) => {
    // A critic scaled by a cumprod of parameters: backward({ createGraph }) runs cumprod's
    // backward (for s.grad); the penalty's own backward never reaches that gradient's node.
    const run = (scale: (s: Tensor) => Tensor) => {
      manualSeed(71);
      const w = randn([3, 1], { device: d });
      const s = tensor([0.9, 1.2, 0.7], { device: d });
      const x = randn([4, 3], { device: d });
      for (const t of [w, s, x]) t.requiresGrad = true;
      x.matmul(w).mul(scale(s)).sum().backward(undefined, { createGraph: true });
      const penalty = x.grad!.norm(2, 1).sub(1).square().mean();
      return [penalty, ...autograd.grad(penalty, [w, s])] as Tensor[];
    };
    const got = run((s) => s.cumprod(0).select(0, 2));
    const want = run((s) => s.select(0, 0).mul(s.select(0, 1)).mul(s.select(0, 2)));
    for (const [i, name] of ["penalty", "dw", "ds"].entries()) {
      assertClose(await got[i].data(), await want[i].data(), { ...tol(d), what: name });
    }
  },
);

backendTest(
  "WGAN-GP through logcumsumexp on the input's path: the penalty's gradients are its composition's",
  async (d) => {
    // logcumsumexp's backward is made of recorded ops: the penalty differentiates through it as
    // through log(cumsum(exp(x))) (the same function, at values where that does not overflow).
    const run = (scan: (x: Tensor) => Tensor) => {
      manualSeed(72);
      const net = new nn.Linear(4, 1).to(d);
      const x = randn([3, 4], { device: d });
      x.requiresGrad = true;
      const [g] = autograd.grad(net.forward(scan(x)).sum(), x, { createGraph: true });
      const penalty = g!.norm(2, 1).sub(1).square().mean();
      return [penalty, ...autograd.grad(penalty, [x, net.weight])];
    };
    const got = run((x) => logcumsumexp(x, 1));
    const want = run((x) => x.exp().cumsum(1).log());
    for (const [i, name] of ["penalty", "dx", "dweight"].entries()) {
      assertClose(await got[i]!.data(), await want[i]!.data(), { ...tol(d), what: name });
    }
  },
);

// ---- autograd.functional against PyTorch ----

const AF = autograd.functional;
const fa = (x: Tensor) => x.sin().mul(x.exp()).add(x.pow(2));
const fb = (a: Tensor, b: Tensor) => [a.mul(b.tanh()), a.pow(2).sum().mul(b.sigmoid())];
const fs = (x: Tensor) => x.pow(3).sum().add(x.select(0, 0).mul(x.select(0, 1)).mul(x.exp().sum()));
const fs2 = (a: Tensor, b: Tensor) => a.mul(a).mul(b).sum().add(a.sin().mul(b.exp()).sum());

backendTest("autograd.functional vjp, jvp, vhp, hvp: PyTorch's", async (d) => {
  const c = fixtures.functional;
  const t = (v: Values) => fixtureTensor(v, d);
  const [x, v, a, b] = [c.x, c.v, c.a, c.b].map(t);
  const va = c.va.map(t);
  const check = async (got: unknown, want: Values | Values[], what: string) => {
    if (Array.isArray(got)) {
      for (const [i, g] of got.entries()) {
        await expectValues(g, (want as Values[])[i], d, `${what} ${i}`);
      }
    } else await expectValues(got as Tensor, want as Values, d, what);
  };
  let [o, r] = AF.vjp(fa, x, v);
  await check(o, c.vjp.output, "vjp output");
  await check(r, c.vjp.vjp, "vjp");
  [o, r] = AF.vjp(fb, [a, b], va);
  await check(o, c.vjp_two.output, "vjp outputs");
  await check(r, c.vjp_two.vjp, "vjp of two");
  [o, r] = AF.jvp(fa, x, v);
  await check(o, c.jvp.output, "jvp output");
  await check(r, c.jvp.jvp, "jvp");
  [o, r] = AF.jvp(fb, [a, b], va);
  await check(r, c.jvp_two.jvp, "jvp of two");
  const [so, vh] = AF.vhp(fs, x, v);
  assert.ok(Math.abs((await so.item()) - c.vhp.output) <= 1e-4);
  await check(vh, c.vhp.vhp, "vhp");
  await check(AF.hvp(fs, x, v)[1], c.hvp.hvp, "hvp");
  await check(AF.hvp(fs2, [a, b], va)[1], c.hvp_two.hvp, "hvp of two");
  // createGraph: the product has a graph to differentiate again.
  const xg = x.clone();
  xg.requiresGrad = true;
  const [, h] = AF.hvp(fs, xg, v, { createGraph: true });
  const [dd] = autograd.grad((h as Tensor).sum(), xg);
  await check(dd, c.hvp_create_graph_grad, "grad of hvp (createGraph)");
  // Without createGraph the results carry no graph.
  assert.equal((AF.vjp(fa, xg, v)[1] as Tensor).requiresGrad, false);
});

backendTest("autograd.functional jacobian and hessian: PyTorch's, nested as PyTorch", async (d) => {
  const c = fixtures.functional;
  const t = (v: Values) => fixtureTensor(v, d);
  const [x, a, b] = [c.x, c.a, c.b].map(t);
  await expectValues(AF.jacobian(fa, x) as Tensor, c.jacobian, d, "jacobian");
  const j2 = AF.jacobian(fb, [a, b]) as Tensor[][];
  for (const [i, row] of j2.entries()) {
    for (const [k, jk] of row.entries()) {
      await expectValues(jk, c.jacobian_two[i][k], d, `jacobian[${i}][${k}]`);
    }
  }
  await expectValues(AF.hessian(fs, x) as Tensor, c.hessian, d, "hessian");
  const h2 = AF.hessian(fs2, [a, b]) as Tensor[][];
  for (const [i, row] of h2.entries()) {
    for (const [k, hk] of row.entries()) {
      await expectValues(hk, c.hessian_two[i][k], d, `hessian[${i}][${k}]`);
    }
  }
  const unused = (p: Tensor, _q: Tensor) => p.mul(p).sum();
  const ju = AF.jacobian(unused, [a, b]) as Tensor[];
  for (const [i, g] of ju.entries()) await expectValues(g, c.jacobian_unused[i], d, `unused ${i}`);
  assert.ok(
    c.strict_error.startsWith("Output 0 of the user-provided function is independent of input 1"),
  );
  assert.throws(
    () => AF.jacobian(unused, [a, b], { strict: true }),
    /output 0 of the user-provided function is independent of input 1\. This is not allowed in strict mode/,
  );
});

Deno.test("autograd.functional errors name the bad shapes", () => {
  const x = tensor([1, 2, 3]);
  assert.throws(() => AF.vjp(fa, x), /v can only be omitted|single Tensor with a single element/);
  assert.throws(
    () => AF.vjp(fa, x, tensor([1, 2])),
    /v\[0\] has shape \[2\], the output\[0\] \[3\]/,
  );
  assert.throws(
    () => AF.hvp(fa, x, x),
    /must return a single Tensor with a single element, got 1 tensor\(s\) of shape \[3\]/,
  );
  assert.throws(
    () => AF.jvp(fb, [tensor([1, 2]), tensor([1, 2])], [tensor([1, 2])]),
    /v has 1 tensors, the input 2/,
  );
});

backendTest(
  "a gradient-penalty step leaves no memory behind (layers' scopes, createGraph's nodes)",
  async (d) => {
    manualSeed(5);
    const net = new nn.Sequential(new nn.Linear(3, 16), new nn.GELU(), new nn.Linear(16, 1)).to(d);
    const x = randn([8, 3], { device: d });
    // What the step itself holds goes with tidy; what the layers hand to the graph, and the
    // graph recorded by createGraph, must go with backward (a leak would outlive the scope).
    const step = () =>
      tidy(() => {
        const inp = x.mul(1);
        inp.requiresGrad = true;
        const out = net.forward(inp);
        const [g] = autograd.grad(out.sum(), inp, { createGraph: true });
        g!.norm(2, 1).sub(1).square().mean().add(out.mean()).backward();
        inp.grad!.dispose();
      });
    // The parameters' .grad exist after the first step; later steps add into them in place.
    step();
    const base = d.memory().bytesInUse;
    for (let i = 0; i < 3; i++) step();
    assert.equal(d.memory().bytesInUse, base);
    await Promise.resolve();
  },
);
