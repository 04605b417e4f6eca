/**
 * Helpers of the composite ops: PyTorch's dim lists, and reordering along
 * one dim by an index the host computes.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { tidy } from "../storage.ts";
import { formatShape, normalizeDim } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import type { ValuesIndices } from "./sort.ts";
import { tensor } from "../ops/factory.ts";
import { indexSelect } from "../ops/view.ts";

/**
 * `dims` (a number or an array; every dim when omitted or empty, as PyTorch's
 * `dim=()`) made non-negative and sorted; a repeated dim is an error.
 */
export function dimList(
  x: Tensor,
  dims: number | readonly number[] | undefined,
  op: string,
): number[] {
  if (dims !== undefined && typeof dims !== "number" && !Array.isArray(dims)) {
    throw new TypeError(`${op}: dims must be a number or an array of numbers, got ${typeof dims}`);
  }
  const given = dims === undefined ? [] : typeof dims === "number" ? [dims] : [...dims];
  if (given.length === 0) return x.shape.map((_, i) => i);
  const list = given.map((d) => normalizeDim(d, x.ndim, op));
  const repeated = list.find((d, i) => list.indexOf(d) !== i);
  if (repeated !== undefined) {
    throw new RangeError(
      `${op}: dim ${repeated} appears more than once in ${JSON.stringify(dims)} (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  return list.sort((a, b) => a - b);
}

/** `shape` with the dims in `dims` set to 1 (a keepdim result's shape). */
export function keptShape(shape: readonly number[], dims: readonly number[]): number[] {
  return shape.map((n, i) => (dims.includes(i) ? 1 : n));
}

/**
 * `x` reordered along `dim`: element `i` of the result is element
 * `source(i, n)` of `x` (no graph; the callers record their own gradient).
 */
export function reorder(x: Tensor, dim: number, source: (i: number, n: number) => number): Tensor {
  const n = x.shape[dim];
  const index = new Int32Array(n);
  for (let i = 0; i < n; i++) index[i] = source(i, n);
  return noGrad(() => indexSelect(x, dim, tensor(index, { device: x.device })));
}

/** Throws a TypeError naming `op` and `what` unless `t` is a Tensor. */
export function requireTensor(op: string, t: unknown, what: string): asserts t is Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`${op}: ${what} must be a Tensor, got ${t === null ? "null" : typeof t}`);
  }
}

/** `fn` with no graph, its intermediates freed at once. */
export const computed = <T>(fn: () => T): T => noGrad(() => tidy(fn));

/** `[values, indices]`, also as `.values` and `.indices`, as PyTorch's named tuple. */
export function valuesIndices(values: Tensor, indices: Tensor): ValuesIndices {
  return Object.assign([values, indices] as const, { values, indices });
}

/**
 * @internal Runs `round` `count` times from `state` (round i gets the state
 * and i), each round in a scope of its own, and frees each state tensor a
 * round dropped, except the caller's initial ones. A round returns new tensors or
 * the state's own, never views of them. Kept to the end of the loop, every
 * round's temporaries were live at once: a Binomial draw of 140,000 values
 * held about 1,250 arrays of its size and took 6 s on cpu.
 */
export function scopedRounds<T extends Tensor[]>(
  count: number,
  state: T,
  round: (state: T, index: number) => T,
): T {
  // The caller's tensors stay theirs even when a round carries one past the first round.
  const initial = new Set(state);
  for (let i = 0; i < count; i++) {
    const before = state;
    state = tidy(() => round(before, i));
    // A state in a graph may be saved for backward: the scope's graph logic keeps it then.
    if (before.some((t) => t.requiresGrad)) continue;
    const kept = new Set(state);
    for (const t of before) if (!kept.has(t) && !initial.has(t)) t.dispose();
  }
  return state;
}

/** Horner's rule over `coefficients` (highest power first), each step in a scope of its own. */
export function horner(t: Tensor, coefficients: readonly number[]): Tensor {
  const start = t.mul(0).add(coefficients[0]);
  const steps = coefficients.length - 1;
  return scopedRounds(steps, [start], ([p], i) => [p.mul(t).add(coefficients[i + 1])])[0];
}
