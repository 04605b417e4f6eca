/**
 * torch-level utilities: `isTensor`, `numel`, `seed` (`manualSeed` and
 * `initialSeed` are the core's), grad modes (`setGradEnabled`, `inferenceMode`) and the deterministic
 * algorithms switch.
 * @module
 */

import { isGradEnabled, noGrad, setGradEnabled as setGradMode } from "../autograd.ts";
import { Tensor } from "../tensor.ts";
import { manualSeed } from "../ops/factory.ts";

/** Whether `obj` is a multigrad Tensor (`torch.is_tensor`). */
export function isTensor(obj: unknown): obj is Tensor {
  return obj instanceof Tensor;
}

/** The number of elements of `x` (`torch.numel`). */
export function numel(x: Tensor): number {
  if (!(x instanceof Tensor)) {
    throw new TypeError(`numel: the input must be a Tensor, got ${x === null ? "null" : typeof x}`);
  }
  return x.numel();
}

/**
 * Seeds the generator with a fresh non-deterministic seed and returns it,
 * as `torch.seed` (an integer below 2^53, so the number holds it exactly).
 */
export function seed(): number {
  const words = crypto.getRandomValues(new Uint32Array(2));
  const fresh = (words[0] & 0x1fffff) * 2 ** 32 + words[1];
  manualSeed(fresh);
  return fresh;
}

/**
 * Turns graph recording on or off and returns the previous mode, as
 * `torch.set_grad_enabled` (prefer `noGrad` / `enableGrad`, which restore it).
 */
export function setGradEnabled(enabled: boolean): boolean {
  if (typeof enabled !== "boolean") {
    throw new TypeError(`setGradEnabled: mode must be a boolean, got ${typeof enabled}`);
  }
  return setGradMode(enabled);
}

let inferenceDepth = 0;

/**
 * Runs `fn` (synchronous) without recording the graph, as
 * `torch.inference_mode()`. multigrad has no separate inference tensors:
 * this is `noGrad`, and {@link isInferenceModeEnabled} reports it inside.
 * Unlike PyTorch's, an `enableGrad` inside turns recording back on (and
 * the mode off).
 */
export function inferenceMode<T>(fn: () => T): T {
  if (typeof fn !== "function") {
    throw new TypeError(`inferenceMode: expected a function to run, got ${typeof fn}`);
  }
  inferenceDepth++;
  try {
    return noGrad(() => {
      const out = fn();
      // noGrad refuses it too, but under its own name.
      if (out instanceof Promise) {
        out.catch(() => {});
        throw new TypeError(
          "inferenceMode(fn): fn returned a Promise; the grad mode cannot span an await",
        );
      }
      return out;
    });
  } finally {
    inferenceDepth--;
  }
}

/** Whether an {@link inferenceMode} call is running (`torch.is_inference_mode_enabled`). */
export function isInferenceModeEnabled(): boolean {
  return inferenceDepth > 0 && !isGradEnabled();
}

let deterministic = false;
let deterministicWarnOnly = false;

/** Options of {@link useDeterministicAlgorithms}. */
export interface DeterministicOptions {
  /** PyTorch warns instead of raising on a nondeterministic op; recorded, see the function. */
  warnOnly?: boolean;
}

/**
 * Sets the flag `torch.use_deterministic_algorithms` sets. Every multigrad
 * kernel is already deterministic on every backend: reductions and
 * scatter-adds run in a fixed order (WGSL has no float atomics; the webgpu
 * scatter-add sums in the cpu loop's order), and the cpu matmul's threads
 * each own fixed output panels. So no op has a nondeterministic variant to
 * refuse, and the flag changes no result; it is kept so that code that sets
 * and reads it ({@link areDeterministicAlgorithmsEnabled}) runs unchanged.
 */
export function useDeterministicAlgorithms(
  mode: boolean,
  options: DeterministicOptions = {},
): void {
  if (typeof mode !== "boolean") {
    throw new TypeError(`useDeterministicAlgorithms: mode must be a boolean, got ${typeof mode}`);
  }
  const { warnOnly = false } = options;
  if (typeof warnOnly !== "boolean") {
    throw new TypeError(
      `useDeterministicAlgorithms: warnOnly must be a boolean, got ${typeof warnOnly}`,
    );
  }
  deterministic = mode;
  deterministicWarnOnly = warnOnly;
}

/** Whether {@link useDeterministicAlgorithms} turned the flag on (`torch.are_deterministic_algorithms_enabled`). */
export function areDeterministicAlgorithmsEnabled(): boolean {
  return deterministic;
}

/** The `warnOnly` last given to {@link useDeterministicAlgorithms} (`torch.is_deterministic_algorithms_warn_only_enabled`). */
export function isDeterministicAlgorithmsWarnOnlyEnabled(): boolean {
  return deterministicWarnOnly;
}
