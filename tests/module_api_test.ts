/**
 * The Module API beyond discovery, against PyTorch 1.13
 * (tests/fixtures/torch_spectral_norm.json, `module_api`): `namedParameters`
 * and `namedBuffers` with `prefix` and `recurse` (two arguments or an
 * options object), `stateDict({ prefix, keepVars })`, `loadStateDict`'s
 * missing and unexpected keys, `double()` / `float()` / `to(dtype)`,
 * `addModule` / `registerModule`, `getSubmodule` / `getParameter` /
 * `getBuffer`, the methods that return the module, and `extraRepr` in the
 * repr; errors naming the bad name or value.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, ones, optim, type Tensor, tensor, zeros } from "../mod.ts";
import { assertTensor, backendTest } from "./harness.ts";
import fixtures from "./fixtures/torch_spectral_norm.json" with { type: "json" };

const api = fixtures.module_api;

class Block extends nn.Module {
  fc: nn.Linear;
  bn: nn.BatchNorm1d;
  constructor(device?: Device) {
    super();
    this.fc = new nn.Linear(3, 2, { device });
    this.bn = new nn.BatchNorm1d(2, { device });
  }
}

class Net extends nn.Module {
  scale: nn.Parameter;
  block: Block;
  head: nn.Sequential;
  constructor(device?: Device) {
    super();
    this.scale = new nn.Parameter(ones([2], { device }));
    this.block = new Block(device);
    this.head = new nn.Sequential(
      new nn.Linear(2, 2, { device }),
      new nn.ReLU(),
      new nn.Linear(2, 1, { device }),
    );
  }
}

Deno.test("namedParameters and namedBuffers: prefix and recurse as PyTorch's", () => {
  const net = new Net();
  const names = (pairs: [string, unknown][]) => pairs.map(([k]) => k);
  assert.deepEqual(names(net.namedParameters()), api.named_parameters);
  assert.deepEqual(names(net.namedParameters("model")), api.named_parameters_prefix);
  assert.deepEqual(names(net.namedParameters({ prefix: "model" })), api.named_parameters_prefix);
  assert.deepEqual(names(net.namedParameters("", false)), api.named_parameters_no_recurse);
  assert.deepEqual(names(net.namedParameters({ recurse: false })), api.named_parameters_no_recurse);
  assert.deepEqual(
    names(net.block.namedParameters({ prefix: "block", recurse: false })),
    api.block_named_parameters_no_recurse,
  );
  assert.deepEqual(names(net.namedBuffers({ prefix: "m" })), api.named_buffers_prefix);
  assert.deepEqual(names(net.namedBuffers("m")), api.named_buffers_prefix);
  assert.deepEqual(net.namedBuffers({ recurse: false }), []);
  assert.deepEqual(names(net.namedModules()), api.named_modules);
  assert.deepEqual(net.parameters(false), [net.scale]);
  assert.equal(net.toString(), api.repr);
  assert.throws(
    () => net.namedParameters({ prefix: 3 as unknown as string }),
    /namedParameters: prefix must be a string, got number/,
  );
  assert.throws(
    () => net.namedBuffers(null as unknown as string),
    /namedBuffers: expected a prefix string or an options object, got null/,
  );
});

backendTest("stateDict: prefix and keepVars", async (device) => {
  const net = new Net(device);
  const sd = net.stateDict();
  assert.deepEqual(Object.keys(sd), api.state_dict_keys);
  assert.notEqual(sd.scale, net.scale, "detached by default");
  assert.equal(sd.scale.requiresGrad, false);
  assert.equal(sd.scale.storage, net.scale.storage, "sharing the storage");
  const kept = net.stateDict({ keepVars: true });
  assert.deepEqual(Object.keys(kept), api.state_dict_keys);
  assert.equal(kept.scale, net.scale, "the Parameter itself");
  assert.equal(kept["block.fc.weight"], net.block.fc.weight);
  assert.equal(kept["block.fc.weight"].requiresGrad, true);
  assert.equal(kept["block.bn.running_mean"], net.block.bn.runningMean);
  const prefixed = net.stateDict({ prefix: "model." });
  assert.deepEqual(Object.keys(prefixed), api.state_dict_keys.map((k) => `model.${k}`));
  await assertTensor(prefixed["model.scale"], [1, 1]);
  assert.throws(
    () => net.stateDict({ prefix: 1 as unknown as string }),
    /stateDict: prefix must be a string, got number/,
  );
});

backendTest("loadStateDict: missing and unexpected keys as PyTorch's", async (device) => {
  const source = new Net(device);
  const partial: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(source.stateDict())) {
    if (!k.startsWith("head.2")) partial[k] = v;
  }
  partial["extra.weight"] = zeros([1], { device });
  const target = new Net(device);
  const result = target.loadStateDict(partial, { strict: false });
  assert.deepEqual(result, { missingKeys: api.missing_keys, unexpectedKeys: api.unexpected_keys });
  await assertTensor(target.block.fc.weight, Array.from(await source.block.fc.weight.data()));
  assert.throws(
    () => new Net(device).loadStateDict(partial),
    /missing key\(s\) in state dict: "head.2.weight", "head.2.bias"[\s\S]*unexpected key\(s\) in state dict: "extra.weight"/,
  );
  assert.deepEqual(
    new Net(device).loadStateDict(source.stateDict()),
    { missingKeys: [], unexpectedKeys: [] },
  );
});

Deno.test("double() and float(): floating parameters, buffers and gradients, in place", async () => {
  const net = new Net();
  const weight = net.block.fc.weight;
  const opt = new optim.SGD(net.parameters(), { lr: 0.5 });
  const x = tensor([1, 2, 3, -1, 0, 2], { shape: [2, 3] });
  const run = (input: Tensor) =>
    net.head.forward(net.block.bn.forward(net.block.fc.forward(input)));
  run(x).sum().backward();
  const before = Array.from(await weight.data());
  const grad = Array.from(await weight.grad!.data());
  assert.equal(net.double(), net);
  assert.equal(net.block.fc.weight, weight, "the same Parameter object");
  const dtypes = (m: nn.Module) =>
    Object.fromEntries(Object.entries(m.stateDict()).map(([k, t]) => [k, t.dtype]));
  // num_batches_tracked is int32 here, int64 in PyTorch.
  const expected = (d: Record<string, string>) =>
    Object.fromEntries(Object.entries(d).map(([k, t]) => [k, t === "int64" ? "int32" : t]));
  assert.deepEqual(dtypes(net), expected(api.double_dtypes));
  assert.equal(weight.grad!.dtype, "float64", "the gradient is cast too");
  assert.equal(weight.requiresGrad, true);
  await assertTensor(weight, before, { atol: 0, rtol: 0, what: "values kept" });
  await assertTensor(weight.grad!, grad, { atol: 0, rtol: 0, what: "gradient kept" });
  opt.step(); // the optimizer made before still updates the same objects
  await assertTensor(weight, before.map((w, i) => w - 0.5 * grad[i]), { what: "SGD in float64" });
  const y = run(x.to("float64"));
  assert.equal(y.dtype, "float64");
  assert.equal(net.float(), net);
  assert.deepEqual(dtypes(net), expected(api.float_dtypes));
  assert.equal(net.to("float64"), net);
  assert.equal(weight.dtype, "float64");
  net.to("float32");
  assert.equal(weight.dtype, "float32");
  assert.throws(
    () => net.to("int32"),
    /Net.to only accepts floating point dtypes, but got dtype int32/,
  );
});

backendTest("double() on a device without float64 leaves every parameter as it was", (device) => {
  if (device.backend === "cpu") return;
  // The cpu layer comes first: it must not be cast before the other device refuses float64.
  const net = new nn.Sequential(new nn.Linear(2, 2), new nn.Linear(2, 2, { device }));
  const first = net.parameters()[0];
  first.grad = zeros([2, 2]);
  assert.throws(() => net.double(), /float64 is not supported/);
  assert.deepEqual(net.parameters().map((p) => p.dtype), Array(4).fill("float32"));
  assert.equal(first.grad.dtype, "float32");
});

backendTest("addModule and registerModule: children, state dict and repr", (device) => {
  const m = new nn.Module();
  const fc = new nn.Linear(2, 3, { device });
  assert.equal(m.addModule("fc", fc), fc);
  assert.equal(m.registerModule("act", new nn.ReLU()) instanceof nn.ReLU, true);
  assert.deepEqual(m.namedChildren().map(([k]) => k), ["fc", "act"]);
  assert.deepEqual(Object.keys(m.stateDict()), ["fc.weight", "fc.bias"]);
  assert.equal(
    m.toString(),
    "Module(\n  (fc): Linear(in_features=2, out_features=3, bias=True)\n  (act): ReLU()\n)",
  );
  // Replacing a submodule, and registering an absent one, as PyTorch allows.
  m.addModule("act", new nn.Tanh());
  assert.equal(m.addModule("skip", null), null);
  assert.deepEqual(m.namedChildren().map(([k, c]) => [k, c.constructor.name]), [
    ["fc", "Linear"],
    ["act", "Tanh"],
  ]);
  assert.equal((m as unknown as Record<string, unknown>).skip, null);
  // Integer-like names keep the order they were added in (Object.keys would list them first).
  const seq = new nn.Module();
  seq.addModule("first", new nn.ReLU());
  seq.addModule("1", new nn.Tanh());
  seq.addModule("0", new nn.Sigmoid());
  assert.deepEqual(seq.namedChildren().map(([k]) => k), ["first", "1", "0"]);
  assert.equal(seq.getSubmodule("0") instanceof nn.Sigmoid, true);
});

Deno.test("addModule: errors name the taken or bad name", () => {
  const lin = new nn.Linear(2, 2);
  assert.throws(
    () => lin.addModule("weight", new nn.ReLU()),
    /addModule\("weight"\): attribute "weight" already exists in Linear/,
  );
  assert.throws(
    () => new nn.BatchNorm1d(2).addModule("running_mean", new nn.ReLU()),
    /attribute "running_mean" already exists in BatchNorm1d \(a buffer\)/,
  );
  assert.throws(
    () => lin.addModule("forward", new nn.ReLU()),
    /attribute "forward" already exists/,
  );
  assert.throws(() => lin.addModule("inFeatures", new nn.ReLU()), /"inFeatures" already exists/);
  assert.throws(() => lin.addModule("a.b", new nn.ReLU()), /without "\.", got "a.b"/);
  assert.throws(() => lin.addModule("", new nn.ReLU()), /non-empty string without "\.", got ""/);
  assert.throws(
    () => lin.addModule("x", 3 as unknown as nn.Module),
    /addModule\("x"\): expected an nn.Module or null, got a number/,
  );
  assert.throws(
    () => lin.addModule("x", zeros([2]) as unknown as nn.Module),
    /got a Tensor of shape \[2\]/,
  );
});

backendTest("getSubmodule, getParameter and getBuffer by dotted path", (device) => {
  const net = new Net(device);
  assert.equal(net.getSubmodule(""), net);
  assert.equal(net.getSubmodule("block.fc"), net.block.fc);
  assert.equal(net.getSubmodule("head.2"), net.head.at(2));
  assert.equal(net.getParameter("scale"), net.scale);
  assert.equal(net.getParameter("block.fc.weight"), net.block.fc.weight);
  assert.equal(net.getParameter("head.0.bias"), (net.head.at(0) as nn.Linear).bias);
  assert.equal(net.getBuffer("block.bn.running_mean"), net.block.bn.runningMean);
  assert.equal(net.getBuffer("block.bn.runningVar"), net.block.bn.runningVar, "field name too");
  assert.equal(net.getBuffer("block.bn.num_batches_tracked"), net.block.bn.numBatchesTracked);
  for (const [name] of net.namedParameters()) {
    assert.equal(net.getParameter(name), net.stateDict({ keepVars: true })[name]);
  }
});

Deno.test("getSubmodule, getParameter and getBuffer: errors name the missing step", () => {
  const net = new Net();
  assert.throws(() => net.getSubmodule("head.3"), /Sequential has no attribute "3"/);
  assert.throws(() => net.getSubmodule("block.conv"), /Block has no attribute "conv"/);
  assert.throws(() => net.getSubmodule("block.fc.weight"), /"weight" of Linear is not a nn.Module/);
  assert.throws(() => net.getSubmodule("block..fc"), /Block has no attribute ""/);
  assert.throws(() => net.getParameter("block.fc.foo"), /Linear has no attribute "foo"/);
  assert.throws(
    () => net.getParameter("block.fc.inFeatures"),
    /"inFeatures" of Linear is not a nn.Parameter/,
  );
  assert.throws(() => net.getParameter("nope.weight"), /Net has no attribute "nope"/);
  assert.throws(
    () => net.getBuffer("block.bn.weight"),
    /"weight" of BatchNorm1d is not a buffer/,
  );
  assert.throws(() => net.getBuffer("block.bn.nope"), /BatchNorm1d has no attribute "nope"/);
  assert.throws(
    () => net.getSubmodule(3 as unknown as string),
    /getSubmodule: target must be a string, got number/,
  );
});

Deno.test("train, eval, requiresGrad_, apply and to return the module; extraRepr prints", () => {
  const net = new Net();
  assert.equal(net.eval(), net);
  assert.equal(net.block.bn.training, false);
  assert.equal(net.train(), net);
  assert.equal(net.head.at(1).training, true);
  assert.equal(net.train(false), net);
  assert.equal(net.block.fc.training, false);
  assert.equal(net.requiresGrad_(false), net);
  assert.ok(net.parameters().every((p) => !p.requiresGrad));
  assert.equal(net.requiresGrad_(), net);
  assert.ok(net.parameters().every((p) => p.requiresGrad));
  assert.equal(net.apply(() => {}), net);
  class Scaled extends nn.Module {
    factor = 2;
    inner = new nn.ReLU();
    override extraRepr(): string {
      return `factor=${this.factor}`;
    }
  }
  assert.equal(new Scaled().toString(), "Scaled(\n  factor=2\n  (inner): ReLU()\n)");
  class Leaf extends nn.Module {
    override extraRepr(): string {
      return "k=3";
    }
  }
  assert.equal(new Leaf().toString(), "Leaf(k=3)");
  const m = new nn.Module();
  const p = m.registerParameter("w", new nn.Parameter(zeros([2])));
  assert.deepEqual(Object.keys(m.stateDict()), ["w"]);
  assert.equal(m.getParameter("w"), p);
});
