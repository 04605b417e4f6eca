/**
 * Running and whole products and sums: `cumsum`, `cumprod`, `prod`, with
 * PyTorch's gradient rules where the input has zeros.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { recomputedBackward, recording } from "../autograd/recompute.ts";
import { normalizeDim } from "../shape.ts";
import { tidy } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { full } from "../ops/factory.ts";
import { cat, clone, narrow } from "../ops/view.ts";

/**
 * The inclusive scan of `x` along `dim` by `op` (from the end with
 * `reverse`), no graph: ⌈log₂ n⌉ steps, each combining every element with
 * the one `2^k` before it (Hillis and Steele), so that a scan costs a few
 * kernels per step on every backend instead of one per element. Sums and
 * products are therefore associated differently from PyTorch's running
 * loop, which accumulates in double on cpu: cumsum stays within a few ulp,
 * but a long float32 cumprod's error grows with its length (measured
 * against float64: 3.4e-6 relative at 1,000 elements near 1, 2.5e-4 at
 * 100,000, where PyTorch gives 6e-8), and an intermediate may overflow
 * float32 in one order and not in the other.
 */
export function scan(x: Tensor, dim: number, op: "add" | "mul", reverse = false): Tensor {
  return noGrad(() => {
    let y = x;
    // Each step in a scope of its own and the step before freed: kept to the end, a scan of
    // 48 (Poisson's small rates) held 24 arrays of the input's size at once.
    for (let k = 1; k < x.shape[dim]; k *= 2) {
      const before = y;
      y = tidy(() => scanStep(before, dim, op, reverse, k));
      if (before !== x) before.dispose();
    }
    return y === x ? tidy(() => clone(x)) : y;
  });
}

/** {@link scan}'s steps, recorded when grad mode is on. */
function scanSteps(x: Tensor, dim: number, op: "add" | "mul", reverse: boolean): Tensor {
  let y = x;
  for (let k = 1; k < x.shape[dim]; k *= 2) y = scanStep(y, dim, op, reverse, k);
  return y === x ? clone(x) : y;
}

/** One step: every element combined with the one `k` before it (after it, reversed). */
function scanStep(y: Tensor, dim: number, op: "add" | "mul", reverse: boolean, k: number): Tensor {
  const n = y.shape[dim];
  // The k elements at the start (the end, reversed) have nothing k before them.
  const [keep, from, to] = reverse ? [n - k, 0, k] : [0, k, 0];
  const head = narrow(y, dim, keep, k);
  const tail = narrow(y, dim, from, n - k)[op](narrow(y, dim, to, n - k));
  return cat(reverse ? [tail, head] : [head, tail], dim);
}

/** Running sums along `dim`, as `torch.cumsum` (int32 stays int32: PyTorch gives int64). */
export function cumsum(x: Tensor, dim: number): Tensor {
  const d = normalizeDim(dim, x.ndim, "cumsum");
  if (x.ndim === 0) return clone(x);
  const out = scan(x, d, "add");
  // The gradient (a reversed scan) is recorded too, for gradients of gradients.
  const reversed = (g: Tensor): Tensor =>
    record("cumsumBackward", [g], scan(g, d, "add", true), ([gg]) => [cumsum(gg!, d)]);
  return record("cumsum", [x], out, ([g]) => [reversed(g!)]);
}

/** Running products along `dim`, as `torch.cumprod`, with PyTorch's gradient at zeros. */
export function cumprod(x: Tensor, dim: number): Tensor {
  const d = normalizeDim(dim, x.ndim, "cumprod");
  if (x.ndim === 0) return clone(x);
  const out = scan(x, d, "mul");
  return record("cumprod", [x], out, ([g]) => [
    recording() ? recordedCumprodBackward(g!, x, out, d) : cumprodBackward(g!, x, out, d),
  ]);
}

/**
 * cumprod's gradient under createGraph, made of recorded ops: PyTorch's
 * `Σ_{j≥k} g_j y_j / x_k` (with `y` the output, which carries the graph)
 * when the input has no zero; when it has one, the gradient of the scan
 * re-run with a graph, which is the polynomial's, as PyTorch's O(n²) loop
 * (the masks of {@link cumprodBackward} would drop the second derivative
 * through a zero).
 */
function recordedCumprodBackward(g: Tensor, x: Tensor, y: Tensor, d: number): Tensor {
  if (x.numel() <= 1 || x.shape[d] === 1) return g;
  const anyZero = x.eq(0).sum().gt(0);
  // Divided by 1 at a zero: that branch is unused there, and must not make its gradient NaN.
  const formula = y.mul(g).flip(d).cumsum(d).flip(d).div(x.where(x.ne(0), 1));
  const [exact] = recomputedBackward([x], () => scanSteps(x, d, "mul", false), g);
  return exact!.where(anyZero, formula);
}

/**
 * PyTorch 1.13's `cumprod_backward` (the first-order one): Σ_{j≥k} g_j y_j / x_k
 * before a slice's first zero z₁; at z₁, y_{z₁-1} Σ_{z₁≤j<z₂} g_j Π_{z₁<i≤j} x_i
 * (z₂ the second zero); 0 after it. Before z₁ the first formula is PyTorch's
 * no-zero path too, so NaN and infinities come out as in PyTorch without
 * asking the device whether there are zeros.
 */
function cumprodBackward(g: Tensor, x: Tensor, y: Tensor, d: number): Tensor {
  const n = x.shape[d];
  if (x.numel() <= 1 || n === 1) return g;
  const isZero = x.eq(0);
  const zeros = scan(isZero, d, "add"); // how many zeros up to here
  const before = zeros.eq(0); // [0, z₁)
  const run = zeros.eq(1); // [z₁, z₂)
  const atZero = isZero.mul(run);
  const toEnd = scan(y.mul(g).where(before, 0), d, "add", true);
  const products = scan(x.where(run.sub(atZero), 1), d, "mul"); // Π_{z₁<i≤j} x_i
  const sums = products.mul(g.where(run, 0)).sum(d, true);
  const ones = full(x.shape.map((s, i) => (i === d ? 1 : s)), 1, {
    dtype: x.dtype,
    device: x.device,
  });
  const previous = cat([ones, narrow(y, d, 0, n - 1)], d); // y_{z₁-1}, 1 when z₁ = 0
  return toEnd.div(x).where(before, 0).add(sums.mul(previous).where(atZero, 0));
}

/** The product of the elements along `dim` (size ≥ 1), no graph, by halving. */
function productAlong(x: Tensor, d: number): Tensor {
  return noGrad(() =>
    tidy(() => {
      let y = x;
      for (let n = x.shape[d]; n > 1; n = y.shape[d]) {
        const half = Math.floor(n / 2);
        const pairs = narrow(y, d, 0, half).mul(narrow(y, d, half, half));
        y = n % 2 === 0 ? pairs : cat([pairs, narrow(y, d, n - 1, 1)], d);
      }
      return y === x ? clone(x) : y;
    })
  );
}

/**
 * The product of the other elements along `d` at every position (PyTorch's
 * `prod_safe_zeros_backward` factor): exclusive running products from both
 * ends, multiplied, so no division by a zero. Made of recorded ops
 * ({@link cumprod}'s), so that under createGraph it is differentiable.
 */
function othersProduct(x: Tensor, d: number): Tensor {
  const n = x.shape[d];
  const ones = full(x.shape.map((s, i) => (i === d ? 1 : s)), 1, {
    dtype: x.dtype,
    device: x.device,
  });
  const left = cumprod(cat([ones, narrow(x, d, 0, n - 1)], d), d);
  const right = cumprod(cat([narrow(x, d, 1, n - 1), ones], d).flip(d), d).flip(d);
  return left.mul(right);
}

/**
 * The product of all elements, or along `dim`, as `torch.prod` (int32 stays
 * int32: PyTorch gives int64). The gradient is PyTorch's: `g·prod/x` when the
 * input has no zero, else the product of the others (along `dim`); over all
 * elements, 0 everywhere when two or more are zero.
 */
export function prod(x: Tensor, dim?: number, keepdim = false): Tensor {
  const whole = dim === undefined;
  const d = whole ? 0 : normalizeDim(dim, x.ndim, "prod");
  const flat = whole || x.ndim === 0 ? noGrad(() => x.reshape([x.numel()])) : x;
  const kept = whole ? x.shape.map(() => 1) : x.shape.map((n, i) => (i === d ? 1 : n));
  const reduced = flat.shape[d] === 0
    ? full(kept, 1, { dtype: x.dtype, device: x.device })
    : productAlong(flat, d).reshape(kept);
  const out = keepdim ? reduced : reduced.reshape(whole ? [] : x.shape.filter((_, i) => i !== d));
  // Made of recorded ops on the input and the output (whose node is this one), so that under
  // createGraph it is differentiable: PyTorch's double backward, whose ≥ 2 zeros over all
  // elements give a gradient of constant zeros (a zero second derivative too).
  return record("prod", [x], out, ([g]) => {
    if (x.ndim === 0 || x.numel() === 0) return [g!.reshape(kept).expand(x.shape)];
    const gk = g!.reshape(kept);
    const nonzero = x.ne(0);
    // Divided by 1 at a zero: that branch is unused then, and must not make its gradient NaN.
    const fast = gk.mul(out.reshape(kept).div(x.where(nonzero, 1)));
    const safe = gk.mul(othersProduct(whole ? x.reshape([x.numel()]) : x, d).reshape(x.shape));
    const zeros = nonzero.eq(0).sum();
    if (!whole) return [safe.where(zeros.ne(0), fast)];
    return [fast.where(zeros.eq(0), safe.where(zeros.eq(1), 0))];
  });
}
