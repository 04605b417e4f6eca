/**
 * What assigning to a module's fields does, as PyTorch's `__setattr__` and `train()`: a buffer
 * reassigned in `forward` (the running-average idiom) stays module state through Sequential's scope,
 * `backward()` and `tidy`; a parameter field refuses a plain tensor; `train()` goes through each
 * child's own `train`; a ModuleDict keeps its keys' order; `registerBuffer` refuses a name that is
 * taken; pooling layers print as PyTorch's.
 * @module
 */

import assert from "node:assert/strict";
import { nn, noGrad, optim, type Tensor, tensor, tidy, zeros } from "../mod.ts";

/** Tracks the mean of its inputs by reassigning its buffer, as PyTorch modules often do. */
class Tracker extends nn.Module {
  mean: Tensor;
  constructor() {
    super();
    this.mean = this.registerBuffer("mean", zeros([2]));
  }
  override forward(x: Tensor): Tensor {
    noGrad(() => {
      this.mean = this.mean.mul(0.9).add(x.mean(0).mul(0.1));
    });
    return x;
  }
}

Deno.test("a buffer reassigned in forward survives Sequential's scope and backward", async () => {
  const tracker = new Tracker();
  const net = new nn.Sequential(new nn.Linear(2, 2), tracker);
  const opt = new optim.SGD(net.parameters(), { lr: 0.1 });
  const x = tensor([[1, 2], [3, 4]]);
  for (let step = 0; step < 3; step++) {
    opt.zeroGrad();
    net.forward(x).square().sum().backward();
    opt.step();
  }
  const mean = await tracker.mean.data();
  assert.equal(mean.length, 2);
  assert.ok(Array.from(mean).every(Number.isFinite));
  assert.deepEqual(await net.stateDict()["1.mean"].data(), mean);
});

Deno.test("a buffer reassigned inside tidy is kept as module state", async () => {
  const tracker = new Tracker();
  tidy(() => tracker.forward(tensor([[1, 1], [3, 3]])));
  tidy(() => tracker.forward(tensor([[1, 1], [3, 3]])));
  assert.deepEqual(Array.from(await tracker.mean.data()).map((v) => +v.toFixed(6)), [0.38, 0.38]);
  tracker.to("cpu:1");
  assert.equal(String(tracker.mean.device), "cpu:1");
  assert.throws(
    () => (tracker as unknown as { mean: unknown }).mean = 3,
    /Tracker: cannot assign a number as buffer "mean" \(Tensor or null expected\)/,
  );
});

Deno.test("a parameter field refuses a plain tensor; a Parameter or null it takes", () => {
  const lin = new nn.Linear(2, 1);
  assert.throws(
    () => (lin as unknown as { weight: unknown }).weight = tensor([[0.5, -0.5]]),
    /Linear: cannot assign a Tensor of shape \[1, 2\] as parameter "weight" \(nn.Parameter or null expected/,
  );
  assert.deepEqual(lin.namedParameters().map(([n]) => n), ["weight", "bias"]);
  const replacement = new nn.Parameter(tensor([[0.5, -0.5]]));
  lin.weight = replacement;
  assert.equal(lin.parameters()[0], replacement);
  lin.bias = null;
  assert.deepEqual(Object.keys(lin.stateDict()), ["weight"]);

  // A user's module: its plain-field parameters are checked from their first listing on.
  class Scale extends nn.Module {
    s = new nn.Parameter(tensor([2]));
  }
  const scale = new Scale();
  assert.equal(scale.parameters().length, 1);
  assert.throws(() => (scale as unknown as { s: unknown }).s = tensor([3]), /parameter "s"/);
  assert.throws(
    () => scale.registerParameter("t", tensor([1]) as unknown as nn.Parameter),
    /registerParameter\("t"\): expected an nn.Parameter or null, got a Tensor of shape \[1\]/,
  );
  assert.equal(scale.registerParameter("t", new nn.Parameter(tensor([1]))), scale.parameters()[1]);
  assert.deepEqual(scale.namedParameters().map(([n]) => n), ["s", "t"]);
});

Deno.test("replicas of guarded modules hold their own values (DataParallel's replicate)", () => {
  const lin = new nn.Linear(2, 2);
  lin.parameters();
  const replica = lin._replicateWith((t) => t.clone());
  assert.notEqual(replica.weight, lin.weight);
  replica.weight = new nn.Parameter(tensor([[1, 0], [0, 1]]));
  assert.notEqual(lin.weight, replica.weight, "assigning to the replica leaves the original");
});

Deno.test("train() and eval() go through each child's own train(), as PyTorch", () => {
  class FrozenNorm extends nn.Module {
    bn = new nn.BatchNorm1d(2);
    override train(mode = true): this {
      super.train(mode);
      this.bn.eval(); // fine-tuning: the statistics stay as they are
      return this;
    }
    override forward(x: Tensor): Tensor {
      return this.bn.forward(x);
    }
  }
  const block = new FrozenNorm();
  const net = new nn.Sequential(new nn.Linear(2, 2), block);
  net.train();
  assert.equal(block.training, true);
  assert.equal(block.bn.training, false);
  net.eval();
  net.train(true);
  assert.equal(block.bn.training, false);
});

Deno.test("ModuleDict keeps the order keys were added in, integer-like ones too", () => {
  const heads = new nn.ModuleDict();
  for (const key of ["cat", "7", "dog", "3"]) heads.set(key, new nn.Linear(1, 1, { bias: false }));
  assert.deepEqual(heads.keys(), ["cat", "7", "dog", "3"]);
  assert.deepEqual(Object.keys(heads.stateDict()), [
    "cat.weight",
    "7.weight",
    "dog.weight",
    "3.weight",
  ]);
  const pairs = new nn.ModuleDict([["b", new nn.ReLU()], ["10", new nn.ReLU()], [
    "2",
    new nn.ReLU(),
  ]]);
  assert.deepEqual(pairs.keys(), ["b", "10", "2"]);
  assert.deepEqual(pairs.namedModules().map(([n]) => n), ["", "b", "10", "2"]);
  heads.set("7", new nn.ReLU());
  assert.deepEqual(heads.keys(), ["cat", "7", "dog", "3"], "replacing keeps the place");
});

Deno.test("registerBuffer refuses a name a parameter, a submodule or another buffer holds", () => {
  const lin = new nn.Linear(2, 2);
  assert.throws(
    () => lin.registerBuffer("weight", zeros([3]), { field: "weightBuf" }),
    /registerBuffer\("weight"\): "weight" already holds a Parameter/,
  );
  class Net extends nn.Module {
    fc = new nn.Linear(1, 1);
  }
  assert.throws(() => new Net().registerBuffer("fc", zeros([1])), /"fc" already holds a Linear/);
  const m = new nn.Module();
  m.registerBuffer("stat", zeros([1]));
  assert.throws(
    () => m.registerBuffer("stat", zeros([1]), { field: "other" }),
    /a buffer of that name is already held in field "stat"/,
  );
});

Deno.test("pooling layers print as PyTorch's", () => {
  assert.equal(
    String(new nn.MaxPool2d([2, 3])),
    "MaxPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0, dilation=1, ceil_mode=False)",
  );
  assert.equal(
    String(new nn.MaxPool2d(3, { stride: [1, 2], padding: 1 })),
    "MaxPool2d(kernel_size=3, stride=(1, 2), padding=1, dilation=1, ceil_mode=False)",
  );
  assert.equal(String(new nn.AvgPool2d(2)), "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  assert.equal(
    String(new nn.MaxPool1d(3)),
    "MaxPool1d(kernel_size=3, stride=3, padding=0, dilation=1, ceil_mode=False)",
  );
  assert.equal(
    String(new nn.AvgPool1d(3)),
    "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))",
  );
});
