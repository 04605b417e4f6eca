/**
 * Optimizer state dicts against PyTorch's (`torch_layers.json`, `optimizer_state`): after the same
 * steps multigrad's `stateDict()` has PyTorch's keys and numbers, and PyTorch's `state_dict()`
 * loads as is (implementation flags such as `foreach` included) and the next steps match.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, optim, type Tensor, tensor } from "../mod.ts";
import { assertClose, assertTensor, backendTest, optimizerByName } from "./harness.ts";
import { PYTHON, pythonHasTorch } from "./torch_python.ts";
import layers from "./fixtures/torch_layers.json" with { type: "json" };

type Case = (typeof layers.optimizer_state)[number];
type Nested = number | Nested[];

/** PyTorch's group flags that pick an implementation; multigrad has one, so it writes none. */
const TORCH_ONLY = new Set(["foreach", "fused", "capturable", "differentiable"]);

function camel(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function make(
  c: Case,
  params: Tensor[],
  options: Record<string, unknown>,
): optim.Optimizer<object> {
  return optimizerByName(c.optimizer, params, options);
}

function parameters(values: Nested[], device: Device | string): nn.Parameter[] {
  return values.map((v) => new nn.Parameter(tensor(v as number[], { device })));
}

function step(opt: optim.Optimizer<object>, params: Tensor[], grads: Nested[]): void {
  params.forEach((p, i) => p.grad = tensor(grads[i] as number[], { device: p.device }));
  opt.step();
}

/** PyTorch's dict with its lists as tensors on `device`, every key as PyTorch wrote it. */
function torchStateDict(c: Case, device: Device): optim.OptimizerStateDict {
  const state: optim.OptimizerStateDict["state"] = {};
  for (const [index, entry] of Object.entries(c.state_dict.state)) {
    state[Number(index)] = Object.fromEntries(
      Object.entries(entry).map((
        [k, v],
      ) => [k, typeof v === "number" ? v : tensor(v as number[], { device })]),
    );
  }
  return {
    state,
    param_groups: c.state_dict.param_groups as unknown as optim.OptimizerStateDict["param_groups"],
  };
}

for (const c of layers.optimizer_state) {
  backendTest(`${c.name}: stateDict() after 3 steps is PyTorch's`, async (device) => {
    const options = Object.fromEntries(
      Object.entries(c.torch_kwargs).map(([k, v]) => [camel(k), v]),
    );
    const params = parameters(c.initial, device);
    const opt = make(c, params, options);
    for (let i = 0; i < 3; i++) step(opt, params, c.grads[i]);
    for (const [i, p] of params.entries()) {
      await assertTensor(p, c.params_after_3[i] as number[], { atol: 1e-6, what: `param ${i}` });
    }
    const sd = opt.stateDict();
    const [torchGroup] = c.state_dict.param_groups;
    const expected = Object.fromEntries(
      Object.entries(torchGroup).filter(([k]) => !TORCH_ONLY.has(k)),
    );
    assert.deepEqual(sd.param_groups, [expected]);
    assert.deepEqual(Object.keys(sd.param_groups[0]), Object.keys(expected), "PyTorch's key order");
    assert.deepEqual(Object.keys(sd.state), Object.keys(c.state_dict.state));
    for (const [index, torchEntry] of Object.entries(c.state_dict.state)) {
      const mine = sd.state[Number(index)];
      assert.deepEqual(Object.keys(mine), Object.keys(torchEntry), `state ${index} keys`);
      for (const [k, v] of Object.entries(torchEntry)) {
        if (typeof v === "number") assert.equal(mine[k], v, `state ${index} ${k}`);
        else {
          assertClose(await (mine[k] as Tensor).data(), (v as Nested[]).flat(2) as number[], {
            atol: 1e-6,
            what: `state ${index} ${k}`,
          });
        }
      }
    }
  });

  backendTest(
    `${c.name}: PyTorch's state_dict() loads as is and the next steps match`,
    async (device) => {
      const params = parameters(c.params_after_3, device);
      // Other hyperparameters than PyTorch's run: the loaded groups must replace them.
      const opt = make(c, params, { lr: 1 });
      opt.loadStateDict(torchStateDict(c, device));
      for (const [k, v] of Object.entries(c.torch_kwargs)) {
        assert.deepEqual(
          (opt.paramGroups[0] as Record<string, unknown>)[camel(k)],
          v,
          `group option ${k}`,
        );
      }
      for (let i = 3; i < 5; i++) step(opt, params, c.grads[i]);
      for (const [i, p] of params.entries()) {
        await assertTensor(p, c.params_after_5[i] as number[], { atol: 1e-6, what: `param ${i}` });
      }
      // And it comes back out as PyTorch wrote it, flags aside.
      const keys = Object.keys(opt.stateDict().param_groups[0]);
      assert.deepEqual(
        keys,
        Object.keys(c.state_dict.param_groups[0]).filter((k) => !TORCH_ONLY.has(k)),
      );
    },
  );
}

backendTest(
  "loadStateDict still reads the camelCase dicts of earlier multigrad checkpoints",
  async (device) => {
    const params = parameters([[1, 2], [3]], device);
    const opt = new optim.Adam(params, { lr: 0.1 });
    opt.loadStateDict({
      state: {
        0: {
          step: 2,
          expAvg: tensor([0.5, 0.5], { device }),
          expAvgSq: tensor([1, 1], { device }),
        },
      },
      paramGroups: [{
        lr: 0.3,
        betas: [0.5, 0.6],
        eps: 1e-6,
        weightDecay: 0.2,
        amsgrad: false,
        maximize: false,
        params: [0, 1],
      }],
    } as unknown as optim.OptimizerStateDict);
    assert.equal(opt.paramGroups[0].lr, 0.3);
    assert.equal(opt.paramGroups[0].weightDecay, 0.2);
    const state = opt.state.get(params[0])!;
    assert.equal(state.step, 2);
    assert.deepEqual(Array.from(await (state.expAvg as Tensor).data()), [0.5, 0.5]);
    assert.deepEqual(Object.keys(opt.stateDict().state[0]), ["step", "exp_avg", "exp_avg_sq"]);
  },
);

Deno.test({
  name: "PyTorch loads multigrad's optimizer state dicts as is (when /usr/bin/python3 has torch)",
  ignore: !(await pythonHasTorch()),
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const exported = [];
    for (const c of layers.optimizer_state) {
      const options = Object.fromEntries(
        Object.entries(c.torch_kwargs).map(([k, v]) => [camel(k), v]),
      );
      const params = parameters(c.initial, "cpu");
      const opt = make(c, params, options);
      for (let i = 0; i < 3; i++) step(opt, params, c.grads[i]);
      const sd = opt.stateDict();
      const state: Record<string, Record<string, unknown>> = {};
      for (const [index, entry] of Object.entries(sd.state)) {
        state[index] = {};
        for (const [k, v] of Object.entries(entry)) {
          state[index][k] = typeof v === "number" ? v : Array.from(await (v as Tensor).data());
        }
      }
      exported.push({ name: c.name, state, param_groups: sd.param_groups });
    }
    // Tensors become tensors of the parameter's shape; everything else goes in unchanged.
    const script = `
import json, sys, torch
cases = json.load(open(sys.argv[1]))["optimizer_state"]
ours = {c["name"]: c for c in json.loads(sys.stdin.read())}
out = {}
for c in cases:
    params = [torch.nn.Parameter(torch.tensor(v)) for v in c["params_after_3"]]
    opt = getattr(torch.optim, c["optimizer"])(params, lr=1.0)
    mine = ours[c["name"]]
    state = {int(i): {k: (torch.tensor(v).reshape(params[int(i)].shape) if isinstance(v, list) else v)
                      for k, v in entry.items()} for i, entry in mine["state"].items()}
    opt.load_state_dict({"state": state, "param_groups": mine["param_groups"]})
    for gs in c["grads"][3:]:
        for p, g in zip(params, gs):
            p.grad = torch.tensor(g)
        opt.step()
    out[c["name"]] = [p.detach().reshape(-1).tolist() for p in params]
print(json.dumps(out))
`;
    const child = new Deno.Command(PYTHON, {
      args: ["-c", script, new URL("./fixtures/torch_layers.json", import.meta.url).pathname],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(JSON.stringify(exported)));
    await writer.close();
    const { success, stdout, stderr } = await child.output();
    assert.ok(success, new TextDecoder().decode(stderr));
    const torchParams = JSON.parse(new TextDecoder().decode(stdout)) as Record<string, number[][]>;
    for (const c of layers.optimizer_state) {
      c.params_after_5.forEach((expected, i) =>
        assertClose(torchParams[c.name][i], (expected as Nested[]).flat(2) as number[], {
          atol: 1e-6,
          what: `${c.name}: PyTorch's param ${i} after loading multigrad's dict`,
        })
      );
    }
  },
});
