/**
 * The public side of module hooks: the hook signatures and the handle that removes one (the
 * machinery is in hooks.ts).
 * @module
 */

import type { Tensor } from "../tensor.ts";

/**
 * Called before `forward` with the module and its arguments, as PyTorch's forward pre-hook.
 * Returning `undefined` (or null) keeps the arguments; an array replaces the whole argument list;
 * any other value becomes the single argument (to pass one array argument, return `[array]`).
 */
export type ForwardPreHook<M = unknown> = (module: M, args: unknown[]) => unknown;

/**
 * Called after `forward` with the module, its arguments and its output, as PyTorch's forward
 * hook. Returning anything but `undefined` or null replaces the output.
 */
export type ForwardHook<M = unknown> = (module: M, args: unknown[], output: unknown) => unknown;

/**
 * Called during backward with the gradients of the module's tensor arguments (`gradInput`) and of
 * its tensor outputs (`gradOutput`), one slot per argument or output, null where a slot is not a
 * tensor or an output gets no gradient, as PyTorch's full backward hook (a tensor argument that
 * gets none reads as zeros, as PyTorch materializes it, unless no argument requires grad).
 * Returning an array of the same length replaces `gradInput` (what flows on to the arguments);
 * `undefined` or null keeps it.
 * The gradients live only in the backward pass: `keep(g.clone())` to hold one past it.
 */
export type FullBackwardHook<M = unknown> = (
  module: M,
  gradInput: (Tensor | null)[],
  gradOutput: (Tensor | null)[],
) => (Tensor | null)[] | null | undefined | void;

/**
 * What the `register*Hook` methods return, as PyTorch's `RemovableHandle`: {@link remove}
 * unregisters the hook (a second call does nothing).
 */
export class RemovableHandle {
  /** A number unique to this registration. */
  readonly id: number;
  #remove: (() => void) | null;

  /** @internal Made by the `register*Hook` methods. */
  constructor(id: number, remove: () => void) {
    this.id = id;
    this.#remove = remove;
  }

  /** Unregisters the hook; the module's plain `forward` is back once its last hook is gone. */
  remove(): void {
    const remove = this.#remove;
    this.#remove = null;
    remove?.();
  }
}
