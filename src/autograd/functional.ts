/**
 * `torch.autograd.functional`: vector-Jacobian and Jacobian-vector products,
 * Hessian-vector products, full Jacobians and Hessians of a function of one
 * tensor or several, built on {@link grad} (with `createGraph` where a
 * second derivative is taken). As PyTorch: a tensor in gives tensors out, an
 * array in gives arrays out.
 * @module
 */

import { enableGrad } from "../autograd.ts";
import { formatShape, sameShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { stack } from "../ops/view.ts";
import { arange, zeros } from "../ops/factory.ts";
import { grad } from "./grad.ts";

/** Options of the `autograd.functional` functions (PyTorch's keyword arguments). */
export interface FunctionalOptions {
  /** Keep a graph through the results (so they can be differentiated again). */
  createGraph?: boolean;
  /** An error, instead of zeros, where an output does not depend on an input. */
  strict?: boolean;
}

/** A function of one tensor or several (spread), giving one tensor or several. */
export type DifferentiableFn = (...inputs: Tensor[]) => Tensor | Tensor[];

type Many = Tensor | Tensor[];

function listOf(value: Many, what: string, op: string): Tensor[] {
  const list = Array.isArray(value) ? value : [value];
  list.forEach((t, i) => {
    if (!(t instanceof Tensor)) {
      throw new TypeError(`${op}: ${what} ${i} must be a Tensor, got ${typeof t}`);
    }
  });
  return list;
}

/** Fresh inputs requiring grad: the caller's own graph kept under createGraph, as PyTorch. */
function prepare(inputs: Tensor[], createGraph: boolean): Tensor[] {
  return inputs.map((t) => {
    if (createGraph && t.requiresGrad) return t.reshape([...t.shape]);
    const fresh = t.detach();
    fresh.requiresGrad = true;
    return fresh;
  });
}

function checkV(v: Tensor[], like: Tensor[], op: string, of: string): void {
  if (v.length !== like.length) {
    throw new RangeError(`${op}: v has ${v.length} tensors, the ${of} ${like.length}`);
  }
  v.forEach((t, i) => {
    if (!sameShape(t.shape, like[i].shape)) {
      throw new RangeError(
        `${op}: v[${i}] has shape ${formatShape(t.shape)}, the ${of}[${i}] ${
          formatShape(like[i].shape)
        }`,
      );
    }
  });
}

/**
 * The gradients of `outputs` weighted by `v` with respect to `inputs`:
 * zeros (or, when strict, an error) where an input is unused; detached
 * unless `createGraph`.
 */
function vjpOf(
  outputs: Tensor[],
  inputs: Tensor[],
  v: (Tensor | null)[],
  options: FunctionalOptions & { retainGraph?: boolean },
  op: string,
  which = "the output",
): Tensor[] {
  const createGraph = options.createGraph ?? false;
  const live = outputs.map((o, i) => (o.requiresGrad ? i : -1)).filter((i) => i >= 0);
  const grads = live.length === 0 ? inputs.map(() => null) : grad(
    live.map((i) => outputs[i]),
    inputs,
    {
      gradOutputs: live.map((i) => v[i]),
      createGraph,
      retainGraph: options.retainGraph ?? createGraph,
      allowUnused: true,
    },
  );
  return grads.map((g, i) => {
    if (g) return createGraph ? g : g.detach();
    if (options.strict) {
      throw new Error(
        `${op}: ${which} of the user-provided function is independent of input ${i}. This is not allowed in strict mode.`,
      );
    }
    return inputs[i].zerosLike();
  });
}

/** One tensor, or the list, as the caller gave (a tensor in, a tensor out). */
const shaped = (list: Tensor[], many: boolean): Many => (many ? list : list[0]);

/** What every function here starts with: fresh inputs and the function's outputs. */
function start(fn: DifferentiableFn, inputs: Many, options: FunctionalOptions, op: string) {
  const xs = prepare(listOf(inputs, "input", op), options.createGraph ?? false);
  const raw = enableGrad(() => fn(...xs));
  const out = listOf(raw, "output of the function", op);
  const manyOut = Array.isArray(raw);
  const outputs = (many: Tensor[]) => shaped(many, manyOut);
  const result = (many: Tensor[]) => shaped(many, Array.isArray(inputs));
  // The outputs handed back keep their graph only under createGraph.
  const given = out.map((o) => (options.createGraph ? o : o.detach()));
  return { xs, out, outputs, result, given, manyOut };
}

function scalarOutput(out: Tensor[], op: string): Tensor {
  if (out.length !== 1 || out[0].numel() !== 1) {
    throw new RangeError(
      `${op}: the function must return a single Tensor with a single element, got ${out.length} tensor(s) of shape ${
        formatShape(out[0]?.shape ?? [])
      }`,
    );
  }
  return out[0];
}

const ones = (t: Tensor) => t.zerosLike().add(1);

/**
 * `fn(inputs)` and the vector-Jacobian product `vᵀJ` (one tensor per input),
 * as `torch.autograd.functional.vjp`. `v` (shaped as the outputs) may be
 * left out only when `fn` gives a single one-element tensor.
 */
export function vjp(
  fn: DifferentiableFn,
  inputs: Many,
  v?: Many | null,
  options: FunctionalOptions = {},
): [Many, Many] {
  const op = "autograd.functional.vjp";
  const { xs, out, outputs, result, given } = start(fn, inputs, options, op);
  let vs: Tensor[];
  if (v === undefined || v === null) vs = [ones(scalarOutput(out, op))];
  else checkV(vs = listOf(v, "v", op), out, op, "output");
  return [outputs(given), result(vjpOf(out, xs, vs, options, op))];
}

/**
 * `fn(inputs)` and the Jacobian-vector product `Jv` (one tensor per output),
 * as `torch.autograd.functional.jvp`: by the double-vjp trick (the vjp of a
 * vjp), so it needs every op's backward to be differentiable. `v` (shaped as
 * the inputs) may be left out only for a single one-element input.
 */
export function jvp(
  fn: DifferentiableFn,
  inputs: Many,
  v?: Many | null,
  options: FunctionalOptions = {},
): [Many, Many] {
  const op = "autograd.functional.jvp";
  const { xs, out, outputs, given } = start(fn, inputs, options, op);
  let vs: Tensor[];
  if (v === undefined || v === null) vs = [ones(scalarOutput(xs, op))];
  else checkV(vs = listOf(v, "v", op), xs, op, "input");
  // u ↦ uᵀJ is linear in u: its vjp with v is Jv.
  const us = out.map((o) => {
    const u = o.zerosLike();
    u.requiresGrad = true;
    return u;
  });
  const back = vjpOf(out, xs, us, { createGraph: true, strict: options.strict }, op);
  const jv = vjpOf(back, us, vs, options, op);
  return [outputs(given), outputs(jv)];
}

/**
 * `fn(inputs)` (a single one-element tensor) and the vector-Hessian product
 * `vᵀH`, as `torch.autograd.functional.vhp`.
 */
export function vhp(
  fn: DifferentiableFn,
  inputs: Many,
  v?: Many | null,
  options: FunctionalOptions = {},
): [Tensor, Many] {
  const op = "autograd.functional.vhp";
  const { xs, out, result, given } = start(fn, inputs, options, op);
  scalarOutput(out, op);
  const vs = v === undefined || v === null ? [ones(scalarOutput(xs, op))] : listOf(v, "v", op);
  checkV(vs, xs, op, "input");
  const jac = vjpOf(out, xs, [null], { createGraph: true, strict: options.strict }, op);
  return [given[0], result(vjpOf(jac, xs, vs, options, op))];
}

/**
 * `fn(inputs)` (a single one-element tensor) and the Hessian-vector product
 * `Hv`, as `torch.autograd.functional.hvp` (PyTorch's double-backward: equal
 * to {@link vhp} for twice continuously differentiable functions).
 */
export function hvp(
  fn: DifferentiableFn,
  inputs: Many,
  v?: Many | null,
  options: FunctionalOptions = {},
): [Tensor, Many] {
  const op = "autograd.functional.hvp";
  const { xs, out, result, given } = start(fn, inputs, options, op);
  scalarOutput(out, op);
  const vs = v === undefined || v === null ? [ones(scalarOutput(xs, op))] : listOf(v, "v", op);
  checkV(vs, xs, op, "input");
  const internal = { createGraph: true, strict: options.strict };
  const jac = vjpOf(out, xs, [null], internal, op);
  const us = xs.map((x) => {
    const u = x.zerosLike();
    u.requiresGrad = true;
    return u;
  });
  const doubleBack = vjpOf(jac, xs, us, internal, op);
  return [given[0], result(vjpOf(doubleBack, us, vs, options, op))];
}

/**
 * The Jacobian of `fn` at `inputs`, as `torch.autograd.functional.jacobian`
 * (reverse mode, one backward per output element): for output `i` and input
 * `j`, a tensor of shape `[...outputs[i].shape, ...inputs[j].shape]`; a
 * tensor when `fn` gives one tensor of one tensor, else arrays (by output,
 * then by input).
 */
export function jacobian(
  fn: DifferentiableFn,
  inputs: Many,
  options: FunctionalOptions = {},
): Tensor | Tensor[] | Tensor[][] {
  const op = "autograd.functional.jacobian";
  const { xs, out, result, manyOut } = start(fn, inputs, options, op);
  const perOutput = out.map((o, i) => {
    const n = o.numel();
    const rows: Tensor[][] = xs.map(() => []);
    const flat = o.reshape([n]);
    for (let k = 0; k < n; k++) {
      const seed = arange(n, { device: o.device }).eq(k).to(o.dtype);
      const row = vjpOf([flat], xs, [seed], { ...options, retainGraph: true }, op, `output ${i}`);
      row.forEach((r, j) => rows[j].push(r));
    }
    return xs.map((x, j) =>
      n === 0
        ? zeros([...o.shape, ...x.shape], { dtype: x.dtype, device: x.device })
        : stack(rows[j], 0).reshape([...o.shape, ...x.shape])
    );
  });
  const byInput = perOutput.map((list) => result(list));
  return (manyOut ? byInput : byInput[0]) as
    | Tensor
    | Tensor[]
    | Tensor[][];
}

/**
 * The Hessian of `fn` (a single one-element tensor) at `inputs`, as
 * `torch.autograd.functional.hessian`: the Jacobian of its gradient. For one
 * input a tensor of shape `[...x.shape, ...x.shape]`; for several, arrays
 * `H[i][j]` of shape `[...inputs[i].shape, ...inputs[j].shape]`.
 */
export function hessian(
  fn: DifferentiableFn,
  inputs: Many,
  options: FunctionalOptions = {},
): Tensor | Tensor[][] {
  const op = "autograd.functional.hessian";
  const many = Array.isArray(inputs);
  const gradient = (...ys: Tensor[]): Many => {
    const out = listOf(fn(...ys), "output of the function", op);
    const internal = { createGraph: true, strict: options.strict };
    const g = vjpOf([scalarOutput(out, op)], ys, [null], internal, op);
    return many ? g : g[0];
  };
  return jacobian(gradient, inputs, options) as Tensor | Tensor[][];
}
