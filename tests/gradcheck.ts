/**
 * The numeric gradient check every float64 gradcheck uses: an op's backward
 * against central finite differences, in float64 on the cpu reference
 * backend.
 *
 * For `y = f(x1, ..., xn)` the scalar checked is `L = Σ y * w` with fixed
 * weights `w`, so every output element contributes a distinct amount.
 * @module
 */

import assert from "node:assert/strict";
import {
  autograd,
  type Device,
  noGrad,
  requestDevices,
  seededRandom,
  type Tensor,
  tensor,
} from "../mod.ts";

/** The two cpu devices the checks run on (cross-device checks use both). */
export const [CPU0, CPU1] = await requestDevices({ backend: "cpu", count: 2 });

/** `numel(shape)` values in [low, high), deterministic per seed. */
export function values(shape: number[], seed: number, low = -2, high = 2): number[] {
  const next = seededRandom(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  return Array.from({ length: n }, () => low + (high - low) * next());
}

/** Distinct values in [low, high) spaced at least `gap` apart, shuffled (no ties for max/min). */
export function distinct(shape: number[], seed: number, low = -2, gap = 0.1): number[] {
  const next = seededRandom(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  const out = Array.from({ length: n }, (_, i) => low + gap * i + gap * 0.3 * next());
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** One input of a checked function. */
export interface Input {
  shape: number[];
  values: number[];
  /** Where the input lives (default cpu:0). */
  device?: Device;
}

export interface CheckOptions {
  /** Finite-difference step (default 1e-6). */
  eps?: number;
  /** Tolerance: |analytic - numeric| <= tol * (1 + |numeric|) (default 1e-6). */
  tol?: number;
}

function makeInputs(inputs: Input[], hosts: Float64Array[], requiresGrad: boolean): Tensor[] {
  return inputs.map((input, i) =>
    tensor(hosts[i], {
      dtype: "float64",
      shape: input.shape,
      device: input.device ?? CPU0,
      requiresGrad,
    })
  );
}

/**
 * Checks the gradients `fn` gives every input against central differences of
 * `L = Σ fn(inputs) * w`.
 */
export async function gradcheck(
  fn: (...xs: Tensor[]) => Tensor,
  inputs: Input[],
  options: CheckOptions = {},
): Promise<void> {
  const { eps = 1e-6, tol = 1e-6 } = options;
  const hosts = inputs.map((input) => {
    assert.equal(
      input.values.length,
      input.shape.reduce((a, b) => a * b, 1),
      `input of shape [${input.shape}] needs that many values`,
    );
    return Float64Array.from(input.values);
  });

  // Analytic gradients.
  const xs = makeInputs(inputs, hosts, true);
  const y = fn(...xs);
  assert.equal(y.dtype, "float64", "the checked function must give float64");
  assert.ok(y.requiresGrad, "the output must require grad");
  const w = tensor(Float64Array.from(values([y.numel()], 977, -1, 1)), {
    dtype: "float64",
    shape: [...y.shape],
    device: y.device,
  });
  const loss = y.mul(w).sum();
  assert.deepEqual([...loss.shape], []);
  loss.backward();
  const analytic: Float64Array[] = [];
  for (const [i, x] of xs.entries()) {
    if (x.grad === null) {
      analytic.push(new Float64Array(hosts[i].length));
      continue;
    }
    assert.equal(x.grad.dtype, "float64", `input ${i}: grad dtype`);
    assert.deepEqual([...x.grad.shape], inputs[i].shape, `input ${i}: grad shape`);
    assert.equal(x.grad.device, x.device, `input ${i}: grad device`);
    analytic.push((await x.grad.data()) as Float64Array);
  }

  // Numeric gradients.
  const evaluate = async (): Promise<number> => {
    const t = noGrad(() => {
      const out = fn(...makeInputs(inputs, hosts, false));
      return out.mul(w.to(out.device)).sum();
    });
    return await t.item();
  };
  await compareWithDifferences(
    hosts,
    analytic,
    evaluate,
    { eps, tol },
    (i) => `input ${i} (shape [${inputs[i].shape}])`,
    "gradient",
  );
}

/**
 * Checks `analytic[i][j]` against the central difference of `evaluate()` in
 * `hosts[i][j]` (each value moved by ±eps in place, then restored), failing
 * with `label(i)`, the element and both numbers.
 */
async function compareWithDifferences(
  hosts: Float64Array[],
  analytic: Float64Array[],
  evaluate: () => Promise<number>,
  { eps, tol }: { eps: number; tol: number },
  label: (i: number) => string,
  what: string,
): Promise<void> {
  for (let i = 0; i < hosts.length; i++) {
    const host = hosts[i];
    for (let j = 0; j < host.length; j++) {
      const saved = host[j];
      host[j] = saved + eps;
      const plus = await evaluate();
      host[j] = saved - eps;
      const minus = await evaluate();
      host[j] = saved;
      const numeric = (plus - minus) / (2 * eps);
      const a = analytic[i][j];
      if (!(Math.abs(a - numeric) <= tol * (1 + Math.abs(numeric)))) {
        assert.fail(`${label(i)} element ${j}: analytic ${what} ${a}, numeric ${numeric}`);
      }
    }
  }
}

/** An input of `shape` with values from {@link values}. */
export function inp(shape: number[], seed: number, low = -2, high = 2, device?: Device): Input {
  return { shape, values: values(shape, seed, low, high), device };
}

/** Registers a gradient check. */
export function check(
  name: string,
  fn: (...xs: Tensor[]) => Tensor,
  inputs: Input[],
  options?: CheckOptions,
): void {
  CHECKS.push({ name, fn, inputs, options });
  Deno.test(`gradcheck ${name}`, () => gradcheck(fn, inputs, options));
}

/**
 * The second-order check (PyTorch's `gradgradcheck`): with `g = ∂(Σ y·u)/∂x`
 * made with `createGraph` for a random `u` (itself requiring grad), the
 * gradient of `S = Σ g·v` (random `v`) with respect to every input and to
 * `u`, against central differences of `S` computed from first-order
 * gradients. A backward that drops its graph (a raw kernel, a value saved
 * without one) gives a wrong second derivative here, not a silent zero.
 */
export async function gradgradcheck(
  fn: (...xs: Tensor[]) => Tensor,
  inputs: Input[],
  options: CheckOptions = {},
): Promise<void> {
  const { eps = 1e-6, tol = 1e-5 } = options;
  const hosts = inputs.map((input) => Float64Array.from(input.values));
  const probe = noGrad(() => fn(...makeInputs(inputs, hosts, false)));
  const uHost = Float64Array.from(values([probe.numel()], 613, -1, 1));
  const uShape = [...probe.shape];
  const uDevice = probe.device;
  const vs = inputs.map((input, i) =>
    tensor(Float64Array.from(values(input.shape, 331 + i, -1, 1)), {
      dtype: "float64",
      shape: input.shape,
      device: input.device ?? CPU0,
    })
  );
  const sOf = (xs: Tensor[], u: Tensor, createGraph: boolean): Tensor | null => {
    const y = fn(...xs);
    const gs = autograd.grad(y, xs, { gradOutputs: u, createGraph, allowUnused: true });
    let s: Tensor | null = null;
    gs.forEach((g, i) => {
      const term = g?.mul(vs[i]).sum().to(CPU0);
      if (term) s = s ? s.add(term) : term;
    });
    return s;
  };
  const makeU = (requiresGrad: boolean) =>
    tensor(uHost, { dtype: "float64", shape: uShape, device: uDevice, requiresGrad });

  // Analytic second derivatives (through the recorded backward).
  const xs = makeInputs(inputs, hosts, true);
  const u = makeU(true);
  const s = sOf(xs, u, true);
  const analytic: Float64Array[] = [...hosts, uHost].map((h) => new Float64Array(h.length));
  if (s !== null && (s as Tensor).requiresGrad) {
    const gg = autograd.grad(s, [...xs, u], { allowUnused: true });
    for (const [i, g] of gg.entries()) {
      if (g) analytic[i] = (await g.data()) as Float64Array;
    }
  }

  // Numeric: central differences of S from first-order gradients.
  const evaluate = async (): Promise<number> => {
    const value = sOf(makeInputs(inputs, hosts, true), makeU(false), false);
    return value === null ? 0 : await value.item();
  };
  const all = [...hosts, uHost];
  const label = (
    i: number,
  ) => (i < hosts.length ? `input ${i} (shape [${inputs[i].shape}])` : "gradOutput");
  // Past DIRECTIONAL_FROM values, first PyTorch's fast mode (gradgradcheck(fast_mode=True)):
  // the derivative of S along random directions, two evaluations each instead of two per
  // value; only if one disagrees, every value on its own, which names the element.
  const count = all.reduce((n, h) => n + h.length, 0);
  if (count > DIRECTIONAL_FROM && (await directionsAgree(all, analytic, evaluate, eps, tol))) {
    return;
  }
  await compareWithDifferences(all, analytic, evaluate, { eps, tol }, label, "second derivative");
}

/** Values of the inputs (and gradOutput) above which {@link gradgradcheck} checks directions first. */
const DIRECTIONAL_FROM = 48;

/**
 * Whether, along each of 3 random directions w (entries in [-1, 1]), the central difference of
 * `evaluate()` as every value moves by ±eps·w equals `Σ analytic·w` within `tol` relative to
 * the result and the terms' root sum of squares (a central difference's error does not grow
 * with the count of values; a sum of their sizes would hide one wrong element among many).
 */
async function directionsAgree(
  hosts: Float64Array[],
  analytic: Float64Array[],
  evaluate: () => Promise<number>,
  eps: number,
  tol: number,
): Promise<boolean> {
  const saved = hosts.map((h) => h.slice());
  for (let k = 0; k < 3; k++) {
    const ws = hosts.map((h, i) => Float64Array.from(values([h.length], 977 + 31 * k + i, -1, 1)));
    const move = (sign: number) =>
      hosts.forEach((h, i) => h.forEach((_, j) => (h[j] = saved[i][j] + sign * eps * ws[i][j])));
    move(1);
    const plus = await evaluate();
    move(-1);
    const minus = await evaluate();
    hosts.forEach((h, i) => h.set(saved[i]));
    let expected = 0;
    let squares = 0;
    analytic.forEach((a, i) =>
      a.forEach((v, j) => {
        expected += v * ws[i][j];
        squares += (v * ws[i][j]) ** 2;
      })
    );
    const numeric = (plus - minus) / (2 * eps);
    const bound = tol * (1 + Math.abs(numeric) + Math.sqrt(squares));
    if (!(Math.abs(expected - numeric) <= bound)) return false;
  }
  return true;
}

/** Every check registered with {@link check}, for the second-order checks to reuse. */
export const CHECKS: {
  name: string;
  fn: (...xs: Tensor[]) => Tensor;
  inputs: Input[];
  options?: CheckOptions;
}[] = [];
