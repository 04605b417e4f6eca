/**
 * Softmax and log-softmax along one dim: one fused kernel where the backend
 * has it, else composed from max, exp, sum and log kernels (the same
 * max-subtracting formula).
 * @module
 */

import { record } from "../autograd.ts";
import { axisSplit, normalizeDim } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { empty, hasKernel, launch, requireFloat } from "./util.ts";
import { binaryRaw, exp, mul, sub, unaryRaw } from "./elementwise.ts";
import { reduceKeepdim, sum } from "./reduce.ts";

/** `x - m - log Σ exp(x - m)` or `exp(x - m) / Σ exp(x - m)` from primitive kernels. */
function composed(x: Tensor, dim: number, log: boolean): Tensor {
  const m = reduceKeepdim("max", x, dim);
  const shifted = binaryRaw("sub", x, m);
  m.dispose();
  const e = unaryRaw("exp", shifted);
  const s = reduceKeepdim("sum", e, dim);
  let out: Tensor;
  if (log) {
    const logSum = unaryRaw("log", s);
    out = binaryRaw("sub", shifted, logSum);
    logSum.dispose();
  } else {
    out = binaryRaw("div", e, s);
  }
  for (const t of [shifted, e, s]) t.dispose();
  return out;
}

function softmaxRaw(x: Tensor, dim: number, log: boolean): Tensor {
  const op = log ? "logSoftmax" : "softmax";
  requireFloat(op, x);
  const d = normalizeDim(dim, x.ndim, op);
  if (x.numel() > 0 && !hasKernel(x.device, "softmax")) return composed(x, d, log);
  const out = empty(x.shape, x.dtype, x.device);
  if (out.numel() === 0) return out;
  const { outer, size, inner } = axisSplit(x.shape, d);
  launch(x.device, "softmax", {
    x: x.storage.buffer(op),
    out: out.storage.buffer(),
    outer,
    size,
    inner,
    log,
    dtype: x.dtype,
  });
  return out;
}

/** softmax along `dim`. */
export function softmax(x: Tensor, dim: number): Tensor {
  const y = softmaxRaw(x, dim, false);
  return record("softmax", [x], y, ([g]) => [mul(y, sub(g!, sum(mul(g!, y), dim, true)))]);
}

/** log(softmax) along `dim`, computed without forming softmax. */
export function logSoftmax(x: Tensor, dim: number): Tensor {
  const y = softmaxRaw(x, dim, true);
  return record("logSoftmax", [x], y, ([g]) => [sub(g!, mul(exp(y), sum(g!, dim, true)))]);
}
