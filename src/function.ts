/**
 * The user-facing `Function` (as `torch.autograd.Function`): a differentiable
 * operation with a hand-written backward, recorded in the graph of
 * `autograd.ts`.
 * @module
 */

import { noGrad, record } from "./autograd.ts";
import { Tensor } from "./tensor.ts";

/** What `Function.forward` gets as `ctx`; any other field set on it reaches backward. */
export class FunctionCtx {
  /** Any other field set in forward is there in backward. */
  [field: string]: unknown;
  #saved: Tensor[] = [];
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
}

/**
 * A differentiable operation defined by the user, as `torch.autograd.Function`:
 * subclass it with static `forward(ctx, ...inputs)` and `backward(ctx,
 * ...grads)` (one gradient or null per input), then call `MyFn.apply(...)`.
 * Gradients of outputs that got none arrive as zeros.
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
  static forward(_ctx: FunctionCtx, ..._inputs: unknown[]): Tensor | Tensor[] {
    throw new Error(`${this.name}.forward is not implemented`);
  }

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
      : unknown[]
  ): ReturnType<F["forward"]> {
    const ctx = new FunctionCtx();
    ctx.needsInputGrad = inputs.map((x) => x instanceof Tensor && x.requiresGrad);
    const raw = noGrad(() => this.forward(ctx, ...inputs));
    const single = !Array.isArray(raw);
    // An output that is an input gets its own tensor object, so that
    // attaching this node does not rewrite the input's history.
    const outputs = (single ? [raw] : raw).map((t) => {
      if (!(t instanceof Tensor)) {
        throw new TypeError(`${this.name}.forward must return a Tensor or an array of Tensors`);
      }
      return inputs.includes(t) ? t.detach() : t;
    });
    const tensorInputs = inputs.map((x) => (x instanceof Tensor ? x : null));
    record(this.name, tensorInputs, outputs, (grads) => {
      const filled = grads.map((g, i) => g ?? outputs[i].zerosLike());
      const result = this.backward(ctx, ...filled);
      const list = Array.isArray(result) ? result : [result];
      if (list.length !== inputs.length) {
        throw new Error(
          `${this.name}.backward returned ${list.length} gradients, expected ${inputs.length} (one per input)`,
        );
      }
      return inputs.map((x, i) => (x instanceof Tensor && x.requiresGrad ? list[i] : null));
    });
    return (single ? outputs[0] : outputs) as ReturnType<F["forward"]>;
  }
}
