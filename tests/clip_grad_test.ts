/**
 * nn.utils.clipGradNorm_ and clipGradValue_ against PyTorch 1.13
 * (tests/fixtures/torch_toolkit.json `clip_grad`): the total norm and the
 * clipped gradients for the 2-, 1-, ∞-, 3- and 0.5-norms, clipping and not,
 * on every backend, with parameters on one device and spread over several.
 */

import assert from "node:assert/strict";
import { type Device, nn, type Tensor, tensor, zeros } from "../mod.ts";
import { assertClose, BACKENDS, backendTest } from "./harness.ts";
import fixtures from "./fixtures/torch_toolkit.json" with { type: "json" };

type Nested = number | Nested[];
const clip = fixtures.clip_grad;

/** The fixture's parameters with their gradients, parameter i on `devices[i % n]`, plus one without a gradient. */
function params(devices: Device[]): nn.Parameter[] {
  const ps = clip.shapes.map((shape, i) => {
    const device = devices[i % devices.length];
    const p = new nn.Parameter(zeros(shape, { device }));
    p.grad = tensor(clip.grads[i] as number[], { device });
    return p;
  });
  ps.push(new nn.Parameter(zeros([2], { device: devices[0] })));
  return ps;
}

async function checkNorms(devices: Device[], tolerance: number) {
  for (const c of clip.norm) {
    const ps = params(devices);
    const normType = c.norm_type === "inf" ? Infinity : c.norm_type as number;
    const total = nn.utils.clipGradNorm_(ps, c.max_norm, { normType });
    const what = `p=${c.norm_type} max=${c.max_norm}`;
    assert.deepEqual([...total.shape], [], what);
    assert.equal(total.device, devices[0], `${what}: norm on the first gradient's device`);
    assertClose(await total.item(), c.total_norm, { atol: 0, rtol: tolerance, what });
    for (let i = 0; i < clip.shapes.length; i++) {
      assert.equal(ps[i].grad!.device, devices[i % devices.length]);
      assertClose(await ps[i].grad!.data(), (c.grads[i] as Nested[]).flat(3) as number[], {
        atol: 1e-7,
        rtol: tolerance,
        what: `${what} grad ${i}`,
      });
    }
    assert.equal(ps.at(-1)!.grad, null, "a parameter without a gradient stays so");
  }
}

backendTest(
  "clipGradNorm_ equals PyTorch for every norm type",
  (device) => checkNorms([device], 2e-6),
);

backendTest(
  "clipGradNorm_ with parameters on two devices",
  (_, devices) => checkNorms(devices, 2e-6),
);

if (BACKENDS.size > 1) {
  Deno.test({
    name: "clipGradNorm_ with parameters on cpu and webgpu together",
    sanitizeOps: false,
    sanitizeResources: false,
    fn: () => checkNorms([...BACKENDS.values()].map((ds) => ds[0]), 2e-6),
  });
}

backendTest("clipGradValue_ equals PyTorch", async (device) => {
  const ps = params([device]);
  nn.utils.clipGradValue_(ps, clip.value.clip_value);
  for (let i = 0; i < clip.shapes.length; i++) {
    assertClose(await ps[i].grad!.data(), (clip.value.grads[i] as Nested[]).flat(3) as number[], {
      atol: 0,
      rtol: 0,
      what: `grad ${i}`,
    });
  }
});

backendTest('clipGradNorm_: one tensor, no gradients, the string "inf"', async (device) => {
  const p = new nn.Parameter(zeros([3], { device }));
  p.grad = tensor([3, -4, 0], { device });
  const grad = p.grad;
  assertClose(await nn.utils.clipGradNorm_(p, 1).item(), 5);
  assert.equal(p.grad, grad, "clipped in place");
  assertClose(await p.grad.data(), [0.6, -0.8, 0], { atol: 1e-6 });
  p.grad = tensor([3, -4, 0], { device });
  assertClose(await nn.utils.clipGradNorm_([p], 2, { normType: "inf" }).item(), 4);
  assertClose(await p.grad!.data(), [1.5, -2, 0], { atol: 1e-6 });
  const none = nn.utils.clipGradNorm_([new nn.Parameter(zeros([2], { device }))], 1);
  assert.equal(await none.item(), 0);
});

Deno.test("clip errors: bad norm type, bad values, non-tensors, disposed gradients", () => {
  const p = new nn.Parameter(zeros([2]));
  p.grad = zeros([2]);
  assert.throws(
    () => nn.utils.clipGradNorm_([p], 1, { normType: 0 }),
    /normType must be a positive number or "inf", got 0/,
  );
  assert.throws(() => nn.utils.clipGradNorm_([p], NaN), /maxNorm must be a number/);
  assert.throws(() => nn.utils.clipGradValue_([p], -1), /clipValue must be a number >= 0, got -1/);
  assert.throws(
    () => nn.utils.clipGradNorm_([p, 3 as unknown as Tensor], 1),
    /clipGradNorm_: parameter 1 is not a Tensor/,
  );
  p.grad.dispose();
  assert.throws(
    () => nn.utils.clipGradValue_([p], 1),
    /gradient of parameter 0 \(shape \[2\]\) was disposed/,
  );
});
