/**
 * Checks and small helpers the `linalg` functions share.
 * @module
 */

import { checkLater } from "../ops/check.ts";
import { arange, zeros } from "../ops/factory.ts";
import { formatShape } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { LinAlgError } from "./errors.ts";

/** `A` must be float with at least 2 dims, as PyTorch's `checkIsMatrix`/`checkFloatingOrComplex`. */
export function requireMatrix(op: string, a: Tensor, name = "A"): void {
  if (a.dtype !== "float32" && a.dtype !== "float64") {
    throw new TypeError(
      `${op}: Expected a floating point tensor as input. Got ${a.dtype}`,
    );
  }
  if (a.ndim < 2) {
    throw new RangeError(
      `${op}: The input tensor ${name} must have at least 2 dimensions (got shape ${
        formatShape(a.shape)
      })`,
    );
  }
}

/** `A` must be batches of square float matrices. */
export function requireSquare(op: string, a: Tensor, name = "A"): number {
  requireMatrix(op, a, name);
  const [m, n] = a.shape.slice(-2);
  if (m !== n) {
    throw new RangeError(
      `${op}: ${name} must be batches of square matrices, but they are ${m} by ${n} matrices (shape ${
        formatShape(a.shape)
      })`,
    );
  }
  return n;
}

/** The matrix transpose over the last two dims. */
export const mT = (x: Tensor): Tensor => x.transpose(-1, -2);

/**
 * Each matrix's largest |entry| (`[..., 1, 1]`; 1 for a zero or empty one).
 * Dividing by it first keeps sums of squared entries clear of overflow and
 * underflow (LAPACK scales its norms for the same reason).
 */
export function matrixScale(a: Tensor): Tensor {
  if (a.numel() === 0) {
    return zeros([...a.shape.slice(0, -2), 1, 1], { dtype: a.dtype, device: a.device }).add(1);
  }
  const largest = a.abs().amax([-2, -1], true);
  return largest.where(largest.gt(0), 1);
}

/** 0, 1, …, n-1 in `like`'s dtype and device. */
export const indices = (n: number, like: Tensor): Tensor =>
  arange(n, { dtype: like.dtype, device: like.device });

/**
 * Raises, at the next read on `info`'s device, the first batch element whose
 * `info` (a 1-based failing index per matrix, 0 when fine) is nonzero, as
 * PyTorch's LAPACK checks word it: a {@link LinAlgError} where PyTorch raises
 * one, else (`linAlgError` false) a plain RangeError.
 */
export function failLater(
  op: string,
  info: Tensor,
  batched: boolean,
  message: (index: number) => string,
  linAlgError = true,
): void {
  if (info.numel() === 0) return;
  checkLater(info.reshape([info.numel()]), (host) => {
    const i = host.findIndex((v) => v !== 0);
    if (i < 0) return null;
    const text = `${op}: ${batched ? `(Batch element ${i}): ` : ""}${message(host[i])}`;
    // A verdict that throws fails the check with its own error (the stream keeps Error objects).
    if (linAlgError) throw new LinAlgError(text);
    return text;
  });
}
