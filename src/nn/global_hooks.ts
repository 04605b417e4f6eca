/**
 * Hooks for every module at once, as PyTorch's `torch.nn.modules.module.register_module_*_hook`
 * functions (here members of `nn`). They run for every module's `forward`, before the module's
 * own hooks of the same kind, in the order registered; modules made later are covered too.
 * Useful for tracing, profiling and debugging a whole model. They reach the `forward` a module's
 * class defines (or inherits); one assigned to the module itself (`m.forward = fn`) runs them only
 * while the module has hooks of its own.
 * @module
 */

import type {
  ForwardHook,
  ForwardPreHook,
  FullBackwardHook,
  FullBackwardPreHook,
  RemovableHandle,
} from "./hook_handle.ts";
import { addGlobalHook, checkHook, checkHookOptions } from "./hooks.ts";
import type { Module } from "./module.ts";

/** Options of {@link registerModuleForwardHook}, as PyTorch 2.1's keyword argument. */
export interface ModuleForwardHookOptions {
  /**
   * Also run when a forward (or a hook after it) throws, with the output as far as it got
   * (`undefined` when the forward threw), before the error goes on (default false).
   */
  alwaysCall?: boolean;
}

/**
 * Calls `hook(module, args)` before the `forward` of every module, before the module's own
 * pre-hooks, as PyTorch's `register_module_forward_pre_hook`; a returned value replaces the
 * arguments (see {@link ForwardPreHook}). Returns the handle that removes it.
 *
 * @example
 * ```ts
 * const seen: string[] = [];
 * const handle = nn.registerModuleForwardPreHook((m) => void seen.push(m.constructor.name));
 * new nn.Sequential(new nn.Linear(2, 2), new nn.ReLU()).forward(zeros([1, 2]));
 * handle.remove(); // seen: Sequential, Linear, ReLU
 * ```
 */
export function registerModuleForwardPreHook(hook: ForwardPreHook<Module>): RemovableHandle {
  return addGlobalHook(
    "pre",
    checkHook("registerModuleForwardPreHook", hook) as ForwardPreHook,
  );
}

/**
 * Calls `hook(module, args, output)` after the `forward` of every module, before the module's own
 * forward hooks, as PyTorch's `register_module_forward_hook` (`alwaysCall` is PyTorch 2.1's); a
 * returned value replaces the output (see {@link ForwardHook}).
 */
export function registerModuleForwardHook(
  hook: ForwardHook<Module>,
  options: ModuleForwardHookOptions = {},
): RemovableHandle {
  const op = "registerModuleForwardHook";
  return addGlobalHook(
    "forward",
    checkHook(op, hook) as ForwardHook,
    checkHookOptions(op, options, ["alwaysCall"]),
  );
}

/**
 * Calls `hook(module, gradInput, gradOutput)` in the backward of every module's forward, before
 * the module's own full backward hooks, as PyTorch's `register_module_full_backward_hook`; a
 * returned array replaces `gradInput` (see {@link FullBackwardHook}). Forwards that ran before
 * the registration keep the hooks they ran with.
 */
export function registerModuleFullBackwardHook(hook: FullBackwardHook<Module>): RemovableHandle {
  return addGlobalHook(
    "backward",
    checkHook("registerModuleFullBackwardHook", hook) as FullBackwardHook,
  );
}

/**
 * Calls `hook(module, gradOutput)` in the backward of every module's forward, before its
 * gradInput is computed and before the module's own backward pre-hooks, as PyTorch 2.0's
 * `register_module_full_backward_pre_hook`; a returned array replaces `gradOutput` (see
 * {@link FullBackwardPreHook}).
 */
export function registerModuleFullBackwardPreHook(
  hook: FullBackwardPreHook<Module>,
): RemovableHandle {
  return addGlobalHook(
    "backwardPre",
    checkHook("registerModuleFullBackwardPreHook", hook) as FullBackwardPreHook,
  );
}
