/**
 * Argument checks, Python-style reprs, loss reduction, embedding-table
 * set-up and gradient clearing shared by `nn.functional`, the modules and
 * the optimizers (internal: not exported from `nn`).
 * @module
 */

import { noGrad } from "../autograd.ts";
import { isFloat } from "../dtype.ts";
import { checkLater } from "../ops/check.ts";
import { inPlace } from "../ops/inplace.ts";
import { arangeOn } from "../ops/factory.ts";
import { stack } from "../ops/view.ts";
import { formatShape, sameShape } from "../shape.ts";
import { tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import type { DropoutOptions } from "./functional/inplace.ts";
import type { Reduction, ReductionOptions } from "./functional/loss.ts";
import { normal_ } from "./init.ts";

/** Throws unless `t` is a Tensor. */
export function checkTensor(op: string, what: string, t: unknown): asserts t is Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(
      `${op}: ${what} must be a Tensor, got ${t === null ? "null" : typeof t}`,
    );
  }
}

/** Throws unless `x` is a floating-point Tensor. */
export function checkFloatInput(op: string, x: unknown, what = "input"): asserts x is Tensor {
  checkTensor(op, what, x);
  if (!isFloat(x.dtype)) {
    throw new TypeError(
      `${op}: expected a floating-point ${what}, got ${x.dtype} (shape ${
        formatShape(x.shape)
      }); convert with .to("float32")`,
    );
  }
}

/** `value` when it is a finite number (and non-zero with `nonZero`), else an error naming it. */
export function checkFinite(
  op: string,
  name: string,
  value: unknown,
  options: { nonZero?: boolean } = {},
): number {
  if (typeof value !== "number" || !Number.isFinite(value) || (options.nonZero && value === 0)) {
    throw new RangeError(
      `${op}: ${name} must be a finite${options.nonZero ? " non-zero" : ""} number, got ${value}`,
    );
  }
  return value;
}

/** Throws unless `reduction` is one of `allowed` (PyTorch's loss reductions). */
export function checkReduction(
  op: string,
  reduction: unknown,
  allowed: readonly string[] = ["mean", "sum", "none"],
): void {
  if (typeof reduction !== "string" || !allowed.includes(reduction)) {
    throw new RangeError(
      `${op}: reduction must be ${
        allowed.map((r) => `"${r}"`).join(", ").replace(/, ([^,]*)$/, " or $1")
      }, got ${JSON.stringify(reduction)}`,
    );
  }
}

/** `losses` reduced as PyTorch's `reduction`: as they are (`"none"`), summed, or averaged. */
export function reduceLoss(losses: Tensor, reduction: Reduction): Tensor {
  if (reduction === "none") return losses;
  const total = losses.sum();
  // PyTorch divides the sum by the count; a reciprocal multiply rounds differently.
  return reduction === "sum" ? total : total.div(losses.numel());
}

/** A loss's `reduction` option, checked (default `"mean"`). */
export function lossReduction(op: string, options: ReductionOptions): Reduction {
  const reduction = options.reduction ?? "mean";
  checkReduction(op, reduction);
  return reduction;
}

/**
 * Draws an embedding table of `rows` rows from N(0, 1) and zeroes its
 * padding row, as PyTorch's `Embedding.reset_parameters` (EmbeddingBag's too).
 */
export function resetEmbeddingTable(weight: Tensor, rows: number, paddingIdx: number | null): void {
  normal_(weight);
  if (paddingIdx === null) return;
  noGrad(() =>
    tidy(() => {
      const isPadding = arangeOn(rows, weight.device).eq(paddingIdx).reshape([rows, 1]);
      weight._assign(weight.maskedFill(isPadding, 0));
    })
  );
}

/**
 * A table made by `make(num, dim)` holding a copy of `embeddings` [num, dim],
 * frozen unless `freeze` is false: PyTorch's `from_pretrained` of Embedding
 * and EmbeddingBag.
 */
export function fromPretrainedTable<T extends { weight: Tensor }>(
  op: string,
  embeddings: Tensor,
  freeze: boolean | undefined,
  make: (num: number, dim: number) => T,
): T {
  checkFloatInput(op, embeddings, "embeddings");
  if (embeddings.ndim !== 2) {
    throw new RangeError(
      `${op}: embeddings must be 2-dimensional [num, dim], got shape ${
        formatShape(embeddings.shape)
      }`,
    );
  }
  const [num, dim] = embeddings.shape;
  const table = make(num, dim);
  noGrad(() => table.weight._assign(embeddings.detach()));
  table.weight.requiresGrad = !(freeze ?? true);
  return table;
}

/** Throws unless a lookup's indices are int32 and its table `weight` is [num, dim]. */
export function checkLookup(op: string, input: Tensor, weight: Tensor): void {
  if (input.dtype !== "int32") {
    throw new TypeError(
      `${op}: indices must be int32, got ${input.dtype} (shape ${formatShape(input.shape)})`,
    );
  }
  if (weight.ndim !== 2) {
    throw new RangeError(
      `${op}: weight must be 2-dimensional [num, dim], got shape ${formatShape(weight.shape)}`,
    );
  }
}

/** `paddingIdx` as a row index in [0, rows), or null; an error names the table's size. */
export function resolvePaddingIdx(op: string, paddingIdx: unknown, rows: number): number | null {
  if (paddingIdx === undefined || paddingIdx === null) return null;
  if (typeof paddingIdx !== "number" || !Number.isInteger(paddingIdx)) {
    throw new TypeError(`${op}: paddingIdx must be an integer, got ${paddingIdx}`);
  }
  if (paddingIdx < -rows || paddingIdx >= rows) {
    throw new RangeError(
      `${op}: paddingIdx ${paddingIdx} must be within the ${rows} embeddings (-${rows} to ${
        rows - 1
      })`,
    );
  }
  return paddingIdx < 0 ? paddingIdx + rows : paddingIdx;
}

/** `n` when it is a non-negative (or, without `allowZero`, positive) integer; else an error naming `what`. */
export function checkCount(what: string, n: unknown, allowZero = true): number {
  if (typeof n !== "number" || !Number.isInteger(n) || n < (allowZero ? 0 : 1)) {
    throw new RangeError(
      `${what} must be a ${allowZero ? "non-negative" : "positive"} integer, got ${n}`,
    );
  }
  return n;
}

/**
 * Checks that the int32 class indices in `indices` lie in [0, classes) without
 * waiting for them: the next read on their device rejects with an error
 * naming the first bad index found (the smallest below 0, else the largest).
 * `onValid` runs once they were all found in range.
 */
export function checkClassRange(
  op: string,
  indices: Tensor,
  classes: number,
  also = "",
  onValid?: () => void,
): void {
  if (indices.numel() === 0) return;
  const bounds = noGrad(() => tidy(() => stack([indices.min(), indices.max()])));
  checkLater(bounds, ([lowest, highest]) => {
    const bad = lowest < 0 ? lowest : highest >= classes ? highest : null;
    if (bad === null) onValid?.();
    return bad === null
      ? null
      : `${op}: class index ${bad} is out of range for ${classes} classes (0 to ${
        classes - 1
      }${also})`;
  });
}

/** Throws unless every given tensor is on one device, naming each. */
export function sameDevice(op: string, tensors: Record<string, Tensor | null | undefined>): void {
  const present = Object.entries(tensors).filter((e): e is [string, Tensor] => e[1] != null);
  const first = present[0]?.[1].device;
  if (present.every(([, t]) => t.device === first)) return;
  const list = present.map(([name, t]) => `${name} on ${t.device}`).join(", ");
  throw new Error(`${op}: expected all tensors on one device, got ${list}; move them with .to()`);
}

/**
 * Checks a batch-norm call completely before anything changes: an input
 * [N, C, ...] of one of `ranks` (the module's; any rank >= 2 by default),
 * per-channel tensors of shape [C] on the input's device, and more than one
 * value per channel when training.
 */
export function checkBatchNorm(
  x: Tensor,
  channels: Record<string, Tensor | null | undefined>,
  training: boolean,
  expectedC?: number,
  ranks?: { readonly allowed: readonly number[]; readonly describe: string },
): void {
  checkTensor("batchNorm", "input", x);
  if (ranks ? !ranks.allowed.includes(x.ndim) : x.ndim < 2) {
    throw new RangeError(
      `batchNorm: expected ${
        ranks?.describe ?? "an input of at least 2 dims [N, C, ...]"
      }, got shape ${formatShape(x.shape)}`,
    );
  }
  if (!isFloat(x.dtype)) {
    throw new TypeError(`batchNorm: expected a floating-point input, got ${x.dtype}`);
  }
  const c = x.shape[1];
  if (expectedC !== undefined && c !== expectedC) {
    throw new RangeError(
      `batchNorm: input of shape ${
        formatShape(x.shape)
      } has ${c} channels (dim 1), expected ${expectedC}`,
    );
  }
  for (const [name, t] of Object.entries(channels)) {
    if (t != null && !sameShape(t.shape, [c])) {
      throw new RangeError(
        `batchNorm: ${name} of shape ${
          formatShape(t.shape)
        } does not match the ${c} channels of input of shape ${
          formatShape(x.shape)
        } (expected [${c}])`,
      );
    }
  }
  sameDevice("batchNorm", { input: x, ...channels });
  if (training && x.numel() / Math.max(c, 1) <= 1) {
    throw new RangeError(
      `batchNorm: expected more than 1 value per channel when training, got input of shape ${
        formatShape(x.shape)
      }`,
    );
  }
}

/** Python's repr of a float: `1e-05`, `0.1`, `1.0`. */
export function pyFloat(x: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return `${x}.0`;
  const exponent = Math.floor(Math.log10(Math.abs(x)));
  if (exponent < -4 || exponent >= 16) {
    const [mantissa, exp] = x.toExponential().split("e");
    const sign = exp.startsWith("-") ? "-" : "+";
    const digits = exp.replace(/^[-+]/, "").padStart(2, "0");
    return `${mantissa}e${sign}${digits}`;
  }
  return String(x);
}

/** Python's repr of a boolean. */
export function pyBool(b: boolean): string {
  return b ? "True" : "False";
}

/** A size as a Python tuple of `rank` elements: `(2, 2)`, `(3,)`. */
export function pyTuple(v: number | readonly number[], rank: number): string {
  const list = typeof v === "number" ? new Array<number>(rank).fill(v) : [...v];
  return `(${list.join(", ")}${list.length === 1 ? "," : ""})`;
}

/** A size as the user gave it, printed as Python would: `2`, or `(2, 3)` for a pair. */
export function pySize(v: number | readonly number[]): string {
  return typeof v === "number" ? String(v) : pyTuple(v, v.length);
}

/**
 * A pooling layer's `kernel_size=2, stride=2, padding=0` (stride defaulting
 * to the kernel size): each as given, or with `rank` as a tuple of that many.
 */
export function poolWindowRepr(
  kernelSize: number | readonly number[],
  o: { stride?: number | readonly number[] | null; padding?: number | readonly number[] },
  rank?: number,
): string {
  const py = (v: number | readonly number[]) => rank === undefined ? pySize(v) : pyTuple(v, rank);
  return `kernel_size=${py(kernelSize)}, stride=${py(o.stride ?? kernelSize)}, padding=${
    py(o.padding ?? 0)
  }`;
}

/** An adaptive pool's `output_size=(2, None)`, or `output_size=2` for one number. */
export function adaptiveSizeRepr(size: number | readonly (number | null)[]): string {
  return `output_size=${
    typeof size === "number" ? size : `(${size.map((s) => s ?? "None").join(", ")})`
  }`;
}

/**
 * ‖t‖ₚ as `torch.norm(t, p)` (the largest |t| for p = ∞), of all elements,
 * or along `dim` (one norm per slice).
 */
export function pNorm(t: Tensor, p: number, dim?: number): Tensor {
  if (p === Infinity) return t.abs().max(dim);
  if (p === 2) return t.mul(t).sum(dim).sqrt();
  if (p === 1) return t.abs().sum(dim);
  return t.abs().pow(p).sum(dim).pow(1 / p);
}

/** The checked `maxNorm` (null when not set) and `normType`. */
export function checkMaxNorm(
  op: string,
  maxNorm: unknown,
  normType: unknown,
): { maxNorm: number | null; normType: number } {
  if (typeof normType !== "number" || !(normType > 0)) {
    throw new RangeError(`${op}: normType must be a positive number or Infinity, got ${normType}`);
  }
  if (maxNorm === undefined || maxNorm === null) return { maxNorm: null, normType };
  if (typeof maxNorm !== "number" || !(maxNorm >= 0) || !Number.isFinite(maxNorm)) {
    throw new RangeError(`${op}: maxNorm must be a finite non-negative number, got ${maxNorm}`);
  }
  return { maxNorm, normType };
}

/**
 * A dropout function called with PyTorch's keyword form `{ p, training, inplace }`: `dropout`
 * with the plain arguments (`training` defaulting to `trainingDefault`), written back into `x`
 * as `op_` when `inplace`.
 */
export function dropoutWithOptions(
  op: string,
  x: Tensor,
  options: DropoutOptions,
  trainingDefault: boolean,
  dropout: (x: Tensor, p: number, training: boolean) => Tensor,
): Tensor {
  const { p = 0.5, training = trainingDefault, inplace = false } = options;
  return inplace
    ? inPlace(`${op}_`, x, [], (t) => dropout(t, p, training))
    : dropout(x, p, training);
}

/** A dropout's input (a float tensor) and probability `p` (in [0, 1]), checked. */
export function checkDropout(op: string, x: Tensor, p: number): void {
  checkTensor(op, "input", x);
  if (typeof p !== "number" || !(p >= 0 && p <= 1)) {
    throw new RangeError(`${op}: dropout probability has to be between 0 and 1, but got ${p}`);
  }
  if (!isFloat(x.dtype)) {
    throw new TypeError(
      `${op}: expected a floating-point input, got ${x.dtype} (shape ${formatShape(x.shape)})`,
    );
  }
}
