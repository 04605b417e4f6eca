/**
 * `nn.utils.parametrize` (registerParametrization, removeParametrizations,
 * isParametrized, cached), `nn.utils.parametrizations` (orthogonal with the
 * matrix_exp, cayley and householder maps; spectralNorm) and
 * `nn.utils.stateless.functionalCall` against PyTorch 1.13
 * (tests/fixtures/torch_parametrize.json: parametrized values, gradients with
 * respect to `original`, state-dict keys and reprs, spectral norm after n
 * power-iteration steps from PyTorch's own u and v, functional calls with
 * gradients and a Jacobian) on every backend; float64 gradient checks on
 * cpu; errors with PyTorch's messages.
 * @module
 */

import assert from "node:assert/strict";
import { autograd, type Device, nn, noGrad, randn, type Tensor, tensor, zeros } from "../mod.ts";
import {
  assertClose,
  assertTensor,
  backendTest,
  fixtureTensor,
  type FixtureValues,
} from "./harness.ts";
import { check, CPU0, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_parametrize.json" with { type: "json" };

const { parametrize, parametrizations, stateless } = nn.utils;
type List = nn.utils.parametrize.ParametrizationList;

function tol(device: Device, loose = 1) {
  return device.backend === "cpu"
    ? { atol: 2e-6 * loose, rtol: 1e-5 * loose }
    : { atol: 1e-4 * loose, rtol: 1e-4 * loose };
}

const T = (v: unknown, d: Device, requiresGrad = false) =>
  fixtureTensor(v as FixtureValues, d, { requiresGrad });

class Symmetric extends nn.Module {
  override forward(x: Tensor): Tensor {
    return x.triu().add(x.triu(1).transpose(0, 1));
  }
}

class Scale extends nn.Module {
  s = new nn.Parameter(tensor([1.5]));
  override forward(x: Tensor): Tensor {
    return x.mul(this.s);
  }
}

class Exp extends nn.Module {
  override forward(x: Tensor): Tensor {
    return x.exp();
  }
  rightInverse(y: Tensor): Tensor {
    return y.log();
  }
}

class SumOfTwo extends nn.Module {
  override forward(a: Tensor, b: Tensor): Tensor {
    return a.add(b.mul(2));
  }
  rightInverse(x: Tensor): Tensor[] {
    return [x.mul(0.5), x.mul(0.25)];
  }
}

function listOf(m: nn.utils.parametrize.Parametrized, name = "weight"): List {
  return m.parametrizations.get(name) as List;
}

function linear(d: Device, weight: unknown, bias?: unknown): nn.Linear {
  const w = T(weight, d);
  const lin = new nn.Linear(w.shape[1], w.shape[0], { bias: bias !== undefined }).to(d);
  lin.loadStateDict(bias === undefined ? { weight: w } : { weight: w, bias: T(bias, d) });
  return lin;
}

// ---------------------------------------------------------------- parametrize

type Case = Record<string, unknown>;
const cases = fixtures.parametrize as Case[];
const byName = (name: string) => cases.find((c) => c.name === name)!;

backendTest("parametrize: a parametrization, a chain, removal (PyTorch 1.13)", async (d) => {
  const c = byName("symmetric");
  const lin = linear(d, c.weight, c.bias);
  const p = parametrize.registerParametrization(lin, "weight", new Symmetric().to(d));
  assert.ok(lin instanceof nn.Linear);
  assert.equal(String(lin), c.repr);
  assert.deepEqual(Object.keys(lin.stateDict()), c.keys);
  assert.ok(parametrize.isParametrized(lin) && parametrize.isParametrized(lin, "weight"));
  assert.ok(!parametrize.isParametrized(lin, "bias"));
  assert.equal(parametrize.typeBeforeParametrizations(lin), nn.Linear);
  await assertTensor(lin.weight, c.parametrized as number[], tol(d));
  const x = T(c.x, d);
  const g = T(c.g, d);
  const y = lin.forward(x);
  await assertTensor(y, c.y as number[], tol(d));
  y.mul(g).sum().backward();
  await assertTensor(listOf(p).original.grad!, c.gOriginal as number[], tol(d));
  await assertTensor(lin.bias!.grad!, c.gBias as number[], tol(d));
  lin.zeroGrad();

  const scale = new Scale().to(d);
  parametrize.registerParametrization(lin, "weight", scale);
  assert.equal(String(lin), c.chainRepr);
  assert.deepEqual(Object.keys(lin.stateDict()), c.chainKeys);
  assert.deepEqual(lin.namedParameters().map(([n]) => n), c.namedParameters);
  const y2 = lin.forward(x);
  await assertTensor(y2, c.chainY as number[], tol(d));
  y2.mul(g).sum().backward();
  await assertTensor(listOf(p).original.grad!, c.chainGOriginal as number[], tol(d));
  await assertTensor(scale.s.grad!, c.chainGS as number[], tol(d));

  const original = listOf(p).original;
  parametrize.removeParametrizations(lin, "weight");
  assert.equal(String(lin), c.removedRepr);
  assert.deepEqual(Object.keys(lin.stateDict()), c.removedKeys);
  assert.ok(lin.weight instanceof nn.Parameter);
  // The same Parameter object, now holding the parametrized value (PyTorch's set_).
  assert.equal(lin.weight, original);
  assert.ok(!("parametrizations" in lin));
  assert.ok(!parametrize.isParametrized(lin));
  assert.equal(lin.constructor, nn.Linear);
  await assertTensor(lin.weight, c.removedWeight as number[], tol(d));
});

backendTest("parametrize: rightInverse at registration and assignment", async (d) => {
  const c = byName("exp");
  const lin = linear(d, c.weight, c.bias);
  const p = parametrize.registerParametrization(lin, "weight", new Exp());
  await assertTensor(listOf(p).original, c.original as number[], tol(d));
  lin.weight = T(c.assigned, d);
  await assertTensor(listOf(p).original, c.originalAfter as number[], tol(d));
  await assertTensor(lin.weight, c.parametrized as number[], tol(d));
  parametrize.removeParametrizations(lin, "weight", { leaveParametrized: false });
  await assertTensor(lin.weight, c.unparametrized as number[], tol(d));
  assert.deepEqual(Object.keys(lin.stateDict()), c.removedKeys);
});

backendTest("parametrize: rightInverse giving two tensors (original0, original1)", async (d) => {
  const c = byName("two");
  const lin = linear(d, c.weight, c.bias);
  const p = parametrize.registerParametrization(lin, "weight", new SumOfTwo());
  assert.equal(String(lin), c.repr);
  assert.deepEqual(Object.keys(lin.stateDict()), c.keys);
  const list = listOf(p) as unknown as Record<string, Tensor>;
  await assertTensor(list.original0, c.original0 as number[], tol(d));
  await assertTensor(list.original1, c.original1 as number[], tol(d));
  const y = lin.forward(T(c.x, d));
  await assertTensor(y, c.y as number[], tol(d));
  y.mul(T(c.g, d)).sum().backward();
  await assertTensor(list.original0.grad!, c.gOriginal0 as number[], tol(d));
  await assertTensor(list.original1.grad!, c.gOriginal1 as number[], tol(d));
  assert.throws(
    () => parametrize.removeParametrizations(lin, "weight", { leaveParametrized: false }),
    /Cannot leave unparametrized .* sequence of tensors/,
  );
  parametrize.removeParametrizations(lin, "weight");
  assert.deepEqual(Object.keys(lin.stateDict()), c.removedKeys);
  assert.ok(lin.weight instanceof nn.Parameter);
  await assertTensor(lin.weight, c.removedWeight as number[], tol(d));
});

backendTest("parametrize: a buffer (BatchNorm1d running_var)", async (d) => {
  const c = byName("buffer");
  const bn = new nn.BatchNorm1d(3).to(d);
  bn.runningVar!._assign(T(c.runningVar, d));
  parametrize.registerParametrization(bn, "running_var", new Exp());
  assert.equal(String(bn), c.repr);
  assert.deepEqual(Object.keys(bn.stateDict()), c.keys);
  assert.ok(parametrize.isParametrized(bn, "running_var"));
  assert.ok(parametrize.isParametrized(bn, "runningVar"));
  bn.eval();
  await assertTensor(bn.forward(T(c.x, d)), c.y as number[], tol(d));
  parametrize.removeParametrizations(bn, "running_var");
  assert.deepEqual(Object.keys(bn.stateDict()), [
    "weight",
    "bias",
    "running_mean",
    "num_batches_tracked",
    "running_var",
  ]);
  await assertTensor(bn.runningVar!, c.runningVar as number[], tol(d));
});

backendTest("parametrize.cached: one computation per tensor inside the scope", (d) => {
  const lin = new nn.Linear(3, 3).to(d);
  let calls = 0;
  class Counting extends nn.Module {
    override forward(x: Tensor): Tensor {
      calls++;
      return x.mul(2);
    }
  }
  parametrize.registerParametrization(lin, "weight", new Counting());
  calls = 0;
  assert.notEqual(lin.weight, lin.weight);
  assert.equal(calls, 2);
  calls = 0;
  const out = parametrize.cached(() => {
    const a = lin.weight;
    const b = parametrize.cached(() => lin.weight);
    assert.equal(a, b);
    return lin.forward(randn([2, 3], { device: d })).add(lin.forward(zeros([2, 3], { device: d })));
  });
  assert.equal(calls, 1);
  assert.deepEqual(out.shape, [2, 3]);
  calls = 0;
  void lin.weight;
  assert.equal(calls, 1);
});

// ---------------------------------------------------------------- orthogonal

type OrthCase = {
  map: "matrix_exp" | "cayley" | "householder";
  shape: number[];
  trivialization: boolean;
  batch?: boolean;
  weight: unknown;
  Q0?: unknown;
  base?: unknown;
  original0?: unknown;
  original?: unknown;
  X?: unknown;
  G?: unknown;
  Q?: unknown;
  gX?: unknown;
  keys: string[];
  repr?: string;
};

async function assertOrthogonal(w: Tensor, d: Device): Promise<void> {
  const [n, k] = w.shape.slice(-2);
  const g = n >= k ? w.transpose(-1, -2).matmul(w) : w.matmul(w.transpose(-1, -2));
  const m = Math.min(n, k);
  const id = noGrad(() =>
    zeros([m, m], { device: d, dtype: w.dtype }).add(
      nn.init.eye_(zeros([m, m], { device: d, dtype: w.dtype })),
    )
  );
  assert.ok((await g.sub(id).abs().max().item()) < 1e-5, "not orthogonal");
}

for (const c of fixtures.orthogonal as OrthCase[]) {
  if (c.batch) continue;
  const label = `${c.map} ${c.shape.join("x")}${c.trivialization ? "" : " (no trivialization)"}`;
  backendTest(`parametrizations.orthogonal: ${label}`, async (d) => {
    const lin = linear(d, c.weight);
    const p = parametrizations.orthogonal(lin, "weight", {
      orthogonalMap: c.map,
      useTrivialization: c.trivialization,
    });
    assert.deepEqual(Object.keys(lin.stateDict()), c.keys);
    if (c.repr) assert.equal(String(lin), c.repr);
    const list = listOf(p);
    if (c.trivialization) {
      // The initial value is the weight made orthogonal (QR, R's diagonal positive).
      await assertTensor(lin.weight, c.Q0 as number[], tol(d, 5));
      await assertTensor(list.original, c.original0 as number[], tol(d));
      await assertOrthogonal(lin.weight, d);
      lin.loadStateDict({
        "parametrizations.weight.original": T(c.X, d),
        "parametrizations.weight.0.base": T(c.base, d),
      });
    } else {
      // householder: the weight's geqrf (reflectors below, R's signs on the diagonal).
      await assertTensor(list.original, c.original as number[], tol(d, 5));
    }
    const W = lin.weight;
    await assertTensor(W, c.Q as number[], tol(d, 5));
    await assertOrthogonal(W, d);
    W.mul(T(c.G, d)).sum().backward();
    await assertTensor(list.original.grad!, c.gX as number[], tol(d, 10));
  });
}

Deno.test("parametrizations.orthogonal: a batch of float64 matrices", async () => {
  const c = (fixtures.orthogonal as OrthCase[]).find((o) => o.batch)!;
  class Batch extends nn.Module {
    weight = new nn.Parameter(fixtureTensor(c.weight as FixtureValues, CPU0, { dtype: "float64" }));
  }
  const m = parametrizations.orthogonal(new Batch(), "weight");
  assert.equal(String(m), c.repr);
  assert.deepEqual(Object.keys(m.stateDict()), c.keys);
  assert.equal(m.weight.dtype, "float64");
  await assertTensor(m.weight, c.Q0 as number[], { atol: 1e-12, rtol: 1e-10 });
});

backendTest("parametrizations.orthogonal: assigning goes through rightInverse", async (d) => {
  const lin = new nn.Linear(3, 5).to(d);
  parametrizations.orthogonal(lin, "weight", { orthogonalMap: "cayley" });
  const target = randn([5, 3], { device: d });
  lin.weight = target;
  await assertOrthogonal(lin.weight, d);
  // The columns span what the target's did: Q Qᵀ target = target.
  const W = lin.weight;
  await assertTensor(W.matmul(W.t()).matmul(target), [...await target.data()], tol(d, 10));
  const noTriv = new nn.Linear(3, 3).to(d);
  parametrizations.orthogonal(noTriv, "weight", { useTrivialization: false });
  assert.throws(
    () => (noTriv.weight = randn([3, 3], { device: d })),
    /not possible to assign to the matrix exponential or the Cayley parametrizations/,
  );
});

// ---------------------------------------------------------------- spectral norm

type SpectralCase = {
  module: string;
  options: { nPowerIterations: number | null; dim: number | null; eps: number | null };
  weight: unknown;
  bias: unknown;
  u0: unknown;
  v0: unknown;
  reads: { weight: unknown; u: unknown; v: unknown }[];
  G: unknown;
  gOriginal: unknown;
  uAfterGrad: unknown;
  evalWeight: unknown;
  evalWeight2: unknown;
  keys: string[];
  repr: string;
  normalized?: unknown;
};

function makeSpectral(kind: string): nn.Module & { weight: Tensor; bias: Tensor | null } {
  switch (kind) {
    case "Linear":
    case "Linear1d":
      return kind === "Linear" ? new nn.Linear(5, 4) : new nn.Linear(3, 4);
    case "Conv2d":
      return new nn.Conv2d(2, 3, 3);
    case "ConvTranspose2d":
      return new nn.ConvTranspose2d(3, 2, 2);
  }
  throw new Error(kind);
}

for (const c of fixtures.spectral as SpectralCase[]) {
  if (c.module === "Linear1d") continue;
  const label = `${c.module} ${JSON.stringify(c.options)}`;
  backendTest(`parametrizations.spectralNorm: ${label}`, async (d) => {
    const m = makeSpectral(c.module).to(d);
    m.loadStateDict({ weight: T(c.weight, d), bias: T(c.bias, d) });
    const p = parametrizations.spectralNorm(m, "weight", {
      nPowerIterations: c.options.nPowerIterations ?? undefined,
      dim: c.options.dim ?? undefined,
      eps: c.options.eps ?? undefined,
    });
    assert.equal(String(m), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), c.keys);
    const sn = listOf(p).at(0) as nn.utils.parametrizations._SpectralNorm;
    // PyTorch's random start (after its 15 + 1 steps at registration), copied in.
    m.loadStateDict({
      ...m.stateDict(),
      "parametrizations.weight.0._u": T(c.u0, d),
      "parametrizations.weight.0._v": T(c.v0, d),
    });
    for (const [i, read] of c.reads.entries()) {
      const w = m.weight;
      await assertTensor(w, read.weight as number[], { ...tol(d, 5), what: `read ${i}` });
      await assertTensor(sn._u, read.u as number[], tol(d, 5));
      await assertTensor(sn._v, read.v as number[], tol(d, 5));
    }
    m.weight.mul(T(c.G, d)).sum().backward();
    await assertTensor(listOf(p).original.grad!, c.gOriginal as number[], {
      ...tol(d, 10),
      what: "gOriginal",
    });
    await assertTensor(sn._u, c.uAfterGrad as number[], { ...tol(d, 5), what: "uAfterGrad" });
    m.eval();
    await assertTensor(m.weight, c.evalWeight as number[], { ...tol(d, 5), what: "eval" });
    await assertTensor(m.weight, c.evalWeight2 as number[], tol(d, 5));
  });
}

backendTest("parametrizations.spectralNorm: a 1-dim tensor is normalised", async (d) => {
  const c = (fixtures.spectral as SpectralCase[]).find((s) => s.module === "Linear1d")!;
  const m = new nn.Linear(3, 4).to(d);
  m.bias!._assign(T(c.bias, d));
  parametrizations.spectralNorm(m, "bias");
  assert.deepEqual(Object.keys(m.stateDict()), c.keys);
  await assertTensor(m.bias!, c.normalized as number[], tol(d));
});

// ---------------------------------------------------------------- functionalCall

type FcCase = Record<string, unknown>;
const fc = (name: string) => (fixtures.functionalCall as FcCase[]).find((c) => c.name === name)!;

function tensors(values: unknown, d: Device, requiresGrad = false): Record<string, Tensor> {
  return Object.fromEntries(
    Object.entries(values as Record<string, unknown>).map(([k, v]) => [k, T(v, d, requiresGrad)]),
  );
}

function seqNet(d: Device, state: unknown): nn.Sequential {
  const net = new nn.Sequential(
    new nn.Linear(3, 4),
    new nn.BatchNorm1d(4),
    new nn.Tanh(),
    new nn.Linear(4, 2),
  ).to(d);
  const s = tensors(state, d);
  s["1.num_batches_tracked"] = tensor([0], { device: d, dtype: "int32" }).reshape([]);
  net.loadStateDict(s);
  return net;
}

backendTest("stateless.functionalCall: parameters and buffers substituted", async (d) => {
  const c = fc("sequential");
  const net = seqNet(d, c.state).eval();
  const params = tensors(c.params, d, true);
  const buffers = tensors(c.buffers, d);
  const x = T(c.x, d);
  const before = net.stateDict();
  const y = stateless.functionalCall(net, { ...params, ...buffers }, [x]) as Tensor;
  await assertTensor(y, c.y as number[], tol(d));
  const names = Object.keys(params);
  const grads = autograd.grad(y.mul(T(c.g, d)).sum(), names.map((n) => params[n]));
  const expected = c.grads as Record<string, number[]>;
  for (const [i, n] of names.entries()) {
    await assertTensor(grads[i]!, expected[n], { ...tol(d), what: n });
  }
  // Put back: the module's own tensors and output.
  for (const [k, t] of Object.entries(net.stateDict())) assert.equal(t.storage, before[k].storage);
  assert.ok(net.at(0) instanceof nn.Linear);
  await assertTensor(net.forward(x), c.ownY as number[], tol(d));
  assert.ok(net.parameters().every((p) => p.grad === null));
});

backendTest("stateless.functionalCall: training mode updates the given buffers", async (d) => {
  const c = fc("train-buffers");
  const s = fc("sequential");
  const net = seqNet(d, s.state).train();
  const rm = zeros([4], { device: d });
  const rv = zeros([4], { device: d }).add(1);
  const own = await (net.at(1) as nn.BatchNorm1d).runningMean!.data();
  const y = stateless.functionalCall(net, { "1.running_mean": rm, "1.running_var": rv }, T(c.x, d));
  await assertTensor(y as Tensor, c.y as number[], tol(d));
  await assertTensor(rm, c.runningMean as number[], tol(d));
  await assertTensor(rv, c.runningVar as number[], tol(d));
  await assertTensor(
    (net.at(1) as nn.BatchNorm1d).runningMean!,
    c.ownRunningMean as number[],
    tol(d),
  );
  assert.deepEqual([...own], [...await (net.at(1) as nn.BatchNorm1d).runningMean!.data()]);
});

backendTest("stateless.functionalCall: a Jacobian with respect to the parameters", async (d) => {
  const c = fc("jacobian");
  const lin = new nn.Linear(3, 2).to(d);
  lin.loadStateDict(tensors(c.state, d));
  const x = T(c.x, d);
  const [jw, jb] = autograd.functional.jacobian(
    (w, b) => stateless.functionalCall(lin, { weight: w, bias: b }, [x]) as Tensor,
    [T(c.w, d), T(c.b, d)],
  ) as Tensor[];
  await assertTensor(jw, c.jw as number[], { ...tol(d), shape: [4, 2, 2, 3] });
  await assertTensor(jb, c.jb as number[], { ...tol(d), shape: [4, 2, 2] });
});

backendTest("stateless.functionalCall: a parametrized module", async (d) => {
  const c = fc("parametrized");
  const lin = new nn.Linear(3, 3).to(d);
  parametrize.registerParametrization(lin, "weight", new Symmetric());
  lin.loadStateDict(tensors(c.state, d));
  const x = T(c.x, d);
  const w = T(c.w, d);
  const own = await lin.weight.data();
  await assertTensor(
    stateless.functionalCall(lin, { weight: w }, [x]) as Tensor,
    c.yNamed as number[],
    tol(d),
  );
  await assertTensor(
    stateless.functionalCall(lin, { "parametrizations.weight.original": w }, [x]) as Tensor,
    c.yOriginal as number[],
    tol(d),
  );
  assert.deepEqual([...await lin.weight.data()], [...own]);
});

Deno.test("stateless.functionalCall: restored when forward throws; strict; bad paths", () => {
  class Failing extends nn.Module {
    fc = new nn.Linear(2, 2);
    override forward(_x: Tensor): Tensor {
      throw new Error("boom");
    }
  }
  const m = new Failing();
  const w = m.fc.weight;
  assert.throws(
    () => stateless.functionalCall(m, { "fc.weight": zeros([2, 2]) }, [zeros([1, 2])]),
    /boom/,
  );
  assert.equal(m.fc.weight, w);
  assert.deepEqual(Object.keys(m.stateDict()), ["fc.weight", "fc.bias"]);
  assert.throws(
    () =>
      stateless.functionalCall(
        m.fc,
        { weight: zeros([2, 2]), extra: zeros([1]) },
        [zeros([1, 2])],
        { strict: true },
      ),
    /Unexpected key\(s\): 'extra'\.\n\tMissing key\(s\): 'bias'\./,
  );
  assert.throws(
    () => stateless.functionalCall(m, { "nope.weight": zeros([2, 2]) }, [zeros([1, 2])]),
    /'Failing' object has no submodule 'nope'/,
  );
  assert.throws(
    () => stateless.functionalCall(m.fc, { weight: [1, 2] as unknown as Tensor }, [zeros([1, 2])]),
    /the value for "weight" must be a Tensor/,
  );
  // A tied module (shared under two names) sees the tensor under either name.
  const shared = new nn.Linear(2, 2, { bias: false });
  const tied = new nn.Sequential(shared, shared);
  const y = stateless.functionalCall(tied, { "0.weight": nn.init.eye_(zeros([2, 2])) }, [
    tensor([[1, 2]]),
  ]);
  assert.equal(shared.weight, (tied.at(0) as nn.Linear).weight);
  return (y as Tensor).data().then((v) => assert.deepEqual([...v], [1, 2]));
});

Deno.test("stateless.functionalCall: tied weights (PyTorch 1.13; tieWeights as 2.0)", async () => {
  const a = new nn.Linear(2, 2, { bias: false });
  const b = new nn.Linear(2, 2, { bias: false });
  b.weight = a.weight;
  const net = new nn.Sequential(a, b);
  const x = tensor([[1, 2]]);
  const id = nn.init.eye_(zeros([2, 2]));
  const own = await x.matmul(a.weight.t()).data();
  // 1.13: only the name given is replaced.
  const y = stateless.functionalCall(net, { "0.weight": id }, [x]) as Tensor;
  assert.deepEqual([...await y.data()], [...own]);
  const tiedY = stateless.functionalCall(net, { "0.weight": id }, [x], { tieWeights: true });
  assert.deepEqual([...await (tiedY as Tensor).data()], [1, 2]);
  assert.throws(
    () =>
      stateless.functionalCall(net, { "0.weight": id, "1.weight": zeros([2, 2]) }, [x], {
        tieWeights: true,
      }),
    /multiple values for keys '0.weight', '1.weight', which are tied/,
  );
  assert.equal(b.weight, a.weight);
});

Deno.test("stateless.functionalCall: strict counts every name of a tied tensor (PyTorch 2.0)", () => {
  const a = new nn.Linear(2, 2, { bias: false });
  const b = new nn.Linear(2, 2, { bias: false });
  b.weight = a.weight;
  const net = new nn.Sequential(a, b);
  const x = tensor([[1, 2]]);
  const id = nn.init.eye_(zeros([2, 2]));
  // check_keys against named_tensors(remove_duplicate=False): the tied name is missing...
  assert.throws(
    () => stateless.functionalCall(net, { "0.weight": id }, [x], { strict: true }),
    /Error\(s\) in reparametrizing for Sequential:\n\tMissing key\(s\): '1\.weight'\./,
  );
  // ...unless tieWeights fills it in, which strict then accepts.
  const y = stateless.functionalCall(net, { "0.weight": id }, [x], {
    strict: true,
    tieWeights: true,
  }) as Tensor;
  assert.deepEqual([...y.shape], [1, 2]);
  stateless.functionalCall(net, { "0.weight": id, "1.weight": id }, [x], { strict: true });
  // Sorted, as PyTorch's.
  assert.throws(
    () =>
      stateless.functionalCall(net, { "z": id, "0.weight": id, "a": id }, [x], {
        strict: true,
        tieWeights: true,
      }),
    /Unexpected key\(s\): 'a', 'z'\.$/,
  );
});

Deno.test("stateless.functionalCall: a parametrized buffer by its state-dict name", async () => {
  class Double extends nn.Module {
    override forward(x: Tensor): Tensor {
      return x.mul(2);
    }
    rightInverse(x: Tensor): Tensor {
      return x.div(2);
    }
  }
  const bn = new nn.BatchNorm1d(3).eval();
  parametrize.registerParametrization(bn, "running_var", new Double());
  const x = tensor([[1, 2, 3], [-1, 0, 4]]);
  // PyTorch swaps module.running_var, so BatchNorm reads the given tensor (field runningVar here).
  const y = stateless.functionalCall(bn, { running_var: tensor([4, 4, 4]) }, [x]) as Tensor;
  assertClose(await y.data(), [...await x.div(Math.sqrt(4 + 1e-5)).data()], { atol: 1e-6 });
  assert.ok(parametrize.isParametrized(bn, "running_var"));
  assert.deepEqual([...await (bn.runningVar as Tensor).data()], [1, 1, 1]);
});

// ---------------------------------------------------------------- errors

Deno.test("parametrize: errors with PyTorch's messages", () => {
  const lin = new nn.Linear(3, 2);
  assert.throws(
    () => parametrize.registerParametrization(lin, "foo", new Symmetric()),
    /Module 'Linear\(in_features=3, out_features=2, bias=True\)' does not have a parameter, a buffer, or a parametrized element with name 'foo'/,
  );
  class Transpose extends nn.Module {
    override forward(x: Tensor): Tensor {
      return x.t();
    }
  }
  assert.throws(
    () => parametrize.registerParametrization(lin, "weight", new Transpose()),
    /may not change the shape of the tensor, unless `unsafe` flag is enabled.\nunparametrized shape: \[2, 3\]\nparametrized shape: \[3, 2\]/,
  );
  assert.ok(lin.weight instanceof nn.Parameter, "left unchanged");
  class ToDouble extends nn.Module {
    override forward(x: Tensor): Tensor {
      return x.to("float64");
    }
  }
  assert.throws(
    () => parametrize.registerParametrization(lin, "weight", new ToDouble()),
    /may not change the dtype of the tensor.*\nunparametrized dtype: float32\nparametrized dtype: float64/,
  );
  assert.throws(
    () => parametrize.removeParametrizations(lin, "weight"),
    /Module Linear\(in_features=3, out_features=2, bias=True\) does not have a parametrization on weight/,
  );
  parametrize.registerParametrization(lin, "weight", new Transpose(), { unsafe: true });
  assert.deepEqual(lin.weight.shape, [3, 2]);
  assert.throws(
    () => parametrize.registerParametrization(lin, "weight", new Transpose()),
    /module.weight.shape: \[3, 2\]\nparametrization\(module.weight\).shape: \[2, 3\]/,
  );
  assert.throws(
    () => (lin.weight = zeros([3, 2])),
    /parametrization Transpose does not implement rightInverse/,
  );
  assert.throws(
    () => parametrize.registerParametrization(lin, "bias", {} as nn.Module),
    /parametrization must be an nn.Module/,
  );
  parametrize.removeParametrizations(lin, "weight", { leaveParametrized: false });
  assert.deepEqual(lin.weight.shape, [2, 3]);
  assert.equal(String(lin), "Linear(in_features=3, out_features=2, bias=True)");
});

Deno.test("parametrizations: errors with PyTorch's messages", () => {
  const lin = new nn.Linear(3, 2);
  assert.throws(
    () => parametrizations.orthogonal(lin, "bias"),
    /Expected a matrix or batch of matrices. Got a tensor of 1 dimensions./,
  );
  assert.throws(
    () => parametrizations.orthogonal(lin, "weight", { orthogonalMap: "qr" as "cayley" }),
    /orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: qr/,
  );
  assert.throws(
    () => parametrizations.orthogonal(lin, "nope"),
    /has no parameter or buffer with name 'nope'/,
  );
  assert.throws(
    () => parametrizations.spectralNorm(lin, "weight", { dim: 2 }),
    /Dimension out of range \(expected to be in range of \[-2, 1\] but got 2\)/,
  );
  assert.throws(
    () => parametrizations.spectralNorm(lin, "weight", { nPowerIterations: 0 }),
    /Expected nPowerIterations to be positive, but got nPowerIterations=0/,
  );
  assert.ok(!parametrize.isParametrized(lin));
});

// ---------------------------------------------------------------- gradchecks (float64, cpu)

const { _Orthogonal, _SpectralNorm } = parametrizations;
for (const map of ["matrix_exp", "cayley", "householder"] as const) {
  for (const shape of [[3, 3], [4, 2], [2, 4]]) {
    check(`orthogonal ${map} ${shape.join("x")}`, (X) => {
      const orth = new _Orthogonal(X, map, false);
      return orth.forward(X.mul(0.7));
    }, [inp(shape, 31 + shape[0])]);
  }
}

// Made once: its u and v are random draws, which must not change between evaluations.
const fixedSn = new _SpectralNorm(randn([3, 4], { dtype: "float64" }), 1, 1).eval();
check("spectralNorm (eval: u, v fixed)", (W) => fixedSn.forward(W), [inp([3, 4], 41)]);
const orthLinear = parametrizations.orthogonal(new nn.Linear(3, 4).double(), "weight");
check(
  "orthogonal (trivialization: base · map) through functionalCall",
  (X, x) =>
    stateless.functionalCall(orthLinear, { "parametrizations.weight.original": X }, [x]) as Tensor,
  [
    inp([4, 3], 44, -0.5, 0.5),
    inp([2, 3], 45),
  ],
);

const chained = new nn.Linear(3, 3).double();
parametrize.registerParametrization(chained, "weight", new Symmetric());
parametrize.registerParametrization(chained, "weight", new Exp());
check("functionalCall through a chain of parametrizations", (X, x) => {
  const lin = chained;
  return stateless.functionalCall(lin, { "parametrizations.weight.original": X }, [x]) as Tensor;
}, [inp([3, 3], 42, -1, 1), inp([2, 3], 43)]);

// ---------------------------------------------------------------- regressions

Deno.test("parametrize: with an older-style weightNorm on top, removed in either order", () => {
  for (const parametrizeFirst of [true, false]) {
    const lin = new nn.Linear(3, 3);
    parametrize.registerParametrization(lin, "weight", new Symmetric());
    nn.utils.weightNorm(lin, { name: "bias", dim: null });
    assert.deepEqual(Object.keys(lin.stateDict()), [
      "bias_g",
      "bias_v",
      "parametrizations.weight.original",
    ]);
    assert.equal(lin.constructor.name, "ParametrizedLinear");
    if (parametrizeFirst) {
      parametrize.removeParametrizations(lin, "weight");
      assert.equal(lin.constructor.name, "Linear");
      assert.deepEqual(Object.keys(lin.stateDict()), ["bias_g", "bias_v", "weight"]);
      // weightNorm's getter survives the removal below it.
      assert.deepEqual(lin.bias!.shape, [3]);
      nn.utils.removeWeightNorm(lin, "bias");
    } else {
      nn.utils.removeWeightNorm(lin, "bias");
      assert.ok(parametrize.isParametrized(lin, "weight"));
      parametrize.removeParametrizations(lin, "weight");
    }
    assert.equal(Object.getPrototypeOf(lin), nn.Linear.prototype);
    assert.deepEqual(Object.keys(lin.stateDict()).sort(), ["bias", "weight"]);
  }
});

Deno.test("parametrizations.orthogonal: assigning a tensor of the wrong shape", () => {
  const lin = parametrizations.orthogonal(new nn.Linear(3, 5), "weight");
  assert.throws(
    () => (lin.weight = randn([3, 3])),
    /Expected a matrix or batch of matrices of shape \[5, 3\]. Got a tensor of shape \[3, 3\]./,
  );
});

Deno.test("parametrize: copies (TransformerEncoder's layers) keep theirs when one is removed", () => {
  const layer = new nn.TransformerEncoderLayer(4, 2, { dimFeedforward: 8, dropout: 0 });
  parametrizations.orthogonal(layer.linear1, "weight");
  const enc = new nn.TransformerEncoder(layer, 2);
  assert.deepEqual(Object.keys(enc.stateDict()).filter((k) => k.startsWith("layers.1.linear1")), [
    "layers.1.linear1.bias",
    "layers.1.linear1.parametrizations.weight.original",
    "layers.1.linear1.parametrizations.weight.0.base",
  ]);
  const [l0, l1] = [0, 1].map((i) => (enc.layers.at(i) as nn.TransformerEncoderLayer).linear1);
  parametrize.removeParametrizations(l0, "weight");
  assert.equal(String(l0), "Linear(in_features=4, out_features=8, bias=True)");
  assert.ok(parametrize.isParametrized(l1, "weight"));
  assert.deepEqual(l1.weight.shape, [8, 4]);
  assert.equal(l1.constructor.name, "ParametrizedLinear");
  // Registering on the copy leaves the first alone too.
  parametrize.registerParametrization(l1, "bias", new nn.Identity());
  assert.equal(Object.getOwnPropertyDescriptor(Object.getPrototypeOf(l0), "bias"), undefined);
  assert.deepEqual(enc.forward(randn([3, 2, 4])).shape, [3, 2, 4]);
});

Deno.test("stateless.functionalCall: an LSTM's weights (PyTorch 1.13 ignores them: _flat_weights)", async () => {
  const lstm = new nn.LSTM(3, 4, { batchFirst: true });
  const x = randn([2, 5, 3]);
  const given = Object.fromEntries(
    lstm.namedParameters().map(([n, p]) => {
      const t = p.detach().mul(0.5);
      t.requiresGrad = true;
      return [n, t];
    }),
  );
  const y = stateless.functionalCall(lstm, given, [x])[0] as Tensor;
  const own = await (lstm.forward(x)[0] as Tensor).data();
  assert.notDeepEqual([...await y.data()], [...own]);
  const names = Object.keys(given);
  const grads = autograd.grad(y.sum(), names.map((n) => given[n]));
  assert.ok(grads.every((g) => g !== null));
  assert.ok(lstm.parameters().every((p) => p.grad === null));
});
