/**
 * Auto-wrap policies of `torch.distributed.fsdp.wrap` (PyTorch 1.13): they
 * decide which submodules become FSDP units of their own.
 * @module
 */

import type { Module } from "../../nn/module.ts";

/**
 * An auto-wrap policy, as PyTorch's `auto_wrap_policy(module, recurse,
 * unwrapped_params)`: asked with `recurse` true whether to look inside
 * `module` for units, and with `recurse` false whether to wrap `module`
 * itself, whose parameters not yet in a unit number `unwrappedParams`.
 */
export type AutoWrapPolicy = (module: Module, recurse: boolean, unwrappedParams: number) => boolean;

/** Options of {@link sizeBasedAutoWrapPolicy}. */
export interface SizeBasedAutoWrapPolicyOptions {
  /** A submodule with at least this many parameters not yet in a unit is wrapped (default 1e8, PyTorch's). */
  minNumParams?: number;
  /** Classes never wrapped (default: none). */
  excludeWrapModules?: ReadonlySet<abstract new (...args: never[]) => Module>;
}

/**
 * `size_based_auto_wrap_policy`: wraps a submodule once its parameters not
 * already in a nested unit reach `minNumParams`.
 */
export function sizeBasedAutoWrapPolicy(
  options: SizeBasedAutoWrapPolicyOptions = {},
): AutoWrapPolicy {
  const min = options.minNumParams ?? 1e8;
  if (typeof min !== "number" || !(min >= 0)) {
    throw new RangeError(
      `sizeBasedAutoWrapPolicy: minNumParams must be a number >= 0, got ${String(min)}`,
    );
  }
  const excluded = options.excludeWrapModules ?? new Set();
  return (module, recurse, unwrappedParams) => {
    if (recurse) return true;
    if ([...excluded].some((cls) => module instanceof cls)) return false;
    return unwrappedParams >= min;
  };
}

/**
 * `ModuleWrapPolicy` (PyTorch 2.0's name for 1.13's
 * `transformer_auto_wrap_policy`): wraps every submodule that is an
 * instance of one of `moduleClasses`.
 */
export function ModuleWrapPolicy(
  moduleClasses: ReadonlySet<abstract new (...args: never[]) => Module>,
): AutoWrapPolicy {
  if (!(moduleClasses instanceof Set)) {
    throw new TypeError("ModuleWrapPolicy: expected a Set of nn.Module classes");
  }
  const classes = [...moduleClasses];
  return (module, recurse) => recurse || classes.some((cls) => module instanceof cls);
}

/** Options of {@link transformerAutoWrapPolicy}. */
export interface TransformerAutoWrapPolicyOptions {
  /** The layer classes that become units (PyTorch's `transformer_layer_cls`). */
  transformerLayerCls: ReadonlySet<abstract new (...args: never[]) => Module>;
}

/** `transformer_auto_wrap_policy`: wraps every instance of `transformerLayerCls`. */
export function transformerAutoWrapPolicy(
  options: TransformerAutoWrapPolicyOptions,
): AutoWrapPolicy {
  return ModuleWrapPolicy(options?.transformerLayerCls);
}
