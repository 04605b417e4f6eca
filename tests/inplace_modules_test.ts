/**
 * PyTorch's `inplace=True` on activation modules and Dropout, and the
 * functional in-place forms (`F.relu_`, `F.elu_`, ...): the same values and
 * gradients as out of place, training included, and the leaf refusal.
 * @module
 */

import assert from "node:assert/strict";
import * as mg from "../mod.ts";
import { type Device, nn, type Tensor } from "../mod.ts";
import { assertClose, backendTest, floats, on } from "./harness.ts";

const F = nn.functional;

/** Three SGD steps of `make(inplace)` on fixed data: the losses, then every parameter's values. */
async function train(
  d: Device,
  make: (inplace: boolean) => nn.Module,
  shape: number[],
  inplace: boolean,
): Promise<number[]> {
  mg.manualSeed(3);
  const model = make(inplace);
  const opt = new mg.optim.SGD(model.parameters(), { lr: 0.1 });
  const x = on(d, shape, floats(shape, 11));
  const out: number[] = [];
  for (let step = 0; step < 3; step++) {
    opt.zeroGrad();
    const y = model.forward(x.mul(1)) as Tensor;
    const loss = y.mul(y).mean();
    loss.backward();
    out.push((await loss.data())[0]);
    for (const p of model.parameters()) out.push(...Array.from(await p.grad!.data()));
    opt.step();
  }
  for (const p of model.parameters()) out.push(...Array.from(await p.data()));
  return out;
}

backendTest("Conv2d -> BatchNorm2d -> ReLU(inplace) trains as out of place", async (d) => {
  const make = (inplace: boolean) =>
    new nn.Sequential(
      new nn.Conv2d(2, 3, 3, { padding: 1, device: d }),
      new nn.BatchNorm2d(3, { device: d }),
      new nn.ReLU({ inplace }),
      new nn.Conv2d(3, 2, 1, { device: d }),
    );
  const a = await train(d, make, [2, 2, 4, 4], true);
  assertClose(a, await train(d, make, [2, 2, 4, 4], false), { atol: 1e-5 });
});

backendTest("Linear -> ReLU(inplace) MLP, and every inplace module, as out of place", async (d) => {
  const mlp = (inplace: boolean) =>
    new nn.Sequential(
      new nn.Linear(4, 8, { device: d }),
      new nn.ReLU({ inplace }),
      new nn.Linear(8, 8, { device: d }),
      new nn.LeakyReLU({ negativeSlope: 0.1, inplace }),
      new nn.Dropout(0.3, { inplace }),
      new nn.Linear(8, 2, { device: d }),
    );
  assertClose(await train(d, mlp, [5, 4], true), await train(d, mlp, [5, 4], false), {
    atol: 1e-5,
  });
  const acts: ((inplace: boolean) => nn.Module)[] = [
    (inplace) => new nn.ELU({ alpha: 0.5, inplace }),
    (inplace) => new nn.Hardtanh({ minVal: -0.5, maxVal: 0.5, inplace }),
    (inplace) => new nn.ReLU6({ inplace }),
    (inplace) => new nn.SiLU({ inplace }),
    (inplace) => new nn.Hardswish({ inplace }),
    (inplace) => new nn.Hardsigmoid({ inplace }),
    (inplace) => new nn.Mish({ inplace }),
  ];
  for (const act of acts) {
    const make = (inplace: boolean) =>
      new nn.Sequential(new nn.Linear(4, 6, { device: d }), act(inplace));
    assertClose(await train(d, make, [5, 4], true), await train(d, make, [5, 4], false), {
      atol: 1e-5,
    });
  }
});

backendTest("inplace overwrites the input; a leaf that requires grad is refused", async (d) => {
  const vals = [-2, -0.5, 0, 0.5, 3];
  const x = on(d, [5], vals);
  const y = new nn.ReLU({ inplace: true }).forward(x);
  assert.equal(y, x);
  assertClose(Array.from(await x.data()), [0, 0, 0, 0.5, 3]);
  const leaf = on(d, [5], vals).requiresGrad_();
  assert.throws(() => new nn.ReLU({ inplace: true }).forward(leaf), /leaf/);
  assert.equal(new nn.Dropout(0.5, { inplace: true }).extraRepr(), "p=0.5, inplace=True");
});

backendTest("F.relu_, elu_, leakyRelu_, hardtanh_, celu_, selu_, threshold_, rrelu_", async (d) => {
  const vals = [-2, -0.5, 0.25, 0.5, 3];
  const cases: [(t: Tensor) => Tensor, (t: Tensor) => Tensor][] = [
    [F.relu_, (t) => F.relu(t)],
    [(t) => F.elu_(t, { alpha: 0.7 }), (t) => F.elu(t, { alpha: 0.7 })],
    [(t) => F.leakyRelu_(t, { negativeSlope: 0.2 }), (t) => F.leakyRelu(t, { negativeSlope: 0.2 })],
    [
      (t) => F.hardtanh_(t, { minVal: -1, maxVal: 2 }),
      (t) => F.hardtanh(t, { minVal: -1, maxVal: 2 }),
    ],
    [(t) => F.celu_(t, { alpha: 2 }), (t) => F.celu(t, { alpha: 2 })],
    [F.selu_, F.selu],
    [(t) => F.threshold_(t, 0.3, -1), (t) => F.threshold(t, 0.3, -1)],
    [(t) => F.rrelu_(t, { training: false }), (t) => F.rrelu(t, { training: false })],
  ];
  for (const [inPlace, outOfPlace] of cases) {
    const leaf1 = on(d, [5], vals).requiresGrad_();
    const leaf2 = on(d, [5], vals).requiresGrad_();
    const h = leaf1.mul(2);
    const r = inPlace(h);
    assert.equal(r, h);
    const ref = outOfPlace(leaf2.mul(2));
    assertClose(Array.from(await r.data()), Array.from(await ref.data()), { atol: 1e-6 });
    r.mul(r).sum().backward();
    ref.mul(ref).sum().backward();
    assertClose(Array.from(await leaf1.grad!.data()), Array.from(await leaf2.grad!.data()), {
      atol: 1e-5,
    });
  }
});
