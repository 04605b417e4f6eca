/**
 * `torch.autograd`'s everyday extras: `gradcheck` / `gradgradcheck` (verdicts compared with
 * PyTorch 1.13's on the same functions and inputs, see `fixtures/torch_autograd_extras.py`),
 * anomaly mode (the node that returned NaN named as PyTorch names it; no effect when off) and
 * `autograd.backward` with several roots.
 * @module
 */

import assert from "node:assert/strict";
import {
  autograd,
  Function,
  type FunctionCtx,
  linear,
  logSoftmax,
  logsumexp,
  nn,
  softmax,
  type Tensor,
  tensor,
} from "../mod.ts";
import { backendTest, on, REF } from "./harness.ts";

interface Spec {
  shape: number[];
  values: number[];
}
interface Case {
  name: string;
  inputs: Spec[];
  gradcheck: boolean;
  gradcheckFast: boolean;
  gradgradcheck?: boolean;
  gradOutputs?: Spec[];
}
const FIXTURE = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_autograd_extras.json", import.meta.url)),
) as {
  cases: Case[];
  anomaly: Record<string, string | null>;
  tolerance: { delta: number; inputs: Spec; gradcheck: boolean }[];
};

const f64 = (s: Spec, requiresGrad = true) =>
  tensor(s.values, { shape: s.shape, dtype: "float64", device: REF, requiresGrad });

class Square extends Function {
  static override forward(ctx: FunctionCtx, x: Tensor): Tensor {
    ctx.saveForBackward(x);
    return x.mul(x);
  }
  static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
    const [x] = ctx.savedTensors;
    return g.mul(x).mul(2);
  }
}

/** A deliberately wrong backward (3x instead of 2x): gradcheck must fail on it. */
class WrongSquare extends Square {
  static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
    const [x] = ctx.savedTensors;
    return g.mul(x).mul(3);
  }
}

/** The right first derivative, but x's graph dropped: a wrong second derivative. */
class DetachedSquare extends Square {
  static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
    const [x] = ctx.savedTensors;
    return g.mul(x.detach()).mul(2);
  }
}

/** Right Jacobian rows, but a zero output gradient gives a nonzero input gradient. */
class NotScaled extends Square {
  static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
    const [x] = ctx.savedTensors;
    return g.mul(x).mul(2).add(g.abs().sum().eq(0).to("float64"));
  }
}

/** A backward that drifts a little at every call (not reentrant). */
class Drifting extends Square {
  static calls = 0;
  static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
    const [x] = ctx.savedTensors;
    Drifting.calls++;
    return g.mul(x).mul(2).mul(1 + 1e-9 * Drifting.calls);
  }
}

const FNS: Record<string, (...xs: Tensor[]) => Tensor | Tensor[]> = {
  "matmul": (a, b) => a.matmul(b),
  "conv2d": (x, w, b) => nn.functional.conv2d(x, w, b, { padding: 1 }),
  "softmax": (a) => softmax(a, 1),
  "logSoftmax": (a) => logSoftmax(a, 0),
  "tanh(matmul)": (a) => a.matmul(a).tanh(),
  "div pow": (a, b) => a.pow(3).div(b),
  "sigmoid mean": (a) => a.sigmoid().mean(1),
  "linear": (x, w, b) => linear(x, w, b),
  "layerNorm": (x) => nn.functional.layerNorm(x, [4]),
  "two outputs": (a, b) => [a.sin(), a.mul(b)],
  "int output skipped": (a) => [a.exp(), a.argmax().to("int32")],
  "maxPool2d": (x) => nn.functional.maxPool2d(x, 2),
  "cumsum prod": (a) => [a.cumsum(1), a.prod(0)],
  "logsumexp": (a) => logsumexp(a, 1),
  "identity": (a) => a,
  "abs at 0": (a) => a.abs(),
  "custom Function": (a) => Square.apply(a),
  "wrong custom Function": (a) => WrongSquare.apply(a),
  "detached backward": (a) => DetachedSquare.apply(a),
  "backward not scaled": (a) => NotScaled.apply(a),
  "not reentrant": (a) => Drifting.apply(a),
};

for (const c of FIXTURE.cases) {
  Deno.test(`gradcheck verdict as PyTorch's: ${c.name}`, async () => {
    const fn = FNS[c.name];
    assert.ok(fn, `no function for fixture case ${c.name}`);
    for (const fastMode of [false, true]) {
      Drifting.calls = 0;
      const verdict = await autograd.gradcheck(fn, c.inputs.map((s) => f64(s)), {
        raiseException: false,
        fastMode,
      });
      assert.equal(verdict, fastMode ? c.gradcheckFast : c.gradcheck, `fastMode ${fastMode}`);
    }
    if (c.gradgradcheck === undefined) return;
    const verdict = await autograd.gradgradcheck(
      fn,
      c.inputs.map((s) => f64(s)),
      c.gradOutputs!.map((s) => f64(s)),
      { raiseException: false },
    );
    assert.equal(verdict, c.gradgradcheck, "gradgradcheck");
  });
}

/** A backward off by a factor (1 + delta), set per case. */
class ScaledSquare extends Square {
  static delta = 0;
  static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
    const [x] = ctx.savedTensors;
    return g.mul(x).mul(2).mul(1 + ScaledSquare.delta);
  }
}

Deno.test("gradcheck's tolerance rule gives PyTorch's verdicts near the boundary (24 random cases)", async () => {
  const verdicts: boolean[] = [];
  for (const c of FIXTURE.tolerance) {
    ScaledSquare.delta = c.delta;
    const x = f64(c.inputs);
    verdicts.push(
      await autograd.gradcheck((a: Tensor) => ScaledSquare.apply(a), [x], {
        raiseException: false,
      }),
    );
  }
  assert.deepEqual(verdicts, FIXTURE.tolerance.map((c) => c.gradcheck));
  // Both verdicts occur: the cases straddle the boundary.
  assert.ok(verdicts.includes(true) && verdicts.includes(false));
});

Deno.test("gradcheck: the error names the output and input and shows both Jacobians", async () => {
  const x = tensor([1, 2], { dtype: "float64", requiresGrad: true });
  const y = tensor([3], { dtype: "float64", requiresGrad: true });
  const fn = (a: Tensor, b: Tensor) => [a.mul(b), WrongSquare.apply(a)];
  await assert.rejects(
    () => autograd.gradcheck(fn, [x, y]),
    (error: Error) => {
      assert.ok(error instanceof autograd.GradcheckError, String(error));
      assert.equal(error.name, "GradcheckError");
      assert.match(error.message, /^Jacobian mismatch for output 1 with respect to input 0,\n/);
      // Rows: input elements; columns: output elements (PyTorch's layout).
      assert.match(
        error.message,
        /numerical:tensor\(\[\[2\.0000, 0\.0000\],\n\s+\[0\.0000, 4\.0000\]\]/,
      );
      assert.match(
        error.message,
        /analytical:tensor\(\[\[3\.0000, 0\.0000\],\n\s+\[0\.0000, 6\.0000\]\]/,
      );
      return true;
    },
  );
  assert.equal(await autograd.gradcheck(fn, [x, y], { raiseException: false }), false);
  // The same function with the right backward passes; y does not reach output 1 (a zero block).
  assert.equal(
    await autograd.gradcheck((a: Tensor, b: Tensor) => [a.mul(b), Square.apply(a)], [x, y]),
    true,
  );
});

Deno.test("gradcheck: other checks' messages, and errors that are not verdicts", async () => {
  const x = tensor([0.5, -1, 2], { dtype: "float64", requiresGrad: true });
  await assert.rejects(
    () => autograd.gradcheck((a: Tensor) => NotScaled.apply(a), [x]),
    /backward not multiplied by grad_output/,
  );
  Drifting.calls = 0;
  await assert.rejects(
    () => autograd.gradcheck((a: Tensor) => Drifting.apply(a), [x]),
    /Backward is not reentrant/,
  );
  Drifting.calls = 0;
  assert.equal(
    await autograd.gradcheck((a: Tensor) => Drifting.apply(a), [x], { nondetTol: 1e-6 }),
    true,
  );
  // No input requires grad, and an unsupported option: errors even with raiseException false.
  const plain = tensor([1, 2], { dtype: "float64" });
  await assert.rejects(
    () => autograd.gradcheck((a: Tensor) => a.mul(2), [plain], { raiseException: false }),
    /gradcheck expects at least one input tensor to require gradient/,
  );
  await assert.rejects(
    () => autograd.gradcheck((a: Tensor) => a.mul(2), [x], { checkBatchedGrad: true }),
    /checkBatchedGrad is not supported/,
  );
  // No differentiable output: the numerical Jacobian must be zero.
  assert.equal(await autograd.gradcheck((a: Tensor) => a.argmax().to("int32"), x), true);
  await assert.rejects(
    () => autograd.gradcheck((a: Tensor) => a.detach().mul(2), [x]),
    /Numerical gradient for function expected to be zero/,
  );
  // One tensor passed twice is perturbed at both places (PyTorch 1.13: True for both checks).
  const m = tensor([0.3, -0.2, 0.5, 0.1], { dtype: "float64", shape: [2, 2], requiresGrad: true });
  const twice = (a: Tensor, b: Tensor) => a.matmul(b).tanh();
  assert.equal(await autograd.gradcheck(twice, [m, m]), true);
  assert.equal(await autograd.gradgradcheck(twice, [m, m]), true);
  // Inputs that are not tensors pass through.
  assert.equal(await autograd.gradcheck((a: Tensor, k: number) => a.mul(k).exp(), [x, 3]), true);
});

Deno.test("gradcheck warns as PyTorch on inputs that are not float64", async () => {
  const warned: string[] = [];
  const warn = console.warn;
  console.warn = (message: string) => void warned.push(message);
  try {
    const x = tensor([0.5, 1], { requiresGrad: true });
    // Float32 with PyTorch's eps fails, as PyTorch's does; a coarser step passes.
    assert.equal(
      await autograd.gradcheck((a: Tensor) => a.tanh(), [x], { raiseException: false }),
      false,
    );
    assert.equal(
      await autograd.gradcheck((a: Tensor) => a.tanh(), [x], { eps: 1e-2, atol: 1e-3 }),
      true,
    );
  } finally {
    console.warn = warn;
  }
  assert.equal(warned.length, 2);
  assert.match(
    warned[0],
    /input 0 requires gradient and is not a double precision floating point \(float32\)/,
  );
});

backendTest(
  "gradcheck and gradgradcheck read back from any device (float32, coarse step)",
  async (d) => {
    const x = on(d, [2, 3], [0.1, -0.5, 0.9, 0.3, -0.2, 0.7]);
    x.requiresGrad = true;
    const w = on(d, [3, 2], [0.4, -0.3, 0.2, 0.8, -0.6, 0.5]);
    w.requiresGrad = true;
    const options = { eps: 1e-2, atol: 2e-3, rtol: 1e-2 };
    const warn = console.warn;
    console.warn = () => {};
    try {
      assert.equal(
        await autograd.gradcheck((a: Tensor, b: Tensor) => a.matmul(b).tanh(), [x, w], options),
        true,
      );
      assert.equal(
        await autograd.gradgradcheck((a: Tensor) => a.mul(a).sin(), [x], null, options),
        true,
      );
      const bad = (a: Tensor) => WrongSquare.apply(a);
      assert.equal(
        await autograd.gradcheck(bad, [x], { ...options, raiseException: false }),
        false,
      );
    } finally {
      console.warn = warn;
    }
  },
);

// ---- anomaly mode ----

const ANOMALY: Record<string, (d: typeof REF) => Tensor> = {
  "sqrt at 0": (d) => {
    const x = on(d, [2], [0, 1]);
    x.requiresGrad = true;
    return x.sqrt().mul(0).sum();
  },
  "mul by inf": (d) => {
    const x = on(d, [2], [1, 2]);
    x.requiresGrad = true;
    return x.mul(on(d, [2], [Infinity, 1])).mul(0).sum();
  },
  "div 0 by 0": (d) => {
    const x = on(d, [2], [0, 1]);
    const y = on(d, [2], [0, 2]);
    x.requiresGrad = true;
    y.requiresGrad = true;
    return x.div(y).sum().mul(0).add(y.sum());
  },
  "no nan": (d) => {
    const x = on(d, [2], [1, 4]);
    x.requiresGrad = true;
    return x.sqrt().sum();
  },
};

/** PyTorch's node name without its overload number: `SqrtBackward0` is our `SqrtBackward`. */
const ours = (name: string) => name.replace(/\d+$/, "");

for (const [name, build] of Object.entries(ANOMALY)) {
  Deno.test(`detectAnomaly on cpu names the node PyTorch names: ${name}`, () => {
    const expected = FIXTURE.anomaly[name];
    if (expected === null) {
      autograd.detectAnomaly(() => build(REF).backward());
      return;
    }
    assert.throws(
      () => autograd.detectAnomaly(() => build(REF).backward()),
      (error: Error) => {
        assert.match(
          error.message,
          new RegExp(`^Function '${ours(expected)}' returned nan values in its \\d+th output\\.`),
        );
        // The forward's stack, down to this file (where the loss was built).
        assert.match(
          error.message,
          /Traceback of forward call that caused the error:\n.*autograd_extras_test\.ts/s,
        );
        return true;
      },
    );
  });
}

Deno.test("anomaly mode: off by default and restored, no effect when off, async fn", async () => {
  assert.equal(autograd.isAnomalyEnabled(), false);
  const loss = ANOMALY["sqrt at 0"](REF);
  const x = loss.gradFn!; // recorded while off: no trace kept
  assert.equal(x.trace, undefined);
  loss.backward(); // off: the NaN goes through silently, as PyTorch
  const leaf = tensor([0, 1], { requiresGrad: true });
  leaf.sqrt().mul(0).sum().backward();
  assert.ok(Number.isNaN((await leaf.grad!.data())[0]), "0 · ∞ is NaN, unreported");
  // Recorded with the mode off, backward with it on: named, without a forward stack (as PyTorch).
  const early = ANOMALY["sqrt at 0"](REF);
  assert.throws(
    () => autograd.detectAnomaly(() => early.backward()),
    /^Error: Function 'SqrtBackward' returned nan values in its 0th output\.\nNo forward pass information available/,
  );
  autograd.setDetectAnomaly(true, { checkNan: false });
  try {
    assert.equal(autograd.isAnomalyEnabled(), true);
    assert.equal(autograd.isAnomalyCheckNanEnabled(), false);
    ANOMALY["sqrt at 0"](REF).backward(); // checkNan false: no error
  } finally {
    autograd.setDetectAnomaly(false);
  }
  assert.equal(autograd.isAnomalyEnabled(), false);
  await assert.rejects(
    () =>
      autograd.detectAnomaly(async () => {
        assert.equal(autograd.isAnomalyEnabled(), true);
        await Promise.resolve();
        ANOMALY["sqrt at 0"](REF).backward();
      }),
    /Function 'SqrtBackward' returned nan values in its 0th output/,
  );
  assert.equal(autograd.isAnomalyEnabled(), false, "restored after the async fn");
  assert.throws(() =>
    autograd.detectAnomaly(() => {
      throw new RangeError("mine");
    }), /mine/);
  assert.equal(autograd.isAnomalyEnabled(), false, "restored after a throw");
});

class Throws extends Square {
  static override backward(): Tensor {
    throw new Error("broken backward");
  }
}

Deno.test("anomaly mode appends the forward stack to an error a backward throws", () => {
  const x = tensor([1, 2], { requiresGrad: true });
  assert.throws(() => Throws.apply(x).sum().backward(), (e: Error) => !/Traceback/.test(e.message));
  assert.throws(
    () => autograd.detectAnomaly(() => Throws.apply(x).sum().backward()),
    /broken backward\nError detected in ThrowsBackward\. Traceback of forward call that caused the error:\n.*autograd_extras_test\.ts/s,
  );
});

backendTest(
  "detectAnomaly on any device: a NaN is reported, by the next read off the cpu",
  async (d) => {
    const loss = ANOMALY["sqrt at 0"](d);
    const host = d.backendDevice.readSync !== undefined;
    let thrown: unknown = null;
    try {
      autograd.detectAnomaly(() => loss.backward());
    } catch (error) {
      thrown = error;
    }
    const message = /Function 'SqrtBackward' returned nan values in its 0th output/;
    if (host) {
      assert.match(String(thrown), message);
    } else {
      assert.equal(thrown, null, "a GPU's check is deferred");
      await assert.rejects(() => loss.data(), message);
      assert.equal((await loss.data())[0], 0, "reported once");
      // An async fn rejects with it itself.
      const again = ANOMALY["sqrt at 0"](d);
      await assert.rejects(
        () => autograd.detectAnomaly(() => Promise.resolve().then(() => again.backward())),
        message,
      );
    }
    // A pass without NaN reports nothing.
    const fine = ANOMALY["no nan"](d);
    await autograd.detectAnomaly(() => Promise.resolve().then(() => fine.backward()));
    assert.deepEqual([...await fine.data()].map((v) => Math.round(v)), [3]);
  },
);

// ---- autograd.backward ----

backendTest("autograd.backward with two roots equals the sum of separate backwards", async (d) => {
  const make = () => {
    const w = on(d, [3], [1, -2, 0.5]);
    w.requiresGrad = true;
    const b = on(d, [3], [0.3, 0.1, -0.4]);
    b.requiresGrad = true;
    const h = w.mul(b).tanh();
    return { w, b, roots: [h.sum(), h.mul(h).mul(w)] };
  };
  const g = on(d, [3], [1, 2, -1]);
  const one = make();
  autograd.backward(one.roots, [null, g]);
  const two = make();
  two.roots[0].backward(undefined, { retainGraph: true });
  two.roots[1].backward(g);
  for (const k of ["w", "b"] as const) {
    const got = await one[k].grad!.data();
    const want = await two[k].grad!.data();
    got.forEach((v, i) =>
      assert.ok(Math.abs(v - want[i]) <= 1e-6, `${k}.grad[${i}] ${v} vs ${want[i]}`)
    );
  }
});

backendTest("autograd.backward: inputs, createGraph, and its errors", async (d) => {
  const x = on(d, [2], [1, 2]);
  x.requiresGrad = true;
  const w = on(d, [2], [3, 4]);
  w.requiresGrad = true;
  const y = x.mul(w);
  const seen: number[][] = [];
  x.registerHook((g) => void g.data().then((v) => seen.push([...v])));
  autograd.backward([y.mul(2).sum(), y.sum()], null, { inputs: [x, y] });
  assert.deepEqual([...await x.grad!.data()], [9, 12]);
  assert.deepEqual(
    [...await y.grad!.data()],
    [3, 3],
    "an intermediate input gets the gradient that reached it",
  );
  assert.equal(w.grad, null, "leaves not in inputs are left alone");
  assert.deepEqual(seen, [[9, 12]], "the leaf's hook ran");
  // createGraph: the gradient is differentiable.
  const z = on(d, [2], [1, 3]);
  z.requiresGrad = true;
  autograd.backward(z.pow(3).sum(), undefined, { createGraph: true });
  assert.ok(z.grad!.requiresGrad);
  const [h] = autograd.grad(z.grad!.sum(), z);
  assert.deepEqual([...await h!.data()], [6, 18]);
  assert.throws(
    () => autograd.backward(y.sum(), null, { inputs: [] }),
    /'inputs' argument to backward\(\) cannot be empty/,
  );
  assert.throws(
    () => autograd.backward(y),
    /autograd\.backward: grad can be implicitly created only for scalar outputs; output 0 has shape \[2\], pass gradTensors/,
  );
  assert.throws(
    () => autograd.backward(y.sum(), on(d, [2], [1, 1])),
    /autograd\.backward: mismatch in shape: gradTensors\[0\] has a shape of \[2\] and outputs\[0\] has a shape of \[\]/,
  );
  assert.throws(
    () => autograd.backward(on(d, [1], [1])),
    /element 0 of tensors does not require grad/,
  );
  autograd.backward([]); // nothing to do, as PyTorch
});
