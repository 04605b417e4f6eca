/**
 * optim.lrScheduler against PyTorch 1.13 (tests/fixtures/torch_toolkit.json
 * `lr_schedulers`): the learning rate of every group after construction and
 * after each of 30 steps (and OneCycleLR's cycled momentum), for StepLR,
 * MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, OneCycleLR,
 * LambdaLR, ReduceLROnPlateau, PolynomialLR, CosineAnnealingWarmRestarts,
 * CyclicLR, SequentialLR and ChainedScheduler; state dicts that resume mid-schedule
 * (through JSON) onto the same numbers; errors.
 *
 * The schedules are float64 arithmetic in the same order as PyTorch's, and
 * they agree to the last bit (compared exactly).
 */

import assert from "node:assert/strict";
import { nn, optim, tensor, zeros } from "../mod.ts";
import { assertClose } from "./harness.ts";
import fixtures from "./fixtures/torch_toolkit.json" with { type: "json" };

const { lrScheduler } = optim;
type Case = (typeof fixtures.lr_schedulers.cases)[number];
type Scheduler = optim.lrScheduler.EpochScheduler | optim.lrScheduler.ReduceLROnPlateau;

interface ChildSpec {
  scheduler: string;
  args: unknown[];
  options: Record<string, unknown>;
}

const LAMBDAS: Record<string, optim.lrScheduler.LrLambda> = {
  pow095: (e) => 0.95 ** e,
  inverse: (e) => 1.0 / (1 + e),
  linear_down: (e) => 1 - e / 40,
};

function makeOptimizer(c: Case): optim.Optimizer<object> {
  const groups = c.group_lrs.map((lr) => ({ params: [new nn.Parameter(zeros([2]))], lr }));
  if (c.optimizer === "Adam") return new optim.Adam(groups);
  return new optim.SGD(groups, { lr: 0, ...c.optimizer_options });
}

function makeScheduler(c: ChildSpec, opt: optim.Optimizer<object>): Scheduler {
  const args = c.args as unknown[];
  const options = c.options as Record<string, unknown>;
  const children = () =>
    (args[0] as ChildSpec[]).map((child) =>
      makeScheduler(child, opt) as optim.lrScheduler.LRScheduler
    );
  switch (c.scheduler) {
    case "SequentialLR":
      return new lrScheduler.SequentialLR(opt, children(), args[1] as number[]);
    case "ChainedScheduler":
      return new lrScheduler.ChainedScheduler(children());
    case "PolynomialLR":
      return new lrScheduler.PolynomialLR(opt, options);
    case "CosineAnnealingWarmRestarts":
      return new lrScheduler.CosineAnnealingWarmRestarts(opt, args[0] as number, options);
    case "CyclicLR":
      return new lrScheduler.CyclicLR(
        opt,
        args[0] as number | number[],
        args[1] as number | number[],
        options,
      );
    case "StepLR":
      return new lrScheduler.StepLR(opt, args[0] as number, options);
    case "MultiStepLR":
      return new lrScheduler.MultiStepLR(opt, args[0] as number[], options);
    case "ExponentialLR":
      return new lrScheduler.ExponentialLR(opt, args[0] as number, options);
    case "CosineAnnealingLR":
      return new lrScheduler.CosineAnnealingLR(opt, args[0] as number, options);
    case "LinearLR":
      return new lrScheduler.LinearLR(opt, options);
    case "OneCycleLR":
      return new lrScheduler.OneCycleLR(
        opt,
        options as unknown as optim.lrScheduler.OneCycleLROptions,
      );
    case "LambdaLR": {
      const names = args[0];
      const fns = Array.isArray(names) ? names.map((n) => LAMBDAS[n]) : LAMBDAS[names as string];
      return new lrScheduler.LambdaLR(opt, fns, options);
    }
    case "ReduceLROnPlateau":
      return new lrScheduler.ReduceLROnPlateau(opt, options);
  }
  throw new Error(`unknown scheduler ${c.scheduler}`);
}

function stepOnce(_c: Case, opt: optim.Optimizer<object>, scheduler: Scheduler, i: number): void {
  opt.step();
  if (scheduler instanceof lrScheduler.ReduceLROnPlateau) {
    scheduler.step(fixtures.lr_schedulers.plateau_metrics[i]);
  } else scheduler.step();
}

function momentaOf(c: Case, opt: optim.Optimizer<object>): number[] {
  return opt.paramGroups.map((g) => {
    const group = g as unknown as { momentum?: number; betas?: number[] };
    return c.momentum_key === "betas" ? group.betas![0] : group.momentum!;
  });
}

const CLOSE = { atol: 0, rtol: 0 };

for (const c of fixtures.lr_schedulers.cases) {
  Deno.test(`${c.scheduler} ${c.name}: the lr of every step equals PyTorch's`, () => {
    const opt = makeOptimizer(c);
    const scheduler = makeScheduler(c, opt);
    const lrs = [opt.paramGroups.map((g) => (g as unknown as { lr: number }).lr)];
    const lastLrs = [scheduler.getLastLr()];
    const momenta = [momentaOf(c, opt)];
    for (let i = 0; i < fixtures.lr_schedulers.steps; i++) {
      stepOnce(c, opt, scheduler, i);
      lrs.push(opt.paramGroups.map((g) => (g as unknown as { lr: number }).lr));
      lastLrs.push(scheduler.getLastLr());
      momenta.push(momentaOf(c, opt));
    }
    lrs.forEach((lr, i) => {
      assertClose(lr, c.lrs[i], { ...CLOSE, what: `step ${i} lr` });
      assert.deepEqual(lastLrs[i], lr, `step ${i}: getLastLr() is the groups' lr`);
    });
    if (c.momenta) {
      momenta.forEach((m, i) =>
        assertClose(m, c.momenta![i], { ...CLOSE, what: `step ${i} momentum` })
      );
    }
  });

  Deno.test(`${c.scheduler} ${c.name}: state dicts resume mid-schedule on PyTorch's numbers`, () => {
    const opt = makeOptimizer(c);
    const scheduler = makeScheduler(c, opt);
    const resumeAt = 10;
    for (let i = 0; i < resumeAt; i++) stepOnce(c, opt, scheduler, i);
    // Through JSON, as a checkpoint keeps them.
    const saved = JSON.parse(
      JSON.stringify({ optimizer: opt.stateDict(), scheduler: scheduler.stateDict() }),
    );
    const opt2 = makeOptimizer(c);
    const scheduler2 = makeScheduler(c, opt2);
    opt2.loadStateDict(saved.optimizer);
    scheduler2.loadStateDict(saved.scheduler);
    assert.deepEqual(scheduler2.getLastLr(), c.lrs[resumeAt]);
    for (let i = resumeAt; i < fixtures.lr_schedulers.steps; i++) {
      stepOnce(c, opt2, scheduler2, i);
      assertClose(
        opt2.paramGroups.map((g) => (g as unknown as { lr: number }).lr),
        c.lrs[i + 1],
        { ...CLOSE, what: `resumed step ${i + 1}` },
      );
      if (c.momenta) assertClose(momentaOf(c, opt2), c.momenta[i + 1], CLOSE);
    }
  });
}

/** PyTorch's bookkeeping that multigrad has no use for (`verbose` printing, a warning's flag). */
const TORCH_ONLY_KEYS = new Set(["verbose", "_get_lr_called_within_step"]);
/** Keys PyTorch 1.13 does not write: 2.x's `_anneal_func_type` (1.13 kept the function). */
const OWN_ONLY_KEYS = new Set(["_anneal_func_type"]);

/** The fixture's JSON form of a state dict as values: "Infinity" strings back to numbers. */
function fromFixture(value: unknown): optim.lrScheduler.SchedulerStateValue {
  if (value === "Infinity") return Infinity;
  if (value === "-Infinity") return -Infinity;
  if (Array.isArray(value)) return value.map(fromFixture);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fromFixture(v)]));
  }
  return value as optim.lrScheduler.SchedulerStateValue;
}

/** `mine` has every key of PyTorch's `torch` (bookkeeping aside) with the same value, and no other. */
function assertSameState(mine: unknown, torch: unknown, path: string): void {
  if (torch === null || typeof torch !== "object" || Array.isArray(torch)) {
    if (Array.isArray(torch) && Array.isArray(mine)) {
      assert.equal(mine.length, torch.length, `${path}: length`);
      torch.forEach((v, i) => assertSameState(mine[i], v, `${path}[${i}]`));
      return;
    }
    assert.deepEqual(mine, torch, path);
    return;
  }
  assert.ok(mine !== null && typeof mine === "object", `${path}: expected an object`);
  const own = mine as Record<string, unknown>;
  for (const [k, v] of Object.entries(torch)) {
    if (TORCH_ONLY_KEYS.has(k)) continue;
    assert.ok(k in own, `${path}: no "${k}" (keys: ${Object.keys(own).join(", ")})`);
    assertSameState(own[k], v, `${path}.${k}`);
  }
  for (const k of Object.keys(own)) {
    assert.ok(k in torch || OWN_ONLY_KEYS.has(k), `${path}: "${k}" is not PyTorch's`);
  }
}

const STATE_AT = 10;

for (const c of fixtures.lr_schedulers.cases) {
  Deno.test(`${c.scheduler} ${c.name}: stateDict() after ${STATE_AT} steps is PyTorch's`, () => {
    const opt = makeOptimizer(c);
    const scheduler = makeScheduler(c, opt);
    for (let i = 0; i < STATE_AT; i++) stepOnce(c, opt, scheduler, i);
    assertSameState(scheduler.stateDict(), fromFixture(c.state_dict), c.name);
  });

  Deno.test(`${c.scheduler} ${c.name}: PyTorch's state_dict() loads as is and resumes`, () => {
    const opt = makeOptimizer(c);
    const scheduler = makeScheduler(c, opt);
    // The optimizer's groups as PyTorch's were at that step (their lr and momentum live there).
    opt.paramGroups.forEach((g, i) => {
      const group = g as unknown as { lr: number; momentum?: number; betas?: number[] };
      group.lr = c.lrs[STATE_AT][i];
      if (c.momentum_key === "betas") group.betas = [c.momenta![STATE_AT][i], group.betas![1]];
      else if (c.momentum_key) group.momentum = c.momenta![STATE_AT][i];
    });
    scheduler.loadStateDict(fromFixture(c.state_dict) as optim.lrScheduler.SchedulerStateDict);
    assert.deepEqual(scheduler.getLastLr(), c.lrs[STATE_AT]);
    for (let i = STATE_AT; i < fixtures.lr_schedulers.steps; i++) {
      stepOnce(c, opt, scheduler, i);
      assertClose(
        opt.paramGroups.map((g) => (g as unknown as { lr: number }).lr),
        c.lrs[i + 1],
        { ...CLOSE, what: `resumed step ${i + 1}` },
      );
      if (c.momenta) assertClose(momentaOf(c, opt), c.momenta[i + 1], CLOSE);
    }
  });
}

Deno.test("a scheduler loads the camelCase state dicts of earlier multigrad checkpoints", () => {
  const opt = new optim.SGD([new nn.Parameter(zeros([1]))], { lr: 0.1 });
  const scheduler = new lrScheduler.MultiStepLR(opt, [2], { gamma: 0.5 });
  scheduler.loadStateDict({
    baseLrs: [0.1],
    lastEpoch: 4,
    stepCount: 5,
    lastLr: [0.025],
    milestones: [3, 5],
    gamma: 0.5,
  });
  assert.deepEqual(scheduler.milestones, [3, 5]);
  assert.equal(scheduler.lastEpoch, 4);
  assert.deepEqual(scheduler.stateDict().milestones, { 3: 1, 5: 1 });
});

Deno.test("the optimizer steps with the scheduled lr", async () => {
  const p = new nn.Parameter(zeros([1]));
  const opt = new optim.SGD([p], { lr: 1 });
  const scheduler = new lrScheduler.StepLR(opt, 1, { gamma: 0.5 });
  for (let i = 0; i < 3; i++) {
    p.grad = tensor([1]);
    opt.step();
    scheduler.step();
  }
  assert.deepEqual(Array.from(await p.data()), [-1.75]);
  assert.equal(opt.paramGroups[0].lr, 0.125);
  // PyTorch keeps the starting rate in the group, and so in the optimizer's state dict.
  assert.equal(opt.stateDict().param_groups[0].initial_lr, 1);
});

Deno.test("lastEpoch resumes a schedule on an optimizer that holds initialLr", () => {
  const c = fixtures.lr_schedulers.cases.find((x) => x.name === "cosine")!;
  const opt = makeOptimizer(c);
  assert.throws(
    () => new lrScheduler.CosineAnnealingLR(opt, 10, { lastEpoch: 4 }),
    /param 'initialLr' is not specified in paramGroups\[0\] when resuming/,
  );
  (opt.paramGroups[0] as unknown as { initialLr: number }).initialLr = 0.1;
  // The first step of a resumed cosine schedule uses the closed form: epoch 5's lr.
  const scheduler = new lrScheduler.CosineAnnealingLR(opt, 10, { lastEpoch: 4, etaMin: 0.001 });
  assertClose(scheduler.getLastLr(), c.lrs[5], CLOSE);
});

Deno.test("ReduceLROnPlateau: best survives JSON as null before the first metric", () => {
  const opt = new optim.SGD([new nn.Parameter(zeros([1]))], { lr: 0.1 });
  const a = new lrScheduler.ReduceLROnPlateau(opt, { mode: "max", patience: 0 });
  const sd = JSON.parse(JSON.stringify(a.stateDict()));
  assert.equal(sd.best, null);
  const b = new lrScheduler.ReduceLROnPlateau(opt, { mode: "max" });
  b.loadStateDict(sd);
  assert.equal(b.best, -Infinity);
  assert.equal(b.patience, 0, "settings come from the state dict");
  b.step(1);
  assert.equal(b.best, 1);
});

Deno.test("scheduler errors are clear", () => {
  const p = new nn.Parameter(zeros([1]));
  const sgd = new optim.SGD([p], { lr: 0.1 });
  const S = lrScheduler;
  assert.throws(
    () => new S.StepLR({} as optim.Optimizer<object>, 3),
    /StepLR: Object is not an Optimizer/,
  );
  assert.throws(() => new S.StepLR(sgd, 0), /StepLR: stepSize must be an integer >= 1, got 0/);
  assert.throws(() => new S.MultiStepLR(sgd, [2, -1]), /milestones\[1\] must be an integer >= 0/);
  assert.throws(() => new S.LinearLR(sgd, { startFactor: 0 }), /startFactor must be in \(0, 1\]/);
  assert.throws(() => new S.LambdaLR(sgd, [(e) => e, (e) => e]), /expected 1 lrLambdas, but got 2/);
  assert.throws(
    () => new S.LambdaLR(sgd, () => NaN),
    /lrLambda 0 returned NaN for epoch 0/,
  );
  assert.throws(
    () => new S.OneCycleLR(sgd, { maxLr: 1 } as optim.lrScheduler.OneCycleLROptions),
    /either totalSteps OR \(epochs AND stepsPerEpoch\)/,
  );
  assert.throws(
    () => new S.OneCycleLR(new optim.Adagrad([p]), { maxLr: 1, totalSteps: 5 }),
    /optimizer Adagrad must support momentum/,
  );
  assert.throws(
    () => new S.OneCycleLR(sgd, { maxLr: [1, 2], totalSteps: 5 }),
    /expected 1 values for maxLr, got 2/,
  );
  const cycle = new S.OneCycleLR(new optim.SGD([p], { lr: 0.1 }), { maxLr: 1, totalSteps: 3 });
  for (let i = 0; i < 3; i++) cycle.step();
  const before = cycle.stateDict();
  assert.throws(
    () => cycle.step(),
    /tried to step 5 times; the specified number of total steps is 3/,
  );
  assert.deepEqual(cycle.stateDict(), before, "a refused step changes nothing");
  const plateau = new S.ReduceLROnPlateau(sgd);
  assert.throws(
    () => plateau.step(tensor(1) as unknown as number),
    /metric must be a number, got object \(read a tensor with await t.item\(\)\)/,
  );
  assert.throws(
    () => new S.ReduceLROnPlateau(sgd, { factor: 1 }),
    /factor should be >= 0 and < 1.0/,
  );
  assert.throws(
    () => new S.ReduceLROnPlateau(sgd, { mode: "up" as "min" }),
    /mode "up" is unknown/,
  );
  const step = new S.StepLR(sgd, 2);
  assert.throws(
    () => step.loadStateDict({ last_epoch: 3 }),
    /StepLR.loadStateDict: the state dict has no "base_lrs"/,
  );
  const bad = { ...step.stateDict(), gamma: "0.1" };
  assert.throws(() => step.loadStateDict(bad), /"gamma" must be a number, got string/);
});

Deno.test("CyclicLR: a custom scaleFn (triangular2's, by cycle) gives triangular2's PyTorch lrs", () => {
  const c = fixtures.lr_schedulers.cases.find((x) =>
    x.name === "cyclic_triangular2_up_down_two_groups"
  )!;
  const opt = makeOptimizer(c);
  const { mode: _mode, ...options } = c.options as Record<string, unknown>;
  const scheduler = new lrScheduler.CyclicLR(opt, [0.01, 0.02], [0.1, 0.3], {
    ...options,
    scaleFn: (cycle) => 1 / 2 ** (cycle - 1),
    scaleMode: "cycle",
  });
  for (let i = 0; i <= fixtures.lr_schedulers.steps; i++) {
    assertClose(scheduler.getLastLr(), c.lrs[i], { ...CLOSE, what: `step ${i}` });
    opt.step();
    if (i < fixtures.lr_schedulers.steps) scheduler.step();
  }
  assert.equal("scaleFn" in scheduler.stateDict(), false, "functions are not state");
});

Deno.test("CosineAnnealingWarmRestarts.step(epoch) takes fractional epochs and restarts", () => {
  const opt = new optim.SGD([new nn.Parameter(zeros([1]))], { lr: 0.1 });
  const scheduler = new lrScheduler.CosineAnnealingWarmRestarts(opt, 2, { tMult: 2, etaMin: 0.01 });
  const at = (tCur: number, tI: number) =>
    0.01 + (0.1 - 0.01) * (1 + Math.cos(Math.PI * tCur / tI)) / 2;
  // Periods: [0, 2), [2, 6), [6, 14).
  for (const [epoch, tCur, tI] of [[0.5, 0.5, 2], [2.5, 0.5, 4], [5.75, 3.75, 4], [7, 1, 8]]) {
    scheduler.step(epoch);
    assert.equal(scheduler.tCur, tCur, `epoch ${epoch}: tCur`);
    assert.equal(scheduler.tI, tI, `epoch ${epoch}: tI`);
    assert.equal(scheduler.getLastLr()[0], at(tCur, tI));
    assert.equal(scheduler.lastEpoch, Math.floor(epoch));
  }
  assert.throws(() => scheduler.step(-1), /expected a non-negative epoch, got -1/);
});

Deno.test("PolynomialLR, CyclicLR, CosineAnnealingWarmRestarts, SequentialLR, ChainedScheduler errors", () => {
  const p = new nn.Parameter(zeros([1]));
  const sgd = new optim.SGD([p], { lr: 0.1 });
  const other = new optim.SGD([new nn.Parameter(zeros([1]))], { lr: 0.1 });
  const S = lrScheduler;
  assert.throws(
    () => new S.PolynomialLR(sgd, { totalIters: 0 }),
    /totalIters must be an integer >= 1/,
  );
  assert.throws(
    () => new S.CosineAnnealingWarmRestarts(sgd, 0),
    /t0 must be an integer >= 1, got 0/,
  );
  assert.throws(
    () => new S.CosineAnnealingWarmRestarts(sgd, 3, { tMult: 1.5 }),
    /tMult must be an integer >= 1, got 1.5/,
  );
  assert.throws(
    () => new S.CyclicLR(new optim.Adam([p]), 0.01, 0.1),
    /optimizer Adam must support momentum with cycleMomentum enabled/,
  );
  assert.throws(
    () => new S.CyclicLR(sgd, 0.01, 0.1, { mode: "sine" as "triangular" }),
    /mode "sine" is invalid .* and no scaleFn is given/,
  );
  assert.throws(
    () => new S.CyclicLR(sgd, [0.01, 0.02], 0.1),
    /expected 1 values for baseLr, got 2/,
  );
  assert.throws(
    () => new S.CyclicLR(sgd, 0.01, 0.1, { stepSizeUp: 0 }),
    /stepSizeUp must be positive/,
  );
  const a = new S.ExponentialLR(sgd, 0.9);
  const b = new S.StepLR(sgd, 2);
  assert.throws(
    () => new S.SequentialLR(sgd, [a, b], [2, 3]),
    /one milestone fewer than schedulers, got 2 schedulers and 2 milestones/,
  );
  assert.throws(
    () => new S.SequentialLR(sgd, [a, new S.StepLR(other, 2)], [2]),
    /same optimizer, but schedulers\[1\] has a different one/,
  );
  assert.throws(
    () => new S.SequentialLR(other, [a, b], [2]),
    /same optimizer, but schedulers\[0\] has a different one/,
  );
  assert.throws(
    () =>
      new S.ChainedScheduler([
        a,
        new S.ReduceLROnPlateau(sgd) as unknown as optim.lrScheduler.LRScheduler,
      ]),
    /schedulers\[1\] is not a chainable scheduler, got ReduceLROnPlateau/,
  );
  assert.throws(() => new S.ChainedScheduler([]), /expected a non-empty array of schedulers/);
  const chained = new S.ChainedScheduler([a, b]);
  assert.throws(
    () => chained.loadStateDict({ _last_lr: [0.1], _schedulers: [] }),
    /"_schedulers" must be an array of 2 state dicts, got 0/,
  );
});
