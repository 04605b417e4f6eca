/**
 * PReLU, LogSigmoid, Softmin, Softsign, Tanhshrink, Threshold, GLU, SELU,
 * CELU, Hardshrink, Softshrink, InstanceNorm1d/2d (and functional
 * instanceNorm), PixelShuffle, PixelUnshuffle and LocalResponseNorm against
 * PyTorch 1.13
 * (tests/fixtures/torch_layers_extra.json: kinks, ±inf, NaN, large
 * magnitudes, NaN and infinite upstream gradients, running statistics over
 * two training steps and an evaluation step) on every backend; reprs and
 * state-dict keys; errors naming the bad value or shape; float64 gradient
 * checks on cpu.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, noGrad, type Tensor, tensor, zeros } from "../mod.ts";
import {
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  shapeOf,
} from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_layers_extra.json" with { type: "json" };

const F = nn.functional;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-6, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

type Options = Record<string, number>;

function makeActivation(module: string, o: Options): nn.Module {
  switch (module) {
    case "PReLU":
      return new nn.PReLU(o.numParameters ?? 1, { init: o.init });
    case "LogSigmoid":
      return new nn.LogSigmoid();
    case "Softmin":
      return new nn.Softmin(o.dim);
    case "Softsign":
      return new nn.Softsign();
    case "Tanhshrink":
      return new nn.Tanhshrink();
    case "Threshold":
      return new nn.Threshold(o.threshold, o.value);
    case "GLU":
      return new nn.GLU(o.dim);
    case "SELU":
      return new nn.SELU();
    case "CELU":
      return new nn.CELU(o);
    case "Hardshrink":
      return new nn.Hardshrink(o);
    case "Softshrink":
      return new nn.Softshrink(o);
  }
  throw new Error(`unknown activation ${module}`);
}

for (const c of fixtures.activations) {
  backendTest(
    `${c.name}: forward and gradients equal PyTorch's at the extremes`,
    async (device) => {
      const m = makeActivation(c.module, c.options as Options).to(device);
      assert.equal(m.toString(), c.repr);
      assert.deepEqual(Object.keys(m.stateDict()), c.keys);
      if (c.params) {
        const weight = fixtureTensor(c.params.weight, device);
        noGrad(() => (m as nn.PReLU).weight.copy_(weight));
      }
      const x = fixtureTensor(c.input, device, { requiresGrad: true });
      const out = m.forward(x) as Tensor;
      await assertTensor(out, decodeFixture(c.output), {
        ...tol(device),
        what: "output",
        shape: shapeOf(c.output),
      });
      out.mul(fixtureTensor(c.g, device)).sum().backward();
      await assertTensor(x.grad!, decodeFixture(c.grads.input), {
        ...tol(device),
        what: "input grad",
      });
      if (c.grads.weight) {
        await assertTensor((m as nn.PReLU).weight.grad!, decodeFixture(c.grads.weight), {
          ...tol(device),
          what: "weight grad",
        });
      }
    },
  );
}

function functionalOf(fn: string, options: Options, weight?: Tensor): (x: Tensor) => Tensor {
  switch (fn) {
    case "threshold":
      return (x) => F.threshold(x, options.threshold, options.value);
    case "hardshrink":
      return (x) => F.hardshrink(x, options);
    case "softshrink":
      return (x) => F.softshrink(x, options);
    case "prelu":
      return (x) => F.prelu(x, weight!);
    case "selu":
      return (x) => F.selu(x);
    case "celu":
      return (x) => F.celu(x, options);
    case "logsigmoid":
      return (x) => F.logsigmoid(x);
    case "softsign":
      return (x) => F.softsign(x);
    case "tanhshrink":
      return (x) => F.tanhshrink(x);
  }
  throw new Error(`unknown function ${fn}`);
}

for (const c of fixtures.upstream_specials) {
  backendTest(
    `${c.fn}${
      "weight" in c.grads ? " (and its weight)" : ""
    }: gradients with NaN and infinite upstream values equal PyTorch's`,
    async (device) => {
      const x = fixtureTensor(c.input, device, { requiresGrad: true });
      const weight = tensor([(c.options as Options).weight ?? 0], { device, requiresGrad: true });
      const out = functionalOf(c.fn, c.options as Options, weight)(x);
      await assertTensor(out, decodeFixture(c.output), { ...tol(device), what: "output" });
      out.backward(fixtureTensor(c.g, device));
      await assertTensor(x.grad!, decodeFixture(c.grads.input), {
        ...tol(device),
        what: "input grad",
      });
      if ("weight" in c.grads) {
        await assertTensor(weight.grad!, decodeFixture(c.grads.weight as FixtureValues), {
          ...tol(device),
          what: "weight grad",
        });
      }
    },
  );
}

function makeInstanceNorm(module: string, c: number, options: Options): nn.InstanceNormBase {
  return module === "InstanceNorm1d"
    ? new nn.InstanceNorm1d(c, options)
    : new nn.InstanceNorm2d(c, options);
}

type Buffers = Record<string, unknown>;

async function assertBuffers(
  m: nn.Module,
  expected: Buffers,
  device: Device,
  what: string,
): Promise<void> {
  const sd = m.stateDict();
  for (const [key, value] of Object.entries(expected)) {
    if (key === "num_batches_tracked") {
      assert.equal(await sd[key].item(), value, `${what}: ${key}`);
    } else {
      await assertTensor(sd[key], decodeFixture(value as number[]), {
        ...tol(device),
        what: `${what}: ${key}`,
      });
    }
  }
}

for (const c of fixtures.instance_norm) {
  backendTest(
    `${c.name}: two training steps and an evaluation step equal PyTorch's (outputs, gradients, buffers)`,
    async (device) => {
      const m = makeInstanceNorm(c.module, c.num_features, c.options as Options).to(device);
      assert.equal(m.toString(), c.repr);
      assert.deepEqual(Object.keys(m.stateDict()), c.keys);
      const params = c.params as Record<string, FixtureValues>;
      if (params.weight) {
        const [weight, bias] = [params.weight, params.bias].map((v) => fixtureTensor(v, device));
        noGrad(() => [m.weight!.copy_(weight), m.bias!.copy_(bias)]);
      }
      await assertBuffers(m, c.initial_buffers, device, "initial");
      for (const [i, step] of c.steps.entries()) {
        m.train(step.training);
        m.zeroGrad();
        const x = fixtureTensor(step.input, device, { requiresGrad: true });
        const out = m.forward(x);
        const what = `step ${i}`;
        await assertTensor(out, decodeFixture(step.output), {
          ...tol(device),
          what: `${what} output`,
          shape: shapeOf(step.output),
        });
        out.mul(fixtureTensor(step.g, device)).sum().backward();
        const grads = step.grads as Record<string, FixtureValues>;
        await assertTensor(x.grad!, decodeFixture(grads.input), {
          ...tol(device),
          what: `${what} input grad`,
        });
        if (grads.weight) {
          await assertTensor(m.weight!.grad!, decodeFixture(grads.weight), {
            ...tol(device),
            what: `${what} weight grad`,
          });
          await assertTensor(m.bias!.grad!, decodeFixture(grads.bias), {
            ...tol(device),
            what: `${what} bias grad`,
          });
        }
        await assertBuffers(m, step.buffers_after, device, `${what} buffers`);
      }
    },
  );
}

backendTest(
  "functional instanceNorm: 5-D input, running statistics, then useInputStats false, as PyTorch",
  async (device) => {
    const c = fixtures.functional_instance_norm;
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const weight = fixtureTensor(c.weight, device, { requiresGrad: true });
    const bias = fixtureTensor(c.bias, device, { requiresGrad: true });
    const runningMean = fixtureTensor(c.initial_buffers.running_mean, device);
    const runningVar = fixtureTensor(c.initial_buffers.running_var, device);
    const g = fixtureTensor(c.g, device);
    for (const [useInputStats, expected] of [[true, c.train], [false, c.eval]] as const) {
      for (const t of [x, weight, bias]) t.grad = null;
      const out = F.instanceNorm(x, {
        runningMean,
        runningVar,
        weight,
        bias,
        useInputStats,
        momentum: c.momentum,
        eps: c.eps,
      });
      const what = useInputStats ? "input statistics" : "running statistics";
      await assertTensor(out, decodeFixture(expected.output), { ...tol(device), what });
      out.mul(g).sum().backward();
      for (const [name, t] of [["input", x], ["weight", weight], ["bias", bias]] as const) {
        await assertTensor(t.grad!, decodeFixture(expected.grads[name]), {
          ...tol(device),
          what: `${what}: ${name} grad`,
        });
      }
      if ("buffers_after" in expected) {
        await assertTensor(runningMean, decodeFixture(expected.buffers_after.running_mean), {
          ...tol(device),
          what: "running_mean",
        });
        await assertTensor(runningVar, decodeFixture(expected.buffers_after.running_var), {
          ...tol(device),
          what: "running_var",
        });
      }
    }
  },
);

for (const c of fixtures.pixel_shuffle) {
  backendTest(`${c.repr} on ${JSON.stringify(shapeOf(c.input))}: as PyTorch`, async (device) => {
    const m = c.fn === "pixel_shuffle"
      ? new nn.PixelShuffle(c.factor)
      : new nn.PixelUnshuffle(c.factor);
    assert.equal(m.toString(), c.repr);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const out = m.forward(x);
    // A rearrangement: exact values and gradients.
    const exact = { atol: 0, rtol: 0 };
    await assertTensor(out, decodeFixture(c.output), {
      ...exact,
      what: "output",
      shape: shapeOf(c.output),
    });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertTensor(x.grad!, decodeFixture(c.grads.input), { ...exact, what: "input grad" });
    const ints = fixtureTensor(c.input, device, { dtype: "int32" });
    const fn = c.fn === "pixel_shuffle" ? F.pixelShuffle : F.pixelUnshuffle;
    await assertTensor(fn(ints, c.factor), decodeFixture(c.output), { ...exact, what: "int32" });
  });
}

for (const c of fixtures.local_response_norm) {
  backendTest(`${c.repr} on ${JSON.stringify(shapeOf(c.input))}: as PyTorch`, async (device) => {
    const m = new nn.LocalResponseNorm(c.size, c.options);
    assert.equal(m.toString(), c.repr);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const out = m.forward(x);
    await assertTensor(out, decodeFixture(c.output), { ...tol(device), what: "output" });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertTensor(x.grad!, decodeFixture(c.grads.input), {
      ...tol(device),
      what: "input grad",
    });
  });
}

Deno.test("new activation modules: defaults, reprs, numbers or options, PReLU's parameter", () => {
  const prelu = new nn.PReLU();
  assert.equal(prelu.toString(), "PReLU(num_parameters=1)");
  assert.deepEqual([...prelu.weight.shape], [1]);
  assert.deepEqual(Object.keys(prelu.stateDict()), ["weight"]);
  assert.equal(prelu.parameters().length, 1);
  assert.equal(new nn.GLU().toString(), "GLU(dim=-1)");
  assert.equal(new nn.CELU().toString(), "CELU(alpha=1.0)");
  assert.equal(new nn.CELU(2).toString(), "CELU(alpha=2.0)");
  assert.equal(new nn.Hardshrink().toString(), "Hardshrink(0.5)");
  assert.equal(new nn.Softshrink(1).toString(), "Softshrink(1.0)");
  assert.equal(new nn.Softshrink({ lambd: 0.25 }).lambd, 0.25);
  assert.equal(new nn.Threshold(1e-5, 2.5).toString(), "Threshold(threshold=1e-05, value=2.5)");
  assert.equal(new nn.SELU().toString(), "SELU()");
  assert.equal(new nn.LogSigmoid().toString(), "LogSigmoid()");
});

Deno.test("PReLU(init) starts every slope at init; a per-channel PReLU trains its slopes", async () => {
  const m = new nn.PReLU(3, { init: -0.5 });
  assert.deepEqual(await m.weight.toArray(), [-0.5, -0.5, -0.5]);
  const x = tensor([[-1, 2, -3], [4, -5, 6]], { requiresGrad: true });
  m.forward(x).sum().backward();
  assert.deepEqual(await m.weight.grad!.toArray(), [-1, -5, -3]);
  assert.deepEqual(await x.grad!.toArray(), [[-0.5, 1, -0.5], [1, -0.5, 1]]);
});

Deno.test("errors name the bad value or shape", () => {
  const x = tensor([[1, 2, 3], [4, 5, 6]]);
  assert.throws(
    () => F.prelu(x, tensor([0.1, 0.2])),
    /prelu: weight has 2 parameters but the input of shape \[2, 3\] has 3 channels/,
  );
  assert.throws(
    () => F.prelu(tensor(1), tensor([0.1, 0.2])),
    /prelu: weight has 2 parameters but the input of shape \[\] has 1 channel/,
  );
  assert.throws(() => F.prelu(x, tensor([[0.1]])), /prelu: expected weight to be a scalar or 1D/);
  assert.throws(() => new nn.PReLU(0), /PReLU: numParameters must be a positive integer, got 0/);
  assert.throws(
    () => F.glu(x),
    /glu: halving dimension must be even, but dimension 1 of input of shape \[2, 3\] is size 3/,
  );
  assert.throws(() => F.glu(tensor(1)), /glu: does not support 0-dimensional inputs/);
  assert.throws(() => F.glu(x, 2), /glu: dim 2 out of range/);
  assert.throws(() => new nn.CELU(0), /CELU: alpha must be a finite non-zero number, got 0/);
  assert.throws(() => F.celu(x, { alpha: 0 }), /celu: alpha must be a finite non-zero number/);
  assert.throws(
    () => new nn.Softshrink(-0.5),
    /Softshrink: lambd must be greater or equal to 0, got -0.5/,
  );
  assert.throws(() => F.softshrink(x, { lambd: -1 }), /softshrink: lambd must be greater or equal/);
  assert.throws(() => new nn.Softmin(0.5), /Softmin: dim must be an integer, got 0.5/);
  assert.throws(
    () => F.selu(tensor([1], { dtype: "int32" })),
    /selu: expected a floating-point input, got int32/,
  );
  assert.throws(
    () => new nn.Threshold("1" as unknown as number, 0),
    /Threshold: threshold must be a number, got 1/,
  );
  // PixelShuffle and PixelUnshuffle.
  const img = tensor(Array.from({ length: 24 }, (_, i) => i), { shape: [1, 6, 2, 2] });
  assert.throws(
    () => new nn.PixelShuffle(2).forward(img),
    /pixelShuffle: the channel dim \(size 6, dim -3 of input of shape \[1, 6, 2, 2\]\) must be divisible by upscaleFactor² = 4/,
  );
  assert.throws(
    () => F.pixelShuffle(tensor([[1, 2]]), 1),
    /pixelShuffle: expected an input of at least 3 dims \[\*, C, H, W\], got shape \[1, 2\]/,
  );
  assert.throws(() => new nn.PixelShuffle(0), /PixelShuffle: upscaleFactor must be a positive/);
  assert.throws(
    () => F.pixelShuffle(img, 1.5),
    /pixelShuffle: upscaleFactor must be a positive integer, got 1.5/,
  );
  assert.throws(
    () => F.pixelUnshuffle(tensor(Array(18).fill(0), { shape: [1, 3, 6] }), 2),
    /pixelUnshuffle: the height \(size 3, dim -2 of input of shape \[1, 3, 6\]\) must be divisible by downscaleFactor 2/,
  );
  assert.throws(
    () => F.localResponseNorm(x, 2),
    /localResponseNorm: expected an input of at least 3 dims \[N, C, ...\], got shape \[2, 3\]/,
  );
  assert.throws(() => new nn.LocalResponseNorm(0), /LocalResponseNorm: size must be a positive/);
  assert.throws(
    () => F.pixelUnshuffle(tensor(Array(12).fill(0), { shape: [1, 4, 3] }), 2),
    /pixelUnshuffle: the width \(size 3, dim -1 of input of shape \[1, 4, 3\]\) must be divisible/,
  );
});

Deno.test("InstanceNorm: PyTorch's defaults and keys; errors name the input's shape", async () => {
  const plain = new nn.InstanceNorm1d(4);
  assert.equal(
    plain.toString(),
    "InstanceNorm1d(4, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False)",
  );
  // Without tracking there are no buffers at all (and no parameters without affine).
  assert.deepEqual(Object.keys(plain.stateDict()), []);
  assert.equal(plain.buffers().length, 0);
  const tracked = new nn.InstanceNorm2d(3, { affine: true, trackRunningStats: true });
  assert.deepEqual(Object.keys(tracked.stateDict()), [
    "weight",
    "bias",
    "running_mean",
    "running_var",
    "num_batches_tracked",
  ]);
  // Any channel count goes through a layer that reads neither weight nor statistics, as PyTorch.
  assert.deepEqual([...plain.forward(tensor(Array(30).fill(1), { shape: [2, 5, 3] })).shape], [
    2,
    5,
    3,
  ]);
  assert.throws(
    () => tracked.forward(tensor(Array(16).fill(1), { shape: [1, 4, 2, 2] })),
    /InstanceNorm2d: expected input's size at dim=1 to match num_features \(3\), but got 4 \(input of shape \[1, 4, 2, 2\]\)/,
  );
  assert.throws(
    () => plain.forward(tensor(Array(4).fill(1), { shape: [1, 2, 1, 2] })),
    /InstanceNorm1d: expected 2D or 3D input, got 4D input of shape \[1, 2, 1, 2\]/,
  );
  assert.throws(
    () => new nn.InstanceNorm2d(2).forward(tensor([[1, 2]])),
    /InstanceNorm2d: expected 3D or 4D input, got 2D input of shape \[1, 2\]/,
  );
  assert.throws(
    () => plain.forward(tensor(Array(8).fill(1), { shape: [2, 4, 1] })),
    /instanceNorm: expected more than 1 spatial element when using input statistics, got input of shape \[2, 4, 1\]/,
  );
  assert.throws(
    () => F.instanceNorm(tensor(Array(8).fill(1), { shape: [2, 2, 2] }), { useInputStats: false }),
    /instanceNorm: runningMean and runningVar are required when useInputStats is false/,
  );
  assert.throws(
    () =>
      F.instanceNorm(tensor(Array(8).fill(1), { shape: [2, 2, 2] }), {
        weight: tensor([1, 1, 1]),
      }),
    /instanceNorm: weight of shape \[3\] does not match the 2 channels \(dim 1\) of input of shape \[2, 2, 2\]/,
  );
  assert.throws(
    () => new nn.InstanceNorm1d(3, { momentum: null as unknown as number }),
    /InstanceNorm1d: momentum must be a finite number, got null/,
  );
  // Empty inputs pass, as in PyTorch (only one position is refused); nothing is learnt from them.
  const onEmpty = new nn.InstanceNorm1d(3, { affine: true, trackRunningStats: true });
  const empty = zeros([0, 3, 5], { requiresGrad: true });
  const out = onEmpty.forward(empty);
  assert.deepEqual(out.shape, [0, 3, 5]);
  out.sum().backward();
  assert.deepEqual(Array.from(await onEmpty.weight!.grad!.data()), [0, 0, 0]);
  assert.deepEqual(Array.from(await onEmpty.runningMean!.data()), [0, 0, 0]);
  assert.deepEqual(new nn.InstanceNorm2d(3).forward(zeros([2, 3, 0, 2])).shape, [2, 3, 0, 2]);
});

Deno.test("InstanceNorm: a state dict with PyTorch's keys loads; evaluation with statistics needs them tracked", async () => {
  const m = new nn.InstanceNorm1d(2, { affine: true, trackRunningStats: true });
  m.loadStateDict({
    weight: tensor([2, 3]),
    bias: tensor([0.5, -0.5]),
    running_mean: tensor([1, -1]),
    running_var: tensor([4, 0.25]),
    num_batches_tracked: tensor(0, { dtype: "int32" }),
  });
  m.eval();
  const out = m.forward(tensor([[[3, 5], [-1, 0]]]));
  const eps = 1e-5;
  await assertTensor(out, [
    (3 - 1) / Math.sqrt(4 + eps) * 2 + 0.5,
    (5 - 1) / Math.sqrt(4 + eps) * 2 + 0.5,
    0 * 3 - 0.5,
    (0 + 1) / Math.sqrt(0.25 + eps) * 3 - 0.5,
  ], { what: "evaluation with the loaded statistics" });
  assert.throws(
    () => new nn.InstanceNorm1d(2).loadStateDict({ running_mean: tensor([0, 0]) }),
    /unexpected key\(s\) in state dict: "running_mean"/,
  );
});

// ---------------------------------------------------------------- gradient checks (float64, cpu)

// Kinks (0, ±lambd, the threshold) stay away from the sampled points.
const AWAY = [-2.7, -1.3, -0.4, 0.3, 0.9, 2.2, -0.05, 0.07, 1.6, -0.8, 0.6, -3.1];
check("prelu, one slope (input and weight)", (x, w) => F.prelu(x, w), [
  { shape: [3, 4], values: AWAY },
  { shape: [1], values: [0.3] },
]);
check("prelu, one slope per channel of [2, 3, 2]", (x, w) => F.prelu(x, w), [
  { shape: [2, 3, 2], values: AWAY },
  { shape: [3], values: [0.3, -0.2, 1.5] },
]);
check("logsigmoid", (x) => F.logsigmoid(x), [inp([2, 6], 2501, -30, 30)]);
check("softmin dim 1", (x) => F.softmin(x, 1), [inp([3, 4], 2502)]);
check("softmin dim 0", (x) => F.softmin(x, 0), [inp([3, 4], 2503)]);
check("softsign", (x) => F.softsign(x), [{ shape: [12], values: AWAY }]);
check("tanhshrink", (x) => F.tanhshrink(x), [inp([2, 5], 2504, -3, 3)]);
check("threshold", (x) => F.threshold(x, 0.5, -2), [{ shape: [12], values: AWAY }]);
check("glu dim -1", (x) => F.glu(x), [inp([3, 4], 2505, -4, 4)]);
check("glu dim 0", (x) => F.glu(x, 0), [inp([4, 3], 2506, -4, 4)]);
check("selu", (x) => F.selu(x), [{ shape: [12], values: AWAY }]);
check("celu alpha 0.7", (x) => F.celu(x, { alpha: 0.7 }), [{ shape: [12], values: AWAY }]);
check("hardshrink", (x) => F.hardshrink(x), [{ shape: [12], values: AWAY }]);
check("softshrink lambd 0.2", (x) => F.softshrink(x, { lambd: 0.2 }), [{
  shape: [12],
  values: AWAY,
}]);
check(
  "instanceNorm [2, 3, 5] with weight and bias",
  (x, w, b) => F.instanceNorm(x, { weight: w, bias: b }),
  [
    inp([2, 3, 5], 2507),
    inp([3], 2508, 0.5, 2),
    inp([3], 2509),
  ],
);
check("instanceNorm [2, 2, 2, 3] without affine", (x) => F.instanceNorm(x), [
  inp([2, 2, 2, 3], 2510),
]);
check(
  "instanceNorm with running statistics (useInputStats false)",
  (x, w, b) => {
    const running = (v: number[]) => tensor(v, { dtype: "float64", device: x.device });
    return F.instanceNorm(x, {
      weight: w,
      bias: b,
      runningMean: running([0.2, -0.3]),
      runningVar: running([1.5, 0.7]),
      useInputStats: false,
    });
  },
  [inp([2, 2, 3], 2511), inp([2], 2512, 0.5, 2), inp([2], 2513)],
);
check("localResponseNorm size 3", (x) => F.localResponseNorm(x, 3, { alpha: 0.1, k: 0.5 }), [
  inp([2, 5, 3], 2516),
]);
check(
  "localResponseNorm size 2, 4-D",
  (x) => F.localResponseNorm(x, 2, { alpha: 0.3, beta: 1.2 }),
  [
    inp([1, 4, 2, 2], 2517),
  ],
);
check("pixelShuffle 2", (x) => F.pixelShuffle(x, 2), [inp([2, 8, 2, 3], 2514)]);
check("pixelUnshuffle 2", (x) => F.pixelUnshuffle(x, 2), [inp([2, 2, 4, 2], 2515)]);
