/**
 * Softmax and log-softmax along one dim, numerically stable in one kernel.
 * @module
 */

import { record } from "../autograd.ts";
import { axisSplit, normalizeDim } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { empty, launch, requireFloat } from "./util.ts";
import { exp, mul, sub } from "./elementwise.ts";
import { sum } from "./reduce.ts";

function softmaxRaw(x: Tensor, dim: number, log: boolean): Tensor {
  const op = log ? "logSoftmax" : "softmax";
  requireFloat(op, x);
  const d = normalizeDim(dim, x.ndim, op);
  const out = empty(x.shape, x.dtype, x.device);
  if (out.numel() === 0) return out;
  const { outer, size, inner } = axisSplit(x.shape, d);
  const xb = x.storage.buffer(op);
  const ob = out.storage.buffer();
  launch(x.device, (k) => k.softmax(xb, ob, { outer, size, inner, dtype: x.dtype, log }));
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
