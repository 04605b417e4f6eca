/**
 * Normal, Uniform, Exponential and Laplace, as `torch.distributions`: each
 * reparameterizable (`rsample` draws from the library's seeded generators
 * and moves them by the parameters).
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad, record } from "../autograd.ts";
import { rand, randn } from "../ops/mod.ts";
import "../ops_composite/mod.ts";
import { forwardScope } from "../storage.ts";
import {
  broadcastAll,
  checkMaskLater,
  checkParam,
  type Constraint,
  constraints,
  Distribution,
  type DistributionOptions,
  eps,
  type Param,
} from "./distribution.ts";

const LOG_SQRT_2PI = 0.5 * Math.log(2 * Math.PI);

/** Giles' double-precision polynomials of `erfinv` (branches w < 6.25, w < 16, else). */
const GILES_64: [number, number[]][] = [
  [3.125, [
    -3.6444120640178196996e-21,
    -1.685059138182016589e-19,
    1.2858480715256400167e-18,
    1.115787767802518096e-17,
    -1.333171662854620906e-16,
    2.0972767875968561637e-17,
    6.6376381343583238325e-15,
    -4.0545662729752068639e-14,
    -8.1519341976054721522e-14,
    2.6335093153082322977e-12,
    -1.2975133253453532498e-11,
    -5.4154120542946279317e-11,
    1.051212273321532285e-09,
    -4.1126339803469836976e-09,
    -2.9070369957882005086e-08,
    4.2347877827932403518e-07,
    -1.3654692000834678645e-06,
    -1.3882523362786468719e-05,
    0.0001867342080340571352,
    -0.00074070253416626697512,
    -0.0060336708714301490533,
    0.24015818242558961693,
    1.6536545626831027356,
  ]],
  [3.25, [
    2.2137376921775787049e-09,
    9.0756561938885390979e-08,
    -2.7517406297064545428e-07,
    1.8239629214389227755e-08,
    1.5027403968909827627e-06,
    -4.013867526981545969e-06,
    2.9234449089955446044e-06,
    1.2475304481671778723e-05,
    -4.7318229009055733981e-05,
    6.8284851459573175448e-05,
    2.4031110387097893999e-05,
    -0.0003550375203628474796,
    0.00095328937973738049703,
    -0.0016882755560235047313,
    0.0024914420961078508066,
    -0.0037512085075692412107,
    0.005370914553590063617,
    1.0052589676941592334,
    3.0838856104922207635,
  ]],
  [5, [
    -2.7109920616438573243e-11,
    -2.5556418169965252055e-10,
    1.5076572693500548083e-09,
    -3.7894654401267369937e-09,
    7.6157012080783393804e-09,
    -1.4960026627149240478e-08,
    2.9147953450901080826e-08,
    -6.7711997758452339498e-08,
    2.2900482228026654717e-07,
    -9.9298272942317002539e-07,
    4.5260625972231537039e-06,
    -1.9681778105531670567e-05,
    7.5995277030017761139e-05,
    -0.00021503011930044477347,
    -0.00013871931833623122026,
    1.0103004648645343977,
    4.8499064014085844221,
  ]],
];

/** Horner's rule over `coefficients` (highest power first). */
function horner(t: Tensor, coefficients: number[]): Tensor {
  let p = t.mul(0).add(coefficients[0]);
  for (const c of coefficients.slice(1)) p = p.mul(t).add(c);
  return p;
}

/**
 * `erfinv(y)`: float64 by Giles' double-precision approximation (Newton
 * steps on `erf` cannot resolve the tails, where erf rounds to ±1); float32
 * by his single-precision one refined by two Newton steps. The gradient is
 * `√π/2·e^{x²}`.
 */
export function erfinv(y: Tensor): Tensor {
  const out = noGrad(() =>
    forwardScope(() => {
      const one = 1 - eps(y.dtype);
      const yc = y.clamp(-one, one);
      const w0 = yc.neg().add(1).mul(yc.add(1)).log().neg();
      let w = w0;
      const small = w.lt(5);
      const ws = w.sub(2.5);
      let p = ws.mul(0).add(2.81022636e-08);
      for (
        const c of [
          3.43273939e-07,
          -3.5233877e-06,
          -4.39150654e-06,
          0.00021858087,
          -0.00125372503,
          -0.00417768164,
          0.246640727,
          1.50140941,
        ]
      ) p = p.mul(ws).add(c);
      const wl = w.clamp(5).sqrt().sub(3);
      let q = wl.mul(0).add(-0.000200214257);
      for (
        const c of [
          0.000100950558,
          0.00134934322,
          -0.00367342844,
          0.00573950773,
          -0.0076224613,
          0.00943887047,
          1.00167406,
          2.83297682,
        ]
      ) q = q.mul(wl).add(c);
      w = p.where(small, q);
      if (y.dtype === "float64") {
        const [a, b, c] = GILES_64.map(([shift, cs], i) =>
          horner(i === 0 ? w0.sub(shift) : w0.sqrt().sub(shift), cs)
        );
        w = a.where(w0.lt(6.25), b.where(w0.lt(16), c));
      }
      let x = w.mul(yc);
      for (let i = 0; i < (y.dtype === "float64" ? 0 : 2); i++) {
        const slope = x.square().neg().exp().mul(2 / Math.sqrt(Math.PI));
        x = x.sub(x.erf().sub(yc).div(slope));
      }
      const edge = y.abs().eq(1);
      return x.where(edge.eq(0), y.mul(Infinity)).where(y.abs().le(1), NaN);
    })
  );
  return record("erfinv", [y], out, ([g]) => [
    out.square().exp().mul(Math.sqrt(Math.PI) / 2).mul(g!),
  ]);
}

/**
 * The normal distribution N(loc, scale²), as `torch.distributions.Normal`.
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const d = new distributions.Normal(tensor([0, 1]), 2);
 * const lp = d.logProb(tensor([0.5, 0.5]));
 * ```
 */
export class Normal extends Distribution {
  /** The mean. */
  readonly loc: Tensor;
  /** The standard deviation. */
  readonly scale: Tensor;

  /** `loc` and `scale` broadcast together; `scale` must be positive. */
  constructor(loc: Param, scale: Param, options: DistributionOptions = {}) {
    const [l, s] = broadcastAll("Normal", { loc, scale });
    super(l.shape, [], options.validateArgs ?? true);
    this.loc = l;
    this.scale = s;
    if (this.validateArgs) {
      checkParam("Normal", "loc", loc, l, constraints.real);
      checkParam("Normal", "scale", scale, s, constraints.positive);
    }
  }

  /** The real line. */
  get support(): Constraint {
    return constraints.real;
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** `loc`. */
  get mean(): Tensor {
    return this.loc;
  }
  /** `scale`. */
  override get stddev(): Tensor {
    return this.scale;
  }
  /** `scale²`. */
  get variance(): Tensor {
    return this.scale.square();
  }
  /** `loc + scale·ε` with ε standard normal draws. */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const e = randn(shape, { dtype: this.loc.dtype, device: this.loc.device });
    return this.loc.add(e.mul(this.scale));
  }
  /** `-(x - loc)²/(2 scale²) - log scale - log √(2π)`. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.loc);
    return forwardScope(() =>
      value.sub(this.loc).square().div(this.variance.mul(2)).neg()
        .sub(this.scale.log()).sub(LOG_SQRT_2PI)
    );
  }
  /** `½(1 + erf((x - loc)/(scale√2)))`. */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.validateSample("cdf", value, this.loc);
    return forwardScope(() =>
      value.sub(this.loc).mul(this.scale.reciprocal()).div(Math.SQRT2).erf().add(1).mul(0.5)
    );
  }
  /** `loc + scale·erfinv(2p - 1)·√2`. */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    checkProbArg(this, "icdf", value, this.loc);
    return forwardScope(() =>
      this.loc.add(this.scale.mul(erfinv(value.mul(2).sub(1))).mul(Math.SQRT2))
    );
  }
  /** `½ + ½ log(2π) + log scale`. */
  override entropy(): Tensor {
    return this.scale.log().add(0.5 + LOG_SQRT_2PI);
  }
  /** `loc`, `scale`. */
  protected params(): Record<string, Tensor> {
    return { loc: this.loc, scale: this.scale };
  }
}

/** `icdf`'s argument must be a probability (PyTorch checks it against the unit interval). */
function checkProbArg(d: Distribution, op: string, value: Tensor, like: Tensor): void {
  if (value?.device !== like.device) {
    throw new TypeError(`${d.name}.${op}: value must be a Tensor on ${like.device}`);
  }
  if (!d.validateArgs) return;
  checkParam(`${d.name}.${op}`, "value", value, value, constraints.unitInterval);
}

/**
 * The uniform distribution on [low, high), as `torch.distributions.Uniform`.
 */
export class Uniform extends Distribution {
  /** The lower end (inclusive). */
  readonly low: Tensor;
  /** The upper end (exclusive). */
  readonly high: Tensor;

  /** `low` and `high` broadcast together; `low < high` is required. */
  constructor(low: Param, high: Param, options: DistributionOptions = {}) {
    const [lo, hi] = broadcastAll("Uniform", { low, high });
    super(lo.shape, [], options.validateArgs ?? true);
    this.low = lo;
    this.high = hi;
    if (this.validateArgs) {
      if (typeof low === "number" && typeof high === "number") {
        if (!(low < high)) {
          throw new RangeError(`Uniform: low must be less than high, got low=${low}, high=${high}`);
        }
      } else {
        checkMaskLater(
          noGrad(() => lo.lt(hi)),
          lo,
          (i, v) => `Uniform: low must be less than high, got low=${v} at index ${i}`,
        );
      }
    }
  }

  /** `[low, high]` (closed, as PyTorch's `constraints.interval`). */
  get support(): Constraint {
    return {
      name: "low <= x <= high",
      check: (x) => x.ge(this.low).mul(x.le(this.high)),
      holds: () => true,
    };
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** `(low + high)/2`. */
  get mean(): Tensor {
    return this.high.add(this.low).div(2);
  }
  /** `(high - low)/√12`. */
  override get stddev(): Tensor {
    return this.high.sub(this.low).div(Math.sqrt(12));
  }
  /** `(high - low)²/12`. */
  get variance(): Tensor {
    return this.high.sub(this.low).square().div(12);
  }
  /** `low + u·(high - low)` with u uniform in [0, 1). */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const u = rand(shape, { dtype: this.low.dtype, device: this.low.device });
    return this.low.add(u.mul(this.high.sub(this.low)));
  }
  /** `-log(high - low)` inside [low, high), -inf outside. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.low);
    return forwardScope(() => {
      const inside = noGrad(() => this.low.le(value).mul(this.high.gt(value)));
      return inside.log().sub(this.high.sub(this.low).log());
    });
  }
  /** `(x - low)/(high - low)`, clamped to [0, 1]. */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.validateSample("cdf", value, this.low);
    return forwardScope(() => value.sub(this.low).div(this.high.sub(this.low)).clamp(0, 1));
  }
  /** `low + p·(high - low)`. */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    checkProbArg(this, "icdf", value, this.low);
    return forwardScope(() => value.mul(this.high.sub(this.low)).add(this.low));
  }
  /** `log(high - low)`. */
  override entropy(): Tensor {
    return this.high.sub(this.low).log();
  }
  /** `low`, `high`. */
  protected params(): Record<string, Tensor> {
    return { low: this.low, high: this.high };
  }
}

/** The exponential distribution of `rate`, as `torch.distributions.Exponential`. */
export class Exponential extends Distribution {
  /** The rate (inverse mean). */
  readonly rate: Tensor;

  /** `rate` must be positive. */
  constructor(rate: Param, options: DistributionOptions = {}) {
    const [r] = broadcastAll("Exponential", { rate });
    super(r.shape, [], options.validateArgs ?? true);
    this.rate = r;
    if (this.validateArgs) checkParam("Exponential", "rate", rate, r, constraints.positive);
  }

  /** `x >= 0`. */
  get support(): Constraint {
    return constraints.nonnegative;
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** `1/rate`. */
  get mean(): Tensor {
    return this.rate.reciprocal();
  }
  /** `1/rate`. */
  override get stddev(): Tensor {
    return this.rate.reciprocal();
  }
  /** `1/rate²`. */
  get variance(): Tensor {
    return this.rate.square().reciprocal();
  }
  /** `-log(1 - u)/rate` with u uniform in [0, 1). */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const u = rand(shape, { dtype: this.rate.dtype, device: this.rate.device });
    return u.neg().log1p().neg().div(this.rate);
  }
  /** `log rate - rate·x`. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.rate);
    return forwardScope(() => this.rate.log().sub(this.rate.mul(value)));
  }
  /** `1 - exp(-rate·x)`. */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.validateSample("cdf", value, this.rate);
    return forwardScope(() => this.rate.neg().mul(value).exp().neg().add(1));
  }
  /** `-log(1 - p)/rate`. */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    checkProbArg(this, "icdf", value, this.rate);
    return forwardScope(() => value.neg().log1p().neg().div(this.rate));
  }
  /** `1 - log rate`. */
  override entropy(): Tensor {
    return this.rate.log().neg().add(1);
  }
  /** `rate`. */
  protected params(): Record<string, Tensor> {
    return { rate: this.rate };
  }
}

/** The Laplace distribution, as `torch.distributions.Laplace`. */
export class Laplace extends Distribution {
  /** The mean. */
  readonly loc: Tensor;
  /** The scale (`variance = 2 scale²`). */
  readonly scale: Tensor;

  /** `loc` and `scale` broadcast together; `scale` must be positive. */
  constructor(loc: Param, scale: Param, options: DistributionOptions = {}) {
    const [l, s] = broadcastAll("Laplace", { loc, scale });
    super(l.shape, [], options.validateArgs ?? true);
    this.loc = l;
    this.scale = s;
    if (this.validateArgs) {
      checkParam("Laplace", "loc", loc, l, constraints.real);
      checkParam("Laplace", "scale", scale, s, constraints.positive);
    }
  }

  /** The real line. */
  get support(): Constraint {
    return constraints.real;
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** `loc`. */
  get mean(): Tensor {
    return this.loc;
  }
  /** `√2·scale`. */
  override get stddev(): Tensor {
    return this.scale.mul(Math.SQRT2);
  }
  /** `2 scale²`. */
  get variance(): Tensor {
    return this.scale.square().mul(2);
  }
  /** `loc - scale·sign(u)·log(1 - |u|)` with u uniform in (-1, 1). */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const e = eps(this.loc.dtype);
    const u = rand(shape, { dtype: this.loc.dtype, device: this.loc.device }).mul(2).sub(1)
      .clamp(e - 1);
    return this.loc.sub(this.scale.mul(u.sign()).mul(u.abs().neg().log1p()));
  }
  /** `-log(2 scale) - |x - loc|/scale`. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.loc);
    return forwardScope(() =>
      this.scale.mul(2).log().neg().sub(value.sub(this.loc).abs().div(this.scale))
    );
  }
  /** `½ - ½·sign(x - loc)·expm1(-|x - loc|/scale)`. */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.validateSample("cdf", value, this.loc);
    return forwardScope(() => {
      const d = value.sub(this.loc);
      return d.sign().mul(d.abs().neg().div(this.scale).expm1()).mul(-0.5).add(0.5);
    });
  }
  /** `loc - scale·sign(p - ½)·log1p(-2|p - ½|)`. */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    checkProbArg(this, "icdf", value, this.loc);
    return forwardScope(() => {
      const t = value.sub(0.5);
      return this.loc.sub(this.scale.mul(t.sign()).mul(t.abs().mul(-2).log1p()));
    });
  }
  /** `1 + log(2 scale)`. */
  override entropy(): Tensor {
    return this.scale.mul(2).log().add(1);
  }
  /** `loc`, `scale`. */
  protected params(): Record<string, Tensor> {
    return { loc: this.loc, scale: this.scale };
  }
}
