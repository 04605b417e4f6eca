/**
 * Tensor gradient hooks against PyTorch 1.13 (tests/fixtures/torch_tensor_hooks.json):
 * `registerHook` on an intermediate used twice (Grad-CAM: one call, the summed gradient), a
 * gradient reversal hook inside an MLP (parameter gradients), several hooks in order, `remove()`
 * from outside and from inside a hook, a leaf hook changing what is accumulated, `retainGrad`
 * across two passes (ordered among the hooks, as 1.13), hooks under `autograd.grad` (inputs' hooks
 * do not run) and under createGraph (grad mode on), a hook on a tensor modified in place, errors;
 * and that a retained gradient does not keep its tensor's memory alive.
 * @module
 */

import assert from "node:assert/strict";
import {
  autograd,
  type Device,
  isGradEnabled,
  keep,
  type Tensor,
  tensor,
  type TensorHook,
  zeros,
} from "../mod.ts";
import { assertTensor, backendTest, fixtureTensor, type FixtureValues } from "./harness.ts";
import fixtures from "./fixtures/torch_tensor_hooks.json" with { type: "json" };

const tol = (d: Device) => (d.backend === "cpu" ? { atol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 });
const T = (v: FixtureValues, d: Device) => fixtureTensor(v, d, { requiresGrad: true });
const vec = (v: number[], d: Device, requiresGrad = false) =>
  tensor(v, { device: d, requiresGrad });

backendTest(
  "an intermediate used twice: its hook runs once with the summed gradient",
  async (d) => {
    const f = fixtures.gradcam;
    const x = T(f.x, d), w = T(f.w, d);
    const a = x.mul(w).tanh();
    const seen: Tensor[] = [];
    a.registerHook((g) => void seen.push(keep(g.clone())));
    a.mul(a).sum().add(a.mul(3).sum()).backward();
    assert.equal(seen.length, f.calls);
    await assertTensor(seen[0], f.hookGrad.flat(), { ...tol(d), shape: [2, 3] });
    await assertTensor(x.grad!, f.xGrad.flat(), tol(d));
    await assertTensor(w.grad!, f.wGrad.flat(), tol(d));
  },
);

backendTest("gradient reversal in an MLP: parameter gradients as PyTorch", async (d) => {
  const f = fixtures.reversal;
  const x = fixtureTensor(f.x, d), g = fixtureTensor(f.g, d);
  const [w1, b1, w2, b2] = [f.w1, f.b1, f.w2, f.b2].map((v) => T(v, d));
  const h = x.matmul(w1.t()).add(b1).relu();
  h.registerHook((t) => t.mul(-0.5));
  h.matmul(w2.t()).add(b2).mul(g).sum().backward();
  await assertTensor(w1.grad!, f.w1Grad.flat(), tol(d));
  await assertTensor(b1.grad!, f.b1Grad, tol(d));
  await assertTensor(w2.grad!, f.w2Grad.flat(), tol(d));
  await assertTensor(b2.grad!, f.b2Grad, tol(d));
});

backendTest("hooks run in registration order, each seeing the previous result", async (d) => {
  const f = fixtures.order;
  const x = vec([1, 2, 3], d, true);
  const t = x.mul(2);
  const seen: [string, Tensor][] = [];
  const note = (name: string, g: Tensor) => seen.push([name, keep(g.clone())]);
  t.registerHook((g) => (note("h1", g), g.mul(2)));
  t.registerHook((g) => void note("h2", g));
  t.registerHook((g) => (note("h3", g), g.add(1)));
  t.mul(vec([1, -1, 0.5], d)).sum().backward();
  assert.deepEqual(seen.map(([name]) => name), f.seen.map(([name]) => name));
  for (const [i, [, g]] of seen.entries()) await assertTensor(g, f.seen[i][1] as number[]);
  await assertTensor(x.grad!, f.xGrad);
});

backendTest("remove(): from outside, from inside a hook, twice", async (d) => {
  const f = fixtures.remove;
  const x = vec([1, 2], d, true);
  const t = x.mul(3);
  const calls: string[] = [];
  const handles: Record<string, { remove(): void }> = {};
  handles.a = t.registerHook(() => void (calls.push("a"), handles.a.remove()));
  handles.b = t.registerHook(() => void (calls.push("b"), handles.c.remove()));
  handles.c = t.registerHook(() => void calls.push("c"));
  handles.d = t.registerHook((g) => (calls.push("d"), g.mul(10)));
  t.sum().backward(undefined, { retainGraph: true });
  assert.deepEqual(calls, f.firstCalls);
  await assertTensor(x.grad!, f.firstGrad);
  handles.d.remove();
  handles.d.remove();
  calls.length = 0;
  x.grad = null;
  t.sum().backward();
  assert.deepEqual(calls, f.secondCalls);
  await assertTensor(x.grad!, f.secondGrad);
});

backendTest("a leaf hook runs once on the summed gradient, before accumulation", async (d) => {
  const f = fixtures.leaf;
  const x = vec([1, -2, 0.5], d, true);
  const seen: Tensor[] = [];
  x.registerHook((g) => (seen.push(keep(g.clone())), g.mul(3)));
  x.mul(x).add(x).sum().backward();
  await assertTensor(x.grad!, f.after1);
  x.mul(2).sum().backward();
  await assertTensor(x.grad!, f.after2);
  assert.equal(seen.length, f.seen.length);
  for (const [i, s] of seen.entries()) await assertTensor(s, f.seen[i]);
});

backendTest("retainGrad: accumulates across passes, ordered among the hooks", async (d) => {
  const f = fixtures.retain;
  const x = vec([1, 2, 3], d, true);
  const a = x.mul(2);
  a.registerHook((g) => g.mul(10));
  a.retainGrad();
  const b = x.mul(3);
  b.retainGrad();
  b.retainGrad(); // twice: still once
  b.registerHook((g) => g.mul(10));
  const y = a.mul(b).sum();
  assert.equal(a.grad, null);
  y.backward(undefined, { retainGraph: true });
  const a1 = a.grad!;
  await assertTensor(a1, f.a1);
  await assertTensor(b.grad!, f.b1);
  y.backward();
  await assertTensor(a.grad!, f.a2);
  await assertTensor(b.grad!, f.b2);
  await assertTensor(a1, f.a1, { what: "the first .grad is not changed (a new sum, as PyTorch)" });
  assert.equal(a.retainsGrad, f.aRetains);
  assert.equal(x.retainsGrad, f.leafRetains);
  x.retainGrad();
  assert.equal(x.retainsGrad, f.leafRetainsAfter);
  await assertTensor(x.grad!, f.xGrad);
});

backendTest("autograd.grad: intermediates' hooks run, the inputs' do not", async (d) => {
  const f = fixtures.gradApi;
  const x = vec([0.5, 1], d, true);
  const calls: string[] = [];
  x.registerHook((g) => (calls.push("x"), g.mul(100)));
  const a = x.mul(2);
  a.registerHook((g) => (calls.push("a"), g.mul(2)));
  const b = a.mul(a);
  b.registerHook((g) => (calls.push("b"), g.mul(3)));
  const [gx] = autograd.grad(b.sum(), [x], { retainGraph: true });
  assert.deepEqual(calls, f.calls1);
  await assertTensor(gx!, f.gx);
  calls.length = 0;
  const [ga] = autograd.grad(b.sum(), [a], { retainGraph: true });
  assert.deepEqual(calls, f.calls2);
  await assertTensor(ga!, f.ga);
  calls.length = 0;
  a.retainGrad();
  autograd.grad(b.sum(), [x]);
  assert.deepEqual(calls, f.calls3);
  assert.equal(a.grad === null, f.aGradAfterGrad);
  assert.equal(x.grad === null, f.xGradNone);
});

backendTest("createGraph: hooks run in grad mode and are differentiated", async (d) => {
  const f = fixtures.createGraph;
  const x = vec(f.x, d, true);
  const modes: boolean[] = [];
  const a = x.mul(x);
  a.registerHook((g) => (modes.push(isGradEnabled()), g.mul(a)));
  const [gx] = autograd.grad(a.mul(2).sum(), [x], { createGraph: true });
  await assertTensor(gx!, f.gx);
  gx!.sum().backward();
  await assertTensor(x.grad!, f.xGrad);
  const x2 = vec(f.x, d, true);
  const a2 = x2.mul(x2);
  a2.registerHook(() => void modes.push(isGradEnabled()));
  a2.sum().backward();
  assert.deepEqual(modes, f.modes);
});

backendTest(
  "in place: a hook stays with the old value, retainGrad moves to the new one (1.13)",
  async (d) => {
    const f = fixtures.inplace;
    const x = vec([1, 2], d, true);
    const a = x.mul(2);
    const seen: Tensor[] = [];
    a.registerHook((g) => void seen.push(keep(g.clone())));
    a.mul_(3);
    a.mul(vec([1, 10], d)).sum().backward();
    assert.equal(seen.length, f.seen.length);
    await assertTensor(seen[0], f.seen[0]);
    await assertTensor(x.grad!, f.xGrad);
    const x2 = vec([1, 2], d, true);
    const b = x2.mul(2);
    b.retainGrad();
    b.mul_(3);
    b.mul(vec([1, 10], d)).sum().backward();
    await assertTensor(b.grad!, f.retainedGrad, { what: "retainGrad follows the new value" });
  },
);

backendTest("errors name the tensor, the shapes and dtypes", (d) => {
  const x = vec([1, 2], d);
  assert.match(
    fixtures.errors.hookNoGrad,
    /cannot register a hook on a tensor that doesn't require/,
  );
  assert.throws(
    () => x.registerHook((g) => g),
    /registerHook: cannot register a hook on a tensor that doesn't require gradient \(Tensor/,
  );
  assert.throws(
    () => x.retainGrad(),
    /retainGrad: can't retain the grad of a tensor that doesn't require gradient \(Tensor/,
  );
  const y = vec([1, 2], d, true);
  const z = y.mul(2);
  z.registerHook(() => zeros([3], { device: d }));
  assert.throws(
    () => z.sum().backward(),
    /registerHook: a hook returned float32 of shape \[3\] on .*, expected float32 of shape \[2\]/,
  );
  const w = y.mul(2);
  w.registerHook((g) => g.to("int32"));
  assert.throws(() => w.sum().backward(), /returned int32 of shape \[2\]/);
  const v = y.mul(2);
  v.registerHook(((g: Tensor) => Promise.resolve(g)) as unknown as TensorHook);
  assert.throws(() => v.sum().backward(), /registerHook: a hook returned a Promise/);
  y.registerHook(() => zeros([2, 1], { device: d }));
  assert.throws(() => y.sum().backward(), /returned float32 of shape \[2, 1\]/);
});

Deno.test("a retained gradient does not keep its tensor's memory alive", async () => {
  // Needs a full collection: run in a child with --expose-gc.
  const code = `
    import { tensor, device } from ${JSON.stringify(new URL("../mod.ts", import.meta.url).href)};
    const d = device("cpu");
    const gc = (globalThis as unknown as { gc: () => void }).gc;
    const settle = async () => {
      for (let i = 0; i < 5; i++) { gc(); await new Promise((r) => setTimeout(r, 10)); }
    };
    const x = tensor(new Array(4096).fill(1), { device: d, requiresGrad: true });
    // In a function, so that nothing but the graph could hold the intermediate.
    const run = (retain: boolean) => {
      const a = x.mul(2);
      if (retain) a.retainGrad();
      a.mul(a).sum().backward();
      if (retain !== (a.grad !== null)) throw new Error("retainGrad did not work");
    };
    await settle();
    const base = d.memory().bytesInUse;
    run(false);
    x.grad = null;
    await settle();
    const plain = d.memory().bytesInUse;
    run(true);
    x.grad = null;
    await settle();
    console.log(JSON.stringify({ base, plain, retained: d.memory().bytesInUse }));
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--v8-flags=--expose-gc", "--ext=ts", code],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, `child failed: ${new TextDecoder().decode(out.stderr)}`);
  const last = new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!;
  const { base, plain, retained } = JSON.parse(last);
  assert.ok(plain - base < 16384, `the plain pass leaves ${plain - base} bytes`);
  assert.equal(retained, plain, "the intermediate and its retained .grad are freed with it");
});
