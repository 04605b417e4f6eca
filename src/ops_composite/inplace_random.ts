/**
 * PyTorch's random in-place fills (`uniform_`, `normal_`, `bernoulli_`,
 * `exponential_`, `cauchy_`, `geometric_`, `logNormal_`, `random_`), drawn
 * from the global seeded generator (`manualSeed` makes them repeat). The
 * draw itself records no graph: like `copy_` of a constant, a recorded fill
 * gives the old values no gradient, and a leaf that requires grad is refused
 * unless inside `noGrad` (as `nn.init` runs), as in PyTorch. The numbers are
 * multigrad's generator's, not PyTorch's: only their distribution matches;
 * given a `Generator` (every fill here), PyTorch 1.13's own cpu values
 * (float64 `exponential_`, `cauchy_`, `logNormal_`: a rare last-bits
 * difference, V8's log/tan/exp against glibc's; see `Generator`).
 * @module
 */

import { noGrad } from "../autograd.ts";
import { isFloat } from "../dtype.ts";
import { cast } from "../ops/elementwise.ts";
import { inPlace } from "../ops/inplace.ts";
import { normal, tensor, uniform } from "../ops/factory.ts";
import { type Generator, generatorArgument } from "../random/generator.ts";
import { expand } from "../ops/view.ts";
import { Tensor } from "../tensor.ts";
import { bernoulli } from "./random.ts";

/** Writes `draw(shape, options)` (a float sample of `t`'s shape) into `t`. */
function fillWith(
  op: string,
  t: Tensor,
  floatOnly: boolean,
  draw: (
    shape: number[],
    options: { dtype: "float32" | "float64"; device: Tensor["device"] },
  ) => Tensor,
): Tensor {
  if (!(t instanceof Tensor)) throw new TypeError(`${op}: expected a Tensor, got ${typeof t}`);
  if (floatOnly && !isFloat(t.dtype)) {
    throw new TypeError(`${op}: needs a floating-point tensor, got ${t.dtype}`);
  }
  const dtype = t.dtype === "float64" ? "float64" : "float32";
  // A sample without history: recorded, the old values get no gradient (as copy_ of a constant).
  const sample = () => noGrad(() => cast(draw([...t.shape], { dtype, device: t.device }), t.dtype));
  return inPlace(op, t, [], sample, false);
}

/** A host sample from `values` (PyTorch's cpu stream) in `shape` and `o`. */
function hostSample(
  values: ArrayLike<number>,
  shape: number[],
  o: { dtype: "float32" | "float64"; device: Tensor["device"] },
): Tensor {
  return tensor(Float64Array.from(values), { ...o, shape });
}

function checkNumber(op: string, name: string, value: number): void {
  if (typeof value !== "number" || Number.isNaN(value)) {
    throw new TypeError(`${op}: ${name} must be a number, got ${String(value)}`);
  }
}

/** Options of {@link uniform_}. */
export interface UniformFillOptions {
  /** Lower bound, included (default 0). */
  from?: number;
  /** Upper bound, excluded (default 1). */
  to?: number;
  /** Draw PyTorch's exact cpu stream from this generator. */
  generator?: Generator;
}

/** Fills `t` with U[from, to) in place (`Tensor.uniform_`; float tensors). */
export function uniform_(t: Tensor, options: UniformFillOptions = {}): Tensor {
  const { from = 0, to = 1 } = options;
  checkNumber("uniform_", "from", from);
  checkNumber("uniform_", "to", to);
  // PyTorch: "from/to is out of bounds" (the draw would be NaN).
  for (const [name, v] of [["from", from], ["to", to]] as const) {
    if (!Number.isFinite(v)) throw new RangeError(`uniform_: ${name} must be finite, got ${v}`);
  }
  if (from > to) {
    throw new RangeError(`uniform_: expects a [from, to) range, but found from=${from} > to=${to}`);
  }
  // As PyTorch: a wider span overflows the dtype, and x * (to - from) + from is inf or NaN.
  const max = t instanceof Tensor && t.dtype === "float32"
    ? 3.4028234663852886e38
    : Number.MAX_VALUE;
  if (to - from > max) {
    throw new RangeError(
      `uniform_: expects to - from <= the ${t.dtype} maximum ${max}, but found to=${to} and from=${from}`,
    );
  }
  const g = generatorArgument("uniform_", options.generator);
  return fillWith(
    "uniform_",
    t,
    true,
    (shape, o) =>
      g
        ? hostSample(g.uniform(t.numel(), o.dtype, from, to), shape, o)
        : uniform(shape, from, to, o),
  );
}

/** Options of {@link normal_} and {@link logNormal_}. */
export interface NormalFillOptions {
  /** Mean (default 0; for `logNormal_`, of the log, default 1). */
  mean?: number;
  /** Standard deviation (default 1; for `logNormal_`, of the log, default 2). */
  std?: number;
  /** Draw PyTorch's exact cpu stream from this generator. */
  generator?: Generator;
}

/** Fills `t` with N(mean, std²) in place (`Tensor.normal_`; float tensors). */
export function normal_(t: Tensor, options: NormalFillOptions = {}): Tensor {
  const { mean = 0, std = 1 } = options;
  checkNumber("normal_", "mean", mean);
  checkNumber("normal_", "std", std);
  if (std < 0) throw new RangeError(`normal_: expects std >= 0, but found std=${std}`);
  const g = generatorArgument("normal_", options.generator);
  return fillWith(
    "normal_",
    t,
    true,
    (shape, o) =>
      g
        ? hostSample(g.normal(t.numel(), o.dtype, mean, std), shape, o)
        : normal(shape, mean, std, o),
  );
}

/** Fills `t` with exp(N(mean, std²)) in place (`Tensor.log_normal_`; float tensors). */
export function logNormal_(t: Tensor, options: NormalFillOptions = {}): Tensor {
  const { mean = 1, std = 2 } = options;
  checkNumber("logNormal_", "mean", mean);
  checkNumber("logNormal_", "std", std);
  if (!(std > 0)) throw new RangeError(`logNormal_: expects std > 0, but found std=${std}`);
  const g = generatorArgument("logNormal_", options.generator);
  return fillWith(
    "logNormal_",
    t,
    true,
    (shape, o) =>
      g
        ? hostSample(g.logNormal(t.numel(), mean, std), shape, o)
        : normal(shape, mean, std, o).exp(),
  );
}

/** `options` given in the place of a number argument (`exponential_(t, { generator })`). */
function splitOptions(
  value: number | RandomFillOptions,
  fallback: number,
  options: RandomFillOptions,
): [number, RandomFillOptions] {
  return typeof value === "object" && value !== null ? [fallback, value] : [value, options];
}

/**
 * 1 with probability `p` (a number, or a float tensor that broadcasts to
 * `t`'s shape), else 0, in place (`Tensor.bernoulli_`; any dtype). With
 * `generator`, PyTorch's cpu values for it: a float64 uniform below `p`
 * for a number, a uniform of `p`'s dtype for a tensor (its kernels without
 * MKL; PyTorch builds with MKL draw the number form otherwise on Intel cpus).
 */
export function bernoulli_(
  t: Tensor,
  p: number | Tensor | RandomFillOptions = 0.5,
  options: RandomFillOptions = {},
): Tensor {
  // The options may come in p's place: bernoulli_(t, { generator }).
  if (typeof p === "object" && p !== null && !(p instanceof Tensor)) [p, options] = [0.5, p];
  const g = generatorArgument("bernoulli_", options.generator);
  const generator = g ?? undefined;
  if (p instanceof Tensor) {
    if (!(t instanceof Tensor)) {
      throw new TypeError(`bernoulli_: expected a Tensor, got ${typeof t}`);
    }
    const probs = p;
    return fillWith(
      "bernoulli_",
      t,
      false,
      (shape) => bernoulli(expand(probs, shape), { generator }),
    );
  }
  checkNumber("bernoulli_", "p", p);
  if (!(p >= 0 && p <= 1)) throw new RangeError(`bernoulli_: expects p in [0, 1], but got p=${p}`);
  const q = p;
  if (g) {
    const u = g.uniform(t.numel(), "float64", 0, 1);
    const values = u.map((x) => (x < q ? 1 : 0));
    return fillWith("bernoulli_", t, false, (shape, o) => hostSample(values, shape, o));
  }
  return fillWith("bernoulli_", t, false, (shape, o) => uniform(shape, 0, 1, o).lt(q));
}

/**
 * Fills `t` with Exp(lambd) draws (density `lambd·e^(-lambd·x)`) in place
 * (float tensors); `exponential_(t, { generator })` or
 * `exponential_(t, lambd, { generator })` draws PyTorch's cpu values.
 */
export function exponential_(
  t: Tensor,
  lambd: number | RandomFillOptions = 1,
  options: RandomFillOptions = {},
): Tensor {
  const [rate, fillOptions] = splitOptions(lambd, 1, options);
  checkNumber("exponential_", "lambd", rate);
  if (rate < 0) throw new RangeError(`exponential_: expects lambd >= 0, but found lambd=${rate}`);
  const g = generatorArgument("exponential_", fillOptions.generator);
  // 1 - u lies in (0, 1], so the log is finite.
  return fillWith(
    "exponential_",
    t,
    true,
    (shape, o) =>
      g
        ? hostSample(g.exponential(t.numel(), rate), shape, o)
        : uniform(shape, 0, 1, o).neg().log1p().neg().div(rate),
  );
}

/**
 * Fills `t` with Cauchy(median, sigma) draws in place (`Tensor.cauchy_`;
 * float tensors); with `{ generator }` last, PyTorch's cpu values.
 */
export function cauchy_(
  t: Tensor,
  median: number | RandomFillOptions = 0,
  sigma: number | RandomFillOptions = 1,
  options: RandomFillOptions = {},
): Tensor {
  const [m, afterMedian] = splitOptions(median, 0, options);
  const [s, fillOptions] = splitOptions(sigma, 1, afterMedian);
  checkNumber("cauchy_", "median", m);
  checkNumber("cauchy_", "sigma", s);
  const g = generatorArgument("cauchy_", fillOptions.generator);
  return fillWith(
    "cauchy_",
    t,
    true,
    (shape, o) =>
      g
        ? hostSample(g.cauchy(t.numel(), m, s), shape, o)
        : uniform(shape, -0.5, 0.5, o).mul(Math.PI).tan().mul(s).add(m),
  );
}

/**
 * Fills `t` with the number of Bernoulli(p) trials up to the first success
 * (1, 2, ...) in place (`Tensor.geometric_`; any dtype); with
 * `{ generator }`, PyTorch's cpu values.
 */
export function geometric_(t: Tensor, p: number, options: RandomFillOptions = {}): Tensor {
  checkNumber("geometric_", "p", p);
  if (!(p > 0 && p < 1)) {
    throw new RangeError(`geometric_: expects p in (0, 1), but got p=${p}`);
  }
  const g = generatorArgument("geometric_", options.generator);
  if (g) {
    if (!(t instanceof Tensor)) {
      throw new TypeError(`geometric_: expected a Tensor, got ${typeof t}`);
    }
    const values = g.geometric(t.numel(), p);
    return fillWith(
      "geometric_",
      t,
      false,
      (shape, o) => tensor(values, { dtype: t.dtype, device: o.device, shape }),
    );
  }
  return fillWith(
    "geometric_",
    t,
    false,
    (shape, o) => uniform(shape, 0, 1, o).neg().log1p().div(Math.log1p(-p)).ceil().clamp(1),
  );
}

/** Options of {@link random_}. */
export interface RandomFillOptions {
  /** Draw PyTorch's exact cpu stream from this generator. */
  generator?: Generator;
}

/**
 * Uniform integers in [0, 2^bits) in `dtype` (int32 up to 31 bits, float64
 * up to 53), built from 24-bit pieces: one float32 draw holds only 24.
 */
function uniformBits(
  shape: number[],
  bits: number,
  o: { device: Tensor["device"] },
  dtype: "int32" | "float64",
): Tensor {
  let v: Tensor | null = null;
  const f32 = { dtype: "float32", device: o.device } as const;
  for (let left = bits; left > 0; left -= 24) {
    const k = Math.min(24, left);
    const piece = cast(uniform(shape, 0, 2 ** k, f32).floor(), dtype);
    v = v ? v.mul(2 ** k).add(piece) : piece;
  }
  return v!;
}

/**
 * Fills `t` with integers drawn uniformly from [from, to) in place
 * (`Tensor.random_`): `random_(t)` draws from [0, 2^mantissa] (2^24 for
 * float32, 2^53 for float64) or [0, 2^31 - 1] for int32, `random_(t, to)`
 * from [0, to). A float32 range wider than 2^24, or an int32 one wider than
 * 2^31, reaches only some of its integers; within them, as PyTorch, a draw
 * of 31 (int32) or 53 (float64) bits is reduced modulo the range.
 */
export function random_(
  t: Tensor,
  fromOrTo?: number | RandomFillOptions,
  to?: number | RandomFillOptions,
  options: RandomFillOptions = {},
): Tensor {
  if (!(t instanceof Tensor)) throw new TypeError(`random_: expected a Tensor, got ${typeof t}`);
  // The options may come right after the bounds given: random_(t, { generator }), random_(t, 10, {...}).
  if (typeof fromOrTo === "object") [fromOrTo, options] = [undefined, fromOrTo];
  if (typeof to === "object") [to, options] = [undefined, to];
  const g = generatorArgument("random_", options.generator);
  let from = 0;
  let end: number;
  if (to !== undefined) [from, end] = [fromOrTo ?? 0, to];
  else if (fromOrTo !== undefined) end = fromOrTo;
  else end = t.dtype === "float32" ? 2 ** 24 + 1 : t.dtype === "float64" ? 2 ** 53 + 1 : 2 ** 31;
  for (const [name, v] of [["from", from], ["to", end]] as const) {
    if (typeof v !== "number" || !Number.isInteger(v)) {
      throw new TypeError(`random_: ${name} must be an integer, got ${String(v)}`);
    }
  }
  if (from >= end) {
    throw new RangeError(
      `random_: expects 'from' to be less than 'to', but got from=${from} >= to=${end}`,
    );
  }
  if (t.dtype === "int32" && (from < -(2 ** 31) || end > 2 ** 31)) {
    throw new RangeError(`random_: [${from}, ${end}) does not fit the int32 tensor`);
  }
  if (g) {
    const n = t.numel();
    // random_() without bounds has its own rule per dtype; bounded, a draw mod the range.
    const values = fromOrTo === undefined
      ? g.unbounded(n, t.dtype)
      : g.integers(n, from, end, t.dtype);
    return fillWith(
      "random_",
      t,
      false,
      (shape, o) => tensor(values, { dtype: t.dtype, device: o.device, shape }),
    );
  }
  // The largest draw, end - 1, as the sample's float dtype holds it without rounding up.
  let last = end - 1;
  while (t.dtype !== "float64" && Math.fround(last) > end - 1) last--;
  const range = end - from;
  const bits = t.dtype === "int32" ? 31 : t.dtype === "float64" ? 53 : 0;
  if (range > 2 ** 24 && range <= 2 ** bits) {
    const dtype = t.dtype === "int32" ? "int32" : "float64";
    return fillWith("random_", t, false, (shape, o) => {
      const v = uniformBits(shape, bits, o, dtype);
      return (range === 2 ** bits ? v : v.remainder(range)).add(from);
    });
  }
  return fillWith(
    "random_",
    t,
    false,
    (shape, o) => uniform(shape, from, end, o).floor().clamp(from, last),
  );
}
