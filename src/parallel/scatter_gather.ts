/**
 * Scatter and gather over nested inputs and outputs (arrays for PyTorch's
 * tuples and lists, plain objects for its dicts), built on the autograd
 * functions so gradients flow back through both.
 * @module
 */

import { type Device, device as resolveDevice } from "../device.ts";
import { Tensor } from "../tensor.ts";
import { type DeviceLike, resolveDevices } from "./devices.ts";
import { Gather, Scatter } from "./functions.ts";
import { isPlainObject } from "../util.ts";

/** Options of {@link scatter}. */
export interface NestedScatterOptions {
  /** The dim tensors are split along (default 0). */
  dim?: number;
  /** Explicit sizes, one per device, for every tensor leaf. */
  chunkSizes?: readonly number[];
}

/** Per-device lists regrouped by device, cut to the shortest (the fewest chunks wins). */
function zipMin<T>(lists: T[][]): T[][] {
  const length = Math.min(...lists.map((l) => l.length));
  const out: T[][] = [];
  for (let i = 0; i < length; i++) out.push(lists.map((l) => l[i]));
  return out;
}

/**
 * Splits `inputs` over `devices`: tensors into chunks (chunk i to device i),
 * arrays and plain objects element-wise, anything else (and empty arrays and
 * objects) handed to every device as is. Gives one value per used device:
 * the smallest chunk count over all tensor leaves.
 */
export function scatter(
  inputs: unknown,
  devices: readonly DeviceLike[],
  options: NestedScatterOptions = {},
): unknown[] {
  const targets = resolveDevices(devices, "scatter");
  const dim = options.dim ?? 0;
  const sizes = options.chunkSizes ?? null;
  const map = (value: unknown): unknown[] => {
    // Scatter records a graph only where one is wanted (grad mode on, input requiring grad).
    if (value instanceof Tensor) return Scatter.apply(targets, sizes, dim, value);
    if (Array.isArray(value) && value.length > 0) return zipMin(value.map(map));
    if (isPlainObject(value) && Object.keys(value).length > 0) {
      const keys = Object.keys(value);
      return zipMin(keys.map((k) => map(value[k]))).map((vals) =>
        Object.fromEntries(keys.map((k, i) => [k, vals[i]]))
      );
    }
    return targets.map(() => value);
  };
  return map(inputs);
}

/** Options of {@link gather}. */
export interface NestedGatherOptions {
  /** The dim tensors are concatenated along (default 0). */
  dim?: number;
}

function describe(value: unknown): string {
  if (value instanceof Tensor) return `a Tensor`;
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  if (isPlainObject(value)) return `an object with keys [${Object.keys(value).join(", ")}]`;
  return value === null ? "null" : `a ${typeof value}`;
}

/**
 * Concatenates per-device outputs on `outputDevice`, walking the structure of
 * the first output: tensors along `dim`, arrays and plain objects
 * element-wise, null and undefined kept. Differing structures are an error
 * naming the place and the difference.
 */
export function gather(
  outputs: readonly unknown[],
  outputDevice: DeviceLike,
  options: NestedGatherOptions = {},
): unknown {
  if (!Array.isArray(outputs) || outputs.length === 0) {
    throw new RangeError("gather: expected a non-empty array of outputs, one per device");
  }
  const target: Device = resolveDevice(outputDevice);
  const dim = options.dim ?? 0;
  const map = (values: unknown[], path: string): unknown => {
    const first = values[0];
    values.forEach((v, i) => {
      const same = first instanceof Tensor
        ? v instanceof Tensor
        : Array.isArray(first)
        ? Array.isArray(v) && v.length === first.length
        : isPlainObject(first)
        ? isPlainObject(v) && Object.keys(v).length === Object.keys(first).length &&
          Object.keys(first).every((k) => k in v)
        : v === first || (first == null && v == null);
      if (!same) {
        throw new TypeError(
          `gather: outputs differ at ${path}: output 0 is ${describe(first)}, output ${i} is ${
            describe(v)
          }`,
        );
      }
    });
    if (first instanceof Tensor) return Gather.apply(target, dim, ...(values as Tensor[]));
    if (first === null || first === undefined) return first;
    if (Array.isArray(first)) {
      return first.map((_, j) => map(values.map((v) => (v as unknown[])[j]), `${path}[${j}]`));
    }
    if (isPlainObject(first)) {
      return Object.fromEntries(
        Object.keys(first).map((k) => [
          k,
          map(values.map((v) => (v as Record<string, unknown>)[k]), `${path}.${k}`),
        ]),
      );
    }
    throw new TypeError(
      `gather: cannot gather ${
        describe(first)
      } at ${path}; outputs must be tensors, arrays, plain objects, null or undefined`,
    );
  };
  return map([...outputs], "output");
}
