/**
 * The user-facing `Function` (as `torch.autograd.Function`): a differentiable
 * operation with a hand-written backward, recorded in the core's graph. A
 * layer over the engine (`record`), as `torch.autograd.function` is over
 * PyTorch's C++ engine: nothing in the core uses it.
 * @module
 */

import { isGradEnabled, noGrad, record } from "../autograd.ts";
import { sumTo } from "../ops/elementwise.ts";
import { formatShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";

/** What `Function.forward` (or `setupContext`) gets as `ctx`; any other field set on it reaches backward. */
export class FunctionCtx {
  /** Any other field set in forward is there in backward. */
  [field: string]: unknown;
  #saved: Tensor[] = [];
  #nonDifferentiable = new Set<Tensor>();
  #materializeGrads = true;
  /** For each input of `apply`, whether it is a tensor that requires grad. */
  needsInputGrad: boolean[] = [];

  /** Keeps tensors for backward. */
  saveForBackward(...tensors: Tensor[]): void {
    this.#saved = tensors;
  }

  /** The tensors given to {@link saveForBackward}. */
  get savedTensors(): Tensor[] {
    return this.#saved;
  }

  /**
   * `ctx.mark_non_differentiable(*outputs)`: these outputs (of forward's
   * return value, such as indices) do not require grad, and backward gets
   * zeros for them (null without {@link setMaterializeGrads}).
   */
  markNonDifferentiable(...outputs: Tensor[]): void {
    for (const t of outputs) {
      if (!(t instanceof Tensor)) {
        throw new TypeError(
          `markNonDifferentiable: expected output tensors, got ${t === null ? "null" : typeof t}`,
        );
      }
      this.#nonDifferentiable.add(t);
    }
  }

  /**
   * `ctx.set_materialize_grads(value)`: with false, backward gets null (not
   * zeros) for the outputs no gradient reached.
   */
  setMaterializeGrads(value: boolean): void {
    this.#materializeGrads = value;
  }

  /** @internal Whether `t` was marked by {@link markNonDifferentiable}. */
  isNonDifferentiable(t: Tensor): boolean {
    return this.#nonDifferentiable.has(t);
  }

  /** @internal What {@link setMaterializeGrads} set. */
  get materializesGrads(): boolean {
    return this.#materializeGrads;
  }
}

/** Whether `shape` broadcasts to `to` (PyTorch's `is_expandable_to`). */
function expandableTo(shape: readonly number[], to: readonly number[]): boolean {
  if (shape.length > to.length) return false;
  return shape.every((d, i) => d === 1 || d === to[to.length - shape.length + i]);
}

/**
 * A differentiable operation defined by the user, as `torch.autograd.Function`:
 * subclass it with static `forward(ctx, ...inputs)` and `backward(ctx,
 * ...grads)` (one gradient or null per input), then call `MyFn.apply(...)`.
 * Gradients of outputs that got none arrive as zeros (see
 * `ctx.setMaterializeGrads`). As PyTorch 2's style, `forward(...inputs)`
 * may instead take no `ctx` when the class defines static
 * `setupContext(ctx, inputs, output)`. A gradient whose shape the input's
 * broadcasts to is summed down to the input's shape, as PyTorch does.
 *
 * @example
 * ```ts
 * class Square extends Function {
 *   static override forward(ctx: FunctionCtx, x: Tensor): Tensor {
 *     ctx.saveForBackward(x);
 *     return x.mul(x);
 *   }
 *   static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
 *     const [x] = ctx.savedTensors;
 *     return g.mul(x).mul(2);
 *   }
 * }
 * const y = Square.apply(tensor([3], { requiresGrad: true }));
 * ```
 */
export class Function {
  /** Computes the outputs (runs without recording the graph). */
  static forward(..._args: unknown[]): Tensor | Tensor[] {
    throw new Error(`${this.name}.forward is not implemented`);
  }

  /**
   * Optional (PyTorch 2's `setup_context`): when a subclass defines it,
   * `forward` gets the inputs without `ctx`, and this gets `ctx`, the
   * inputs and forward's output, to save what backward needs.
   */
  static setupContext?(ctx: FunctionCtx, inputs: unknown[], output: Tensor | Tensor[]): void;

  /** Gradients of the inputs from the gradients of the outputs. */
  static backward(
    _ctx: FunctionCtx,
    ..._grads: Tensor[]
  ): Tensor | null | (Tensor | null)[] {
    throw new Error(`${this.name}.backward is not implemented`);
  }

  /** Runs forward and records backward in the graph. */
  static apply<F extends typeof Function>(
    this: F,
    ...inputs: Parameters<F["forward"]> extends [FunctionCtx, ...infer R] ? R
      : Parameters<F["forward"]>
  ): ReturnType<F["forward"]> {
    const ctx = new FunctionCtx();
    ctx.needsInputGrad = inputs.map((x) => x instanceof Tensor && x.requiresGrad);
    const setup = this.setupContext;
    const raw = noGrad(() => setup ? this.forward(...inputs) : this.forward(ctx, ...inputs));
    if (setup) noGrad(() => setup.call(this, ctx, inputs, raw));
    const single = !Array.isArray(raw);
    // An output that is an input gets its own tensor object, so that
    // attaching this node does not rewrite the input's history.
    const outputs = (single ? [raw] : raw).map((t) => {
      if (!(t instanceof Tensor)) {
        throw new TypeError(`${this.name}.forward must return a Tensor or an array of Tensors`);
      }
      return inputs.includes(t) ? t.detach() : t;
    });
    const returned = single ? [raw as Tensor] : raw as Tensor[];
    // Only the differentiable outputs join the graph; the others stay plain tensors.
    const attached = outputs.filter((_, i) => !ctx.isNonDifferentiable(returned[i]));
    const tensorInputs = inputs.map((x) => (x instanceof Tensor ? x : null));
    record(this.name, tensorInputs, attached, (grads) => {
      let next = 0;
      const full = outputs.map((t, i) => {
        const g = ctx.isNonDifferentiable(returned[i]) ? null : grads[next++];
        return g ?? (ctx.materializesGrads ? t.zerosLike() : null);
      });
      const result = this.backward(ctx, ...(full as Tensor[]));
      const list = Array.isArray(result) ? result : [result];
      if (list.length !== inputs.length) {
        throw new Error(
          `${this.name}.backward returned ${list.length} gradients, expected ${inputs.length} (one per input)`,
        );
      }
      return inputs.map((x, i) => {
        const g = list[i];
        if (!(x instanceof Tensor) || !x.requiresGrad || !(g instanceof Tensor)) return null;
        if (g.shape.length === x.shape.length && g.shape.every((d, k) => d === x.shape[k])) {
          return g;
        }
        if (!expandableTo(x.shape, g.shape)) {
          throw new Error(
            `${this.name}.backward returned a gradient of shape ${
              formatShape(g.shape)
            } for input ${i} of shape ${
              formatShape(x.shape)
            }: it must have the input's shape, or one the input's broadcasts to`,
          );
        }
        return sumTo(g, x.shape);
      });
    });
    return (single ? outputs[0] : outputs) as ReturnType<F["forward"]>;
  }
}

/**
 * `torch.autograd.function.once_differentiable`: wraps a Function's
 * `backward` (as a decorator, or called on the function) so that it runs
 * without recording a graph, and a gradient of
 * its result (a double backward through it) is an error naming it instead
 * of a silently wrong zero.
 *
 * @example
 * ```ts
 * class Cube extends Function {
 *   static override forward(ctx: FunctionCtx, x: Tensor): Tensor {
 *     ctx.saveForBackward(x);
 *     return x.mul(x).mul(x);
 *   }
 *   @autograd.onceDifferentiable
 *   static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
 *     const [x] = ctx.savedTensors;
 *     return g.mul(x).mul(x).mul(3);
 *   }
 * }
 * ```
 */
export function onceDifferentiable<
  A extends unknown[],
  R extends Tensor | null | (Tensor | null)[],
>(
  backward: (ctx: FunctionCtx, ...grads: A) => R,
): (ctx: FunctionCtx, ...grads: A) => R {
  return function (this: unknown, ctx: FunctionCtx, ...grads: A): R {
    const result = noGrad(() => backward.call(this, ctx, ...grads));
    const differentiating = isGradEnabled() &&
      grads.some((g) => g instanceof Tensor && g.requiresGrad);
    if (!differentiating) return result;
    const name = typeof this === "function" ? this.name : "a Function";
    const list = Array.isArray(result) ? result : [result];
    const guarded = list.map((g) => {
      if (!(g instanceof Tensor)) return g;
      const out = g.detach();
      return record(
        "OnceDifferentiableBackward",
        grads.map((x) => (x instanceof Tensor ? x : null)),
        out,
        () => {
          throw new Error(
            `${name}: trying to differentiate twice a backward marked with onceDifferentiable`,
          );
        },
      );
    });
    return (Array.isArray(result) ? guarded : guarded[0]) as R;
  };
}
