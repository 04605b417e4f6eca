/**
 * Memory of training loops written as PyTorch users write them: no `tidy`,
 * no `dispose`. Layers, losses and DataParallel run in scopes that hand their
 * intermediates to the graph, which frees them as backward runs through it;
 * reads let FinalizationRegistry callbacks run. Long soaks are in
 * `soak_test.ts`.
 * @module
 */

import assert from "node:assert/strict";
import {
  type Device,
  distributions as D,
  eye,
  keep,
  linalg,
  manualSeed,
  nn,
  noGrad,
  optim,
  rand,
  randn,
  requestDevices,
  special,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";
import { assertClose, backendTest } from "./harness.ts";

/**
 * A model, optimizer and batch after one step (gradients, optimizer state and
 * cached constants made), with every stream idle: a device whose stream still
 * waits for the upload of the model would queue frees too.
 */
async function setup(device: Device) {
  manualSeed(3);
  const model = new nn.Sequential(new nn.Linear(4, 8), new nn.ReLU(), new nn.Linear(8, 3))
    .to(device);
  const opt = new optim.Adam(model.parameters(), { lr: 0.01 });
  const lossFn = new nn.CrossEntropyLoss();
  const x = randn([5, 4], { device });
  const y = tensor([0, 1, 2, 1, 0], { dtype: "int32", device });
  const step = () => {
    const out = model.forward(x);
    const loss = lossFn.forward(out, y);
    loss.backward();
    opt.step();
    return { out, loss };
  };
  const first = step();
  await first.loss.data();
  first.out.dispose();
  first.loss.dispose();
  return { model, opt, lossFn, x, y, step };
}

backendTest("a plain step frees its activations at backward, with no await", async (d) => {
  const { step } = await setup(d);
  // Gradients accumulate in place (no zeroGrad), so they hold no new memory.
  const base = d.memory().bytesInUse;
  const { out, loss } = step();
  // Only what the user holds is left: the logits and the loss.
  out.dispose();
  loss.dispose();
  assert.equal(d.memory().bytesInUse, base);
});

backendTest("activations stay until backward needs them no more", async (d) => {
  const { model, lossFn, x, y } = await setup(d);
  const base = d.memory().bytesInUse;
  const out = model.forward(x);
  const loss = lossFn.forward(out, y);
  const held = d.memory().bytesInUse;
  out.dispose();
  loss.dispose();
  // The graph still holds the hidden layer, the log-probabilities, ...
  assert.ok(d.memory().bytesInUse > base, "intermediates live while backward may come");
  loss.backward();
  assert.equal(d.memory().bytesInUse, base, "and are freed by backward");
  assert.ok(held > base);
});

backendTest(
  "tidy(forward) then backward outside the scope works and frees the scope",
  async (d) => {
    const { model, lossFn, x, y, opt } = await setup(d);
    const two = tensor(2, { device: d });
    opt.zeroGrad();
    const base = d.memory().bytesInUse;
    const loss = tidy(() => lossFn.forward(model.forward(x).relu().mul(two), y));
    loss.backward(undefined, { retainGraph: true });
    const grads = model.parameters().map((p) => p.grad!);
    const first = grads[0].data();
    const withGrads = d.memory().bytesInUse;
    loss.backward();
    const twice = grads[0].data();
    assert.ok(d.memory().bytesInUse < withGrads, "the second backward freed the graph");
    loss.dispose();
    opt.zeroGrad();
    assert.equal(d.memory().bytesInUse, base);
    assertClose(await twice, [...await first].map((v) => 2 * v), { rtol: 1e-5 });
  },
);

backendTest("a scope whose result has no history frees everything at once", async (d) => {
  const { model, x } = await setup(d);
  const base = d.memory().bytesInUse;
  const predicted = tidy(() => model.forward(x).argmax(1));
  predicted.dispose();
  assert.equal(d.memory().bytesInUse, base, "grad on, but nothing can backward through it");
  const out = noGrad(() => model.forward(x));
  out.dispose();
  assert.equal(d.memory().bytesInUse, base, "under noGrad");
});

backendTest("keep() inside a scope keeps the graph behind the tensor", async (d) => {
  const w = tensor([1, 2, 3], { device: d, requiresGrad: true });
  let kept: Tensor | null = null;
  tidy(() => {
    kept = keep(w.mul(w).exp());
  });
  kept!.sum().backward();
  assertClose(await w.grad!.data(), [1, 2, 3].map((v) => 2 * v * Math.exp(v * v)), {
    rtol: 1e-5,
  });
});

backendTest(
  "a layer returning an object the scope cannot see into keeps its tensors",
  async (d) => {
    class Boxed {
      constructor(readonly value: Tensor) {}
    }
    class Boxing extends nn.Module {
      override forward(x: Tensor): Tensor {
        return new Boxed(x.mul(3)) as unknown as Tensor;
      }
    }
    const model = new nn.Sequential(new nn.Linear(2, 2), new Boxing()).to(d);
    const boxed = model.forward(tensor([[1, 2]], { device: d })) as unknown as Boxed;
    assert.equal((await boxed.value.data()).length, 2);
  },
);

backendTest(
  "DataParallel: a plain step frees what it scattered and replicated",
  async (_, devices) => {
    manualSeed(5);
    const model = new nn.DataParallel(
      new nn.Sequential(new nn.Linear(4, 8), new nn.ReLU(), new nn.Linear(8, 3)).to(devices[0]),
      { devices },
    );
    const opt = new optim.SGD(model.parameters(), { lr: 0.1 });
    const lossFn = new nn.CrossEntropyLoss();
    const x = randn([6, 4], { device: devices[0] });
    const y = tensor([0, 1, 2, 0, 1, 2], { dtype: "int32", device: devices[0] });
    const step = () => {
      const out = model.forward(x);
      const loss = lossFn.forward(out, y);
      loss.backward();
      opt.step();
      return [out, loss];
    };
    const first = step();
    await first[1].data();
    for (const t of first) t.dispose();
    // Reading a probe on every device waits until the copies between them have
    // landed: until then a device's stream holds its work, frees included.
    const probes = devices.map((dev) => tensor([1], { device: dev }));
    const idle = () => Promise.all(probes.map((p) => p.data()));
    await idle();
    const base = devices.map((dev) => dev.memory().bytesInUse);
    for (const t of step()) t.dispose();
    await idle();
    // At most: the awaits may let the collector free garbage of earlier tests.
    devices.forEach((dev, i) => {
      const now = dev.memory().bytesInUse;
      assert.ok(now <= base[i], `${dev}: ${now} bytes in use after the step, ${base[i]} before`);
    });
  },
);

Deno.test("DataParallel over cpu devices: a loop that never awaits holds no work behind a copy", async () => {
  const devices = await requestDevices({ backend: "cpu", count: 2 });
  await Promise.resolve(); // whatever earlier tests queued
  manualSeed(5);
  const model = new nn.DataParallel(
    new nn.Sequential(new nn.Linear(2, 8), new nn.ReLU(), new nn.Linear(8, 2)).to(devices[0]),
    { devices },
  );
  const opt = new optim.SGD(model.parameters(), { lr: 0.1 });
  const lossFn = new nn.CrossEntropyLoss();
  const x = tensor([[0, 0], [0, 1], [1, 0], [1, 1]], { device: devices[0] });
  const y = tensor([0, 1, 1, 0], { dtype: "int32", device: devices[0] });
  const step = () => {
    opt.zeroGrad();
    const loss = lossFn.forward(model.forward(x), y);
    loss.backward();
    opt.step();
    return loss;
  };
  step().dispose();
  const base = devices.map((d) => d.memory().bytesInUse);
  // No await from here on: copies between cpu devices must not wait for a
  // promise, or every later kernel of devices[1] would be held until one.
  for (let i = 0; i < 50; i++) step().dispose();
  for (const d of devices) assert.ok(d.stream.idle, `${d} runs each step at once`);
  // Only the logits the model returned are left, 50 of them, for the collector.
  const logits = 4 * 2 * 4;
  assert.ok(devices[0].memory().bytesInUse <= base[0] + 50 * logits + 64);
  assert.equal(devices[1].memory().bytesInUse, base[1]);
});

/**
 * The device's largest bytes in use while `fn` runs: every allocation of
 * its backend device is followed by a look at what is live.
 */
function peakBytesDuring(d: Device, fn: () => void): number {
  const backend = d.backendDevice;
  const allocate = backend.allocate;
  let peak = d.memory().bytesInUse;
  backend.allocate = (numel, dtype) => {
    const buffer = allocate.call(backend, numel, dtype);
    peak = Math.max(peak, d.memory().bytesInUse);
    return buffer;
  };
  try {
    fn();
  } finally {
    backend.allocate = allocate;
  }
  return peak;
}

backendTest(
  "samplers free each rejection round's and each scan step's temporaries: hundreds of draws' arrays at the peak, not thousands",
  (d) => {
    manualSeed(5);
    const draws = 7000;
    const bytes = draws * 4;
    const on = (values: number[]) => tensor(values, { device: d });
    // [name, draw, the most arrays of the draw's size live at once]. With every round's (and
    // scan step's) temporaries kept to the end of the draw the peaks were 2,800 (Binomial), 1,370
    // (Poisson: its small rates take 48 terms per value) and 1,500 (VonMises); now 170, 490, 130.
    const cases: [string, () => Tensor, number][] = [
      [
        "Binomial",
        () =>
          new D.Binomial(on([5, 40, 200, 1000, 30, 12, 0]), {
            probs: on([0.3, 0.6, 0.1, 0.97, 0, 1, 0.5]),
          }).sample([draws / 7]),
        400,
      ],
      ["Poisson", () => new D.Poisson(on([0.5, 40, 300, 12, 3, 80, 11])).sample([draws / 7]), 700],
      ["VonMises", () => new D.VonMises(on([0]), on([2])).sample([draws]), 400],
    ];
    for (const [name, draw, most] of cases) {
      const base = d.memory().bytesInUse;
      let sample: Tensor | null = null;
      const peak = peakBytesDuring(d, () => sample = draw());
      const arrays = (peak - base) / bytes;
      assert.ok(arrays < most, `${name}: ${arrays.toFixed(0)} draws' arrays live at once`);
      sample!.dispose();
    }
  },
);

backendTest(
  "eigh and svd by Jacobi sweeps (webgpu) free each rotation's temporaries: a few hundred matrices at the peak, not thousands",
  async (d) => {
    manualSeed(3);
    const n = 16;
    const x = randn([n, n], { device: d });
    const a = x.add(x.mT);
    await a.data();
    const base = d.memory().bytesInUse;
    let outputs: Tensor[] = [];
    // Every rotation's temporaries kept to the end held 2,450 matrices of A's size; now 140.
    const peak = peakBytesDuring(d, () => outputs = [...linalg.eigh(a), ...linalg.svd(a)]);
    const matrices = (peak - base) / (n * n * 4);
    assert.ok(matrices < 600, `${matrices.toFixed(0)} matrices of A's size live at once`);
    for (const t of outputs) t.dispose();
  },
);

backendTest(
  "the eliminations (cholesky, qr, LU, det, inv, solve, LDL) free each step's temporaries: tens of matrices at the peak, not one set per column",
  async (d) => {
    manualSeed(4);
    const n = 32;
    const x = randn([n, n], { device: d });
    const spd = x.matmul(x.mT).add(eye(n, { device: d }).mul(n));
    await spd.data();
    // [name, op]: with every column's temporaries kept to the end, the peaks at n = 32 were
    // about 70 (cholesky), 140 (qr by reflections), 300 (LU), 235 (det), 400 (inv, solve) and
    // 800 (LDL) matrices of A's size; now at most 36.
    const cases: [string, () => Tensor[]][] = [
      ["cholesky", () => [linalg.cholesky(spd)]],
      ["qr", () => [...linalg.qr(x)]],
      ["luFactor", () => [...linalg.luFactor(x)]],
      ["det", () => [linalg.det(x)]],
      ["inv", () => [linalg.inv(spd)]],
      ["solve", () => [linalg.solve(spd, x)]],
      ["ldlFactor", () => [...linalg.ldlFactor(spd)]],
    ];
    for (const [name, op] of cases) {
      const base = d.memory().bytesInUse;
      let outputs: Tensor[] = [];
      const peak = peakBytesDuring(d, () => outputs = op());
      const matrices = (peak - base) / (n * n * 4);
      assert.ok(matrices < 60, `${name}: ${matrices.toFixed(0)} matrices of A's size live at once`);
      for (const t of outputs) t.dispose();
    }
  },
);

backendTest(
  "an LSTM and a 2-layer GRU under noGrad free each step's temporaries: the peak is the sequence's outputs and projections, not 30 arrays a step",
  async (d) => {
    manualSeed(6);
    const [steps, batch, hidden] = [60, 4, 16];
    const x = randn([steps, batch, hidden], { device: d });
    await x.data();
    const state = batch * hidden * 4;
    // With every step's temporaries kept to the end: 30 (LSTM) and 52 (GRU, 2 layers) arrays
    // of the state's size per step; now 11 and 16 (the input projections and the outputs).
    const cases: [string, nn.Module, number][] = [
      ["LSTM", new nn.LSTM(hidden, hidden).to(d), 15],
      ["GRU", new nn.GRU(hidden, hidden, { numLayers: 2 }).to(d), 22],
    ];
    for (const [name, rnn, most] of cases) {
      const base = d.memory().bytesInUse;
      let output: Tensor | null = null;
      const peak = peakBytesDuring(d, () => {
        output = noGrad(() => (rnn.forward(x) as [Tensor])[0]);
      });
      const perStep = (peak - base) / state / steps;
      assert.ok(perStep < most, `${name}: ${perStep.toFixed(1)} state-sized arrays per step`);
      output!.dispose();
    }
  },
);

backendTest(
  "gcd's Euclid steps, gammainc's series, ndtri's Newton steps and zeta's sums free each step's temporaries",
  async (d) => {
    manualSeed(7);
    const n = 4096;
    const x = rand([n], { device: d }).mul(5).add(0.5);
    const y = rand([n], { device: d }).mul(3).add(0.5);
    const [i, j] = [x.mul(1000).floor().to("int32"), y.mul(1000).floor().to("int32")];
    await Promise.all([i.data(), j.data()]);
    // [name, op, the most arrays of the input's size at once]: every step's temporaries kept
    // to the end held 334 (gcd), 1,952 (gammainc), 533 (ndtri) and 458 (zeta) of them; now 21,
    // 537, 142 and 118 (Horner, Clenshaw and Newton steps each in a scope of their own).
    const cases: [string, () => Tensor, number][] = [
      ["gcd", () => i.gcd(j), 60],
      ["gammainc", () => special.gammainc(x, y), 800],
      ["ndtri", () => special.ndtri(x.div(6)), 250],
      ["zeta", () => special.zeta(y.add(1), x), 250],
    ];
    for (const [name, op, most] of cases) {
      const base = d.memory().bytesInUse;
      let out: Tensor | null = null;
      const peak = peakBytesDuring(d, () => out = op());
      const arrays = (peak - base) / (n * 4);
      assert.ok(arrays < most, `${name}: ${arrays.toFixed(0)} arrays of the input's size at once`);
      out!.dispose();
    }
  },
);

backendTest(
  "an optimizer step and clipGradNorm_ free each parameter's temporaries before the next: the peak is a few of the largest parameter's, not a few of all",
  async (d) => {
    manualSeed(8);
    const layers = Array.from({ length: 8 }, () => new nn.Linear(64, 64));
    const model = new nn.Sequential(...layers).to(d);
    const x = randn([4, 64], { device: d });
    const total = model.parameters().reduce((n, p) => n + p.numel(), 0);
    // [name, optimizer]: in one scope for the whole step, the peaks were 5x (SGD with
    // momentum), 9x (RMSprop) and 7x (Adagrad) the parameters' bytes; now 0.6x, 1.1x, 0.9x.
    const cases: [string, () => { step(): unknown; zeroGrad(): void }][] = [
      ["SGD", () => new optim.SGD(model.parameters(), { lr: 0.01, momentum: 0.9 })],
      ["RMSprop", () => new optim.RMSprop(model.parameters(), { lr: 1e-3, momentum: 0.5 })],
      ["Adagrad", () => new optim.Adagrad(model.parameters(), { lr: 1e-3 })],
    ];
    for (const [name, make] of cases) {
      const opt = make();
      // The first step makes the state (momentum buffers, averages); the second is measured.
      for (let step = 0; step < 2; step++) {
        opt.zeroGrad();
        tidy(() => (model.forward(x) as Tensor).sum().backward());
        await model.parameters()[0].grad!.data();
        const base = d.memory().bytesInUse;
        const peak = peakBytesDuring(d, () => opt.step());
        const times = (peak - base) / (total * 4);
        if (step === 1) assert.ok(times < 2, `${name}: ${times.toFixed(2)}x the parameters`);
      }
    }
    // clipGradNorm_ held two gradient-sized temporaries per parameter (2x); now 0.13x.
    for (const normType of [2, "inf"] as const) {
      const base = d.memory().bytesInUse;
      const peak = peakBytesDuring(
        d,
        () => nn.utils.clipGradNorm_(model.parameters(), 0.5, { normType }),
      );
      const times = (peak - base) / (total * 4);
      assert.ok(times < 0.5, `clipGradNorm_ (${normType}): ${times.toFixed(2)}x the parameters`);
    }
  },
);
