/**
 * `optim.swaUtils` (SWALR, AveragedModel, updateBn) and `nn.utils.prune`
 * against PyTorch 1.13 (tests/fixtures/torch_swa_prune.json): SWALR's
 * learning rates for several configurations and a handover from
 * CosineAnnealingLR; AveragedModel states after each update (running mean,
 * EMA, with buffers); updateBn's running statistics; pruning masks (l1 and
 * ln structured, importance scores, iterative composition, global),
 * state-dict keys, forward and gradients through pruned layers on every
 * backend. Random methods by their properties; ties by count (PyTorch's
 * choice among ties is not reproduced); errors naming the bad value.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, manualSeed, nn, noGrad, optim, type Tensor, tensor, zeros } from "../mod.ts";
import {
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
} from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_swa_prune.json" with { type: "json" };

const P = nn.utils.prune;
const { AveragedModel, SWALR, updateBn } = optim.swaUtils;
type Values = FixtureValues;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-6, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

/** A module holding one parameter `weight` of the given values. */
class Holder extends nn.Module {
  weight: nn.Parameter;
  constructor(values: Values, device: Device) {
    super();
    this.weight = new nn.Parameter(fixtureTensor(values, device));
  }
}

function fields(m: nn.Module): Record<string, Tensor> {
  return m as unknown as Record<string, Tensor>;
}

async function maskOf(m: nn.Module, name = "weight"): Promise<number[]> {
  return Array.from(await fields(m)[`${name}_mask`].data());
}

// ---------------------------------------------------------------- SWALR

function sgd(lrs: number[]): optim.SGD {
  return new optim.SGD(lrs.map((lr) => ({ params: [zeros([2], { requiresGrad: true })], lr })), {
    lr: 1,
  });
}

Deno.test("SWALR: learning rates of PyTorch 1.13 (cos, linear, annealEpochs 0 and 1, per group)", () => {
  for (const c of fixtures.swalr) {
    const opt = sgd(c.lrs);
    const s = new SWALR(opt, {
      swaLr: c.swa_lr,
      annealEpochs: c.anneal_epochs,
      annealStrategy: c.anneal_strategy as "cos" | "linear",
    });
    const got = [opt.paramGroups.map((g) => g.lr)];
    for (let i = 0; i < c.steps; i++) {
      s.step();
      got.push(opt.paramGroups.map((g) => g.lr));
    }
    const what = JSON.stringify({ ...c, lr_sequence: undefined });
    got.flat().forEach((v, i) =>
      assert.ok(Math.abs(v - c.lr_sequence.flat()[i]) <= 1e-15, `${what} at ${i}: ${v}`)
    );
    assert.deepEqual(s.getLastLr().length, c.last_lr.length);
  }
});

Deno.test("SWALR: takes over from CosineAnnealingLR as in PyTorch's example", () => {
  const h = fixtures.swalr_handover;
  const opt = sgd([h.lr]);
  const cos = new optim.lrScheduler.CosineAnnealingLR(opt, h.t_max);
  const swa = new SWALR(opt, {
    swaLr: h.swa_lr,
    annealEpochs: h.anneal_epochs,
    annealStrategy: h.anneal_strategy as "linear",
  });
  const got = [opt.paramGroups[0].lr];
  for (let epoch = 0; epoch < h.epochs; epoch++) {
    if (epoch >= h.swa_start) swa.step();
    else cos.step();
    got.push(opt.paramGroups[0].lr);
  }
  got.forEach((v, i) => assert.ok(Math.abs(v - h.lr_sequence[i]) <= 1e-15, `epoch ${i}: ${v}`));
});

Deno.test("SWALR: stateDict round trip, swaLr in the groups, errors", () => {
  const opt = sgd([0.5, 0.1]);
  const s = new SWALR(opt, { swaLr: [0.1, 0.2], annealEpochs: 3, annealStrategy: "linear" });
  s.step();
  const saved = s.stateDict();
  assert.equal(saved.anneal_epochs, 3);
  assert.equal(saved._step_count, 2);
  assert.deepEqual(
    opt.paramGroups.map((g) => (g as unknown as { swaLr: number }).swaLr),
    [0.1, 0.2],
  );
  // PyTorch's group keys, swa_lr before initial_lr.
  const keys = Object.keys(opt.stateDict().param_groups[0]);
  assert.ok(keys.indexOf("swa_lr") >= 0 && keys.indexOf("swa_lr") < keys.indexOf("initial_lr"));
  const opt2 = sgd([0.5, 0.1]);
  const s2 = new SWALR(opt2, { swaLr: [0.1, 0.2], annealEpochs: 9 });
  s2.loadStateDict(JSON.parse(JSON.stringify(saved)));
  assert.equal(s2.annealEpochs, 3);
  assert.equal(s2.annealStrategy, "linear");
  assert.throws(() => new SWALR(sgd([0.1, 0.2]), { swaLr: [0.1] }), /swaLr has 1.*has 2/);
  assert.throws(() => new SWALR(sgd([0.1]), { swaLr: 0.1, annealEpochs: -1 }), /annealEpochs.*-1/);
  assert.throws(
    () => new SWALR(sgd([0.1]), { swaLr: 0.1, annealEpochs: 2.5 }),
    /annealEpochs.*2\.5/,
  );
  assert.throws(
    () => new SWALR(sgd([0.1]), { swaLr: 0.1, annealStrategy: "exp" as "cos" }),
    /"cos" or "linear", got "exp"/,
  );
  assert.throws(
    () => new SWALR(sgd([0.1]), { swaLr: NaN }),
    /swaLr must be a finite number, got NaN/,
  );
  assert.throws(() => new SWALR({} as optim.SGD, { swaLr: 0.1 }), /is not an Optimizer/);
});

// -------------------------------------------------------- AveragedModel

function bnNet(): nn.Sequential {
  return new nn.Sequential(
    new nn.Linear(3, 4),
    new nn.BatchNorm1d(4),
    new nn.ReLU(),
    new nn.Linear(4, 2),
  );
}

function stateOf(values: Record<string, Values>, device: Device): Record<string, Tensor> {
  return Object.fromEntries(
    Object.entries(values).map(([k, v]) => [
      k,
      fixtureTensor(v, device, { dtype: k.endsWith("num_batches_tracked") ? "int32" : "float32" }),
    ]),
  );
}

async function assertState(
  m: nn.Module,
  expected: Record<string, Values>,
  device: Device,
  what: string,
): Promise<void> {
  const sd = m.stateDict();
  assert.deepEqual(Object.keys(sd), Object.keys(expected), `${what}: keys`);
  for (const [k, v] of Object.entries(expected)) {
    await assertTensor(sd[k], decodeFixture(v), { ...tol(device), what: `${what}: ${k}` });
  }
}

backendTest(
  "AveragedModel: states after each update (mean, EMA, with buffers) as PyTorch",
  async (device) => {
    for (const c of fixtures.averaged) {
      const model = bnNet().to(device);
      model.loadStateDict(stateOf(c.initial_state as Record<string, Values>, device));
      const ema = (a: Tensor, m: Tensor) => a.mul(0.1).add(m.mul(0.9));
      const avg = new AveragedModel(model, {
        avgFn: c.kind.startsWith("ema") ? ema : undefined,
        useBuffers: c.kind.endsWith("buffers"),
      });
      assert.deepEqual(Object.keys(avg.stateDict()), c.keys);
      assert.equal(avg.toString(), c.repr);
      for (const [i, u] of c.updates.entries()) {
        model.loadStateDict(stateOf(u.model_state as Record<string, Values>, device));
        avg.updateParameters(model);
        await assertState(
          avg,
          u.averaged_state as Record<string, Values>,
          device,
          `${c.kind} update ${i}`,
        );
      }
      avg.eval();
      const out = avg.forward(fixtureTensor(c.eval_input, device)) as Tensor;
      await assertTensor(out, decodeFixture(c.eval_output), {
        ...tol(device),
        what: `${c.kind} forward`,
      });
    }
  },
);

backendTest(
  "AveragedModel: device puts the copy and n_averaged there; updates cross devices",
  async (device) => {
    const model = new nn.Linear(2, 2);
    noGrad(() => {
      model.weight.copy_(tensor([[1, 2], [3, 4]]));
      model.bias!.fill_(1);
    });
    const avg = new AveragedModel(model, { device });
    assert.equal(avg.module.weight.device, device);
    assert.equal(avg.nAveraged.device, device);
    avg.updateParameters(model);
    noGrad(() => model.weight.mul_(3));
    avg.updateParameters(model);
    await assertTensor(avg.module.weight, [2, 4, 6, 8], tol(device));
    assert.deepEqual(Array.from(await avg.nAveraged.data()), [2]);
    assert.equal(avg.nAveraged.dtype, "int32");
  },
);

Deno.test("AveragedModel: a deep copy, hooks copied, errors", async () => {
  const model = new nn.Linear(2, 2);
  let calls = 0;
  model.registerForwardPreHook(() => {
    calls++;
  });
  const avg = new AveragedModel(model);
  noGrad(() => model.weight.add_(1));
  assert.notEqual(avg.module.weight, model.weight);
  assert.ok(avg.module.weight instanceof nn.Parameter);
  const before = Array.from(await avg.module.weight.data());
  assert.notDeepEqual(before, Array.from(await model.weight.data()));
  avg.forward(zeros([1, 2]));
  assert.equal(calls, 1, "the copy runs the model's hooks");
  assert.throws(() => avg.updateParameters(new nn.Linear(2, 3)), /shape \[2,2\].*\[3,2\]/);
  assert.throws(
    () => avg.updateParameters(new nn.Sequential()),
    /has 2 parameters, Sequential has 0/,
  );
  assert.throws(
    () => new AveragedModel(null as unknown as nn.Module),
    /expected an nn.Module, got null/,
  );
  // A pruned model's copy keeps its reparametrisation, on its own tensors.
  const pruned = P.l1Unstructured(new nn.Linear(3, 2), "weight", { amount: 2 });
  const copy = new AveragedModel(pruned);
  assert.deepEqual(Object.keys(copy.stateDict()), [
    "n_averaged",
    "module.bias",
    "module.weight_orig",
    "module.weight_mask",
  ]);
  assert.notEqual(fields(copy.module).weight_mask, fields(pruned).weight_mask);
  assert.equal((await fields(copy.module).weight.data()).filter((v) => v === 0).length, 2);
});

// ------------------------------------------------------------- updateBn

function bnNet2(): nn.Sequential {
  return new nn.Sequential(
    new nn.Linear(3, 4),
    new nn.BatchNorm1d(4),
    new nn.ReLU(),
    new nn.Linear(4, 4),
    new nn.BatchNorm1d(4, { momentum: 0.3 }),
  );
}

backendTest(
  "updateBn: running statistics over a loader as PyTorch, momenta and mode restored",
  async (device) => {
    const c = fixtures.update_bn;
    const net = bnNet2().to(device);
    net.loadStateDict(stateOf(c.initial_state as Record<string, Values>, device));
    net.eval();
    const batches = c.batches.map((b) => fixtureTensor(b, device));
    const loader = batches.map((b, i) => c.tuple_batches[i] ? [b, zeros([b.shape[0]])] : b);
    updateBn(loader, net);
    await assertState(net, c.state_after as Record<string, Values>, device, "updateBn");
    assert.equal(net.training, c.training_after);
    const bns = [net.at(1), net.at(4)] as nn.BatchNorm1d[];
    assert.deepEqual(bns.map((b) => b.momentum), c.momenta_after);
  },
);

backendTest(
  "updateBn: a dict batch (or an array whose first entry is not a Tensor) goes to the model as is, as PyTorch",
  async (device) => {
    const c = fixtures.update_bn;
    // PyTorch's update_bn takes batch[0] of a list or tuple and passes anything else (a DataLoader's
    // collated dict) to model(input) unchanged.
    class DictNet extends nn.Module {
      net = bnNet2();
      override forward(batch: unknown): Tensor {
        const { x } = batch as { x: Tensor };
        return this.net.forward(x) as Tensor;
      }
    }
    class PairNet extends nn.Module {
      net = bnNet2();
      override forward(pair: unknown): Tensor {
        return this.net.forward((pair as Tensor[])[0]) as Tensor;
      }
    }
    const initial = stateOf(c.initial_state as Record<string, Values>, device);
    const batches = c.batches.map((b) => fixtureTensor(b, device));
    const dict = new DictNet().to(device);
    dict.net.loadStateDict(initial);
    updateBn(batches.map((x) => ({ x })), dict);
    await assertState(dict.net, c.state_after as Record<string, Values>, device, "dict batches");
    const pair = new PairNet().to(device);
    pair.net.loadStateDict(initial);
    updateBn(batches.map((x) => [[x, x], zeros([1])]), pair);
    await assertState(pair.net, c.state_after as Record<string, Values>, device, "nested batches");
    // PyTorch's input.to(device) fails on a dict: named here.
    assert.throws(
      () => updateBn([{ x: batches[0] }], dict, { device }),
      /updateBn: batch 0 is an Object, not a Tensor: options\.device moves only Tensor batches/,
    );
  },
);

Deno.test("updateBn: no BatchNorm leaves the model alone; bad batches are named", () => {
  const m = new nn.Linear(2, 2).eval();
  updateBn([zeros([1, 2])], m);
  assert.equal(m.training, false);
  const net = bnNet2();
  assert.throws(
    () => updateBn([["x"]] as unknown as Tensor[], net),
    /batch 0 must be a Tensor.*got string/,
  );
  assert.deepEqual(
    [(net.at(1) as nn.BatchNorm1d).momentum, (net.at(4) as nn.BatchNorm1d).momentum],
    [0.1, 0.3],
    "momenta restored after an error",
  );
  assert.throws(
    () => updateBn(5 as unknown as Tensor[], net),
    /loader must be iterable, got number/,
  );
});

// ---------------------------------------------------------------- prune

const PR = fixtures.prune;

backendTest(
  "prune.l1Unstructured: masks as PyTorch (fractions rounded half to even, counts)",
  async (device) => {
    for (const c of PR.l1_unstructured) {
      if (!c.amount_is_int && c.amount === 1) continue; // PyTorch's 1.0: a count here (see Amount)
      const m = new Holder(c.weight, device);
      P.l1Unstructured(m, "weight", { amount: c.amount });
      assert.deepEqual(await maskOf(m), decodeFixture(c.mask), `amount ${c.amount}`);
      await assertTensor(fields(m).weight, decodeFixture(c.pruned_weight), tol(device));
    }
  },
);

backendTest(
  "prune.l1Unstructured: ties prune PyTorch's count, the earliest first",
  async (device) => {
    for (const c of PR.l1_ties) {
      const m = new Holder(c.weight, device);
      P.l1Unstructured(m, "weight", { amount: c.amount });
      const mask = await maskOf(m);
      const expected = decodeFixture(c.mask);
      assert.equal(mask.filter((v) => v === 0).length, expected.filter((v) => v === 0).length);
      // Entries whose magnitude is below every tie's are pruned by both; above, kept by both.
      const w = decodeFixture(c.weight).map(Math.abs);
      const prunedMags = w.filter((_, i) => expected[i] === 0);
      const cut = Math.max(...prunedMags);
      w.forEach((v, i) => {
        if (v < cut) assert.equal(mask[i], 0, `entry ${i}`);
        if (v > cut) assert.equal(mask[i], 1, `entry ${i}`);
      });
      // multigrad: among the tied magnitudes, the earliest indices go first.
      const tied = w.map((v, i) => [v, i]).filter(([v]) => v === cut).map(([, i]) => i);
      const prunedTied = tied.filter((i) => mask[i] === 0);
      assert.deepEqual(prunedTied, tied.slice(0, prunedTied.length));
    }
    const t = PR.ln_ties;
    const m = new Holder(t.weight, device);
    P.lnStructured(m, "weight", { amount: t.amount, n: t.n, dim: t.dim });
    // Rows 0-2 tie in norm, row 3 is smallest: PyTorch keeps rows 1 and 2, multigrad 0 and 1.
    assert.deepEqual(await maskOf(m), [1, 1, 1, 1, 0, 0, 0, 0]);
    assert.deepEqual(decodeFixture(t.mask).slice(6), [0, 0]);
  },
);

backendTest(
  "prune.lnStructured: masks as PyTorch (n 1, 2, ±inf, fro; dims; counts, fractions)",
  async (device) => {
    for (const c of PR.ln_structured) {
      const m = new Holder(c.weight, device);
      const n = c.n === "fro" ? "fro" : Number(c.n);
      P.lnStructured(m, "weight", { amount: c.amount, n, dim: c.dim });
      assert.deepEqual(await maskOf(m), decodeFixture(c.mask), JSON.stringify({ ...c, weight: 0 }));
    }
  },
);

backendTest(
  "prune: a slice whose mask sums to zero counts as pruned, as PyTorch's container",
  async (device) => {
    const c = PR.zero_sum_mask;
    const m = new Holder(c.weight, device);
    P.customFromMask(m, "weight", fixtureTensor(c.custom, device));
    P.lnStructured(m, "weight", { amount: c.amount, n: c.n, dim: c.dim });
    assert.deepEqual(await maskOf(m), decodeFixture(c.mask));
  },
);

backendTest("prune: pruning again ranks the pruned weight, as PyTorch", async (device) => {
  const c = PR.masked_norm;
  const m = new Holder(c.weight, device);
  P.l1Unstructured(m, "weight", { amount: c.l1_amount });
  P.lnStructured(m, "weight", { amount: c.amount, n: c.n, dim: c.dim });
  assert.deepEqual(await maskOf(m), decodeFixture(c.mask));
});

backendTest("prune: importanceScores rank instead of the values", async (device) => {
  const c = PR.importance_scores;
  const m = new Holder(c.weight, device);
  P.l1Unstructured(m, "weight", {
    amount: c.l1_amount,
    importanceScores: fixtureTensor(c.scores, device),
  });
  assert.deepEqual(await maskOf(m), decodeFixture(c.l1_mask));
  const m2 = new Holder(c.weight, device);
  P.lnStructured(m2, "weight", {
    amount: c.ln_amount,
    n: c.ln_n,
    dim: c.ln_dim,
    importanceScores: fixtureTensor(c.scores, device),
  });
  assert.deepEqual(await maskOf(m2), decodeFixture(c.ln_mask));
  assert.throws(
    () =>
      P.l1Unstructured(new Holder(c.weight, device), "weight", {
        amount: 1,
        importanceScores: zeros([2]),
      }),
    /same shape as parameter weight of Holder: \[2\] vs \[3, 4\]/,
  );
});

function convWith(values: Values, device: Device): nn.Conv2d {
  const w = fixtureTensor(values, device);
  const conv = new nn.Conv2d(w.shape[1], w.shape[0], [w.shape[2], w.shape[3]]).to(device);
  noGrad(() => {
    conv.weight.copy_(w);
    conv.bias!.zero_();
  });
  return conv;
}

backendTest(
  "prune: iterative pruning composes the masks as PyTorch's PruningContainer; forward and gradients",
  async (device) => {
    const c = PR.iterative;
    const conv = convWith(c.weight, device);
    const weightOrig = conv.weight;
    for (const [i, s] of c.steps.entries()) {
      const o = s.options as unknown as Record<string, number>;
      if (s.kind === "l1") P.l1Unstructured(conv, "weight", { amount: o.amount });
      else if (s.kind === "ln") {
        P.lnStructured(conv, "weight", { amount: o.amount, n: o.n, dim: o.dim });
      } else {P.customFromMask(
          conv,
          "weight",
          fixtureTensor((s.options as { mask: Values }).mask, device),
        );}
      assert.deepEqual(await maskOf(conv), decodeFixture(s.mask), `step ${i} (${s.kind})`);
      assert.deepEqual(Object.keys(conv.stateDict()), s.keys);
    }
    assert.equal(fields(conv).weight_orig, weightOrig, "the same Parameter object");
    assert.deepEqual(conv.parameters().length, 2);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const y = conv.forward(x);
    await assertTensor(y, decodeFixture(c.output), tol(device));
    y.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertTensor(weightOrig.grad!, decodeFixture(c.grad_weight_orig), tol(device));
    await assertTensor(conv.bias!.grad!, decodeFixture(c.grad_bias), tol(device));
    await assertTensor(x.grad!, decodeFixture(c.grad_input), tol(device));
    P.remove(conv, "weight");
    assert.deepEqual(Object.keys(conv.stateDict()), c.removed_keys);
    assert.equal(conv.weight, weightOrig);
    await assertTensor(conv.weight, decodeFixture(c.removed_weight), tol(device));
    assert.equal(P.isPruned(conv), false);
  },
);

backendTest(
  "prune.globalUnstructured: one ranking over several parameters, earlier masks respected",
  async (device) => {
    for (const c of PR.global) {
      const a = new nn.Linear(4, 3).to(device);
      const b = new nn.Linear(3, 2).to(device);
      const conv = convWith(c.c_weight, device);
      noGrad(() => {
        a.weight.copy_(fixtureTensor(c.a_weight, device));
        b.weight.copy_(fixtureTensor(c.b_weight, device));
        conv.bias!.copy_(fixtureTensor(c.c_bias, device));
      });
      P.l1Unstructured(b, "weight", { amount: 2 });
      assert.deepEqual(await maskOf(b), decodeFixture(c.b_mask_before));
      P.globalUnstructured([[a, "weight"], [b, "weight"], [conv, "weight"], [conv, "bias"]], {
        pruningMethod: P.L1Unstructured,
        amount: c.amount,
      });
      const got = [
        await maskOf(a),
        await maskOf(b),
        await maskOf(conv),
        await maskOf(conv, "bias"),
      ];
      assert.deepEqual(got, c.masks.map((v) => decodeFixture(v)), `amount ${c.amount}`);
      assert.deepEqual(Object.keys(conv.stateDict()), c.c_keys);
    }
    assert.throws(
      () =>
        P.globalUnstructured([[new nn.Linear(2, 2), "weight"]], {
          pruningMethod: P.RandomStructured as unknown as typeof P.L1Unstructured,
          amount: 1,
        }),
      /Only "unstructured".*RandomStructured of type structured/,
    );
  },
);

backendTest(
  "prune: a pruned Linear's keys, forward and gradients w.r.t. weight_orig; remove",
  async (device) => {
    const c = PR.linear;
    const lin = new nn.Linear(5, 3).to(device);
    noGrad(() => {
      lin.weight.copy_(fixtureTensor(c.weight_orig_init, device));
      lin.bias!.copy_(tensor([0.1, -0.2, 0.3], { device }));
    });
    P.l1Unstructured(lin, "weight", { amount: 6 });
    P.l1Unstructured(lin, "bias", { amount: 1 });
    assert.deepEqual(Object.keys(lin.stateDict()), c.keys);
    assert.deepEqual(lin.namedParameters().map(([n]) => n), c.named_parameters);
    assert.deepEqual(lin.namedBuffers().map(([n]) => n), c.named_buffers);
    assert.equal(P.isPruned(new nn.Sequential(new nn.ReLU(), lin)), true);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const y = lin.forward(x);
    await assertTensor(y, decodeFixture(c.output), tol(device));
    y.mul(fixtureTensor(c.g, device)).sum().backward();
    const f = fields(lin);
    await assertTensor(f.weight_orig.grad!, decodeFixture(c.grads.weight_orig), tol(device));
    await assertTensor(f.bias_orig.grad!, decodeFixture(c.grads.bias_orig), tol(device));
    await assertTensor(x.grad!, decodeFixture(c.grads.input), tol(device));
    P.remove(lin, "bias");
    assert.deepEqual(Object.keys(lin.stateDict()), c.keys_after_bias_removed);
    P.remove(lin, "weight");
    assert.deepEqual(Object.keys(lin.stateDict()), c.keys_after_removed);
    await assertTensor(lin.weight, decodeFixture(c.weight), tol(device));
    await assertTensor(lin.bias!, decodeFixture(c.removed_bias), tol(device));
    assert.equal(P.isPruned(lin), c.is_pruned_after);
    assert.ok(lin.weight instanceof nn.Parameter);
  },
);

Deno.test("prune.identity: a mask of ones, keys as PyTorch", async () => {
  const c = PR.identity;
  const lin = P.identity(new nn.Linear(3, 2), "weight");
  assert.deepEqual(Object.keys(lin.stateDict()), c.keys);
  assert.deepEqual(await maskOf(lin), decodeFixture(c.mask));
  assert.equal(P.isPruned(new nn.Sequential(new nn.ReLU(), lin)), c.is_pruned);
});

Deno.test("prune: random methods prune the right count, structured ones whole slices", async () => {
  manualSeed(7);
  const lin = new nn.Linear(10, 6);
  P.randomUnstructured(lin, "weight", { amount: 0.3 });
  let mask = await maskOf(lin);
  assert.equal(mask.filter((v) => v === 0).length, 18);
  // Later prunes choose among the unpruned entries only.
  P.randomUnstructured(lin, "weight", { amount: 7 });
  mask = await maskOf(lin);
  assert.equal(mask.filter((v) => v === 0).length, 25);
  P.randomUnstructured(lin, "weight", { amount: 0.5 }); // of 35 left: 17.5 → 18 (half to even)
  assert.equal((await maskOf(lin)).filter((v) => v === 0).length, 43);
  // Structured: whole columns (dim 1) of a fresh weight.
  const lin2 = new nn.Linear(10, 6);
  P.randomStructured(lin2, "weight", { amount: 4, dim: 1 });
  const m2 = await maskOf(lin2);
  const cols = Array.from(
    { length: 10 },
    (_, j) => Array.from({ length: 6 }, (_, i) => m2[i * 10 + j]),
  );
  assert.ok(cols.every((col) => col.every((v) => v === col[0])), "whole columns");
  assert.equal(cols.filter((col) => col[0] === 0).length, 4);
  // Then rows: 0.5 of 6 rows, whatever the columns did.
  P.randomStructured(lin2, "weight", { amount: 0.5, dim: 0 });
  const m3 = await maskOf(lin2);
  const rows = Array.from({ length: 6 }, (_, i) => m3.slice(i * 10, i * 10 + 10));
  assert.equal(rows.filter((r) => r.every((v) => v === 0)).length, 3);
  // Same seed, same choice.
  manualSeed(11);
  const a = P.randomUnstructured(new nn.Linear(4, 4), "weight", { amount: 5 });
  manualSeed(11);
  const b = P.randomUnstructured(new nn.Linear(4, 4), "weight", { amount: 5 });
  assert.deepEqual(await maskOf(a), await maskOf(b));
});

Deno.test("prune: the weight follows weight_orig between forwards; assigning it throws", async () => {
  const lin = P.customFromMask(new nn.Linear(2, 2), "weight", tensor([[1, 0], [0, 1]]));
  noGrad(() => fields(lin).weight_orig.fill_(3));
  assert.deepEqual(Array.from(await lin.weight.data()), [3, 0, 0, 3]);
  assert.throws(() => {
    lin.weight = new nn.Parameter(zeros([2, 2]));
  }, /computed by pruning from weight_orig and weight_mask/);
  // An optimizer built before pruning keeps training weight_orig.
  const lin2 = new nn.Linear(2, 1);
  const opt = new optim.SGD(lin2.parameters(), { lr: 1 });
  P.customFromMask(lin2, "weight", tensor([[0, 1]]));
  noGrad(() => fields(lin2).weight_orig.copy_(tensor([[1, 1]])));
  lin2.forward(tensor([[2, 3]])).sum().backward();
  opt.step();
  assert.deepEqual(Array.from(await fields(lin2).weight_orig.data()), [1, -2]);
});

Deno.test("prune: errors name the bad amount, name, dim or shape (PyTorch's messages)", () => {
  const lin = () => new nn.Linear(2, 2);
  assert.throws(
    () => P.l1Unstructured(lin(), "weight", { amount: 5 }),
    /amount=5 should be smaller than the number of parameters to prune=4/,
  );
  assert.throws(
    () => P.l1Unstructured(lin(), "weight", { amount: -1 }),
    /amount=-1 should either be a float in the range \[0, 1\] or a non-negative integer/,
  );
  assert.throws(
    () => P.randomUnstructured(lin(), "weight", { amount: 1.5 }),
    /amount=1.5 should either be a float/,
  );
  assert.throws(
    () => P.l1Unstructured(lin(), "weight", { amount: -0.5 }),
    /amount=-0.5 should either be a float/,
  );
  assert.throws(
    () => P.l1Unstructured(lin(), "weight", { amount: "1" as unknown as number }),
    /Invalid type for amount: 1. Must be int or float/,
  );
  assert.throws(
    () => P.l1Unstructured(lin(), "foo", { amount: 1 }),
    /Linear has no parameter "foo"/,
  );
  assert.throws(
    () => P.lnStructured(lin(), "weight", { amount: 1, n: 2, dim: 2 }),
    /Invalid index 2 for tensor of size \[2, 2\]/,
  );
  assert.throws(
    () => P.lnStructured(lin(), "weight", { amount: 1, n: 2, dim: -3 }),
    /Invalid index -3 for tensor of size \[2, 2\]/,
  );
  assert.throws(
    () => P.randomStructured(lin(), "bias", { amount: 1, dim: 0 }),
    /multidimensional tensors. Found tensor of shape \[2\] with 1 dims/,
  );
  assert.throws(
    () => P.lnStructured(lin(), "weight", { amount: 3, n: 2, dim: 0 }),
    /amount=3 should be smaller than the number of parameters to prune=2/,
  );
  assert.throws(
    () => P.remove(lin(), "weight"),
    /Parameter 'weight' of module Linear has to be pruned/,
  );
  assert.throws(
    () => P.customFromMask(lin(), "weight", zeros([3])),
    /mask has shape \[3\], the parameter \[2, 2\]/,
  );
  // A failed prune changes nothing.
  const m = lin();
  assert.throws(() => P.lnStructured(m, "weight", { amount: 1, n: 2, dim: 5 }));
  assert.deepEqual(Object.keys(m.stateDict()), ["weight", "bias"]);
  assert.equal(P.isPruned(m), false);
  const container = new P.PruningContainer();
  const method = new P.L1Unstructured(1);
  method.tensorName = "bias";
  assert.throws(() => container.addPruningMethod(method), /parameter named ''.*Found 'bias'/);
});

Deno.test("prune: computeMask and prune act on plain tensors, as PyTorch's methods", async () => {
  const t = tensor([3, -1, 2, 0.5]);
  const mask = new P.L1Unstructured(2).computeMask(t, tensor([1, 1, 0, 1]));
  // Over all of t (not restricted to the default mask's ones), as PyTorch.
  assert.deepEqual(Array.from(await mask.data()), [1, 0, 0, 0]);
  assert.deepEqual(Array.from(await new P.L1Unstructured(0.5).prune(t).data()), [3, -0, 2, 0]);
});

check(
  "prune: L1Unstructured.prune is differentiable (mask times t)",
  (w) => new P.L1Unstructured(3).prune(w),
  [inp([3, 4], 601)],
);
check(
  "prune: LnStructured.prune is differentiable",
  (w) => new P.LnStructured(1, 2, 0).prune(w),
  [inp([3, 4], 602)],
);

Deno.test("prune: pruning again more than is left unpruned raises PyTorch's error at the next read", async () => {
  const m = new nn.Linear(3, 2); // 6 weights
  P.l1Unstructured(m, "weight", { amount: 4 });
  await m.weight.data(); // 2 left: no error yet
  P.l1Unstructured(m, "weight", { amount: 3 });
  await assert.rejects(
    () => m.weight.data(),
    /amount=3 should be smaller than the number of parameters to prune=2/,
  );
  const ok = new nn.Linear(3, 2);
  P.l1Unstructured(ok, "weight", { amount: 4 });
  P.l1Unstructured(ok, "weight", { amount: 2 }); // exactly what is left
  assert.deepEqual(await maskOf(ok), [0, 0, 0, 0, 0, 0]);
});
