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
 * Called during backward with the gradients of the module's tensor outputs, before the gradients
 * of its arguments are computed, as PyTorch 2.0's full backward pre-hook (one slot per output, null
 * where an output is not a tensor or gets no gradient). Returning an array of the same length
 * replaces `gradOutput`: what flows into the module's backward and what its full backward hooks
 * see; `undefined` or null keeps it.
 */
export type FullBackwardPreHook<M = unknown> = (
  module: M,
  gradOutput: (Tensor | null)[],
) => (Tensor | null)[] | null | undefined | void;

/**
 * Options of the `register*Hook` methods of `Module`, as PyTorch 2.x's keyword argument (which the
 * state-dict hooks lack in PyTorch: there it is a multigrad addition). PyTorch's `with_kwargs` has
 * no counterpart: a forward's arguments are all positional, and a hook gets them all in `args`.
 */
export interface HookOptions {
  /** Run before the hooks of this kind already registered on the module (default false). */
  prepend?: boolean;
}

/** Options of `registerForwardHook`, as PyTorch 2.1's. */
export interface ForwardHookOptions extends HookOptions {
  /**
   * Also run when the forward (or a hook after it) throws, with the output as far as it got
   * (`undefined` when the forward threw), before the error goes on; an error of the hook itself
   * is then only a warning (default false).
   */
  alwaysCall?: boolean;
}

/**
 * Called by `stateDict` on a module before its entries are collected, with the prefix of its keys
 * and `keepVars`, as PyTorch 2.0's state-dict pre-hook; what it returns is ignored.
 */
export type StateDictPreHook<M = unknown> = (module: M, prefix: string, keepVars: boolean) => void;

/**
 * Called by `stateDict` after the entries of a module and its submodules were collected, with the
 * dict being built and the module's key prefix, as PyTorch's `_register_state_dict_hook` (without
 * its metadata argument). It may edit the dict in place; a returned object replaces the dict, but,
 * as in PyTorch, only from the module `stateDict` was called on: a submodule's return is dropped.
 */
export type StateDictPostHook<M = unknown> = (
  module: M,
  stateDict: Record<string, Tensor>,
  prefix: string,
) => Record<string, Tensor> | null | undefined | void;

/**
 * The missing and unexpected keys a load-state-dict post-hook gets, as PyTorch's
 * `_IncompatibleKeys`: the arrays `loadStateDict` reports and checks, to edit in place.
 */
export interface IncompatibleKeys {
  /** Keys the module expected but the state dict lacked (so far in the load). */
  readonly missingKeys: string[];
  /** Keys of the state dict no module has (so far in the load). */
  readonly unexpectedKeys: string[];
}

/**
 * Called by `loadStateDict` after a module and its submodules were loaded, as PyTorch's
 * `register_load_state_dict_post_hook`; removing keys from the arrays lets a strict load pass.
 * It must return nothing.
 */
export type LoadStateDictPostHook<M = unknown> = (
  module: M,
  incompatibleKeys: IncompatibleKeys,
) => void;

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
