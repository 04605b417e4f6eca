/**
 * `torch.func.vmap` (functorch's): a function of one example mapped over a batch dim, by
 * evaluating it once per slice and stacking.
 * @module
 */

import { getRngState, setRngState } from "../../ops/factory.ts";
import { select } from "../../ops/indexing.ts";
import { stack } from "../../ops/view.ts";
import { Tensor } from "../../tensor.ts";
import {
  broadcastPrefix,
  callSync,
  flatten,
  formatSpec,
  isPlainObject,
  kindOf,
  sameSpec,
} from "./pytree.ts";
import type { PyTree, Spec, UserFn } from "./pytree.ts";

/** Where the batch dim is: a dim, null (not mapped), or arrays and objects of them, nested. */
export type VmapDims = number | null | readonly VmapDims[] | { readonly [key: string]: VmapDims };

/** Options of {@link vmap} (functorch's keyword arguments). */
export interface VmapOptions {
  /**
   * The mapped dim of each argument (default 0 for all): a number or null for every tensor of
   * every argument, or an array with one entry per argument, each a number, null, or arrays
   * and objects following that argument's structure. Null passes an argument (a tensor or
   * anything else) to every slice unchanged.
   */
  inDims?: VmapDims;
  /**
   * Where the batch dim goes in each output tensor (default 0): a number for all, or a
   * structure following the output's. Null (PyTorch 2.x; functorch 1.13 rejects it) returns
   * an output unbatched: allowed only when every slice returned the very same Tensor object
   * (one made outside `fn`), since slices' values are not read back to compare them.
   */
  outDims?: VmapDims;
  /**
   * Random draws from the global generator inside `fn`: `"error"` (default) throws, as
   * functorch; `"different"` gives each slice its own draws; `"same"` restores the generator's
   * state before each slice, so every slice draws the same numbers.
   */
  randomness?: "error" | "different" | "same";
  /**
   * Accepted for PyTorch 2.x's signature (a positive integer or null): slices already run one
   * at a time, so it changes neither the results nor the memory.
   */
  chunkSize?: number | null;
}

/** `fn`'s name, as functorch's messages print it. */
const nameOf = (fn: { readonly name: string }) => (fn.name ? fn.name : "<anonymous>");
const show = (dims: unknown) => (dims === undefined ? "0" : JSON.stringify(dims));

function checkOutDims(dims: unknown, at: string): void {
  const ok = (d: unknown): boolean =>
    d === null || Number.isInteger(d) ||
    (Array.isArray(d) && d.every(ok)) || (isPlainObject(d) && Object.values(d).every(ok));
  if (!ok(dims)) {
    throw new TypeError(
      `${at}: outDims must be a number, null, or arrays and objects of them representing where in the outputs the vmapped dim should appear, got ${
        show(dims)
      }`,
    );
  }
}

/**
 * `fn` mapped over a dim of its inputs, as `functorch.vmap` (`torch.func.vmap`): the result is
 * what stacking `fn`'s results on each slice gives, and that is how it is computed (`fn` runs
 * once per slice, its outputs stacked at `outDims`): functorch's results, not its speed.
 * Composes with itself (nested vmap) and with the gradient transforms (`vmap(grad(f))` gives
 * per-sample gradients). Non-tensor arguments pass through with an inDim of null. The mapped
 * dims must all have the same size, which must not be 0 (functorch allows an empty batch;
 * running no slice tells nothing of the outputs' shapes). Gradients flow through the slices
 * and the stacking to the caller's tensors.
 *
 * @example
 * ```ts
 * import { func, type Tensor, tensor } from "@multigrad/core";
 * const dot = (a: Tensor, b: Tensor) => a.mul(b).sum();
 * func.vmap(dot)(tensor([[1, 2], [3, 4]]), tensor([[1, 1], [2, 2]])); // [3, 14]
 * ```
 */
export function vmap(
  fn: UserFn,
  options: VmapOptions = {},
): (...args: unknown[]) => PyTree {
  const randomness = options.randomness ?? "error";
  if (!["error", "different", "same"].includes(randomness)) {
    throw new RangeError(
      `vmap: only allowed values for randomness are "error", "different" or "same", got ${randomness}`,
    );
  }
  const chunk = options.chunkSize;
  if (chunk !== undefined && chunk !== null && !(Number.isInteger(chunk) && chunk > 0)) {
    throw new RangeError(`vmap: chunkSize must be a positive integer or null, got ${chunk}`);
  }
  const name = nameOf(fn);
  const inDims = options.inDims === undefined ? 0 : options.inDims;
  const outDims = options.outDims === undefined ? 0 : options.outDims;
  return (...args: unknown[]) => {
    const at = `vmap(${name}, inDims=${show(options.inDims)}, ...)(<inputs>)`;
    checkOutDims(outDims, `vmap(${name}, ..., outDims=${show(options.outDims)})`);
    if (!(Number.isInteger(inDims) || Array.isArray(inDims))) {
      throw new TypeError(
        `${at}: expected inDims to be a number or an array (one entry per argument) matching the structure of the inputs, got ${
          show(inDims)
        }`,
      );
    }
    if (args.length === 0) {
      throw new RangeError(
        `vmap(${name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying to vmap over a function with no inputs. The latter is unsupported.`,
      );
    }
    const { leaves, spec } = flatten(args);
    const dims = broadcastPrefix(inDims, spec);
    if (!dims) {
      throw new RangeError(
        `${at}: inDims is not compatible with the structure of the inputs. inDims has structure ${
          formatSpec(flatten(inDims).spec)
        } but the inputs have structure ${formatSpec(spec)}.`,
      );
    }
    const sizes: number[] = [];
    const mapped = dims.map((d, i) => {
      if (d === null) return null;
      const arg = leaves[i];
      if (!Number.isInteger(d)) {
        throw new TypeError(
          `${at}: got inDim=${show(d)} for an input but an inDim must be an integer dim or null`,
        );
      }
      if (!(arg instanceof Tensor)) {
        throw new TypeError(
          `${at}: got inDim=${d} for an input but the input is of type ${
            kindOf(arg)
          }. We cannot vmap over non-Tensor arguments, please use null as the respective inDim`,
        );
      }
      const n = arg.ndim;
      if ((d as number) < -n || (d as number) >= n) {
        throw new RangeError(
          `${at}: got inDim=${d} for some input, but that input is a Tensor of dimensionality ${n} so expected inDim to satisfy -${n} <= inDim < ${n}.`,
        );
      }
      const dim = (d as number) < 0 ? (d as number) + n : (d as number);
      sizes.push(arg.shape[dim]);
      return dim;
    });
    if (sizes.length === 0) throw new RangeError("vmap: expected at least one Tensor to vmap over");
    if (sizes.some((s) => s !== sizes[0])) {
      throw new RangeError(
        `vmap: expected all tensors to have the same size in the mapped dimension, got sizes [${
          sizes.join(", ")
        }] for the mapped dimension`,
      );
    }
    const batch = sizes[0];
    if (batch === 0) {
      throw new RangeError(
        `${at}: the mapped dimension has size 0; multigrad's vmap runs fn once per slice, so it cannot map over an empty batch`,
      );
    }
    const start = getRngState();
    const results: { leaves: unknown[]; spec: Spec }[] = [];
    for (let b = 0; b < batch; b++) {
      if (randomness === "same") setRngState(start);
      const sliced = leaves.map((
        l,
        i,
      ) => (mapped[i] === null ? l : select(l as Tensor, mapped[i]!, b)));
      const out = callSync(fn, unflattenArgs(spec, sliced), `vmap(${name}, ...)`);
      if (randomness === "error" && getRngState() !== start) {
        throw new Error(
          `vmap: called random operation while in randomness error mode. Please either use the "same" or "different" randomness flags on vmap or perform the randomness operation out of vmap`,
        );
      }
      results.push(flatten(out));
    }
    return gather(results, outDims, `vmap(${name}, ..., outDims=${show(options.outDims)})`, name);
  };
}

function unflattenArgs(spec: Spec, leaves: unknown[]): unknown[] {
  let i = 0;
  const build = (s: Spec): unknown => {
    if (s.kind === "leaf") return leaves[i++];
    const children = s.children.map(build);
    return s.kind === "array"
      ? children
      : Object.fromEntries(s.keys.map((k, j) => [k, children[j]]));
  };
  return build(spec) as unknown[];
}

/** The slices' outputs stacked at their outDims, in the outputs' structure. */
function gather(
  results: { leaves: unknown[]; spec: Spec }[],
  outDims: VmapDims,
  at: string,
  name: string,
): PyTree {
  const { spec } = results[0];
  for (const r of results) {
    for (const l of r.leaves) {
      if (!(l instanceof Tensor)) {
        throw new TypeError(
          `vmap(${name}, ...): ${name} must only return Tensors, got type ${
            kindOf(l)
          } as a return.`,
        );
      }
    }
    if (!sameSpec(r.spec, spec)) {
      throw new RangeError(
        `vmap(${name}, ...): ${name} returned outputs of different structures for different slices: ${
          formatSpec(spec)
        } and ${formatSpec(r.spec)}`,
      );
    }
  }
  // A lone tensor takes a number, or an array of one (functorch's edge case).
  const single = spec.kind === "leaf";
  const dims = single
    ? (Array.isArray(outDims) && outDims.length === 1
      ? [outDims[0]]
      : broadcastPrefix(outDims, spec))
    : broadcastPrefix(outDims, spec);
  if (!dims || (single && Array.isArray(outDims) && outDims.length !== 1)) {
    throw new RangeError(
      `${at}: outDims is not compatible with the structure of the outputs. outDims has structure ${
        formatSpec(flatten(outDims).spec)
      } but the outputs have structure ${formatSpec(spec)}.`,
    );
  }
  const stacked = dims.map((d, i) => {
    const slices = results.map((r) => r.leaves[i] as Tensor);
    if (d === null) {
      if (slices.some((t) => t !== slices[0])) {
        throw new RangeError(
          `${at}: outDims can be null only for an output that is not batched; output ${i} is a different Tensor in each slice (multigrad runs fn per slice and cannot compare their values without reading them back, so only a Tensor returned unchanged by every slice counts as unbatched)`,
        );
      }
      return slices[0];
    }
    if (!Number.isInteger(d)) {
      throw new TypeError(`${at}: outDims must hold integers or null, got ${show(d)}`);
    }
    const n = slices[0].ndim + 1;
    if ((d as number) < -n || (d as number) >= n) {
      throw new RangeError(
        `${at}: outDim ${d} is out of range for output ${i}, a Tensor of ${
          n - 1
        } dims per slice (expected -${n} <= outDim < ${n})`,
      );
    }
    return stack(slices, d as number);
  });
  return unflattenArgs(spec, stacked) as unknown as PyTree;
}
