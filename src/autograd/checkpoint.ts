/**
 * `torch.utils.checkpoint` (PyTorch 1.13): {@link checkpoint} runs a
 * function without keeping its activations and recomputes them in backward;
 * {@link checkpointSequential} does so segment by segment over a sequence of
 * layers. Memory for compute: the activations inside a checkpoint live only
 * while its backward runs.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { type CheckpointOptions, runCheckpoint } from "./checkpoint_core.ts";

export type { CheckpointOptions } from "./checkpoint_core.ts";

/**
 * `fn(...args)` without keeping its activations, as
 * `torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=,
 * preserve_rng_state=)`: the forward runs under no-grad, only the arguments
 * are kept, and backward runs `fn` again in grad mode (with the random
 * generator restored, so dropout draws the same masks) and differentiates
 * it. Gradients reach the tensor arguments that require grad and every
 * parameter `fn` uses; with `createGraph` the gradients are differentiable
 * (double backward). `args` may mix tensors with other values (passed as
 * they are); `fn` returns a tensor or an array of tensors. Under noGrad it
 * is a plain call.
 *
 * The reentrant variant (`useReentrant`, default true as in PyTorch 1.13)
 * accumulates the gradients of the leaves inside `fn` as its backward runs,
 * so `autograd.grad` (and `autograd.backward`'s `inputs`) through it is an
 * error, as in PyTorch; with `useReentrant: false` they work and
 * differentiate the tensor arguments only.
 *
 * Deliberate differences from PyTorch 1.13: when no tensor argument
 * requires grad there is no warning, and parameters inside `fn` still get
 * their gradients (PyTorch's reentrant variant leaves them without, its
 * non-reentrant one gives them), so the output requires grad in grad mode
 * even if nothing inside `fn` does (its backward then gives nothing). With
 * `useReentrant: false`, `autograd.grad` with respect to a parameter used
 * only inside `fn` finds no path to it (pass it as an argument instead);
 * PyTorch finds it through saved-tensor hooks, which multigrad lacks.
 * There is one random generator, so `preserveRngState` covers every device.
 *
 * @example
 * ```ts
 * import { nn, randn, type Tensor, utils } from "@multigrad/core";
 * const block = new nn.Sequential(new nn.Linear(64, 64), new nn.ReLU(), new nn.Dropout(0.1));
 * const x = randn([8, 64], { requiresGrad: true });
 * const y = utils.checkpoint.checkpoint((t: Tensor) => block.forward(t) as Tensor, [x]);
 * y.sum().backward(); // block's weights and x get gradients
 * ```
 */
export function checkpoint<A extends unknown[], R extends Tensor | Tensor[]>(
  fn: (...args: A) => R,
  args: A,
  options: CheckpointOptions = {},
): R {
  if (!Array.isArray(args)) {
    throw new TypeError(
      `utils.checkpoint: args must be an array of the function's arguments, got ${typeof args}`,
    );
  }
  checkOptions("utils.checkpoint", options);
  return runCheckpoint("utils.checkpoint", fn, args, options);
}

/** A layer of {@link checkpointSequential}: a function of one tensor, or a Module. */
export type SequentialLayer = ((input: Tensor) => Tensor) | {
  forward(input: Tensor): unknown;
};

/**
 * Runs `functions` in order on `input`, the first `segments - 1` segments
 * (each `floor(n / segments)` layers) under {@link checkpoint} and the rest
 * as usual, as `torch.utils.checkpoint.checkpoint_sequential`. `functions`
 * may be an `nn.Sequential` (its children) or an array of functions and
 * Modules.
 */
export function checkpointSequential(
  functions: Iterable<SequentialLayer>,
  segments: number,
  input: Tensor,
  options: CheckpointOptions = {},
): Tensor {
  checkOptions("utils.checkpointSequential", options);
  const layers = [...functions];
  if (!Number.isInteger(segments) || segments < 1) {
    throw new RangeError(
      `utils.checkpointSequential: segments must be a positive integer, got ${segments}`,
    );
  }
  const size = Math.floor(layers.length / segments);
  if (size === 0) {
    throw new RangeError(
      `utils.checkpointSequential: ${segments} segments for ${layers.length} functions; segments must be at most the number of functions`,
    );
  }
  const run = (start: number, end: number) => (x: Tensor): Tensor => {
    for (let j = start; j < end; j++) {
      const f = layers[j];
      const y: unknown = typeof f === "function" ? f(x) : f.forward(x);
      if (!(y instanceof Tensor)) {
        throw new TypeError(
          `utils.checkpointSequential: function ${j} returned ${typeof y}, not a Tensor`,
        );
      }
      x = y;
    }
    return x;
  };
  let x = input;
  let start = 0;
  for (; start < size * (segments - 1); start += size) {
    x = runCheckpoint("utils.checkpointSequential", run(start, start + size), [x], options);
  }
  return run(start, layers.length)(x);
}

function checkOptions(op: string, options: CheckpointOptions): void {
  if (options === null || typeof options !== "object") {
    throw new TypeError(`${op}: options must be an object, got ${options}`);
  }
  for (const key of ["useReentrant", "preserveRngState"] as const) {
    const v = options[key];
    if (v !== undefined && typeof v !== "boolean") {
      throw new TypeError(`${op}: ${key} must be a boolean, got ${typeof v}`);
    }
  }
  const unknown = Object.keys(options).filter((k) =>
    k !== "useReentrant" && k !== "preserveRngState"
  );
  if (unknown.length > 0) {
    throw new TypeError(
      `${op}: unexpected option ${unknown.join(", ")} (expected useReentrant, preserveRngState)`,
    );
  }
}
