/**
 * The parallel layer against ../shared/spec/parallel.md, one test per
 * behaviour, on logical cpu devices, on webgpu devices and on a mix.
 */

import assert from "node:assert/strict";
import {
  arange,
  type Device,
  manualSeed,
  nn,
  noGrad,
  optim,
  parallel,
  randn,
  requestDevices,
  type Tensor,
  tensor,
  tidy,
  zeros,
} from "../mod.ts";
import { assertClose, BACKENDS } from "./harness.ts";
import fixtures from "./fixtures/torch_reference.json" with { type: "json" };

const cpus = await requestDevices({ backend: "cpu", count: 8 });
const gpus = BACKENDS.get("webgpu") ?? null;

function test(name: string, fn: () => Promise<void> | void, ignore = false): void {
  Deno.test({ name, ignore, sanitizeOps: false, sanitizeResources: false, fn });
}

const CHUNK_TABLE: [number, number, number[]][] = [
  [16, 2, [8, 8]],
  [15, 2, [8, 7]],
  [30, 2, [15, 15]],
  [10, 2, [5, 5]],
  [30, 3, [10, 10, 10]],
  [30, 4, [8, 8, 8, 6]],
  [25, 4, [7, 7, 7, 4]],
  [10, 4, [3, 3, 3, 1]],
  [13, 4, [4, 4, 4, 1]],
  [3, 4, [1, 1, 1]],
  [5, 4, [2, 2, 1]],
  [6, 4, [2, 2, 2]],
  [17, 8, [3, 3, 3, 3, 3, 2]],
  [1, 4, [1]],
  [0, 3, [0, 0, 0]],
];

test("scatter follows torch.chunk's table, chunk i on device i", () => {
  for (const [n, k, sizes] of CHUNK_TABLE) {
    const chunks = parallel.scatter(zeros([n, 3]), cpus.slice(0, k)) as Tensor[];
    assert.deepEqual(chunks.map((c) => c.shape[0]), sizes, `n=${n}, k=${k}`);
    chunks.forEach((c, i) => assert.equal(c.device, cpus[i]));
    const viaComm = parallel.comm.scatter(zeros([n, 3]), cpus.slice(0, k));
    assert.deepEqual(viaComm.map((c) => c.shape[0]), sizes);
  }
});

test("the chunk table matches PyTorch's torch.chunk (fixture)", () => {
  const recorded = fixtures.parallel.chunk_sizes as { n: number; k: number; chunk: number[] }[];
  assert.ok(recorded.length >= CHUNK_TABLE.length);
  for (const { n, k, chunk } of recorded) {
    const mine = CHUNK_TABLE.find(([a, b]) => a === n && b === k);
    if (mine) assert.deepEqual(mine[2], chunk, `n=${n} k=${k}`);
  }
});

test("scatter: values, negative dim, explicit chunkSizes and their errors", async () => {
  const x = arange(12).reshape([2, 6]);
  const parts = parallel.scatter(x, cpus.slice(0, 2), { dim: -1 }) as Tensor[];
  assert.deepEqual(await parts[0].toArray(), [[0, 1, 2], [6, 7, 8]]);
  assert.deepEqual(await parts[1].toArray(), [[3, 4, 5], [9, 10, 11]]);
  const uneven = parallel.scatter(x, cpus.slice(0, 3), {
    dim: 1,
    chunkSizes: [1, 0, 5],
  }) as Tensor[];
  assert.deepEqual(uneven.map((t) => t.shape[1]), [1, 0, 5]);
  assert.throws(
    () => parallel.scatter(x, cpus.slice(0, 2), { dim: 1, chunkSizes: [1, 2] }),
    /chunkSizes \[1,2\] must .* sum to 6/,
  );
  assert.throws(
    () => parallel.scatter(x, cpus.slice(0, 2), { dim: 1, chunkSizes: [6] }),
    /one non-negative entry per device \(2\)/,
  );
  assert.throws(
    () => parallel.scatter(tensor(3), cpus.slice(0, 2)),
    /0-dimensional tensor cannot be scattered/,
  );
  assert.throws(() => parallel.scatter(x, []), /non-empty array of devices/);
  assert.throws(() => parallel.scatter(x, [cpus[0], cpus[0]]), /cpu:0 appears twice/);
});

test("scatter walks arrays, objects and other values; the smallest chunk count wins", () => {
  const devs = cpus.slice(0, 4);
  const fn = () => 1;
  const out = parallel.scatter(
    [zeros([8, 2]), { a: zeros([5, 1]), b: "tag", c: [], d: {} }, 7, null, fn],
    devs,
  ) as unknown[][];
  // 8 rows give 4 chunks, 5 rows give 3 ([2, 2, 1]): 3 devices used.
  assert.equal(out.length, 3);
  out.forEach((args, i) => {
    assert.equal(args.length, 5);
    assert.equal((args[0] as Tensor).shape[0], 2);
    assert.equal((args[0] as Tensor).device, devs[i]);
    const obj = args[1] as Record<string, unknown>;
    assert.deepEqual(Object.keys(obj), ["a", "b", "c", "d"]);
    assert.equal((obj.a as Tensor).shape[0], i < 2 ? 2 : 1);
    assert.equal(obj.b, "tag");
    assert.deepEqual(obj.c, []);
    assert.deepEqual(obj.d, {});
    assert.equal(args[2], 7);
    assert.equal(args[3], null);
    assert.equal(args[4], fn);
  });
  const plain = parallel.scatter({ lr: 0.1 }, devs.slice(0, 2));
  assert.deepEqual(plain, [{ lr: 0.1 }, { lr: 0.1 }]);
});

test("gather concatenates nested outputs on the output device; structure errors name the place", async () => {
  const outs = [
    { y: tensor([[1], [2]], { device: cpus[1] }), aux: [tensor([1], { device: cpus[1] }), null] },
    { y: tensor([[3]], { device: cpus[2] }), aux: [tensor([2], { device: cpus[2] }), null] },
  ];
  const g = parallel.gather(outs, cpus[0]) as { y: Tensor; aux: [Tensor, null] };
  assert.equal(g.y.device, cpus[0]);
  assert.deepEqual(await g.y.toArray(), [[1], [2], [3]]);
  assert.deepEqual(await g.aux[0].toArray(), [1, 2]);
  assert.equal(g.aux[1], null);
  assert.throws(
    () => parallel.gather([[zeros([1]), zeros([1])], [zeros([1])]], cpus[0]),
    /outputs differ at output: output 0 is an array of length 2, output 1 is an array of length 1/,
  );
  assert.throws(
    () => parallel.gather([{ a: zeros([1]) }, { b: zeros([1]) }], cpus[0]),
    /output 0 is an object with keys \[a\], output 1 is an object with keys \[b\]/,
  );
  assert.throws(() => parallel.gather([zeros([1]), 3], cpus[0]), /output 1 is a number/);
});

test("gather of 0-dimensional outputs stacks them into a vector (with one warning)", async () => {
  const warn = console.warn;
  const warnings: string[] = [];
  console.warn = (msg: string) => warnings.push(msg);
  try {
    const v = parallel.gather(
      [tensor(1.5, { device: cpus[0] }), tensor(2.5, { device: cpus[1] })],
      cpus[0],
    ) as Tensor;
    assert.deepEqual([...v.shape], [2]);
    assert.deepEqual(await v.toArray(), [1.5, 2.5]);
    parallel.gather([tensor(1), tensor(2)], cpus[0]);
  } finally {
    console.warn = warn;
  }
  assert.ok(warnings.length <= 1);
});

for (const [label, devices] of deviceSets()) {
  test(`scatter then gather is the identity in value and gradient, uneven [8, 7] [${label}]`, async () => {
    manualSeed(1);
    const x = randn([15, 3], { device: devices[0], requiresGrad: true });
    const chunks = parallel.scatter(x, devices.slice(0, 2)) as Tensor[];
    assert.deepEqual(chunks.map((c) => c.shape[0]), [8, 7]);
    const y = parallel.gather(chunks, devices[0]) as Tensor;
    assertClose(await y.data(), await x.data());
    const w = randn([15, 3], { device: devices[0] });
    y.mul(w).sum().backward();
    assertClose(await x.grad!.data(), await w.data(), { what: "x.grad" });
  });

  test(`a chunk that gets no gradient counts as zeros [${label}]`, async () => {
    const x = randn([4, 2], { device: devices[0], requiresGrad: true });
    const [a] = parallel.scatter(x, devices.slice(0, 2)) as Tensor[];
    a.sum().backward();
    assert.deepEqual(await x.grad!.toArray(), [[1, 1], [1, 1], [0, 0], [0, 0]]);
  });

  test(`DataParallel gradients equal single-device gradients [${label}]`, async () => {
    const fx = { ...fixtures.mlp, grads: fixtures.parallel.grads } as Record<string, unknown>;
    const model = mlpFromFixture(fx).to(devices[0]);
    const single = mlpFromFixture(fx).to(devices[0]);
    const x = tensor(fx.input as number[][], { device: devices[0] });
    const target = tensor(fx.target as number[], { dtype: "int32", device: devices[0] });
    const lossFn = new nn.CrossEntropyLoss();
    const dp = new nn.DataParallel(model, { devices });
    const out = dp.forward(x) as Tensor;
    assert.deepEqual([...out.shape], [10, 3]);
    assert.equal(out.device, devices[0]);
    lossFn.forward(out, target).backward();
    lossFn.forward(single.forward(x) as Tensor, target).backward();
    const grads = fx.grads as Record<string, number[]>;
    for (const [name, p] of model.namedParameters()) {
      const twin = single.namedParameters().find(([n]) => n === name)![1];
      assert.equal(p.grad!.device, devices[0], `${name}.grad lives on the first device`);
      assertClose(await p.grad!.data(), await twin.grad!.data(), { atol: 1e-5, what: name });
      assertClose(await p.grad!.data(), grads[name].flat(), {
        atol: 1e-5,
        what: `${name} vs torch`,
      });
    }
  });

  test(`10 SGD steps with DataParallel equal 10 steps on one device [${label}]`, async () => {
    const fx = fixtures.mlp as Record<string, unknown>;
    const a = mlpFromFixture(fx).to(devices[0]);
    const b = mlpFromFixture(fx).to(devices[0]);
    const dp = new nn.DataParallel(a, { devices });
    const optA = new optim.SGD(a.parameters(), { lr: 0.1, momentum: 0.9 });
    const optB = new optim.SGD(b.parameters(), { lr: 0.1, momentum: 0.9 });
    const x = tensor(fx.input as number[][], { device: devices[0] });
    const target = tensor(fx.target as number[], { dtype: "int32", device: devices[0] });
    const lossFn = new nn.CrossEntropyLoss();
    for (let step = 0; step < 10; step++) {
      optA.zeroGrad();
      optB.zeroGrad();
      lossFn.forward(dp.forward(x) as Tensor, target).backward();
      lossFn.forward(b.forward(x) as Tensor, target).backward();
      optA.step();
      optB.step();
    }
    for (const [name, p] of a.namedParameters()) {
      const twin = b.namedParameters().find(([n]) => n === name)![1];
      assertClose(await p.data(), await twin.data(), { atol: 1e-5, what: name });
    }
  });
}

function* deviceSets(): Generator<[string, Device[]]> {
  yield ["4 cpu devices", cpus.slice(0, 4)];
  if (gpus) {
    yield ["2 webgpu devices", gpus.slice(0, 2)];
    yield ["webgpu + cpu", [gpus[0], cpus[1]]];
  }
}

function mlpFromFixture(fx: Record<string, unknown>): nn.Sequential {
  const model = new nn.Sequential(new nn.Linear(6, 8), new nn.ReLU(), new nn.Linear(8, 3));
  const params = fx.params as Record<string, number[] | number[][]>;
  const sd: Record<string, Tensor> = {};
  for (const [name, values] of Object.entries(params)) sd[name] = tensor(values);
  model.loadStateDict(sd);
  return model;
}

test("replicate: replica 0 is the module; others hold broadcast copies; noGrad gives plain copies", async () => {
  const model = new nn.Linear(3, 2);
  const replicas = parallel.replicate(model, cpus.slice(0, 3));
  assert.equal(replicas.length, 3);
  assert.equal(replicas[0], model);
  assert.notEqual(replicas[1], model);
  assert.ok(replicas[1] instanceof nn.Linear);
  assert.equal(replicas[1].weight.device, cpus[1]);
  assert.equal(replicas[2].bias!.device, cpus[2]);
  assert.ok(replicas[1].weight.gradFn !== null, "broadcast copies are in the graph");
  assertClose(await replicas[2].weight.data(), await model.weight.data());
  const plain = noGrad(() => parallel.replicate(model, cpus.slice(0, 2)));
  assert.equal(plain[1].weight.gradFn, null);
  const detached = parallel.replicate(model, cpus.slice(0, 2), { detach: true });
  assert.equal(detached[1].weight.gradFn, null);
});

test("replicate: frozen parameters are plain copies (no gradient computed for them), as PyTorch marks them", async () => {
  manualSeed(5);
  const model = new nn.Linear(3, 2);
  model.bias!.requiresGrad = false;
  const replicas = parallel.replicate(model, cpus.slice(0, 2));
  assert.equal(replicas[1].bias!.requiresGrad, false);
  assert.equal(replicas[1].bias!.gradFn, null);
  assert.ok(replicas[1].weight.gradFn !== null);
  // Only the bias, frozen: the gathered output needs no gradient, as on one device.
  const frozenOnly = new nn.Linear(3, 2);
  for (const p of frozenOnly.parameters()) p.requiresGrad = false;
  const out = new nn.DataParallel(frozenOnly, { devices: cpus.slice(0, 2) }).forward(
    randn([4, 3]),
  ) as Tensor;
  assert.equal(out.requiresGrad, false);
  // The learnt weight's gradient is the single-device one.
  const x = randn([4, 3]);
  (new nn.DataParallel(model, { devices: cpus.slice(0, 2) }).forward(x) as Tensor).sum()
    .backward();
  const dp = await model.weight.grad!.toArray();
  model.zeroGrad();
  (model.forward(x) as Tensor).sum().backward();
  assertClose(
    (dp as number[][]).flat(),
    ((await model.weight.grad!.toArray()) as number[][]).flat(),
  );
  assert.equal(model.bias!.grad, null);
});

test("Gather's backward scatters to repeated devices (two gathered tensors on one device)", async () => {
  const a = tensor([[1, 2]], { device: cpus[1], requiresGrad: true });
  const b = tensor([[3, 4], [5, 6]], { device: cpus[1], requiresGrad: true });
  const g = parallel.gather([a.mul(2), b.mul(3)], cpus[0]) as Tensor;
  assert.deepEqual(g.shape, [3, 2]);
  g.sum().backward();
  assert.deepEqual(await a.grad!.toArray(), [[2, 2]]);
  assert.deepEqual(await b.grad!.toArray(), [[3, 3], [3, 3]]);
  assert.equal(b.grad!.device, cpus[1]);
  assert.deepEqual(
    parallel.comm.scatter(tensor([1, 2, 3]), [cpus[1], cpus[1]]).map((t) => String(t.device)),
    [String(cpus[1]), String(cpus[1])],
  );
});

test("Broadcast's backward sums every replica's gradient into the original on the first device", async () => {
  const w = tensor([1, 2], { requiresGrad: true });
  const copies = parallel.Broadcast.apply(cpus.slice(1, 4), w);
  assert.equal(copies.length, 3);
  copies.forEach((c, i) => c.mul(i + 1).sum().backward(undefined, { retainGraph: true }));
  assert.equal(w.grad!.device, cpus[0]);
  assert.deepEqual(await w.grad!.toArray(), [6, 6]);
  const sums = parallel.ReduceAddCoalesced.apply(
    cpus[0],
    1,
    tensor([1], { device: cpus[1] }),
    tensor([2], { device: cpus[2] }),
  );
  assert.deepEqual(await sums[0].toArray(), [3]);
});

test("BatchNorm buffers: replica 0 updates persist, other replicas' are lost, each normalises its own chunk", async () => {
  manualSeed(3);
  const bn = new nn.BatchNorm1d(2);
  const dp = new nn.DataParallel(bn, { devices: cpus.slice(0, 2) });
  const x = tensor([[0, 0], [2, 4], [100, 100], [300, 500]]);
  const y = dp.forward(x) as Tensor;
  // Each replica normalises with its own chunk's statistics.
  assertClose(await y.data(), [-1, -1, 1, 1, -1, -1, 1, 1], { atol: 1e-3 });
  // Running mean moved toward chunk 0's mean [1, 2] only (momentum 0.1).
  assertClose(await bn.runningMean!.data(), [0.1, 0.2], { atol: 1e-6 });
  assert.equal((await bn.numBatchesTracked!.data())[0], 1);
});

test("DataParallel: module on the wrong device is a clear error", () => {
  const model = new nn.Linear(2, 2).to(cpus[1]);
  const dp = new nn.DataParallel(model, { devices: cpus.slice(0, 2) });
  assert.throws(
    () => dp.forward(zeros([4, 2])),
    /module must have its parameters and buffers on device cpu:0 \(devices\[0\]\) but found weight on device cpu:1/,
  );
});

test("DataParallel: one device calls the module directly on the moved input; fewer chunks use fewer replicas", () => {
  const seen: string[] = [];
  class Probe extends nn.Module {
    lin = new nn.Linear(2, 2);
    override forward(x: Tensor): Tensor {
      seen.push(`${x.device} ${x.shape[0]}`);
      return this.lin.forward(x);
    }
  }
  const probe = new Probe();
  const one = new nn.DataParallel(probe, { devices: [cpus[0]] });
  const y = one.forward(zeros([5, 2], { device: cpus[1] })) as Tensor;
  assert.deepEqual(seen, ["cpu:0 5"]);
  assert.equal(y.device, cpus[0]);
  seen.length = 0;
  const four = new nn.DataParallel(probe, { devices: cpus.slice(0, 4) });
  const z = four.forward(zeros([3, 2])) as Tensor;
  assert.deepEqual(seen, ["cpu:0 1", "cpu:1 1", "cpu:2 1"]);
  assert.deepEqual([...z.shape], [3, 2]);
});

test("DataParallel: no arguments runs the module once on the first device; objects are scattered like kwargs", () => {
  let calls = 0;
  class NoArgs extends nn.Module {
    override forward(...args: unknown[]): unknown {
      calls++;
      return args.length;
    }
  }
  const dp = new nn.DataParallel(new NoArgs(), { devices: cpus.slice(0, 2) });
  assert.equal(dp.forward(), 0);
  assert.equal(calls, 1);
  class Kw extends nn.Module {
    override forward(x: Tensor, opts: { scale: Tensor; tag: string }): Tensor {
      assert.equal(opts.tag, "t");
      return x.mul(opts.scale);
    }
  }
  const kw = new nn.DataParallel(new Kw(), { devices: cpus.slice(0, 2) });
  const out = kw.forward(zeros([4, 1]), { scale: zeros([4, 1]), tag: "t" }) as Tensor;
  assert.deepEqual([...out.shape], [4, 1]);
});

test("dataParallel (functional) with outputDevice and dim", async () => {
  const model = new nn.Linear(4, 3);
  const x = randn([2, 6, 4]);
  const y = parallel.dataParallel(model, x, cpus.slice(0, 3), {
    outputDevice: cpus[2],
    dim: 1,
  }) as Tensor;
  assert.deepEqual([...y.shape], [2, 6, 3]);
  assert.equal(y.device, cpus[2]);
  assertClose(await y.data(), await model.forward(x).data(), { atol: 1e-6 });
  assert.equal(parallel.dataParallel(model, x, []) instanceof Object, true);
});

test("parallelApply: counts must agree; a failing replica is named with its device and cause", () => {
  const a = new nn.Linear(2, 2);
  assert.throws(
    () => parallel.parallelApply([a, a], [zeros([1, 2])]),
    /got 2 modules, 1 inputs; they must agree/,
  );
  const replicas = parallel.replicate(a, cpus.slice(0, 2));
  let caught: Error | null = null;
  try {
    parallel.parallelApply(replicas, [zeros([1, 2]), zeros([1, 3], { device: cpus[1] })], {
      devices: cpus.slice(0, 2),
    });
  } catch (error) {
    caught = error as Error;
  }
  assert.ok(caught);
  assert.match(caught.message, /replica 1 on device cpu:1 failed: linear: input of shape \[1, 3\]/);
  assert.ok(caught.cause instanceof Error);
});

test("parallelApply keeps the caller's grad mode in every replica", () => {
  const model = new nn.Linear(2, 2);
  const replicas = parallel.replicate(model, cpus.slice(0, 2));
  const outs = noGrad(() =>
    parallel.parallelApply(replicas, [zeros([1, 2]), zeros([1, 2], { device: cpus[1] })])
  ) as Tensor[];
  assert.ok(outs.every((o) => !o.requiresGrad));
  const live = parallel.parallelApply(replicas, [
    zeros([1, 2]),
    zeros([1, 2], { device: cpus[1] }),
  ]) as Tensor[];
  assert.ok(live.every((o) => o.requiresGrad));
});

test("a replica failing on a #private field gets a hint about replication", () => {
  class Hidden extends nn.Module {
    lin = new nn.Linear(2, 2);
    #scale = 2;
    override forward(x: Tensor): Tensor {
      return this.lin.forward(x).mul(this.#scale);
    }
  }
  const dp = new nn.DataParallel(new Hidden(), { devices: cpus.slice(0, 2) });
  assert.throws(
    () => dp.forward(zeros([4, 2])),
    /replica 1 on device cpu:1 failed: .*#private fields/,
  );
});

for (const [label, devices] of deviceSets()) {
  test(`DataParallel steps inside tidy keep every device's memory flat [${label}]`, async () => {
    const fx = fixtures.mlp as Record<string, unknown>;
    const model = mlpFromFixture(fx).to(devices[0]);
    const dp = new nn.DataParallel(model, { devices });
    const opt = new optim.SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
    const x = tensor(fx.input as number[][], { device: devices[0] });
    const target = tensor(fx.target as number[], { dtype: "int32", device: devices[0] });
    const lossFn = new nn.CrossEntropyLoss();
    const step = () =>
      tidy(() => {
        opt.zeroGrad();
        lossFn.forward(dp.forward(x), target).backward();
        opt.step();
      });
    const settle = async () => {
      for (const d of devices) {
        const probe = zeros([1], { device: d });
        await probe.data();
        probe.dispose();
      }
      await model.parameters()[0].data();
    };
    for (let i = 0; i < 5; i++) step();
    await settle();
    const used = devices.map((d) => d.memory().bytesInUse);
    for (let i = 0; i < 30; i++) step();
    await settle();
    devices.forEach((d, i) =>
      assert.ok(
        d.memory().bytesInUse <= used[i],
        `${d}: ${d.memory().bytesInUse} bytes in use after 30 steps, ${used[i]} after 5`,
      )
    );
  });
}
