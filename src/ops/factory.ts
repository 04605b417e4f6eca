/**
 * Tensor factories: from data, constants, ranges and seeded random numbers.
 * @module
 */

import { defaultDevice, type Device, device as resolveDevice } from "../device.ts";
import {
  allocHost,
  assertDType,
  checkFill,
  type DType,
  dtypeOfArray,
  getDefaultDtype,
  isFloat,
  toHost,
  type TypedArray,
} from "../dtype.ts";
import { checkShape, formatShape, numelOf, type Shape } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { cachedConstant, empty, launch, writeLater } from "./util.ts";

/** Where and how a factory makes its tensor. */
export interface TensorOptions {
  /** Element type; default `getDefaultDtype()` (float32 unless set), a typed array's own for one. */
  dtype?: DType;
  /** A started device or its name; default {@link defaultDevice}. */
  device?: Device | string;
  /** Track gradients (float dtypes only). */
  requiresGrad?: boolean;
}

/** Nested arrays of numbers (or booleans), to any depth. */
export type NestedArray = number | boolean | readonly NestedArray[];

/**
 * The dtype (default `fallback`) and device (default the default device) that
 * `options` ask for, checked: for layers that make their own parameters.
 */
export function resolveFactory(
  options: TensorOptions,
  fallback: DType,
): { dtype: DType; device: Device } {
  const dtype = options.dtype ?? fallback;
  assertDType(dtype);
  if (options.requiresGrad && !isFloat(dtype)) {
    // Checked before anything is allocated.
    throw new TypeError(`requiresGrad: only floating-point tensors can require grad, got ${dtype}`);
  }
  return {
    dtype,
    device: options.device === undefined ? defaultDevice() : resolveDevice(options.device),
  };
}

function finish(t: Tensor, options: TensorOptions): Tensor {
  if (options.requiresGrad) t.requiresGrad = true;
  return t;
}

/** Uploads host values into a new tensor. */
export function fromHost(values: TypedArray, shape: Shape, device: Device): Tensor {
  const t = empty(shape, dtypeOfArray(values), device);
  if (values.length > 0) {
    const buffer = t.storage.buffer();
    writeLater(device, buffer, values);
    if (values instanceof Int32Array) {
      // Index tensors made from the host can be range-checked at once.
      let lo = values[0];
      let hi = lo;
      for (const v of values) {
        if (v < lo) lo = v;
        else if (v > hi) hi = v;
      }
      t.storage.knownRange = [lo, hi];
    }
  }
  return t;
}

/** Nested arrays' shape; if ragged, null, or with `path` an error naming the place (built for the
 * error only: a path per element took a second for 4 million numbers). */
function shapeOf(data: NestedArray, path?: string): number[] | null {
  if (!Array.isArray(data)) return [];
  if (data.length === 0) return [0];
  const inner = shapeOf(data[0], path && `${path}[0]`);
  for (let i = 1; i < data.length && inner !== null; i++) {
    const s = !inner.length && !Array.isArray(data[i])
      ? inner
      : shapeOf(data[i], path && `${path}[${i}]`);
    if (s === inner || s?.length === inner.length && s.every((d, j) => d === inner[j])) continue;
    if (path === undefined) return null;
    throw new RangeError(
      `tensor: ragged nested array: ${path}[0] has shape ${
        formatShape(inner)
      } but ${path}[${i}] has shape ${formatShape(s!)}`,
    );
  }
  return inner && [data.length, ...inner];
}

/** Writes the leaves of `data` into `out` from `at` (int32 range-checked before truncation). */
function fill(data: NestedArray, out: TypedArray, at: number, dtype: DType): number {
  const items = Array.isArray(data) ? data : [data];
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    if (Array.isArray(item)) at = fill(item, out, at, dtype);
    else if (typeof item === "number") {
      out[at++] = dtype === "int32" ? (checkFill(dtype, item, "tensor"), item) : item;
    } else if (typeof item === "boolean") out[at++] = item ? 1 : 0;
    else throw new TypeError(`tensor: expected numbers or booleans, got ${typeof item}`);
  }
  return at;
}

/**
 * A tensor from a number (0-dimensional), nested arrays, or a typed array
 * (with `shape`, default 1-dimensional). Numbers take the default dtype, integers too (PyTorch:
 * int64); a typed array keeps its own. Into int32, fractions truncate toward zero as PyTorch's.
 * A typed array is range-checked after truncation (as from numpy); PyTorch's -2^31 is an error.
 * A `BigInt64Array` or `BigUint64Array` (PyTorch: int64): int32 if every value fits, or a float dtype.
 */
export function tensor(
  data: NestedArray | TypedArray | BigInt64Array | BigUint64Array,
  options: TensorOptions & { shape?: number[] } = {},
): Tensor {
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) {
    // int64 becomes int32 (as PyTorch's int64 does elsewhere here): exactly, or an error.
    const int = !isFloat(options.dtype ?? "int32"); // A float dtype takes every value, rounded.
    const fit = (v: bigint) => (int && checkFill("int32", Number(v), "tensor"), Number(v));
    data = int ? Int32Array.from(data, fit) : Float64Array.from(data, fit);
  }
  const typed = ArrayBuffer.isView(data) ? data as TypedArray : null;
  const fallback = typed ? dtypeOfArray(typed) : getDefaultDtype();
  const { dtype, device } = resolveFactory(options, fallback);
  const nested = data as NestedArray;
  const shape = typed ? [typed.length] : (shapeOf(nested) ?? shapeOf(nested, "data"))!;
  const target = options.shape ? checkShape(options.shape) : shape;
  if (numelOf(target) !== numelOf(shape)) {
    throw new RangeError(
      `tensor: shape ${formatShape(target)} holds ${numelOf(target)} elements but the data has ${
        numelOf(shape)
      }`,
    );
  }
  const host = typed ? toHost(dtype, typed, "tensor") : allocHost(dtype, numelOf(shape));
  if (!typed) fill(nested, host, 0, dtype);
  return finish(fromHost(host, target, device), options);
}

/** `value` in `shape`, default dtype unless told (PyTorch: int64 for an integer); overflow throws. */
export function full(shape: number[], value: number, options: TensorOptions = {}): Tensor {
  const { dtype, device } = resolveFactory(options, getDefaultDtype());
  checkFill(dtype, value, "full");
  const t = empty(checkShape(shape), dtype, device);
  const n = t.numel();
  if (n > 0) {
    const buffer = t.storage.buffer();
    launch(device, "fill", { out: buffer, numel: n, value, dtype });
  }
  return finish(t, options);
}

/** Zeros. */
export const zeros = (shape: number[], options: TensorOptions = {}): Tensor =>
  full(shape, 0, options);
/** Ones. */
export const ones = (shape: number[], options: TensorOptions = {}): Tensor =>
  full(shape, 1, options);

/**
 * `[start, end)` by `step`, as `torch.arange`: `arange(5)`, `arange(2, 5)`,
 * `arange(0, 1, 0.25)`, the options after any of them (`arange(5, { device })`).
 * int32 when all arguments are integers, else the default dtype.
 */
export function arange(
  start: number,
  end?: number | TensorOptions,
  step: number | TensorOptions = 1,
  options: TensorOptions = {},
): Tensor {
  if (typeof end === "object") [end, options] = [undefined, end];
  if (typeof step === "object") [step, options] = [1, step];
  if (end === undefined) [start, end] = [0, start];
  if (![start, end, step].every(Number.isFinite)) {
    throw new RangeError(
      `arange: start, end and step must be finite numbers, got ${start}, ${end} and ${step}`,
    );
  }
  if (step === 0) throw new RangeError("arange: step must be non-zero");
  const count = Math.max(0, Math.ceil((end - start) / step));
  if (count > MAX_ARRAY) {
    throw new RangeError(
      `arange: ${start} to ${end} by ${step} is ${count} elements, more than a host array holds (${MAX_ARRAY})`,
    );
  }
  const ints = [start, end, step].every(Number.isInteger);
  const { dtype, device } = resolveFactory(options, ints ? "int32" : getDefaultDtype());
  const values = new Array<number>(count);
  for (let i = 0; i < count; i++) values[i] = start + i * step;
  return finish(fromHost(toHost(dtype, values, "arange"), [count], device), options);
}

const ranges = new Map<string, Tensor>();

/**
 * int32 `0..size-1` on `device`, for one-hot masks that ops and losses build
 * every step: cached (persistent) per size and device, so it is uploaded once.
 */
export function arangeOn(size: number, device: Device): Tensor {
  return cachedConstant(
    ranges,
    64,
    `${device}|${size}`,
    device,
    () => arange(0, size, 1, { dtype: "int32", device }),
  );
}

/** The longest JavaScript array. */
const MAX_ARRAY = 2 ** 32 - 1;

let seedState = BigInt(Date.now()) & 0xffffffffffffffffn;
let startSeed = seedState;

/** Seeds every random factory (rand, randn, dropout, shuffles that use it). */
export function manualSeed(seed: number): void {
  if (typeof seed !== "number" || !Number.isFinite(seed)) {
    throw new RangeError(`manualSeed: the seed must be a finite number, got ${seed}`);
  }
  seedState = BigInt.asUintN(64, BigInt(Math.trunc(seed)));
  startSeed = seedState;
}

/**
 * The seed the generator last started from (`torch.initial_seed`): the last
 * {@link manualSeed}'s, as a 64-bit unsigned value (exact up to 2^53), else
 * the time-based one chosen at startup.
 */
export function initialSeed(): number {
  return Number(startSeed);
}

/**
 * The state of the global generator (`rand`, `randn`, `uniform`, `normal`,
 * dropout, `nn.init`, unseeded shuffles and splits), as `getRngState` gives
 * it: an opaque string, JSON-friendly so that checkpoints can hold it.
 */
export type RngState = string;

const RNG_STATE = /^splitmix64:([0-9a-f]{16})$/;

/**
 * The global generator's state, as `torch.get_rng_state`: restoring it with
 * {@link setRngState} makes the following random numbers repeat, so a run
 * resumed from a checkpoint draws what the uninterrupted run would have.
 */
export function getRngState(): RngState {
  return `splitmix64:${seedState.toString(16).padStart(16, "0")}`;
}

/** Restores a state {@link getRngState} gave, as `torch.set_rng_state`. */
export function setRngState(state: RngState): void {
  const match = typeof state === "string" ? RNG_STATE.exec(state) : null;
  if (!match) {
    throw new TypeError(
      `setRngState: expected a state from getRngState() ("splitmix64:" and 16 hex digits), got ${
        typeof state === "string" ? JSON.stringify(state) : typeof state
      }`,
    );
  }
  seedState = BigInt(`0x${match[1]}`);
}

/** The next u32 of the global seeded stream (splitmix64). */
export function nextSeed(): number {
  seedState = BigInt.asUintN(64, seedState + 0x9e3779b97f4a7c15n);
  let z = seedState;
  z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
  z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
  z = z ^ (z >> 31n);
  return Number(z & 0xffffffffn);
}

/** A host generator (`Generator`): gives the values when a factory is passed one. */
export interface HostRandom {
  /** `n` uniform [a, b) or normal (mean a, std b) values, in PyTorch's cpu order. */
  fill(kind: "uniform" | "normal", n: number, dtype: DType, a: number, b: number): TypedArray;
}

/** {@link TensorOptions} of the random factories: a `generator` draws on the host instead. */
export interface RandomOptions extends TensorOptions {
  /** Draw from this generator (PyTorch's exact cpu stream), not the global device stream. */
  generator?: HostRandom;
}

function random(
  kind: "uniform" | "normal",
  shape: number[],
  a: number,
  b: number,
  options: RandomOptions,
): Tensor {
  const { dtype, device } = resolveFactory(options, getDefaultDtype());
  if (!isFloat(dtype)) {
    throw new TypeError(
      `${kind === "uniform" ? "rand" : "randn"}: dtype must be float, got ${dtype}`,
    );
  }
  const [g, dims] = [options.generator, checkShape(shape)];
  if (g != null && typeof g.fill !== "function") {
    throw new TypeError(`${kind === "uniform" ? "rand" : "randn"}: generator must be a Generator`);
  }
  if (g) return finish(fromHost(g.fill(kind, numelOf(dims), dtype, a, b), dims, device), options);
  const t = empty(checkShape(shape), dtype, device);
  const numel = t.numel();
  const seed = nextSeed();
  if (numel > 0) {
    const buffer = t.storage.buffer();
    launch(device, "random", { out: buffer, numel, kind, seed, a, b, dtype });
  }
  return finish(t, options);
}

/** Uniform numbers in [0, 1). */
export const rand = (shape: number[], options: RandomOptions = {}): Tensor =>
  random("uniform", shape, 0, 1, options);
/** Uniform numbers in [low, high). */
export const uniform = (
  shape: number[],
  low: number,
  high: number,
  options: RandomOptions = {},
): Tensor => random("uniform", shape, low, high, options);
/** Standard normal numbers. */
export const randn = (shape: number[], options: RandomOptions = {}): Tensor =>
  random("normal", shape, 0, 1, options);
/** Normal numbers with mean `mean` and standard deviation `std`. */
export const normal = (
  shape: number[],
  mean: number,
  std: number,
  options: RandomOptions = {},
): Tensor => random("normal", shape, mean, std, options);

// `torch.*_like`: `t`'s shape, dtype and device unless `options` says otherwise (not its requiresGrad).
const like = (t: Tensor, o: TensorOptions) => ({ dtype: t.dtype, device: t.device, ...o });
/** Zeros shaped like `t` (`torch.zeros_like`). */
export const zerosLike = (t: Tensor, options: TensorOptions = {}): Tensor =>
  full([...t.shape], 0, like(t, options));
/** Ones shaped like `t` (`torch.ones_like`). */
export const onesLike = (t: Tensor, options: TensorOptions = {}): Tensor =>
  full([...t.shape], 1, like(t, options));
/** `value` everywhere, shaped like `t` (`torch.full_like`). */
export const fullLike = (t: Tensor, value: number, options: TensorOptions = {}): Tensor =>
  full([...t.shape], value, like(t, options));
/** Uniform numbers in [0, 1) shaped like `t` (`torch.rand_like`). */
export const randLike = (t: Tensor, options: TensorOptions = {}): Tensor =>
  rand([...t.shape], like(t, options));
/** Standard normal numbers shaped like `t` (`torch.randn_like`). */
export const randnLike = (t: Tensor, options: TensorOptions = {}): Tensor =>
  randn([...t.shape], like(t, options));
