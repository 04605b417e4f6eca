/**
 * The decompositions through the backend's optional `eigh`, `svd` and `qr`
 * kernels (one launch for a whole batch; the cpu backend computes them in
 * float64 as LAPACK does), where the device has them; `null` elsewhere, and
 * the callers compose the decomposition from tensor ops instead.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { empty, hasKernel, launch } from "../ops/util.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { failLater } from "./util.ts";

/** The batch dims and matrix count of `a` ([..., m, n]). */
function batchOf(a: Tensor): [number[], number] {
  const batch = a.shape.slice(0, -2);
  return [batch, batch.reduce((x, y) => x * y, 1)];
}

/**
 * Eigenvalues (ascending) and eigenvectors (columns) of the symmetric
 * matrices whose lower triangles `lower` holds (its upper one unread).
 */
export function kernelEigh(lower: Tensor): [Tensor, Tensor] | null {
  if (!hasKernel(lower.device, "eigh") || lower.numel() === 0) return null;
  const [batch, count] = batchOf(lower);
  const n = lower.shape.at(-1)!;
  const values = empty([...batch, n], lower.dtype, lower.device);
  const vectors = empty([...batch, n, n], lower.dtype, lower.device);
  launch(lower.device, "eigh", {
    a: lower.storage.buffer("linalg.eigh"),
    values: values.storage.buffer(),
    vectors: vectors.storage.buffer(),
    batch: count,
    m: n,
    n,
    dtype: lower.dtype,
  });
  return [values, vectors];
}

/** The reduced SVD of `a` ([..., m, n]): U [..., m, k], S [..., k] descending, Vh [..., k, n]. */
export function kernelSvd(a: Tensor): [Tensor, Tensor, Tensor] | null {
  if (!hasKernel(a.device, "svd") || a.numel() === 0) return null;
  const [batch, count] = batchOf(a);
  const [m, n] = a.shape.slice(-2);
  const k = Math.min(m, n);
  const u = empty([...batch, m, k], a.dtype, a.device);
  const s = empty([...batch, k], a.dtype, a.device);
  const vh = empty([...batch, k, n], a.dtype, a.device);
  const buffers = { u: u.storage.buffer(), s: s.storage.buffer(), vh: vh.storage.buffer() };
  const a0 = a.storage.buffer("linalg.svd");
  launch(a.device, "svd", { a: a0, ...buffers, batch: count, m, n, dtype: a.dtype });
  return [u, s, vh];
}

/**
 * The QR of `a` ([..., m, n]) with LAPACK's signs: Q [..., m, c], R [..., c,
 * n], c = m when `complete`, else min(m, n).
 */
export function kernelQr(a: Tensor, complete: boolean): [Tensor, Tensor] | null {
  if (!hasKernel(a.device, "qr") || a.numel() === 0) return null;
  const [batch, count] = batchOf(a);
  const [m, n] = a.shape.slice(-2);
  const c = complete ? m : Math.min(m, n);
  const q = empty([...batch, m, c], a.dtype, a.device);
  const r = empty([...batch, c, n], a.dtype, a.device);
  const buffers = { q: q.storage.buffer(), r: r.storage.buffer() };
  const a0 = a.storage.buffer("linalg.qr");
  launch(a.device, "qr", { a: a0, ...buffers, batch: count, m, n, complete, dtype: a.dtype });
  return [q, r];
}

/**
 * Raises at the next read, as PyTorch's LAPACK-backed `eigh` and `svd` do
 * at once, when a matrix of `a` holds a NaN or ±inf (iterations on them
 * neither converge nor mean anything); with `triangle`, in that triangle
 * only (the one `eigh` reads).
 */
export function refuseNonFinite(op: string, a: Tensor, triangle?: "L" | "U"): void {
  if (a.numel() === 0) return;
  const bad = noGrad(() =>
    forwardScope(() => {
      const t = triangle === "L" ? a.tril() : triangle === "U" ? a.triu() : a;
      return t.ne(t).maximum(t.abs().eq(Infinity)).amax([-2, -1]).to("int32");
    })
  );
  failLater(
    op,
    bad,
    a.ndim > 2,
    () => "The algorithm failed to converge because the input matrix contained non-finite values.",
  );
}
