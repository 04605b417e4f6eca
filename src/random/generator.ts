/**
 * `Generator`: PyTorch's cpu `torch.Generator`, stream for stream. After
 * `new Generator().manualSeed(s)`, `randperm`, `rand`, `randn`, `randint`,
 * `bernoulli`, `multinomial`, the in-place `uniform_`, `normal_`, `random_`,
 * `bernoulli_`, `exponential_`, `geometric_`, `cauchy_`, `logNormal_`,
 * the samplers, `randomSplit`
 * and `DataLoader({ shuffle: true })` given it draw the numbers PyTorch 1.13
 * draws on the cpu from `torch.Generator().manual_seed(s)`. The values are
 * drawn on the host and uploaded, so a webgpu tensor equals the cpu one.
 *
 * Without a generator nothing changes: the global stream (`manualSeed`) is
 * multigrad's splitmix64 counter stream, not PyTorch's global MT19937,
 * because the device kernels draw every element in parallel from a counter,
 * where MT19937 is a serial stream that would have to run on the host.
 * @module
 */

import type { HostRandom } from "../ops/factory.ts";
import { topkOrder } from "./topk_order.ts";

/** PyTorch's default seed of a new `torch.Generator()` (`default_rng_seed_val`). */
const DEFAULT_SEED = 67280421310721n;

/**
 * The state {@link Generator.getState} gives: JSON-friendly (PyTorch's is a
 * 5056-byte ByteTensor in its own layout; this one holds the same things:
 * the seed, the MT19937 words and position and the cached normal samples).
 */
export interface GeneratorState {
  /** Format tag. */
  readonly kind: "mt19937";
  /** The seed, decimal (64-bit unsigned). */
  readonly seed: string;
  /** The 624 MT19937 state words. */
  readonly state: number[];
  /** Words used of the current block (624: twist before the next). */
  readonly index: number;
  /** The second Box-Muller value a serial float64 normal draw keeps, or null. */
  readonly nextDoubleNormal: number | null;
}

function seedBits(op: string, seed: number | bigint): bigint {
  if (typeof seed === "bigint") return BigInt.asUintN(64, seed);
  if (typeof seed !== "number" || !Number.isInteger(seed)) {
    throw new TypeError(
      `${op}: the seed must be an integer (number or bigint), got ${String(seed)}`,
    );
  }
  if (seed < -(2 ** 63) || seed >= 2 ** 64) {
    throw new RangeError(
      `${op}: the seed must be in [-0x8000_0000_0000_0000, 0xffff_ffff_ffff_ffff], got ${seed}`,
    );
  }
  // PyTorch maps a negative seed to its 64-bit two's complement.
  return BigInt.asUintN(64, BigInt(seed));
}

/**
 * MT19937, as PyTorch's `at::mt19937` (seeded with the low 32 bits). Shared
 * with `DistributedSampler`'s `torchRandperm`.
 */
export class MT19937 {
  /** The 624 state words. */
  readonly state: Uint32Array = new Uint32Array(624);
  /** Position in the current block. */
  index = 624;

  /** The stream seeded with `seed`'s low 32 bits. */
  constructor(seed: number | bigint = 5489) {
    this.seed(seed);
  }

  /** Restarts from `seed`'s low 32 bits. */
  seed(seed: number | bigint): void {
    const state = this.state;
    state[0] = Number(BigInt.asUintN(32, BigInt(seed)));
    for (let i = 1; i < 624; i++) {
      const prev = state[i - 1] ^ (state[i - 1] >>> 30);
      // 1812433253 * prev + i, mod 2^32, without losing bits to float rounding.
      state[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
    this.index = 624;
  }

  /** The next 32-bit draw. */
  next(): number {
    const state = this.state;
    if (this.index >= 624) {
      for (let i = 0; i < 624; i++) {
        const y = (state[i] & 0x80000000) | (state[(i + 1) % 624] & 0x7fffffff);
        state[i] = state[(i + 397) % 624] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      }
      this.index = 0;
    }
    let y = state[this.index++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }
}

const TWO_PI_F32 = Math.fround(2 * Math.PI);
const bits = new Float64Array(1);
// The words of `bits` (little-endian, as every engine Deno runs on): BigInt ops cost 3x here.
const bitsWords = new Uint32Array(bits.buffer);

/** `x + y` rounded to odd: a later rounding to fewer bits is then correct (no double rounding). */
function addOdd(x: number, y: number): number {
  const s = x + y;
  const back = s - x;
  const err = (x - (s - back)) + (y - back);
  if (err === 0 || !Number.isFinite(s)) return s;
  bits[0] = s;
  const low = bitsWords[0];
  if ((low & 1) !== 0) return s;
  // Even: step the magnitude towards the error (odd afterwards, so up never carries).
  if ((err > 0) === (s > 0)) bitsWords[0] = low + 1;
  else if (low !== 0) bitsWords[0] = low - 1;
  else [bitsWords[0], bitsWords[1]] = [0xffffffff, bitsWords[1] - 1];
  return bits[0];
}

/** Veltkamp's split of a float64 into two 26-bit halves. */
function split(a: number): [number, number] {
  const t = 134217729 * a;
  const hi = t - (t - a);
  return [hi, a - hi];
}

/**
 * `a * b + c` with one rounding (C's `fma`): PyTorch's AVX2 build fuses
 * `x * (to - from) + from` and `value * std + mean`. Float32 operands
 * multiply exactly in float64; float64 ones use Dekker's product and
 * Boldo–Melquiond's odd rounding.
 */
function fma(a: number, b: number, c: number, f32: boolean): number {
  if (f32) return Math.fround(addOdd(a * b, c));
  const p = a * b;
  if (!Number.isFinite(p) || Math.abs(p) < 2 ** -900 || Math.abs(a) > 2 ** 900) return p + c;
  const [ah, al] = split(a);
  const [bh, bl] = split(b);
  const e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  // a * b + c = p + e + c exactly; sum the two big terms exactly, the rest rounded to odd.
  const s = p + c;
  const back = s - p;
  const t = (p - (s - back)) + (c - back);
  return s + addOdd(t, e);
}

const f32 = Math.fround;
const floatBits = new Float32Array(1);
const floatInt = new Int32Array(floatBits.buffer);
const LOG_P = [
  7.0376836292E-2,
  -1.1514610310E-1,
  1.1676998740E-1,
  -1.2420140846E-1,
  1.4249322787E-1,
  -1.6668057665E-1,
  2.0000714765E-1,
  -2.4999993993E-1,
  3.3333331174E-1,
].map(f32);
const [SQRTHF, LOG_Q1, LOG_Q2] = [0.707106781186547524, -2.12194440e-4, 0.693359375].map(f32);
const [DP1, DP2, DP3] = [-0.78515625, -2.4187564849853515625e-4, -3.77489497744594108e-8].map(f32);
const [SIN_P0, SIN_P1, SIN_P2] = [-1.9515295891E-4, 8.3321608736E-3, -1.6666654611E-1].map(f32);
const [COS_P0, COS_P1, COS_P2] = [2.443315711809948E-5, -1.388731625493765E-3, 4.166664568298827E-2]
  .map(f32);
const FOPI = f32(1.27323954473516);
const fmaf = (a: number, b: number, c: number) => fma(a, b, c, true);

/**
 * `log256_ps` of PyTorch's `avx_mathfun.h` (Cephes' logf after Pommier's
 * sse_mathfun, zlib license) for one float32 `x` > 0, float32 step for
 * step, with the multiply-adds GCC fuses in PyTorch's AVX2 build fused.
 */
function avxLog(x: number): number {
  floatBits[0] = Math.max(x, 1.1754943508222875e-38);
  const exponent = (floatInt[0] >>> 23) - 127;
  floatInt[0] = (floatInt[0] & ~0x7f800000) | 0x3f000000; // the mantissa, in [0.5, 1)
  let m = floatBits[0];
  let e = f32(exponent + 1);
  const low = m < SQRTHF;
  m = f32(f32(m - 1) + (low ? m : 0));
  if (low) e = f32(e - 1);
  const z = f32(m * m);
  let y = LOG_P[0];
  for (let k = 1; k < 9; k++) y = fmaf(y, m, LOG_P[k]);
  y = f32(y * m);
  y = fmaf(y, z, f32(e * LOG_Q1));
  y = fmaf(-z, 0.5, y);
  return fmaf(e, LOG_Q2, f32(m + y));
}

/** `sincos256_ps` of `avx_mathfun.h` (Cephes' sinf/cosf) for one float32, as {@link avxLog}. */
function avxSinCos(theta: number): [number, number] {
  let x = Math.abs(theta);
  const j = (Math.trunc(f32(x * FOPI)) + 1) & ~1;
  x = fmaf(j, DP1, x);
  x = fmaf(j, DP2, x);
  x = fmaf(j, DP3, x);
  const z = f32(x * x);
  let c = fmaf(fmaf(COS_P0, z, COS_P1), z, COS_P2);
  c = f32(c * z);
  c = f32(fmaf(c, z, -f32(z * 0.5)) + 1);
  let s = fmaf(fmaf(SIN_P0, z, SIN_P1), z, SIN_P2);
  s = fmaf(f32(s * z), x, x);
  const [sin, cos] = (j & 2) === 0 ? [s, c] : [c, s];
  const sinNegative = (theta < 0) !== ((j & 4) !== 0);
  return [sinNegative ? -sin : sin, (~(j - 2) & 4) !== 0 ? -cos : cos];
}

/** `floor(log2(x))` of an integer x >= 1 (the bit loop of PyTorch's `update_from`). */
function topBit(x: number): number {
  let n = 0;
  while (x >= 2) [x, n] = [Math.floor(x / 2), n + 1];
  return n;
}

/**
 * PyTorch's `update_from` / `update_to` (DistributionTemplates.h): a bound
 * whose neighbour inside the range rounds outside it in the float dtype
 * (`round`) moves in by one step of that dtype's spacing.
 */
function floatBounds(from: number, to: number, round: (x: number) => number): [number, number] {
  const digits = round === Math.fround ? 24 : 53;
  const fromPlus1 = Math.trunc(round(from + 1));
  if (fromPlus1 < from) from = fromPlus1 + 2 ** (topBit(Math.abs(from + 1)) - digits + 1);
  const toMinus1 = Math.trunc(round(to - 1));
  if (toMinus1 >= to) to = toMinus1 - 2 ** (topBit(Math.abs(to - 1)) - digits + 1);
  return [from, to];
}

/**
 * A random number generator with PyTorch's cpu streams (`torch.Generator()`,
 * MT19937): pass it as the `generator` option of `rand`, `randn`,
 * `randint`, `randperm`, `bernoulli`, `multinomial`, every in-place
 * random fill, the samplers, `randomSplit`
 * and `DataLoader` to draw exactly what PyTorch 1.13 draws on the cpu.
 *
 * Deliberate differences: `initialSeed()` and `seed()` return numbers, exact
 * up to 2^53 (pass a bigint to `manualSeed` for wider seeds); the state is
 * a JSON object ({@link GeneratorState}), not PyTorch's 5056-byte tensor.
 * Every draw is bit-identical to PyTorch's x86-64 AVX2 kernels (what 1.13
 * ran on the AVX-512 machine the fixtures were made on; its float32
 * `normal_fill` uses avx_mathfun's log/sincos, ported here) but one:
 * float64 normals drawn 16 or more at a time can differ in the last ulp,
 * where glibc's log or cos (which PyTorch calls) is off by an ulp and
 * V8's is correctly rounded (6 of 18,128 values in the tests, checked
 * against 200-bit arithmetic). Likewise float64 `exponential_`,
 * `cauchy_` and `logNormal_` go through libm's log, tan and exp: 11 of
 * 8,154 float64 values in the tests differ from glibc's by 1 to 3 ulp
 * (float32 and `geometric_` are exact). PyTorch builds without AVX2 (ARM, or
 * `ATEN_CPU_CAPABILITY=default`) compute float32 `normal_fill` with the
 * scalar libm functions, so their float32 `randn` of 16 or more values
 * can differ from these in the last bits.
 *
 * Without a generator the factories keep multigrad's global stream
 * (`manualSeed`), which is not PyTorch's global MT19937: device kernels
 * draw every element in parallel from a counter (splitmix64), where
 * MT19937 is serial and would have to run on the host.
 *
 * The name shadows JavaScript's `Generator` type where it is imported;
 * `import { Generator as TorchGenerator }` avoids that.
 *
 * @example
 * ```ts
 * const g = new Generator().manualSeed(0);
 * const order = randperm(10, { generator: g }); // torch.randperm(10, generator=g)
 * ```
 */
export class Generator implements HostRandom {
  #mt = new MT19937(Number(DEFAULT_SEED & 0xffffffffn));
  #seed = DEFAULT_SEED;
  #nextDouble: number | null = null;

  /** A generator seeded with PyTorch's default seed, 67280421310721. */
  constructor() {}

  /** Restarts the stream from `seed` (`Generator.manual_seed`); returns this generator. */
  manualSeed(seed: number | bigint): this {
    this.#seed = seedBits("Generator.manualSeed", seed);
    this.#mt.seed(this.#seed);
    this.#nextDouble = null;
    return this;
  }

  /** Seeds from a non-deterministic source (below 2^53) and returns the seed (`Generator.seed`). */
  seed(): number {
    const words = crypto.getRandomValues(new Uint32Array(2));
    const seed = (words[0] & 0x1fffff) * 2 ** 32 + words[1];
    this.manualSeed(seed);
    return seed;
  }

  /** The seed of the last `manualSeed` / `seed` (`Generator.initial_seed`; exact up to 2^53). */
  initialSeed(): number {
    return Number(this.#seed);
  }

  /** The whole state (`Generator.get_state`), to restore with {@link setState}. */
  getState(): GeneratorState {
    return {
      kind: "mt19937",
      seed: this.#seed.toString(),
      state: Array.from(this.#mt.state),
      index: this.#mt.index,
      nextDoubleNormal: this.#nextDouble,
    };
  }

  /** Restores a state {@link getState} gave (`Generator.set_state`); returns this generator. */
  setState(state: GeneratorState): this {
    const ok = state !== null && typeof state === "object" && state.kind === "mt19937" &&
      typeof state.seed === "string" && /^[0-9]+$/.test(state.seed) &&
      Array.isArray(state.state) && state.state.length === 624 &&
      state.state.every((w) => Number.isInteger(w) && w >= 0 && w < 2 ** 32) &&
      Number.isInteger(state.index) && state.index >= 0 && state.index <= 624 &&
      (state.nextDoubleNormal === null || typeof state.nextDoubleNormal === "number");
    if (!ok) {
      throw new TypeError(
        "Generator.setState: expected a state from Generator.getState() (kind 'mt19937', 624 state words, an index in [0, 624])",
      );
    }
    this.#seed = BigInt.asUintN(64, BigInt(state.seed));
    this.#mt.state.set(state.state);
    this.#mt.index = state.index;
    this.#nextDouble = state.nextDoubleNormal;
    return this;
  }

  /** The next 32-bit draw (`CPUGeneratorImpl::random`). */
  random(): number {
    return this.#mt.next();
  }

  /** The next 64-bit draw (`random64`: the first 32-bit draw is the high half). */
  random64(): bigint {
    const hi = this.#mt.next();
    return (BigInt(hi) << 32n) | BigInt(this.#mt.next());
  }

  /** A float64 in [0, 1) from the low 53 bits of a 64-bit draw. */
  #double(): number {
    const hi = this.#mt.next();
    const lo = this.#mt.next();
    return ((hi & 0x1fffff) * 2 ** 32 + lo) / 2 ** 53;
  }

  /** A float32 in [0, 1) from the low 24 bits of a 32-bit draw. */
  #float(): number {
    return (this.#mt.next() & 0xffffff) / 2 ** 24;
  }

  /** One serial normal draw (`at::normal_distribution<double>`, which keeps the second value). */
  #serialNormal(mean: number, std: number): number {
    if (this.#nextDouble !== null) {
      const cached = this.#nextDouble;
      this.#nextDouble = null;
      return fma(cached, std, mean, false);
    }
    const u1 = this.#double();
    const u2 = this.#double();
    const r = Math.sqrt(-2 * Math.log(1 - u2));
    const theta = 2 * Math.PI * u1;
    this.#nextDouble = r * Math.sin(theta);
    return fma(r * Math.cos(theta), std, mean, false);
  }

  /** `numel` uniform numbers in [a, b) (`uniform_`), as PyTorch's cpu kernel draws them. */
  uniform(
    numel: number,
    dtype: "float32" | "float64",
    a: number,
    b: number,
  ): Float32Array | Float64Array {
    if (dtype === "float64") {
      const out = new Float64Array(numel);
      for (let i = 0; i < numel; i++) out[i] = fma(this.#double(), b - a, a, false);
      return out;
    }
    const out = new Float32Array(numel);
    const from = Math.fround(a);
    const span = Math.fround(Math.fround(b) - from);
    for (let i = 0; i < numel; i++) out[i] = fma(this.#float(), span, from, true);
    return out;
  }

  /**
   * `numel` normal numbers (`normal_` of a contiguous tensor): 16 or more in
   * PyTorch's `normal_fill` (uniforms first, then Box-Muller over blocks of
   * 16, the tail block redrawn), fewer one by one.
   */
  normal(
    numel: number,
    dtype: "float32" | "float64",
    mean: number,
    std: number,
  ): Float32Array | Float64Array {
    const single = dtype === "float32";
    const out = single ? new Float32Array(numel) : new Float64Array(numel);
    if (numel < 16) {
      for (let i = 0; i < numel; i++) out[i] = this.#serialNormal(mean, std);
      return out;
    }
    const m = single ? f32(mean) : mean;
    const s = single ? f32(std) : std;
    const draw = () => (single ? this.#float() : this.#double());
    const block = (at: number) => {
      for (let j = 0; j < 8; j++) {
        const u1 = 1 - out[at + j];
        const u2 = out[at + j + 8];
        if (single) {
          // normal_fill_16_AVX2: avx_mathfun's log and sincos, then fused multiply-adds.
          const radius = f32(Math.sqrt(f32(-2 * avxLog(u1))));
          const [sin, cos] = avxSinCos(f32(TWO_PI_F32 * u2));
          const n1 = f32(radius * cos);
          const n2 = f32(radius * sin);
          // AVX2's fused multiply-add: one rounding.
          out[at + j] = fma(n1, s, m, true);
          out[at + j + 8] = fma(n2, s, m, true);
        } else {
          const radius = Math.sqrt(-2 * Math.log(u1));
          const theta = 2 * Math.PI * u2;
          out[at + j] = fma(radius * Math.cos(theta), s, m, false);
          out[at + j + 8] = fma(radius * Math.sin(theta), s, m, false);
        }
      }
    };
    for (let i = 0; i < numel; i++) out[i] = draw();
    for (let i = 0; i + 16 <= numel; i += 16) block(i);
    if (numel % 16 !== 0) {
      for (let i = numel - 16; i < numel; i++) out[i] = draw();
      block(numel - 16);
    }
    return out;
  }

  /** {@link HostRandom}: `rand`/`randn`-style values for the core factories. */
  fill(
    kind: "uniform" | "normal",
    numel: number,
    dtype: "float32" | "float64",
    a: number,
    b: number,
  ): Float32Array | Float64Array {
    return kind === "uniform" ? this.uniform(numel, dtype, a, b) : this.normal(numel, dtype, a, b);
  }

  /**
   * `numel` integers in [from, to) as `random_(from, to)` / `randint` of
   * `dtype` draw them: a 32-bit draw mod the range, a 64-bit one for ranges
   * of 2^32 or more where PyTorch's dtype takes that path (int64, float32,
   * float64). For a float dtype PyTorch first pulls in a bound that the
   * dtype rounds past (`update_from` / `update_to`: float32 `to - 1` above
   * 2^24), which changes the range and so every value.
   */
  integers(
    numel: number,
    from: number,
    to: number,
    dtype: "int32" | "int64" | "float32" | "float64",
  ): Float64Array {
    if (dtype === "float32" || dtype === "float64") {
      [from, to] = floatBounds(from, to, dtype === "float32" ? Math.fround : (x) => x);
      if (!(from < to)) {
        throw new RangeError(
          `random_: expects 'from' casted to ${dtype} to be less than 'to' casted to ${dtype}, but got from=${from} >= to=${to}`,
        );
      }
    }
    const range = to - from;
    const out = new Float64Array(numel);
    if (dtype !== "int32" && range >= 2 ** 32) {
      const r = BigInt(range);
      for (let i = 0; i < numel; i++) out[i] = Number(this.random64() % r) + from;
      return out;
    }
    for (let i = 0; i < numel; i++) out[i] = (this.#mt.next() % range) + from;
    return out;
  }

  /**
   * `numel` draws of `random_()` without bounds: [0, 2^24] for float32,
   * [0, 2^53] for float64 (64-bit draws), [0, 2^31) for int32.
   */
  unbounded(numel: number, dtype: "float32" | "float64" | "int32"): Float64Array {
    const out = new Float64Array(numel);
    for (let i = 0; i < numel; i++) {
      if (dtype === "float64") out[i] = Number(this.random64() % (2n ** 53n + 1n));
      else if (dtype === "float32") out[i] = this.#mt.next() % (2 ** 24 + 1);
      else out[i] = this.#mt.next() % 2 ** 31;
    }
    return out;
  }

  /** `torch.randperm(n, generator=g)` (1.13's cpu rule: swap i with i + draw mod (n - i)). */
  permutation(n: number): Int32Array {
    const order = new Int32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    for (let i = 0; i < n - 1; i++) {
      const z = i + this.#mt.next() % (n - i);
      const saved = order[i];
      order[i] = order[z];
      order[z] = saved;
    }
    return order;
  }

  /**
   * `numel` draws of `exponential_(lambd)` (any float dtype: PyTorch's cpu
   * kernel draws in float64, `-1 / lambd * log(1 - u)`, then casts).
   */
  exponential(numel: number, lambd: number): Float64Array {
    const out = new Float64Array(numel);
    const scale = -1 / lambd;
    for (let i = 0; i < numel; i++) out[i] = scale * Math.log(1 - this.#double());
    return out;
  }

  /** `numel` draws of `geometric_(p)`: `ceil(log(u) / log(1 - p))` in float64. */
  geometric(numel: number, p: number): Float64Array {
    const out = new Float64Array(numel);
    for (let i = 0; i < numel; i++) out[i] = Math.ceil(Math.log(this.#double()) / Math.log(1 - p));
    return out;
  }

  /** `numel` draws of `cauchy_(median, sigma)`: `median + sigma * tan(pi * (u - 0.5))` in float64. */
  cauchy(numel: number, median: number, sigma: number): Float64Array {
    const out = new Float64Array(numel);
    for (let i = 0; i < numel; i++) {
      out[i] = fma(sigma, Math.tan(Math.PI * (this.#double() - 0.5)), median, false);
    }
    return out;
  }

  /** `numel` draws of `log_normal_(mean, std)`: exp of the serial float64 normal draws. */
  logNormal(numel: number, mean: number, std: number): Float64Array {
    const out = new Float64Array(numel);
    for (let i = 0; i < numel; i++) out[i] = Math.exp(this.#serialNormal(mean, std));
    return out;
  }

  /**
   * `torch.multinomial(probs, count, replacement, generator=g)` of `rows`
   * rows of `probs` (row-major, values of `dtype`), as PyTorch 1.13's cpu
   * kernels: without replacement, `exponential_(1)` of the whole input,
   * `probs / q` in `dtype`, then `argmax` (one sample) or
   * `topk` (ties, the zero weights, in its libstdc++ order: {@link topkOrder});
   * with replacement, each row's running sum in `dtype`,
   * normalized, and a binary search of a float64 uniform per sample. The
   * weights are not checked here.
   */
  multinomial(
    probs: ArrayLike<number>,
    rows: number,
    count: number,
    replacement: boolean,
    dtype: "float32" | "float64",
  ): Int32Array {
    const n = rows === 0 ? 0 : probs.length / rows;
    const round = dtype === "float32" ? Math.fround : (x: number) => x;
    const out = new Int32Array(rows * count);
    if (!replacement) {
      const q = this.exponential(probs.length, 1);
      const keys = new Float64Array(probs.length);
      for (let i = 0; i < keys.length; i++) keys[i] = round(probs[i] / round(q[i]));
      for (let r = 0; r < rows; r++) {
        const row = keys.subarray(r * n, (r + 1) * n);
        if (count === 1) {
          // argmax: the first largest (NaN counts as largest, as PyTorch's).
          let best = 0;
          for (let i = 1; i < n && row[best] === row[best]; i++) {
            if (row[i] > row[best] || row[i] !== row[i]) best = i;
          }
          out[r] = best;
          continue;
        }
        out.set(topkOrder(row, count), r * count);
      }
      return out;
    }
    const cumulative = new Float64Array(n);
    for (let r = 0; r < rows; r++) {
      let sum = 0;
      for (let j = 0; j < n; j++) cumulative[j] = sum = round(sum + probs[r * n + j]);
      for (let j = 0; j < n; j++) cumulative[j] = round(cumulative[j] / sum);
      cumulative[n - 1] = 1;
      for (let k = 0; k < count; k++) {
        const u = this.#double();
        let lo = 0;
        let hi = n;
        while (hi - lo > 0) {
          const mid = lo + ((hi - lo) >> 1);
          if (cumulative[mid] < u) lo = mid + 1;
          else hi = mid;
        }
        out[r * count + k] = lo;
      }
    }
    return out;
  }
}

/**
 * `op`'s `generator` argument: null when absent, else it must be a
 * {@link Generator} (a clear error names the op and what came instead).
 */
export function generatorArgument(op: string, g: unknown): Generator | null {
  if (g === undefined) return null;
  if (!(g instanceof Generator)) {
    throw new TypeError(
      `${op}: generator must be a Generator (new Generator().manualSeed(seed)), got ${typeof g}`,
    );
  }
  return g;
}
