/**
 * `torch.autograd.gradcheck` and `gradgradcheck`: a function's analytic
 * Jacobian (vector-Jacobian products, one row per output element, as
 * PyTorch's slow mode; or projected on random vectors in fast mode) against
 * central finite differences, with PyTorch 1.13's other checks (backward
 * scales with the output gradient, repeated backward gives the same values,
 * undefined output gradients are handled). Both are async, unlike
 * PyTorch's: the values are read back from the device.
 * @module
 */

import { record } from "../autograd.ts";
import { tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { randn, tensor } from "../ops/mod.ts";
import { seededRandom } from "../util.ts";
import { grad } from "./grad.ts";

/**
 * The failure of a check made by {@link gradcheck} or {@link gradgradcheck}
 * (PyTorch's `torch.autograd.gradcheck.GradcheckError`); only this error is
 * turned into `false` by `raiseException: false`.
 */
export class GradcheckError extends Error {
  /** Makes the error with PyTorch's message. */
  constructor(message: string) {
    super(message);
    this.name = "GradcheckError";
  }
}

/** Options of {@link gradcheck}, as `torch.autograd.gradcheck`'s keyword arguments. */
export interface GradcheckOptions {
  /** The step of the central differences (default 1e-6). */
  eps?: number;
  /** Absolute tolerance (default 1e-5): each `|analytic - numeric| <= atol + rtol * |numeric|`. */
  atol?: number;
  /** Relative tolerance (default 1e-3). */
  rtol?: number;
  /** Throw {@link GradcheckError} on a failure (default true); false resolves to false instead. */
  raiseException?: boolean;
  /** How far two backward passes with the same input may differ (default 0). */
  nondetTol?: number;
  /** Check that backward handles outputs whose gradient is undefined (default true). */
  checkUndefinedGrad?: boolean;
  /** Check that each gradient has its input's dtype (default false). */
  checkGradDtypes?: boolean;
  /**
   * PyTorch's vmap check of batched gradients: not supported (multigrad has
   * no vmap); true is an error rather than a check silently skipped.
   */
  checkBatchedGrad?: boolean;
  /**
   * Compare `vᵀ J u` for random unit vectors `u`, `v` instead of whole
   * Jacobians (default false): one backward per output and two evaluations
   * per input instead of per element. A failure recomputes the pair's whole
   * Jacobians for the message, as PyTorch.
   */
  fastMode?: boolean;
}

/** Options of {@link gradgradcheck}: those of {@link gradcheck}, for the first derivative's function. */
export type GradgradcheckOptions = GradcheckOptions;

/** A function checked by {@link gradcheck}: its inputs spread, one tensor or several out. */
export type CheckedFn<A extends unknown[]> = (...inputs: A) => Tensor | readonly Tensor[];

// A function over the inputs as an untyped list (the checks pass copies of them).
type ListFn = (...inputs: unknown[]) => Tensor | readonly Tensor[];

function outputsOf(fn: ListFn, inputs: unknown[], op: string): Tensor[] {
  const out = fn(...inputs);
  const list = out instanceof Tensor ? [out] : Array.isArray(out) ? [...out] : null;
  if (!list || list.some((o) => !(o instanceof Tensor))) {
    throw new TypeError(`${op}: fn must return a Tensor or an array of Tensors`);
  }
  return list;
}

const numel = (t: Tensor) => t.numel();

/** `J[r * cols + c]`: a Jacobian with a row per input element and a column per output element. */
interface Jacobian {
  readonly rows: number;
  readonly cols: number;
  readonly values: Float64Array;
}

const jacobian = (rows: number, cols: number): Jacobian => ({
  rows,
  cols,
  values: new Float64Array(rows * cols),
});

/** PyTorch-like text of a Jacobian, for the mismatch message. */
function formatJacobian(j: Jacobian): string {
  const cell = (v: number) => {
    if (!Number.isFinite(v)) return String(v);
    const a = Math.abs(v);
    return a !== 0 && (a >= 1e5 || a < 1e-4) ? v.toExponential(4) : v.toFixed(4);
  };
  const rows = Array.from(
    { length: j.rows },
    (_, r) =>
      `[${Array.from({ length: j.cols }, (_, c) => cell(j.values[r * j.cols + c])).join(", ")}]`,
  );
  return `tensor([${rows.join(",\n        ")}], dtype=float64)`;
}

function allclose(a: Float64Array, n: Float64Array, rtol: number, atol: number): boolean {
  for (let i = 0; i < a.length; i++) {
    if (!(Math.abs(a[i] - n[i]) <= atol + rtol * Math.abs(n[i]))) return false;
  }
  return true;
}

function mismatch(a: string, n: string, out: number, inp: number): string {
  return `Jacobian mismatch for output ${out} with respect to input ${inp},\nnumerical:${n}\nanalytical:${a}\n`;
}

/** A copy of `t` with its requiresGrad, holding `values`. */
function like(t: Tensor, values: Float64Array): Tensor {
  return tensor(values, {
    dtype: t.dtype,
    shape: [...t.shape],
    device: t.device,
    requiresGrad: t.requiresGrad,
  });
}

async function host(t: Tensor): Promise<Float64Array> {
  return Float64Array.from(await t.data());
}

/**
 * `fn`'s outputs with input `at` replaced by `values` (copies of the
 * outputs, detached; the graph each evaluation builds is freed with it).
 */
function evaluate(fn: ListFn, inputs: unknown[], at: number, values: Float64Array): Tensor[] {
  return tidy(() => {
    // A tensor passed twice is perturbed at both places, as PyTorch's in-place perturbation.
    const perturbed = like(inputs[at] as Tensor, values);
    const args = inputs.map((x) => (x === inputs[at] ? perturbed : x));
    return outputsOf(fn, args, "gradcheck").map((o) => o.detach());
  });
}

function sameOutputs(a: Tensor[], b: Tensor[], eps: number): void {
  a.forEach((o, i) => {
    const p = b[i];
    if (!p || o.shape.join() !== p.shape.join() || o.dtype !== p.dtype) {
      const what = (t: Tensor | undefined) => (t ? `${t.dtype} [${t.shape.join(", ")}]` : "none");
      throw new Error(
        `gradcheck: expected fn to return outputs with the same shape and dtype when inputs are perturbed by ${eps}, but output ${i} is ${
          what(o)
        } and then ${what(p)}`,
      );
    }
  });
}

/** `(f(x + eps·d) - f(x - eps·d)) / (2 eps)` for each output, flat, for each direction `d`. */
async function centralDifferences(
  fn: ListFn,
  inputs: unknown[],
  at: number,
  directions: Float64Array[],
  eps: number,
): Promise<Float64Array[][]> {
  const x = await host(inputs[at] as Tensor);
  const result: Float64Array[][] = [];
  // Chunks bound the memory held by unread outputs while keeping few round trips on a GPU.
  for (let start = 0; start < directions.length; start += 64) {
    const reads = directions.slice(start, start + 64).map((d) => {
      const minus = x.map((v, k) => v - eps * d[k]);
      const plus = x.map((v, k) => v + eps * d[k]);
      const a = evaluate(fn, inputs, at, minus);
      const b = evaluate(fn, inputs, at, plus);
      sameOutputs(a, b, eps);
      return Promise.all([...a, ...b].map(host)).then((values) => {
        [...a, ...b].forEach((t) => t.dispose());
        return a.map((_, i) => {
          const lo = values[i], hi = values[a.length + i];
          return lo.map((v, k) => (hi[k] - v) / (2 * eps));
        });
      });
    });
    result.push(...await Promise.all(reads));
  }
  return result;
}

/** The numerical Jacobians `[input][output]` of `fn` with respect to the inputs at `diff`. */
async function numericalJacobians(
  fn: ListFn,
  inputs: unknown[],
  diff: number[],
  outputs: Tensor[],
  eps: number,
): Promise<Jacobian[][]> {
  const all: Jacobian[][] = [];
  for (const at of diff) {
    const n = numel(inputs[at] as Tensor);
    const units = Array.from({ length: n }, (_, k) => {
      const d = new Float64Array(n);
      d[k] = 1;
      return d;
    });
    const columns = await centralDifferences(fn, inputs, at, units, eps);
    all.push(outputs.map((o, i) => {
      const j = jacobian(n, numel(o));
      columns.forEach((perOutput, k) => j.values.set(perOutput[i], k * j.cols));
      return j;
    }));
  }
  return all;
}

/** Each input's gradient (null: unused) of `output` weighted by `v`, read back; shape/dtype checked. */
async function vjp(
  output: Tensor,
  diffInputs: Tensor[],
  v: Float64Array,
  checkDtypes: boolean,
): Promise<(Float64Array | null)[]> {
  const grads = tidy(() =>
    grad(output, diffInputs, {
      gradOutputs: like(output.detach(), v),
      retainGraph: true,
      allowUnused: true,
    })
  );
  grads.forEach((g, i) => {
    const x = diffInputs[i];
    if (g && g.shape.join() !== x.shape.join()) {
      throw new GradcheckError("Analytical gradient has incorrect size");
    }
    if (g && checkDtypes && g.dtype !== x.dtype) {
      throw new GradcheckError("Gradient has dtype mismatch");
    }
  });
  return await Promise.all(grads.map((g) => (g ? host(g) : null)));
}

const NONDET_NOTE = "\n\nNOTE: If your op relies on non-deterministic operations, this " +
  "failure might be expected: call gradcheck/gradgradcheck with `nondetTol: <tol>`.";

/** The analytic Jacobians `[input]` of `output`, row by row, computed twice (reentrancy). */
async function analyticalJacobians(
  output: Tensor,
  diffInputs: Tensor[],
  nondetTol: number,
  checkDtypes: boolean,
): Promise<Jacobian[]> {
  const cols = numel(output);
  const twice: Jacobian[][] = [];
  for (let pass = 0; pass < 2; pass++) {
    const js = diffInputs.map((x) => jacobian(numel(x), cols));
    for (let c = 0; c < cols; c++) {
      const v = new Float64Array(cols);
      v[c] = 1;
      const grads = await vjp(output, diffInputs, v, checkDtypes);
      grads.forEach((g, i) => g?.forEach((value, r) => (js[i].values[r * cols + c] = value)));
    }
    twice.push(js);
  }
  const [first, second] = twice;
  for (let i = 0; i < first.length; i++) {
    const a = first[i].values, b = second[i].values;
    for (let k = 0; k < a.length; k++) {
      if (!(Math.abs(a[k] - b[k]) <= nondetTol)) {
        throw new GradcheckError(
          "Backward is not reentrant, i.e., running backward with same input and grad_output multiple times gives different values, although analytical gradient matches numerical gradient. " +
            `The tolerance for nondeterminism was ${nondetTol}.` + NONDET_NOTE,
        );
      }
    }
  }
  return first;
}

interface Checked {
  readonly fn: ListFn;
  readonly inputs: unknown[];
  readonly diff: number[];
  readonly outputs: Tensor[];
  readonly funcOut: Tensor[];
}

async function slowCheck(c: Checked, o: Required<GradcheckOptions>): Promise<void> {
  const { fn, inputs, diff, outputs, funcOut } = c;
  const diffInputs = diff.map((i) => inputs[i] as Tensor);
  const numerical = await numericalJacobians(fn, inputs, diff, funcOut, o.eps);
  const kept = funcOut.map((out, i) => (out.requiresGrad ? i : -1)).filter((i) => i >= 0);
  for (const [i, output] of outputs.entries()) {
    const analytical = await analyticalJacobians(
      output,
      diffInputs,
      o.nondetTol,
      o.checkGradDtypes,
    );
    analytical.forEach((a, j) => {
      const n = numerical[j][kept[i]];
      if (!allclose(a.values, n.values, o.rtol, o.atol)) {
        throw new GradcheckError(mismatch(formatJacobian(a), formatJacobian(n), i, j));
      }
    });
  }
}

/** A random unit vector of `n` elements (PyTorch's `_vec_from_tensor`: uniform, normalized). */
function unitVector(n: number, next: () => number): Float64Array {
  const v = Float64Array.from({ length: n }, () => next());
  const norm = Math.hypot(...v);
  return norm > 0 ? v.map((x) => x / norm) : v;
}

const dot = (a: Float64Array, b: Float64Array) => a.reduce((s, x, k) => s + x * b[k], 0);
const total = (a: Float64Array) => a.reduce((s, x) => s + x, 0);

async function fastCheck(c: Checked, o: Required<GradcheckOptions>): Promise<void> {
  const { fn, inputs, diff, outputs, funcOut } = c;
  const diffInputs = diff.map((i) => inputs[i] as Tensor);
  // A fixed seed, so a check gives the same verdict run after run (PyTorch uses its own generator).
  const next = seededRandom(0x5eed);
  const us = diffInputs.map((x) => unitVector(numel(x), next));
  const vs = outputs.map((out) => unitVector(numel(out), next));
  const kept = funcOut.map((out, i) => (out.requiresGrad ? i : -1)).filter((i) => i >= 0);
  const numerical: number[][] = [];
  for (const [j, at] of diff.entries()) {
    const [ju] = await centralDifferences(fn, inputs, at, [us[j]], o.eps);
    numerical.push(outputs.map((_, i) => dot(vs[i], ju[kept[i]])));
  }
  for (const [i, output] of outputs.entries()) {
    const first = await vjp(output, diffInputs, vs[i], o.checkGradDtypes);
    const again = await vjp(output, diffInputs, vs[i], o.checkGradDtypes);
    for (const [j, u] of us.entries()) {
      const a = first[j] ? dot(first[j]!, u) : 0;
      const b = again[j] ? dot(again[j]!, u) : 0;
      if (!(Math.abs(a - b) <= o.nondetTol)) {
        throw new GradcheckError(
          "Backward is not reentrant, i.e., running backward with same input and grad_output multiple times gives different values, although analytical gradient matches numerical gradient. " +
            `The tolerance for nondeterminism was ${o.nondetTol}.` + NONDET_NOTE,
        );
      }
      const n = numerical[j][i];
      // PyTorch's _adjusted_atol: atol scaled by vᵀ(ones)u, as vᵀJu sums that many entries.
      const atol = o.atol * total(u) * total(vs[i]);
      if (!(Math.abs(a - n) <= atol + o.rtol * Math.abs(n))) {
        throw new GradcheckError(
          mismatch(`tensor(${a})`, `tensor(${n})`, i, j) +
            await slowModeReport(c, o, i, j),
        );
      }
    }
  }
}

async function slowModeReport(
  c: Checked,
  o: Required<GradcheckOptions>,
  outputIndex: number,
  inputIndex: number,
): Promise<string> {
  const at = c.diff[inputIndex];
  const output = c.outputs[outputIndex];
  const all = await numericalJacobians(c.fn, c.inputs, [at], c.funcOut, o.eps);
  const numerical = all[0][c.funcOut.indexOf(output)];
  const analytical =
    (await analyticalJacobians(output, [c.inputs[at] as Tensor], Infinity, false))[0];
  let maxDiff = 0;
  analytical.values.forEach((
    a,
    k,
  ) => (maxDiff = Math.max(maxDiff, Math.abs(a - numerical.values[k]))));
  const slowOk = allclose(analytical.values, numerical.values, o.rtol, o.atol);
  return "\nThe above quantities relating the numerical and analytical jacobians are computed \n" +
    "in fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for more background \n" +
    "about fast mode. Below, we recompute numerical and analytical jacobians in slow mode:\n\n" +
    `Numerical:\n ${formatJacobian(numerical)}\nAnalytical:\n${formatJacobian(analytical)}\n\n` +
    `The max per-element difference (slow mode) is: ${maxDiff}.\n` +
    (slowOk
      ? "\nFast gradcheck failed but element-wise differences are small. This means that the\ntest might've passed in slow_mode! Call gradcheck with `fastMode: false`."
      : "");
}

async function noDifferentiableOutputs(c: Checked, o: Required<GradcheckOptions>): Promise<void> {
  const numerical = await numericalJacobians(c.fn, c.inputs, c.diff, c.funcOut, o.eps);
  for (const perInput of numerical) {
    for (const j of perInput) {
      if (j.values.some((v) => v !== 0)) {
        throw new GradcheckError("Numerical gradient for function expected to be zero");
      }
    }
  }
}

async function backwardMulByGradOutput(outputs: Tensor[], diffInputs: Tensor[]): Promise<void> {
  const grads = grad(outputs, diffInputs, {
    gradOutputs: outputs.map((o) => o.zerosLike()),
    allowUnused: true,
  });
  for (const [i, g] of grads.entries()) {
    if (!g) continue;
    const x = diffInputs[i];
    if ((await host(g)).some((v) => v !== 0)) {
      throw new GradcheckError("backward not multiplied by grad_output");
    }
    if (g.dtype !== x.dtype || g.device !== x.device) {
      throw new GradcheckError("grad is incorrect type");
    }
    if (g.shape.join() !== x.shape.join()) throw new GradcheckError("grad is incorrect size");
  }
}

/** `o` through a node whose backward gives no gradient (PyTorch's `UndefinedGrad`). */
const undefinedGrad = (o: Tensor): Tensor => record("UndefinedGrad", [o], o.detach(), () => [null]);

async function undefinedBackward(c: Checked, diffInputs: Tensor[]): Promise<void> {
  const differentiable = () => outputsOf(c.fn, c.inputs, "gradcheck").filter((o) => o.requiresGrad);
  const cases = [differentiable().map(undefinedGrad)];
  if (cases[0].length > 1) {
    for (let k = 0; k < c.outputs.length; k++) {
      cases.push(differentiable().map((o, i) => (i === k ? undefinedGrad(o) : o)));
    }
  }
  for (const outputs of cases) {
    let grads: (Tensor | null)[];
    try {
      grads = grad(outputs, diffInputs, {
        gradOutputs: outputs.map((o) => o.zerosLike()),
        allowUnused: true,
      });
    } catch (error) {
      throw new GradcheckError(
        'Expected backward function to handle undefined output grads. Please look at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"' +
          ` (backward threw: ${(error as Error).message})`,
      );
    }
    for (const g of grads) {
      if (g && (await host(g)).some((v) => v !== 0)) {
        throw new GradcheckError(
          'Expected all input grads to be undefined or zero when all output grads are undefined or zero. Please look at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"',
        );
      }
    }
  }
}

function listInputs(inputs: unknown, op: string): unknown[] {
  if (inputs instanceof Tensor) return [inputs];
  if (!Array.isArray(inputs)) {
    throw new TypeError(`${op}: inputs must be a Tensor or an array, got ${typeof inputs}`);
  }
  return [...inputs];
}

function withDefaults(options: GradcheckOptions): Required<GradcheckOptions> {
  return {
    eps: options.eps ?? 1e-6,
    atol: options.atol ?? 1e-5,
    rtol: options.rtol ?? 1e-3,
    raiseException: options.raiseException ?? true,
    nondetTol: options.nondetTol ?? 0,
    checkUndefinedGrad: options.checkUndefinedGrad ?? true,
    checkGradDtypes: options.checkGradDtypes ?? false,
    checkBatchedGrad: options.checkBatchedGrad ?? false,
    fastMode: options.fastMode ?? false,
  };
}

async function check(fn: ListFn, inputs: unknown[], o: Required<GradcheckOptions>): Promise<true> {
  if (o.checkBatchedGrad) {
    throw new Error("gradcheck: checkBatchedGrad is not supported (multigrad has no vmap)");
  }
  const diff: number[] = [];
  inputs.forEach((x, i) => {
    if (!(x instanceof Tensor) || !x.requiresGrad) return;
    if (x.dtype !== "float64") {
      console.warn(
        `gradcheck: input ${i} requires gradient and is not a double precision floating point (${x.dtype}). This check will likely fail if all the inputs are not of double precision floating point.`,
      );
    }
    diff.push(i);
  });
  if (diff.length === 0) {
    throw new Error(
      "gradcheck expects at least one input tensor to require gradient, but none of them have requiresGrad: true",
    );
  }
  const funcOut = outputsOf(fn, inputs, "gradcheck");
  const outputs = funcOut.filter((t) => t.requiresGrad);
  const c: Checked = { fn, inputs, diff, outputs, funcOut };
  if (outputs.length === 0) {
    await noDifferentiableOutputs(c, o);
    return true;
  }
  if (o.fastMode) await fastCheck(c, o);
  else await slowCheck(c, o);
  const diffInputs = diff.map((i) => inputs[i] as Tensor);
  await backwardMulByGradOutput(outputs, diffInputs);
  if (o.checkUndefinedGrad) await undefinedBackward(c, diffInputs);
  return true;
}

/**
 * Checks the gradients of `fn` at `inputs` against central finite
 * differences, as `torch.autograd.gradcheck`: for every input that
 * requires grad (float64, else a warning: float32's rounding makes the
 * check fail) and every output that requires grad, the Jacobian built row
 * by row from backward must be allclose to the numerical one
 * (`|a - n| <= atol + rtol·|n|`). Also checked, as PyTorch: backward with
 * zero output gradients gives zero, two backward passes agree (within
 * `nondetTol`), and backward handles outputs whose gradient is undefined.
 * Outputs that do not require grad (int32) are skipped; with none, the
 * numerical Jacobian must be zero. Inputs that are not tensors are passed
 * through. Resolves to true, or rejects with a {@link GradcheckError}
 * naming the output and input and showing both Jacobians (rows: input
 * elements, columns: output elements); with `raiseException: false` it
 * resolves to false instead. Unlike PyTorch it is async (values are read
 * back from the device) and `checkBatchedGrad` is not supported.
 *
 * @example
 * ```ts
 * import { autograd, tensor } from "@multigrad/core";
 * const x = tensor([[1, 2], [3, 4]], { dtype: "float64", requiresGrad: true });
 * await autograd.gradcheck((a) => a.matmul(a).tanh(), [x]); // true
 * ```
 */
export async function gradcheck<A extends unknown[]>(
  fn: CheckedFn<A>,
  inputs: A | Tensor,
  options: GradcheckOptions = {},
): Promise<boolean> {
  const o = withDefaults(options);
  const list = listInputs(inputs, "gradcheck");
  try {
    return await check(fn as ListFn, list, o);
  } catch (error) {
    if (!o.raiseException && error instanceof GradcheckError) return false;
    throw error;
  }
}

/**
 * Checks second derivatives, as `torch.autograd.gradgradcheck`: runs
 * {@link gradcheck} on the function `(inputs, gradOutputs) ↦ the gradients
 * of fn's outputs weighted by gradOutputs`, made with `createGraph`, so the
 * gradient of the gradient (through each op's backward) is compared with
 * finite differences of first-order gradients, in the inputs and in the
 * output gradients. `gradOutputs` defaults to random normal tensors like
 * fn's outputs (float64 for a non-float output) that require grad.
 *
 * @example
 * ```ts
 * import { autograd, tensor } from "@multigrad/core";
 * const x = tensor([0.5, 1.5], { dtype: "float64", requiresGrad: true });
 * await autograd.gradgradcheck((a) => a.pow(3), [x]); // true
 * ```
 */
export async function gradgradcheck<A extends unknown[]>(
  fn: CheckedFn<A>,
  inputs: A | Tensor,
  gradOutputs?: Tensor | readonly Tensor[] | null,
  options: GradgradcheckOptions = {},
): Promise<boolean> {
  const list = listInputs(inputs, "gradgradcheck");
  const f = fn as ListFn;
  // Random ones only for the differentiable outputs (PyTorch makes one per output, and then
  // fails on an int output's).
  const given = gradOutputs === undefined || gradOutputs === null
    ? outputsOf(f, list, "gradgradcheck").filter((out) => out.requiresGrad).map((out) =>
      randn([...out.shape], { dtype: out.dtype, device: out.device, requiresGrad: true })
    )
    : listInputs(gradOutputs, "gradgradcheck");
  given.forEach((g, i) => {
    if (!(g instanceof Tensor)) {
      throw new TypeError(`gradgradcheck: gradOutputs ${i} must be a Tensor, got ${typeof g}`);
    }
  });
  const count = given.length;
  const diffInputs = list.map((x, i) => (x instanceof Tensor && x.requiresGrad ? i : -1))
    .filter((i) => i >= 0);
  const firstOrder: ListFn = (...args) => {
    const ins = args.slice(0, args.length - count);
    const gs = args.slice(args.length - count) as Tensor[];
    const outs = outputsOf(f, ins, "gradgradcheck").filter((out) => out.requiresGrad);
    if (outs.length === 0) return [];
    const grads = grad(outs, diffInputs.map((i) => ins[i] as Tensor), {
      gradOutputs: gs,
      createGraph: true,
      allowUnused: true,
    });
    return grads.filter((g): g is Tensor => g !== null);
  };
  return await gradcheck(firstOrder, [...list, ...given], options);
}
