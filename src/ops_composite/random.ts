/**
 * Random sampling beyond `rand` and `randn`: `randint`, `randintLike`,
 * `randperm`, `bernoulli`, `multinomial`, `normal` with tensor arguments and
 * `poisson`. Every draw goes through the seeded device-side uniform kernel
 * (`rand`), so `manualSeed` repeats them and cpu and webgpu give the same
 * numbers for the same seed. PyTorch's generator is a different one: the
 * numbers follow the same distributions, not PyTorch's values, unless a
 * `Generator` is passed (`randint`, `randintLike`, `randperm`, `bernoulli`,
 * `multinomial`, `normal`): then they are PyTorch's cpu values, drawn on
 * the host.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { checkInt32 } from "../dtype.ts";
import { broadcastShapes, formatShape } from "../shape.ts";
import { tidy } from "../storage.ts";
import { seededRandom } from "../util.ts";
import { Tensor } from "../tensor.ts";
import {
  full,
  nextSeed,
  normal as normalShape,
  rand,
  randn,
  type RandomOptions,
  resolveFactory,
  tensor,
  type TensorOptions,
} from "../ops/factory.ts";
import { checkLater } from "../ops/check.ts";
import { commonDevice, requireFloat } from "../ops/util.ts";
import { stack } from "../ops/view.ts";
import { type Generator, generatorArgument } from "../random/generator.ts";
import { searchsorted } from "./index_ops.ts";
import { scopedRounds } from "./util.ts";
import { topk } from "./sort.ts";
import { scan } from "./scan.ts";

function finish(t: Tensor, options: TensorOptions): Tensor {
  if (options.requiresGrad) t.requiresGrad = true;
  return t;
}

function shapeArg(shape: unknown, op: string): number[] {
  if (!Array.isArray(shape) || !shape.every((n) => Number.isInteger(n) && n >= 0)) {
    throw new TypeError(
      `${op}: the shape must be an array of non-negative integers, got ${JSON.stringify(shape)}`,
    );
  }
  return [...shape];
}

/** The widest range [low, high) randint draws from: its size must be an int32. */
const WIDEST = 2 ** 31 - 1;

/**
 * Integers uniform in [0, range) shaped `shape` (int32, no graph). Up to
 * 2^16 one uniform scaled and floored; wider, a coarse and a fine draw
 * (`a·B + b`, B a power of two with at most 2^16 coarse steps), the sum
 * wrapped below `range`, which leaves a bias below B/range ≤ 2^-15 on the
 * lowest values (PyTorch's modulo of a 32-bit draw has one of the same kind).
 * The draws are float32 under any default dtype: webgpu has no float64.
 */
function uniformInts(shape: number[], range: number, device: TensorOptions["device"]): Tensor {
  return noGrad(() =>
    tidy(() => {
      const f32 = { device, dtype: "float32" } as const;
      if (range <= 2 ** 16) {
        return rand(shape, f32).mul(range).floor().minimum(range - 1).to("int32");
      }
      const B = 2 ** Math.max(0, Math.ceil(Math.log2(range)) - 16);
      const m = Math.ceil(range / B);
      const a = rand(shape, f32).mul(m).floor().minimum(m - 1).to("int32");
      const b = rand(shape, f32).mul(B).floor().to("int32");
      // a·B + b - range, grouped so that no step leaves int32; below 0 it is a·B + b itself.
      const s = a.mul(B).sub(range).add(b);
      return s.where(s.ge(0), s.add(range));
    })
  );
}

/** Options of the factories that can draw from a {@link Generator} (`randint`, `randperm`). */
export interface GeneratorOptions extends TensorOptions {
  /** Draw PyTorch's exact cpu stream from this generator (on the host), not the global stream. */
  generator?: Generator;
}

function randintDraw(
  op: string,
  low: number,
  high: number,
  shape: number[],
  options: GeneratorOptions,
): Tensor {
  if (!Number.isInteger(low) || !Number.isInteger(high)) {
    throw new TypeError(`${op}: low and high must be integers, got ${low} and ${high}`);
  }
  if (!(low < high)) {
    throw new RangeError(`${op}: low must be below high, got low ${low} and high ${high}`);
  }
  const { dtype, device } = resolveFactory(options, "int32");
  if (dtype === "int32") {
    checkInt32(low, op);
    checkInt32(high - 1, op);
  }
  const range = high - low;
  const generator = generatorArgument(op, options.generator);
  if (generator) {
    // torch.randint is random_(low, high): a draw mod the range (64-bit for 2^32 or more).
    const n = shape.reduce((a, b) => a * b, 1);
    const values = generator.integers(n, low, high, dtype);
    return finish(tensor(values, { dtype, device, shape }), options);
  }
  if (range > WIDEST) {
    throw new RangeError(
      `${op}: the range [${low}, ${high}) holds ${range} integers, more than the ${WIDEST} randint draws from`,
    );
  }
  const out = noGrad(() =>
    tidy(() => {
      const ints = uniformInts(shape, range, device);
      const shifted = low === 0 ? ints : ints.add(low);
      return dtype === "int32" ? shifted : shifted.to(dtype);
    })
  );
  return finish(out, options);
}

/**
 * Integers uniform in [low, high), as `torch.randint`: `randint(high,
 * shape)` or `randint(low, high, shape)`, options last. int32 unless
 * `dtype` says otherwise (PyTorch: int64). With `generator`, PyTorch's cpu
 * values for it (`random() % range + low`).
 */
export function randint(high: number, shape: number[], options?: GeneratorOptions): Tensor;
/** {@link randint} from `low`. */
export function randint(
  low: number,
  high: number,
  shape: number[],
  options?: GeneratorOptions,
): Tensor;
export function randint(
  a: number,
  b: number | number[],
  c?: number[] | GeneratorOptions,
  d: GeneratorOptions = {},
): Tensor {
  if (Array.isArray(b)) {
    const options = (c ?? {}) as GeneratorOptions;
    return randintDraw("randint", 0, a, shapeArg(b, "randint"), options);
  }
  return randintDraw("randint", a, b, shapeArg(c, "randint"), d);
}

/**
 * Integers uniform in [low, high) shaped like `x`, with its dtype and device
 * unless `options` says otherwise, as `torch.randint_like`:
 * `randintLike(x, high)` or `randintLike(x, low, high)`.
 */
export function randintLike(x: Tensor, high: number, options?: GeneratorOptions): Tensor;
/** {@link randintLike} from `low`. */
export function randintLike(
  x: Tensor,
  low: number,
  high: number,
  options?: GeneratorOptions,
): Tensor;
export function randintLike(
  x: Tensor,
  a: number,
  b?: number | GeneratorOptions,
  c: GeneratorOptions = {},
): Tensor {
  if (!(x instanceof Tensor)) {
    throw new TypeError(`randintLike: expected a Tensor, got ${typeof x}`);
  }
  const [low, high, options] = typeof b === "number" ? [a, b, c] : [0, a, b ?? {}];
  const like = { dtype: x.dtype, device: x.device, ...options };
  return randintDraw("randintLike", low, high, [...x.shape], like);
}

/**
 * A random permutation of `0..n-1`, as `torch.randperm` (int32 unless
 * `dtype` says otherwise): a Fisher–Yates shuffle on the host, seeded from
 * the global stream (as DataLoader's shuffle), so `manualSeed` repeats it on
 * every device. With `generator`, PyTorch 1.13's cpu permutation for it.
 */
export function randperm(n: number, options: GeneratorOptions = {}): Tensor {
  if (!Number.isInteger(n) || n < 0) {
    throw new RangeError(`randperm: n must be a non-negative integer, got ${n}`);
  }
  if (n > 2 ** 31) throw new RangeError(`randperm: n = ${n} does not fit int32`);
  const { dtype, device } = resolveFactory(options, "int32");
  const generator = generatorArgument("randperm", options.generator);
  if (generator) {
    return finish(tensor(generator.permutation(n), { dtype, device }), options);
  }
  // O(n) here, where sorting n random keys on the device took seconds at n = 1e6.
  const random = seededRandom(nextSeed());
  const order = new Int32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return finish(tensor(order, { dtype, device }), options);
}

/**
 * 1 with probability `probs` (elementwise), else 0, in `probs`' dtype, as
 * `torch.bernoulli`. Probabilities outside [0, 1] (or NaN) are an error,
 * reported by the next read on the device. No gradient. With `generator`,
 * PyTorch's cpu values for it (a uniform of `probs`' dtype below each
 * probability, as its kernel without MKL; PyTorch builds with MKL draw
 * `bernoulli_` of a number otherwise on Intel cpus).
 */
export function bernoulli(probs: Tensor, options: { generator?: Generator } = {}): Tensor {
  if (!(probs instanceof Tensor)) {
    throw new TypeError(`bernoulli: probs must be a Tensor, got ${typeof probs}`);
  }
  requireFloat("bernoulli", probs);
  return noGrad(() => {
    if (probs.numel() > 0) {
      checkLater(
        probs.ge(0).mul(probs.le(1)).eq(0).sum().reshape([1]),
        ([bad]) =>
          bad > 0 ? `bernoulli: probs must be in [0, 1]; ${bad} of them are not (or NaN)` : null,
      );
    }
    const generator = generatorArgument("bernoulli", options.generator) ?? undefined;
    const o = { dtype: probs.dtype, device: probs.device, generator };
    return rand([...probs.shape], o).lt(probs);
  });
}

/** Options of {@link multinomial}. */
export interface MultinomialOptions {
  /** Draw with replacement (default false: every category at most once per row). */
  replacement?: boolean;
  /**
   * Draw PyTorch 1.13's cpu samples from this generator. `probs` must then
   * be readable on the host now (a cpu tensor with nothing queued ahead):
   * PyTorch too refuses a cpu generator for probs on another device.
   */
  generator?: Generator;
}

/** `probs` ([rows, C]) read on the host now, checked as PyTorch's multinomial checks them. */
function hostProbs(probs: Tensor, rows: number): Float64Array | Float32Array {
  const { device } = probs;
  const backend = device.backendDevice;
  if (backend.readSync === undefined || !device.stream.idle) {
    const where = String(device);
    throw new TypeError(
      `multinomial: a Generator draws on the host, so probs must be readable there now (a cpu tensor); got probs on ${where}: pass a cpu copy made from its values (await probs.data())`,
    );
  }
  const copy = noGrad(() => probs.clone());
  try {
    const values = backend.readSync(
      copy.storage.buffer("multinomial"),
      0,
      copy.numel(),
      copy.dtype,
    );
    const host = probs.dtype === "float32" ? Float32Array.from(values) : Float64Array.from(values);
    const C = rows === 0 ? 0 : host.length / rows;
    for (let i = 0; i < host.length; i++) {
      if (!(host[i] >= 0 && host[i] < Infinity)) {
        throw new RangeError(
          `multinomial: probs[${rows > 1 || probs.ndim === 2 ? `${Math.floor(i / C)}, ` : ""}${
            i % C
          }] = ${host[i]}; the probability tensor must not contain inf, nan or an element < 0`,
        );
      }
    }
    for (let r = 0; r < rows; r++) {
      if (host.subarray(r * C, (r + 1) * C).every((v) => v === 0)) {
        throw new RangeError(
          `multinomial: row ${r} of probs sums to 0 (invalid multinomial distribution, sum of probabilities <= 0)`,
        );
      }
    }
    return host;
  } finally {
    copy.dispose();
  }
}

/**
 * `numSamples` category indices per row of `probs` (1-D: one row; 2-D:
 * one per row), each drawn with probability proportional to its weight,
 * as `torch.multinomial` (int32; PyTorch: int64). Without replacement a
 * row's categories come out at most once, drawn in turn from those left
 * (exponential races: the largest `log(1 - u) / p`); zero-weight
 * categories come only after all others, when `numSamples` forces them, as
 * PyTorch. With replacement, a binary search of each uniform in the
 * row's cumulative weights. Negative, infinite or NaN weights and all-zero
 * rows are errors, reported by the next read on the device.
 *
 * With `generator`, PyTorch 1.13's cpu samples, drawn on the host (probs
 * must be a cpu tensor, as PyTorch wants probs on the generator's device;
 * errors then come at once): without replacement, `exponential_(1)`
 * keys and `topk` / `argmax` of `probs / q`; with
 * replacement, a float64 uniform searched in each row's running sum in
 * probs' dtype. Zero-weight categories that `numSamples` forces in (keys
 * that tie at 0) come in the order PyTorch's cpu `topk` (libstdc++'s
 * selection and sort) leaves them.
 */
export function multinomial(
  probs: Tensor,
  numSamples: number,
  options: MultinomialOptions = {},
): Tensor {
  if (!(probs instanceof Tensor)) {
    throw new TypeError(`multinomial: probs must be a Tensor, got ${typeof probs}`);
  }
  requireFloat("multinomial", probs);
  const { replacement = false } = options;
  if (probs.ndim !== 1 && probs.ndim !== 2) {
    throw new RangeError(
      `multinomial: probs must be 1-D or 2-D, got shape ${formatShape(probs.shape)}`,
    );
  }
  const C = probs.shape[probs.ndim - 1];
  const R = probs.ndim === 2 ? probs.shape[0] : 1;
  if (C === 0) {
    throw new RangeError(
      `multinomial: probs has no categories (shape ${formatShape(probs.shape)})`,
    );
  }
  if (!Number.isInteger(numSamples) || numSamples <= 0) {
    throw new RangeError(`multinomial: numSamples must be a positive integer, got ${numSamples}`);
  }
  if (!replacement && numSamples > C) {
    throw new RangeError(
      `multinomial: cannot draw ${numSamples} samples without replacement from ${C} categories`,
    );
  }
  const { device } = probs;
  const generator = generatorArgument("multinomial", options.generator);
  if (generator) {
    if (probs.dtype !== "float32" && probs.dtype !== "float64") {
      throw new TypeError(
        `multinomial: with a Generator probs must be float32 or float64, got ${probs.dtype}`,
      );
    }
    const host = hostProbs(probs, R);
    const picks = generator.multinomial(host, R, numSamples, replacement, probs.dtype);
    const shape = probs.ndim === 1 ? [numSamples] : [R, numSamples];
    return tensor(picks, { dtype: "int32", device, shape });
  }
  const out = noGrad(() =>
    tidy(() => {
      const p = probs.reshape([R, C]);
      if (R > 0) {
        const bad = p.ge(0).mul(p.lt(Infinity)).eq(0).sum();
        const empty = p.sum(1).le(0).sum();
        checkLater(stack([bad, empty]), ([b, e]) =>
          b > 0
            ? `multinomial: probs holds ${b} entries that are negative, infinite or NaN`
            : e > 0
            ? `multinomial: ${e} rows of probs sum to 0 (each row needs a positive weight)`
            : null);
      }
      let picks: Tensor;
      if (!replacement) {
        const u = rand([R, C], { dtype: p.dtype, device });
        const keys = u.neg().log1p().div(p).where(p.gt(0), -Infinity);
        picks = topk(keys, numSamples, 1).indices;
      } else {
        const cdf = scan(p, 1, "add");
        const total = cdf.narrow(1, C - 1, 1);
        const normalized = cdf.div(total);
        const u = rand([R, numSamples], { dtype: p.dtype, device });
        // The count of cumulative weights <= u, by binary search: comparing every uniform with
        // every category held rows × samples × categories numbers (4 GB for 1000 rows of 1000).
        const found = searchsorted(normalized, u, { right: true });
        // Rounding in the running sums must not reach a trailing zero-weight category.
        const positions = tensor(
          Array.from({ length: C }, (_, i) =>
            i),
          {
            dtype: p.dtype,
            device,
          },
        );
        const lastPositive = p.gt(0).mul(positions).max(1, true);
        picks = found.minimum(lastPositive).to("int32");
      }
      return probs.ndim === 1 ? picks.reshape([numSamples]) : picks;
    })
  );
  return out;
}

/**
 * Normal numbers, as `torch.normal`: with tensors (or a number and a
 * tensor), one draw per element of their broadcast shape, with that
 * element's mean and standard deviation, in their dtype; `normal(mean, std,
 * shape)` with two numbers; and multigrad's `normal(shape, mean, std)`.
 * Negative standard deviations are an error (reported by the next read for
 * a tensor). As PyTorch, the gradient to `mean` and `std` is zero (the
 * draw is not reparameterized).
 */
export function normal(shape: number[], mean: number, std: number, options?: RandomOptions): Tensor;
/**
 * {@link normal} with per-element means and standard deviations (broadcast);
 * with `generator`, PyTorch's cpu values (`randn` of it, times std, plus mean).
 */
export function normal(
  mean: Tensor | number,
  std: Tensor | number,
  options?: { generator?: Generator },
): Tensor;
/** {@link normal} with two numbers and a shape: `torch.normal(mean, std, size)`. */
export function normal(
  mean: number,
  std: number,
  shape: number[],
  options?: RandomOptions,
): Tensor;
export function normal(
  a: number[] | Tensor | number,
  b: Tensor | number,
  c?: number | number[] | RandomOptions,
  d: RandomOptions = {},
): Tensor {
  if (Array.isArray(a)) return normalShape(a, b as number, c as number, d);
  if (typeof a === "number" && typeof b === "number") {
    if (!(b >= 0)) throw new RangeError(`normal: std must be >= 0, got ${b}`);
    return normalShape(shapeArg(c, "normal"), a, b, d);
  }
  const mean = a;
  const std = b;
  for (const [name, t] of [["mean", mean], ["std", std]] as const) {
    if (!(t instanceof Tensor) && typeof t !== "number") {
      throw new TypeError(`normal: ${name} must be a Tensor or a number, got ${typeof t}`);
    }
    if (t instanceof Tensor) requireFloat("normal", t);
  }
  const { generator, ...rest } =
    (typeof c === "object" && !Array.isArray(c) ? c : {}) as RandomOptions;
  const extra = typeof c === "object" && !Array.isArray(c)
    ? Object.keys(rest).length > 0
    : c !== undefined;
  if (extra || Object.keys(d).length > 0) {
    throw new TypeError(
      "normal: with tensor arguments the shape, dtype and device are theirs; pass only { generator } after std",
    );
  }
  generatorArgument("normal", generator);

  if (typeof std === "number" && !(std >= 0)) {
    throw new RangeError(`normal: std must be >= 0, got ${std}`);
  }
  const tensors = [mean, std].filter((t): t is Tensor => t instanceof Tensor);
  const device = commonDevice("normal", ...tensors);
  const dtype = tensors[0].dtype;
  for (const t of tensors) {
    if (t.dtype !== dtype) {
      throw new TypeError(`normal: mean is ${tensors[0].dtype} but std is ${t.dtype}`);
    }
  }
  const shape = tensors.length === 2
    ? broadcastShapes(tensors[0].shape, tensors[1].shape, "normal")
    : [...tensors[0].shape];
  const out = noGrad(() => {
    if (std instanceof Tensor && std.numel() > 0) {
      checkLater(
        std.ge(0).eq(0).sum().reshape([1]),
        ([bad]) => bad > 0 ? `normal: std must be >= 0; ${bad} entries are not (or NaN)` : null,
      );
    }
    // PyTorch: normal_(0, std) for a number std (scaled before the cast to float32), then + mean.
    if (generator && typeof std === "number") {
      return normalShape(shape, 0, std, { dtype, device, generator }).add(mean);
    }
    return randn(shape, { dtype, device, generator }).mul(std).add(mean);
  });
  return record(
    "normal",
    tensors,
    out,
    () => tensors.map((t) => full([...t.shape], 0, { dtype: t.dtype, device: t.device })),
  );
}

/** Rates below this are drawn by inversion, the others by PTRS (which needs 10 or more). */
const SMALL = 10;
/** Terms of the inversion's table: P(X ≥ 48) at a rate of 10 is below 1e-12. */
const TERMS = 48;
/** Rounds of PTRS: each accepts at least 89% of the draws, so 12 leave fewer than 1e-11. */
const ROUNDS = 12;

/**
 * `log Γ(m) - (m - 1/2) log m + m` for m ≥ 1 by Stirling's series:
 * `log √(2π) + 1/(12m) - 1/(360m³) + 1/(1260m⁵)` (error below 3e-4 at
 * m = 1, 1e-9 from m = 10).
 */
function stirlingRest(m: Tensor): Tensor {
  const inv = m.reciprocal();
  const inv2 = inv.mul(inv);
  const series = inv.mul(inv2.mul(inv2.mul(1 / 1260).sub(1 / 360)).add(1 / 12));
  return series.add(0.5 * Math.log(2 * Math.PI));
}

/**
 * Poisson counts with the given rates (elementwise), as `torch.poisson`, in
 * the rates' dtype. Rates below 10 by inversion of a 48-term table of the
 * distribution (48 numbers per element in flight); the others by Hörmann's
 * transformed rejection (PTRS, as numpy and PyTorch) run for 12 rounds on
 * every element at once. Negative or NaN rates are an error, reported by
 * the next read on the device. No gradient (PyTorch's is zero).
 */
export function poisson(rates: Tensor): Tensor {
  if (!(rates instanceof Tensor)) {
    throw new TypeError(`poisson: rates must be a Tensor, got ${typeof rates}`);
  }
  requireFloat("poisson", rates);
  const { dtype, device } = rates;
  const shape = [...rates.shape];
  const n = rates.numel();
  if (n === 0) return full(shape, 0, { dtype, device });
  return noGrad(() =>
    tidy(() => {
      const lam = rates.reshape([n]);
      checkLater(
        lam.ge(0).eq(0).sum().reshape([1]),
        ([bad]) => bad > 0 ? `poisson: rates must be >= 0; ${bad} of them are not (or NaN)` : null,
      );
      // Small rates: the first k where the running distribution passes a uniform (its
      // TERMS-wide temporaries freed before the rounds below).
      const inverted = tidy(() => {
        const small = lam.minimum(SMALL).reshape([n, 1]);
        const logFactorials = [0];
        for (let k = 1; k < TERMS; k++) logFactorials.push(logFactorials[k - 1] + Math.log(k));
        const ks = tensor(Array.from({ length: TERMS }, (_, k) => k), { dtype, device });
        const logPmf = ks.mul(small.log().maximum(-1e30)).sub(small)
          .sub(tensor(logFactorials, { dtype, device }));
        const cdf = scan(logPmf.exp(), 1, "add");
        const normalized = cdf.div(cdf.narrow(1, TERMS - 1, 1));
        const u = rand([n, 1], { dtype, device });
        return normalized.le(u).sum(1);
      });
      // Large rates: PTRS, every element each round, keeping its first accepted draw.
      const big = lam.maximum(SMALL);
      const slam = big.sqrt();
      const loglam = big.log();
      const b = slam.mul(2.53).add(0.931);
      const a = b.mul(0.02483).sub(0.059);
      const invAlpha = b.sub(3.4).reciprocal().mul(1.1328).add(1.1239);
      const vr = b.sub(2).reciprocal().mul(-3.6224).add(0.9277);
      const initial: [Tensor, Tensor] = [big.round(), full([n], 1, { dtype, device })];
      const [result] = scopedRounds(ROUNDS, initial, ([result, open]) => {
        const U = rand([n], { dtype, device }).sub(0.5);
        const V = rand([n], { dtype, device });
        const us = U.abs().neg().add(0.5);
        const k = a.mul(2).div(us).add(b).mul(U).add(big).add(0.43).floor();
        const quick = us.ge(0.07).mul(V.le(vr));
        const reject = k.lt(0).maximum(us.lt(0.013).mul(V.gt(us)));
        const k1 = k.maximum(0).add(1);
        // log(V·invAlpha / (a/us² + b)) <= k log λ - λ - log k!, with Stirling's log k! and the
        // terms grouped around d = k + 1 - λ, so that float32 keeps its digits at large rates:
        // d - (k + 1/2) log1p(d/λ) - (log λ)/2 - stirlingRest(k + 1).
        const lhs = V.mul(invAlpha).div(a.div(us.mul(us)).add(b)).log();
        const d = k1.sub(big);
        const logPk = d.sub(k.maximum(0).add(0.5).mul(d.div(big).log1p()))
          .sub(loglam.mul(0.5)).sub(stirlingRest(k1));
        const accept = quick.maximum(reject.eq(0).mul(lhs.le(logPk)));
        const take = accept.mul(open);
        return [k.where(take.gt(0), result), open.mul(take.eq(0))];
      });
      const drawn = inverted.where(lam.lt(SMALL).reshape([n]), result);
      return drawn.where(lam.gt(0), 0).reshape(shape);
    })
  );
}
