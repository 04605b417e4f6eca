/**
 * The core: backend registry and devices, tensor factories and seeding,
 * autograd mechanics, cross-device streams, and memory scopes.
 * @module
 */

import assert from "node:assert/strict";
import {
  arange,
  type BackendDevice,
  type BackendFactory,
  backendNames,
  defaultDevice,
  Device,
  device,
  enableGrad,
  full,
  Function,
  type FunctionCtx,
  isGradEnabled,
  keep,
  manualSeed,
  noGrad,
  ones,
  queueBackwardCallback,
  rand,
  randn,
  registerBackend,
  registerPostAccumulateGradHook,
  requestDevices,
  setDefaultDevice,
  type Tensor,
  tensor,
  tidy,
  unregisterBackend,
  zeros,
} from "../mod.ts";
import { cpuBackend } from "../src/backends/cpu/mod.ts";
import { assertClose, assertTensor, BACKENDS, backendTest } from "./harness.ts";

const [CPU0, CPU1, CPU2] = await requestDevices({ backend: "cpu", count: 3 });
const GPU: Device[] = BACKENDS.get("webgpu") ?? [];

/** The backend `requestDevices()` picks when nothing is registered above the built-ins. */
const BUILTIN_FIRST = backendNames()[0];

// ---- registry ----

Deno.test("registerBackend/unregisterBackend/backendNames by priority", () => {
  const before = backendNames();
  assert.deepEqual(before.slice(-2).includes("cpu"), true);
  const dummy: BackendFactory = () => ({ createDevice: () => CPU0.backendDevice });
  registerBackend("zz-high", dummy, { priority: 50 });
  registerBackend("zz-low", dummy, { priority: -50 });
  registerBackend("zz-default", dummy);
  try {
    const names = backendNames();
    assert.equal(names[0], "zz-high");
    assert.equal(names.at(-1), "zz-low");
    assert.ok(
      names.indexOf("cpu") < names.indexOf("zz-default"),
      "default priority 0 is below cpu (1)",
    );
    if (names.includes("webgpu")) assert.ok(names.indexOf("webgpu") < names.indexOf("cpu"));
    // Registering a name again replaces it (with its new priority).
    registerBackend("zz-high", dummy, { priority: -100 });
    assert.equal(backendNames().at(-1), "zz-high");
  } finally {
    unregisterBackend("zz-high");
    unregisterBackend("zz-low");
    unregisterBackend("zz-default");
  }
  assert.deepEqual(backendNames(), before);
  unregisterBackend("never-registered"); // a no-op
});

Deno.test({
  name: "a failing async factory is skipped, with its reason kept in the errors",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    let calls = 0;
    registerBackend("broken", async () => {
      calls++;
      await Promise.resolve();
      throw new Error("no adapter found (test)");
    }, { priority: 100 });
    registerBackend("broken-sync", () => {
      throw new Error("cannot load (test)");
    }, { priority: 99 });
    try {
      assert.deepEqual(backendNames().slice(0, 2), ["broken", "broken-sync"]);
      const [d] = await requestDevices();
      assert.equal(d.backend, BUILTIN_FIRST, "the next backend that starts is used");
      await assert.rejects(
        requestDevices({ backend: "broken" }),
        /broken.*no adapter found \(test\)/,
      );
      await assert.rejects(requestDevices({ backend: "broken-sync" }), /cannot load \(test\)/);
      assert.throws(() => device("broken:0"), /no adapter found \(test\)/);
      assert.throws(() => device("broken-sync"), /cannot load \(test\)/);
      assert.equal(calls, 1, "the factory runs once");
    } finally {
      unregisterBackend("broken");
      unregisterBackend("broken-sync");
    }
  },
});

Deno.test("a device that fails to start is an error; the backend's other devices still work", async () => {
  registerBackend("one-only", async () => {
    const inner = await cpuBackend();
    return {
      async createDevice(index: number): Promise<BackendDevice> {
        if (index > 0) throw new Error(`only one device here, asked for ${index}`);
        return await inner.createDevice(0);
      },
    };
  }, { priority: -10 });
  try {
    await assert.rejects(
      requestDevices({ backend: "one-only", count: 2 }),
      /only one device here, asked for 1/,
    );
    const [d] = await requestDevices({ backend: "one-only" });
    assert.equal(String(d), "one-only:0");
    await assertTensor(tensor([1, 2], { device: d }).mul(3), [3, 6]);
  } finally {
    unregisterBackend("one-only");
  }
});

/** `target` with every method call counted into `calls` by name. */
function counting<T extends object>(target: T, calls: Map<string, number>): T {
  return new Proxy(target, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls.set(String(prop), (calls.get(String(prop)) ?? 0) + 1);
        return value.apply(target, args);
      };
    },
  });
}

/** A backend made only from the public contract: the cpu kernels behind a counting proxy. */
function countingBackend(calls: Map<string, number>): BackendFactory {
  return async () => {
    const inner = await cpuBackend();
    return {
      async createDevice(index: number): Promise<BackendDevice> {
        const started = await inner.createDevice(index);
        const kernels = counting(started.kernels, calls);
        return new Proxy(counting(started, calls), {
          get(target, prop, receiver) {
            if (prop === "info") return `fake wrapping ${started.info}`;
            if (prop === "kernels") return kernels;
            return Reflect.get(target, prop, receiver);
          },
        });
      },
    };
  };
}

Deno.test("a third backend is addable without touching the core and is picked by priority", async () => {
  const calls = new Map<string, number>();
  registerBackend("fake", countingBackend(calls), { priority: 10 });
  try {
    assert.equal(backendNames()[0], "fake");
    const [f0, f1] = await requestDevices({ count: 2 });
    assert.equal(f0.backend, "fake");
    assert.equal(String(f0), "fake:0");
    assert.equal(String(f1), "fake:1");
    assert.equal(f1.index, 1);
    assert.match(f0.info, /^fake wrapping host cpu/);
    assert.equal(device("fake:1"), f1);
    // The same program on the fake device and on cpu gives the same numbers.
    const run = (d: Device) => {
      const x = tensor([[1, -2, 3], [0.5, 4, -1]], { device: d, requiresGrad: true });
      const w = tensor([[0.5, 1], [-1, 2], [0.25, 0]], { device: d, requiresGrad: true });
      const y = x.matmul(w).relu().softmax(1).mul(arange(2, undefined, 1, { device: d })).sum();
      y.backward();
      return [y, x.grad!, w.grad!, x.to("int32").max(1), x.transpose(0, 1).sum(0)];
    };
    const want = run(CPU0);
    const got = run(f0);
    for (let i = 0; i < want.length; i++) {
      assert.equal(got[i].device, f0);
      assertClose(await got[i].data(), await want[i].data(), { what: `output ${i}` });
    }
    for (
      const kernel of [
        "allocate",
        "write",
        "read",
        "matmul",
        "softmax",
        "reduce",
        "binary",
        "unary",
        "copy",
        "cast",
      ]
    ) {
      assert.ok((calls.get(kernel) ?? 0) > 0, `kernel ${kernel} went through the fake backend`);
    }
    // Copies between the fake backend and cpu, both ways.
    const moved = tensor([1, 2, 3], { device: f1 }).to(CPU1).mul(2).to(f0).add(1);
    await assertTensor(moved, [3, 5, 7]);
    assert.equal(moved.device, f0);
  } finally {
    unregisterBackend("fake");
  }
  assert.ok(!backendNames().includes("fake"));
  assert.throws(() => device("fake:0"), /no backend "fake"/);
  const [d] = await requestDevices();
  assert.equal(d.backend, BUILTIN_FIRST);
});

Deno.test("unregistering the backend of the default device restores cpu:0 as the default", async () => {
  registerBackend("temp", cpuBackend, { priority: -20 });
  const [t] = await requestDevices({ backend: "temp" });
  setDefaultDevice(t);
  assert.equal(defaultDevice(), t);
  unregisterBackend("temp");
  assert.equal(defaultDevice(), CPU0);
});

// ---- devices ----

Deno.test("requestDevices for cpu gives cpu:0..n-1, the same objects every time", async () => {
  const devices = await requestDevices({ backend: "cpu", count: 4 });
  assert.deepEqual(devices.map(String), ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]);
  assert.deepEqual(devices.map((d) => d.index), [0, 1, 2, 3]);
  assert.ok(devices.every((d) => d.backend === "cpu" && d instanceof Device));
  assert.equal(devices[0], CPU0);
  assert.equal(devices[2], CPU2);
  const [again] = await requestDevices({ backend: "cpu" });
  assert.equal(again, CPU0);
  const concurrent = await Promise.all([
    requestDevices({ backend: "cpu", count: 6 }),
    requestDevices({ backend: "cpu", count: 6 }),
  ]);
  assert.deepEqual(concurrent[0], concurrent[1]);
  assert.equal(device("cpu:5"), concurrent[0][5]);
  // cpu devices also start on first use by name.
  assert.equal(String(device("cpu:7")), "cpu:7");
});

Deno.test("device() racing requestDevices() still gives one Device per index", async () => {
  for (let yields = 0; yields < 8; yields++) {
    const name = `race-${yields}`;
    registerBackend(name, cpuBackend, { priority: -40 });
    try {
      await requestDevices({ backend: name });
      const pending = requestDevices({ backend: name, count: 3 });
      for (let i = 0; i < yields; i++) await Promise.resolve();
      const direct = device(`${name}:2`);
      const started = await pending;
      assert.equal(started[2], direct, `after ${yields} microtasks`);
      assert.equal(device(`${name}:2`), direct);
    } finally {
      unregisterBackend(name);
    }
  }
});

Deno.test("Device: toString, info, backend, index, device() lookups", () => {
  assert.equal(CPU1.toString(), "cpu:1");
  assert.equal(`${CPU1}`, "cpu:1");
  assert.equal(CPU1.backend, "cpu");
  assert.equal(CPU1.index, 1);
  assert.match(CPU1.info, /cpu/);
  assert.equal(device("cpu"), CPU0);
  assert.equal(device("cpu:1"), CPU1);
  assert.equal(device(CPU1), CPU1);
  for (const d of GPU) {
    assert.equal(d.backend, "webgpu");
    assert.equal(String(d), `webgpu:${d.index}`);
    assert.equal(typeof d.info, "string");
    assert.ok(d.info.length > 0);
    assert.equal(device(String(d)), d);
  }
  const m = CPU0.memory();
  assert.ok(m.bytesInUse >= 0 && m.bytesReserved >= m.bytesInUse);
});

Deno.test("defaultDevice/setDefaultDevice decide where factories put tensors", () => {
  assert.equal(defaultDevice(), CPU0);
  assert.equal(zeros([2]).device, CPU0);
  try {
    setDefaultDevice("cpu:1");
    assert.equal(defaultDevice(), CPU1);
    for (
      const t of [
        zeros([2]),
        ones([1]),
        full([1], 2),
        tensor([1]),
        tensor(3),
        arange(3),
        rand([2]),
        randn([2]),
      ]
    ) {
      assert.equal(t.device, CPU1);
    }
    assert.equal(zeros([2], { device: CPU2 }).device, CPU2, "an explicit device wins");
    if (GPU.length > 0) {
      setDefaultDevice(GPU[0]);
      assert.equal(tensor([1, 2]).device, GPU[0]);
    }
    assert.throws(() => setDefaultDevice("nope:0"), /nope/);
  } finally {
    setDefaultDevice(CPU0);
  }
  assert.equal(defaultDevice(), CPU0);
});

// ---- tensors and factories ----

Deno.test("tensor(): shapes, dtypes, 0-d, typed arrays, booleans, empty", async () => {
  const s = tensor(3);
  assert.deepEqual([...s.shape], []);
  assert.equal(s.ndim, 0);
  assert.equal(s.numel(), 1);
  assert.equal(await s.item(), 3);
  assert.equal(await s.toArray(), 3);
  const m = tensor([[1, 2, 3], [4, 5, 6]]);
  assert.equal(m.dtype, "float32");
  assert.deepEqual([...m.shape], [2, 3]);
  assert.deepEqual(m.size(), [2, 3]);
  assert.equal(m.size(-1), 3);
  assert.equal(m.size(0), 2);
  assert.equal(m.ndim, 2);
  assert.equal(m.numel(), 6);
  assert.equal(m.device, CPU0);
  assert.equal(m.requiresGrad, false);
  assert.equal(m.grad, null);
  assert.equal(m.isLeaf, true);
  assert.deepEqual(await m.toArray(), [[1, 2, 3], [4, 5, 6]]);
  assert.equal(String(m), "Tensor(shape=[2, 3], dtype=float32, device=cpu:0)");
  assert.equal(tensor(Int32Array.of(1, 2)).dtype, "int32");
  assert.equal(tensor(Float64Array.of(1, 2)).dtype, "float64");
  const shaped = tensor(Float32Array.of(1, 2, 3, 4, 5, 6), { shape: [3, 2] });
  assert.deepEqual(await shaped.toArray(), [[1, 2], [3, 4], [5, 6]]);
  assert.equal(tensor(Int32Array.of(1, 2), { dtype: "float32" }).dtype, "float32");
  assert.deepEqual(await tensor([true, false, true]).toArray(), [1, 0, 1]);
  const i = tensor([[1, 2]], { dtype: "int32" });
  assert.equal(i.dtype, "int32");
  assert.ok((await i.data()) instanceof Int32Array);
  const f64 = tensor([0.1], { dtype: "float64" });
  assert.equal((await f64.data())[0], 0.1, "float64 keeps full precision");
  assert.equal((await tensor([0.1]).data())[0], Math.fround(0.1));
  assert.deepEqual([...tensor([]).shape], [0]);
  assert.deepEqual([...tensor([[], []]).shape], [2, 0]);
  assert.deepEqual(await tensor([[], []]).toArray(), [[], []]);
  const g = tensor([1, 2], { requiresGrad: true });
  assert.equal(g.requiresGrad, true);
  assert.equal(String(g), "Tensor(shape=[2], dtype=float32, device=cpu:0, requiresGrad)");
});

Deno.test("zeros/ones/full with dtypes", async () => {
  await assertTensor(zeros([2, 2]), [0, 0, 0, 0], { shape: [2, 2] });
  await assertTensor(ones([3], { dtype: "int32" }), [1, 1, 1]);
  assert.equal(ones([3], { dtype: "int32" }).dtype, "int32");
  const f = full([2], 0.1, { dtype: "float64" });
  assert.equal(f.dtype, "float64");
  assert.deepEqual(Array.from(await f.data()), [0.1, 0.1]);
  await assertTensor(full([], 7), [7], { shape: [] });
  const z = zeros([2], { requiresGrad: true });
  assert.ok(z.requiresGrad && z.isLeaf);
});

Deno.test("arange variants", async () => {
  const check = async (t: Tensor, dtype: string, values: number[]) => {
    assert.equal(t.dtype, dtype);
    assert.deepEqual([...t.shape], [values.length]);
    assertClose(await t.data(), values, { atol: 1e-6 });
  };
  await check(arange(5), "int32", [0, 1, 2, 3, 4]);
  await check(arange(2, 5), "int32", [2, 3, 4]);
  await check(arange(0, 5, 2), "int32", [0, 2, 4]);
  await check(arange(5, 0, -1), "int32", [5, 4, 3, 2, 1]);
  await check(arange(5, 0, -2), "int32", [5, 3, 1]);
  await check(arange(0, 1, 0.25), "float32", [0, 0.25, 0.5, 0.75]);
  await check(arange(0, 1, 0.3), "float32", [0, 0.3, 0.6, 0.9]);
  await check(arange(0.5, 3), "float32", [0.5, 1.5, 2.5]);
  await check(arange(-1, 1, 0.5), "float32", [-1, -0.5, 0, 0.5]);
  await check(arange(3, undefined, 1, { dtype: "float32" }), "float32", [0, 1, 2]);
  await check(arange(3, undefined, 1, { dtype: "float64" }), "float64", [0, 1, 2]);
  await check(arange(2, 2), "int32", []);
  await check(arange(5, 2), "int32", []);
  await check(arange(0), "int32", []);
});

for (const [name, devices] of BACKENDS) {
  Deno.test({
    name: `manualSeed makes rand/randn reproducible [${name}]`,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const d = devices[0];
      manualSeed(42);
      const a = [
        rand([1000], { device: d }),
        randn([1000], { device: d }),
        rand([3, 7], { device: d }),
      ];
      manualSeed(42);
      const b = [
        rand([1000], { device: d }),
        randn([1000], { device: d }),
        rand([3, 7], { device: d }),
      ];
      for (let i = 0; i < a.length; i++) {
        assert.deepEqual(await b[i].data(), await a[i].data(), `draw ${i} repeats exactly`);
      }
      const next = await rand([1000], { device: d }).data();
      assert.notDeepEqual(next, await a[0].data(), "later draws differ");
      manualSeed(43);
      assert.notDeepEqual(
        await rand([1000], { device: d }).data(),
        await a[0].data(),
        "other seeds differ",
      );
      // Across backends: uniform numbers are bit-identical to cpu's, normal ones close.
      manualSeed(7);
      const ref = [rand([5000], { device: CPU0 }), randn([5000], { device: CPU0 })];
      manualSeed(7);
      const here = [rand([5000], { device: d }), randn([5000], { device: d })];
      assert.deepEqual(
        await here[0].data(),
        await ref[0].data(),
        `rand on ${d} equals cpu bit for bit`,
      );
      assertClose(await here[1].data(), await ref[1].data(), {
        atol: 1e-5,
        rtol: 1e-5,
        what: "randn",
      });
      // float64 on cpu draws the same numbers as float32, to float32 precision.
      manualSeed(7);
      const f64 = await rand([5000], { device: CPU0, dtype: "float64" }).data();
      assert.deepEqual(Float32Array.from(f64), await ref[0].data());
    },
  });
}

backendTest("rand is in [0, 1); randn has mean 0 and std 1 over 100k draws", async (d) => {
  manualSeed(99);
  const n = 100_000;
  const u = await rand([n], { device: d }).data();
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  for (const v of u) {
    min = Math.min(min, v);
    max = Math.max(max, v);
    sum += v;
  }
  assert.ok(min >= 0 && max < 1, `rand range [${min}, ${max}]`);
  assert.ok(Math.abs(sum / n - 0.5) < 0.01, `rand mean ${sum / n}`);
  const z = await randn([n], { device: d }).data();
  let s1 = 0;
  let s2 = 0;
  for (const v of z) {
    assert.ok(Number.isFinite(v), "randn is finite");
    s1 += v;
    s2 += v * v;
  }
  const mean = s1 / n;
  const std = Math.sqrt(s2 / n - mean * mean);
  assert.ok(Math.abs(mean) < 0.02, `randn mean ${mean}`);
  assert.ok(Math.abs(std - 1) < 0.02, `randn std ${std}`);
});

// ---- autograd ----

Deno.test("gradients accumulate over two backward calls", async () => {
  const x = tensor([1, 2, 3], { requiresGrad: true });
  x.mul(x).sum().backward();
  await assertTensor(x.grad!, [2, 4, 6]);
  const first = x.grad;
  x.mul(3).sum().backward();
  await assertTensor(x.grad!, [5, 7, 9]);
  assert.equal(x.grad, first, "accumulated in place, the same tensor");
  // A tensor used several times in one graph sums its contributions.
  const y = tensor([2], { requiresGrad: true });
  y.mul(y).add(y).mul(y).sum().backward(); // y^3 + y^2: 3y^2 + 2y
  await assertTensor(y.grad!, [16]);
  // The gradient does not alias the seed or another leaf's gradient.
  const a = tensor([1, 1], { requiresGrad: true });
  const b = tensor([1, 1], { requiresGrad: true });
  const seed = tensor([1, 2]);
  a.add(b).backward(seed);
  assert.notEqual(a.grad, b.grad);
  assert.notEqual(a.grad!.storage, seed.storage);
  assert.notEqual(a.grad!.storage, b.grad!.storage);
  a.mul(2).sum().backward();
  await assertTensor(a.grad!, [3, 4]);
  await assertTensor(b.grad!, [1, 2]);
  await assertTensor(seed, [1, 2]);
});

Deno.test("backward: explicit gradient, retainGraph, leaf roots, non-leaf grads stay null", async () => {
  const x = tensor([1, 2], { requiresGrad: true });
  const h = x.mul(x);
  const y = h.mul(3);
  y.backward(tensor([1, 10]), { retainGraph: true });
  await assertTensor(x.grad!, [6, 120]);
  y.backward(tensor([1, 0]));
  await assertTensor(x.grad!, [12, 120]);
  assert.equal(h.grad, null, "non-leaf tensors keep no .grad");
  const leaf = tensor(2, { requiresGrad: true });
  leaf.backward();
  await assertTensor(leaf.grad!, [1], { shape: [] });
  // float64 leaves get float64 gradients.
  const d = tensor([1, 2], { dtype: "float64", requiresGrad: true });
  d.mul(d).sum().backward();
  assert.equal(d.grad!.dtype, "float64");
  await assertTensor(d.grad!, [2, 4]);
  // A diamond: z = (x * 2) + (x * 3) through a shared node.
  const w = tensor([1, -1], { requiresGrad: true });
  const s = w.exp();
  s.mul(2).add(s.mul(3)).sum().backward();
  await assertTensor(w.grad!, [5 * Math.E, 5 / Math.E]);
});

Deno.test("post-accumulate hooks run once per leaf as its gradient lands; backward callbacks run last", async () => {
  const w1 = tensor([[1, 2], [3, 4]], { requiresGrad: true });
  const w2 = tensor([[1, -1], [2, 0]], { requiresGrad: true });
  const unused = tensor([1], { requiresGrad: true });
  const events: string[] = [];
  const seen = new Map<string, number[]>();
  const hook = (name: string) => (leaf: Tensor) => {
    events.push(name);
    // .grad already holds this pass's full gradient when the hook runs.
    leaf.grad!.data().then((v) => seen.set(name, [...v]));
    if (events.length === 1) queueBackwardCallback(() => events.push("end"));
  };
  registerPostAccumulateGradHook(w1, hook("w1"));
  const remove = registerPostAccumulateGradHook(w2, hook("w2"));
  registerPostAccumulateGradHook(unused, hook("unused"));
  const x = tensor([[1, 1]]);
  // w2 is used first and last: backward reaches its last use before w1, but
  // its hook waits for its first use, so w1's hook runs first.
  const h = x.matmul(w2).matmul(w1).matmul(w2);
  h.sum().backward();
  assert.deepEqual(events, ["w1", "w2", "end"]);
  await w2.grad!.data();
  assert.deepEqual(seen.get("w2"), [...(await w2.grad!.data())]);
  assert.deepEqual(seen.get("w1"), [...(await w1.grad!.data())]);
  remove();
  events.length = 0;
  x.matmul(w2).sum().backward();
  assert.deepEqual(events, [], "removed hooks stay silent; no hook, no callback");
  assert.throws(() => queueBackwardCallback(() => {}), /no backward pass is running/);
  assert.throws(
    () => registerPostAccumulateGradHook(x, () => {}),
    /only leaves that require grad/,
  );
  // A leaf root runs its hooks too.
  unused.backward(tensor([2]));
  assert.deepEqual(events, ["unused", "end"]);
});

Deno.test("requiresGrad flows through ops; isLeaf", () => {
  const a = tensor([1, 2], { requiresGrad: true });
  const b = tensor([3, 4]);
  const c = a.mul(b);
  assert.ok(c.requiresGrad);
  assert.ok(!c.isLeaf);
  assert.ok(c.gradFn !== null);
  assert.ok(a.isLeaf && b.isLeaf);
  assert.ok(!b.mul(2).requiresGrad);
  assert.ok(b.mul(2).isLeaf, "results of ops without grad are leaves");
  for (
    const t of [
      c.sum(),
      c.reshape([2, 1]),
      c.transpose(0, 0),
      c.to(CPU1),
      c.to("float64"),
      c.narrow(0, 0, 1),
    ]
  ) {
    assert.ok(t.requiresGrad && !t.isLeaf);
  }
  assert.ok(!a.to("int32").requiresGrad, "integer results do not require grad");
  assert.ok(!a.argmax().requiresGrad);
  assert.ok(!a.gt(0).requiresGrad);
  assert.equal(a.to(CPU0), a, "to(same device) is the tensor itself");
  assert.equal(a.to("float32"), a, "to(same dtype) is the tensor itself");
});

Deno.test("noGrad / isGradEnabled / enableGrad", () => {
  const x = tensor([1, 2], { requiresGrad: true });
  assert.equal(isGradEnabled(), true);
  const y = noGrad(() => {
    assert.equal(isGradEnabled(), false);
    const inner = enableGrad(() => {
      assert.equal(isGradEnabled(), true);
      return x.mul(2);
    });
    assert.ok(inner.requiresGrad, "enableGrad records inside noGrad");
    assert.equal(isGradEnabled(), false);
    return x.mul(2);
  });
  assert.equal(isGradEnabled(), true);
  assert.equal(y.requiresGrad, false);
  assert.equal(y.isLeaf, true);
  assert.throws(() => y.sum().backward(), /does not require grad/);
  assert.throws(() =>
    noGrad(() => {
      throw new Error("inside");
    }), /inside/);
  assert.equal(isGradEnabled(), true, "restored after a throw");
  const n = noGrad(() => 5);
  assert.equal(n, 5);
});

Deno.test("detach shares values, drops history", async () => {
  const x = tensor([1, 2, 3], { requiresGrad: true });
  const h = x.mul(2);
  const d = h.detach();
  assert.equal(d.requiresGrad, false);
  assert.equal(d.isLeaf, true);
  assert.equal(d.storage, h.storage, "shares storage");
  await assertTensor(d, [2, 4, 6]);
  // The gradient does not flow through the detached path.
  x.mul(d).sum().add(h.sum()).backward();
  await assertTensor(x.grad!, [4, 6, 8]);
  assert.equal(d.grad, null);
  const l = x.detach();
  l.requiresGrad = true;
  assert.ok(l.isLeaf && l.requiresGrad);
});

class MulAdd extends Function {
  static override forward(ctx: FunctionCtx, a: Tensor, b: Tensor, k: number): Tensor[] {
    ctx.saveForBackward(a, b);
    ctx.k = k;
    ctx.note = { label: "kept" };
    assert.deepEqual(ctx.needsInputGrad, [true, false, false]);
    assert.equal(isGradEnabled(), false, "forward runs without recording");
    return [a.mul(b).mul(k), a.add(b)];
  }
  static override backward(ctx: FunctionCtx, gProd: Tensor, gSum: Tensor): (Tensor | null)[] {
    const [a, b] = ctx.savedTensors;
    assert.equal(ctx.k, 3);
    assert.deepEqual(ctx.note, { label: "kept" });
    assert.deepEqual([...gSum.shape], [...a.shape], "the unused output's gradient has its shape");
    assert.equal(gSum.dtype, a.dtype);
    return [
      gProd.mul(b).mul(ctx.k as number).add(gSum),
      gProd.mul(a).mul(ctx.k as number).add(gSum),
      null,
    ];
  }
}

Deno.test("Function: saveForBackward, savedTensors, ctx fields, multiple outputs with an unused one", async () => {
  const a = tensor([1, 2], { requiresGrad: true });
  const b = tensor([5, 7]);
  const [prod, sum] = MulAdd.apply(a, b, 3);
  await assertTensor(prod, [15, 42]);
  await assertTensor(sum, [6, 9]);
  assert.ok(prod.requiresGrad && sum.requiresGrad);
  assert.ok(!prod.isLeaf);
  // Only `prod` is used: `sum`'s gradient arrives as zeros, so a's grad is 3 * b.
  prod.sum().backward();
  await assertTensor(a.grad!, [15, 21]);
  assert.equal(b.grad, null);
  // Both outputs used.
  const a2 = tensor([1, 2], { requiresGrad: true });
  const [p2, s2] = MulAdd.apply(a2, b, 3);
  p2.sum().add(s2.mul(10).sum()).backward();
  await assertTensor(a2.grad!, [25, 31]);
});

Deno.test("Function: the unused output's gradient is zeros; outputs that are inputs are new tensors", async () => {
  let seen: number[] = [];
  class Split2 extends Function {
    static override forward(_ctx: FunctionCtx, x: Tensor): Tensor[] {
      return [x.mul(2), x.mul(5)];
    }
    static override backward(_ctx: FunctionCtx, g0: Tensor, g1: Tensor): Tensor {
      return g0.mul(2).add(g1.mul(5));
    }
  }
  class Identity extends Function {
    static override forward(_ctx: FunctionCtx, x: Tensor): Tensor {
      return x;
    }
    static override backward(_ctx: FunctionCtx, g: Tensor): Tensor {
      return g.mul(1);
    }
  }
  class Probe extends Function {
    static override forward(_ctx: FunctionCtx, x: Tensor): Tensor[] {
      return [x.mul(1), x.mul(1)];
    }
    static override backward(_ctx: FunctionCtx, _g0: Tensor, g1: Tensor): Tensor {
      seen = [...g1.shape];
      return g1;
    }
  }
  const x = tensor([1, 2, 3], { requiresGrad: true });
  const [, second] = Split2.apply(x);
  second.sum().backward();
  await assertTensor(x.grad!, [5, 5, 5]);
  const y = tensor([1, 2], { requiresGrad: true });
  const same = Identity.apply(y);
  assert.notEqual(same, y);
  assert.ok(y.isLeaf, "the input keeps its own history");
  same.mul(4).sum().backward();
  await assertTensor(y.grad!, [4, 4]);
  const z = tensor([[1, 2]], { requiresGrad: true });
  const [first] = Probe.apply(z);
  first.sum().backward();
  assert.deepEqual(seen, [1, 2]);
  await assertTensor(z.grad!, [0, 0], { what: "the unused output's gradient is zeros" });
  // Without inputs that require grad, nothing is recorded.
  const plain = Split2.apply(tensor([1]))[0];
  assert.ok(!plain.requiresGrad && plain.isLeaf);
});

// ---- streams ----

Deno.test("streams: copy chain cpu:0 -> cpu:1 -> cpu:0 then ops at once, 200 times, in order", async () => {
  let acc = zeros([16], { device: CPU0 });
  const pending: [Tensor, number][] = [];
  for (let i = 0; i < 200; i++) {
    const x = full([16], i, { device: CPU0 });
    const back = x.to(CPU1).mul(2).to(CPU0).add(1);
    const y = back.sub(x);
    acc = acc.to(CPU1).add(1).to(CPU0).add(back).sub(back);
    pending.push([y, i + 1]);
    x.dispose(); // released after its pending copy, never before
  }
  for (const [y, want] of pending) {
    const v = await y.data();
    assert.ok(v.every((e) => e === want), `chain ${want - 1}: got ${v[0]}, expected ${want}`);
  }
  await assertTensor(acc, new Array(16).fill(200));
});

Deno.test({
  name: "streams: chains across every started backend stay ordered",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const all = [...BACKENDS.values()].flat();
    let t = arange(8, undefined, 1, { dtype: "float32", device: CPU0 });
    for (let round = 0; round < 20; round++) {
      for (const d of all) t = t.to(d).add(1);
      t = t.to(CPU2).mul(1);
    }
    await assertTensor(t, [0, 1, 2, 3, 4, 5, 6, 7].map((v) => v + 20 * all.length));
    const g = tensor([1, 2, 3], { requiresGrad: true });
    let h = g;
    for (const d of all) h = h.to(d).mul(2);
    h.sum().backward();
    await assertTensor(g.grad!, new Array(3).fill(2 ** all.length));
  },
});

Deno.test({
  name: "streams: a backend read that throws while work is held rejects instead of hanging",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    registerBackend("bad-read", async () => {
      const inner = await cpuBackend();
      return {
        async createDevice(index: number): Promise<BackendDevice> {
          const kernels = await inner.createDevice(index);
          return new Proxy(kernels, {
            get(target, prop, receiver) {
              if (prop === "read") {
                return () => {
                  throw new Error("read failed (test)");
                };
              }
              const value = Reflect.get(target, prop, receiver);
              return typeof value === "function" ? value.bind(target) : value;
            },
          });
        },
      };
    }, { priority: -30 });
    try {
      const [bad] = await requestDevices({ backend: "bad-read" });
      const x = tensor([1, 2], { device: bad });
      await assert.rejects(x.data(), /read failed \(test\)/, "idle stream");
      // Hold the stream behind a pending copy, then read.
      const y = tensor([3, 4], { device: CPU0 }).to(bad).add(x);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error("the read never settled")), 2000);
      });
      try {
        await assert.rejects(
          Promise.race([y.data(), timeout]),
          /read failed \(test\)/,
          "held stream",
        );
      } finally {
        clearTimeout(timer);
      }
    } finally {
      unregisterBackend("bad-read");
    }
  },
});

// ---- memory: tidy / keep / dispose ----

backendTest(
  "tidy releases intermediates, keeps what is returned, kept and persistent",
  async (d) => {
    const x = tensor([1, 2, 3, 4], { device: d });
    const work = (t: Tensor) => t.mul(2).add(1).exp().sum();
    const w = tensor([1, 2], { device: d, requiresGrad: true });
    tidy(() => work(x)); // warms up cached constants
    tidy(() => w.mul(w).sum().backward());
    w.grad!.dispose();
    w.grad = null;
    // Memory is compared with no await in between: a garbage-collected tensor
    // from elsewhere could be freed during one.
    const base = d.memory().bytesInUse;
    tidy(() => {
      work(x);
      work(x).mul(x);
    });
    assert.equal(d.memory().bytesInUse, base, "everything made inside is released");
    const out = tidy(() => work(x));
    assert.ok(d.memory().bytesInUse > base);
    // (Tensor operands only from here on: numbers would add cached constants.)
    const { a, list } = tidy(() => ({ a: x.add(x), list: [x.mul(x), x.neg()] }));
    let kept: Tensor | null = null;
    tidy(() => {
      kept = keep(x.sub(x));
      x.exp();
    });
    // Nested scopes: a tensor returned from the inner scope belongs to the outer one.
    const before = d.memory().bytesInUse;
    const fromInner = tidy(() => {
      const inner = tidy(() => x.mul(x));
      x.sub(x);
      return inner.add(x);
    });
    const fromInnerValues = fromInner.data();
    fromInner.dispose();
    assert.equal(d.memory().bytesInUse, before);
    // Gradients made inside a scope are persistent.
    tidy(() => w.mul(w).sum().backward());
    const values = [out, a, list[1], kept!, w.grad!].map((t) => t.data());
    for (const t of [out, a, ...list, kept!, w.grad!]) t.dispose();
    assert.equal(d.memory().bytesInUse, base, "back to the baseline once all is disposed");

    // Values read before the dispose are intact.
    const [vOut, vA, vNeg, vKept, vGrad] = await Promise.all(values);
    assertClose(vOut, [[1, 2, 3, 4].reduce((s, v) => s + Math.exp(2 * v + 1), 0)], { rtol: 1e-5 });
    assertClose(vA, [2, 4, 6, 8]);
    assertClose(vNeg, [-1, -2, -3, -4]);
    assertClose(vKept, [0, 0, 0, 0]);
    assertClose(vGrad, [2, 4]);
    assertClose(await fromInnerValues, [2, 6, 12, 20]);
  },
);

Deno.test("tidy: memory back to baseline exactly on cpu; throws on an async fn", async () => {
  const x = tensor([1, 2, 3]);
  tidy(() => x.mul(2).add(1).sigmoid());
  const base = CPU0.memory().bytesInUse;
  const r = tidy(() => x.mul(2).add(1).sigmoid());
  assert.equal(CPU0.memory().bytesInUse, base + 12, "only the result (3 float32) is held");
  r.dispose();
  assert.equal(CPU0.memory().bytesInUse, base);
  // deno-lint-ignore require-await
  assert.throws(() => tidy(async () => x.mul(2)), /Promise/);
  assert.throws(() => tidy(() => Promise.resolve(1)), /Promise/);
  assert.equal(tidy(() => 42), 42);
  await Promise.resolve();
});

Deno.test("dispose releases memory at once; views share it", async () => {
  const base = CPU0.memory().bytesInUse;
  const t = zeros([100]);
  assert.equal(CPU0.memory().bytesInUse, base + 400);
  const v = t.reshape([10, 10]);
  t.dispose();
  assert.equal(CPU0.memory().bytesInUse, base);
  t.dispose();
  assert.equal(CPU0.memory().bytesInUse, base, "disposing twice is a no-op");
  await assert.rejects(v.data(), /released/);
});
