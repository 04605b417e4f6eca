/**
 * `normalize` and `cosineSimilarity`, as `torch.nn.functional`'s: norms
 * clamped below at `eps` the way PyTorch 1.13 clamps them (no gradient flows
 * through a clamped norm), composed from tensor ops so that both run forward
 * and backward on every backend.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { where } from "../../ops/indexing.ts";
import { broadcastShapes, normalizeDim } from "../../shape.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFinite, checkFloatInput, pNorm } from "../util.ts";

/**
 * ‖x‖ₚ along `dim` (kept with size 1), `eps` where it is at most `eps`. The
 * vectors that small are swapped for ones before the norm, so its backward
 * (1/‖x‖ for p = 2) stays finite there, and the `where` sends them no
 * gradient through the norm: PyTorch's `clamp_min`.
 */
function clampedNorm(x: Tensor, p: number, dim: number, eps: number): Tensor {
  const small = noGrad(() => pNorm(x, p, dim).unsqueeze(dim).le(eps));
  return where(small, eps, pNorm(where(small, 1, x), p, dim).unsqueeze(dim));
}

/** Options of {@link normalize}. */
export interface NormalizeOptions {
  /** The norm's exponent (default 2; `Infinity` for the largest magnitude). */
  p?: number;
  /** The dim normalised (default 1). */
  dim?: number;
  /** Smallest divisor (default 1e-12). */
  eps?: number;
}

/**
 * `x / max(‖x‖ₚ, eps)` along `dim`, as `torch.nn.functional.normalize`
 * (unit vectors; a zero vector stays zero).
 */
export function normalize(x: Tensor, options: NormalizeOptions = {}): Tensor {
  checkFloatInput("normalize", x);
  const p = options.p ?? 2;
  if (typeof p !== "number" || !(p > 0)) {
    throw new RangeError(`normalize: p must be a positive number or Infinity, got ${p}`);
  }
  const dim = normalizeDim(options.dim ?? 1, x.ndim, "normalize");
  const eps = checkFinite("normalize", "eps", options.eps ?? 1e-12);
  return x.div(clampedNorm(x, p, dim, eps));
}

/** Options of {@link cosineSimilarity}. */
export interface CosineSimilarityOptions {
  /** The dim of the vectors (default 1). */
  dim?: number;
  /** Smallest norm (default 1e-8). */
  eps?: number;
}

/**
 * Cosine of the angle between `x1` and `x2` along `dim` (the two broadcast),
 * as `torch.nn.functional.cosine_similarity` (PyTorch 1.13's formula:
 * `Σ (x1 / max(‖x1‖, eps)) · (x2 / max(‖x2‖, eps))`); that dim is removed.
 * A vector whose norm is below `eps` but not 0 gets no gradient through its
 * clamped norm, as in `normalize`; PyTorch 1.13 sends one there (scaled by
 * norm / eps).
 */
export function cosineSimilarity(
  x1: Tensor,
  x2: Tensor,
  options: CosineSimilarityOptions = {},
): Tensor {
  checkFloatInput("cosineSimilarity", x1, "x1");
  checkFloatInput("cosineSimilarity", x2, "x2");
  const shape = broadcastShapes(x1.shape, x2.shape, "cosineSimilarity");
  const dim = normalizeDim(options.dim ?? 1, shape.length, "cosineSimilarity");
  const eps = checkFinite("cosineSimilarity", "eps", options.eps ?? 1e-8);
  const [a, b] = [x1.expand(shape), x2.expand(shape)];
  return a.div(clampedNorm(a, 2, dim, eps)).mul(b.div(clampedNorm(b, 2, dim, eps))).sum(dim);
}
