/**
 * Factories: `eye`, and `linspace` with PyTorch 1.13's cpu numbers bit for bit.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { allocHost, checkInt32, getDefaultDtype } from "../dtype.ts";
import type { Tensor } from "../tensor.ts";
import { arangeOn, fromHost, resolveFactory, type TensorOptions } from "../ops/factory.ts";

function count(value: unknown, what: string, op: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw new RangeError(`${op}: ${what} must be a non-negative integer, got ${value}`);
  }
  return value;
}

function finish(t: Tensor, options: TensorOptions): Tensor {
  if (options.requiresGrad) t.requiresGrad = true;
  return t;
}

/**
 * An `n` x `m` matrix (`m` defaults to `n`) with ones on the diagonal, as
 * `torch.eye`: `eye(3)`, `eye(2, 4)`, options after either
 * (`eye(3, { dtype: "int32" })`).
 */
export function eye(n: number, m?: number | TensorOptions, options: TensorOptions = {}): Tensor {
  if (typeof m === "object") [m, options] = [undefined, m];
  const rows = count(n, "n", "eye");
  const cols = m === undefined ? rows : count(m, "m", "eye");
  const { dtype, device } = resolveFactory(options, getDefaultDtype());
  const diagonal = noGrad(() =>
    arangeOn(rows, device).reshape([rows, 1]).eq(arangeOn(cols, device)).to(dtype)
  );
  return finish(diagonal, options);
}

const f32 = new Float32Array(1);
const f32Bits = new Int32Array(f32.buffer);

/** The float32 next to `r` (nonzero) away from or toward zero. */
function neighbour32(r: number, up: boolean): number {
  f32[0] = r;
  f32Bits[0] += (r > 0) === up ? 1 : -1;
  return f32[0];
}

/**
 * `a·b + c` rounded once, to float32 (`single`) or float64: the fused
 * multiply-add PyTorch's x86 build makes of `start + step * i`. float32
 * operands multiply exactly in float64, so only a sum that lands on a
 * midpoint between two float32s needs the rounding error of the sum
 * (TwoSum) to decide; float64 goes through exact integers.
 */
function fma(a: number, b: number, c: number, single: boolean): number {
  if (a === 0 || b === 0 || ![a, b, c].every(Number.isFinite)) {
    return single ? Math.fround(a * b + c) : a * b + c;
  }
  if (single) {
    const p = a * b;
    const s = p + c;
    const back = s - p;
    const err = (p - (s - back)) + (c - back);
    const r = Math.fround(s);
    if (err === 0 || r === s) return r;
    const other = neighbour32(r, s > r);
    if (Math.abs(s - r) !== Math.abs(other - s)) return r;
    return (err > 0) === (other > r) ? other : r;
  }
  const [ma, ea] = exact(a);
  const [mb, eb] = exact(b);
  const [mc, ec] = exact(c);
  const e = Math.min(ea + eb, ec);
  return rounded((ma * mb << BigInt(ea + eb - e)) + (mc << BigInt(ec - e)), e);
}

const f64 = new DataView(new ArrayBuffer(8));

/** `x` (finite, nonzero) as an integer times a power of two. */
function exact(x: number): [bigint, number] {
  f64.setFloat64(0, x);
  const high = f64.getUint32(0);
  const biased = (high >>> 20) & 0x7ff;
  let m = (BigInt(high & 0xfffff) << 32n) | BigInt(f64.getUint32(4));
  if (biased > 0) m |= 1n << 52n;
  return [high >>> 31 ? -m : m, (biased || 1) - 1075];
}

/** `m·2^e` rounded to 53 bits, halves to even (results here are normal numbers). */
function rounded(m: bigint, e: number): number {
  if (m === 0n) return 0;
  const negative = m < 0n;
  let abs = negative ? -m : m;
  const drop = abs.toString(2).length - 53;
  if (drop > 0) {
    const q = abs >> BigInt(drop);
    const rest = abs - (q << BigInt(drop));
    const half = 1n << BigInt(drop - 1);
    abs = rest > half || (rest === half && (q & 1n) === 1n) ? q + 1n : q;
    e += drop;
  }
  const v = Number(abs) * 2 ** Math.ceil(e / 2) * 2 ** Math.floor(e / 2);
  return negative ? -v : v;
}

/**
 * `steps` values from `start` to `end`, evenly spaced, as `torch.linspace`
 * (the default dtype unless told; int32 truncates). The values are PyTorch 1.13's on
 * an x86 cpu (AVX2) bit for bit: step = (end - start) / (steps - 1) in the
 * dtype; the first half `start + step·i` and the second `end - step·(steps
 * - 1 - i)`, each one fused multiply-add, computed that way for every
 * eighth element (fourth in float64) and the tail, the others adding `k·step`
 * (k < 8) to the last one so computed, as PyTorch's vectorized loop does.
 * (With more than 32768 steps PyTorch on several threads starts the groups
 * elsewhere; these are its numbers on one thread.)
 */
export function linspace(
  start: number,
  end: number,
  steps: number,
  options: TensorOptions = {},
): Tensor {
  if (typeof start !== "number" || typeof end !== "number") {
    throw new TypeError(`linspace: start and end must be numbers, got ${start} and ${end}`);
  }
  const n = count(steps, "steps", "linspace");
  const { dtype, device } = resolveFactory(options, getDefaultDtype());
  if (dtype === "int32") [start, end].forEach((v) => checkInt32(v, "linspace"));
  const single = dtype === "float32";
  const round = single ? Math.fround : dtype === "int32" ? Math.trunc : (v: number) => v;
  const [s, e] = [round(start), round(end)];
  // int32 steps in float64, as PyTorch's `step_t`.
  const step = single ? Math.fround(Math.fround(e - s) / (n - 1)) : (e - s) / (n - 1);
  const half = Math.floor(n / 2);
  const at = (i: number) =>
    round(i < half ? fma(step, i, s, single) : fma(-step, n - 1 - i, e, single));
  const values = allocHost(dtype, n);
  const lanes = dtype === "float64" ? 4 : 8;
  const vector = (from: number) => {
    const base = at(from);
    values[from] = base;
    for (let k = 1; k < lanes; k++) {
      values[from + k] = round(base + (single ? Math.fround(k * step) : k * step));
    }
  };
  let i = 0;
  // Two vectors at a time while two fit, then one element at a time.
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    vector(i);
    vector(i + lanes);
  }
  for (; i < n; i++) values[i] = at(i);
  if (n === 1) values[0] = s; // PyTorch fills `start` (step would be x/0)
  return finish(fromHost(values, [n], device), options);
}
