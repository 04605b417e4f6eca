/**
 * `func` (functorch / `torch.func`): per-sample gradients by `vmap(grad(loss))` against a loop
 * of `autograd.grad` and against PyTorch 1.13's functorch (tests/fixtures/torch_func.json:
 * per-sample grads, jvp, hessian, jacrev/jacfwd over two arguments), jacrev/jacfwd/hessian
 * against `autograd.functional`, nesting (grad of grad, jacrev of jacrev, no perturbation
 * confusion), vmap's dims, structures and randomness modes, float64 gradchecks through the
 * transforms, and the error messages.
 * @module
 */

import assert from "node:assert/strict";
import {
  autograd,
  type Device,
  func,
  getRngState,
  manualSeed,
  nn,
  rand,
  setRngState,
  type Tensor,
  tensor,
} from "../mod.ts";
import {
  assertClose,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  floats,
  on,
  REF,
} from "./harness.ts";

const fixture = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_func.json", import.meta.url)),
) as Record<string, Record<string, FixtureValues | FixtureValues[][]>[]>;

const T = (t: unknown) => t as Tensor;
const close = async (t: unknown, expected: Tensor | FixtureValues, what: string, tol = 1e-4) => {
  const e = expected instanceof Object && "shape" in (expected as object)
    ? expected as Tensor
    : null;
  if (e) assert.deepEqual([...T(t).shape], [...e.shape], `${what}: shape`);
  assertClose(await T(t).data(), e ? await e.data() : decodeFixture(expected as FixtureValues), {
    atol: tol,
    rtol: tol,
    what,
  });
};

/** A Linear model's squared error plus a weight penalty, as a function of its parameters. */
function linearLoss(model: nn.Linear) {
  return (p: Record<string, Tensor>, x: Tensor, y: Tensor) =>
    func.functionalCall(model, p, [x.unsqueeze(0)]).sub(y).pow(2).sum()
      .add(p.weight.tanh().sum());
}

backendTest(
  "func: vmap(grad(loss)) per-sample gradients equal a loop of autograd.grad",
  async (d) => {
    const model = new nn.Linear(3, 2).to(d);
    const params = { weight: on(d, [2, 3], floats([2, 3], 1)), bias: on(d, [2], floats([2], 2)) };
    const x = on(d, [5, 3], floats([5, 3], 3));
    const y = on(d, [5, 2], floats([5, 2], 4));
    const loss = linearLoss(model);
    const g = func.vmap(func.grad(loss), { inDims: [null, 0, 0] })(params, x, y) as Record<
      string,
      Tensor
    >;
    assert.deepEqual(Object.keys(g), ["weight", "bias"]);
    for (let i = 0; i < 5; i++) {
      const w = params.weight.detach().requiresGrad_();
      const b = params.bias.detach().requiresGrad_();
      const [gw, gb] = autograd.grad(loss({ weight: w, bias: b }, x.select(0, i), y.select(0, i)), [
        w,
        b,
      ]);
      await close(g.weight.select(0, i), gw!, `weight grad of sample ${i}`, 1e-5);
      await close(g.bias.select(0, i), gb!, `bias grad of sample ${i}`, 1e-5);
    }
    assert.equal(g.weight.requiresGrad, false, "plain call: detached, as functorch");
  },
);

backendTest("func: per-sample gradients, jvp, hessian and jacobians match PyTorch", async (d) => {
  for (const [i, c] of fixture.per_sample.entries()) {
    const p = {
      weight: fixtureTensor(c.weight as FixtureValues, d),
      bias: fixtureTensor(c.bias as FixtureValues, d),
    };
    const model = new nn.Linear(3, 2).to(d);
    const g = func.vmap(func.grad(linearLoss(model)), { inDims: [null, 0, 0] })(
      p,
      fixtureTensor(c.x as FixtureValues, d),
      fixtureTensor(c.y as FixtureValues, d),
    ) as Record<string, Tensor>;
    await close(g.weight, c.gweight as FixtureValues, `per-sample weight grads ${i}`);
    await close(g.bias, c.gbias as FixtureValues, `per-sample bias grads ${i}`);
  }
  for (const [i, c] of fixture.jvp.entries()) {
    const [out, jv] = func.jvp(
      (x: Tensor) => x.sin().mul(x.sum()).add(x.pow(2).exp().div(10)),
      [fixtureTensor(c.x as FixtureValues, d)],
      [fixtureTensor(c.t as FixtureValues, d)],
    );
    await close(out, c.out as FixtureValues, `jvp output ${i}`);
    await close(jv, c.jvp as FixtureValues, `jvp ${i}`);
  }
  for (const [i, c] of fixture.hessian.entries()) {
    const f = (x: Tensor) =>
      x.tanh().mul(x).sum().add(x.select(0, 0).mul(x.select(0, 1)).mul(x.select(0, 2)))
        .add(x.exp().sum().log());
    const h = func.hessian(f)(fixtureTensor(c.x as FixtureValues, d));
    assert.deepEqual([...T(h).shape], [3, 3]);
    await close(h, c.hessian as FixtureValues, `hessian ${i}`);
  }
  for (const [i, c] of fixture.jacobian.entries()) {
    const f = (a: Tensor, b: Tensor) => [a.exp().mul(b.sum()), a.sum().mul(b).sin()];
    const a = fixtureTensor(c.a as FixtureValues, d);
    const b = fixtureTensor(c.b as FixtureValues, d);
    for (const transform of [func.jacrev, func.jacfwd]) {
      const jac = transform(f, [0, 1])(a, b) as Tensor[][];
      const expected = c.jac as unknown as FixtureValues[][];
      const shapes = [[[2, 2, 2, 2], [2, 2, 3]], [[3, 2, 2], [3, 3]]];
      for (let o = 0; o < 2; o++) {
        for (let k = 0; k < 2; k++) {
          assert.deepEqual([...jac[o][k].shape], shapes[o][k]);
          await close(jac[o][k], expected[o][k], `${transform.name} ${i} [${o}][${k}]`);
        }
      }
    }
  }
});

backendTest("func: jacrev, jacfwd and hessian equal autograd.functional", async (d) => {
  const f = (x: Tensor, y: Tensor) => x.matmul(y).tanh().mul(x.sum());
  const x = on(d, [2, 3], floats([2, 3], 5, -1, 1));
  const y = on(d, [3, 2], floats([3, 2], 6, -1, 1));
  const expected = autograd.functional.jacobian(f, [x, y]) as Tensor[];
  for (const transform of [func.jacrev, func.jacfwd]) {
    const jac = transform(f, [0, 1])(x, y) as Tensor[];
    await close(jac[0], expected[0], `${transform.name} wrt x`);
    await close(jac[1], expected[1], `${transform.name} wrt y`);
    await close(transform(f, 1)(x, y), expected[1], `${transform.name} argnums 1`);
  }
  const s = (x: Tensor, y: Tensor) => f(x, y).pow(2).sum();
  const h = autograd.functional.hessian(s, [x, y]) as Tensor[][];
  const mine = func.hessian(s, [0, 1])(x, y) as Tensor[][];
  for (let i = 0; i < 2; i++) {
    for (let j = 0; j < 2; j++) await close(mine[i][j], h[i][j], `hessian [${i}][${j}]`, 2e-4);
  }
  await close(func.jacrev(func.jacrev(s))(x, y), h[0][0], "jacrev(jacrev(f))", 2e-4);
});

backendTest(
  "func: transforms nest (grad of grad, vmap of jacrev, no perturbation confusion)",
  async (d) => {
    const x = on(d, [3], [0.5, -1, 2]);
    const cube = (x: Tensor) => x.pow(3).sum();
    const g2 = func.grad((x: Tensor) => T(func.grad(cube)(x)).sum());
    await close(g2(x), [3, -6, 12], "grad(grad(x³))"); // 6x
    const g3 = func.grad((x: Tensor) => T(g2(x)).sum());
    await close(g3(x), [6, 6, 6], "grad(grad(grad(x³)))");
    // d/dx [d/dy (x·y)] at y = x is d/dx x = 1: the inner level sees only its own argument.
    const confused = func.grad((x: Tensor) => T(func.grad((y: Tensor) => x.mul(y).sum())(x)).sum());
    await close(confused(x), [1, 1, 1], "no perturbation confusion");
    const batch = on(d, [4, 3], floats([4, 3], 7));
    const perRow = func.vmap(func.jacrev((r: Tensor) => r.sin().mul(r.sum())))(batch);
    assert.deepEqual([...T(perRow).shape], [4, 3, 3]);
    for (let i = 0; i < 4; i++) {
      const expected = autograd.functional.jacobian(
        (r: Tensor) => r.sin().mul(r.sum()),
        batch.select(0, i),
      );
      await close(T(perRow).select(0, i), expected as Tensor, `vmap(jacrev) row ${i}`);
    }
    // A closed-over tensor that requires grad keeps its graph through the transform.
    const w = on(d, [3], [1, 2, 3]).requiresGrad_();
    const gw = T(func.grad((x: Tensor) => x.mul(w).pow(2).sum())(x));
    assert.equal(gw.requiresGrad, true);
    const [dw] = autograd.grad(gw.sum(), w);
    await close(dw!, [2, -8, 24], "d/dw sum(2 w² x)"); // 4 w x
    // vmap keeps the caller's graph: gradients flow back through the slices.
    const b = batch.detach().requiresGrad_();
    T(func.vmap((r: Tensor) => r.pow(2).sum())(b)).sum().backward();
    await close(b.grad!, await b.mul(2), "gradient through vmap");
  },
);

backendTest("func: vmap dims, structures and nesting", async (d) => {
  const a = on(d, [2, 3], floats([2, 3], 8));
  const m = on(d, [3, 4], floats([3, 4], 9));
  const col = func.vmap((v: Tensor, k: number) => v.mul(k), { inDims: [1, null] })(a, 2);
  await close(col, a.t().mul(2), "inDims 1 with a number passed through");
  const neg = func.vmap((v: Tensor) => v.sum(), { inDims: -1 })(a);
  await close(neg, a.sum(0), "inDims -1");
  const out1 = func.vmap((v: Tensor) => v.mul(3), { outDims: 1 })(a);
  await close(out1, a.t().mul(3), "outDims 1");
  const nested = func.vmap(
    func.vmap((u: Tensor, v: Tensor) => u.mul(v).sum(), { inDims: [null, 0] }),
    { inDims: [0, null] },
  )(a, m.t().contiguous());
  await close(nested, a.matmul(m), "nested vmap: all dot products");
  const tree = func.vmap(
    (p: { u: Tensor; v: Tensor[] }) => ({ s: p.u.add(p.v[0]), t: [p.v[1].sum()] }),
    { inDims: [{ u: 0, v: [1, 0] }], outDims: { s: 1, t: [0] } },
  )({ u: a, v: [a.t().contiguous(), a] }) as { s: Tensor; t: Tensor[] };
  await close(tree.s, a.add(a).t(), "object output at outDims 1");
  await close(tree.t[0], a.sum(1), "array output at outDims 0");
  const scale = on(d, [2], [5, 7]);
  const unbatched = func.vmap((v: Tensor) => [v.sum(), scale], { outDims: [0, null] })(
    a,
  ) as Tensor[];
  assert.equal(unbatched[1], scale, "outDims null returns the unchanged tensor");
  await close(unbatched[0], a.sum(1), "the batched output beside it");
});

Deno.test("func: vmap randomness modes", async () => {
  const x = tensor([[1, 2], [3, 4], [5, 6]]);
  const noisy = (r: Tensor) => r.add(rand([2]));
  assert.throws(
    () => func.vmap(noisy)(x),
    /called random operation while in randomness error mode/,
  );
  manualSeed(3);
  const start = getRngState();
  const same = T(func.vmap(noisy, { randomness: "same" })(x)).sub(x);
  const afterSame = getRngState();
  setRngState(start);
  const once = rand([2]);
  assert.equal(afterSame, getRngState(), "'same' draws as much as one slice");
  for (let i = 0; i < 3; i++) await close(same.select(0, i), once, `'same' slice ${i}`, 1e-6);
  setRngState(start);
  const different = T(func.vmap(noisy, { randomness: "different" })(x)).sub(x);
  setRngState(start);
  const loop = [0, 1, 2].map(() => rand([2]));
  for (let i = 0; i < 3; i++) {
    await close(different.select(0, i), loop[i], `'different' slice ${i}`, 1e-6);
  }
  assert.notDeepEqual(
    await different.select(0, 0).toArray(),
    await different.select(0, 1).toArray(),
  );
  assert.throws(
    () => func.jacfwd((v: Tensor) => v.mul(rand([2])))(tensor([1, 2])),
    /random operation while in randomness error mode/,
  );
});

Deno.test("func: grad options, gradAndValue, vjp and jvp structures", async () => {
  const x = tensor([1, 2, 3]);
  const y = tensor([4, 5]);
  const f = (a: Tensor, b: Tensor) => [a.pow(2).sum().mul(b.sum()), a.mul(2)];
  const [g, aux] = func.grad(f, { hasAux: true })(x, y) as [Tensor, Tensor];
  await close(g, [18, 36, 54], "grad with aux"); // 2a·Σb
  await close(aux, [2, 4, 6], "aux");
  assert.equal(aux.requiresGrad, false);
  const both = func.grad((a: Tensor, b: Tensor) => a.pow(2).sum().mul(b.sum()), {
    argnums: [1, 0],
  })(
    x,
    y,
  ) as Tensor[];
  await close(both[0], [14, 14], "argnums [1, 0]: b first");
  await close(both[1], [18, 36, 54], "then a");
  await close(
    func.grad((a: Tensor, _b: Tensor) => a.sum(), { argnums: 1 })(x, y),
    [0, 0],
    "unused: zeros",
  );
  await close(func.grad((a: Tensor) => a.sum().mul(0).detach())(x), [0, 0, 0], "constant: zeros");
  const [gv, value] = func.gradAndValue((p: { w: Tensor }) => p.w.exp().sum())({ w: x }) as [
    { w: Tensor },
    Tensor,
  ];
  await close(gv.w, await x.exp(), "gradAndValue gradient of an object argument");
  await close(value, await x.exp().sum(), "gradAndValue value");
  const [out, vjpFn, vaux] = func.vjp(
    (a: Tensor, b: Tensor) => [{ p: a.mul(b.sum()), q: a.sum() }, b.mul(2)],
    x,
    y,
    { hasAux: true },
  );
  await close((out as { p: Tensor }).p, [9, 18, 27], "vjp output");
  await close(vaux, [8, 10], "vjp aux");
  for (let twice = 0; twice < 2; twice++) {
    const [ga, gb] = vjpFn({ p: tensor([1, 0, 1]), q: tensor(2) }) as Tensor[];
    await close(ga, [11, 2, 11], `vjp wrt a, call ${twice}`); // Σb·c + q
    await close(gb, [4, 4], `vjp wrt b, call ${twice}`); // c·a
  }
  const [o, t] = func.jvp((p: { u: Tensor }) => [p.u.pow(2), p.u.sum()], [{ u: x }], [{
    u: tensor([1, 0, 2]),
  }]);
  await close((o as Tensor[])[0], [1, 4, 9], "jvp output");
  await close((t as Tensor[])[0], [2, 0, 12], "jvp of u²");
  await close((t as Tensor[])[1], [3], "jvp of Σu");
});

Deno.test("func: float64 gradchecks through grad, vmap and jacrev", async () => {
  const x = tensor([[0.3, -0.7, 1.1], [0.5, 0.2, -0.4]], { dtype: "float64", requiresGrad: true });
  const f = (r: Tensor) => r.sin().mul(r.pow(2).sum()).sum();
  assert.ok(await autograd.gradcheck((r: Tensor) => T(func.grad(f)(r)), [x]));
  assert.ok(await autograd.gradcheck((r: Tensor) => T(func.vmap(func.grad(f))(r)), [x]));
  assert.ok(
    await autograd.gradcheck(
      (r: Tensor) => T(func.jacrev((v: Tensor) => v.tanh().mul(v.sum()))(r)),
      [x],
    ),
  );
  assert.ok(
    await autograd.gradcheck(
      (r: Tensor) => T(func.jacfwd((v: Tensor) => v.exp().div(v.sum()))(r)),
      [x],
    ),
  );
});

Deno.test("func: errors name the shapes, sizes and arguments", () => {
  const x = tensor([1, 2, 3]);
  assert.throws(
    () => func.grad((a: Tensor) => a.mul(2))(x),
    /scalar Tensor, got a tensor with 1 dims \(shape \[3\]\)/,
  );
  assert.throws(
    () => func.grad((a: Tensor) => a.sum(), { argnums: 2 })(x),
    /got argnum=2, but only 1 positional inputs/,
  );
  assert.throws(
    () => func.grad((a: Tensor) => a.sum(), { argnums: [0, 0] })(x),
    /argnums elements must be unique/,
  );
  assert.throws(() => func.grad((a: Tensor) => a.sum())(3), /must be Tensors, got number/);
  assert.throws(
    () => func.grad((a: Tensor) => a.sum(), { hasAux: true })(x),
    /should be an array \[output, aux\]/,
  );
  assert.throws(
    () => func.grad((a: Tensor) => a.sum())(tensor([1, 2], { dtype: "int32" })),
    /floating-point.*int32/,
  );
  assert.throws(
    () =>
      func.vmap((a: Tensor, b: Tensor) => a.add(b))(
        tensor([[1, 2], [3, 4], [5, 6]]),
        tensor([[1, 2]]),
      ),
    /same size in the mapped dimension, got sizes \[3, 1\]/,
  );
  assert.throws(
    () => func.vmap((a: Tensor, k: number) => a.mul(k))(x, 2),
    /inDim=0 for an input but the input is of type number/,
  );
  assert.throws(
    () => func.vmap((a: Tensor) => a, { inDims: 1 })(x),
    /dimensionality 1 so expected inDim to satisfy -1 <= inDim < 1/,
  );
  assert.throws(
    () => func.vmap((a: Tensor) => a, { inDims: [0, 0] })(x),
    /inDims has structure \[\*, \*\] but the inputs have structure \[\*\]/,
  );
  assert.throws(
    () => func.vmap((a: Tensor) => a, { inDims: [null] })(x),
    /at least one Tensor to vmap over/,
  );
  assert.throws(() => func.vmap(() => x)(), /got no inputs/);
  assert.throws(
    () => func.vmap((a: Tensor) => a.sum(), { outDims: [0, 1] })(x),
    /outDims is not compatible/,
  );
  assert.throws(
    () => func.vmap((a: Tensor) => a.mul(2), { outDims: null })(x),
    /outDims can be null only for an output that is not batched/,
  );
  assert.throws(() => func.vmap((a: Tensor) => a, { outDims: 3 })(x), /outDim 3 is out of range/);
  assert.throws(() => func.vmap((a: Tensor) => a)(tensor([], { shape: [0, 2] })), /size 0/);
  assert.throws(() => func.vmap((_a: Tensor) => 3)(x), /must only return Tensors, got type number/);
  assert.throws(
    () => func.vmap((a: Tensor) => a, { randomness: "sometimes" as "same" }),
    /randomness/,
  );
  assert.throws(
    () => func.jvp((a: Tensor) => a, x as unknown as Tensor[], [x]),
    /primals to be an array/,
  );
  assert.throws(
    () => func.jvp((a: Tensor) => a, [x], [tensor([1, 2])]),
    /tangent 0 has shape \[2\], its primal \[3\]/,
  );
  const [, vjpFn] = func.vjp((a: Tensor) => [a, a.sum()], x);
  assert.throws(() => vjpFn(x), /cotangents: \*, output: \[\*, \*\]/);
  assert.throws(() => vjpFn([x, x]), /cotangent 1 must be a Tensor of the output's shape \[\]/);
  assert.throws(
    () => func.jacrev((a: Tensor) => a.to("int32"))(x),
    /floating-point Tensors, got a Tensor of dtype int32/,
  );
});

Deno.test("func: functionalCall is torch.func.functional_call", async () => {
  assert.equal(func.functionalCall, nn.utils.stateless.functionalCall);
  const model = new nn.Linear(2, 1);
  const out = func.functionalCall(model, { weight: tensor([[1, 2]]), bias: tensor([3]) }, [
    tensor([[1, 1]]),
  ]);
  await close(out, [6], "forward with the given parameters");
});

// The reference device is used by matchesCpu-style helpers; keep it referenced for clarity.
void (REF satisfies Device);
