/**
 * Tensor methods whose functions live above the composite ops (linalg's
 * `det`, `slogdet`, `matrixPower`, `cross`, `cholesky`, `qr` with
 * `torch.*`'s conventions, and `orgqr`), nn.functional's `hardshrink` and
 * `prelu`, special's incomplete gamma functions as `igamma`/`igammac`) and
 * the method-only conveniences of `../ops_composite/tensor_utils.ts`
 * (`newZeros`, `type`, `stride`, `unfold`, ...): installed on Tensor here,
 * where every layer may be imported (see `TensorOps` in `../tensor.ts`).
 * @module
 */

import { installTensorOps, Tensor } from "../tensor.ts";
import * as tensorUtils from "../ops_composite/tensor_utils.ts";
import * as lu from "../linalg/lu.ts";
import { cross as linalgCross } from "../linalg/products.ts";
import { cholesky as linalgCholesky } from "../linalg/cholesky.ts";
import { qr as linalgQr } from "../linalg/qr.ts";
import { householderProduct } from "../linalg/decompositions.ts";
import { hardshrink as shrink, prelu as preluOf } from "../nn/functional/activation_extra.ts";
import { gammainc, gammaincc } from "../ops_composite/special_functions.ts";
import type { TensorLike } from "../ops/util.ts";
import { formatShape } from "../shape.ts";

export {
  adjoint,
  asStrided,
  elementSize,
  frexp,
  getDevice,
  H,
  isFloatingPoint,
  isNonzero,
  isSameSize,
  isSigned,
  mH,
  mT,
  narrowCopy,
  newEmpty,
  newFull,
  newOnes,
  newTensor,
  newZeros,
  splitWithSizes,
  stride,
  sumToSize,
  T,
  tolist,
  type,
  unfold,
} from "../ops_composite/tensor_utils.ts";
export type { NewTensorData, NewTensorOptions } from "../ops_composite/tensor_utils.ts";

/** The determinant of each square matrix in `A` (`torch.det`; see `linalg.det`). */
export function det(A: Tensor): Tensor {
  return lu.det(A);
}

/** `[sign, logabsdet]` of each determinant (`torch.slogdet`; see `linalg.slogdet`). */
export function slogdet(A: Tensor): [Tensor, Tensor] {
  return lu.slogdet(A);
}

/** `A` to the integer power `n` (`torch.matrix_power`; see `linalg.matrixPower`). */
export function matrixPower(A: Tensor, n: number): Tensor {
  return lu.matrixPower(A, n);
}

/**
 * The cross product of 3-vectors along `dim`, as `torch.cross`: without
 * `dim`, the first dim of `a` whose size is 3 (PyTorch 1.13's default,
 * where `linalg.cross` takes the last dim).
 */
export function cross(a: Tensor, b: Tensor, dim?: number): Tensor {
  if (!(a instanceof Tensor) || !(b instanceof Tensor)) {
    throw new TypeError(`cross: both inputs must be Tensors, got ${typeof a} and ${typeof b}`);
  }
  if (dim === undefined) {
    dim = a.shape.indexOf(3);
    if (dim < 0) {
      throw new RangeError(
        `cross: no dimension of size 3 in the input (shape ${formatShape(a.shape)})`,
      );
    }
  }
  return linalgCross(a, b, { dim });
}

/**
 * The Cholesky factor of each symmetric positive-definite matrix, as
 * `torch.cholesky`: lower (`A = LLᵀ`) unless `upper` (`A = UᵀU`).
 */
export function cholesky(A: Tensor, upper = false): Tensor {
  if (typeof upper !== "boolean") {
    throw new TypeError(`cholesky: upper must be a boolean, got ${typeof upper}`);
  }
  return linalgCholesky(A, { upper });
}

/**
 * `[Q, R]` of each matrix, as `torch.qr`: reduced unless `some` is false
 * (then complete, `Q` square), as `linalg.qr`'s modes.
 */
export function qr(A: Tensor, some = true): [Tensor, Tensor] {
  if (typeof some !== "boolean") {
    throw new TypeError(`qr: some must be a boolean, got ${typeof some}`);
  }
  return linalgQr(A, { mode: some ? "reduced" : "complete" });
}

/** 0 where `-lambd <= x <= lambd`, else `x` (`Tensor.hardshrink`; see `nn.functional.hardshrink`). */
export function hardshrink(x: Tensor, lambd = 0.5): Tensor {
  return shrink(x, { lambd });
}

/** `x` where positive, else `weight · x` per channel (`torch.prelu`; see `nn.functional.prelu`). */
export function prelu(x: Tensor, weight: Tensor): Tensor {
  return preluOf(x, weight);
}

/**
 * The product of the Householder reflectors of `A` and `tau`
 * (`Tensor.orgqr`; see `linalg.householderProduct`).
 */
export function orgqr(A: Tensor, tau: Tensor): Tensor {
  return householderProduct(A, tau);
}

/** The regularized lower incomplete gamma function (`torch.igamma`; see `special.gammainc`). */
export function igamma(input: TensorLike, other: TensorLike): Tensor {
  return gammainc(input, other);
}

/** The regularized upper incomplete gamma function (`torch.igammac`; see `special.gammaincc`). */
export function igammac(input: TensorLike, other: TensorLike): Tensor {
  return gammaincc(input, other);
}

installTensorOps({
  ...tensorUtils,
  det,
  slogdet,
  matrixPower,
  cross,
  cholesky,
  qr,
  hardshrink,
  prelu,
  orgqr,
  igamma,
  igammac,
});
