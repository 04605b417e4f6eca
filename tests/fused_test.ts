/**
 * Optional fused kernels against their compositions: every backend that
 * fuses the optimizer kernels (`adam`, `sgd`) or cross-entropy
 * (`crossEntropy`, `crossEntropyBackward`) runs side by side with a copy of
 * the cpu backend that leaves those out (so the core composes them from
 * primitives). On cpu the fused optimizer kernels must give the composed
 * numbers bit for bit (both round every operation to float32); the rest
 * within float32 tolerance. Kernels only some backends fuse
 * (`geluBackward`, `addmm`) match the cpu on every backend, and where a
 * backend fuses them, its kernel matches the composition on the same device
 * (the kernel hidden from the table) with one launch.
 * @module
 */

import assert from "node:assert/strict";
import {
  type BackendDevice,
  cpuBackend,
  data,
  type Device,
  manualSeed,
  nn,
  optim,
  type OptionalKernelName,
  registerBackend,
  requestDevices,
  type Tensor,
  tensor,
  tidy,
  webgpuBackend,
} from "../mod.ts";

import { assertClose, BACKENDS, backendTest, floats, REF } from "./harness.ts";

/**
 * A copy of the cpu backend registered as `name` without the kernels
 * `leftOut` (the others stay, so the rest of forward and backward is the
 * same), and its device.
 */
async function cpuWithout(name: string, leftOut: readonly string[]): Promise<Device> {
  registerBackend(name, () => {
    const inner = cpuBackend();
    return {
      createDevice(index: number): BackendDevice {
        const device = inner.createDevice(index) as BackendDevice;
        const kernels: Record<string, unknown> = { ...device.kernels };
        for (const kernel of leftOut) delete kernels[kernel];
        return { ...device, kernels: kernels as BackendDevice["kernels"] };
      },
    };
  }, { priority: -100 });
  const [device] = await requestDevices({ backend: name });
  return device;
}

const COMPOSED = await cpuWithout("composed-optim", ["adam", "sgd"]);

/** The kernels `fn` calls on `device`, in order (the table wrapped while it runs). */
async function kernelCalls(device: Device, fn: () => unknown): Promise<string[]> {
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
    await fn();
  } finally {
    Object.assign(kernels, saved);
  }
  return calls;
}

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
  const calls = await kernelCalls(device, () => opt.step());
  // The state's zeros (two fills) and the update itself.
  assert.deepEqual(calls.filter((k) => k !== "fill"), ["adam"]);
  const ref = [1, 2, 3, 4, 5].map((
    v,
    i,
  ) => (i === 4 ? v : v - 0.1 * Math.sign([0.5, -0.5, 1, -1][i])));
  assertClose(await p.data(), ref, { atol: 1e-5 });
});

const LOGITS = [
  [2, -1, 0.5, 3],
  [0, 0, 0, 0],
  [1e4, -1e4, 5, 0], // large logits: max-subtracted
  [-3, 2, 1, 0.25],
  [0.5, 0.5, -2, 7],
];

for (const reduction of ["mean", "sum", "none"] as const) {
  backendTest(
    `fused crossEntropy (${reduction}, ignoreIndex): losses and gradients equal the composed ones`,
    async (device) => {
      if (!device.backendDevice.kernels.crossEntropy) return;
      const run = async (d: Device) => {
        const x = tensor(LOGITS, { device: d, requiresGrad: true });
        const y = tensor([3, 1, 0, -100, 2], { device: d, dtype: "int32" });
        const loss = nn.functional.crossEntropy(x, y, { reduction });
        loss.sum().backward();
        return { loss: await loss.data(), grad: await x.grad!.data() };
      };
      const fused = await run(device);
      const composed = await run(COMPOSED);
      assertClose(fused.loss, composed.loss, { atol: 1e-5, rtol: 1e-5, what: "loss" });
      assertClose(fused.grad, composed.grad, { atol: 1e-6, rtol: 1e-5, what: "gradient" });
    },
  );
}

/** The cpu backend reducing the per-row cross-entropy kernels itself (sums and a division). */
const ROWS_THEN_REDUCED = await cpuWithout("composed-ce-reduction", [
  "crossEntropyReduced",
  "crossEntropyReducedBackward",
]);

for (const reduction of ["mean", "sum"] as const) {
  backendTest(
    `fused crossEntropyReduced (${reduction}): one launch each way, the composition's numbers (cpu: its bits)`,
    async (device) => {
      if (!device.backendDevice.kernels.crossEntropyReduced) return;
      const run = async (d: Device, targets: number[], scale: number) => {
        const x = tensor(LOGITS, { device: d, requiresGrad: true });
        const y = tensor(targets, { device: d, dtype: "int32" });
        const loss = nn.functional.crossEntropy(x, y, { reduction });
        assert.deepEqual(loss.shape, []);
        loss.mul(scale).backward();
        return { loss: await loss.data(), grad: await x.grad!.data() };
      };
      let fused!: Awaited<ReturnType<typeof run>>;
      const calls = await kernelCalls(device, async () => {
        fused = await run(device, [3, 1, 0, -100, 2], 2.5);
      });
      // After the targets' range check: the loss, then its backward (the seed fill and
      // the scale's multiplications aside).
      const launched = calls.slice(calls.indexOf("crossEntropyReduced"))
        .filter((k) => k !== "fill" && k !== "binary");
      assert.deepEqual(launched.slice(0, 2), [
        "crossEntropyReduced",
        "crossEntropyReducedBackward",
      ]);
      assert.ok(!launched.includes("reduce"), `no sums: ${launched.join(", ")}`);
      const composed = await run(ROWS_THEN_REDUCED, [3, 1, 0, -100, 2], 2.5);
      if (device.backend === "cpu") {
        assert.deepEqual(fused, composed);
      } else {
        assertClose(fused.loss, composed.loss, { atol: 1e-5, rtol: 1e-5, what: "loss" });
        assertClose(fused.grad, composed.grad, { atol: 1e-6, rtol: 1e-5, what: "gradient" });
      }
      // Every row ignored: the mean is NaN (0 / 0, as PyTorch), the sum 0; no gradient reaches the logits.
      const ignored = await run(device, [-100, -100, -100, -100, -100], 1);
      if (reduction === "mean") assert.ok(Number.isNaN(ignored.loss[0]), `${ignored.loss[0]}`);
      else assert.equal(ignored.loss[0], 0);
      assert.deepEqual([...ignored.grad], Array(20).fill(0));
    },
  );
}

backendTest(
  "fused crossEntropy: two kernels; a NaN logit gives NaN; a class out of range an error (the kernel alone: NaN)",
  async (device) => {
    if (!device.backendDevice.kernels.crossEntropy) return;
    const x = tensor(LOGITS, { device, requiresGrad: true });
    const calls = await kernelCalls(
      device,
      () =>
        nn.functional.crossEntropy(x, tensor([3, 1, 0, 2, 2], { device, dtype: "int32" }), {
          reduction: "none",
        }).sum().backward(),
    );
    assert.ok(calls.includes("crossEntropy") && calls.includes("crossEntropyBackward"));
    assert.ok(!calls.includes("softmax"), `no log-softmax composition: ${calls.join(", ")}`);
    const nanRow = nn.functional.crossEntropy(
      tensor([[1, NaN, 0], [1, 2, 3]], { device }),
      tensor([0, 1], { device, dtype: "int32" }),
      { reduction: "none" },
    );
    const values = [...await nanRow.data()];
    assert.ok(Number.isNaN(values[0]), `NaN logit: ${values[0]}`);
    assertClose(values[1], Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3)) - 2, { atol: 1e-5 });
    // A class out of range: the op's check rejects the next read; the kernel
    // itself (without the check) gives NaN, never a number.
    const outOfRange = nn.functional.crossEntropy(
      tensor([[1, 2, 3]], { device }),
      tensor([3], { device, dtype: "int32" }),
    );
    await assert.rejects(outOfRange.item(), /class index 3 is out of range for 3 classes/);
    const k = device.backendDevice;
    const buffer = (values: number[], dtype: "float32" | "int32") => {
      const b = k.allocate(values.length, dtype);
      k.write(b, 0, dtype === "int32" ? Int32Array.from(values) : Float32Array.from(values));
      return b;
    };
    const losses = buffer([0], "float32");
    k.kernels.crossEntropy!({
      logits: buffer([1, 2, 3], "float32"),
      target: buffer([3], "int32"),
      losses,
      weights: buffer([0], "float32"),
      probs: buffer([0, 0, 0], "float32"),
      rows: 1,
      classes: 3,
      ignoreIndex: -100,
      dtype: "float32",
    });
    assert.ok(Number.isNaN((await k.read(losses, 0, 1, "float32"))[0]));
  },
);

backendTest(
  "fused crossEntropy: a reused target is range-checked once, a changed one again",
  async (device) => {
    if (!device.backendDevice.kernels.crossEntropy) return;
    const kernels = device.backendDevice.kernels as unknown as Record<string, (a: unknown) => void>;
    const logits = tensor(LOGITS, { device });
    // Computed on the device: no host-known range, so a check must read.
    const target = tensor([3, 1, 0, 2, 2], { device, dtype: "int32" }).mul(1);
    const reductions = async () => {
      const saved = kernels.reduce;
      let count = 0;
      kernels.reduce = (a: unknown) => {
        count++;
        saved(a);
      };
      try {
        await nn.functional.crossEntropy(logits, target, { reduction: "none" }).data();
      } finally {
        kernels.reduce = saved;
      }
      return count;
    };
    const first = await reductions();
    assert.ok(first >= 2, `min and max of the targets: ${first} reductions`);
    assert.equal(await reductions(), 0, "already checked");
    target._assign(tensor([0, 0, 0, 0, 1], { device, dtype: "int32" }));
    assert.equal(await reductions(), first, "changed in place: checked again");
  },
);

// ---------------------------------------------------------------- softmax backward, nll loss

/** Runs `fn` with kernel `name` removed from `device`'s table, so the ops compose it. */
function withoutKernel<T>(device: Device, name: OptionalKernelName, fn: () => T): T {
  const table = device.backendDevice.kernels as unknown as Record<string, unknown>;
  const saved = table[name];
  delete table[name];
  try {
    return fn();
  } finally {
    table[name] = saved;
  }
}

/** Runs `fn` counting calls of kernel `name` on `device`. */
function countCalls(device: Device, name: OptionalKernelName, fn: () => void): number {
  const table = device.backendDevice.kernels as unknown as Record<string, (a: unknown) => void>;
  const saved = table[name];
  let calls = 0;
  table[name] = (args) => {
    calls++;
    saved(args);
  };
  try {
    fn();
  } finally {
    table[name] = saved;
  }
  return calls;
}

/** Calls of `proto[method]` (a WebGPU object's prototype) while `fn` runs. */
async function countMethodCalls(
  proto: object,
  method: string,
  fn: () => Promise<void>,
): Promise<number> {
  const target = proto as Record<string, (...args: unknown[]) => unknown>;
  const original = target[method];
  let calls = 0;
  target[method] = function (this: unknown, ...args: unknown[]) {
    calls++;
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    target[method] = original;
  }
  return calls;
}

/** Registers `fn` for every started backend that fuses `kernel` (the others compose it). */
function fusedTest(
  kernel: OptionalKernelName,
  name: string,
  fn: (device: Device) => Promise<void>,
): void {
  for (const [backend, [device]] of BACKENDS) {
    if (!device.backendDevice.kernels[kernel]) continue;
    Deno.test({
      name: `${name} [${backend}]`,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: () => fn(device),
    });
  }
}

/** Values and gradient of `loss(x)` for a leaf `x` made from `values` on `device`. */
async function lossAndGrad(
  device: Device,
  shape: number[],
  values: number[],
  loss: (x: Tensor) => Tensor,
): Promise<Float32Array[]> {
  const x = tensor(values, { shape, device, requiresGrad: true });
  const y = loss(x);
  // A weighted sum, so every output element gets its own gradient.
  const outShape = [...y.shape];
  const scalarLoss = y.ndim === 0
    ? y
    : y.mul(tensor(floats(outShape, 31), { shape: outShape, device })).sum();
  scalarLoss.backward();
  return [(await y.data()) as Float32Array, (await x.grad!.data()) as Float32Array];
}

const GELU_X = [...floats([40], 24, -6, 6), NaN, Infinity, -Infinity, 0, -0, 1e-30, 30, -30];

backendTest("geluBackward: the GELU gradient (NaN, ±inf, tails) matches the cpu", async (d) => {
  const run = (device: Device) => lossAndGrad(device, [48], GELU_X, (x) => x.gelu());
  const [want, got] = [await run(REF), await run(d)];
  assertClose(got[1], want[1], { atol: 1e-6, rtol: 1e-5, what: "gelu gradient" });
  assert.ok(Number.isNaN(want[1][40]), "NaN in, NaN gradient");
});

fusedTest("geluBackward", "geluBackward: fused equals composed, one launch", async (d) => {
  let pending: Promise<Float32Array[]> | undefined;
  const calls = countCalls(d, "geluBackward", () => {
    pending = lossAndGrad(d, [48], GELU_X, (x) => x.gelu());
  });
  const fused = await pending!;
  assert.equal(calls, 1);
  const composed = await withoutKernel(
    d,
    "geluBackward",
    () => lossAndGrad(d, [48], GELU_X, (x) => x.gelu()),
  );
  assertClose(fused[1], composed[1], { atol: 1e-7, rtol: 1e-6, what: "gelu gradient" });
});

/** linear's output and the gradients of x, weight and bias, on `device`. */
async function linearRun(device: Device, rows: number, inF: number, outF: number) {
  const x = tensor(floats([rows * inF], 25), { shape: [rows, inF], device, requiresGrad: true });
  const w = tensor(floats([outF * inF], 26), { shape: [outF, inF], device, requiresGrad: true });
  const b = tensor(floats([outF], 27), { device, requiresGrad: true });
  const y = nn.functional.linear(x, w, b);
  const weights = tensor(floats([rows * outF], 28), { shape: [rows, outF], device });
  y.mul(weights).sum().backward();
  return await Promise.all([y, x.grad!, w.grad!, b.grad!].map(async (t) => await t.data()));
}

/** [rows, in, out]: odd sizes, a multiple of 4 (vec4 stores), narrow outputs, an empty sum. */
const LINEAR_SHAPES = [[5, 3, 7], [128, 64, 64], [9, 16, 3], [33, 2, 12], [4, 0, 6]];

backendTest("addmm: linear with bias, forward and gradients, matches the cpu", async (d) => {
  for (const [rows, inF, outF] of LINEAR_SHAPES) {
    const want = await linearRun(REF, rows, inF, outF);
    const got = await linearRun(d, rows, inF, outF);
    // Sums of up to `rows` float32 products in another order than the cpu's (and with or without
    // FMA, by adapter): the rounding grows with the square root of the length (1.4e-5 seen for
    // 128 rows on one llvmpipe). A wrong kernel is off by O(1).
    const atol = 1e-5 * Math.sqrt(Math.max(rows, inF, 1));
    got.forEach((v, i) =>
      assertClose(v, want[i], { atol, rtol: 1e-5, what: `${rows}x${inF}x${outF} [${i}]` })
    );
  }
});

/** A webgpu device of its own whose products use one kernel family. */
async function webgpuVariant(variant: "register" | "tiled"): Promise<Device> {
  const name = `webgpu-${variant}`;
  registerBackend(name, () => webgpuBackend({ name, matmul: { variant } }), { priority: -100 });
  return (await requestDevices({ backend: name }))[0];
}

fusedTest("addmm", "addmm: fused equals composed, one launch", async (d) => {
  // The webgpu kernels (also under dawn) have two product families.
  const devices = d.backend === "webgpu"
    ? [await webgpuVariant("register"), await webgpuVariant("tiled")]
    : [d];
  for (const device of devices) {
    for (const [rows, inF, outF] of LINEAR_SHAPES) {
      let pending: Promise<unknown[]> | undefined;
      const calls = countCalls(device, "addmm", () => {
        pending = linearRun(device, rows, inF, outF);
      });
      const fused = await pending! as Float32Array[];
      assert.equal(calls, 1, "one launch forward");
      const composed = await withoutKernel(
        device,
        "addmm",
        () => linearRun(device, rows, inF, outF),
      );
      fused.forEach((v, i) =>
        assertClose(v, composed[i], {
          atol: 1e-6,
          rtol: 1e-6,
          what: `${device.backend} ${rows}x${inF}x${outF} [${i}]`,
        })
      );
    }
  }
});

backendTest(
  "fused Adam and SGD over many parameters of assorted sizes equal the composed update",
  async (device) => {
    if (!device.backendDevice.kernels.adam) return;
    const sizes = [1, 3, 4, 255, 256, 257, 1000, 7, 64, 0, 5, 513];
    for (
      const make of [(p: nn.Parameter[]) => new optim.Adam(p, { lr: 0.05 }), (
        p: nn.Parameter[],
      ) => new optim.SGD(p, { lr: 0.1, weightDecay: 0.01 })]
    ) {
      const run = async (d: Device) => {
        const params = sizes.map((n, i) =>
          new nn.Parameter(tensor(floats([n], 40 + i), { device: d }))
        );
        const opt = make(params);
        for (let step = 0; step < 3; step++) {
          params.forEach((p, i) =>
            p.grad = tensor(floats([sizes[i]], 60 + i + step), { device: d })
          );
          opt.step();
        }
        return await Promise.all(params.map(async (p) => await p.data()));
      };
      const [fused, composed] = [await run(device), await run(COMPOSED)];
      fused.forEach((p, i) =>
        assertClose(p, composed[i], { atol: 1e-6, rtol: 1e-5, what: `parameter ${i}` })
      );
    }
  },
);

/** The GPUDevice behind a webgpu-family device (Deno's or dawn's). */
function gpuOf(device: Device): GPUDevice {
  const gpu = (device.backendDevice as { impl?: { runtime?: { device: GPUDevice } } }).impl
    ?.runtime?.device;
  assert.ok(gpu, `${device} has no GPUDevice`);
  return gpu;
}

/**
 * The prototypes the device's own WebGPU implementation gives its buffers and compute passes: a
 * counter patched onto Deno's globals would miss calls made by dawn's classes.
 */
function gpuPrototypes(device: Device): { buffer: GPUBuffer; pass: GPUComputePassEncoder } {
  const gpu = gpuOf(device);
  const probe = gpu.createBuffer({ size: 4, usage: GPUBufferUsage.MAP_READ });
  const buffer = Object.getPrototypeOf(probe) as GPUBuffer;
  probe.destroy();
  const pass = gpu.createCommandEncoder().beginComputePass();
  const passPrototype = Object.getPrototypeOf(pass) as GPUComputePassEncoder;
  pass.end();
  return { buffer, pass: passPrototype };
}

backendTest(
  "webgpu: a step's Adam updates are one dispatch per storage-binding budget (on a GPU)",
  async (device) => {
    if (!["webgpu", "dawn"].includes(device.backend)) return;
    const params = [3, 300, 17, 64, 1, 129].map((n, i) =>
      new nn.Parameter(tensor(floats([n], 80 + i), { device }))
    );
    const opt = new optim.Adam(params, { lr: 0.01 });
    const grads = () =>
      params.forEach((p, i) => p.grad = tensor(floats([p.numel()], 90 + i), { device }));
    grads();
    opt.step(); // makes the state
    await params[0].data();
    grads();
    await params[0].data();
    const pass = gpuPrototypes(device).pass;
    const dispatches = await countMethodCalls(pass, "dispatchWorkgroups", async () => {
      opt.step();
      await params[0].data();
    });
    // 4 storage bindings per parameter, one for the parameter block; a CPU adapter (llvmpipe)
    // runs every branch of a multi-tensor kernel masked, so there each tensor is its own.
    const runtime = (device.backendDevice as { impl?: { runtime?: { isCpuAdapter: boolean } } })
      .impl?.runtime;
    const perDispatch = runtime?.isCpuAdapter
      ? 1
      : Math.floor((gpuOf(device).limits.maxStorageBuffersPerShaderStage - 1) / 4);
    assert.equal(dispatches, Math.ceil(6 / perDispatch), `dispatches for 6 parameters`);
  },
);

fusedTest(
  "crossEntropy",
  "crossEntropy: a data loader's targets picked from a host tensor need no range-check read",
  async (d) => {
    if (!["webgpu", "dawn"].includes(d.backend)) return;
    const n = 64;
    const xs = tensor(floats([n * 2], 50), { shape: [n, 2], device: d });
    const ys = tensor(Array.from({ length: n }, (_, i) => i % 3), { device: d, dtype: "int32" });
    const model = new nn.Linear(2, 3).to(d);
    const loader = new data.DataLoader(new data.TensorDataset(xs, ys), {
      batchSize: 16,
      shuffle: true,
      seed: 1,
    });
    let steps = 0;
    const maps = await countMethodCalls(gpuPrototypes(d).buffer, "mapAsync", async () => {
      for (const [x, y] of loader) {
        const loss = nn.functional.crossEntropy(model.forward(x), y);
        loss.backward();
        assert.ok(Number.isFinite(await loss.item()));
        steps++;
      }
    });
    assert.equal(maps, steps, "one read per step: the loss's");
    // A picked target out of range is still an error at the next read.
    const bad = tensor([0, 5, 1], { device: d, dtype: "int32" });
    const picked = bad.indexSelect(0, tensor([1, 2], { device: d, dtype: "int32" }));
    const loss = nn.functional.crossEntropy(tensor([[1, 2, 3], [0, 1, 0]], { device: d }), picked);
    await assert.rejects(() => loss.item(), /class index 5 is out of range for 3 classes/);
  },
);

backendTest(
  "webgpu: nn.Linear then nn.GELU is one dispatch (GELU in addmm's epilogue), cpu's numbers; a GELU of anything else is its own",
  async (device) => {
    if (!["webgpu", "dawn"].includes(device.backend)) return;
    if (!device.backendDevice.kernels.addmm) return;
    const run = (d: Device) => {
      const x = tensor(floats([6, 5], 120), { shape: [6, 5], device: d, requiresGrad: true });
      // Odd widths (7: scalar stores) and multiples of 4 (vec4 stores), NaN kept by GELU.
      const w7 = tensor(floats([7, 5], 121), { shape: [7, 5], device: d, requiresGrad: true });
      const w8 = tensor(floats([8, 7], 122), { shape: [8, 7], device: d, requiresGrad: true });
      const b7 = tensor(floats([7], 123), { shape: [7], device: d, requiresGrad: true });
      const b8 = tensor([...floats([7], 124), NaN], { device: d, requiresGrad: true });
      const pre = nn.functional.linear(x, w7, b7);
      const h = nn.functional.gelu(pre);
      const out = nn.functional.gelu(nn.functional.linear(h, w8, b8));
      out.narrow(1, 0, 7).sum().backward();
      return [pre, h, out, x.grad!, w7.grad!, b7.grad!, w8.grad!];
    };
    const [got, want] = [await run(device), await run(REF)];
    for (let i = 0; i < got.length; i++) {
      assertClose(await got[i].data(), await want[i].data(), {
        atol: 2e-5,
        rtol: 1e-5,
        what: `${i}`,
      });
    }
    const pass = gpuPrototypes(device).pass;
    const x = tensor(floats([16, 8], 125), { shape: [16, 8], device });
    const w = tensor(floats([12, 8], 126), { shape: [12, 8], device });
    const b = tensor(floats([12], 127), { shape: [12], device });
    await x.data();
    const count = (fn: () => Tensor) =>
      countMethodCalls(pass, "dispatchWorkgroups", async () => void await fn().data());
    assert.equal(await count(() => nn.functional.gelu(nn.functional.linear(x, w, b))), 1);
    // The GELU of another tensor: the product, then the GELU on its own.
    assert.equal(await count(() => nn.functional.linear(x, w, b).add(nn.functional.gelu(b))), 3);
    // Backward of Linear-GELU-Linear: each weight gradient stores its bias gradient, the
    // hidden layer's input gradient its GELU backward (9 dispatches unfused).
    const w1 = tensor(floats([12, 8], 126), { shape: [12, 8], device, requiresGrad: true });
    const b1 = tensor(floats([12], 127), { device, requiresGrad: true });
    const w2 = tensor(floats([4, 12], 128), { shape: [4, 12], device, requiresGrad: true });
    const b2 = tensor(floats([4], 129), { device, requiresGrad: true });
    const g = tensor(floats([16, 4], 130), { shape: [16, 4], device });
    const step = await countMethodCalls(pass, "dispatchWorkgroups", async () => {
      const h = nn.functional.gelu(nn.functional.linear(x, w1, b1));
      nn.functional.linear(h, w2, b2).backward(g);
      await b1.grad!.data();
    });
    assert.equal(step, 5);
  },
);

backendTest(
  "webgpu: a linear layer's bias gradient is stored by its weight-gradient product, cpu's numbers",
  async (device) => {
    if (!["webgpu", "dawn"].includes(device.backend)) return;
    // Rows: a few, more than a workgroup, past the one-pass limit (summed apart);
    // widths: scalar (7) and vec4 (8) loads of gᵀ.
    for (const [rows, outF, inF] of [[5, 7, 3], [300, 8, 5], [1100, 7, 4]]) {
      const run = async (d: Device) => {
        const x = tensor(floats([rows, inF], rows), { shape: [rows, inF], device: d });
        const w = tensor(floats([outF, inF], 130), {
          shape: [outF, inF],
          device: d,
          requiresGrad: true,
        });
        const b = tensor(floats([outF], 131), { device: d, requiresGrad: true });
        const g = tensor(floats([rows, outF], 132), { shape: [rows, outF], device: d });
        nn.functional.linear(x, w, b).backward(g);
        return [await w.grad!.data(), await b.grad!.data()];
      };
      const [got, want] = [await run(device), await run(REF)];
      assertClose(got[0], want[0], { atol: 1e-4, rtol: 1e-5, what: `weight grad, ${rows} rows` });
      assertClose(got[1], want[1], { atol: 1e-4, rtol: 1e-5, what: `bias grad, ${rows} rows` });
    }
    const x = tensor(floats([16, 8], 133), { shape: [16, 8], device });
    const w = tensor(floats([12, 8], 134), { shape: [12, 8], device, requiresGrad: true });
    const b = tensor(floats([12], 135), { device, requiresGrad: true });
    const g = tensor(floats([16, 12], 136), { shape: [16, 12], device });
    await g.data();
    const pass = gpuPrototypes(device).pass;
    const dispatches = await countMethodCalls(pass, "dispatchWorkgroups", async () => {
      nn.functional.linear(x, w, b).backward(g);
      await b.grad!.data();
    });
    // The product (forward) and gᵀ x with the sums; x needs no gradient.
    assert.equal(dispatches, 2);
  },
);
