/**
 * Statistics and numerical calculus: `cov`, `corrcoef`, `renorm`, `dist`,
 * `trapezoid` (`trapz`), `cumulativeTrapezoid` and `gradient`, composed
 * from differentiable ops, so every backend runs them and autograd follows.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { getDefaultDtype, isFloat, promoteTypes } from "../dtype.ts";
import { formatShape, normalizeDim } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { zeros } from "../ops/factory.ts";
import { checkLater } from "../ops/check.ts";
import { cat } from "../ops/view.ts";
import { requireFloat } from "../ops/util.ts";
import { norm } from "./reduce.ts";
import { diag } from "./structure.ts";
import { requireTensor } from "./util.ts";

/** Integer tensors compute in the default dtype, as PyTorch's. */
const floating = (x: Tensor): Tensor => isFloat(x.dtype) ? x : x.to(getDefaultDtype());

/** `x` narrowed along `d` to `[start, end)` (negative ends count from the back; clamped, as Python's). */
function slice(x: Tensor, d: number, start: number, end = x.shape[d]): Tensor {
  const n = x.shape[d];
  const clamp = (i: number) => Math.min(n, Math.max(0, i < 0 ? n + i : i));
  const [s, e] = [clamp(start), clamp(end)];
  return x.narrow(d, s, Math.max(0, e - s));
}

/** Options of {@link cov}. */
export interface CovOptions {
  /** Subtracted from the number of observations (default 1, Bessel's correction). */
  correction?: number;
  /** int32 frequency weights, one per observation (non-negative). */
  fweights?: Tensor;
  /** Float importance weights, one per observation (non-negative). */
  aweights?: Tensor;
}

function checkWeights(w: Tensor | undefined, name: string, observations: number, x: Tensor): void {
  if (w === undefined) return;
  requireTensor("cov", w, name);
  if (w.ndim > 1) {
    throw new RangeError(
      `cov(): expected ${name} to have one or fewer dimensions but got ${name} with shape ${
        formatShape(w.shape)
      }`,
    );
  }
  if (w.numel() !== observations) {
    throw new RangeError(
      `cov(): expected ${name} to have the same numel as there are observations in the input but got ${w.numel()} != ${observations}`,
    );
  }
  if (name === "fweights" && isFloat(w.dtype)) {
    throw new TypeError(`cov(): expected fweights to have integral dtype but got ${w.dtype}`);
  }
  if (name === "aweights" && !isFloat(w.dtype)) {
    throw new TypeError(`cov(): expected aweights to have floating point dtype but got ${w.dtype}`);
  }
  if (w.device !== x.device) {
    throw new RangeError(`cov(): ${name} is on ${w.device} but the input on ${x.device}`);
  }
  if (observations > 0) {
    // Negative weights are only known on the device: reported by the next read.
    checkLater(
      noGrad(() => w.lt(0).sum().reshape([1])),
      (host) => host[0] > 0 ? `cov(): ${name} cannot be negative` : null,
    );
  }
}

/**
 * The covariance matrix of the variables in the rows of `x` (observations
 * in the columns; a 1-D `x` is one variable), as `torch.cov`: a 0-d tensor
 * for one variable. `{ correction, fweights, aweights }` as PyTorch; a
 * normalizer at or below zero divides by zero (inf/NaN), as PyTorch's;
 * weights that sum to zero fail at the next read, as PyTorch's error.
 * Integer input gives float32.
 */
export function cov(x: Tensor, options: CovOptions = {}): Tensor {
  requireTensor("cov", x, "input");
  if (x.ndim > 2) {
    throw new RangeError(
      `cov(): expected input to have two or fewer dimensions but got an input with ${x.ndim} dimensions (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  const { correction = 1, fweights, aweights } = options;
  if (typeof correction !== "number" || !Number.isInteger(correction)) {
    throw new TypeError(`cov(): correction must be an integer, got ${correction}`);
  }
  const observations = x.ndim < 2 ? x.numel() : x.shape[1];
  checkWeights(fweights, "fweights", observations, x);
  checkWeights(aweights, "aweights", observations, x);
  if (fweights !== undefined || aweights !== undefined) {
    // A zero total weight (no observations included) is only known on the device.
    const zero = noGrad(() => {
      const f = fweights?.to(aweights?.dtype ?? "float32");
      const w = f === undefined ? aweights! : aweights === undefined ? f : f.mul(aweights);
      return w.sum().eq(0).reshape([1]);
    });
    checkLater(zero, (host) => host[0] ? "cov(): weights sum to zero, can't be normalized" : null);
  }
  return forwardScope(() => {
    const flat = floating(x.ndim < 2 ? x.reshape([1, x.numel()]) : x);
    // float64 aweights promote the result, as PyTorch's.
    const v = aweights === undefined ? flat : flat.to(promoteTypes(flat.dtype, aweights.dtype));
    let w: Tensor | undefined = fweights?.to(v.dtype);
    if (aweights !== undefined) w = w === undefined ? aweights.to(v.dtype) : w.mul(aweights);
    let c: Tensor;
    if (w === undefined) {
      const centred = v.sub(v.mean(1, true));
      const factor = Math.max(observations - correction, 0);
      c = centred.matmul(centred.transpose(0, 1)).div(factor);
    } else {
      const wSum = w.sum();
      const centred = v.sub(v.mul(w).sum(1, true).div(wSum));
      let factor = aweights !== undefined && correction !== 0
        ? wSum.sub(w.mul(aweights.to(v.dtype)).sum().mul(correction).div(wSum))
        : wSum.sub(correction);
      factor = factor.where(noGrad(() => factor.gt(0)), 0);
      c = centred.matmul(centred.mul(w).transpose(0, 1)).div(factor);
    }
    return c.squeeze();
  });
}

/**
 * The Pearson correlation coefficients of the variables in the rows of `x`,
 * as `torch.corrcoef`: `cov(x)` scaled by the standard deviations and
 * clipped to [-1, 1] (a 0-d tensor of 1, or NaN, for one variable).
 */
export function corrcoef(x: Tensor): Tensor {
  requireTensor("corrcoef", x, "input");
  if (x.ndim > 2) {
    throw new RangeError(
      `corrcoef(): expected input to have two or fewer dimensions but got an input with ${x.ndim} dimensions (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  return forwardScope(() => {
    const c = cov(x);
    if (c.ndim === 0) return c.div(c);
    const std = diag(c).sqrt();
    return c.div(std.unsqueeze(1)).div(std.unsqueeze(0)).clamp(-1, 1);
  });
}

/**
 * `x` with each slice along `dim` whose `p`-norm exceeds `maxnorm` scaled
 * to norm `maxnorm` (times `norm / (norm + 1e-7)`, as PyTorch), as
 * `torch.renorm`; the gradient goes through the norms too, as PyTorch's.
 */
export function renorm(x: Tensor, p: number, dim: number, maxnorm: number): Tensor {
  requireTensor("renorm", x, "input");
  requireFloat("renorm", x);
  if (x.ndim < 2) {
    throw new RangeError(
      `renorm: input needs at least 2 dimensions, got ${x.ndim} dimensions (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  if (typeof p !== "number" || !(p > 0)) {
    throw new RangeError(`renorm: non-positive-norm not supported, got p=${p}`);
  }
  if (typeof maxnorm !== "number" || !(maxnorm >= 0)) {
    throw new RangeError(`renorm: expected maxnorm to be >= 0 but got ${maxnorm}`);
  }
  const d = normalizeDim(dim, x.ndim, "renorm");
  return forwardScope(() => {
    const others = x.shape.map((_, i) => i).filter((i) => i !== d);
    const n = norm(x, p, others, true);
    const factor = n.add(1e-7).reciprocal().mul(maxnorm).where(noGrad(() => n.gt(maxnorm)), 1);
    return x.mul(factor);
  });
}

/**
 * The `p`-norm of `a - b` (broadcast), as `torch.dist` (default p 2; 0,
 * ±Infinity and any other number as `norm`).
 */
export function dist(a: Tensor, b: Tensor, p = 2): Tensor {
  requireTensor("dist", a, "input");
  requireTensor("dist", b, "other");
  requireFloat("dist", a);
  requireFloat("dist", b);
  return forwardScope(() => norm(a.sub(b), p));
}

/** Options of {@link trapezoid} and {@link cumulativeTrapezoid}. */
export interface TrapezoidOptions {
  /** The spacing between samples when no `x` is given (default 1). */
  dx?: number;
  /** The dim to integrate along (default -1). */
  dim?: number;
}

/** The sample spacings of `x` along `d` (`[..., n - 1, ...]`), shaped to broadcast with `y`. */
function spacings(op: string, y: Tensor, x: Tensor, d: number): Tensor {
  requireTensor(op, x, "x");
  let xv = floating(x);
  if (x.ndim === 1) {
    if (x.shape[0] !== y.shape[d]) {
      throw new RangeError(
        `${op}: There must be one \`x\` value for each sample point (x has ${x.shape[0]}, y has ${
          y.shape[d]
        } along dim ${d})`,
      );
    }
    xv = xv.reshape(y.shape.map((s, i) => i === d ? s : 1));
  } else if (x.ndim < y.ndim) {
    xv = xv.reshape([...new Array(y.ndim - x.ndim).fill(1), ...x.shape]);
  } else if (x.ndim > y.ndim) {
    throw new RangeError(
      `${op}: x (shape ${formatShape(x.shape)}) has more dims than y (shape ${
        formatShape(y.shape)
      })`,
    );
  }
  return slice(xv, d, 1).sub(slice(xv, d, 0, -1));
}

function trapezoidArgs(
  op: string,
  y: Tensor,
  x: Tensor | TrapezoidOptions | undefined,
  options: TrapezoidOptions,
): [Tensor | undefined, number, number] {
  requireTensor(op, y, "y");
  if (x !== undefined && !(x instanceof Tensor)) [x, options] = [undefined, x];
  const { dx, dim = -1 } = options;
  if (x !== undefined && dx !== undefined) {
    throw new TypeError(`${op}: give either x or dx, not both`);
  }
  if (dx !== undefined && typeof dx !== "number") {
    throw new TypeError(`${op}: dx must be a number, got ${dx}`);
  }
  if (y.ndim === 0) throw new RangeError(`${op}: y must have at least one dim, got a 0-d tensor`);
  return [x, dx ?? 1, normalizeDim(dim, y.ndim, op)];
}

/**
 * The integral of `y` along `dim` by the trapezoidal rule, as
 * `torch.trapezoid`: at sample points `x` (1-D of `y.shape[dim]` values,
 * or broadcastable to `y`) or spaced `dx` apart
 * (`trapezoid(y, { dx, dim })`, default 1 and -1). Integer `y` gives
 * float32; no samples give 0 (in `y`'s dtype, as PyTorch's).
 */
export function trapezoid(
  y: Tensor,
  x?: Tensor | TrapezoidOptions,
  options: TrapezoidOptions = {},
): Tensor {
  const [xs, dx, d] = trapezoidArgs("trapezoid", y, x, options);
  return forwardScope(() => {
    const yf = floating(y);
    if (y.shape[d] === 0) {
      return zeros(y.shape.filter((_, i) => i !== d), { dtype: y.dtype, device: y.device });
    }
    if (xs === undefined) {
      const ends = yf.select(d, 0).add(yf.select(d, -1 + y.shape[d]));
      return yf.sum(d).sub(ends.mul(0.5)).mul(dx);
    }
    const h = spacings("trapezoid", y, xs, d);
    return h.mul(slice(yf, d, 1).add(slice(yf, d, 0, -1))).sum(d).div(2);
  });
}

/** `torch.trapz`: {@link trapezoid} under its older name. */
export function trapz(
  y: Tensor,
  x?: Tensor | TrapezoidOptions,
  options: TrapezoidOptions = {},
): Tensor {
  return trapezoid(y, x, options);
}

/**
 * The running trapezoidal integral of `y` along `dim` (one value fewer
 * than `y` has there), as `torch.cumulative_trapezoid`: at sample points
 * `x` or spaced `dx` apart, as {@link trapezoid}.
 */
export function cumulativeTrapezoid(
  y: Tensor,
  x?: Tensor | TrapezoidOptions,
  options: TrapezoidOptions = {},
): Tensor {
  const [xs, dx, d] = trapezoidArgs("cumulative_trapezoid", y, x, options);
  return forwardScope(() => {
    const yf = floating(y);
    const pairs = slice(yf, d, 1).add(slice(yf, d, 0, -1));
    if (xs === undefined) return pairs.mul(dx / 2).cumsum(d);
    return spacings("cumulative_trapezoid", y, xs, d).mul(pairs).cumsum(d).div(2);
  });
}

/** Options of {@link gradient}. */
export interface GradientOptions {
  /**
   * The spacing of the samples: one number for every dim, one number per
   * dim, or per dim a 1-D tensor of the sample coordinates (default 1).
   */
  spacing?: number | readonly number[] | readonly Tensor[];
  /** The dims to differentiate along (default all). */
  dim?: number | readonly number[];
  /** The accuracy order at the boundaries: 1 (default) or 2. */
  edgeOrder?: 1 | 2;
}

/**
 * The derivative of the samples in `x` along each dim, by second-order
 * central differences inside and one-sided ones of order `edgeOrder` at the
 * ends, as `torch.gradient`: one tensor per dim. Integer input gives
 * float32.
 */
export function gradient(x: Tensor, options: GradientOptions = {}): Tensor[] {
  requireTensor("gradient", x, "input");
  const { spacing = 1, edgeOrder = 1 } = options;
  if (edgeOrder !== 1 && edgeOrder !== 2) {
    throw new RangeError(
      `torch.gradient only supports edge_order=1 and edge_order=2, got ${edgeOrder}`,
    );
  }
  const dims = options.dim === undefined
    ? x.shape.map((_, i) => i)
    : (typeof options.dim === "number" ? [options.dim] : [...options.dim]).map((d) =>
      normalizeDim(d, x.ndim, "gradient")
    );
  if (new Set(dims).size !== dims.length) {
    throw new RangeError(`gradient: dim ${JSON.stringify(options.dim)} repeats a dim`);
  }
  const steps: (number | Tensor)[] = typeof spacing === "number"
    ? dims.map(() => spacing)
    : [...spacing];
  if (steps.length !== dims.length) {
    throw new RangeError(
      `torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim arguments to have the same length, but got a spacing argument of length ${steps.length} and a dim argument of length ${dims.length}`,
    );
  }
  for (const d of dims) {
    if (x.shape[d] < edgeOrder + 1) {
      throw new RangeError(
        `torch.gradient expected each dimension size to be at least edge_order+1 (dim ${d} of shape ${
          formatShape(x.shape)
        } with edge_order ${edgeOrder})`,
      );
    }
  }
  steps.forEach((s, i) => {
    if (s instanceof Tensor) {
      if (s.ndim !== 1 || s.shape[0] !== x.shape[dims[i]]) {
        throw new RangeError(
          `torch.gradient expected each tensor to be on the same device and 1-D of the size of its dim: spacing ${i} has shape ${
            formatShape(s.shape)
          }, dim ${dims[i]} has size ${x.shape[dims[i]]}`,
        );
      }
      if (s.device !== x.device) {
        throw new RangeError(
          `gradient: spacing ${i} is on ${s.device} but the input on ${x.device}`,
        );
      }
    } else if (typeof s !== "number") {
      throw new TypeError(`gradient: spacing must hold numbers or Tensors, got ${typeof s}`);
    }
  });
  return forwardScope(() => {
    const f = floating(x);
    return dims.map((d, i) => {
      const s = steps[i];
      const at = (start: number, end?: number) => slice(f, d, start, end);
      let center: Tensor, first: Tensor, last: Tensor;
      if (typeof s === "number") {
        center = at(2).sub(at(0, -2)).div(s).div(2);
        if (edgeOrder === 1) {
          first = at(1, 2).sub(at(0, 1)).div(s);
          last = at(-1).sub(at(-2, -1)).div(s);
        } else {
          first = at(0, 1).mul(-1.5).add(at(1, 2).mul(2)).sub(at(2, 3).mul(0.5)).div(s);
          last = at(-3, -2).mul(0.5).sub(at(-2, -1).mul(2)).add(at(-1).mul(1.5)).div(s);
        }
      } else {
        const shape = x.shape.map((_, k) => k === d ? -1 : 1);
        // float64 coordinates promote this dim's result, as PyTorch's.
        const dtype = promoteTypes(f.dtype, floating(s).dtype);
        const h = floating(s).to(dtype);
        const promoted = f.to(dtype);
        const at = (start: number, end?: number) => slice(promoted, d, start, end);
        const dx = slice(h, 0, 1).sub(slice(h, 0, 0, -1));
        const [dx1, dx2] = [slice(dx, 0, 0, -1), slice(dx, 0, 1)];
        const sum = dx1.add(dx2);
        const a = dx2.neg().div(dx1.mul(sum)).reshape(shape);
        const b = dx2.sub(dx1).div(dx1.mul(dx2)).reshape(shape);
        const c = dx1.div(dx2.mul(sum)).reshape(shape);
        center = a.mul(at(0, -2)).add(b.mul(at(1, -1))).add(c.mul(at(2)));
        const m = dx.shape[0];
        const [h0, h1] = [dx.select(0, 0), dx.select(0, Math.min(1, m - 1))];
        const [hl, hp] = [dx.select(0, m - 1), dx.select(0, Math.max(0, m - 2))];
        if (edgeOrder === 1) {
          first = at(1, 2).sub(at(0, 1)).div(h0);
          last = at(-1).sub(at(-2, -1)).div(hl);
        } else {
          const s0 = h0.add(h1);
          first = at(0, 1).mul(h0.mul(2).add(h1).neg().div(h0.mul(s0)))
            .add(at(1, 2).mul(s0.div(h0.mul(h1))))
            .add(at(2, 3).mul(h0.neg().div(h1.mul(s0))));
          const sl = hl.add(hp);
          last = at(-3, -2).mul(hl.div(hp.mul(sl)))
            .add(at(-2, -1).mul(sl.neg().div(hl.mul(hp))))
            .add(at(-1).mul(hl.mul(2).add(hp).div(hl.mul(sl))));
        }
      }
      return cat([first, center, last], d);
    });
  });
}
