/**
 * The lazy modules (LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d, LazyBatchNorm1d/2d/3d,
 * LazyInstanceNorm1d/2d/3d) and UninitializedParameter/UninitializedBuffer against PyTorch 1.13
 * (tests/fixtures/torch_lazy.json) on every backend: reprs and state-dict keys before and after the
 * first forward, the class they become, outputs, gradients and running statistics given the
 * fixture's weights, materialization by `loadStateDict`; on cpu the same draws as the regular
 * module made at that moment under the same seed; PyTorch's errors; a float64 gradient check.
 * @module
 */

import assert from "node:assert/strict";
import {
  type Device,
  distributed,
  fromSafetensors,
  manualSeed,
  nn,
  ones,
  optim,
  type Tensor,
  tensor,
  toSafetensors,
  zeros,
} from "../mod.ts";
import {
  assertClose,
  assertTensor,
  backendTest,
  fixtureTensor,
  type FixtureValues,
  REF,
} from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_lazy.json" with { type: "json" };

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-5, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

type Options = Record<string, unknown>;
type Lazy = nn.Module & nn.LazyModuleMixin;

/** `new nn[cls](...args, options)` with `device`. */
function makeLazy(cls: string, args: unknown[], options: Options, device?: Device): Lazy {
  const o = { ...options, device };
  const [a, b] = args as [number, number & [number, number]];
  switch (cls) {
    case "LazyLinear":
      return new nn.LazyLinear(a, o);
    case "LazyConv1d":
      return new nn.LazyConv1d(a, b as number, o);
    case "LazyConv2d":
      return new nn.LazyConv2d(a, b, o);
    case "LazyConv3d":
      return new nn.LazyConv3d(a, b as number, o);
    case "LazyConvTranspose1d":
      return new nn.LazyConvTranspose1d(a, b as number, o);
    case "LazyConvTranspose2d":
      return new nn.LazyConvTranspose2d(a, b, o);
    case "LazyConvTranspose3d":
      return new nn.LazyConvTranspose3d(a, b as number, o);
    case "LazyBatchNorm1d":
      return new nn.LazyBatchNorm1d(o);
    case "LazyBatchNorm2d":
      return new nn.LazyBatchNorm2d(o);
    case "LazyBatchNorm3d":
      return new nn.LazyBatchNorm3d(o);
    case "LazyInstanceNorm1d":
      return new nn.LazyInstanceNorm1d(o);
    case "LazyInstanceNorm2d":
      return new nn.LazyInstanceNorm2d(o);
    case "LazyInstanceNorm3d":
      return new nn.LazyInstanceNorm3d(o);
  }
  throw new Error(`unknown lazy module ${cls}`);
}

/** The class names PyTorch's fixture gives the values of a state dict. */
function kindOf(t: Tensor): string {
  if (t instanceof nn.UninitializedParameter) return "UninitializedParameter";
  if (t instanceof nn.UninitializedBuffer) return "UninitializedBuffer";
  if (t instanceof nn.Parameter) return "Parameter";
  return "Tensor";
}

/** A fixture state dict as tensors on `device` (`num_batches_tracked` int32). */
function stateOn(state: Record<string, FixtureValues>, device: Device): Record<string, Tensor> {
  return Object.fromEntries(
    Object.entries(state).map(([k, v]) => [
      k,
      fixtureTensor(v, device, k.endsWith("num_batches_tracked") ? { dtype: "int32" } : {}),
    ]),
  );
}

const REGULAR = nn as unknown as Record<string, new (...a: never[]) => nn.Module>;

for (const c of fixtures.modules) {
  const label = `${c.cls}(${JSON.stringify(c.args)}, ${JSON.stringify(c.options)})`;
  backendTest(`lazy module ${label} against PyTorch`, async (device) => {
    const m = makeLazy(c.cls, c.args, c.options, device);
    assert.equal(String(m), c.repr_before);
    assert.equal(m.hasUninitializedParams(), c.uninitialized_before);
    const before = m.stateDict();
    assert.deepEqual(Object.keys(before), c.keys_before);
    assert.deepEqual(Object.values(before).map(kindOf), c.kinds_before);

    m.call(fixtureTensor(c.dry_input, device));
    assert.equal(String(m), c.repr_after);
    assert.equal(m.constructor.name, c.class_after);
    const become: unknown = m;
    assert.ok(become instanceof REGULAR[c.class_after], `instanceof ${c.class_after}`);
    assert.ok(!(become instanceof REGULAR[c.cls]), `no longer instanceof ${c.cls}`);
    const after = m.stateDict();
    assert.deepEqual(Object.values(after).map(kindOf), c.kinds_after);
    assert.deepEqual(
      Object.fromEntries(Object.entries(after).map(([k, v]) => [k, [...v.shape]])),
      c.shapes_after,
    );
    for (const [k, b] of m.namedBuffers()) {
      await assertTensor(b, (c.buffers_after_dry as unknown as Record<string, unknown[]>)[k], {
        ...tol(device),
        what: `${k} after the dry run`,
      });
    }
    for (const p of m.parameters()) assert.equal(p.device, device);

    m.loadStateDict(stateOn(c.state as Record<string, FixtureValues>, device));
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const y = m.call(x) as Tensor;
    await assertTensor(y, c.output as unknown[], { ...tol(device), what: "output" });
    y.mul(fixtureTensor(c.g, device)).sum().backward();
    const grads = c.grads as unknown as Record<string, unknown[]>;
    await assertTensor(x.grad!, grads.input, { ...tol(device), what: "input grad" });
    for (const [k, p] of m.namedParameters()) {
      await assertTensor(p.grad!, grads[k], { ...tol(device), what: `${k} grad` });
    }
    for (const [k, b] of m.namedBuffers()) {
      await assertTensor(b, (c.buffers_after as unknown as Record<string, unknown[]>)[k], {
        ...tol(device),
        what: `${k} after the forward`,
      });
    }
  });
}

for (const [i, c] of fixtures.load.entries()) {
  backendTest(`loadStateDict into a lazy module: case ${i} (${c.cls})`, async (device) => {
    const m = makeLazy(c.cls, c.args, c.options, device);
    if ("lazy_into_lazy" in c) {
      m.loadStateDict(makeLazy(c.cls, c.args, c.options, device).stateDict());
      assert.equal(m.hasUninitializedParams(), c.uninitialized_after_load);
      assert.equal(String(m), c.repr_after_load);
      return;
    }
    const state = stateOn(c.state as Record<string, FixtureValues>, device);
    if ("partial" in c) {
      const result = m.loadStateDict(state, { strict: false });
      assert.deepEqual(result.missingKeys, c.missing_keys);
      assert.deepEqual(result.unexpectedKeys, c.unexpected_keys);
      assert.equal(String(m), c.repr_after_load);
      assert.equal(m.constructor.name, c.class_after_load);
      assert.equal(m.hasUninitializedParams(), c.uninitialized_after_load);
      assert.deepEqual(Object.values(m.stateDict()).map(kindOf), c.kinds_after_load);
      // A strict load that fails writes nothing (multigrad's rule; PyTorch's pre-hook would
      // have materialized and copied the weight): the module stays as it was made.
      const strict = makeLazy(c.cls, c.args, c.options, device);
      const before = Object.values(strict.stateDict()).map(kindOf);
      assert.throws(() => strict.loadStateDict(state), /missing key\(s\) in state dict: "bias"/);
      assert.deepEqual(Object.values(strict.stateDict()).map(kindOf), before);
      assert.ok(strict.hasUninitializedParams());
      return;
    }
    m.loadStateDict(state);
    assert.equal(String(m), c.repr_after_load);
    assert.equal(m.constructor.name, c.class_after_load);
    assert.equal(m.hasUninitializedParams(), c.uninitialized_after_load);
    assert.deepEqual(
      Object.fromEntries(Object.entries(m.stateDict()).map(([k, v]) => [k, [...v.shape]])),
      c.shapes_after_load,
    );
    const y = m.call(fixtureTensor(c.input!, device)) as Tensor;
    await assertTensor(y, c.output as unknown[], { ...tol(device), what: "output" });
    assert.equal(String(m), c.repr_after_forward);
    assert.equal(m.constructor.name, c.class_after_forward);
  });
}

backendTest("lazy norms loaded from a state dict keep num_features 0 and run", (device) => {
  for (const m of [new nn.LazyBatchNorm1d({ device }), new nn.LazyInstanceNorm1d({ device })]) {
    m.loadStateDict({
      weight: tensor([2, 2, 2], { device }),
      bias: zeros([3], { device }),
      running_mean: ones([3], { device }),
      running_var: ones([3], { device }),
      num_batches_tracked: tensor(4, { dtype: "int32", device }),
    });
    const x = tensor([1, 2, 3, 3, 2, 1, 0, 0, 0, 1, 1, 1], { shape: [2, 3, 2], device });
    const y = m.call(x);
    // PyTorch: `BatchNorm1d(0, ...)` / `InstanceNorm1d(0, ...)`, numbers from the loaded tensors.
    assert.match(String(m), /^(Batch|Instance)Norm1d\(0, /);
    assert.deepEqual([...y.shape], [2, 3, 2]);
    assert.throws(() => m.call(ones([2, 4, 2], { device })), /4|shape/);
  }
});

backendTest("device and dtype options are honoured at materialization", (device) => {
  const m = new nn.LazyLinear(3, { device, dtype: "float32" });
  assert.equal(m.weight.device, device);
  m.call(ones([2, 4], { device }));
  assert.equal(m.weight.device, device);
  assert.equal(m.bias!.device, device);
  const bn = new nn.LazyBatchNorm2d({ device });
  bn.call(ones([2, 3, 2, 2], { device }));
  assert.equal(bn.runningMean!.device, device);
  assert.equal(bn.numBatchesTracked!.device, device);
});

Deno.test("float64 from the dtype option, or from module.double() before the first forward", () => {
  const a = new nn.LazyConv1d(2, 2, { dtype: "float64", device: REF });
  a.call(ones([1, 3, 4], { dtype: "float64", device: REF }));
  assert.equal(a.weight.dtype, "float64");
  assert.equal(a.bias!.dtype, "float64");
  const b = new nn.LazyLinear(2, { device: REF }).double();
  assert.equal(b.weight.dtype, "float64");
  b.call(ones([1, 3], { dtype: "float64", device: REF }));
  assert.equal(b.weight.dtype, "float64");
  assert.deepEqual([...b.weight.shape], [2, 3]);
});

/** Equal values, read on cpu. */
async function assertSame(a: Tensor, b: Tensor, what: string) {
  assert.deepEqual([...a.shape], [...b.shape], `${what}: shape`);
  assertClose(await a.data(), await b.data(), { atol: 0, rtol: 0, what });
}

Deno.test("same seed: a lazy module draws what the regular one made at that moment draws", async () => {
  const pairs: [() => Lazy, () => nn.Module, Tensor][] = [
    [() => new nn.LazyLinear(5), () => new nn.Linear(3, 5), ones([2, 3])],
    [
      () => new nn.LazyLinear(4, { bias: false }),
      () => new nn.Linear(7, 4, { bias: false }),
      ones([
        7,
      ]),
    ],
    [
      () => new nn.LazyConv2d(4, 3, { groups: 2 }),
      () => new nn.Conv2d(6, 4, 3, { groups: 2 }),
      ones([1, 6, 5, 5]),
    ],
    [() => new nn.LazyConv1d(3, 2), () => new nn.Conv1d(2, 3, 2), ones([2, 4])],
    [() => new nn.LazyConv3d(2, 2), () => new nn.Conv3d(3, 2, 2), ones([1, 3, 3, 3, 3])],
    [
      () => new nn.LazyConvTranspose2d(4, 3, { groups: 2 }),
      () => new nn.ConvTranspose2d(2, 4, 3, { groups: 2 }),
      ones([1, 2, 3, 3]),
    ],
    [
      () => new nn.LazyConvTranspose1d(3, 2),
      () => new nn.ConvTranspose1d(5, 3, 2),
      ones([1, 5, 3]),
    ],
    [
      () => new nn.LazyConvTranspose3d(2, 2),
      () => new nn.ConvTranspose3d(3, 2, 2),
      ones([1, 3, 2, 2, 2]),
    ],
    [() => new nn.LazyBatchNorm2d(), () => new nn.BatchNorm2d(3), ones([2, 3, 2, 2])],
    [() => new nn.LazyInstanceNorm1d(), () => {
      return new nn.InstanceNorm1d(3, { affine: true, trackRunningStats: true });
    }, ones([2, 3, 2])],
  ];
  for (const [makeLazy, makeRegular, x] of pairs) {
    const lazy = makeLazy();
    manualSeed(1234);
    lazy.call(x);
    // Nothing drawn between the seed and the lazy draws but the lazy draws themselves.
    const next = nn.init.uniform_(zeros([1]));
    manualSeed(1234);
    const regular = makeRegular();
    const nextRegular = nn.init.uniform_(zeros([1]));
    assert.deepEqual(Object.keys(lazy.stateDict()), Object.keys(regular.stateDict()));
    // (The buffers differ: the lazy norm's forward has already updated them.)
    const regularParams = new Map(regular.namedParameters());
    for (const [k, v] of lazy.namedParameters()) {
      await assertSame(v, regularParams.get(k)!, `${lazy.constructor.name} ${k}`);
    }
    await assertSame(next, nextRegular, "the generator's next draw");
    assert.equal(String(lazy), String(regular));
  }
});

Deno.test("an optimizer made before the first forward works after it (same Parameter objects)", async () => {
  const m = new nn.LazyLinear(2);
  const weight = m.weight;
  const opt = new optim.SGD(m.parameters(), { lr: 0.5 });
  opt.step(); // no gradients yet: nothing to do, as PyTorch's
  const y = m.call(ones([3, 4]));
  assert.equal(m.weight, weight);
  const w: unknown = weight;
  assert.ok(w instanceof nn.Parameter && !(w instanceof nn.UninitializedParameter));
  assert.ok(weight.requiresGrad);
  const before = await weight.clone().data();
  y.sum().backward();
  opt.step();
  const after = await weight.data();
  // d(sum)/dW = 3 for every entry: lr 0.5 moves each by -1.5.
  assertClose(after, Array.from(before, (v) => v - 1.5), { atol: 1e-6, what: "stepped weight" });
});

Deno.test("nested lazy modules: reprs before and after, as PyTorch's", () => {
  const net = new nn.Sequential(new nn.LazyLinear(4), new nn.ReLU(), new nn.LazyLinear(1));
  assert.equal(
    String(net),
    "Sequential(\n  (0): LazyLinear(in_features=0, out_features=4, bias=True)\n  (1): ReLU()\n" +
      "  (2): LazyLinear(in_features=0, out_features=1, bias=True)\n)",
  );
  net.call(ones([2, 6]));
  assert.equal(
    String(net),
    "Sequential(\n  (0): Linear(in_features=6, out_features=4, bias=True)\n  (1): ReLU()\n" +
      "  (2): Linear(in_features=4, out_features=1, bias=True)\n)",
  );
});

Deno.test("a user forward pre-hook on a lazy module runs, and the lazy hook goes once done", () => {
  const m = new nn.LazyLinear(2);
  const seen: number[][] = [];
  m.registerForwardPreHook((_m, args) => void seen.push([...(args[0] as Tensor).shape]));
  m.call(ones([1, 3]));
  m.call(ones([2, 3]));
  assert.deepEqual(seen, [[1, 3], [2, 3]]);
  assert.equal(String(m), "Linear(in_features=3, out_features=2, bias=True)");
});

Deno.test("UninitializedParameter and UninitializedBuffer: PyTorch's reprs, size and errors", async () => {
  const e = fixtures.errors;
  const p = new nn.UninitializedParameter();
  const b = new nn.UninitializedBuffer();
  assert.equal(String(p), e.repr_parameter);
  assert.equal(String(b), e.repr_buffer);
  assert.deepEqual([...p.size()], e.size);
  assert.ok(p.requiresGrad && !b.requiresGrad);
  assert.ok(p instanceof nn.Parameter);
  assert.throws(() => p.shape, { message: e.shape!.message });
  assert.throws(() => b.shape, { message: e.shape!.message });
  assert.throws(() => p.ndim, { message: e.shape!.message });
  const use = e.use!.message.replace("<method 'add' of 'torch._C._TensorBase' objects>", "add");
  assert.throws(() => p.add(1), { name: "TypeError", message: use });
  assert.throws(() => p.sum(), /Attempted to use an uninitialized parameter in sum/);
  assert.throws(() => b.mul(2), /torch\.nn\.parameter\.UninitializedBuffer/);
  await assert.rejects(() => p.data(), /Attempted to use an uninitialized parameter in data/);
  assert.throws(() => p.materialize([2, -1]), /shape must be an array of non-negative integers/);
  p.materialize([2, 3], { dtype: "float64" });
  const pv: unknown = p;
  assert.ok(!(pv instanceof nn.UninitializedParameter) && pv instanceof nn.Parameter);
  assert.deepEqual([...p.shape], [2, 3]);
  assert.equal(p.dtype, "float64");
  assert.equal(p.numel(), 6);
  b.materialize([4]);
  assert.equal(b.constructor.name, "Tensor");
  assert.equal((await b.fill_(1).toArray() as number[]).length, 4);
});

Deno.test("lazy modules: PyTorch's errors", () => {
  const e = fixtures.errors;
  const m = new nn.LazyLinear(4);
  assert.throws(() => m.weight.shape, { message: e.shape!.message });
  assert.throws(() => m._replicateWith((t) => t), { message: e.data_parallel!.message });
  const net = new nn.Sequential(new nn.Linear(2, 2), new nn.LazyLinear(3));
  assert.throws(() => net._replicateWith((t) => t), { message: e.data_parallel!.message });
  const initialized = new nn.Linear(2, 4);
  assert.throws(
    () => initialized.loadStateDict(new nn.LazyLinear(4).stateDict()),
    (err: Error) => err.message.includes(e.lazy_into_initialized!.message),
  );
  assert.throws(
    () => new nn.LazyConv2d(4, 3, { groups: 2 }).call(ones([1, 3, 5, 5])),
    (err: Error) =>
      err instanceof RangeError && err.message.includes(e.conv_groups!.message) &&
      err.message.includes("in_channels 3, groups 2"),
  );
  assert.throws(() => new nn.LazyConv2d(4, 3).call(ones([3, 5])), {
    name: "RangeError",
    message: e.conv_rank!.message.replace("torch.Size([3, 5])", "[3, 5]"),
  });
  // A failed first forward leaves the module lazy, to be retried.
  const conv = new nn.LazyConv2d(4, 3);
  assert.throws(() => conv.call(ones([5])));
  assert.ok(conv.hasUninitializedParams());
  assert.equal(String(conv), "LazyConv2d(0, 4, kernel_size=(3, 3), stride=(1, 1))");
  conv.call(ones([2, 5, 5]));
  assert.equal(String(conv), "Conv2d(2, 4, kernel_size=(3, 3), stride=(1, 1))");

  assert.throws(() => new nn.LazyLinear(0), /LazyLinear: out must be a positive integer, got 0/);
  assert.throws(() => new nn.LazyLinear(2.5), /got 2\.5/);
  assert.throws(
    () => new nn.LazyConv2d(3, 3, { groups: 2 }),
    /groups \(2\) must divide outChannels \(3\)/,
  );
  assert.throws(() => new nn.LazyLinear(2).call(tensor(1)), /at least 1 dim, got a 0-d tensor/);
  assert.throws(() => new nn.LazyBatchNorm1d().call(ones([3])), /at least 2 dims.*\[3\]/);
});

Deno.test("stateDict of a lazy module lists the uninitialized tensors themselves", () => {
  const m = new nn.LazyBatchNorm1d();
  const sd = m.stateDict();
  assert.equal(sd.weight, m.weight);
  assert.equal(sd.running_mean, m.runningMean);
  assert.ok(sd.num_batches_tracked !== m.numBatchesTracked); // a detached view, as usual
  const kept = m.stateDict({ keepVars: true });
  assert.equal(kept.num_batches_tracked, m.numBatchesTracked);
});

// The materialization inside a forward, then differentiated: the seed makes every call draw the
// same weights.
check("LazyLinear's first forward (float64)", (x) => {
  manualSeed(7);
  return new nn.LazyLinear(3, { dtype: "float64" }).call(x);
}, [inp([2, 4], 3501)]);
check("LazyConv1d's first forward (float64)", (x) => {
  manualSeed(8);
  return new nn.LazyConv1d(2, 2, { dtype: "float64" }).call(x);
}, [inp([1, 3, 4], 3502)]);
check("LazyBatchNorm1d's first forward (float64)", (x) => {
  return new nn.LazyBatchNorm1d({ dtype: "float64" }).call(x);
}, [inp([4, 3], 3503)]);

backendTest(
  "DataParallel over two devices refuses a lazy module, as PyTorch",
  (device, devices) => {
    const m = new nn.LazyLinear(2, { device });
    const dp = new nn.DataParallel(m, { devices: [devices[0], devices[1] ?? devices[0]] });
    assert.throws(() => dp.call(ones([4, 3], { device })), {
      message: fixtures.errors.data_parallel!.message,
    });
    // After a dry run the same wrapper works.
    m.call(ones([1, 3], { device }));
    assert.deepEqual([...dp.call(ones([4, 3], { device })).shape], [4, 2]);
  },
);

Deno.test("DistributedDataParallel refuses a lazy module, as PyTorch", async () => {
  await distributed.initProcessGroup({ backend: "local", worldSize: 1 });
  try {
    const m = new nn.LazyLinear(2);
    assert.throws(
      () => new distributed.DistributedDataParallel(m),
      /Modules with uninitialized parameters can't be used with `DistributedDataParallel`\. Run a dummy forward pass/,
    );
    m.call(ones([1, 3]));
    const ddp = new distributed.DistributedDataParallel(m);
    assert.deepEqual([...(ddp.call(ones([2, 3])) as Tensor).shape], [2, 2]);
  } finally {
    await distributed.destroyProcessGroup();
  }
});

backendTest("module.to(device) before the first forward: materialized there", (device) => {
  const m = new nn.LazyConvTranspose1d(2, 3, { device: REF }).to(device);
  assert.equal(m.weight.device, device);
  m.call(ones([1, 4, 5], { device }));
  assert.equal(m.weight.device, device);
  assert.deepEqual([...m.weight.shape], [4, 2, 3]);
});

// Found by random cases against PyTorch: its in_channels is set before the groups check.
Deno.test("a conv whose in_channels is not divisible by groups shows them in its repr, as PyTorch", () => {
  const m = new nn.LazyConv3d(6, 1, { groups: 2 });
  assert.throws(() => m.call(ones([2, 3, 2, 2, 2])), /in_channels must be divisible by groups/);
  assert.equal(String(m), "LazyConv3d(3, 6, kernel_size=(1, 1, 1), stride=(1, 1, 1), groups=2)");
  assert.ok(m.hasUninitializedParams());
  m.call(ones([2, 4, 2, 2, 2]));
  assert.equal(String(m), "Conv3d(4, 6, kernel_size=(1, 1, 1), stride=(1, 1, 1), groups=2)");
});

// Found in review: the lazy tensors were materialized (with uninitialized memory) before the
// checks, so a load that threw left a module whose next forward silently used garbage weights.
Deno.test("a loadStateDict that throws leaves a lazy module uninitialized", async () => {
  const m = new nn.LazyLinear(2, { device: REF });
  const good = new nn.Linear(3, 2, { device: REF }).stateDict();
  assert.throws(
    () => m.loadStateDict({ ...good, extra: zeros([1], { device: REF }) }),
    /unexpected key\(s\) in state dict: "extra"/,
  );
  assert.ok(m.hasUninitializedParams(), "weight and bias stay uninitialized");
  assert.equal(String(m), "LazyLinear(in_features=0, out_features=2, bias=True)");
  // The first forward then initializes as usual, and a later good load copies the values.
  m.call(ones([1, 3], { device: REF }));
  assert.deepEqual([...m.weight.shape], [2, 3]);
  const again = new nn.LazyLinear(2, { device: REF });
  again.loadStateDict(good);
  await assertSame(again.weight, good.weight, "weight");
  await assertSame(again.bias!, good.bias, "bias");
  const bn = new nn.LazyBatchNorm1d({ device: REF });
  const stats = new nn.BatchNorm1d(3, { device: REF }).stateDict();
  assert.throws(
    () => bn.loadStateDict({ ...stats, num_batches_tracked: zeros([2], { device: REF }) }),
    /size mismatch for "num_batches_tracked"/,
  );
  assert.ok(bn.hasUninitializedParams());
});

// Found in review: saving an unmaterialized model failed with "uninitialized parameter in data",
// naming neither the call nor the entry. torch.save pickles the UninitializedParameter; a
// safetensors file cannot hold a tensor without a shape, so the save refuses, naming the key.
Deno.test("toSafetensors of an unmaterialized model names the uninitialized entry", async () => {
  const m = new nn.Sequential(new nn.Linear(2, 2, { device: REF }), new nn.LazyLinear(3));
  await assert.rejects(
    () => toSafetensors(m.stateDict()),
    (e: Error) =>
      e instanceof TypeError &&
      /^toSafetensors: the tensor for "1\.weight" is an uninitialized parameter or buffer/.test(
        e.message,
      ) && /dummy forward/.test(e.message),
  );
  await assert.rejects(
    () => toSafetensors({ model: m.stateDict(), epoch: 1 }),
    /^TypeError: toSafetensors: the tensor at "model\.1\.weight" is an uninitialized/,
  );
  // Once materialized it saves, and the file loads back into a fresh lazy model.
  m.call(ones([1, 2], { device: REF }));
  const bytes = await toSafetensors(m.stateDict());
  const fresh = new nn.Sequential(new nn.Linear(2, 2, { device: REF }), new nn.LazyLinear(3));
  fresh.loadStateDict(fromSafetensors(bytes, { device: REF }));
  assert.equal(String(fresh.at(1)), "LazyLinear(in_features=0, out_features=3, bias=True)");
  await assertSame((fresh.at(1) as nn.Linear).weight, (m.at(1) as nn.Linear).weight, "weight");
});

// Found in review: an optimizer's state dict loaded before the model's (its parameters still
// uninitialized) failed with the "load_state_dict ... uninitialized parameter into an initialized
// one" error; PyTorch loads it (its state is cast, not shape-checked) and the step after works.
Deno.test("an optimizer's state dict loads into a lazy model's optimizer before the model's", async () => {
  manualSeed(11);
  const src = new nn.Linear(3, 2, { device: REF });
  const srcOpt = new optim.Adam(src.parameters(), { lr: 0.1 });
  const x = tensor([[1, -2, 0.5], [0.25, 1, -1]], { device: REF });
  src.call(x).pow(2).sum().backward();
  srcOpt.step();
  const lazy = new nn.LazyLinear(2, { device: REF });
  const lazyOpt = new optim.Adam(lazy.parameters(), { lr: 0.1 });
  lazyOpt.loadStateDict(srcOpt.stateDict());
  lazy.loadStateDict(src.stateDict());
  for (const [m, o] of [[src, srcOpt], [lazy, lazyOpt]] as const) {
    o.zeroGrad();
    m.call(x).pow(2).sum().backward();
    o.step();
  }
  await assertSame(lazy.weight, src.weight, "weight after a step");
  await assertSame(lazy.bias!, src.bias!, "bias after a step");
});

// Found in review: both failed with the generic "Can't access the shape" error; PyTorch names them.
Deno.test("weightNorm and spectralNorm refuse a lazy module with PyTorch's errors", () => {
  assert.throws(
    () => nn.utils.weightNorm(new nn.LazyLinear(2)),
    /The module passed to `WeightNorm` can't have uninitialized parameters\. Make sure to run the dummy forward before applying weight normalization/,
  );
  assert.throws(
    () => nn.utils.spectralNorm(new nn.LazyConv2d(2, 3)),
    /The module passed to `SpectralNorm` can't have uninitialized parameters\. Make sure to run the dummy forward before applying spectral normalization/,
  );
  const m = new nn.LazyLinear(2);
  m.call(ones([1, 3]));
  nn.utils.weightNorm(m);
  assert.deepEqual([...m.call(ones([1, 3])).shape], [1, 2]);
});
