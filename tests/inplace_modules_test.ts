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
    (inplace) => new nn.CELU({ alpha: 0.5, inplace }),
    (inplace) => new nn.SELU({ inplace }),
    (inplace) => new nn.RReLU({ inplace }),
    (inplace) => new nn.Threshold(0.1, -1, { inplace }),
    (inplace) => new nn.AlphaDropout(0.2, { inplace }),
    (inplace) => new nn.FeatureAlphaDropout(0.2, { inplace }),
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

backendTest("channel dropouts with inplace train as out of place", async (d) => {
  const drops: [(inplace: boolean) => nn.Module, number[]][] = [
    [(inplace) => new nn.Dropout1d(0.4, { inplace }), [2, 4, 3]],
    [(inplace) => new nn.Dropout2d(0.4, { inplace }), [2, 4, 2, 3]],
    [(inplace) => new nn.Dropout3d(0.4, { inplace }), [2, 4, 2, 2, 3]],
  ];
  for (const [drop, shape] of drops) {
    const make = (inplace: boolean) =>
      new nn.Sequential(new nn.Linear(3, 3, { device: d }), drop(inplace));
    assertClose(await train(d, make, shape, true), await train(d, make, shape, false), {
      atol: 1e-5,
    });
  }
});

backendTest(
  "functional { inplace: true }: the input overwritten, gradients as out of place",
  async (d) => {
    const vals = [-2, -0.5, 0.25, 0.5, 3];
    const forms: [(t: Tensor, inplace: boolean) => Tensor][] = [
      [(t, inplace) => F.relu(t, { inplace })],
      [(t, inplace) => F.leakyRelu(t, { negativeSlope: 0.2, inplace })],
      [(t, inplace) => F.elu(t, { alpha: 0.3, inplace })],
      [(t, inplace) => F.hardtanh(t, { minVal: -1, maxVal: 1, inplace })],
      [(t, inplace) => F.celu(t, { alpha: 2, inplace })],
      [(t, inplace) => F.selu(t, { inplace })],
      [(t, inplace) => F.silu(t, { inplace })],
      [(t, inplace) => F.relu6(t, { inplace })],
      [(t, inplace) => F.hardsigmoid(t, { inplace })],
      [(t, inplace) => F.hardswish(t, { inplace })],
      [(t, inplace) => F.mish(t, { inplace })],
      [(t, inplace) => F.threshold(t, 0.3, -1, { inplace })],
      [(t, inplace) => F.rrelu(t, { training: false, inplace })],
      [(t, inplace) => F.dropout(t, { p: 0.4, inplace })],
      [(t, inplace) => F.alphaDropout(t, { p: 0.4, training: true, inplace })],
    ];
    for (const [f] of forms) {
      const run = async (inplace: boolean) => {
        mg.manualSeed(5);
        const leaf = on(d, [5], vals).requiresGrad_();
        const h = leaf.mul(2);
        const r = f(h, inplace);
        assert.equal(r === h, inplace);
        r.mul(r).sum().backward();
        return [...Array.from(await r.data()), ...Array.from(await leaf.grad!.data())];
      };
      assertClose(await run(true), await run(false), { atol: 1e-5 });
    }
    // The positional form still works; eval mode is the identity, in place or not.
    const x = on(d, [5], vals);
    assert.equal(F.dropout(x, { p: 0.5, training: false, inplace: true }), x);
    assert.equal(F.dropout(x, 0.5, false), x);
  },
);

Deno.test("inplace modules print as PyTorch 1.13", () => {
  // torch.nn's reprs with inplace=True (Hardswish and Hardsigmoid print no options).
  const cases: [nn.Module, string][] = [
    [new nn.ReLU({ inplace: true }), "ReLU(inplace=True)"],
    [new nn.ReLU(), "ReLU()"],
    [new nn.ReLU6({ inplace: true }), "ReLU6(inplace=True)"],
    [new nn.LeakyReLU({ inplace: true }), "LeakyReLU(negative_slope=0.01, inplace=True)"],
    [new nn.ELU({ inplace: true }), "ELU(alpha=1.0, inplace=True)"],
    [new nn.CELU({ inplace: true }), "CELU(alpha=1.0, inplace=True)"],
    [new nn.SELU({ inplace: true }), "SELU(inplace=True)"],
    [new nn.Hardtanh({ inplace: true }), "Hardtanh(min_val=-1.0, max_val=1.0, inplace=True)"],
    [new nn.Hardswish({ inplace: true }), "Hardswish()"],
    [new nn.Hardsigmoid({ inplace: true }), "Hardsigmoid()"],
    [new nn.SiLU({ inplace: true }), "SiLU(inplace=True)"],
    [new nn.Mish({ inplace: true }), "Mish(inplace=True)"],
    [new nn.RReLU({ inplace: true }), "RReLU(lower=0.125, upper=0.3333333333333333, inplace=True)"],
    [
      new nn.Threshold(0.1, 0, { inplace: true }),
      "Threshold(threshold=0.1, value=0, inplace=True)",
    ],
    [new nn.Dropout(0.5, { inplace: true }), "Dropout(p=0.5, inplace=True)"],
    [new nn.Dropout1d(0.5, { inplace: true }), "Dropout1d(p=0.5, inplace=True)"],
    [new nn.Dropout2d(0.5, { inplace: true }), "Dropout2d(p=0.5, inplace=True)"],
    [new nn.Dropout3d(0.5, { inplace: true }), "Dropout3d(p=0.5, inplace=True)"],
    [new nn.AlphaDropout(0.5, { inplace: true }), "AlphaDropout(p=0.5, inplace=True)"],
    [
      new nn.FeatureAlphaDropout(0.5, { inplace: true }),
      "FeatureAlphaDropout(p=0.5, inplace=True)",
    ],
  ];
  for (const [m, expected] of cases) assert.equal(m.toString(), expected);
});
