/**
 * `eigh`, `svd` and `qr` (optional kernels) on the host, in float64 whatever
 * the dtype, as LAPACK arranges them: blocked Householder QR (`geqrf`, Q
 * accumulated as `orgqr` does, in blocks of {@link BLOCK} reflectors whose
 * products go through the device's matmul, i.e. BLAS where it is loaded);
 * Householder tridiagonalization and implicit QL with Wilkinson's shift
 * (`sytrd` + `steqr`) for eigh; Householder bidiagonalization and
 * Golub–Kahan's implicit QR (`gebrd` + `bdsqr`) for svd. The rotations of
 * the iterations are applied to rows (the vectors kept transposed), so every
 * inner loop runs over contiguous memory; the tridiagonal (bidiagonal)
 * problem's vectors meet the reflectors' in one matrix product at the end.
 * @module
 */

import type { EighArgs, MatmulArgs, MatricesArgs, QrArgs, SvdArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** The device's float64 matrix product (BLAS where loaded). */
export type Product = (args: MatmulArgs<TypedArray>) => void;

/** Columns per panel and reflectors per block (what LAPACK's `ilaenv` gives `geqrf`). */
const BLOCK = 32;

const EPS = 2.220446049250313e-16;

/** larfg's `safmin` (2⁻⁹⁶⁹): a reflector's entries are scaled up by {@link UP} below it. */
const SMALL = 2 ** -969;
const UP = 2 ** 600;

/**
 * √(smallest normal float64): an off-diagonal below it is negligible whatever its neighbours
 * (steqr's `safmin` term; A is scaled to a largest |entry| of 1), as QL on subnormals stalls.
 */
const TINY = 1.4916681462400413e-154;

/** Products of at most this many multiply-adds are computed here rather than by `product`. */
const SMALL_PRODUCT = 4096;

/** `out [m, n] = op(a) · op(b)`, op transposing a stored `[k, m]` (`b`: `[n, k]`). */
function gemm(
  product: Product,
  a: Float64Array,
  b: Float64Array,
  m: number,
  n: number,
  k: number,
  transA = false,
  transB = false,
): Float64Array {
  const out = new Float64Array(m * n);
  if (m === 0 || n === 0 || k === 0) return out;
  if (m * n * k <= SMALL_PRODUCT) {
    // A call into BLAS costs microseconds: a batch of 3 x 3 matrices spent most of its time there.
    const [ai, ap] = transA ? [1, m] : [k, 1]; // a's strides along m and along k
    const [bp, bj] = transB ? [1, k] : [n, 1]; // b's strides along k and along n
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let sum = 0;
        for (let p = 0; p < k; p++) sum += a[i * ai + p * ap] * b[p * bp + j * bj];
        out[i * n + j] = sum;
      }
    }
    return out;
  }
  product({
    a,
    b,
    out,
    batch: 1,
    m,
    n,
    k,
    aBatchStride: 0,
    bBatchStride: 0,
    transA,
    transB,
    dtype: "float64",
  });
  return out;
}

/**
 * Matrix `index` of `args.a` in float64, divided by its largest |entry|
 * (returned; 1 for a zero matrix) so that sums of squares neither overflow
 * nor underflow, or null when an entry is NaN or ±inf (`lower`: only the
 * lower triangle is read and checked, the upper one mirrored).
 */
function load(
  args: MatricesArgs<TypedArray>,
  index: number,
  lower: boolean,
): [Float64Array, number] | null {
  const { a, m, n } = args;
  const size = m * n;
  const w = new Float64Array(size);
  const base = index * size;
  let largest = 0;
  for (let i = 0; i < m; i++) {
    const end = lower ? i + 1 : n;
    for (let j = 0; j < end; j++) {
      const v = a[base + i * n + j];
      if (!Number.isFinite(v)) return null;
      const x = Math.abs(v);
      if (x > largest) largest = x;
      w[i * n + j] = v;
    }
  }
  const scale = largest > 0 ? largest : 1;
  for (let i = 0; i < size; i++) w[i] /= scale;
  if (lower) {
    for (let i = 0; i < n; i++) for (let j = 0; j < i; j++) w[j * n + i] = w[i * n + j];
  }
  return [w, scale];
}

/**
 * LAPACK's `larfg` on `x[at + t·stride]`, t < len (t = 0 is α): makes H =
 * I - τvvᵀ with Hx = βe₀, v₀ = 1 and v's other entries written over x's;
 * returns τ and leaves β at x[at]. β = -sign(α)·‖x‖ (sign(0) = 1); τ = 0
 * (H = I, β = α) when x is exactly zero past α.
 */
function reflector(x: Float64Array, at: number, len: number, stride: number): number {
  let big = 0;
  for (let t = 1, p = at + stride; t < len; t++, p += stride) big = Math.max(big, Math.abs(x[p]));
  if (big === 0) return 0;
  big = Math.max(big, Math.abs(x[at]));
  // Near the subnormals α - β and β carry few bits, and H = I - τvvᵀ is then not orthogonal:
  // x scaled up by powers of 2 (exact) first, β scaled back at the end, as larfg does.
  let scaled = 0;
  for (; big < SMALL; scaled++, big *= UP) {
    for (let t = 0, p = at; t < len; t++, p += stride) x[p] *= UP;
  }
  const alpha = x[at];
  // Squares of entries below 1e-154 are subnormal or 0: summed relative to the largest (nrm2).
  let sum = 0;
  for (let t = 0, p = at; t < len; t++, p += stride) sum += (x[p] / big) * (x[p] / big);
  const norm = big * Math.sqrt(sum);
  let beta = alpha >= 0 ? -norm : norm;
  const tau = (beta - alpha) / beta;
  const inv = 1 / (alpha - beta);
  for (let t = 1, p = at + stride; t < len; t++, p += stride) x[p] *= inv;
  for (; scaled > 0; scaled--) beta /= UP;
  x[at] = beta;
  return tau;
}

/**
 * LAPACK's `larf` after `larfg`: the reflector of column `col` of `w`
 * (row-major, `ld` columns) from row `row` down (τ into `tau[col]`), applied
 * to the columns after it up to `end` (`dots`: scratch of `end` values).
 */
function reflectColumn(
  w: Float64Array,
  ld: number,
  m: number,
  row: number,
  col: number,
  end: number,
  tau: Float64Array,
  dots: Float64Array,
): void {
  const t = reflector(w, row * ld + col, m - row, ld);
  tau[col] = t;
  const rest = end - col - 1;
  if (t === 0 || rest <= 0) return;
  // (I - τvvᵀ)C: dots = vᵀC, then C -= τ·v·dots, row by row (contiguous).
  dots.fill(0, 0, rest);
  for (let i = row; i < m; i++) {
    const vi = i === row ? 1 : w[i * ld + col];
    const off = i * ld + col + 1;
    for (let j = 0; j < rest; j++) dots[j] += vi * w[off + j];
  }
  for (let i = row; i < m; i++) {
    const vi = (i === row ? 1 : w[i * ld + col]) * t;
    const off = i * ld + col + 1;
    for (let j = 0; j < rest; j++) w[off + j] -= vi * dots[j];
  }
}

/**
 * Reflectors stored as LAPACK does (reflector p's entry i ≥ p, with 1 at i =
 * p, at `v[base + p·ps + i·is]`) in a space of `dim` rows: the dense block
 * V [dim - p0, nb] of reflectors p0..p0+nb-1 (rows from p0) and its
 * triangular factor T (`larft`, forward): H_p0···H_(p0+nb-1) = I - V T Vᵀ.
 */
function blockReflector(
  v: Float64Array,
  base: number,
  ps: number,
  is: number,
  dim: number,
  p0: number,
  nb: number,
  tau: Float64Array,
): [Float64Array, Float64Array] {
  const rows = dim - p0;
  const block = new Float64Array(rows * nb);
  for (let q = 0; q < nb; q++) {
    const p = p0 + q;
    block[q * nb + q] = 1;
    for (let i = p + 1; i < dim; i++) block[(i - p0) * nb + q] = v[base + p * ps + i * is];
  }
  const t = new Float64Array(nb * nb);
  const col = new Float64Array(nb);
  for (let q = 0; q < nb; q++) {
    const tq = tau[p0 + q];
    t[q * nb + q] = tq;
    if (tq === 0 || q === 0) continue;
    // T[0:q, q] = -τ_q · T[0:q, 0:q] · (V[:, 0:q]ᵀ v_q).
    col.fill(0, 0, q);
    for (let i = q; i < rows; i++) {
      const vq = block[i * nb + q];
      if (vq === 0) continue;
      const off = i * nb;
      for (let j = 0; j < q; j++) col[j] += block[off + j] * vq;
    }
    for (let j = 0; j < q; j++) {
      let s = 0;
      for (let l = j; l < q; l++) s += t[j * nb + l] * col[l];
      t[j * nb + q] = -tq * s;
    }
  }
  return [block, t];
}

/**
 * `orgqr`: the first `cols` columns of H_0···H_(count-1) (`dim` × `cols`,
 * row-major) for reflectors stored as {@link blockReflector} reads them,
 * accumulated backwards a block at a time (`Q[p0:, p0:] -= V(T(VᵀQ[p0:, p0:]))`).
 */
function formQ(
  product: Product,
  v: Float64Array,
  base: number,
  ps: number,
  is: number,
  dim: number,
  count: number,
  tau: Float64Array,
  cols: number,
): Float64Array {
  const q = new Float64Array(dim * cols);
  for (let i = 0; i < Math.min(dim, cols); i++) q[i * cols + i] = 1;
  const last = Math.floor(Math.max(count - 1, 0) / BLOCK) * BLOCK;
  for (let p0 = last; p0 >= 0 && count > 0; p0 -= BLOCK) {
    const nb = Math.min(BLOCK, count - p0);
    const rows = dim - p0, width = cols - p0;
    if (width <= 0) continue;
    const [block, t] = blockReflector(v, base, ps, is, dim, p0, nb, tau);
    const sub = new Float64Array(rows * width);
    for (let i = 0; i < rows; i++) {
      sub.set(q.subarray((p0 + i) * cols + p0, (p0 + i) * cols + cols), i * width);
    }
    const y = gemm(product, block, sub, nb, width, rows, true);
    const z = gemm(product, t, y, nb, width, nb);
    const update = gemm(product, block, z, rows, width, nb);
    for (let i = 0; i < rows; i++) {
      const off = (p0 + i) * cols + p0;
      for (let j = 0; j < width; j++) q[off + j] = sub[i * width + j] - update[i * width + j];
    }
  }
  return q;
}

/**
 * The blocked QR of `w` [m, n] in place (`geqrf`): R on and above the
 * diagonal, the reflectors below it, τ returned. Panels of {@link BLOCK}
 * columns; the columns right of a panel get its block reflector through
 * three products.
 */
function factorQr(product: Product, w: Float64Array, m: number, n: number): Float64Array {
  const k = Math.min(m, n);
  const tau = new Float64Array(Math.max(k, 1));
  const dots = new Float64Array(n);
  for (let c0 = 0; c0 < k; c0 += BLOCK) {
    const nb = Math.min(BLOCK, k - c0);
    const rest = n - c0 - nb;
    // Small trailing parts are cheaper in the panel loop than in three products.
    const inline = rest <= BLOCK;
    const [end, last] = inline ? [n, k] : [c0 + nb, c0 + nb];
    for (let col = c0; col < last; col++) reflectColumn(w, n, m, col, col, end, tau, dots);
    if (inline) break;
    const rows = m - c0;
    const [block, t] = blockReflector(w, 0, 1, n, m, c0, nb, tau);
    const c = new Float64Array(rows * rest);
    for (let i = 0; i < rows; i++) {
      c.set(w.subarray((c0 + i) * n + c0 + nb, (c0 + i) * n + n), i * rest);
    }
    // Hᵀ C = C - V Tᵀ (Vᵀ C).
    const y = gemm(product, block, c, nb, rest, rows, true);
    const z = gemm(product, t, y, nb, rest, nb, true);
    const update = gemm(product, block, z, rows, rest, nb);
    for (let i = 0; i < rows; i++) {
      const off = (c0 + i) * n + c0 + nb;
      for (let j = 0; j < rest; j++) w[off + j] = c[i * rest + j] - update[i * rest + j];
    }
  }
  return tau;
}

/** Sets matrix `index` of `out` (`size` values each) to NaN. */
function nan(out: TypedArray, index: number, size: number): void {
  out.fill(NaN, index * size, (index + 1) * size);
}

/** See {@link QrArgs}. */
export function qr(args: QrArgs<TypedArray>, product: Product): void {
  const { batch, m, n, complete } = args;
  const k = Math.min(m, n);
  const c = complete ? m : k;
  for (let b = 0; b < batch; b++) {
    const loaded = load(args, b, false);
    if (loaded === null) {
      // No iteration to hang on: NaN spreads as LAPACK's would, but whole matrices are simpler.
      nan(args.q, b, m * c);
      nan(args.r, b, c * n);
      continue;
    }
    const [w, scale] = loaded;
    const tau = factorQr(product, w, m, n);
    const q = formQ(product, w, 0, 1, n, m, k, tau, c);
    args.q.set(q, b * m * c);
    const r = args.r;
    const base = b * c * n;
    for (let i = 0; i < c; i++) {
      for (let j = 0; j < n; j++) r[base + i * n + j] = j >= i ? w[i * n + j] * scale : 0;
    }
  }
}

/**
 * Reduces the symmetric `w` [n, n] (its lower triangle read and updated) to
 * tridiagonal form QᵀAQ (`sytd2`, lower): the diagonal into `d`, the subdiagonal into `e` (e[i] between i
 * and i + 1), reflector i's v in column i below the subdiagonal; returns τ.
 */
function tridiagonalize(
  w: Float64Array,
  n: number,
  d: Float64Array,
  e: Float64Array,
): Float64Array {
  const tau = new Float64Array(Math.max(n - 1, 1));
  const x = new Float64Array(n);
  const v = new Float64Array(n);
  for (let i = 0; i < n - 1; i++) {
    const s = i + 1; // the trailing block A22 is rows and columns s..n-1
    const t = reflector(w, s * n + i, n - s, n);
    tau[i] = t;
    e[i] = w[s * n + i];
    d[i] = w[i * n + i];
    if (t === 0) continue;
    v[s] = 1;
    for (let r = s + 1; r < n; r++) v[r] = w[r * n + i];
    // x = τ·A22·v, w = x - (τ/2)(xᵀv)v, A22 -= vwᵀ + wvᵀ, on A22's lower triangle alone:
    // row r's part left of the diagonal serves both x[r] and, mirrored, x[c].
    x.fill(0, s, n);
    for (let r = s; r < n; r++) {
      const off = r * n, vr = v[r];
      let sum = 0;
      for (let c = s; c < r; c++) {
        const a = w[off + c];
        sum += a * v[c];
        x[c] += a * vr;
      }
      x[r] += sum + w[off + r] * vr;
    }
    let xv = 0;
    for (let r = s; r < n; r++) {
      x[r] *= t;
      xv += x[r] * v[r];
    }
    const alpha = -0.5 * t * xv;
    for (let r = s; r < n; r++) x[r] += alpha * v[r];
    for (let r = s; r < n; r++) {
      const off = r * n, vr = v[r], xr = x[r];
      for (let c = s; c <= r; c++) w[off + c] -= vr * x[c] + xr * v[c];
    }
  }
  d[n - 1] = w[(n - 1) * n + n - 1];
  e[n - 1] = 0;
  return tau;
}

/**
 * Implicit QL with Wilkinson's shift on the tridiagonal (`d`, `e`), the
 * rotations applied to the rows of `zt` [n, n] (eigenvectors kept as rows).
 * False past 30n sweeps in all (LAPACK's limit).
 */
function tridiagonalQl(d: Float64Array, e: Float64Array, zt: Float64Array, n: number): boolean {
  const cs = new Float64Array(n), sn = new Float64Array(n);
  // For the whole matrix, as steqr's: a graded block may deflate at its far end for a while.
  let sweeps = 30 * n;
  for (let l = 0; l < n; l++) {
    let iter = 0;
    let m: number;
    do {
      for (m = l; m < n - 1; m++) {
        const x = Math.abs(e[m]);
        if (x <= EPS * (Math.abs(d[m]) + Math.abs(d[m + 1])) || x < TINY) break;
      }
      if (m === l) break;
      if (iter === 0 && Math.abs(d[m]) < Math.abs(d[l])) {
        // Large end at l: turned round (as steqr picks QR there), else the sweep from the
        // small end loses its bulge to underflow before l and nothing ever converges.
        reverse(d, e, zt, n, l, m);
        continue;
      }
      iter++;
      if (sweeps-- === 0) return false;
      let g = (d[l + 1] - d[l]) / (2 * e[l]);
      let r = Math.hypot(g, 1);
      g = d[m] - d[l] + e[l] / (g + (g >= 0 ? r : -r));
      let s = 1, c = 1, p = 0;
      let i: number;
      for (i = m - 1; i >= l; i--) {
        const f = s * e[i];
        const b = c * e[i];
        r = Math.hypot(f, g);
        e[i + 1] = r;
        if (r === 0) {
          d[i + 1] -= p;
          e[m] = 0;
          break;
        }
        s = f / r;
        c = g / r;
        g = d[i + 1] - p;
        r = (d[i] - g) * s + 2 * c * b;
        p = s * r;
        d[i + 1] = g + p;
        g = c * r - b;
        cs[i] = c;
        sn[i] = -s;
      }
      // The sweep's rotations (those it got to) on rows of zt, columns of the eigenvectors.
      descending(zt, n, i + 1, m - 1, cs, sn);
      if (r === 0 && i >= l) continue;
      d[l] -= p;
      e[l] = g;
      e[m] = 0;
    } while (m !== l);
  }
  return true;
}

/** Block l..m of the tridiagonal (`d`, `e`) in reverse order, `zt`'s rows l..m to match. */
function reverse(
  d: Float64Array,
  e: Float64Array,
  zt: Float64Array,
  n: number,
  l: number,
  m: number,
): void {
  d.subarray(l, m + 1).reverse();
  e.subarray(l, m).reverse();
  const row = new Float64Array(n);
  for (let i = l, j = m; i < j; i++, j--) {
    row.set(zt.subarray(i * n, i * n + n));
    zt.copyWithin(i * n, j * n, j * n + n);
    zt.set(row, j * n);
  }
}

/** Flips row `i` of `x` [*, n] (and `also`'s row) so that its largest |entry| is positive. */
function orient(x: Float64Array, n: number, i: number, also?: Float64Array, alsoN = 0): void {
  let best = 0, at = 0;
  for (let k = 0; k < n; k++) {
    const v = Math.abs(x[i * n + k]);
    if (v > best) (best = v), (at = k);
  }
  if (x[i * n + at] >= 0) return;
  for (let k = 0; k < n; k++) x[i * n + k] = -x[i * n + k];
  if (also) { for (let k = 0; k < alsoN; k++) also[i * alsoN + k] = -also[i * alsoN + k]; }
}

/** See {@link EighArgs}. Eigenvectors are signed so that each one's largest |entry| is positive. */
export function eigh(args: EighArgs<TypedArray>, product: Product): void {
  const { batch, n } = args;
  for (let b = 0; b < batch; b++) {
    const loaded = load(args, b, true);
    if (loaded === null) {
      nan(args.values, b, n);
      nan(args.vectors, b, n * n);
      continue;
    }
    const [w, scale] = loaded;
    const d = new Float64Array(n), e = new Float64Array(n);
    const tau = tridiagonalize(w, n, d, e);
    const zt = new Float64Array(n * n);
    for (let i = 0; i < n; i++) zt[i * n + i] = 1;
    if (!tridiagonalQl(d, e, zt, n)) {
      nan(args.values, b, n);
      nan(args.vectors, b, n * n);
      continue;
    }
    // Q = 1 ⊕ H_0···H_(n-2) over rows and columns 1..n-1; V = Q·Z = Q·ztᵀ, kept as Vᵀ = zt·Qᵀ.
    const q1 = formQ(product, w, n, 1, n, n - 1, n - 1, tau, n - 1);
    const q = new Float64Array(n * n);
    q[0] = 1;
    for (let i = 1; i < n; i++) q.set(q1.subarray((i - 1) * (n - 1), i * (n - 1)), i * n + 1);
    const vt = gemm(product, zt, q, n, n, n, false, true);
    const order = Array.from({ length: n }, (_, i) => i).sort((i, j) => d[i] - d[j] || i - j);
    const values = args.values, vectors = args.vectors;
    for (let r = 0; r < n; r++) {
      const from = order[r];
      orient(vt, n, from);
      values[b * n + r] = d[from] * scale;
      for (let k = 0; k < n; k++) vectors[b * n * n + k * n + r] = vt[from * n + k];
    }
  }
}

/**
 * Householder bidiagonalization (`gebd2`) of `w` [m, n], m ≥ n: the
 * diagonal into `d`, the superdiagonal into `e`; left reflectors' v below
 * the diagonal (τ in `tq`), right reflectors' v right of the superdiagonal
 * (τ in `tp`).
 */
function bidiagonalize(
  w: Float64Array,
  m: number,
  n: number,
  d: Float64Array,
  e: Float64Array,
  tq: Float64Array,
  tp: Float64Array,
): void {
  const dots = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    reflectColumn(w, n, m, i, i, n, tq, dots);
    d[i] = w[i * n + i];
    if (i >= n - 1) {
      e[i] = 0;
      continue;
    }
    const t = reflector(w, i * n + i + 1, n - i - 1, 1);
    tp[i] = t;
    e[i] = w[i * n + i + 1];
    if (t === 0) continue;
    // Rows i+1.. times (I - τvvᵀ) on columns i+1..
    for (let r = i + 1; r < m; r++) {
      const off = r * n + i + 1;
      let s = w[off];
      for (let c = 1; c < n - i - 1; c++) s += w[off + c] * w[i * n + i + 1 + c];
      s *= t;
      w[off] -= s;
      for (let c = 1; c < n - i - 1; c++) w[off + c] -= s * w[i * n + i + 1 + c];
    }
  }
}

/** Rows `i` and `j` of `x` [*, n] rotated: (c·xᵢ + s·xⱼ, -s·xᵢ + c·xⱼ). */
function rotate(x: Float64Array, n: number, i: number, j: number, c: number, s: number): void {
  const oi = i * n, oj = j * n;
  for (let k = 0; k < n; k++) {
    const a = x[oi + k], b = x[oj + k];
    x[oi + k] = c * a + s * b;
    x[oj + k] = c * b - s * a;
  }
}

/**
 * {@link rotate} of rows (i, i+1) by (cs[i], sn[i]) for i = lo, lo+1, ..., hi
 * in turn, two rotations per pass over the rows (the middle row stays in a
 * register: a QL or QR sweep's rotations, a third fewer loads and stores).
 */
function ascending(
  x: Float64Array,
  n: number,
  lo: number,
  hi: number,
  cs: Float64Array,
  sn: Float64Array,
): void {
  let i = lo;
  for (; i < hi; i += 2) {
    const c1 = cs[i], s1 = sn[i], c2 = cs[i + 1], s2 = sn[i + 1];
    const o0 = i * n, o1 = o0 + n, o2 = o1 + n;
    for (let k = 0; k < n; k++) {
      const a = x[o0 + k], b = x[o1 + k], z = x[o2 + k];
      x[o0 + k] = c1 * a + s1 * b;
      const mid = c1 * b - s1 * a;
      x[o1 + k] = c2 * mid + s2 * z;
      x[o2 + k] = c2 * z - s2 * mid;
    }
  }
  if (i === hi) rotate(x, n, i, i + 1, cs[i], sn[i]);
}

/** As {@link ascending}, for i = hi, hi-1, ..., lo (QL's order). */
function descending(
  x: Float64Array,
  n: number,
  lo: number,
  hi: number,
  cs: Float64Array,
  sn: Float64Array,
): void {
  let i = hi;
  for (; i > lo; i -= 2) {
    const c1 = cs[i], s1 = sn[i], c2 = cs[i - 1], s2 = sn[i - 1];
    const o0 = (i - 1) * n, o1 = o0 + n, o2 = o1 + n;
    for (let k = 0; k < n; k++) {
      const a = x[o1 + k], b = x[o2 + k], z = x[o0 + k];
      x[o2 + k] = c1 * b - s1 * a;
      const mid = c1 * a + s1 * b;
      x[o1 + k] = c2 * mid - s2 * z;
      x[o0 + k] = c2 * z + s2 * mid;
    }
  }
  if (i === lo) rotate(x, n, i, i + 1, cs[i], sn[i]);
}

/**
 * The SVD of the upper bidiagonal (`d`, `e`) in place (Golub–Kahan–Reinsch,
 * as `bdsqr`): implicit QR steps with the Wilkinson shift of BᵀB's trailing
 * 2×2 on the lowest unreduced block, a zero on the diagonal chased out of
 * its row (or column) first. B = Ub·diag(d)·Vbᵀ with Ubᵀ accumulated into
 * `ut`, Vbᵀ into `vt` (their rows rotated). False past 6n² + 100 steps.
 */
function bidiagonalQr(
  d: Float64Array,
  e: Float64Array,
  ut: Float64Array,
  vt: Float64Array,
  n: number,
): boolean {
  let norm = 0;
  for (let i = 0; i < n; i++) norm = Math.max(norm, Math.abs(d[i]) + Math.abs(e[i]));
  const tol = EPS * norm;
  // A step's rotations (right ones for vt, left ones for ut), applied after it.
  const rc = new Float64Array(n), rs = new Float64Array(n);
  const lc = new Float64Array(n), ls = new Float64Array(n);
  for (let steps = 6 * n * n + 100;; steps--) {
    for (let i = 0; i < n - 1; i++) {
      const x = Math.abs(e[i]);
      if (x <= tol || x <= EPS * (Math.abs(d[i]) + Math.abs(d[i + 1]))) e[i] = 0;
    }
    let q = n - 1;
    while (q > 0 && e[q - 1] === 0) q--;
    if (q === 0) return true;
    if (steps === 0) return false;
    let p = q - 1;
    while (p > 0 && e[p - 1] !== 0) p--;
    let zero = -1;
    for (let i = p; i <= q; i++) {
      if (Math.abs(d[i]) <= tol) {
        d[i] = 0;
        zero = i;
        break;
      }
    }
    if (zero >= 0 && zero < q) {
      // Row `zero`'s superdiagonal rotated away against the diagonal below (left rotations).
      let bulge = e[zero];
      e[zero] = 0;
      for (let j = zero + 1; j <= q; j++) {
        const r = Math.hypot(d[j], bulge);
        const c = d[j] / r, s = bulge / r;
        d[j] = r;
        if (j < q) {
          bulge = -s * e[j];
          e[j] *= c;
        }
        rotate(ut, n, j, zero, c, s);
      }
      continue;
    }
    if (zero === q) {
      // Column q's superdiagonal rotated away against the diagonal left of it (right rotations).
      let bulge = e[q - 1];
      e[q - 1] = 0;
      for (let j = q - 1; j >= p; j--) {
        const r = Math.hypot(d[j], bulge);
        const c = d[j] / r, s = bulge / r;
        d[j] = r;
        if (j > p) {
          bulge = -s * e[j - 1];
          e[j - 1] *= c;
        }
        rotate(vt, n, j, q, c, s);
      }
      continue;
    }
    // Wilkinson's shift: the eigenvalue of BᵀB's trailing 2×2 (of the block) nearer its end.
    const t11 = d[q - 1] * d[q - 1] + (q - 1 > p ? e[q - 2] * e[q - 2] : 0);
    const t12 = d[q - 1] * e[q - 1];
    const t22 = d[q] * d[q] + e[q - 1] * e[q - 1];
    const half = (t11 - t22) / 2;
    const root = Math.hypot(half, t12);
    const mu = t12 === 0 ? t22 : t22 - (t12 * t12) / (half + (half >= 0 ? root : -root));
    let y = d[p] * d[p] - mu;
    let z = d[p] * e[p];
    for (let i = p; i < q; i++) {
      // Right rotation of columns i, i+1: zeroes z against y, leaves a bulge below d[i].
      let r = Math.hypot(y, z);
      let c = r === 0 ? 1 : y / r, s = r === 0 ? 0 : z / r;
      if (i > p) e[i - 1] = r;
      let di = d[i], ei = e[i];
      d[i] = c * di + s * ei;
      e[i] = c * ei - s * di;
      let bulge = s * d[i + 1];
      d[i + 1] *= c;
      rc[i] = c;
      rs[i] = s;
      // Left rotation of rows i, i+1: zeroes the bulge, leaves one right of e[i].
      di = d[i];
      r = Math.hypot(di, bulge);
      c = r === 0 ? 1 : di / r;
      s = r === 0 ? 0 : bulge / r;
      d[i] = r;
      ei = e[i];
      const d1 = d[i + 1];
      e[i] = c * ei + s * d1;
      d[i + 1] = c * d1 - s * ei;
      lc[i] = c;
      ls[i] = s;
      if (i < q - 1) {
        bulge = s * e[i + 1];
        e[i + 1] *= c;
        y = e[i];
        z = bulge;
      }
    }
    ascending(vt, n, p, q - 1, rc, rs);
    ascending(ut, n, p, q - 1, lc, ls);
  }
}

/**
 * The SVD of `w` [m, n], m ≥ n (overwritten): singular values (unsorted,
 * ≥ 0) and the singular vectors as rows, Uᵀ [n, m] and Vᵀ [n, n]; null when
 * the iteration did not converge.
 */
function svdTall(
  product: Product,
  w: Float64Array,
  m: number,
  n: number,
): [Float64Array, Float64Array, Float64Array] | null {
  const d = new Float64Array(n), e = new Float64Array(n);
  const tq = new Float64Array(n), tp = new Float64Array(Math.max(n - 1, 1));
  bidiagonalize(w, m, n, d, e, tq, tp);
  const ubt = new Float64Array(n * n), vbt = new Float64Array(n * n);
  for (let i = 0; i < n; i++) ubt[i * n + i] = vbt[i * n + i] = 1;
  if (!bidiagonalQr(d, e, ubt, vbt, n)) return null;
  for (let i = 0; i < n; i++) {
    if (d[i] < 0) {
      d[i] = -d[i];
      for (let k = 0; k < n; k++) vbt[i * n + k] = -vbt[i * n + k];
    }
  }
  // A = Q·B·Pᵀ: Uᵀ = Ubᵀ·Qᵀ, Vᵀ = Vbᵀ·Pᵀ with P = 1 ⊕ G_0···G_(n-2).
  const q = formQ(product, w, 0, 1, n, m, n, tq, n);
  const p1 = formQ(product, w, 1, n, 1, n - 1, n - 1, tp, n - 1);
  const p = new Float64Array(n * n);
  p[0] = 1;
  for (let i = 1; i < n; i++) p.set(p1.subarray((i - 1) * (n - 1), i * (n - 1)), i * n + 1);
  return [
    d,
    gemm(product, ubt, q, n, m, n, false, true),
    gemm(product, vbt, p, n, n, n, false, true),
  ];
}

/**
 * See {@link SvdArgs}. A wide matrix is decomposed transposed. Each pair is
 * signed so that the largest |entry| of U's column is positive.
 */
export function svd(args: SvdArgs<TypedArray>, product: Product): void {
  const { batch, m, n } = args;
  const k = Math.min(m, n);
  for (let b = 0; b < batch; b++) {
    const loaded = load(args, b, false);
    const fail = () => {
      nan(args.u, b, m * k);
      nan(args.s, b, k);
      nan(args.vh, b, k * n);
    };
    if (loaded === null) {
      fail();
      continue;
    }
    const [loadedW, scale] = loaded;
    let w = loadedW;
    if (m < n) {
      const t = new Float64Array(m * n);
      for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) t[j * m + i] = w[i * n + j];
      w = t;
    }
    const result = svdTall(product, w, Math.max(m, n), k);
    if (result === null) {
      fail();
      continue;
    }
    const [s, ut1, vt1] = result;
    // Rows of Uᵀ [k, m] and Vᵀ [k, n] of A itself (Aᵀ = U'SV'ᵀ: A's U is V', its V is U').
    const [ut, vt] = m >= n ? [ut1, vt1] : [vt1, ut1];
    for (let i = 0; i < k; i++) orient(ut, m, i, vt, n);
    const order = Array.from({ length: k }, (_, i) => i).sort((i, j) => s[j] - s[i] || i - j);
    for (let r = 0; r < k; r++) {
      const from = order[r];
      args.s[b * k + r] = s[from] * scale;
      for (let i = 0; i < m; i++) args.u[b * m * k + i * k + r] = ut[from * m + i];
      args.vh.set(vt.subarray(from * n, from * n + n), b * k * n + r * n);
    }
  }
}
