/**
 * The module hooks added to the first set (tests/module_hooks_test.ts).
 *
 * Against PyTorch 1.13 (tests/fixtures/torch_module_hooks_extra.json): global forward pre-,
 * forward and full backward hooks (the order they run in with a module's own hooks; values when
 * they replace arguments, outputs and gradient inputs), `registerLoadStateDictPostHook` (the keys
 * each hook sees, in PyTorch's order; a hook clearing them so a strict load passes),
 * `registerStateDictPostHook` (PyTorch's `_register_state_dict_hook`) and backward hooks that a
 * forward pre-hook registers (they join from the next forward on).
 *
 * PyTorch 2.x only, so with expected values derived by reasoning (each test says how): full
 * backward pre-hooks (module and global), `prepend`, `alwaysCall`, state-dict pre-hooks. Also:
 * DataParallel replicas and modules made later run the global hooks, float64 gradient checks
 * through hooked modules, and errors naming the method.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, keep, nn, noGrad, parallel, type Tensor, tensor, zeros } from "../mod.ts";
import { assertTensor, backendTest, fixtureTensor, type FixtureValues } from "./harness.ts";
import { check, CPU0, CPU1, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_module_hooks_extra.json" with { type: "json" };

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-5, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

type Grads = (Tensor | null)[];

/** Copies of the gradients a hook got, kept past the backward pass that made them. */
function held(gs: Grads): Grads {
  return gs.map((g) => (g ? keep(g.clone()) : null));
}

/** Removes the handles even when the test fails: global hooks would leak into the next test. */
function withHandles(handles: nn.RemovableHandle[], fn: () => Promise<void> | void) {
  return (async () => {
    try {
      await fn();
    } finally {
      for (const h of handles) h.remove();
    }
  })();
}

function seq(): nn.Sequential {
  return new nn.Sequential(new nn.Linear(3, 4), new nn.Tanh(), new nn.Linear(4, 2));
}

function load(m: nn.Module, params: Record<string, FixtureValues>, device: Device): void {
  m.to(device);
  const sd: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(params)) sd[k] = fixtureTensor(v, device);
  m.loadStateDict(sd);
}

function namesOf(m: nn.Module): Map<nn.Module, string> {
  return new Map(m.namedModules().map(([n, mod]) => [mod, n || "root"]));
}

// ---- global hooks, against PyTorch 1.13 ----

backendTest("global hooks run before a module's own, in PyTorch's order", async (device) => {
  const c = fixtures.global_order;
  const m = seq();
  load(m, c.params, device);
  const names = namesOf(m);
  const log: string[] = [];
  const handles = [
    nn.registerModuleForwardPreHook((mod) => void log.push(`gpre:${names.get(mod)}`)),
    nn.registerModuleForwardHook((mod) => void log.push(`gfwd:${names.get(mod)}`)),
    nn.registerModuleFullBackwardHook((mod) => void log.push(`gbwd:${names.get(mod)}`)),
    m.registerForwardPreHook(() => void log.push("pre:root")),
    m.at(0).registerForwardHook(() => void log.push("fwd:0")),
    m.at(2).registerFullBackwardHook(() => void log.push("bwd:2")),
    m.registerFullBackwardHook(() => void log.push("bwd:root")),
  ];
  await withHandles(handles, async () => {
    const x = fixtureTensor(c.x, device, { requiresGrad: true });
    const out = m.forward(x);
    log.push("backward");
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    assert.deepEqual(log, c.log);
    await assertTensor(out, c.output, { ...tol(device), what: "output" });
    await assertTensor(x.grad!, c.x_grad, { ...tol(device), what: "x.grad" });
  });
  // Removed: no module runs them any more, and the plain forward is back.
  log.length = 0;
  m.forward(zeros([1, 3], { device }));
  assert.deepEqual(log, []);
  assert.equal(Object.hasOwn(m.at(1), "forward"), false);
});

backendTest(
  "global hooks replacing arguments, outputs and gradInput, then the own hooks",
  async (device) => {
    const c = fixtures.global_values;
    const m = seq();
    load(m, c.params, device);
    const calls: Record<string, { gradInput: Grads; gradOutput: Grads }[]> = { "0": [], "2": [] };
    const own = (name: string, scale: number) => (_m: nn.Module, gi: Grads, go: Grads) => {
      calls[name].push({ gradInput: held(gi), gradOutput: held(go) });
      return gi.map((g) => g && g.mul(scale));
    };
    const handles = [
      nn.registerModuleForwardPreHook((mod, args) =>
        mod instanceof nn.Tanh ? (args[0] as Tensor).add(1) : undefined
      ),
      nn.registerModuleForwardHook((mod, _args, out) =>
        mod instanceof nn.Linear ? (out as Tensor).mul(2) : undefined
      ),
      nn.registerModuleFullBackwardHook((mod, gi) =>
        mod instanceof nn.Linear ? gi.map((g) => g && g.mul(0.5)) : undefined
      ),
      m.at(0).registerFullBackwardHook(own("0", 3)),
      m.at(2).registerFullBackwardHook(own("2", 1)),
    ];
    await withHandles(handles, async () => {
      const x = fixtureTensor(c.x, device, { requiresGrad: true });
      const out = m.forward(x);
      await assertTensor(out, c.output, { ...tol(device), what: "output" });
      out.mul(fixtureTensor(c.g, device)).sum().backward();
      await assertTensor(x.grad!, c.x_grad, { ...tol(device), what: "x.grad" });
      const named = Object.fromEntries(m.namedParameters());
      for (const [k, e] of Object.entries(c.param_grads)) {
        await assertTensor(named[k].grad!, e, { ...tol(device), what: `${k}.grad` });
      }
      for (const name of ["0", "2"] as const) {
        assert.equal(calls[name].length, c.calls[name].length, `calls of layer ${name}`);
        for (const [k, e] of c.calls[name].entries()) {
          for (const [i, g] of e.grad_input.entries()) {
            await assertTensor(calls[name][k].gradInput[i]!, g, {
              ...tol(device),
              what: `layer ${name} gradInput ${i}`,
            });
          }
          for (const [i, g] of e.grad_output.entries()) {
            await assertTensor(calls[name][k].gradOutput[i]!, g, {
              ...tol(device),
              what: `layer ${name} gradOutput ${i}`,
            });
          }
        }
      }
    });
  },
);

// ---- state-dict hooks, against PyTorch 1.13 ----

/** The fixture's Net: `fc = Linear(2, 3)`, `head = Sequential(Linear(3, 2))`. */
class Net extends nn.Module {
  fc = new nn.Linear(2, 3);
  head = new nn.Sequential(new nn.Linear(3, 2));
}

backendTest(
  "registerLoadStateDictPostHook: the keys each hook sees, as PyTorch",
  async (device) => {
    const c = fixtures.load_post;
    const all: Record<string, Tensor> = {
      ...Object.fromEntries(
        Object.entries(c.params).map(([k, v]) => [k, fixtureTensor(v, device)]),
      ),
      "head.junk.x": zeros([1], { device }),
      "fc.bogus": zeros([1], { device }),
      extra: zeros([1], { device }),
    };
    const sd = Object.fromEntries(c.state_keys.map((k) => [k, all[k]]));
    for (const run of c.runs) {
      const target = new Net().to(device);
      const names = namesOf(target);
      const seen: { module: string; missing: string[]; unexpected: string[] }[] = [];
      const weights: Tensor[] = [];
      const log = (m: nn.Module, keys: nn.IncompatibleKeys) => {
        seen.push({
          module: names.get(m)!,
          missing: [...keys.missingKeys],
          unexpected: [...keys.unexpectedKeys],
        });
        weights.push(keep(target.fc.weight.clone()));
      };
      for (const m of [target.fc, target.head, target.head.at(0), target]) {
        m.registerLoadStateDictPostHook(log);
      }
      if (run.clear) {
        target.registerLoadStateDictPostHook((_m, keys) => {
          if (run.clear === "all") {
            keys.missingKeys.splice(keys.missingKeys.indexOf("head.0.bias"), 1);
          }
          for (const k of ["extra", "fc.bogus", "head.junk.x"]) {
            if (run.clear === "all" || k === "extra") {
              keys.unexpectedKeys.splice(keys.unexpectedKeys.indexOf(k), 1);
            }
          }
        });
      }
      const what = `strict ${run.strict}, clear ${run.clear}`;
      if (run.error === null) {
        const result = target.loadStateDict(sd, { strict: run.strict });
        assert.deepEqual(result, {
          missingKeys: run.result!.missing,
          unexpectedKeys: run.result!.unexpected,
        }, what);
      } else {
        // PyTorch's message names the keys left after the hooks; so must ours.
        const left = [...run.error.matchAll(/"([^"]+)"/g)].map((m) => m[1]);
        assert.deepEqual(left, ["head.0.bias", "fc.bogus", "head.junk.x"]);
        assert.throws(() => target.loadStateDict(sd, { strict: run.strict }), (e: Error) => {
          for (const k of left) assert.ok(e.message.includes(`"${k}"`), `${what}: ${e.message}`);
          assert.ok(!e.message.includes('"extra"'), `${what}: ${e.message}`);
          return true;
        });
      }
      assert.deepEqual(
        seen,
        run.seen.map(({ module, missing, unexpected }) => ({ module, missing, unexpected })),
        what,
      );
      // As PyTorch, the values are loaded when the hooks run, and stay loaded after a strict error.
      for (const [k, w] of weights.entries()) {
        assert.equal(run.seen[k].fc_loaded, true);
        await assertTensor(w, c.params["fc.weight"], { ...tol(device), what: `fc.weight ${k}` });
      }
      assert.equal(run.fc_loaded_after, true);
      await assertTensor(target.fc.weight, c.params["fc.weight"], tol(device));
    }
  },
);

backendTest(
  "registerStateDictPostHook: in-place edits, and only the top module's replacement counts",
  async (device) => {
    const c = fixtures.state_dict_hook;
    const net = new Net().to(device);
    const names = namesOf(net);
    const seen: { module: string; prefix: string; keys: string[] }[] = [];
    const log = (m: nn.Module, sd: Record<string, Tensor>, prefix: string) =>
      void seen.push({ module: names.get(m)!, prefix, keys: Object.keys(sd) });
    net.fc.registerStateDictPostHook(log);
    net.fc.registerStateDictPostHook((_m, sd, prefix) => {
      sd[`${prefix}scale`] = tensor([2], { device });
    });
    net.head.registerStateDictPostHook(() => ({ dropped: zeros([1], { device }) }));
    net.head.registerStateDictPostHook(log);
    net.registerStateDictPostHook(log);
    net.registerStateDictPostHook((_m, sd) =>
      Object.fromEntries(Object.entries(sd).map(([k, v]) => [`renamed.${k}`, v]))
    );
    net.registerStateDictPostHook(log);
    const plain = net.stateDict();
    assert.deepEqual(Object.keys(plain), c.keys);
    assert.deepEqual(seen, c.seen);
    await assertTensor(plain["renamed.fc.scale"], c.scale);
    seen.length = 0;
    assert.deepEqual(Object.keys(net.stateDict({ prefix: "p." })), c.prefixed_keys);
    assert.deepEqual(seen, c.prefixed_seen);
  },
);

Deno.test("backward hooks a forward pre-hook registers run from the next forward on, as PyTorch's", () => {
  // PyTorch's _call_impl reads the (global and own) backward hooks before the pre-hooks run.
  const log: string[] = [];
  const lin = new nn.Linear(2, 2);
  let added = false;
  lin.registerForwardPreHook((m) => {
    if (added) return;
    added = true;
    m.registerFullBackwardHook(() => void log.push("own"));
  });
  for (const i of [0, 1]) {
    lin.forward(zeros([1, 2], { requiresGrad: true })).sum().backward();
    log.push(`pass ${i} done`);
  }
  const net = new nn.Sequential(new nn.Linear(2, 2), new nn.Tanh());
  const names = namesOf(net);
  const handles: nn.RemovableHandle[] = [];
  handles.push(nn.registerModuleForwardPreHook(() => {
    if (handles.length > 1) return;
    handles.push(nn.registerModuleFullBackwardHook((m) => void log.push(`global:${names.get(m)}`)));
  }));
  return withHandles(handles, () => {
    (net.forward(zeros([1, 2], { requiresGrad: true })) as Tensor).sum().backward();
    assert.deepEqual(log, fixtures.registered_in_forward.log);
  });
});

Deno.test("hooks a global pre-hook gives the module being called: its forward hooks run at once", () => {
  // As PyTorch: the forward hooks are read after the forward, the pre-hooks before the first.
  const log: string[] = [];
  const net = new nn.Sequential(new nn.Linear(2, 2), new nn.Tanh());
  const names = namesOf(net);
  const done = new Set<nn.Module>();
  const handle = nn.registerModuleForwardPreHook((m) => {
    log.push(`global pre:${names.get(m)}`);
    if (done.has(m)) return;
    done.add(m);
    m.registerForwardHook((mm) => void log.push(`own forward:${names.get(mm)}`));
    m.registerForwardPreHook((mm) => void log.push(`own pre:${names.get(mm)}`));
  });
  return withHandles([handle], () => {
    for (const i of [0, 1]) {
      net.forward(zeros([1, 2]));
      log.push(`pass ${i} done`);
    }
    assert.deepEqual(log, fixtures.registered_in_forward.forward_log);
  });
});

// ---- PyTorch 2.x only: expected values by reasoning ----

backendTest(
  "registerFullBackwardPreHook: a replaced gradOutput feeds the backward and the full hooks",
  async (device) => {
    // Scaling gradOutput by 3 is the same as a loss of sum(y * 3g): the reference is that loss
    // without hooks, on a copy of the layer.
    const lin = new nn.Linear(3, 2).to(device);
    const ref = new nn.Linear(3, 2).to(device);
    ref.loadStateDict(lin.stateDict());
    const xs = [[1, -2, 0.5], [0.25, 3, -1]];
    const g = tensor([[1, 2], [-0.5, 4]], { device });
    const order: string[] = [];
    let seenOut: Grads = [];
    let seenPre: Grads = [];
    lin.registerFullBackwardHook((_m, _gi, go) => {
      order.push("full");
      seenOut = held(go);
    });
    lin.registerFullBackwardPreHook((_m, go) => {
      order.push("pre");
      seenPre = held(go);
      return go.map((t) => t && t.mul(3));
    });
    const x = tensor(xs, { device, requiresGrad: true });
    lin.forward(x).mul(g).sum().backward();
    const xr = tensor(xs, { device, requiresGrad: true });
    ref.forward(xr).mul(g.mul(3)).sum().backward();
    assert.deepEqual(order, ["pre", "full"]);
    await assertTensor(seenPre[0]!, Array.from(await g.data()), { ...tol(device), what: "pre" });
    await assertTensor(seenOut[0]!, Array.from(await g.mul(3).data()), tol(device));
    await assertTensor(x.grad!, Array.from(await xr.grad!.data()), tol(device));
    await assertTensor(lin.weight.grad!, Array.from(await ref.weight.grad!.data()), tol(device));
    await assertTensor(lin.bias!.grad!, Array.from(await ref.bias!.grad!.data()), tol(device));
  },
);

/** Two outputs, as the first hook tests' Split. */
class Split extends nn.Module {
  override forward(x: Tensor): [Tensor, Tensor] {
    return [x.tanh(), x.mul(3)];
  }
}

Deno.test("backward pre-hook: a null slot stops that output's gradient; a second output's gradient passes", async () => {
  // d/dx of tanh(x)·1 + 3x·1 is (1 - tanh²x) + 3; dropping the tanh output's gradient leaves 3.
  const m = new Split();
  const seen: Grads[] = [];
  m.registerFullBackwardPreHook((_m, go) => {
    seen.push(held(go));
    return [null, go[1]];
  });
  const x = tensor([0.5, -1], { requiresGrad: true });
  const [a, b] = m.forward(x);
  a.sum().add(b.sum()).backward();
  assert.deepEqual(Array.from(await x.grad!.data()), [3, 3]);
  assert.equal(seen.length, 1);
  assert.deepEqual(Array.from(await seen[0][0]!.data()), [1, 1]);
  // An output the loss does not use reaches the pre-hook as null.
  const y = tensor([2], { requiresGrad: true });
  const calls: Grads[] = [];
  const m2 = new Split();
  m2.registerFullBackwardPreHook((_m, go) => void calls.push(go.map((t) => t && keep(t.clone()))));
  m2.forward(y)[1].sum().backward();
  assert.equal(calls[0][0], null);
  assert.deepEqual(Array.from(await calls[0][1]!.data()), [1]);
  assert.deepEqual(Array.from(await y.grad!.data()), [3]);
});

Deno.test("backward pre-hook: runs (and scales parameter gradients) when no input requires grad", async () => {
  // weight.grad = gᵀx with g replaced by 2g: twice the plain [[1, 2]].
  const lin = new nn.Linear(2, 1);
  lin.registerFullBackwardPreHook((_m, go) => go.map((t) => t && t.mul(2)));
  lin.forward(tensor([[1, 2]])).sum().backward();
  assert.deepEqual(Array.from(await lin.weight.grad!.data()), [2, 4]);
  assert.deepEqual(Array.from(await lin.bias!.grad!.data()), [2]);
});

Deno.test("global and own backward pre-hooks: global first, then the own in order (prepend first)", async () => {
  // Each hook adds its step to a log and multiplies gradOutput: x.grad = w · 2 · 3 · 5.
  const lin = new nn.Linear(1, 1, { bias: false });
  noGrad(() => lin.weight.fill_(1));
  const order: string[] = [];
  const step = (name: string, k: number) => (_m: nn.Module, go: Grads) => {
    order.push(name);
    return go.map((t) => t && t.mul(k));
  };
  const handles = [
    lin.registerFullBackwardPreHook(step("own", 3)),
    nn.registerModuleFullBackwardPreHook(step("global", 2)),
    lin.registerFullBackwardPreHook(step("own-prepended", 5), { prepend: true }),
  ];
  await withHandles(handles, async () => {
    const x = tensor([[1]], { requiresGrad: true });
    lin.forward(x).sum().backward();
    assert.deepEqual(order, ["global", "own-prepended", "own"]);
    assert.deepEqual(Array.from(await x.grad!.data()), [30]);
  });
});

Deno.test("prepend: a hook runs before those of its kind already registered", () => {
  const lin = new nn.Linear(2, 2);
  const log: string[] = [];
  lin.registerForwardPreHook(() => void log.push("pre1"));
  lin.registerForwardPreHook(() => void log.push("pre0"), { prepend: true });
  lin.registerForwardHook(() => void log.push("fwd1"));
  lin.registerForwardHook(() => void log.push("fwd0"), { prepend: true });
  lin.registerFullBackwardHook(() => void log.push("bwd1"));
  lin.registerFullBackwardHook(() => void log.push("bwd0"), { prepend: true });
  lin.registerStateDictPreHook(() => void log.push("sdpre1"));
  lin.registerStateDictPreHook(() => void log.push("sdpre0"), { prepend: true });
  const h = lin.registerForwardHook(() => void log.push("fwd-1"), { prepend: true });
  h.remove();
  lin.forward(zeros([1, 2], { requiresGrad: true })).sum().backward();
  lin.stateDict();
  assert.deepEqual(log, ["pre0", "pre1", "fwd0", "fwd1", "bwd0", "bwd1", "sdpre0", "sdpre1"]);
});

/** A module whose forward throws for an empty input. */
class Picky extends nn.Module {
  override forward(x: Tensor): Tensor {
    if (x.numel() === 0) throw new RangeError("Picky: empty input");
    return x.mul(2);
  }
}

Deno.test("alwaysCall: forward hooks that run when the forward throws, then the error goes on", () => {
  // As PyTorch 2.1: the always-called hooks get the output as far as it got (none: undefined).
  const m = new Picky();
  const log: string[] = [];
  const handles = [
    nn.registerModuleForwardHook((_m, _a, out) => void log.push(`global:${out}`), {
      alwaysCall: true,
    }),
    m.registerForwardHook(() => void log.push("plain")),
    m.registerForwardHook((_m, _a, out) => void log.push(`always:${out}`), { alwaysCall: true }),
  ];
  return withHandles(handles, () => {
    assert.throws(() => m.forward(zeros([0])), /Picky: empty input/);
    assert.deepEqual(log, ["global:undefined", "always:undefined"]);
    log.length = 0;
    m.forward(zeros([1]));
    assert.equal(log.length, 3);
  });
});

Deno.test("alwaysCall: after a throwing forward hook, only the hooks not yet run; their errors are warnings", () => {
  const m = new Picky();
  const log: string[] = [];
  m.registerForwardHook(() => void log.push("first"), { alwaysCall: true });
  m.registerForwardHook(() => {
    throw new Error("hook failed");
  });
  m.registerForwardHook((_m, _a, out) => {
    log.push(`last:${(out as Tensor).shape}`);
    throw new Error("always hook failed too");
  }, { alwaysCall: true });
  const warn = console.warn;
  const warnings: string[] = [];
  console.warn = (msg: string) => void warnings.push(msg);
  try {
    assert.throws(() => m.forward(zeros([2])), /^Error: hook failed$/);
  } finally {
    console.warn = warn;
  }
  assert.deepEqual(log, ["first", "last:2"]);
  assert.equal(warnings.length, 1);
  assert.match(warnings[0], /Picky with alwaysCall raised an error.*always hook failed too/);
});

Deno.test("registerStateDictPreHook: (module, prefix, keepVars) before each module's entries", async () => {
  // The pre-hook runs before the entries are read: what it writes is in the state dict.
  const net = new Net();
  const seen: [string, string, boolean][] = [];
  const names = namesOf(net);
  for (const m of net.modules()) {
    m.registerStateDictPreHook((mod, prefix, keepVars) =>
      void seen.push([names.get(mod)!, prefix, keepVars])
    );
  }
  net.fc.registerStateDictPreHook(() => noGrad(() => void net.fc.bias!.fill_(5)));
  const sd = net.stateDict({ prefix: "m.", keepVars: true });
  assert.deepEqual(seen, [
    ["root", "m.", true],
    ["fc", "m.fc.", true],
    ["head", "m.head.", true],
    ["head.0", "m.head.0.", true],
  ]);
  assert.equal(sd["m.fc.weight"], net.fc.weight);
  assert.deepEqual(Array.from(await sd["m.fc.bias"].data()), [5, 5, 5]);
});

// ---- global hooks: reach, replicas, removal ----

Deno.test("global hooks reach modules made before and after, and DataParallel replicas", async () => {
  const before = new nn.Linear(3, 2);
  const replicas = parallel.replicate(before, [CPU0, CPU1]);
  const seen: nn.Module[] = [];
  const devices: string[] = [];
  const handles = [
    nn.registerModuleForwardHook((m, _a, out) => {
      seen.push(m);
      devices.push(String((out as Tensor).device));
      return (out as Tensor).mul(2);
    }),
  ];
  await withHandles(handles, async () => {
    const after = new nn.ReLU();
    after.forward(zeros([1]));
    assert.deepEqual(seen, [after]);
    replicas[1].forward(zeros([1, 3], { device: CPU1 }));
    assert.equal(seen[1], replicas[1]);
    seen.length = devices.length = 0;
    const dp = new nn.DataParallel(before, { devices: [CPU0, CPU1] });
    const x = tensor([[1, 2, 3], [4, 5, 6]]);
    const y = dp.forward(x);
    // One call per replica (the DataParallel module's own hook doubles once more).
    assert.deepEqual(devices.sort(), ["cpu:0", "cpu:0", "cpu:1"]);
    assert.ok((seen as nn.Module[]).includes(dp));
    const plain = noGrad(() => x.matmul(before.weight.transpose(0, 1)).add(before.bias!).mul(4));
    assert.deepEqual(Array.from(await y.data()), Array.from(await plain.data()));
    // Replicas share the original's hook tables: its backward pre-hook runs on each of them.
    const pre: string[] = [];
    const h = before.registerFullBackwardPreHook((m, go) => {
      pre.push(`${m === before ? "original" : "replica"}:${(go[0] as Tensor).device}`);
    });
    dp.forward(x).sum().backward();
    h.remove();
    assert.deepEqual(pre.sort(), ["original:cpu:0", "replica:cpu:1"]);
  });
  assert.equal(Object.hasOwn(before, "forward"), false);
  assert.equal(Object.hasOwn(replicas[1], "forward"), false);
  seen.length = 0;
  before.forward(zeros([1, 3]));
  assert.deepEqual(seen, []);
});

/** A subclass whose forward calls the parent's, and one that inherits it. */
class Doubled extends nn.Linear {
  override forward(x: Tensor): Tensor {
    return super.forward(x).mul(2);
  }
}
class Inherits extends Doubled {}

Deno.test("global hooks run once per call of a subclass whose forward calls super.forward", async () => {
  const log: string[] = [];
  const a = new Doubled(2, 2);
  const handles = [
    nn.registerModuleForwardPreHook((m) => void log.push(`pre:${m.constructor.name}`)),
    nn.registerModuleForwardHook((m) => void log.push(`fwd:${m.constructor.name}`)),
  ];
  const b = new Inherits(2, 2);
  await withHandles(handles, async () => {
    const x = tensor([[1, 2]]);
    a.forward(x);
    b.forward(x);
    assert.deepEqual(log, ["pre:Doubled", "fwd:Doubled", "pre:Inherits", "fwd:Inherits"]);
    // With hooks of its own as well: the globals first, each once.
    log.length = 0;
    const own = a.registerForwardPreHook(() => void log.push("own"));
    a.forward(x);
    own.remove();
    assert.deepEqual(log, ["pre:Doubled", "own", "fwd:Doubled"]);
    log.length = 0;
    const y = b.forward(x);
    assert.deepEqual(log, ["pre:Inherits", "fwd:Inherits"]);
    // The output is still the subclass's: twice the parent's.
    const half = noGrad(() => x.matmul(b.weight.t()).add(b.bias!));
    await assertTensor(y, Array.from(await half.mul(2).data()));
  });
  log.length = 0;
  a.forward(tensor([[1, 2]]));
  b.forward(tensor([[1, 2]]));
  assert.deepEqual(log, []);
  assert.equal(Object.hasOwn(a, "forward"), false);
});

Deno.test("global hooks run once when a module's last own hook removes itself mid-call", () => {
  // The own hook's removal takes the module's own forward away during the call: the class's
  // forward it then calls must not run the global hooks a second time.
  const log: string[] = [];
  const lin = new nn.Linear(2, 2);
  const handles = [nn.registerModuleForwardPreHook(() => void log.push("global"))];
  const own = lin.registerForwardPreHook(() => {
    log.push("own");
    own.remove();
  });
  return withHandles(handles, () => {
    lin.forward(zeros([1, 2]));
    assert.deepEqual(log, ["global", "own"]);
    lin.forward(zeros([1, 2]));
    assert.deepEqual(log, ["global", "own", "global"]);
  });
});

Deno.test("modules made in a loop are collectable within the same synchronous job", async () => {
  // Global hooks must reach modules made before them, but not by holding every module: a
  // WeakRef keeps its target alive until the job ends, so a per-instance list would keep every
  // module a long synchronous loop makes (here 100 × ~2 MB). Needs --expose-gc: in a child.
  const code = `
    import { nn } from ${JSON.stringify(new URL("../mod.ts", import.meta.url).href)};
    const gc = (globalThis as unknown as { gc: () => void }).gc;
    class Big extends nn.Module {
      junk = Array.from({ length: 50000 }, (_, i) => ({ i }));
    }
    const loop = () => { for (let i = 0; i < 100; i++) new Big(); };
    gc();
    const before = Deno.memoryUsage().heapUsed;
    loop();
    gc();
    console.log(JSON.stringify({ grown: Deno.memoryUsage().heapUsed - before }));
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--v8-flags=--expose-gc", "--ext=ts", code],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, `child failed: ${new TextDecoder().decode(out.stderr)}`);
  const last = new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!;
  const { grown } = JSON.parse(last);
  assert.ok(grown < 40e6, `the dropped modules still hold ${(grown / 1e6).toFixed(0)} MB`);
});

Deno.test("a module's own hooks stay when the global ones go, and the other way round", () => {
  const lin = new nn.Linear(2, 2);
  const log: string[] = [];
  const own = lin.registerForwardHook(() => void log.push("own"));
  const global = nn.registerModuleForwardPreHook(() => void log.push("global"));
  own.remove();
  lin.forward(zeros([1, 2]));
  assert.deepEqual(log, ["global"]);
  const own2 = lin.registerForwardHook(() => void log.push("own"));
  global.remove();
  lin.forward(zeros([1, 2]));
  assert.deepEqual(log, ["global", "own"]);
  own2.remove();
  assert.equal(Object.hasOwn(lin, "forward"), false);
});

// Hooks that pass gradients on as copies leave the gradients exact.
const checked = new nn.Linear(3, 2).double();
checked.registerFullBackwardPreHook((_m, go) => go.map((g) => g && g.mul(1)));

check("Linear with global hooks and a backward pre-hook passing gradOutput on", (x) => {
  const handles = [
    nn.registerModuleFullBackwardPreHook((_m, go) => go.map((g) => g && g.add(0))),
    nn.registerModuleFullBackwardHook((_m, gi) => gi.map((g) => g && g.mul(1))),
  ];
  try {
    // The hooks of a forward are those registered when it ran: they still run at backward.
    return checked.forward(x).tanh();
  } finally {
    for (const h of handles) h.remove();
  }
}, [inp([2, 3], 5)]);

check("Split with a backward pre-hook returning copies of gradOutput", (x) => {
  const m = new Split();
  m.registerFullBackwardPreHook((_m, go) => go.map((g) => g && g.mul(1)));
  const [a, b] = m.forward(x);
  return a.mul(b);
}, [inp([4], 3)]);

// ---- errors ----

Deno.test("errors: a hook that is not a function names the method", () => {
  const lin = new nn.Linear(2, 2);
  const cases: [string, () => unknown][] = [
    ["registerFullBackwardPreHook", () => lin.registerFullBackwardPreHook(null as never)],
    ["registerStateDictPreHook", () => lin.registerStateDictPreHook(1 as never)],
    ["registerStateDictPostHook", () => lin.registerStateDictPostHook("f" as never)],
    ["registerLoadStateDictPostHook", () => lin.registerLoadStateDictPostHook({} as never)],
    ["registerModuleForwardPreHook", () => nn.registerModuleForwardPreHook(null as never)],
    ["registerModuleForwardHook", () => nn.registerModuleForwardHook(undefined as never)],
    ["registerModuleFullBackwardHook", () => nn.registerModuleFullBackwardHook(2 as never)],
    ["registerModuleFullBackwardPreHook", () => nn.registerModuleFullBackwardPreHook([] as never)],
  ];
  for (const [op, fn] of cases) {
    assert.throws(fn, (e: Error) => {
      assert.ok(e instanceof TypeError);
      assert.match(e.message, new RegExp(`^${op}: hook must be a function, got \\w+`));
      return true;
    });
  }
  assert.equal(Object.hasOwn(lin, "forward"), false);
});

Deno.test("errors: options", () => {
  const lin = new nn.Linear(2, 2);
  const f = () => {};
  assert.throws(
    () => lin.registerForwardHook(f, { withKwargs: true } as never),
    /registerForwardHook: withKwargs is not supported: multigrad's forward takes positional/,
  );
  assert.throws(
    () => lin.registerForwardPreHook(f, { alwaysCall: true } as never),
    /registerForwardPreHook: unknown option "alwaysCall" \(expected "prepend"\)/,
  );
  assert.throws(
    () => lin.registerFullBackwardHook(f, { prepend: 1 } as never),
    /registerFullBackwardHook: prepend must be a boolean, got number/,
  );
  assert.throws(
    () => lin.registerFullBackwardPreHook(f, null as never),
    /registerFullBackwardPreHook: options must be an object, got null/,
  );
  assert.throws(
    () => nn.registerModuleForwardHook(f, { prepend: true } as never),
    /registerModuleForwardHook: unknown option "prepend" \(expected "alwaysCall"\)/,
  );
  assert.equal(Object.hasOwn(lin, "forward"), false);
});

Deno.test("errors: a backward pre-hook returning the wrong number or kind of gradients", () => {
  const lin = new nn.Linear(2, 2);
  const h = lin.registerFullBackwardPreHook((_m, go) => [...go, null]);
  const x = zeros([1, 2], { requiresGrad: true });
  assert.throws(
    () => lin.forward(x).sum().backward(),
    /full backward pre-hook of Linear returned an invalid number of grad_output, got 2, but expected 1/,
  );
  h.remove();
  const h2 = lin.registerFullBackwardPreHook(() => [3] as never);
  assert.throws(
    () => lin.forward(x).sum().backward(),
    /full backward pre-hook of Linear: grad_output 0 is number, expected a Tensor or null/,
  );
  h2.remove();
  lin.registerFullBackwardPreHook(() => [zeros([3, 3])]);
  assert.throws(
    () => lin.forward(x).sum().backward(),
    /gradient of shape \[3, 3\], expected \[1, 2\]/,
  );
});

Deno.test("errors: state-dict hooks returning what they must not", () => {
  const lin = new nn.Linear(2, 2);
  const h = lin.registerStateDictPostHook(() => 3 as never);
  assert.throws(
    () => lin.stateDict(),
    /stateDict: a state-dict post-hook of Linear returned a number, expected a state dict object or nothing/,
  );
  h.remove();
  lin.registerLoadStateDictPostHook(() => ({ missingKeys: [] }) as never);
  assert.throws(
    () => lin.loadStateDict(lin.stateDict()),
    /loadStateDict: a load-state-dict post-hook of Linear returned a object; it must return nothing/,
  );
  // A wrong shape throws before anything is written and before any hook runs.
  const other = new nn.Linear(2, 2);
  let ran = false;
  other.registerLoadStateDictPostHook(() => void (ran = true));
  assert.throws(
    () => other.loadStateDict({ weight: zeros([3, 2]), bias: zeros([2]) }),
    /size mismatch for "weight": copying a tensor of shape \[3, 2\]/,
  );
  assert.equal(ran, false);
});
