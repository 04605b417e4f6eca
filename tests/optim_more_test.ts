/**
 * Rprop, ASGD, LBFGS, ConstantLR and MultiplicativeLR against PyTorch 1.13
 * (`fixtures/torch_optim_more.json`, from `fixtures/torch_optim_more.py`): Rprop and ASGD
 * every step's parameters on an MLP, the state dict after step 3 (PyTorch's keys, order and
 * numbers) and PyTorch's own state dict loaded and resumed; LBFGS's returned losses, closure
 * evaluations, parameters and history (state dict) after every step on a Rosenbrock-like function
 * and a regression, float32 and float64, with and without the strong-Wolfe line search, resumed
 * from PyTorch's history; the schedules' learning rates and state dicts; and the errors.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, optim, type Tensor, tensor, tidy } from "../mod.ts";
import { assertClose, assertTensor, backendTest } from "./harness.ts";
import fixture from "./fixtures/torch_optim_more.json" with { type: "json" };

type MlpRun = (typeof fixture.mlp_runs)[number];
type LbfgsRun = (typeof fixture.lbfgs_runs)[number];
type SchedulerRun = (typeof fixture.schedulers)[number];
type Nested = number | Nested[];
type AnyOptions = Record<string, unknown>;
const { lrScheduler } = optim;

function camel(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** PyTorch's group flags that pick an implementation; multigrad has one, so it writes none. */
const TORCH_ONLY = new Set(["foreach", "fused", "capturable", "differentiable"]);

const OPTIMIZERS: Record<
  string,
  new (
    params: Iterable<Tensor> | Iterable<AnyOptions & { params: Tensor[] }>,
    o: AnyOptions,
  ) => optim.Optimizer<object>
> = {
  Rprop: optim.Rprop as never,
  ASGD: optim.ASGD as never,
};

// ---------------------------------------------------------------- Rprop and ASGD on an MLP

function mlp(values: Record<string, Nested>, device: Device): nn.Sequential {
  const model = new nn.Sequential(new nn.Linear(5, 7), new nn.ReLU(), new nn.Linear(7, 3)).to(
    device,
  );
  model.loadStateDict(
    Object.fromEntries(
      Object.entries(values).map(([k, v]) => [k, tensor(v as number[], { device })]),
    ),
  );
  return model;
}

function make(run: MlpRun, model: nn.Sequential, options: AnyOptions): optim.Optimizer<object> {
  const named = new Map(model.namedParameters());
  const params = run.groups === null ? model.parameters() : run.groups.map((g) => ({
    ...g.options as AnyOptions,
    params: g.params.map((name) => named.get(name)!),
  }));
  return new OPTIMIZERS[run.optimizer](params, options);
}

function tolerance(device: Device) {
  const cpu = device.backend === "cpu";
  return { atol: cpu ? 1e-6 : 1e-5, rtol: cpu ? 1e-5 : 1e-4 };
}

async function train(
  run: MlpRun,
  model: nn.Sequential,
  opt: optim.Optimizer<object>,
  device: Device,
  from: number,
  atStep?: (step: number) => Promise<void>,
): Promise<void> {
  const lossFn = new nn.CrossEntropyLoss();
  for (let i = from; i < run.steps; i++) {
    const batch = fixture.batches[i];
    const x = tensor(batch.input, { device });
    const y = tensor(batch.target, { device, dtype: "int32" });
    const loss = tidy(() => {
      opt.zeroGrad();
      const loss = lossFn.forward(model.forward(x), y);
      loss.backward();
      opt.step();
      return loss;
    });
    assertClose(await loss.item(), run.losses[i], {
      ...tolerance(device),
      what: `loss before step ${i + 1}`,
    });
    for (const t of [x, y, loss]) t.dispose();
    for (const [name, p] of model.namedParameters()) {
      const expected = (run.params_after[i] as Record<string, Nested>)[name];
      await assertTensor(p, expected, {
        ...tolerance(device),
        what: `${name} after step ${i + 1}`,
      });
    }
    await atStep?.(i + 1);
  }
}

function torchStateDict(run: MlpRun, device: Device): optim.OptimizerStateDict {
  const state: optim.OptimizerStateDict["state"] = {};
  for (const [index, entry] of Object.entries(run.state_dict.state)) {
    state[Number(index)] = Object.fromEntries(
      Object.entries(entry).map((
        [k, v],
      ) => [k, typeof v === "number" ? v : tensor(v as number[], { device })]),
    );
  }
  return {
    state,
    param_groups: run.state_dict.param_groups as unknown as optim.OptimizerStateDict[
      "param_groups"
    ],
  };
}

for (const run of fixture.mlp_runs) {
  backendTest(
    `${run.optimizer} ${run.name}: ${run.steps} steps and the state dict after step ${run.state_after} match PyTorch`,
    async (device) => {
      const model = mlp(fixture.init, device);
      const opt = make(run, model, run.options);
      await train(run, model, opt, device, 0, async (step) => {
        if (step !== run.state_after) return;
        const sd = opt.stateDict();
        const expected = run.state_dict.param_groups.map((g) =>
          Object.fromEntries(Object.entries(g).filter(([k]) => !TORCH_ONLY.has(k)))
        );
        assert.deepEqual(sd.param_groups, expected);
        if (run.groups === null) {
          assert.deepEqual(Object.keys(sd.param_groups[0]), Object.keys(expected[0]), "key order");
        }
        assert.deepEqual(Object.keys(sd.state), Object.keys(run.state_dict.state));
        for (const [index, torchEntry] of Object.entries(run.state_dict.state)) {
          const mine = sd.state[Number(index)];
          assert.deepEqual(Object.keys(mine), Object.keys(torchEntry), `state ${index} keys`);
          for (const [k, v] of Object.entries(torchEntry)) {
            const what = `state ${index} ${k}`;
            // step, and ASGD's float32 eta and mu: the same number, exactly.
            if (typeof v === "number") assert.equal(mine[k], v, what);
            else {
              assertClose(await (mine[k] as Tensor).data(), (v as Nested[]).flat(2) as number[], {
                ...tolerance(device),
                what,
              });
            }
          }
        }
        for (const entry of Object.values(sd.state)) {
          for (const v of Object.values(entry)) if (typeof v !== "number") v.dispose();
        }
      });
    },
  );

  backendTest(
    `${run.optimizer} ${run.name}: PyTorch's state dict after step ${run.state_after} loads as is and resumes to step ${run.steps}`,
    async (device) => {
      const model = mlp(run.params_after[run.state_after - 1], device);
      // Other hyper-parameters than PyTorch's: the loaded groups must replace them.
      const opt = make(run, model, { lr: 0.5 });
      opt.loadStateDict(torchStateDict(run, device));
      const [first] = opt.paramGroups as unknown as AnyOptions[];
      for (const [k, v] of Object.entries(run.torch_kwargs)) {
        if (run.groups === null) assert.deepEqual(first[camel(k)], v, `group option ${k}`);
      }
      await train(run, model, opt, device, run.state_after);
    },
  );
}

Deno.test("the fixture's Rprop and ASGD runs reach the branches they are there for", () => {
  // Guards the fixture: regenerating with other options could silently leave these untested.
  const averaging = fixture.mlp_runs.find((r) => r.name === "asgd_averaging")!;
  assert.ok(averaging.steps - averaging.options.t0! > 1, "mu < 1 within the run");
  const bounds = fixture.mlp_runs.find((r) => r.name === "rprop_bounds")!;
  const [etaminus] = bounds.options.etas!;
  assert.ok(bounds.options.lr! * etaminus < bounds.options.stepSizes![0], "a flip clamps");
});

// ------------------------------------------------------------------------------ LBFGS

const PROBLEMS = fixture.problems;

/** The run's parameters in its dtype, in the fixture's key order. */
function lbfgsParams(
  run: LbfgsRun,
  values: Record<string, Nested>,
  device: Device,
): Map<string, nn.Parameter> {
  const dtype = run.dtype as "float32" | "float64";
  const init = PROBLEMS[run.problem as keyof typeof PROBLEMS].init as Record<string, Nested>;
  return new Map(
    Object.keys(init).map((
      k,
    ) => [k, new nn.Parameter(tensor(values[k] as number[], { device, dtype }))]),
  );
}

/** The run's loss of `p`, as the fixture's problem computes it. */
function objective(run: LbfgsRun, p: Map<string, nn.Parameter>, device: Device): Tensor {
  const dtype = run.dtype as "float32" | "float64";
  if (run.problem === "rosenbrock") {
    const u = p.get("u")!;
    const v = p.get("v")!;
    return v.sub(u.mul(u)).square().mul(100).add(u.neg().add(1).square()).sum();
  }
  const x = tensor(PROBLEMS.regression.x, { device, dtype });
  const y = tensor(PROBLEMS.regression.y, { device, dtype });
  const out = x.matmul(p.get("weight")!.t()).add(p.get("bias")!);
  return out.sub(y).square().mean();
}

/** PyTorch's LBFGS state dict from the fixture: lists as tensors in the run's dtype. */
function torchLbfgsState(
  run: LbfgsRun,
  sd: LbfgsRun["state_dicts"][number],
  device: Device,
): optim.LBFGSStateDict {
  const dtype = run.dtype as "float32" | "float64";
  const vec = (v: unknown) => v === null ? null : tensor(v as number[], { device, dtype });
  const state: Record<number, optim.LBFGSState> = {};
  for (const [index, entry] of Object.entries(sd.state)) {
    const e = entry as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(e)) {
      if (k === "d" || k === "prev_flat_grad") out[k] = vec(v);
      else if (k === "old_dirs" || k === "old_stps") out[k] = (v as number[][]).map(vec);
      else out[k] = v;
    }
    state[Number(index)] = out as unknown as optim.LBFGSState;
  }
  return {
    state,
    param_groups: sd.param_groups as unknown as optim.OptimizerStateDict["param_groups"],
  };
}

function lbfgsTolerance(run: LbfgsRun, device: Device) {
  // float32: PyTorch keeps part of the scalar arithmetic in float32 0-d tensors, multigrad part in
  // float64 (see LBFGS's notes), and the reductions sum in another order; over three steps of
  // Rosenbrock these last-digit differences grow to ~3e-5 (cpu) and ~2.5e-4 (WebGPU).
  if (run.dtype === "float64") return { atol: 1e-9, rtol: 1e-8 };
  return device.backend === "cpu" ? { atol: 1e-4, rtol: 1e-4 } : { atol: 5e-4, rtol: 5e-4 };
}

/**
 * The history's tolerance. In float32 its vectors `y` are differences of nearly equal gradients
 * (and `ro`, `al` come from them): the gradients' last-digit differences (another summation order)
 * are amplified there (most on WebGPU, whose float32 arithmetic differs more), while the parameters
 * stay within {@link lbfgsTolerance}; float64 checks the history tightly.
 */
function historyTolerance(run: LbfgsRun, device: Device) {
  if (run.dtype === "float64") return lbfgsTolerance(run, device);
  return device.backend === "cpu" ? { atol: 1e-3, rtol: 1e-3 } : { atol: 1e-2, rtol: 1e-2 };
}

/** Checks `sd` (multigrad's) against PyTorch's `expected`, key order included. */
async function assertSameLbfgsState(
  sd: optim.LBFGSStateDict,
  expected: LbfgsRun["state_dicts"][number],
  close: { atol: number; rtol: number },
  what: string,
): Promise<void> {
  assert.deepEqual(sd.param_groups, expected.param_groups, `${what}: param_groups`);
  assert.deepEqual(Object.keys(sd.state), Object.keys(expected.state), `${what}: state indices`);
  for (const [index, torchEntry] of Object.entries(expected.state)) {
    const mine = sd.state[Number(index)] as unknown as Record<string, unknown>;
    const theirs = torchEntry as Record<string, unknown>;
    assert.deepEqual(Object.keys(mine), Object.keys(theirs), `${what}: state keys`);
    for (const [k, v] of Object.entries(theirs)) {
      const m = mine[k];
      const at = `${what}: ${k}`;
      if (k === "func_evals" || k === "n_iter") assert.equal(m, v, at);
      else if (v === null) assert.equal(m, null, at);
      else if (k === "d" || k === "prev_flat_grad") {
        assertClose(await (m as Tensor).data(), v as number[], { ...close, what: at });
      } else if (Array.isArray(v)) {
        const list = m as unknown[];
        assert.equal(list.length, v.length, `${at}: length`);
        for (let i = 0; i < v.length; i++) {
          const x = v[i];
          if (x === null) assert.equal(list[i], null, `${at}[${i}]`);
          else if (Array.isArray(x)) {
            assertClose(await (list[i] as Tensor).data(), x as number[], {
              ...close,
              what: `${at}[${i}]`,
            });
          } else assertClose(list[i] as number, x as number, { ...close, what: `${at}[${i}]` });
        }
      } else assertClose(m as number, v as number, { ...close, what: at });
    }
  }
}

function disposeState(sd: optim.LBFGSStateDict): void {
  for (const entry of Object.values(sd.state)) {
    for (const v of Object.values(entry)) {
      for (const x of Array.isArray(v) ? v : [v]) {
        if (x instanceof Object && "dispose" in x) (x as Tensor).dispose();
      }
    }
  }
}

/** Steps `from` to the run's end with the fixture's closure, checking every step. */
async function lbfgsTrain(
  run: LbfgsRun,
  params: Map<string, nn.Parameter>,
  opt: optim.LBFGS,
  device: Device,
  from: number,
): Promise<void> {
  const close = lbfgsTolerance(run, device);
  let evaluations = 0;
  const closure = () => {
    opt.zeroGrad();
    const loss = objective(run, params, device);
    loss.backward();
    evaluations += 1;
    return loss;
  };
  for (let i = from; i < run.steps; i++) {
    evaluations = 0;
    const loss = await opt.step(closure);
    assertClose(await loss.item(), run.losses[i], { ...close, what: `loss of step ${i + 1}` });
    loss.dispose();
    assert.equal(evaluations, run.evaluations[i], `closure evaluations in step ${i + 1}`);
    for (const [name, p] of params) {
      await assertTensor(p, (run.params_after[i] as Record<string, Nested>)[name], {
        ...close,
        what: `${name} after step ${i + 1}`,
      });
    }
    const sd = opt.stateDict();
    await assertSameLbfgsState(
      sd,
      run.state_dicts[i],
      historyTolerance(run, device),
      `state after step ${i + 1}`,
    );
    disposeState(sd);
  }
}

for (const run of fixture.lbfgs_runs) {
  const only64 = run.dtype === "float64";
  backendTest(
    `LBFGS ${run.name}: ${run.steps} steps (losses, evaluations, parameters, history) match PyTorch`,
    async (device) => {
      if (only64 && device.backend !== "cpu") return; // no float64 on WebGPU
      const params = lbfgsParams(
        run,
        PROBLEMS[run.problem as keyof typeof PROBLEMS].init as Record<string, Nested>,
        device,
      );
      const opt = new optim.LBFGS(params.values(), run.options as optim.LBFGSOptions);
      await lbfgsTrain(run, params, opt, device, 0);
    },
  );

  backendTest(
    `LBFGS ${run.name}: PyTorch's state dict after step ${run.steps - 1} loads as is and resumes`,
    async (device) => {
      if (only64 && device.backend !== "cpu") return;
      const from = run.steps - 1;
      const params = lbfgsParams(run, run.params_after[from - 1] as Record<string, Nested>, device);
      // Other hyper-parameters than PyTorch's: the loaded group must replace them.
      const opt = new optim.LBFGS(params.values(), { lr: 0.3, maxIter: 2 });
      opt.loadStateDict(torchLbfgsState(run, run.state_dicts[from - 1], device));
      for (const [k, v] of Object.entries(run.torch_kwargs)) {
        assert.deepEqual((opt.paramGroups[0] as unknown as AnyOptions)[camel(k)], v, k);
      }
      await lbfgsTrain(run, params, opt, device, from);
    },
  );
}

backendTest(
  "LBFGS: its own state dict round-trips, and the copy resumes as the original",
  async (device) => {
    const run = fixture.lbfgs_runs.find((r) => r.name === "rosen_wolfe")!;
    const params = lbfgsParams(run, PROBLEMS.rosenbrock.init, device);
    const opt = new optim.LBFGS(params.values(), run.options as optim.LBFGSOptions);
    const closure = () => {
      opt.zeroGrad();
      const loss = objective(run, params, device);
      loss.backward();
      return loss;
    };
    (await opt.step(closure)).dispose();
    const saved = opt.stateDict();
    const json = JSON.parse(JSON.stringify({ ...saved, state: {} }));
    const copyParams = lbfgsParams(
      run,
      Object.fromEntries(
        await Promise.all([...params].map(async ([k, p]) => [k, await p.toArray()] as const)),
      ) as Record<string, Nested>,
      device,
    );
    const copy = new optim.LBFGS(copyParams.values(), {});
    copy.loadStateDict({ ...json, state: saved.state });
    disposeState(saved);
    const copyClosure = () => {
      copy.zeroGrad();
      const loss = objective(run, copyParams, device);
      loss.backward();
      return loss;
    };
    // The loaded tensors are copies: disposing the dict's does not reach the optimizer.
    (await opt.step(closure)).dispose();
    (await copy.step(copyClosure)).dispose();
    for (const [k, p] of params) {
      assert.deepEqual(await copyParams.get(k)!.data(), await p.data(), k);
    }
    assert.deepEqual(copy.stateDict().state[0].n_iter, opt.stateDict().state[0].n_iter);
  },
);

backendTest("LBFGS: steps hold no memory beyond the history", async (device) => {
  // historySize 2: once the history is full, every step drops as many pairs as it adds.
  for (const lineSearchFn of [null, "strong_wolfe"] as const) {
    const u = new nn.Parameter(tensor([-1.2, 0.5, -0.3], { device }));
    const v = new nn.Parameter(tensor([1, 0.2, 0.8], { device }));
    const opt = new optim.LBFGS([u, v], { lr: 0.05, maxIter: 4, historySize: 2, lineSearchFn });
    const closure = () => {
      opt.zeroGrad();
      const loss = v.sub(u.mul(u)).square().mul(100).add(u.neg().add(1).square()).sum();
      loss.backward();
      return loss;
    };
    const used: number[] = [];
    for (let i = 0; i < 6; i++) {
      (await opt.step(closure)).dispose();
      used.push(device.memory().bytesInUse);
    }
    assert.equal(used[5], used[2], `${lineSearchFn}: ${used.join(", ")}`);
    // At most the history's d, prev_flat_grad and 2 pairs of 6 float32 (WebGPU rounds buffers up).
    assert.ok(used[5] <= used[0] + 4 * 64, `${lineSearchFn}: ${used.join(", ")}`);
  }
});

backendTest("LBFGS: one device read per iteration and one per evaluation", async (device) => {
  // Each read waits for the device (~11 ms on a GPU in Deno): a step reads its first loss with
  // the gradient's largest element, then each iteration reads once before moving (g·d and the
  // two-loop coefficients) and once per evaluation (the loss, g·d in the line search, and what
  // the iteration's stop tests and the next curvature pair need).
  const stream = device.stream as unknown as { read: (f: () => Promise<unknown>) => unknown };
  const original = stream.read;
  let reads = 0;
  stream.read = function (this: unknown, f) {
    reads += 1;
    return original.call(this, f);
  };
  try {
    for (const lineSearchFn of [null, "strong_wolfe"] as const) {
      const u = new nn.Parameter(tensor([-1.2, 0.5, -0.3], { device }));
      const v = new nn.Parameter(tensor([1, 0.2, 0.8], { device }));
      const opt = new optim.LBFGS([u, v], {
        lr: lineSearchFn ? 1 : 1e-3,
        maxIter: 8,
        historySize: 4,
        toleranceGrad: 0,
        toleranceChange: 0,
        lineSearchFn,
      });
      const closure = () => {
        opt.zeroGrad();
        const loss = v.sub(u.mul(u)).square().mul(100).add(u.neg().add(1).square()).sum();
        loss.backward();
        return loss;
      };
      let [iterations, evaluations] = [0, 0];
      for (let i = 0; i < 3; i++) {
        reads = 0;
        const loss = await opt.step(closure);
        const counted = reads;
        const { n_iter, func_evals } = opt.stateDict().state[0];
        const [stepIterations, stepEvaluations] = [n_iter - iterations, func_evals - evaluations];
        [iterations, evaluations] = [n_iter, func_evals];
        assert.ok(stepIterations >= 4, `${lineSearchFn}: ${stepIterations} iterations`);
        // Without a line search the last iteration evaluates nothing (as PyTorch's): one read less
        // than the iterations and evaluations would say, which the step's first read makes up.
        const expected = stepIterations + stepEvaluations;
        assert.equal(counted, expected, `${lineSearchFn}, step ${i + 1}`);
        loss.dispose();
      }
      disposeState(opt.stateDict());
    }
  } finally {
    stream.read = original;
  }
});

backendTest(
  "LBFGS: a closure that throws mid-step leaks neither its loss nor gradients",
  async (device) => {
    // Each evaluation of the step in turn throws: the first (the loss the step would return),
    // line-search evaluations whose gradients the search holds, and the ones after.
    for (const lineSearchFn of [null, "strong_wolfe"] as const) {
      let throws = 0;
      for (let failAt = 1; failAt <= 8; failAt++) {
        const u = new nn.Parameter(tensor([-1.2, 0.5, -0.3], { device }));
        const v = new nn.Parameter(tensor([1, 0.2, 0.8], { device }));
        const opt = new optim.LBFGS([u, v], { lr: 0.1, maxIter: 6, historySize: 1, lineSearchFn });
        let calls = 0;
        let throwAt = Infinity;
        const closure = () => {
          calls += 1;
          if (calls === throwAt) throw new Error("closure failed");
          opt.zeroGrad();
          const loss = v.sub(u.mul(u)).square().mul(100).add(u.neg().add(1).square()).sum();
          loss.backward();
          return loss;
        };
        for (let i = 0; i < 2; i++) (await opt.step(closure)).dispose();
        opt.zeroGrad();
        const before = device.memory().bytesInUse;
        calls = 0;
        throwAt = failAt;
        const thrown = await opt.step(closure).then((loss) => {
          loss.dispose();
          return false;
        }, (error: Error) => error.message === "closure failed");
        // A step that makes fewer evaluations than failAt does not fail: nothing to check then.
        if (!thrown) continue;
        throws += 1;
        opt.zeroGrad();
        assert.equal(device.memory().bytesInUse, before, `${lineSearchFn}, evaluation ${failAt}`);
        throwAt = Infinity;
        (await opt.step(closure)).dispose();
      }
      assert.ok(throws >= 6, `${lineSearchFn}: only ${throws} steps threw`);
    }
  },
);

backendTest(
  "LBFGS: step needs a closure, one step at a time, and a loss tensor",
  async (device) => {
    const p = new nn.Parameter(tensor([1, 2], { device }));
    const opt = new optim.LBFGS([p]);
    // Thrown at the call, not as a rejection.
    assert.throws(
      () => (opt.step as unknown as () => void)(),
      /LBFGS.step: needs a closure .*got undefined/,
    );
    assert.throws(() => opt.step(null as never), /got null/);
    const closure = () => {
      opt.zeroGrad();
      const loss = p.square().sum();
      loss.backward();
      return loss;
    };
    const first = opt.step(closure);
    assert.throws(() => opt.step(closure), /the previous step has not finished/);
    (await first).dispose();
    await assert.rejects(
      opt.step(() => 3 as never),
      /the closure must return the loss as a Tensor, got number/,
    );
    await assert.rejects(
      opt.step(() => p.mul(1)),
      /the closure's loss must have one element, got shape \[2\]/,
    );
    // A zero gradient is optimal: the step returns after one evaluation, p unchanged.
    const q = new nn.Parameter(tensor([0, 0], { device }));
    const still = new optim.LBFGS([q]);
    let calls = 0;
    const loss = await still.step(() => {
      calls += 1;
      still.zeroGrad();
      const l = q.square().sum();
      l.backward();
      return l;
    });
    assert.equal(calls, 1);
    assert.equal(await loss.item(), 0);
    assert.deepEqual(Object.keys(still.stateDict().state[0]), ["func_evals", "n_iter"]);
  },
);

Deno.test("LBFGS: learning-rate schedulers take it (its step is async, typed as such)", async () => {
  const u = new nn.Parameter(tensor([-1.2, 0.5, -0.3]));
  const v = new nn.Parameter(tensor([1, 0.2, 0.8]));
  const opt = new optim.LBFGS([u, v], { lr: 0.5, maxIter: 2 });
  // Type-checked: a scheduler takes any optimizer (AnyOptimizer), LBFGS's included.
  const warmup = new lrScheduler.ConstantLR(opt, { factor: 0.5, totalIters: 2 });
  const decay = new lrScheduler.MultiplicativeLR(opt, () => 0.9);
  const chained = new lrScheduler.ChainedScheduler([warmup, decay]);
  // LBFGS is not a drop-in Optimizer<object> (whose step returns at once), and says so in its type.
  // @ts-expect-error: LBFGS's step returns a promise
  const plain: optim.Optimizer<object> = opt;
  const stepped: Promise<Tensor> = opt.step(() => {
    opt.zeroGrad();
    const loss = v.sub(u.mul(u)).square().mul(100).add(u.neg().add(1).square()).sum();
    loss.backward();
    return loss;
  });
  (await stepped).dispose();
  const lrs = [opt.paramGroups[0].lr];
  for (let i = 0; i < 3; i++) {
    chained.step();
    lrs.push(opt.paramGroups[0].lr);
  }
  // PyTorch 1.13: ChainedScheduler([ConstantLR(factor=0.5, total_iters=2), MultiplicativeLR(0.9)]).
  const expected = [0.25, 0.25 * 0.9, 0.5 * 0.9 * 0.9, 0.5 * 0.9 ** 3];
  lrs.forEach((lr, i) =>
    assertClose(lr, expected[i], { atol: 1e-15, rtol: 1e-12, what: `lr ${i}` })
  );
  assert.equal(opt.stateDict().param_groups[0].lr, lrs[3]);
  assert.equal(plain, opt);
  disposeState(opt.stateDict());
});

Deno.test("LBFGS: a rejected curvature pair (y·s <= 1e-10) keeps PyTorch's empty al", async () => {
  // A linear loss: its gradient never changes, so y = 0 and no pair enters the history.
  const x = new nn.Parameter(tensor([1, 2, 3], { dtype: "float64" }));
  const c = tensor([0.5, -1, 2], { dtype: "float64" });
  const opt = new optim.LBFGS([x], { maxIter: 3, historySize: 4 });
  (await opt.step(() => {
    opt.zeroGrad();
    const loss = c.mul(x).sum();
    loss.backward();
    return loss;
  })).dispose();
  const sd = opt.stateDict();
  const state = sd.state[0];
  // PyTorch 1.13's state_dict()["state"][0] keys, al, func_evals and n_iter, and x after the step.
  assert.deepEqual(Object.keys(state), [
    "func_evals",
    "n_iter",
    "al",
    "d",
    "t",
    "old_dirs",
    "old_stps",
    "ro",
    "H_diag",
    "prev_flat_grad",
    "prev_loss",
  ]);
  assert.deepEqual(state.al, [null, null, null, null]);
  assert.deepEqual([state.func_evals, state.n_iter, state.old_dirs?.length], [3, 2, 0]);
  assertClose(await x.data(), [0.3571428571428572, 3.2857142857142856, 0.4285714285714288], {
    atol: 1e-12,
    rtol: 1e-12,
    what: "x",
  });
  disposeState(sd);
});

Deno.test("LBFGS: one parameter group, PyTorch's defaults, checked options", () => {
  const p = () => new nn.Parameter(tensor([1, 2]));
  assert.throws(
    () => new optim.LBFGS([{ params: [p()] }, { params: [p()], lr: 0.1 }]),
    /LBFGS doesn't support per-parameter options \(parameter groups\)/,
  );
  const opt = new optim.LBFGS([p()]);
  assert.throws(() => opt.addParamGroup({ params: [p()] }), /parameter groups/);
  assert.deepEqual({ ...opt.defaults }, {
    lr: 1,
    maxIter: 20,
    maxEval: 25,
    toleranceGrad: 1e-7,
    toleranceChange: 1e-9,
    historySize: 100,
    lineSearchFn: null,
  });
  assert.equal(new optim.LBFGS([p()], { maxIter: 7 }).defaults.maxEval, 8);
  const bad: [AnyOptions, RegExp][] = [
    [{ lr: -1 }, /LBFGS: invalid learning rate: -1/],
    [{ maxIter: 0 }, /LBFGS: maxIter must be an integer >= 1, got 0/],
    [{ maxEval: 2.5 }, /LBFGS: maxEval must be an integer >= 1, got 2.5/],
    [{ historySize: 0 }, /LBFGS: historySize must be an integer >= 1, got 0/],
    [{ toleranceGrad: -1 }, /LBFGS: invalid toleranceGrad: -1/],
    [{ toleranceChange: NaN }, /LBFGS: invalid toleranceChange: NaN/],
    [
      { lineSearchFn: "backtracking" },
      /only 'strong_wolfe' is supported as lineSearchFn \(or null\), got "backtracking"/,
    ],
    [{ momentum: 0.9 }, /LBFGS: unknown option "momentum" \(LBFGS takes lr, maxIter/],
    [{ max_iter: 3 }, /unknown option "max_iter"/],
  ];
  for (const [options, message] of bad) {
    assert.throws(
      () => new optim.LBFGS([p()], options as optim.LBFGSOptions),
      message,
      JSON.stringify(options),
    );
  }
  assert.throws(() => new optim.LBFGS([p()], { lr: -1 }), RangeError);
  assert.throws(() => new optim.LBFGS([p()], { momentum: 1 } as never), TypeError);
  // Changed between steps: the next step refuses, before evaluating anything.
  opt.paramGroups[0].lineSearchFn = "wolfe" as never;
  let called = false;
  assert.throws(() =>
    opt.step(() => {
      called = true;
      return tensor(0);
    }), /only 'strong_wolfe'/);
  assert.equal(called, false);
});

Deno.test("LBFGS: every parameter on one device with one dtype", () => {
  const a = new nn.Parameter(tensor([1, 2]));
  const b = new nn.Parameter(tensor([1], { dtype: "float64" }));
  const opt = new optim.LBFGS([a, b]);
  assert.throws(
    () => opt.step(() => a.sum()),
    /every parameter must be on one device with one dtype: parameter 1 is float64 on cpu.*, parameter 0 float32/,
  );
});

Deno.test("LBFGS.loadStateDict refuses a wrong history, and then changes nothing", () => {
  const run = fixture.lbfgs_runs.find((r) => r.name === "regression")!;
  const device = undefined as unknown as Device;
  const params = lbfgsParams(run, PROBLEMS.regression.init, device);
  const opt = new optim.LBFGS(params.values(), { lr: 0.7 });
  const good = () => torchLbfgsState(run, run.state_dicts[0], device);
  const entry = (sd: optim.LBFGSStateDict) => sd.state[0] as unknown as Record<string, unknown>;
  const cases: [(sd: optim.LBFGSStateDict) => void, RegExp][] = [
    [
      (sd) => entry(sd).exp_avg = 1,
      /state 0 has "exp_avg", which L-BFGS does not keep.*another optimizer's/,
    ],
    [(sd) => delete entry(sd).n_iter, /state 0 lacks "n_iter"/],
    [(sd) => delete entry(sd).ro, /state 0 lacks "ro"/],
    [(sd) => entry(sd).d = tensor([1, 2, 3]), /state "d" has shape \[3\], expected \[4\]/],
    [
      (sd) => entry(sd).old_dirs = [tensor([1, 2, 3, 4])],
      /old_dirs, old_stps and ro must have one entry per curvature pair, got 1, \d+ and \d+/,
    ],
    [
      (sd) => entry(sd).t = tensor(1),
      /state "t" must be a number or null, got a tensor of shape \[\].*item/,
    ],
    [
      (sd) => entry(sd).ro = [1, "x", 3].slice(0, (entry(sd).ro as number[]).length),
      /ro\[1\] must be a number/,
    ],
    [
      (sd) => sd.state[1] = entry(sd) as never,
      /state for parameter index 1: L-BFGS keeps its history under index 0 only/,
    ],
    [
      (sd) => (sd.param_groups[0] as AnyOptions).max_iter = 0,
      /maxIter must be an integer >= 1, got 0/,
    ],
  ];
  for (const [spoil, message] of cases) {
    const sd = good();
    spoil(sd);
    assert.throws(() => opt.loadStateDict(sd), message, String(message));
    assert.equal(opt.paramGroups[0].lr, 0.7, "unchanged");
    assert.deepEqual(opt.stateDict().state, {}, "no history loaded");
  }
});

// ------------------------------------------------------------------------------ errors

const BAD: [string, AnyOptions, RegExp][] = [
  ["Rprop", { lr: -1 }, /Rprop: invalid learning rate: -1/],
  ["Rprop", { etas: [0, 1.2] }, /Rprop: invalid eta values: 0, 1.2/],
  ["Rprop", { etas: [0.5, 1] }, /Rprop: invalid eta values: 0.5, 1/],
  ["Rprop", { etas: [1.5, 2] }, /Rprop: invalid eta values: 1.5, 2/],
  ["Rprop", { etas: [0.5] }, /Rprop: etas must be two numbers, got \[0.5\]/],
  ["Rprop", { stepSizes: [1e-6] }, /Rprop: stepSizes must be two numbers, got \[0.000001\]/],
  ["Rprop", { stepSizes: [NaN, 1] }, /Rprop: stepSizes must be two numbers/],
  ["Rprop", { maximize: 1 }, /Rprop: maximize must be a boolean/],
  ["ASGD", { lr: -0.1 }, /ASGD: invalid learning rate: -0.1/],
  ["ASGD", { weightDecay: -1 }, /ASGD: invalid weight_decay value: -1/],
  ["ASGD", { lambd: NaN }, /ASGD: lambd must be a number, got NaN/],
  ["ASGD", { alpha: "1" }, /ASGD: alpha must be a number, got 1/],
  ["ASGD", { t0: "5" }, /ASGD: t0 must be a number, got 5/],
  ["ASGD", { maximize: "no" }, /ASGD: maximize must be a boolean/],
];

backendTest(
  "Rprop and ASGD: bad hyper-parameters are errors, in the constructor, a group and at a step",
  (device) => {
    const p = () => new nn.Parameter(tensor([1, 2, 3], { device }));
    for (const [name, options, message] of BAD) {
      const Ctor = OPTIMIZERS[name];
      assert.throws(() => new Ctor([p()], options), message, `${name} ${JSON.stringify(options)}`);
      assert.throws(
        () => new Ctor([{ params: [p()] }, { params: [p()], ...options }], {}),
        message,
        `${name} group ${JSON.stringify(options)}`,
      );
      const q = p();
      const opt = new Ctor([q], {});
      Object.assign(opt.paramGroups[0], options);
      q.grad = tensor([1, 1, 1], { device });
      assert.throws(() => opt.step(), message, `${name} step ${JSON.stringify(options)}`);
    }
    assert.throws(
      () => new optim.Rprop([p()], { momentum: 0.9 } as never),
      /Rprop: unknown option "momentum" \(Rprop takes lr, etas, stepSizes, maximize\)/,
    );
    assert.throws(() => new optim.ASGD([p()], { step_sizes: [1, 2] } as never), TypeError);
    // PyTorch's limits themselves are accepted.
    new optim.Rprop([p()], { lr: 0, etas: [1e-9, 1.0000001] });
    new optim.ASGD([p()], { lr: 0, lambd: -1, t0: -5, alpha: 0 });
  },
);

backendTest("Rprop and ASGD: a state dict of another optimizer is refused", (device) => {
  const p = new nn.Parameter(tensor([1, 2, 3], { device }));
  const adam = new optim.Adam([p]);
  p.grad = tensor([1, 1, 1], { device });
  adam.step();
  const sd = adam.stateDict();
  const rprop = new optim.Rprop([p]);
  assert.throws(() => rprop.loadStateDict(sd), /state of parameter 0 lacks "prev", "stepSize"/);
  const asgd = new optim.ASGD([p]);
  assert.throws(() => asgd.loadStateDict(sd), /state of parameter 0 lacks "eta", "mu", "ax"/);
  const tensorEta = new optim.ASGD([p]);
  tensorEta.step();
  const bad = tensorEta.stateDict();
  bad.state[0].eta = tensor(0.01, { device });
  assert.throws(
    () => tensorEta.loadStateDict(bad),
    /state "eta" of parameter 0 must be a number, got a tensor/,
  );
});

Deno.test("Rprop and ASGD: defaults are PyTorch 1.13's", () => {
  const p = new nn.Parameter(tensor([1]));
  assert.deepEqual({ ...new optim.Rprop([p]).defaults }, {
    lr: 1e-2,
    etas: [0.5, 1.2],
    stepSizes: [1e-6, 50],
    maximize: false,
  });
  assert.deepEqual({ ...new optim.ASGD([p]).defaults }, {
    lr: 1e-2,
    lambd: 1e-4,
    alpha: 0.75,
    t0: 1e6,
    weightDecay: 0,
    maximize: false,
  });
  // A copy: editing the caller's array changes no group.
  const etas: [number, number] = [0.4, 1.3];
  const opt = new optim.Rprop([p], { etas });
  etas[0] = 2;
  assert.deepEqual(opt.paramGroups[0].etas, [0.4, 1.3]);
});

backendTest(
  "Rprop: a NaN gradient leaves the parameter and its step size, as PyTorch's",
  async (device) => {
    // PyTorch 1.13: sign(NaN) is 0, so the step size keeps its value (factor 1), sign(g) is 0 and
    // the parameter does not move; prev takes the NaN.
    const p = new nn.Parameter(tensor([1, 2], { device }));
    const opt = new optim.Rprop([p], { lr: 0.1 });
    p.grad = tensor([1, -1], { device });
    opt.step();
    p.grad = tensor([NaN, -1], { device });
    opt.step();
    assertClose(await p.data(), [0.9, 2.22], { what: "parameter" });
    const state = opt.state.get(p)!;
    assertClose(await (state.stepSize as Tensor).data(), [0.1, 0.12], { what: "step_size" });
    assertClose(await (state.prev as Tensor).data(), [NaN, -1], { what: "prev" });
  },
);

// ------------------------------------------------------------------------------ schedulers

const LAMBDAS: Record<string, (epoch: number) => number> = {
  "constant_0.9": () => 0.9,
  halve_odd: (e) => e % 2 === 1 ? 0.5 : 1.0,
  inverse: (e) => 1.0 / (e + 1),
};

function schedulerOptimizer(run: SchedulerRun): optim.SGD {
  return new optim.SGD(
    run.group_lrs.map((lr) => ({ params: [new nn.Parameter(tensor([0]))], lr })),
    { lr: 0.1 },
  );
}

function makeScheduler(run: SchedulerRun, opt: optim.SGD): optim.lrScheduler.LRScheduler {
  if (run.scheduler === "MultiplicativeLR") {
    const names = (run.options as { lrLambda: string | string[] }).lrLambda;
    const fns = Array.isArray(names) ? names.map((n) => LAMBDAS[n]) : LAMBDAS[names];
    return new lrScheduler.MultiplicativeLR(opt, fns);
  }
  return new lrScheduler.ConstantLR(opt, run.options as optim.lrScheduler.ConstantLROptions);
}

function lrsOf(opt: optim.SGD): number[] {
  return opt.paramGroups.map((g) => g.lr);
}

function stepScheduler(run: SchedulerRun, scheduler: optim.lrScheduler.LRScheduler, i: number) {
  if (run.epochs === null) scheduler.step();
  else scheduler.step(run.epochs[i]);
}

const EXACT = { atol: 0, rtol: 1e-15 };

for (const run of fixture.schedulers) {
  const steps = run.lrs.length - 1;
  Deno.test(`${run.scheduler} ${run.name}: learning rates and the state dict after ${run.state_at} steps are PyTorch's`, () => {
    const opt = schedulerOptimizer(run);
    const scheduler = makeScheduler(run, opt);
    assertClose(lrsOf(opt), run.lrs[0], { ...EXACT, what: "after construction" });
    for (let i = 0; i < steps; i++) {
      stepScheduler(run, scheduler, i);
      assertClose(lrsOf(opt), run.lrs[i + 1], { ...EXACT, what: `after step ${i + 1}` });
      assert.deepEqual(scheduler.getLastLr(), lrsOf(opt));
      if (i + 1 === run.state_at) {
        const sd = scheduler.stateDict();
        assert.deepEqual(Object.keys(sd).sort(), Object.keys(run.state_dict).sort(), "keys");
        for (const [k, v] of Object.entries(run.state_dict)) {
          if (Array.isArray(v) && typeof v[0] === "number") {
            assertClose(sd[k] as number[], v as number[], { ...EXACT, what: k });
          } else assert.deepEqual(sd[k], v, k);
        }
      }
    }
  });

  Deno.test(`${run.scheduler} ${run.name}: PyTorch's state dict loads as is and resumes`, () => {
    const opt = schedulerOptimizer(run);
    const scheduler = makeScheduler(run, opt);
    opt.paramGroups.forEach((g, i) => g.lr = run.lrs[run.state_at][i]);
    scheduler.loadStateDict(run.state_dict as unknown as optim.lrScheduler.SchedulerStateDict);
    assert.deepEqual(scheduler.getLastLr(), run.lrs[run.state_at]);
    for (let i = run.state_at; i < steps; i++) {
      stepScheduler(run, scheduler, i);
      assertClose(lrsOf(opt), run.lrs[i + 1], { ...EXACT, what: `resumed step ${i + 1}` });
    }
  });
}

Deno.test("ConstantLR and MultiplicativeLR: bad arguments are errors naming them", () => {
  const opt = new optim.SGD([
    { params: [new nn.Parameter(tensor([0]))] },
    { params: [new nn.Parameter(tensor([0]))] },
  ], { lr: 0.1 });
  assert.throws(
    () => new lrScheduler.ConstantLR(opt, { factor: 1.5 }),
    /ConstantLR: the constant multiplicative factor must be in \[0, 1\], got 1.5/,
  );
  assert.throws(() => new lrScheduler.ConstantLR(opt, { factor: -0.1 }), RangeError);
  assert.throws(
    () => new lrScheduler.ConstantLR(opt, { factor: NaN }),
    /factor must be a finite number, got NaN/,
  );
  assert.throws(
    () => new lrScheduler.ConstantLR(opt, { totalIters: 2.5 }),
    /ConstantLR: totalIters must be an integer >= 0, got 2.5/,
  );
  assert.throws(
    () => new lrScheduler.ConstantLR({} as never),
    /ConstantLR: Object is not an Optimizer/,
  );
  assert.throws(
    () => new lrScheduler.MultiplicativeLR(opt, [() => 1]),
    /MultiplicativeLR: expected 2 lrLambdas, but got 1/,
  );
  assert.throws(
    () => new lrScheduler.MultiplicativeLR(opt, 0.9 as never),
    /MultiplicativeLR: lrLambda 0 is not a function \(got number\)/,
  );
  const scheduler = new lrScheduler.MultiplicativeLR(opt, (e) => e === 2 ? NaN : 0.5);
  scheduler.step();
  assert.throws(() => scheduler.step(), /MultiplicativeLR: lrLambda 0 returned NaN for epoch 2/);
  // A factor of 0 can't be undone (PyTorch raises ZeroDivisionError at epoch totalIters); with
  // totalIters 0 it is never undone, and PyTorch takes it.
  assert.throws(
    () => new lrScheduler.ConstantLR(opt, { factor: 0, totalIters: 2 }),
    /ConstantLR: factor 0 can't be undone at epoch totalIters \(2\)/,
  );
  const zero = new optim.SGD([new nn.Parameter(tensor([0]))], { lr: 0.1 });
  const constant = new lrScheduler.ConstantLR(zero, { factor: 0, totalIters: 0 });
  constant.step();
  assert.equal(zero.paramGroups[0].lr, 0);
});
