/**
 * The helpers the distributions share: parameter conversion, broadcasting
 * and checks, the basic constraints, dtype limits, and the tables behind
 * `validateArgs` defaults and `argConstraints`. Internal: not part of
 * `distributions`.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { broadcastShapes, formatShape, sameShape } from "../shape.ts";
import { checkLater } from "../ops/check.ts";
import { defaultDevice } from "../device.ts";
import { arange, cat, tensor } from "../ops/mod.ts";
import { type DType, getDefaultDtype } from "../dtype.ts";
import type { Device } from "../device.ts";
import { noGrad, record } from "../autograd.ts";
import type { Constraint, Distribution, EnumerateSupportOptions, Param } from "./distribution.ts";

/** What `validateArgs` defaults to (see {@link Distribution.setDefaultValidateArgs}). */
let validateByDefault = true;

/** Sets what `validateArgs` defaults to (for {@link Distribution.setDefaultValidateArgs}). */
export function setValidateByDefault(value: boolean): void {
  validateByDefault = value;
}

/** The default of `DistributionOptions.validateArgs`: true unless set otherwise. */
export function defaultValidateArgs(): boolean {
  return validateByDefault;
}

/** The constraints PyTorch names (`constraints.real`, `.positive`, ...). */
export const constraints = {
  /** Any number except NaN (infinities included, as PyTorch). */
  real: {
    name: "real",
    check: (x: Tensor) => x.eq(x),
    holds: (x: number) => !Number.isNaN(x),
  } as Constraint,
  /** `x > 0`. */
  positive: {
    name: "x > 0",
    check: (x: Tensor) => x.gt(0),
    holds: (x: number) => x > 0,
  } as Constraint,
  /** `x >= 0`. */
  nonnegative: {
    name: "x >= 0",
    check: (x: Tensor) => x.ge(0),
    holds: (x: number) => x >= 0,
  } as Constraint,
  /** `0 <= x <= 1`. */
  unitInterval: {
    name: "0 <= x <= 1",
    check: (x: Tensor) => x.ge(0).mul(x.le(1)),
    holds: (x: number) => x >= 0 && x <= 1,
  } as Constraint,
  /** `0 or 1`. */
  boolean: {
    name: "x in {0, 1}",
    check: (x: Tensor) => x.eq(0).add(x.eq(1)),
    holds: (x: number) => x === 0 || x === 1,
  } as Constraint,
} as const;

/**
 * Checks on the device that `mask` (a 0/1 tensor) is all ones; otherwise
 * the next read on the device rejects with `message` given the flat index
 * and value (of `values`, broadcast to the mask's shape) of the first
 * failure. Nothing waits: the check rides the device's queue.
 */
export function checkMaskLater(
  mask: Tensor,
  values: Tensor,
  message: (index: number, value: number) => string,
): void {
  const n = mask.numel();
  if (n === 0) return;
  noGrad(() => {
    const bad = mask.eq(0).reshape([n]);
    // Earlier positions score higher, so the max picks the first failure.
    const positions = arange(n, 0, -1, { dtype: mask.dtype, device: mask.device });
    const score = bad.mul(positions);
    const first = score.max();
    const flat = values.to(mask.dtype).expand([...mask.shape]).reshape([n]);
    const value = flat.where(score.eq(first), 0).sum();
    checkLater(cat([first.reshape([1]), value.reshape([1])], 0), (host) => {
      if (!(host[0] > 0)) return null;
      return message(n - host[0], host[1]);
    });
  });
}

/**
 * Scalars made from number parameters, with their number: as PyTorch's 0-dim
 * cpu tensors join tensors on any device, a distribution whose parameters
 * were all numbers is remade from them where its partner lives (see
 * {@link Distribution.withNumbersOn}).
 */
export const fromNumbers = new WeakMap<Tensor, number>();

/** Where number-only parameters go while {@link Distribution.withNumbersOn} remakes a distribution. */
let numbersDevice: Device | undefined;

/** Sets where number-only parameters go, returning the previous one (for {@link Distribution.withNumbersOn}). */
export function swapNumbersDevice(device: Device | undefined): Device | undefined {
  const before = numbersDevice;
  numbersDevice = device;
  return before;
}

/**
 * A number parameter as a scalar (the default dtype unless told) where number-only parameters go;
 * rounded as `torch.tensor` rounds (1e40 is inf in float32).
 */
export function numberParam(
  value: number,
  dtype: DType = getDefaultDtype(),
  device?: Device,
): Tensor {
  const t = tensor(value, { dtype, device: device ?? numbersDevice ?? defaultDevice() });
  fromNumbers.set(t, value);
  return t;
}

/** The common dtype and device of `params` (the default dtype on the default device for numbers only). */
export function commonOf(
  op: string,
  params: Record<string, Param>,
): { dtype: DType; device: Device } {
  let found: Tensor | undefined;
  let foundName = "";
  for (const [name, p] of Object.entries(params)) {
    if (p instanceof Tensor) {
      if (p.dtype !== "float32" && p.dtype !== "float64") {
        throw new TypeError(
          `${op}: ${name} must be a float tensor or a number, got dtype ${p.dtype}`,
        );
      }
      if (!found) {
        found = p;
        foundName = name;
      } else if (p.dtype !== found.dtype) {
        throw new TypeError(
          `${op}: ${foundName} and ${name} must have the same dtype, got ${found.dtype} and ${p.dtype}`,
        );
      } else if (p.device !== found.device) {
        throw new TypeError(
          `${op}: ${foundName} and ${name} must be on the same device, got ${found.device} and ${p.device}`,
        );
      }
    } else if (typeof p !== "number") {
      throw new TypeError(`${op}: ${name} must be a Tensor or a number, got ${typeof p}`);
    }
  }
  return found
    ? { dtype: found.dtype, device: found.device }
    : { dtype: getDefaultDtype(), device: numbersDevice ?? defaultDevice() };
}

/**
 * `broadcast_all`: the parameters as tensors of one dtype and device,
 * expanded to their common shape.
 */
export function broadcastAll(op: string, params: Record<string, Param>): Tensor[] {
  const { dtype, device } = commonOf(op, params);
  const tensors = Object.values(params).map((p) =>
    p instanceof Tensor ? p : numberParam(p, dtype, device)
  );
  let shape: number[] = [];
  const names = Object.keys(params);
  tensors.forEach((t, i) => {
    try {
      shape = broadcastShapes(shape, t.shape, op);
    } catch {
      throw new RangeError(
        `${op}: the shapes of ${names.slice(0, i + 1).join(", ")} do not broadcast (${
          tensors.slice(0, i + 1).map((u) => formatShape(u.shape)).join(", ")
        })`,
      );
    }
  });
  return tensors.map((t) => sameShape(t.shape, shape) ? t : t.expand(shape));
}

/**
 * Checks `value` of parameter `name` against `constraint`: at once for a
 * number, on the device for a tensor.
 */
export function checkParam(
  op: string,
  name: string,
  raw: Param,
  value: Tensor,
  constraint: Constraint,
): void {
  if (typeof raw === "number") {
    if (!constraint.holds(raw)) {
      throw new RangeError(`${op}: ${name} must satisfy ${constraint.name}, got ${raw}`);
    }
    return;
  }
  checkMaskLater(
    noGrad(() => constraint.check(value)),
    value,
    (i, v) => `${op}: ${name} must satisfy ${constraint.name}, got ${v} at index ${i}`,
  );
}

/** Sums the rightmost `n` dims of `x` (`_sum_rightmost`). */
export function sumRightmost(x: Tensor, n: number): Tensor {
  if (n <= 0) return x;
  const dims = Array.from({ length: n }, (_, i) => -1 - i);
  return x.sum(dims);
}

/**
 * `to` as a target of `expand` from `from`, by `Tensor.expand`'s rule
 * (the dims of `from` align right; each equals its new size or is 1), or
 * a RangeError naming both shapes.
 */
export function checkExpand(op: string, from: readonly number[], to: readonly number[]): number[] {
  if (!Array.isArray(to) || to.some((n) => !Number.isInteger(n) || n < 0)) {
    throw new TypeError(
      `${op}: batchShape must be a list of nonnegative integers, got ${String(to)}`,
    );
  }
  const k = to.length - from.length;
  if (k < 0 || from.some((n, i) => n !== 1 && n !== to[k + i])) {
    throw new RangeError(
      `${op}: the batch shape ${formatShape(from)} cannot be expanded to ${
        formatShape(to)
      } (only size-1 dims grow, and new dims go in front)`,
    );
  }
  return [...to];
}

/**
 * The values `0 .. n-1` shaped for `enumerateSupport`: `[n, 1, ..., 1]`
 * (one 1 per batch dim) or, with `expand`, `[n, ...batchShape]`.
 */
export function enumerateValues(
  n: number,
  batchShape: readonly number[],
  like: { dtype: DType; device: Device },
  options: EnumerateSupportOptions = {},
): Tensor {
  const values = arange(0, n, 1, { dtype: like.dtype, device: like.device })
    .reshape([n, ...batchShape.map(() => 1)]);
  return (options?.expand ?? true) ? values.expand([n, ...batchShape]) : values;
}

/** The float epsilon of `dtype` (`torch.finfo(dtype).eps`). */
export function eps(dtype: DType): number {
  return dtype === "float64" ? 2.220446049250313e-16 : 1.1920928955078125e-7;
}

/** The most negative finite number of `dtype` (`torch.finfo(dtype).min`). */
export function finfoMin(dtype: DType): number {
  return dtype === "float64" ? -Number.MAX_VALUE : -3.4028234663852886e38;
}

/** `clamp_probs`: probabilities kept in [eps, 1 - eps]. */
export function clampProbs(p: Tensor): Tensor {
  const e = eps(p.dtype);
  return p.clamp(e, 1 - e);
}

/**
 * `softplus(x) = log(1 + eˣ)`, without overflow; the gradient is
 * `sigmoid(x)` everywhere (the composition's kink at 0 would give 1 there).
 */
export function softplus(x: Tensor): Tensor {
  const out = noGrad(() => x.abs().neg().exp().log1p().add(x.clamp(0)));
  return record("softplus", [x], out, ([g]) => [x.sigmoid().mul(g!)]);
}

/** The `argConstraints` of each family, by class (filled by `arg_constraints.ts`). */
export const argConstraintTable = new Map<
  abstract new (...args: never[]) => Distribution,
  (d: Distribution) => Record<string, Constraint>
>();

/** Registers the `argConstraints` of the instances of `Kind` (and its subclasses, unless they register their own). */
export function registerArgConstraints<D extends Distribution>(
  Kind: abstract new (...args: never[]) => D,
  fn: (d: D) => Record<string, Constraint>,
): void {
  argConstraintTable.set(Kind, fn as (d: Distribution) => Record<string, Constraint>);
}

/** A shape as `[2, 3]`, for messages and reprs. */
export function shapeText(shape: readonly number[]): string {
  return formatShape(shape);
}

/**
 * `icdf`'s argument must be a probability (PyTorch checks it against the unit interval;
 * where PyTorch 1.13 does not, a value outside is an error here rather than a silently
 * wrong number).
 */
export function checkProbArg(d: Distribution, op: string, value: Tensor, like: Tensor): void {
  if (value?.device !== like.device) {
    throw new TypeError(`${d.name}.${op}: value must be a Tensor on ${like.device}`);
  }
  if (!d.validateArgs) return;
  checkParam(`${d.name}.${op}`, "value", value, value, constraints.unitInterval);
}

/** A parameter tensor of `d` or of the distributions it wraps (for dtype and device). */
export function anyParam(d: Distribution): Tensor {
  const own = Object.values(d["params"]())[0];
  if (own) return own;
  const base = (d as { baseDist?: Distribution }).baseDist;
  return base ? anyParam(base) : d.mean;
}

export type Ctor<T> = abstract new (...args: never[]) => T;
