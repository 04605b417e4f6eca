/**
 * Optional fused kernels against their compositions: every backend that
 * fuses the optimizer kernels (`adam`, `sgd`) runs training steps side by
 * side with a copy of the cpu backend that leaves those two out (so the
 * core composes them from primitives). On cpu the fused kernels must give the composed
 * numbers bit for bit (both round every operation to float32); elsewhere
 * within float32 tolerance.
 */

import assert from "node:assert/strict";
import {
  type BackendDevice,
  cpuBackend,
  type Device,
  manualSeed,
  nn,
  optim,
  registerBackend,
  requestDevices,
  tensor,
  tidy,
} from "../mod.ts";

const OPTIMIZER_KERNELS = ["adam", "sgd"] as const;
import { assertClose, backendTest } from "./harness.ts";

/** The cpu backend without the optimizer kernels (the others stay, so forward and backward are the same). */
registerBackend("composed", () => {
  const inner = cpuBackend();
  return {
    createDevice(index: number): BackendDevice {
      const device = inner.createDevice(index) as BackendDevice;
      const kernels: Record<string, unknown> = { ...device.kernels };
      for (const name of OPTIMIZER_KERNELS) delete kernels[name];
      return { ...device, kernels: kernels as BackendDevice["kernels"] };
    },
  };
}, { priority: -100 });
const [COMPOSED] = await requestDevices({ backend: "composed" });

type MakeOptimizer = (params: nn.Parameter[]) => optim.SGD | optim.Adam;

const OPTIMIZERS: [string, MakeOptimizer][] = [
  ["SGD", (p) => new optim.SGD(p, { lr: 0.05 })],
  [
    "SGD weightDecay maximize",
    (p) => new optim.SGD(p, { lr: 0.05, weightDecay: 0.1, maximize: true }),
  ],
  ["Adam", (p) => new optim.Adam(p, { lr: 0.01 })],
  [
    "Adam weightDecay betas eps",
    (p) => new optim.Adam(p, { lr: 0.02, weightDecay: 0.05, betas: [0.8, 0.95], eps: 1e-6 }),
  ],
  ["Adam maximize", (p) => new optim.Adam(p, { lr: 0.01, maximize: true })],
  ["AdamW", (p) => new optim.AdamW(p, { lr: 0.01, weightDecay: 0.1 })],
];

/** Parameters after `steps` training steps of a small GELU MLP on `device`. */
async function train(device: Device, make: MakeOptimizer, steps: number): Promise<Float32Array[]> {
  manualSeed(5);
  const model = new nn.Sequential(
    new nn.Linear(3, 16),
    new nn.GELU(),
    new nn.Linear(16, 4),
  ).to(device);
  const opt = make(model.parameters());
  const x = tensor([[0.5, -1, 2], [1, 0.25, -0.5], [-2, 1, 0], [0.1, 0.2, 0.3], [3, -1, 1]], {
    device,
  });
  const y = tensor([0, 3, 1, 2, 1], { device, dtype: "int32" });
  const lossFn = new nn.CrossEntropyLoss();
  for (let i = 0; i < steps; i++) {
    tidy(() => {
      opt.zeroGrad();
      lossFn.forward(model.forward(x), y).backward();
      opt.step();
    });
  }
  return await Promise.all(model.parameters().map(async (p) => await p.data() as Float32Array));
}

for (const [name, make] of OPTIMIZERS) {
  backendTest(`fused ${name}: 6 steps equal the composed update`, async (device) => {
    const kernel = name.startsWith("SGD") ? "sgd" : "adam";
    if (!device.backendDevice.kernels[kernel]) return;
    const fused = await train(device, make, 6);
    const composed = await train(COMPOSED, make, 6);
    fused.forEach((p, i) => {
      if (device.backend === "cpu") assert.deepEqual(p, composed[i], `parameter ${i}`);
      else assertClose(p, composed[i], { atol: 1e-5, rtol: 1e-4, what: `parameter ${i}` });
    });
    // The steps really moved the parameters.
    const start = await train(device, make, 0);
    assert.notDeepEqual(fused[0], start[0]);
  });
}

backendTest("fused Adam: one kernel per parameter, none of the composed ops", async (device) => {
  if (!device.backendDevice.kernels.adam) return;
  const p = new nn.Parameter(tensor([1, 2, 3, 4, 5], { device }));
  const opt = new optim.Adam([p], { lr: 0.1 });
  p.grad = tensor([0.5, -0.5, 1, -1, 0], { device });
  const kernels = device.backendDevice.kernels as unknown as Record<string, (a: unknown) => void>;
  const calls: string[] = [];
  const saved = { ...kernels };
  for (const k of Object.keys(saved)) {
    kernels[k] = (a: unknown) => {
      calls.push(k);
      saved[k](a);
    };
  }
  try {
    opt.step();
  } finally {
    Object.assign(kernels, saved);
  }
  // The state's zeros (two fills) and the update itself.
  assert.deepEqual(calls.filter((k) => k !== "fill"), ["adam"]);
  const ref = [1, 2, 3, 4, 5].map((
    v,
    i,
  ) => (i === 4 ? v : v - 0.1 * Math.sign([0.5, -0.5, 1, -1][i])));
  assertClose(await p.data(), ref, { atol: 1e-5 });
});
