/**
 * Adamax, NAdam, RAdam and Adadelta against PyTorch 1.13
 * (`fixtures/torch_optim_extra.json`, from `fixtures/torch_optim_extra.py`): every step's
 * parameters on an MLP, the state dict after step 3 (PyTorch's keys, order and numbers), PyTorch's
 * own state dict loaded as is and resumed to its last step, and PyTorch's errors for bad
 * hyper-parameters.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, optim, type Tensor, tensor, tidy } from "../mod.ts";
import { assertClose, assertTensor, backendTest } from "./harness.ts";
import fixture from "./fixtures/torch_optim_extra.json" with { type: "json" };

type Run = (typeof fixture.runs)[number];
type Nested = number | Nested[];
type AnyOptions = Record<string, unknown>;

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
  Adamax: optim.Adamax as never,
  NAdam: optim.NAdam as never,
  RAdam: optim.RAdam as never,
  Adadelta: optim.Adadelta as never,
};

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

/** The run's optimizer over `model`, its groups as PyTorch's run made them. */
function make(run: Run, model: nn.Sequential, options: AnyOptions): optim.Optimizer<object> {
  const named = new Map(model.namedParameters());
  const params = run.groups === null ? model.parameters() : run.groups.map((g) => ({
    ...g.options as AnyOptions,
    params: g.params.map((name) => named.get(name)!),
  }));
  return new OPTIMIZERS[run.optimizer](params, options);
}

/** Steps `from` (0-based) to the run's end on the fixture's batches, checking every step. */
async function train(
  run: Run,
  model: nn.Sequential,
  opt: optim.Optimizer<object>,
  device: Device,
  from: number,
  atStep?: (step: number) => Promise<void>,
): Promise<void> {
  const cpu = device.backend === "cpu";
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
      atol: cpu ? 1e-6 : 1e-5,
      rtol: cpu ? 1e-5 : 1e-4,
      what: `loss before step ${i + 1}`,
    });
    for (const t of [x, y, loss]) t.dispose();
    for (const [name, p] of model.namedParameters()) {
      const expected = (run.params_after[i] as Record<string, Nested>)[name];
      await assertTensor(p, expected, {
        atol: cpu ? 1e-6 : 1e-5,
        rtol: cpu ? 1e-5 : 1e-4,
        what: `${name} after step ${i + 1}`,
      });
    }
    await atStep?.(i + 1);
  }
}

/** PyTorch's dict with its lists as tensors on `device`, every key as PyTorch wrote it. */
function torchStateDict(run: Run, device: Device): optim.OptimizerStateDict {
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

for (const run of fixture.runs) {
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
          // A group built from the defaults lists its keys in PyTorch's order.
          assert.deepEqual(Object.keys(sd.param_groups[0]), Object.keys(expected[0]), "key order");
        }
        assert.deepEqual(Object.keys(sd.state), Object.keys(run.state_dict.state));
        for (const [index, torchEntry] of Object.entries(run.state_dict.state)) {
          const mine = sd.state[Number(index)];
          assert.deepEqual(Object.keys(mine), Object.keys(torchEntry), `state ${index} keys`);
          for (const [k, v] of Object.entries(torchEntry)) {
            const what = `state ${index} ${k}`;
            // step and NAdam's float32 mu_product: the same number, exactly.
            if (typeof v === "number") assert.equal(mine[k], v, what);
            else {
              assertClose(await (mine[k] as Tensor).data(), (v as Nested[]).flat(2) as number[], {
                atol: device.backend === "cpu" ? 1e-6 : 1e-5,
                rtol: device.backend === "cpu" ? 1e-5 : 1e-4,
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

Deno.test("the RAdam run reaches the rectified branch, after the state dict is taken", () => {
  // Guards the fixture: without it, regenerating with other betas could silently leave the
  // rectified update untested.
  const rectified = fixture.runs.find((r) => r.name === "radam_rectified")!;
  const [, beta2] = rectified.options.betas!;
  const rhoInf = 2 / (1 - beta2) - 1;
  const rho = (t: number) => rhoInf - 2 * t * beta2 ** t / (1 - beta2 ** t);
  assert.ok(rho(5) <= 5 && rho(rectified.steps) > 5);
  assert.ok(rectified.state_after < 5, "the resumed steps cross into the rectified branch");
});

const BAD: [string, AnyOptions, RegExp][] = [
  ["Adamax", { lr: -1 }, /Adamax: invalid learning rate: -1/],
  ["Adamax", { eps: -1e-8 }, /Adamax: invalid epsilon value/],
  ["Adamax", { betas: [1, 0.999] }, /Adamax: invalid beta parameter at index 0: 1/],
  ["Adamax", { betas: [0.9, -0.1] }, /Adamax: invalid beta parameter at index 1: -0.1/],
  ["Adamax", { weightDecay: -0.1 }, /Adamax: invalid weight_decay value: -0.1/],
  ["Adamax", { maximize: 1 }, /Adamax: maximize must be a boolean/],
  ["NAdam", { lr: -0.5 }, /NAdam: invalid learning rate: -0.5/],
  ["NAdam", { eps: NaN }, /NAdam: invalid epsilon value: NaN/],
  ["NAdam", { betas: [0.9, 1] }, /NAdam: invalid beta parameter at index 1: 1/],
  ["NAdam", { betas: [0.9] }, /NAdam: betas must be two numbers/],
  ["NAdam", { weightDecay: -1 }, /NAdam: invalid weight_decay value: -1/],
  ["NAdam", { momentumDecay: -4e-3 }, /NAdam: invalid momentum_decay value: -0.004/],
  ["RAdam", { lr: -1e-3 }, /RAdam: invalid learning rate: -0.001/],
  ["RAdam", { eps: -1 }, /RAdam: invalid epsilon value: -1/],
  ["RAdam", { betas: [-0.1, 0.999] }, /RAdam: invalid beta parameter at index 0: -0.1/],
  ["RAdam", { weightDecay: -0.01 }, /RAdam: invalid weight_decay value: -0.01/],
  ["Adadelta", { lr: -1 }, /Adadelta: invalid learning rate: -1/],
  ["Adadelta", { rho: 1.5 }, /Adadelta: invalid rho value: 1.5/],
  ["Adadelta", { rho: -0.1 }, /Adadelta: invalid rho value: -0.1/],
  ["Adadelta", { eps: -1e-6 }, /Adadelta: invalid epsilon value/],
  ["Adadelta", { weightDecay: -1 }, /Adadelta: invalid weight_decay value: -1/],
  ["Adadelta", { maximize: "yes" }, /Adadelta: maximize must be a boolean/],
];

backendTest(
  "bad hyper-parameters are PyTorch's errors, in the constructor and in a group",
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
      // Set between steps (as a schedule would): the next step refuses before changing anything.
      const q = p();
      const opt = new Ctor([q], {});
      Object.assign(opt.paramGroups[0], options);
      q.grad = tensor([1, 1, 1], { device });
      assert.throws(() => opt.step(), message, `${name} step ${JSON.stringify(options)}`);
    }
    // PyTorch's limits themselves are accepted: rho = 1 and 0, lr = 0, betas[0] = 0.
    new optim.Adadelta([p()], { rho: 1 });
    new optim.Adadelta([p()], { rho: 0 });
    new optim.NAdam([p()], { lr: 0, betas: [0, 0], momentumDecay: 0 });
    new optim.RAdam([p()], { eps: 0, weightDecay: 0 });
    new optim.Adamax([p()], { lr: 0 });
  },
);

Deno.test("defaults are PyTorch 1.13's", () => {
  const p = new nn.Parameter(tensor([1]));
  assert.deepEqual({ ...new optim.Adamax([p]).defaults }, {
    lr: 2e-3,
    betas: [0.9, 0.999],
    eps: 1e-8,
    weightDecay: 0,
    maximize: false,
  });
  assert.deepEqual({ ...new optim.NAdam([p]).defaults }, {
    lr: 2e-3,
    betas: [0.9, 0.999],
    eps: 1e-8,
    weightDecay: 0,
    momentumDecay: 4e-3,
  });
  assert.deepEqual({ ...new optim.RAdam([p]).defaults }, {
    lr: 1e-3,
    betas: [0.9, 0.999],
    eps: 1e-8,
    weightDecay: 0,
  });
  assert.deepEqual({ ...new optim.Adadelta([p]).defaults }, {
    lr: 1.0,
    rho: 0.9,
    eps: 1e-6,
    weightDecay: 0,
    maximize: false,
  });
});

Deno.test("a loaded state that lacks a key, or holds a number as a tensor, is refused (not NaN later)", async () => {
  const p = new nn.Parameter(tensor([1, 2]));
  p.grad = tensor([0.5, -0.5]);
  const adam = new optim.Adam([p], { lr: 0.1 });
  adam.step();
  const nadam = new optim.NAdam([p]);
  // Adam's state has no mu_product: before, NAdam's next step made the parameter NaN.
  assert.throws(
    () => nadam.loadStateDict(adam.stateDict()),
    /NAdam\.loadStateDict: state of parameter 0 lacks "muProduct" \(has "step", "expAvg", "expAvgSq"\): is it another optimizer's\?/,
  );
  // PyTorch stores mu_product as a 0-d tensor: the same hint as for step.
  const own = new optim.NAdam([p]);
  own.step();
  const saved = own.stateDict();
  const state = saved.state as Record<string, Record<string, unknown>>;
  state["0"].mu_product = tensor(Number(state["0"].mu_product));
  assert.throws(
    () => nadam.loadStateDict(saved),
    /state "muProduct" of parameter 0 must be a number, got a tensor of shape \[\] \(PyTorch keeps it as a 0-d tensor: give await t\.item\(\)\)/,
  );
  assert.deepEqual(Array.from(await p.data()).every(Number.isFinite), true);
});

Deno.test("an unknown option is an error naming it and the options there are (PyTorch: TypeError)", () => {
  const p = new nn.Parameter(tensor([1, 2]));
  const cases: [string, () => unknown][] = [
    ["NAdam", () => new optim.NAdam([p], { maximize: true } as never)],
    ["Adam", () => new optim.Adam([p], { weight_decay: 0.1 } as never)],
    ["AdamW", () => new optim.AdamW([p], { lrr: 0.1 } as never)],
    ["SGD", () => new optim.SGD([p], { lr: 0.1, nesterow: true } as never)],
  ];
  for (const [name, make] of cases) {
    assert.throws(
      make,
      new RegExp(`^TypeError: ${name}: unknown option "\\w+" \\(${name} takes lr`),
    );
  }
  // Parameter groups may carry keys of their own, as in PyTorch (a group's name, say).
  const group = new optim.SGD([{ params: [p], name: "head" } as never], { lr: 0.1 });
  assert.equal((group.paramGroups[0] as unknown as { name: string }).name, "head");
});
