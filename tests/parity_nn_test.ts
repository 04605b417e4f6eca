/**
 * nn pieces that ported PyTorch programs reached for: `ModuleDict` (keys
 * in state dicts as PyTorch's, errors naming the keys) and
 * `Module.requiresGrad_` (freezing part of a model for fine-tuning).
 * @module
 */

import assert from "node:assert/strict";
import { nn, optim, randn } from "../mod.ts";

Deno.test("ModuleDict: fields by key, PyTorch's state-dict names, order, iteration, errors", () => {
  const heads = new nn.ModuleDict({ cls: new nn.Linear(4, 3), box: new nn.Linear(4, 2) });
  heads.set("aux", new nn.Linear(4, 1));
  assert.deepEqual(heads.keys(), ["cls", "box", "aux"]);
  assert.deepEqual(Object.keys(heads.stateDict()), [
    "cls.weight",
    "cls.bias",
    "box.weight",
    "box.bias",
    "aux.weight",
    "aux.bias",
  ]);
  assert.equal(heads.parameters().length, 6);
  assert.deepEqual([...heads].map(([k, m]) => [k, (m as nn.Linear).outFeatures]), [
    ["cls", 3],
    ["box", 2],
    ["aux", 1],
  ]);
  assert.ok(heads.has("box") && !heads.has("forward") && !heads.has("nope"));
  assert.equal((heads.get("box") as nn.Linear).outFeatures, 2);
  // Same module under two keys: both keys, as PyTorch's ModuleDict.
  const shared = new nn.Linear(2, 2);
  assert.deepEqual(new nn.ModuleDict([["a", shared], ["b", shared]]).keys(), ["a", "b"]);
  assert.throws(
    () => heads.get("nope"),
    /ModuleDict.get: no module "nope" \(keys: cls, box, aux\)/,
  );
  for (const bad of ["training", "forward", "a.b", ""]) {
    assert.throws(() => heads.set(bad, new nn.ReLU()), /ModuleDict: key .* is not usable/);
  }
  assert.throws(
    () => new nn.ModuleDict({ x: 3 as unknown as nn.Module }),
    /ModuleDict: argument 0 is not an nn.Module \(got number\)/,
  );
  // A state dict round trip through another instance.
  const copy = new nn.ModuleDict({ cls: new nn.Linear(4, 3), box: new nn.Linear(4, 2) });
  copy.set("aux", new nn.Linear(4, 1)).loadStateDict(heads.stateDict());
});

Deno.test("Module.requiresGrad_(false) freezes a part of a model: no gradient, the optimizer skips it", async () => {
  const model = new nn.Sequential(new nn.Linear(3, 4), new nn.ReLU(), new nn.Linear(4, 2));
  const backbone = model.at(0) as nn.Linear;
  assert.equal(backbone.requiresGrad_(false), backbone);
  assert.deepEqual(model.parameters().map((p) => p.requiresGrad), [false, false, true, true]);
  const before = await backbone.weight.toArray();
  const opt = new optim.SGD(model.parameters(), { lr: 0.5 });
  model.forward(randn([5, 3])).sum().backward();
  assert.equal(backbone.weight.grad, null);
  assert.notEqual((model.at(2) as nn.Linear).weight.grad, null);
  opt.step();
  assert.deepEqual(await backbone.weight.toArray(), before);
  model.requiresGrad_();
  assert.ok(model.parameters().every((p) => p.requiresGrad));
});
