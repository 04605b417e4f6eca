/**
 * Review of `func`: transforms nested so that one tensor is an argument at two levels, per-sample
 * gradients of a conv classifier with gradients flowing back out to the caller's parameters, and
 * jacrev with several output dims, against PyTorch 1.13's functorch
 * (tests/fixtures/torch_func_review.json); jvp's tangent dtypes; async functions refused
 * without leaving a rejection behind.
 * @module
 */

import assert from "node:assert/strict";
import { autograd, type Device, func, nn, noGrad, ones, type Tensor, tensor } from "../mod.ts";
import { assertFixture, backendTest, fixtureTensor, type FixtureValues } from "./harness.ts";

type Tree = FixtureValues | Tree[] | { [key: string]: Tree };
const fixture = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_func_review.json", import.meta.url)),
) as {
  x: FixtureValues;
  X: FixtureValues;
  w0: FixtureValues;
  nested: Record<string, Tree>;
  conv_w: FixtureValues;
  ops: Record<string, Record<"x" | "t" | "jacobian" | "jvp" | "hessian", FixtureValues>>;
  conv: Record<string, Record<string, FixtureValues> & FixtureValues>;
};

const T = (t: unknown) => t as Tensor;
const tol = { atol: 1e-4, rtol: 1e-4 };
const { grad, gradAndValue, hessian, jacfwd, jacrev, jvp, vjp, vmap } = func;

/** The nested cases of the fixture script, written as a multigrad user would. */
function nestedCases(d: Device): Record<string, () => unknown> {
  const x = fixtureTensor(fixture.x, d);
  const X = fixtureTensor(fixture.X, d);
  const w0 = fixtureTensor(fixture.w0, d, { requiresGrad: true });
  const perSample = () =>
    T(vmap((xi: Tensor) => grad((w: Tensor) => w.mul(xi).sum().pow(2))(w0))(X));
  return {
    grad_inner_closes_over_outer: () =>
      grad((x: Tensor) => T(grad((y: Tensor) => x.mul(y).sum())(x)).sum())(x),
    grad_times_inner_grad: () =>
      grad((x: Tensor) => x.mul(T(grad((y: Tensor) => y.pow(2).mul(x).sum())(x))).sum())(x),
    jacrev_of_vmap_grad: () =>
      jacrev((x: Tensor) =>
        vmap(grad((y: Tensor) => y.mul(x).sum().pow(2)))(
          x.unsqueeze(0).expand([2, -1]).mul(fixtureTensor([[1], [2]], d)),
        )
      )(x),
    vmap_grad_of_caller_tensor: perSample,
    outward_through_vmap_grad: () => autograd.grad(perSample().pow(2).sum(), w0)[0],
    grad_of_inner_grad_both_levels: () =>
      grad((x: Tensor) => T(grad((y: Tensor) => y.mul(x.sin()).sum().mul(x.sum()))(x)).sum())(x),
    jacrev_of_jacfwd: () => jacrev(jacfwd((x: Tensor) => x.sin().mul(x.prod())))(x),
    grad_of_vjp: () =>
      grad((x: Tensor) =>
        T(vjp((y: Tensor) => y.sin().mul(x), x)[1](ones([3], { device: d }))[0]).sum()
      )(x),
    grad_of_jvp: () =>
      grad((x: Tensor) => T(jvp((y: Tensor) => y.sin().mul(x), [x], [x])[1]).sum())(x),
    grad_of_grad_and_value: () =>
      grad((x: Tensor) => gradAndValue((y: Tensor) => y.pow(3).mul(x).sum())(x)[1])(x),
    vmap_hessian: () => vmap(hessian((r: Tensor) => r.sin().mul(r.sum()).sum()))(X),
    jacrev_of_vmap_closure: () => jacrev((x: Tensor) => vmap((r: Tensor) => r.mul(x))(X))(x),
    grad_of_vmap_grad: () =>
      grad((x: Tensor) =>
        T(vmap((r: Tensor) => grad((y: Tensor) => y.mul(r).mul(x).sum().pow(2))(x))(X)).sum()
      )(x),
    vmap_vmap_grad: () =>
      vmap(vmap(grad((a: Tensor, b: Tensor) => a.mul(b).sin()), { inDims: [0, null] }), {
        inDims: [null, 0],
      })(x, x.mul(3)),
    hessian_two_args: () =>
      hessian((a: Tensor, b: Tensor) => a.sin().mul(b).sum().mul(a.sum()), [0, 1])(x, x.mul(2)),
  };
}

async function assertTree(got: unknown, expected: Tree, what: string): Promise<void> {
  if (Array.isArray(expected) && Array.isArray(got)) {
    assert.equal(got.length, expected.length, `${what}: length`);
    for (let i = 0; i < got.length; i++) await assertTree(got[i], expected[i], `${what}[${i}]`);
    return;
  }
  await assertFixture(T(got), expected as FixtureValues, { ...tol, what });
}

backendTest("func review: nested transforms keep their levels apart, as functorch", async (d) => {
  const cases = nestedCases(d);
  assert.deepEqual(Object.keys(cases).sort(), Object.keys(fixture.nested).sort());
  for (const [name, run] of Object.entries(cases)) {
    await assertTree(run(), fixture.nested[name], name);
  }
});

backendTest("func review: per-sample conv gradients and the gradient of their norm", async (d) => {
  const c = fixture.conv;
  const F = nn.functional;
  type P = Record<"cw" | "cb" | "lw" | "lb", Tensor>;
  const live = Object.fromEntries(
    Object.entries(c.params).map(([k, v]) => [k, fixtureTensor(v, d, { requiresGrad: true })]),
  ) as P;
  const images = fixtureTensor(c.images, d);
  const labels = fixtureTensor(c.labels, d, { dtype: "int32" });
  const loss = (p: P, xi: Tensor, yi: Tensor) => {
    const h = F.conv2d(xi.unsqueeze(0), p.cw, p.cb).relu();
    return F.crossEntropy(F.linear(h.flatten(1), p.lw, p.lb), yi.unsqueeze(0));
  };
  const per = vmap(grad(loss), { inDims: [null, 0, 0] })(live, images, labels) as P;
  for (const k of Object.keys(c.per_sample)) {
    await assertFixture(per[k as keyof P], c.per_sample[k], { ...tol, what: `per-sample ${k}` });
  }
  const norm = Object.values(per).reduce(
    (s: Tensor, g) => s.add(g.pow(2).sum()),
    tensor(0, { device: d }),
  );
  const outward = autograd.grad(norm, Object.values(live));
  for (const [i, k] of Object.keys(live).entries()) {
    await assertFixture(outward[i], c.outward[k], { ...tol, what: `outward ${k}` });
  }
  const fixed = Object.fromEntries(Object.entries(live).map(([k, v]) => [k, v.detach()])) as P;
  const jac = jacrev((p: P, xi: Tensor) => F.conv2d(xi.unsqueeze(0), p.cw, p.cb).tanh())(
    fixed,
    images.select(0, 0),
  ) as P;
  for (const k of Object.keys(c.jacrev)) {
    await assertFixture(jac[k as keyof P], c.jacrev[k], { ...tol, what: `jacrev ${k}` });
  }
});

backendTest("func review: jvp, jacfwd and hessian through non-elementwise ops", async (d) => {
  const F = nn.functional;
  const convW = fixtureTensor(fixture.conv_w, d);
  const ops: Record<string, (x: Tensor) => Tensor> = {
    softmax: (x) => x.softmax(-1),
    layer_norm: (x) => F.layerNorm(x, [3]),
    conv2d: (x) => F.conv2d(x, convW).tanh(),
    max_pool2d: (x) => F.maxPool2d(x.mul(x), 2) as Tensor,
    cumprod: (x) => x.cumprod(1),
    where: (x) => x.mul(x).where(x.gt(0), x.exp()),
    sort: (x) => x.sort(1).values.mul(fixtureTensor([1, 2, 3], d)),
    normalize: (x) => F.normalize(x, { dim: 1 }),
  };
  assert.deepEqual(Object.keys(ops), Object.keys(fixture.ops));
  for (const [name, f] of Object.entries(ops)) {
    const c = fixture.ops[name];
    const x = fixtureTensor(c.x, d);
    const opts = { ...tol, what: name };
    await assertFixture(T(jacfwd(f)(x)), c.jacobian, { ...opts, what: `jacfwd ${name}` });
    await assertFixture(T(jvp(f, [x], [fixtureTensor(c.t, d)])[1]), c.jvp, {
      ...opts,
      what: `jvp ${name}`,
    });
    const half = (x: Tensor) => f(x).pow(2).sum().mul(0.5);
    await assertFixture(T(hessian(half)(x)), c.hessian, {
      ...opts,
      atol: 1e-3,
      what: `hessian ${name}`,
    });
  }
});

Deno.test("func review: under noGrad the results keep no graph to the caller's tensors", () => {
  // functorch: grad ignores an enclosing no_grad inside f, but its result does not require grad.
  const x = tensor([1, 2], { requiresGrad: true });
  const cube = (a: Tensor) => a.pow(3).sum();
  const results = (): [string, unknown][] => {
    const [out, vjpFn] = vjp((a: Tensor) => a.mul(x), x);
    return [
      ["grad", grad(cube)(x)],
      ["gradAndValue", gradAndValue(cube)(x)[1]],
      ["vjp", out],
      ["vjpFn", vjpFn(ones([2]))[0]],
      ["jvp", jvp((a: Tensor) => a.mul(x), [x], [ones([2])])[1]],
      ["jacrev", jacrev((a: Tensor) => a.mul(x))(x)],
      ["jacfwd", jacfwd((a: Tensor) => a.mul(x))(x)],
      ["hessian", hessian(cube)(x)],
    ];
  };
  for (const [name, t] of results()) assert.equal(T(t).requiresGrad, true, `${name} with grad`);
  for (const [name, t] of noGrad(results)) {
    assert.equal(T(t).requiresGrad, false, `${name} under noGrad`);
  }
  const [, vjpFn] = vjp((a: Tensor) => a.mul(x), x);
  assert.equal(T(noGrad(() => vjpFn(ones([2]))[0])).requiresGrad, false, "vjpFn under noGrad");
});

Deno.test("func review: jvp refuses tangents of another dtype, naming both", () => {
  const x = tensor([1, 2, 3]);
  const double = (a: Tensor) => a.mul(2);
  // functorch: "Expected primals to contain at least one Tensor" (not zeros for no input).
  assert.throws(() => jvp(() => x, [], []), /primals to contain at least one Tensor/);
  // functorch: "Expected tangent to be floating point or complex, but got: torch.int64".
  assert.throws(
    () => jvp(double, [x], [tensor([1, 2, 3], { dtype: "int32" })]),
    /tangent 0 must be floating-point.*int32/,
  );
  assert.throws(
    () => jvp(double, [x], [x.to("float64")]),
    /tangent 0 has dtype float64, its primal float32/,
  );
  assert.throws(
    () => jvp((p: { u: Tensor }) => p.u, [{ u: x }], [{ u: x.to("float64") }]),
    /tangent 0 has dtype float64, its primal float32/,
  );
});

backendTest("func review: jvp names a tangent's device beside its primal's", (d) => {
  if (d.backend === "cpu") return;
  assert.throws(
    () => jvp((a: Tensor) => a.mul(2), [tensor([1, 2], { device: d })], [tensor([1, 2])]),
    /tangent 0 is on cpu:0, its primal on webgpu:0/,
  );
});

Deno.test("func review: async functions are refused and leave no rejection behind", async () => {
  const stray: unknown[] = [];
  const onRejection = (e: PromiseRejectionEvent) => {
    stray.push(e.reason);
    e.preventDefault();
  };
  globalThis.addEventListener("unhandledrejection", onRejection);
  try {
    const x = ones([2, 2]);
    // Reading a value inside the function (functorch's vmap refuses .item()) makes it async:
    // the rest of it would run after the transform returned, its error nobody's to catch.
    const late = async (a: Tensor) => {
      await a.sum().item();
      throw new Error("after the read");
    };
    const calls: [string, () => unknown][] = [
      ["vmap", () => vmap(late)(x)],
      ["grad", () => grad(late)(x.sum())],
      ["gradAndValue", () => gradAndValue(late)(x.sum())],
      ["vjp", () => vjp(late, x)],
      ["jvp", () => jvp(late, [x], [x])],
      ["jacrev", () => jacrev(late)(x)],
      ["jacfwd", () => jacfwd(late)(x)],
    ];
    for (const [name, call] of calls) {
      assert.throws(call, /returned a Promise.*synchronous/, name);
    }
    let slices = 0;
    assert.throws(
      () =>
        vmap((a: Tensor) => {
          slices++;
          return Promise.resolve(a);
        })(ones([4, 2])),
      /returned a Promise/,
    );
    assert.equal(slices, 1, "vmap stops at the first slice that returns a Promise");
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(stray, [], "no unhandled rejection");
  } finally {
    globalThis.removeEventListener("unhandledrejection", onRejection);
  }
});
