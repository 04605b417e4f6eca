/**
 * Module hooks against PyTorch 1.13 (tests/fixtures/torch_module_hooks.json): what a full backward
 * hook sees as gradInput and gradOutput for Linear, Conv2d, a Sequential, a module with two tensor
 * arguments and a number, a module with two outputs, a module whose input needs no gradient; the
 * gradients after a hook replaced gradInput; a forward pre-hook and a forward hook replacing
 * arguments and outputs, and the order every hook runs in. Also: removal (the plain `forward` is
 * back), hooks surviving `.to(device)`, DataParallel replicas running the hooks, float64 gradient
 * checks through hooked modules, and errors. Found in review: in-place changes of a hooked module's
 * arguments or outputs are refused (they gave a wrong gradient), tensor arguments with no gradient
 * read as zeros, a replaced output goes with the graph, MultiheadAttention leaves out_proj's hooks
 * alone, and async hooks are an error.
 * @module
 */

import assert from "node:assert/strict";
import {
  type Device,
  distributed,
  keep,
  nn,
  noGrad,
  parallel,
  type Tensor,
  tensor,
  zeros,
} from "../mod.ts";
import { assertTensor, backendTest, fixtureTensor, type FixtureValues } from "./harness.ts";
import { check, CPU0, CPU1, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_module_hooks.json" with { type: "json" };

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-5, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

type Grads = (Tensor | null)[];
type Call = { gradInput: Grads; gradOutput: Grads };

/** Copies of the gradients a hook got, kept past the backward pass that made them. */
function held(gs: Grads): Grads {
  return gs.map((g) => (g ? keep(g.clone()) : null));
}

async function assertGrads(
  actual: Grads,
  expected: (FixtureValues | null)[],
  device: Device,
  what: string,
): Promise<void> {
  assert.equal(actual.length, expected.length, `${what}: ${actual.length} slots`);
  for (const [i, e] of expected.entries()) {
    if (e === null) {
      assert.equal(actual[i], null, `${what}[${i}] should be null`);
      continue;
    }
    assert.ok(actual[i], `${what}[${i}] should be a tensor`);
    await assertTensor(actual[i]!, e as unknown[], { ...tol(device), what: `${what}[${i}]` });
  }
}

async function assertCalls(
  calls: Call[],
  expected: { grad_input: (FixtureValues | null)[]; grad_output: (FixtureValues | null)[] }[],
  device: Device,
  what: string,
): Promise<void> {
  assert.equal(calls.length, expected.length, `${what}: number of hook calls`);
  for (const [k, e] of expected.entries()) {
    await assertGrads(calls[k].gradInput, e.grad_input, device, `${what} call ${k} gradInput`);
    await assertGrads(calls[k].gradOutput, e.grad_output, device, `${what} call ${k} gradOutput`);
  }
}

function makeModule(name: string): nn.Module {
  if (name.startsWith("linear")) return new nn.Linear(3, 2);
  if (name.startsWith("conv2d")) return new nn.Conv2d(2, 3, 3, { padding: 1 });
  return new nn.Sequential(new nn.Linear(3, 4), new nn.Tanh(), new nn.Linear(4, 2));
}

function load(m: nn.Module, params: Record<string, FixtureValues>, device: Device): void {
  m.to(device);
  const sd: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(params)) sd[k] = fixtureTensor(v, device);
  m.loadStateDict(sd);
}

async function assertParamGrads(
  m: nn.Module,
  expected: Record<string, FixtureValues>,
  device: Device,
): Promise<void> {
  const named = Object.fromEntries(m.namedParameters());
  assert.deepEqual(Object.keys(named).sort(), Object.keys(expected).sort());
  for (const [k, e] of Object.entries(expected)) {
    await assertTensor(named[k].grad!, e as unknown[], { ...tol(device), what: `${k}.grad` });
  }
}

type BackwardCase = {
  name: string;
  params: Record<string, FixtureValues>;
  x: FixtureValues;
  g: FixtureValues;
  scale: number | null;
  x_requires_grad: boolean;
  output: FixtureValues;
  calls: { grad_input: (FixtureValues | null)[]; grad_output: (FixtureValues | null)[] }[];
  x_grad: FixtureValues | null;
  param_grads: Record<string, FixtureValues>;
};

const simple = (fixtures.backward as unknown as BackwardCase[]).filter((c) =>
  /^(linear|conv2d|sequential)/.test(c.name)
);
assert.equal(simple.length, 7);

for (const c of simple) {
  backendTest(`registerFullBackwardHook: ${c.name} as PyTorch`, async (device) => {
    const m = makeModule(c.name);
    load(m, c.params, device);
    const calls: Call[] = [];
    const handle = m.registerFullBackwardHook((_mod, gradInput, gradOutput) => {
      calls.push({ gradInput: held(gradInput), gradOutput: held(gradOutput) });
      if (c.scale === null) return undefined;
      return gradInput.map((g) => (g ? g.mul(c.scale!) : null));
    });
    const x = fixtureTensor(c.x, device, { requiresGrad: c.x_requires_grad });
    const out = m.forward(x) as Tensor;
    await assertTensor(out, c.output as unknown[], { ...tol(device), what: "output" });
    assert.equal(calls.length, 0, "no hook call before backward");
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertCalls(calls, c.calls, device, c.name);
    if (c.x_grad === null) assert.equal(x.grad, null);
    else await assertTensor(x.grad!, c.x_grad as unknown[], { ...tol(device), what: "x.grad" });
    await assertParamGrads(m, c.param_grads, device);
    handle.remove();
  });
}

type NestedCase = {
  params: Record<string, FixtureValues>;
  x: FixtureValues;
  g: FixtureValues;
  output: FixtureValues;
  outer_calls: BackwardCase["calls"];
  inner_calls: BackwardCase["calls"];
  x_grad: FixtureValues;
  param_grads: Record<string, FixtureValues>;
};

backendTest(
  "a hook on an inner layer scaling its gradInput, seen by the outer hook",
  async (device) => {
    const c = fixtures.backward.find((b) =>
      b.name === "nested_inner_scaled"
    ) as unknown as NestedCase;
    const seq = makeModule("sequential") as nn.Sequential;
    load(seq, c.params, device);
    const outer: Call[] = [];
    const inner: Call[] = [];
    seq.registerFullBackwardHook((_m, gi, go) => {
      outer.push({ gradInput: held(gi), gradOutput: held(go) });
    });
    seq.at(2).registerFullBackwardHook((_m, gi, go) => {
      inner.push({ gradInput: held(gi), gradOutput: held(go) });
      return [gi[0]!.mul(0.25)];
    });
    const x = fixtureTensor(c.x, device, { requiresGrad: true });
    const out = seq.forward(x);
    await assertTensor(out, c.output as unknown[], { ...tol(device), what: "output" });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertCalls(outer, c.outer_calls, device, "outer");
    await assertCalls(inner, c.inner_calls, device, "inner");
    await assertTensor(x.grad!, c.x_grad as unknown[], { ...tol(device), what: "x.grad" });
    await assertParamGrads(seq, c.param_grads, device);
  },
);

/** `a * b * scale + a`: two tensor arguments and a number, as the fixture's MulAdd. */
class MulAdd extends nn.Module {
  override forward(a: Tensor, b: Tensor, scale: number): Tensor {
    return a.mul(b).mul(scale).add(a);
  }
}

/** Two outputs, as the fixture's Split. */
class Split extends nn.Module {
  override forward(x: Tensor): [Tensor, Tensor] {
    return [x.tanh(), x.mul(3)];
  }
}

backendTest(
  "full backward hook: a number argument and an unused output get null slots",
  async (device) => {
    const m = fixtures.backward.find((b) => b.name === "muladd")! as unknown as {
      a: FixtureValues;
      b: FixtureValues;
      scale: number;
      g: FixtureValues;
      output: FixtureValues;
      calls: BackwardCase["calls"];
      a_grad: FixtureValues;
      b_grad: FixtureValues;
    };
    const mod = new MulAdd();
    const calls: Call[] = [];
    mod.registerFullBackwardHook((_m, gi, go) => {
      calls.push({ gradInput: held(gi), gradOutput: held(go) });
      return [gi[0]!.mul(2), null, null];
    });
    const a = fixtureTensor(m.a, device, { requiresGrad: true });
    const b = fixtureTensor(m.b, device, { requiresGrad: true });
    const out = mod.forward(a, b, m.scale);
    await assertTensor(out, m.output as unknown[], tol(device));
    out.mul(fixtureTensor(m.g, device)).sum().backward();
    await assertCalls(calls, m.calls, device, "muladd");
    await assertTensor(a.grad!, m.a_grad as unknown[], { ...tol(device), what: "a.grad" });
    // The hook returned null for b: it gets no gradient, as in PyTorch.
    assert.equal(b.grad, null);
    assert.equal(m.b_grad, null);

    const s = fixtures.backward.find((b) => b.name === "split")! as unknown as {
      x: FixtureValues;
      g: FixtureValues;
      calls: BackwardCase["calls"];
      x_grad: FixtureValues;
    };
    const split = new Split();
    const splitCalls: Call[] = [];
    split.registerFullBackwardHook((_m, gi, go) => {
      splitCalls.push({ gradInput: held(gi), gradOutput: held(go) });
    });
    const x = fixtureTensor(s.x, device, { requiresGrad: true });
    const [first] = split.forward(x);
    first.mul(fixtureTensor(s.g, device)).sum().backward();
    await assertCalls(splitCalls, s.calls, device, "split");
    await assertTensor(x.grad!, s.x_grad as unknown[], tol(device));
  },
);

backendTest(
  "forward pre-hook and forward hook replace arguments and outputs; order as PyTorch",
  async (device) => {
    const c = fixtures.forward;
    const seq = makeModule("sequential") as nn.Sequential;
    load(seq, c.params, device);
    const events: string[] = [];
    const named: [string, nn.Module][] = [["seq", seq], ["0", seq.at(0)], ["1", seq.at(1)], [
      "2",
      seq.at(2),
    ]];
    for (const [name, m] of named) {
      m.registerForwardPreHook(() => void events.push(`pre ${name}`));
      m.registerForwardHook(() => void events.push(`forward ${name}`));
      m.registerFullBackwardHook(() => void events.push(`backward ${name}`));
    }
    seq.registerForwardPreHook((_m, args) => [(args[0] as Tensor).mul(2)]);
    seq.at(1).registerForwardHook((_m, _args, out) => (out as Tensor).add(1));
    const x = fixtureTensor(c.x, device, { requiresGrad: true });
    const out = seq.forward(x);
    await assertTensor(out, c.output as unknown[], { ...tol(device), what: "output" });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    assert.deepEqual(events, c.events);
    await assertTensor(x.grad!, c.x_grad as unknown[], { ...tol(device), what: "x.grad" });
    await assertParamGrads(seq, c.param_grads, device);
  },
);

Deno.test("hooks run in registration order; a single returned value becomes the only argument", async () => {
  const lin = new nn.Linear(2, 2);
  const log: string[] = [];
  lin.registerForwardPreHook(() => void log.push("a"));
  lin.registerForwardPreHook((_m, args) => {
    log.push("b");
    return (args[0] as Tensor).mul(0); // not an array: the single argument
  });
  lin.registerForwardPreHook((_m, args) => {
    log.push(`c:${args.length}`);
  });
  const seen: unknown[][] = [];
  lin.registerForwardHook((_m, args) => void seen.push(args));
  const out = lin.forward(tensor([[1, 2]]));
  assert.deepEqual(log, ["a", "b", "c:1"]);
  // The forward hook sees the replaced arguments; the output is the bias alone.
  assert.equal(seen.length, 1);
  assert.deepEqual(Array.from(await (seen[0][0] as Tensor).data()), [0, 0]);
  assert.deepEqual(Array.from(await out.data()), Array.from(await lin.bias!.data()));
  // `call` runs the hooks too.
  lin.call(tensor([[1, 2]]));
  assert.equal(log.length, 6);
});

Deno.test("remove() restores the plain forward; a second remove() does nothing", () => {
  const lin = new nn.Linear(2, 2);
  const proto = Object.getPrototypeOf(lin).forward;
  assert.equal(Object.hasOwn(lin, "forward"), false);
  let calls = 0;
  const h1 = lin.registerForwardHook(() => void calls++);
  const h2 = lin.registerForwardPreHook(() => void calls++);
  assert.notEqual(h1.id, h2.id);
  assert.equal(Object.hasOwn(lin, "forward"), true);
  // Invisible to fields, repr and the state dict.
  assert.equal(lin.toString(), "Linear(in_features=2, out_features=2, bias=True)");
  assert.deepEqual(Object.keys(lin.stateDict()), ["weight", "bias"]);
  assert.equal(Object.keys(lin).includes("forward"), false);
  lin.forward(zeros([1, 2]));
  assert.equal(calls, 2);
  h1.remove();
  lin.forward(zeros([1, 2]));
  assert.equal(calls, 3);
  assert.equal(Object.hasOwn(lin, "forward"), true);
  h2.remove();
  h2.remove();
  assert.equal(Object.hasOwn(lin, "forward"), false);
  assert.equal(lin.forward, proto);
  lin.forward(zeros([1, 2]));
  assert.equal(calls, 3);
});

Deno.test("an instance's own forward is kept under the hooks and restored after", () => {
  const lin = new nn.Linear(2, 2);
  const own = (x: Tensor) => x.mul(10);
  (lin as unknown as { forward: unknown }).forward = own;
  const h = lin.registerForwardHook((_m, _a, out) => (out as Tensor).add(1));
  return (async () => {
    assert.deepEqual(Array.from(await lin.forward(tensor([[1, 2]])).data()), [11, 21]);
    h.remove();
    assert.equal(lin.forward, own);
  })();
});

backendTest("hooks survive .to(device); nested Sequential hooks run", (_device, devices) => {
  const inner = new nn.Sequential(new nn.Linear(3, 3), new nn.ReLU());
  const net = new nn.Sequential(inner, new nn.Linear(3, 1));
  const seen: string[] = [];
  inner.at(0).registerForwardHook((_m, _a, out) => void seen.push(String((out as Tensor).device)));
  const target = devices[devices.length - 1];
  net.to(target);
  const y = net.forward(zeros([2, 3], { device: target }));
  assert.deepEqual([...y.shape], [2, 1]);
  assert.deepEqual(seen, [String(target)]);
});

Deno.test("DataParallel over cpu:0 and cpu:1: every replica runs the forward hook with itself", async () => {
  const lin = new nn.Linear(3, 2);
  const devicesSeen: string[] = [];
  const modulesSeen: nn.Module[] = [];
  const h = lin.registerForwardHook((m, _args, out) => {
    devicesSeen.push(String((out as Tensor).device));
    modulesSeen.push(m);
    return (out as Tensor).mul(2);
  });
  const dp = new nn.DataParallel(lin, { devices: [CPU0, CPU1] });
  const x = tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9], [1, 0, 1]]);
  const y = dp.forward(x);
  assert.deepEqual(devicesSeen.sort(), ["cpu:0", "cpu:1"]);
  assert.ok(modulesSeen.includes(lin));
  assert.equal(modulesSeen.length, 2);
  // The replica is not the original but runs the same hook.
  assert.ok(modulesSeen.some((m) => m !== lin));
  const plain = noGrad(() => x.matmul(lin.weight.transpose(0, 1)).add(lin.bias!).mul(2));
  assert.deepEqual(Array.from(await y.data()), Array.from(await plain.data()));
  // Gradients flow back through the replicas into the original's parameters.
  y.sum().backward();
  assert.ok(lin.weight.grad);
  h.remove();
  devicesSeen.length = 0;
  dp.forward(x);
  assert.deepEqual(devicesSeen, []);
  // Replicas made by parallel.replicate share the hooks while they are registered.
  const pre: string[] = [];
  lin.registerForwardPreHook((m) => void pre.push(m === lin ? "original" : "replica"));
  const replicas = parallel.replicate(lin, [CPU0, CPU1]);
  replicas[1].forward(zeros([1, 3], { device: CPU1 }));
  assert.deepEqual(pre, ["replica"]);
});

Deno.test("full backward hook: a module where no input requires grad must return nothing", () => {
  const lin = new nn.Linear(2, 2);
  lin.registerFullBackwardHook((_m, gi) => gi.map(() => zeros([1, 2])));
  const y = lin.forward(zeros([1, 2]));
  assert.throws(() => y.sum().backward(), /no input requires gradient.*undefined or null/);
});

Deno.test("full backward hook: wrong number of gradients or a bad hook is a clear error", () => {
  const lin = new nn.Linear(2, 2);
  const h = lin.registerFullBackwardHook((_m, gi) => [...gi, null]);
  const x = zeros([1, 2], { requiresGrad: true });
  assert.throws(
    () => lin.forward(x).sum().backward(),
    /invalid number of grad_input, got 2, but expected 1/,
  );
  h.remove();
  lin.registerFullBackwardHook(() => [zeros([3, 3])]);
  assert.throws(
    () => lin.forward(zeros([1, 2], { requiresGrad: true })).sum().backward(),
    /gradient of shape \[3, 3\], expected \[1, 2\]/,
  );
  assert.throws(
    () => lin.registerForwardHook(null as unknown as nn.ForwardHook),
    /registerForwardHook: hook must be a function, got null/,
  );
  assert.throws(
    () => lin.registerForwardPreHook(3 as unknown as nn.ForwardPreHook),
    /registerForwardPreHook: hook must be a function, got number/,
  );
});

Deno.test("full backward hook: nothing recorded under noGrad; hooks of a forward are those it ran with", () => {
  const lin = new nn.Linear(2, 2);
  let calls = 0;
  const h = lin.registerFullBackwardHook(() => void calls++);
  const x = zeros([1, 2], { requiresGrad: true });
  const y0 = noGrad(() => lin.forward(x));
  assert.equal(y0.gradFn, null);
  const y = lin.forward(x);
  h.remove();
  y.sum().backward();
  assert.equal(calls, 1);
});

// Hooks that pass gradients on (unchanged, or as copies) leave the gradients exact.
check("MulAdd with a full backward hook returning nothing", (a, b) => {
  const m = new MulAdd();
  m.registerFullBackwardHook(() => undefined);
  m.registerForwardHook((_m, _args, out) => (out as Tensor).tanh());
  return m.forward(a, b, 0.5);
}, [inp([2, 3], 1), inp([2, 3], 2)]);

check("Split with a full backward hook returning copies of gradInput", (x) => {
  const m = new Split();
  m.registerFullBackwardHook((_m, gi) => gi.map((g) => g && g.mul(1)));
  const [a, b] = m.forward(x);
  return a.mul(b);
}, [inp([4], 3)]);

Deno.test("a TransformerEncoder's layers copy the hooks of the layer they were made from", () => {
  const layer = new nn.TransformerEncoderLayer(4, 2, { dimFeedforward: 8 });
  const seen: nn.Module[] = [];
  const h = layer.registerForwardHook((m) => void seen.push(m));
  const enc = new nn.TransformerEncoder(layer, 2);
  enc.forward(zeros([3, 1, 4]));
  assert.equal(seen.length, 2);
  assert.ok(seen[0] !== layer && seen[1] !== layer && seen[0] !== seen[1]);
  // Removing the hook from the original leaves the copies' (PyTorch's deepcopy).
  h.remove();
  enc.forward(zeros([3, 1, 4]));
  assert.equal(seen.length, 4);
  layer.forward(zeros([3, 1, 4]));
  assert.equal(seen.length, 4);
});

Deno.test({
  name: "DistributedDataParallel runs the wrapped module's hooks (local group of 1)",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    await distributed.initProcessGroup({ backend: "local", worldSize: 1 });
    try {
      const lin = new nn.Linear(3, 2);
      const events: string[] = [];
      lin.registerForwardHook((_m, _a, out) => {
        events.push("forward");
        return (out as Tensor).mul(2);
      });
      lin.registerFullBackwardHook((_m, gi) => {
        events.push("backward");
        return [gi[0]!.mul(3)];
      });
      const ddp = new distributed.DistributedDataParallel(lin);
      const x = tensor([[1, 2, 3]], { requiresGrad: true });
      ddp.forward(x).sum().backward();
      assert.deepEqual(events, ["forward", "backward"]);
      // d/dx of sum(2·(xWᵀ + b)) is 2·(column sums of W), then the hook's 3.
      const w = await lin.weight.data();
      const expected = [0, 1, 2].map((j) => 6 * (w[j] + w[3 + j]));
      const gx = Array.from(await x.grad!.data());
      expected.forEach((e, j) => assert.ok(Math.abs(gx[j] - e) < 1e-5, `x.grad[${j}]`));
      // The parameters' gradients carry the forward hook's 2 (not the backward hook's 3).
      assert.deepEqual(Array.from(await lin.bias!.grad!.data()), [2, 2]);
    } finally {
      await distributed.destroyProcessGroup();
    }
  },
});

/** Doubles its argument in place, as a module with an in-place op on its input. */
class DoubleInPlace extends nn.Module {
  override forward(x: Tensor): Tensor {
    return x.mul_(2);
  }
}

backendTest(
  "in place on a hooked module's argument or output is refused, as PyTorch (never a wrong gradient)",
  async (device) => {
    // Unhooked, `x + double_(x)` is 4x: x itself was doubled, so both terms carry the 2.
    const x0 = tensor([1, -2, 3], { device, requiresGrad: true });
    const inner = new DoubleInPlace();
    const residual = (x: Tensor) => x.add(inner.forward(x));
    residual(x0.mul(1)).sum().backward();
    assert.deepEqual(Array.from(await x0.grad!.data()), [4, 4, 4]);
    // Hooked, the argument is a pass-through sharing x's memory: doubling it in place would double
    // x's values but not x's history (the gradient read 3). PyTorch raises; so does multigrad.
    inner.registerFullBackwardHook(() => {});
    assert.throws(() => residual(x0.mul(1)), /mul_: .*full backward hook/);
    // The same for the output: PyTorch refuses `out.mul_(3)` on a hooked module's output.
    const square = new (class Square extends nn.Module {
      override forward(x: Tensor): Tensor {
        return x.mul(x);
      }
    })();
    square.registerFullBackwardHook(() => {});
    const out = square.forward(x0);
    assert.throws(() => out.mul_(3), /mul_: .*full backward hook/);
    // Under noGrad nothing is recorded, so nothing is refused.
    noGrad(() => square.forward(x0).mul_(3));
  },
);

backendTest(
  "full backward hook: a tensor argument that gets no gradient reads as zeros, as PyTorch",
  async (device) => {
    // PyTorch 1.13: gi = (tensor([2., 2.]), tensor([0., 0.])) and b.grad = zeros for both an
    // argument that requires grad but is unused and one that needs no grad; null for a number.
    class FirstOnly extends nn.Module {
      override forward(a: Tensor, _b: Tensor, _k: number): Tensor {
        return a.mul(2);
      }
    }
    const m = new FirstOnly();
    const calls: Call[] = [];
    m.registerFullBackwardHook((_m, gi, go) => {
      calls.push({ gradInput: held(gi), gradOutput: held(go) });
    });
    const a = tensor([1, 1], { device, requiresGrad: true });
    for (const bRequiresGrad of [true, false]) {
      calls.length = 0;
      a.grad = null;
      const b = tensor([1, 1], { device, requiresGrad: bRequiresGrad });
      m.forward(a, b, 3).sum().backward();
      assert.equal(calls.length, 1);
      const [ga, gb, gk] = calls[0].gradInput;
      assert.deepEqual(Array.from(await ga!.data()), [2, 2]);
      assert.ok(gb, `b (requiresGrad ${bRequiresGrad}) should read as zeros`);
      assert.deepEqual(Array.from(await gb.data()), [0, 0]);
      assert.equal(gk, null);
      if (bRequiresGrad) assert.deepEqual(Array.from(await b.grad!.data()), [0, 0]);
      else assert.equal(b.grad, null);
    }
  },
);

Deno.test("a forward hook replacing a top-level module's output: backward frees the replaced one", async () => {
  const d = CPU0;
  // Bytes a training step leaves behind, with or without a hook that replaces the output.
  const leftAfterStep = async (hooked: boolean) => {
    const lin = new nn.Linear(4, 3).to(d);
    const x = tensor([[1, 2, 3, 4], [5, 6, 7, 8]], { device: d, requiresGrad: true });
    if (hooked) lin.registerForwardHook((_m, _a, out) => (out as Tensor).mul(2));
    const step = () => {
      const out = lin.forward(x);
      const loss = out.sum();
      loss.backward();
      loss.dispose();
      out.dispose();
      x.grad!.dispose();
      x.grad = null;
    };
    step();
    await lin.weight.grad!.data();
    const base = d.memory().bytesInUse;
    step();
    return d.memory().bytesInUse - base;
  };
  // The hook runs in the module's scope, as a layer's own forward: the output it replaced goes
  // with the graph at backward (it was left to the GC: 24 bytes more per step here).
  assert.equal(await leftAfterStep(true), await leftAfterStep(false));
});

Deno.test("MultiheadAttention projects with out_proj's parameters: hooks on out_proj never run, as PyTorch", () => {
  const mha = new nn.MultiheadAttention(4, 2);
  const events: string[] = [];
  for (const [name, m] of mha.namedModules()) {
    m.registerForwardHook(() => void events.push(`forward ${name || "<root>"}`));
    m.registerFullBackwardHook(() => void events.push(`backward ${name || "<root>"}`));
  }
  const x = zeros([3, 1, 4], { requiresGrad: true });
  mha.forward(x, x, x)[0].sum().backward();
  // PyTorch 1.13 gives exactly these two (F.multi_head_attention_forward reads out_proj.weight).
  assert.deepEqual(events, ["forward <root>", "backward <root>"]);
  assert.ok(mha.out_proj.weight.grad, "out_proj still learns");
});

Deno.test("an async hook (a Promise returned) is a clear error, not a Promise passed on", async () => {
  const seq = new nn.Sequential(new nn.Linear(3, 4), new nn.Linear(4, 2));
  const x = zeros([2, 3], { requiresGrad: true });
  const h = seq.at(0).registerForwardHook(async () => {});
  assert.throws(() => seq.forward(x), /forward hook of Linear returned a Promise/);
  h.remove();
  const pre = seq.at(0).registerForwardPreHook(async () => {});
  assert.throws(() => seq.forward(x), /forward pre-hook of Linear returned a Promise/);
  pre.remove();
  // Its type already refuses an async function; JavaScript callers still get the error.
  seq.at(1).registerFullBackwardHook((async () => {}) as unknown as nn.FullBackwardHook);
  assert.throws(
    () => seq.forward(x).sum().backward(),
    /full backward hook of Linear returned a Promise/,
  );
  await Promise.resolve();
});
