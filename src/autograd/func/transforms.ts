/**
 * `torch.func` (functorch in PyTorch 1.13) gradient transforms: {@link grad},
 * {@link gradAndValue}, {@link vjp}, {@link jvp}, {@link jacrev}, {@link jacfwd} and
 * {@link hessian}, over the tape of `autograd.grad`.
 * @module
 */

import { enableGrad, isGradEnabled, type Node } from "../../autograd.ts";
import { isFloat } from "../../dtype.ts";
import { getRngState } from "../../ops/factory.ts";
import { arange, zeros } from "../../ops/factory.ts";
import { stack } from "../../ops/view.ts";
import { formatShape, sameShape } from "../../shape.ts";
import { Tensor } from "../../tensor.ts";
import { grad as autogradGrad } from "../grad.ts";
import {
  callSync,
  countLeaves,
  flatten,
  formatSpec,
  kindOf,
  type PyTree,
  sameSpec,
  type Spec,
  unflatten,
  type UserFn,
} from "./pytree.ts";

export type { PyTree, UserFn } from "./pytree.ts";

/** Which positional arguments a transform differentiates: one index, or several. */
export type Argnums = number | readonly number[];

/** Options of {@link grad} and {@link gradAndValue} (functorch's keyword arguments). */
export interface FuncGradOptions {
  /** The argument(s) to differentiate with respect to (default 0); an array gives an array. */
  argnums?: Argnums;
  /** `fn` returns `[output, aux]`: aux is handed back beside the result, not differentiated. */
  hasAux?: boolean;
}

/** Options of {@link vjp}, {@link jacrev} and {@link jacfwd}. */
export interface FuncAuxOptions {
  /** `fn` returns `[output, aux]`: aux is handed back beside the result, not differentiated. */
  hasAux?: boolean;
}

/** Options of {@link jvp}. */
export interface FuncJvpOptions extends FuncAuxOptions {
  /** Accepted for functorch's signature; unused, as in functorch 1.13. */
  strict?: boolean;
}

/** Options of {@link jacfwd}. */
export interface JacfwdOptions extends FuncAuxOptions {
  /**
   * functorch's `randomness`: `"error"` (default) throws when `fn` draws from the global
   * generator. `fn` runs once, so `"same"` and `"different"` both give every column the same
   * draw (functorch's `"different"` would draw per column).
   */
  randomness?: "error" | "different" | "same";
}

/** The `vjp` function {@link vjp} returns: cotangents shaped as the output, one result per primal. */
export type VjpFn = (cotangents: PyTree) => PyTree[];

/** Indices, validated against the number of arguments. */
function argnumList(argnums: Argnums, count: number, op: string): number[] {
  const list = typeof argnums === "number" ? [argnums] : argnums;
  if (!Array.isArray(list) || list.length === 0) {
    throw new RangeError(`${op}: argnums must be a number or a non-empty array of numbers`);
  }
  const out = list.map((a) => {
    if (!Number.isInteger(a)) throw new TypeError(`${op}: argnum must be an integer, got ${a}`);
    if (a < -count || a >= count) {
      throw new RangeError(`${op}: got argnum=${a}, but only ${count} positional inputs`);
    }
    return a < 0 ? a + count : a;
  });
  if (new Set(out).size !== out.length) {
    throw new RangeError(`${op}: argnums elements must be unique, got [${list.join(", ")}]`);
  }
  return out;
}

/**
 * A tensor the transform differentiates with respect to: a fresh leaf, or (when the caller's
 * tensor already requires grad, as inside another transform) an alias of it, so that the
 * result keeps its graph to the outer level and this level's gradient counts only the paths
 * through this argument (no perturbation confusion).
 */
function differentiable(t: unknown, own: Set<Tensor>, op: string): Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`${op}: the arguments differentiated must be Tensors, got ${kindOf(t)}`);
  }
  if (!isFloat(t.dtype)) {
    throw new TypeError(
      `${op}: only floating-point Tensors can be differentiated, got one of dtype ${t.dtype}`,
    );
  }
  if (t.requiresGrad) return t.reshape([...t.shape]);
  const fresh = t.detach();
  fresh.requiresGrad = true;
  own.add(fresh);
  return fresh;
}

/** Whether `t`'s graph reaches a tensor requiring grad that this level did not make. */
function reachesOuter(t: Tensor, own: Set<Tensor>): boolean {
  if (!t.requiresGrad) return false;
  if (t.isLeaf) return !own.has(t);
  const seen = new Set<Node>();
  const todo: Node[] = [t.gradFn!];
  while (todo.length > 0) {
    const node = todo.pop()!;
    if (seen.has(node)) continue;
    seen.add(node);
    // A freed node has lost its inputs: what lay behind it is unknown, so keep the graph.
    if (!node.live) return true;
    for (let i = 0; i < node.inputs.length; i++) {
      const edge = node.edges[i];
      if (edge) todo.push(edge.node);
      else if (node.inputs[i]?.requiresGrad && !own.has(node.inputs[i]!)) return true;
    }
  }
  return false;
}

/**
 * The tensors of `tree` as functorch hands them back: detached unless they depend on
 * something an outer level (an enclosing transform or the caller's own graph) differentiates
 * and the caller records gradients (`keep`: under `noGrad` functorch's results require none,
 * though `fn` itself runs with gradients on).
 */
function release(tree: unknown, own: Set<Tensor>, keep: boolean): unknown {
  const { leaves, spec } = flatten(tree);
  return unflatten(
    spec,
    leaves.map((l) => (l instanceof Tensor && !(keep && reachesOuter(l, own)) ? l.detach() : l)),
  );
}

/**
 * The gradients of `outputs` weighted by `seeds` with respect to `inputs`, zeros where none
 * flows, with a graph (so that transforms nest).
 */
function gradsOf(outputs: Tensor[], inputs: Tensor[], seeds: (Tensor | null)[]): Tensor[] {
  const live = outputs.map((o, i) => (o.requiresGrad ? i : -1)).filter((i) => i >= 0);
  const grads = live.length === 0 ? inputs.map(() => null) : autogradGrad(
    live.map((i) => outputs[i]),
    inputs,
    {
      gradOutputs: live.map((i) => seeds[i]),
      createGraph: true,
      retainGraph: true,
      allowUnused: true,
    },
  );
  return grads.map((g, i) => g ?? inputs[i].zerosLike());
}

/** The arguments with those of `argnums` replaced by differentiable copies. */
function prepare(args: unknown[], nums: number[], own: Set<Tensor>, op: string) {
  const call = [...args];
  const diff: Tensor[] = [];
  const specs: Spec[] = [];
  for (const n of nums) {
    const { leaves, spec } = flatten(args[n]);
    const made = leaves.map((l) => differentiable(l, own, op));
    diff.push(...made);
    specs.push(spec);
    call[n] = unflatten(spec, made);
  }
  /** One tree per argnum (shaped as that argument) of values given per differentiated leaf. */
  const byArg = <T>(flat: T[]): unknown[] => {
    let at = 0;
    return specs.map((spec) => {
      const count = countLeaves(spec);
      const part = flat.slice(at, at + count);
      at += count;
      return unflatten(spec, part);
    });
  };
  return { call, diff, byArg };
}

function splitAux(out: unknown, hasAux: boolean, op: string): [unknown, unknown] {
  if (!hasAux) return [out, undefined];
  if (!Array.isArray(out) || out.length !== 2) {
    throw new TypeError(
      `${op}: output of function f should be an array [output, aux] if hasAux is true, got ${
        kindOf(out)
      }`,
    );
  }
  return [out[0], out[1]];
}

/** The output's tensors: at least one, all floating-point. */
function outputLeaves(out: unknown, op: string): { leaves: Tensor[]; spec: Spec } {
  const { leaves, spec } = flatten(out);
  if (leaves.length === 0) {
    throw new TypeError(`${op}: expected f to be a function that has non-empty output`);
  }
  leaves.forEach((l) => {
    if (!(l instanceof Tensor)) {
      throw new TypeError(`${op}: expected f(...primals) to return only Tensors, got ${kindOf(l)}`);
    }
    if (!isFloat(l.dtype)) {
      throw new TypeError(
        `${op}: all outputs of f must be floating-point Tensors, got a Tensor of dtype ${l.dtype}`,
      );
    }
  });
  return { leaves: leaves as Tensor[], spec };
}

function gradAndValueOf(fn: UserFn, options: FuncGradOptions, args: unknown[], op: string) {
  const argnums = options.argnums ?? 0;
  const nums = argnumList(argnums, args.length, op);
  const own = new Set<Tensor>();
  const keep = isGradEnabled();
  return enableGrad(() => {
    const { call, diff, byArg } = prepare(args, nums, own, op);
    const [out, aux] = splitAux(callSync(fn, call, op), options.hasAux ?? false, op);
    if (!(out instanceof Tensor)) {
      throw new TypeError(`${op}: expected f(...args) to return a Tensor, got ${kindOf(out)}`);
    }
    if (out.ndim !== 0) {
      throw new RangeError(
        `${op}: expected f(...args) to return a scalar Tensor, got a tensor with ${out.ndim} dims (shape ${
          formatShape(out.shape)
        }). Maybe you wanted to use the vjp or jacrev APIs instead?`,
      );
    }
    if (!isFloat(out.dtype)) {
      throw new TypeError(
        `${op}: f(...args) must return a floating-point Tensor, got ${out.dtype}`,
      );
    }
    const trees = byArg(gradsOf([out], diff, [null]));
    const grads = typeof argnums === "number" ? trees[0] : trees;
    return {
      grads: release(grads, own, keep) as PyTree,
      value: release(out, own, keep) as Tensor,
      aux: options.hasAux ? release(aux, own, keep) : undefined,
    };
  });
}

/**
 * `fn`'s gradient, as `functorch.grad` (`torch.func.grad`): a function of the same arguments
 * that gives the gradient of `fn` (which must return a scalar, 0-d Tensor) with respect to the
 * argument `argnums` names (a pytree of tensors, shaped as it), or an array of them when
 * `argnums` is an array; `[gradient, aux]` with `hasAux`. An argument `fn` does not use gets
 * zeros. Transforms nest: `grad(grad(f))`, `vmap(grad(f))`, `jacrev(grad(f))`. The results
 * keep a graph only to what an enclosing transform or the caller's own graph differentiates;
 * for a plain call they are detached, as functorch's.
 *
 * @example
 * ```ts
 * import { func, type Tensor, tensor } from "@multigrad/core";
 * const f = (x: Tensor) => x.pow(3).sum();
 * const d2 = func.grad((x: Tensor) => (func.grad(f)(x) as Tensor).sum());
 * d2(tensor([1, 2])); // 6x: [6, 12]
 * ```
 */
export function grad(fn: UserFn, options: FuncGradOptions = {}): (...args: unknown[]) => PyTree {
  return (...args: unknown[]) => {
    const { grads, aux } = gradAndValueOf(fn, options, args, "func.grad(f)(...args)");
    return options.hasAux ? [grads, aux as PyTree] : grads;
  };
}

/**
 * `fn`'s gradient and value, as `functorch.grad_and_value`: `[gradient, value]`, or
 * `[gradient, [value, aux]]` with `hasAux` (see {@link grad}).
 */
export function gradAndValue(
  fn: UserFn,
  options: FuncGradOptions = {},
): (...args: unknown[]) => [PyTree, PyTree] {
  return (...args: unknown[]) => {
    const { grads, value, aux } = gradAndValueOf(
      fn,
      options,
      args,
      "func.gradAndValue(f)(...args)",
    );
    return [grads, options.hasAux ? [value, aux as PyTree] : value];
  };
}

function isVjpOptions(value: unknown): value is FuncAuxOptions {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  if (Object.getPrototypeOf(value) !== Object.prototype) return false;
  const entries = Object.entries(value);
  return entries.length > 0 &&
    entries.every(([k, v]) => k === "hasAux" && (v === undefined || typeof v === "boolean"));
}

/**
 * `fn(...primals)` and its vector-Jacobian product function, as `functorch.vjp`:
 * `[output, vjpFn]` (`[output, vjpFn, aux]` with `hasAux`, given as a last argument
 * `{ hasAux: true }`). `vjpFn(cotangents)` (cotangents shaped as the output) gives one
 * result per primal, each shaped as that primal; it may be called several times.
 */
export function vjp(fn: UserFn, ...primalsAndOptions: unknown[]): [PyTree, VjpFn, ...PyTree[]] {
  const op = "func.vjp(f, ...primals)";
  const last = primalsAndOptions.at(-1);
  const options = isVjpOptions(last) ? last : {};
  const primals = isVjpOptions(last) ? primalsAndOptions.slice(0, -1) : primalsAndOptions;
  const own = new Set<Tensor>();
  const keep = isGradEnabled();
  return enableGrad(() => {
    const { call, diff, byArg } = prepare(primals, primals.map((_, i) => i), own, op);
    const [out, aux] = splitAux(callSync(fn, call, op), options.hasAux ?? false, op);
    const { leaves, spec } = outputLeaves(out, op);
    const vjpFn: VjpFn = (cotangents) => {
      const c = flatten(cotangents);
      if (!sameSpec(c.spec, spec)) {
        throw new RangeError(
          `func.vjp: expected the pytree structure of cotangents to be the same as that of the function's output; cotangents: ${
            formatSpec(c.spec)
          }, output: ${formatSpec(spec)}`,
        );
      }
      c.leaves.forEach((t, i) => {
        if (!(t instanceof Tensor) || !sameShape(t.shape, leaves[i].shape)) {
          throw new RangeError(
            `func.vjp: cotangent ${i} must be a Tensor of the output's shape ${
              formatShape(leaves[i].shape)
            }, got ${kindOf(t)}`,
          );
        }
      });
      const grads = enableGrad(() => gradsOf(leaves, diff, c.leaves as Tensor[]));
      return byArg(grads.map((g) => release(g, own, keep && isGradEnabled()))) as PyTree[];
    };
    const result: [PyTree, VjpFn, ...PyTree[]] = [release(out, own, keep) as PyTree, vjpFn];
    if (options.hasAux) result.push(release(aux, own, keep) as PyTree);
    return result;
  });
}

/**
 * `fn(...primals)` and the Jacobian-vector product with `tangents` (shaped as the primals), as
 * `functorch.jvp`: `[output, jvpOut]` (`[output, jvpOut, aux]` with `hasAux`). multigrad has
 * no forward-mode autograd: this is the double-vjp trick (the vjp of a vjp, linear in its
 * cotangent), so it gives functorch's numbers with two backward passes instead of one forward.
 * Each tangent must have its primal's dtype and device (functorch computes a float32 primal's
 * jvp in a float64 tangent's dtype; here that is an error rather than a silent cast).
 */
export function jvp(
  fn: UserFn,
  primals: readonly unknown[],
  tangents: readonly unknown[],
  options: FuncJvpOptions = {},
): [PyTree, PyTree, ...PyTree[]] {
  const op = "func.jvp(f, primals, tangents)";
  if (!Array.isArray(primals)) {
    throw new TypeError(
      `${op}: expected primals to be an array, so that f(...primals) is a valid call; got ${
        kindOf(primals)
      }`,
    );
  }
  const p = flatten(primals);
  const t = flatten(tangents);
  if (!Array.isArray(tangents) || !sameSpec(p.spec, t.spec)) {
    throw new RangeError(
      `${op}: expected primals and tangents to have the same structure, got primals ${
        formatSpec(p.spec)
      } and tangents ${formatSpec(t.spec)}`,
    );
  }
  if (p.leaves.length === 0) {
    throw new RangeError(`${op}: expected primals to contain at least one Tensor`);
  }
  t.leaves.forEach((v, i) => {
    const x = p.leaves[i];
    if (!(v instanceof Tensor)) throw new TypeError(`${op}: tangent ${i} is ${kindOf(v)}`);
    if (!isFloat(v.dtype)) {
      throw new TypeError(`${op}: tangent ${i} must be floating-point, got dtype ${v.dtype}`);
    }
    // functorch gives a float32 primal's jvp in a float64 tangent's dtype; the double-vjp
    // cannot, and a silent cast would drop the precision asked for.
    if (x instanceof Tensor && v.dtype !== x.dtype) {
      throw new TypeError(
        `${op}: tangent ${i} has dtype ${v.dtype}, its primal ${x.dtype}; give tangents the primals' dtypes`,
      );
    }
    if (x instanceof Tensor && v.device !== x.device) {
      throw new TypeError(
        `${op}: tangent ${i} is on ${v.device}, its primal on ${x.device}; give tangents the primals' devices`,
      );
    }
    if (x instanceof Tensor && !sameShape(v.shape, x.shape)) {
      throw new RangeError(
        `${op}: tangent ${i} has shape ${formatShape(v.shape)}, its primal ${formatShape(x.shape)}`,
      );
    }
  });
  const own = new Set<Tensor>();
  const keep = isGradEnabled();
  return enableGrad(() => {
    const { call, diff } = prepare([...primals], primals.map((_, i) => i), own, op);
    const [out, aux] = splitAux(callSync(fn, call, op), options.hasAux ?? false, op);
    const { leaves, spec } = outputLeaves(out, op);
    const jv = forwardColumns(leaves, diff, own, (back) => [back.map((_, i) =>
      t.leaves[i] as Tensor
    )])[0];
    const result: [PyTree, PyTree, ...PyTree[]] = [
      release(out, own, keep) as PyTree,
      release(unflatten(spec, jv), own, keep) as PyTree,
    ];
    if (options.hasAux) result.push(release(aux, own, keep) as PyTree);
    return result;
  });
}

/**
 * Jacobian-vector products of `outputs` (functions of `inputs`) by the double-vjp trick:
 * `columns(back)` gives the tangent sets (one tensor per input); the result is, per tangent
 * set, one product per output.
 */
function forwardColumns(
  outputs: Tensor[],
  inputs: Tensor[],
  own: Set<Tensor>,
  columns: (back: Tensor[]) => Tensor[][],
): Tensor[][] {
  // u ↦ uᵀJ is linear in u: its vjp with a tangent v is Jv.
  const us = outputs.map((o) => {
    const u = zeros([...o.shape], { dtype: o.dtype, device: o.device });
    u.requiresGrad = true;
    own.add(u);
    return u;
  });
  const back = gradsOf(outputs, inputs, us);
  return columns(back).map((vs) => {
    const live = back.map((b, i) => (b.requiresGrad ? i : -1)).filter((i) => i >= 0);
    if (live.length === 0) return outputs.map((o) => o.zerosLike());
    const g = autogradGrad(live.map((i) => back[i]), us, {
      gradOutputs: live.map((i) => vs[i]),
      createGraph: true,
      retainGraph: true,
      allowUnused: true,
    });
    return g.map((x, k) => x ?? outputs[k].zerosLike());
  });
}

/** One-hot tensors of `t`'s shape, dtype and device: element `k` set. */
function basis(t: Tensor, k: number): Tensor {
  return arange(t.numel(), { device: t.device }).eq(k).to(t.dtype).reshape([...t.shape]);
}

/** The Jacobian tree: the output's structure, each leaf holding `perLeaf(k)`'s structure. */
function jacobianTree(
  spec: Spec,
  outputs: Tensor[],
  perInput: (k: number) => Tensor[],
  byArg: (flat: Tensor[]) => unknown[],
  argnums: Argnums,
): unknown {
  const perOutput = outputs.map((_, k) => {
    const trees = byArg(perInput(k));
    return typeof argnums === "number" ? trees[0] : trees;
  });
  return unflatten(spec, perOutput);
}

/**
 * The Jacobian of `fn` by reverse mode, as `functorch.jacrev`: a function of the same
 * arguments giving, for each output tensor (the output's structure kept), the Jacobian with
 * respect to the argument `argnums` names (its structure kept; an array of them when
 * `argnums` is an array), each of shape `[...output.shape, ...input.shape]`.
 * `[jacobian, aux]` with `hasAux`. One backward pass per output element.
 */
export function jacrev(
  fn: UserFn,
  argnums: Argnums = 0,
  options: FuncAuxOptions = {},
): (...args: unknown[]) => PyTree {
  const op = "func.jacrev(f)(...args)";
  return (...args: unknown[]) => {
    const nums = argnumList(argnums, args.length, op);
    const own = new Set<Tensor>();
    const keep = isGradEnabled();
    return enableGrad(() => {
      const { call, diff, byArg } = prepare(args, nums, own, op);
      const [out, aux] = splitAux(callSync(fn, call, op), options.hasAux ?? false, op);
      const { leaves, spec } = outputLeaves(out, op);
      const jac = jacobianTree(
        spec,
        leaves,
        (k) => {
          const o = leaves[k];
          const n = o.numel();
          const rows = Array.from({ length: n }, (_, e) => gradsOf([o], diff, [basis(o, e)]));
          return diff.map((x, j) =>
            n === 0
              ? zeros([...o.shape, ...x.shape], { dtype: x.dtype, device: x.device })
              : stack(rows.map((r) => r[j]), 0).reshape([...o.shape, ...x.shape])
          );
        },
        byArg as (flat: Tensor[]) => unknown[],
        argnums,
      );
      const released = release(jac, own, keep) as PyTree;
      return options.hasAux ? [released, release(aux, own, keep) as PyTree] : released;
    });
  };
}

/**
 * The Jacobian of `fn` column by column (Jacobian-vector products with the standard basis),
 * as `functorch.jacfwd`: the same structure and shapes as {@link jacrev}. multigrad has no
 * forward-mode autograd, so each column is a double-vjp (see {@link jvp}): functorch's numbers,
 * not its speed. `fn` runs once (see `randomness`).
 */
export function jacfwd(
  fn: UserFn,
  argnums: Argnums = 0,
  options: JacfwdOptions = {},
): (...args: unknown[]) => PyTree {
  const op = "func.jacfwd(f)(...args)";
  const randomness = options.randomness ?? "error";
  if (!["error", "different", "same"].includes(randomness)) {
    throw new RangeError(
      `${op}: only allowed values for randomness are "error", "different" or "same", got ${randomness}`,
    );
  }
  return (...args: unknown[]) => {
    const nums = argnumList(argnums, args.length, op);
    const own = new Set<Tensor>();
    const keep = isGradEnabled();
    return enableGrad(() => {
      const { call, diff, byArg } = prepare(args, nums, own, op);
      const state = getRngState();
      const [out, aux] = splitAux(callSync(fn, call, op), options.hasAux ?? false, op);
      if (randomness === "error" && getRngState() !== state) {
        throw new Error(
          `${op}: called a random operation while in randomness error mode. Please either use the "same" or "different" randomness option or perform the random operation outside the transform`,
        );
      }
      const { leaves, spec } = outputLeaves(out, op);
      // Column c of input j: the products with e_c on input j, zeros on the others.
      const cols = diff.map((x, j) =>
        x.numel() === 0 ? [] : forwardColumns(leaves, diff, own, () =>
          Array.from(
            { length: x.numel() },
            (_, c) => diff.map((y, i) => (i === j ? basis(x, c) : y.zerosLike())),
          ))
      );
      const jac = jacobianTree(
        spec,
        leaves,
        (k) => {
          const o = leaves[k];
          return diff.map((x, j) =>
            x.numel() === 0
              ? zeros([...o.shape, ...x.shape], { dtype: o.dtype, device: o.device })
              : stack(cols[j].map((col) => col[k]), o.ndim).reshape([...o.shape, ...x.shape])
          );
        },
        byArg as (flat: Tensor[]) => unknown[],
        argnums,
      );
      const released = release(jac, own, keep) as PyTree;
      return options.hasAux ? [released, release(aux, own, keep) as PyTree] : released;
    });
  };
}

/**
 * The Hessian of `fn` (a scalar function) with respect to the argument(s) `argnums` names, as
 * `functorch.hessian`: `jacfwd(jacrev(fn, argnums), argnums)`, of shape
 * `[...input.shape, ...input.shape]` for one tensor.
 */
export function hessian(fn: UserFn, argnums: Argnums = 0): (...args: unknown[]) => PyTree {
  return jacfwd(jacrev(fn, argnums), argnums);
}
