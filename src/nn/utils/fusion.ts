/**
 * Folding a following batch norm into a convolution or linear layer, as
 * `torch.nn.utils.fusion` (`fuseConvBnEval`, `fuseConvBnWeights`,
 * `fuseLinearBnEval`, `fuseLinearBnWeights`), and `skipInit`, as
 * `torch.nn.utils.skip_init`.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { getRngState, ones, setRngState, zeros } from "../../ops/factory.ts";
import { formatShape } from "../../shape.ts";
import { tidy } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { deepCopy } from "../deep_copy.ts";
import { Module, Parameter } from "../module.ts";

/** What the fusions read from a convolution or linear layer. */
interface Weighted extends Module {
  weight: Tensor;
  bias: Tensor | null;
}

/** What the fusions read from a batch norm. */
interface BatchNormLike extends Module {
  runningMean: Tensor | null;
  runningVar: Tensor | null;
  eps: number;
  weight: Tensor | null;
  bias: Tensor | null;
}

function checkBn(op: string, bn: BatchNormLike): { mean: Tensor; variance: Tensor } {
  if (!(bn instanceof Module) || !bn.runningMean || !bn.runningVar) {
    throw new TypeError(
      `${op}: bn must be a batch norm module with running statistics (trackRunningStats)`,
    );
  }
  return { mean: bn.runningMean, variance: bn.runningVar };
}

function checkEval(op: string, layer: Module, bn: Module): void {
  if (layer.training || bn.training) {
    throw new Error(`${op}: fusion only for eval! Call .eval() on both modules first`);
  }
}

/**
 * A deep copy of `layer` (both it and `bn` in evaluation mode, `bn` with
 * running statistics) with the weight and bias that `fuse` makes of its own
 * and `bn`'s.
 */
function fusedCopy<M extends Module>(
  op: string,
  layer: M,
  bn: Module,
  fuse: (
    weight: Tensor,
    bias: Tensor | null,
    mean: Tensor,
    variance: Tensor,
    bn: BatchNormLike,
  ) => [Parameter, Parameter],
): M {
  checkEval(op, layer, bn);
  const b = bn as BatchNormLike;
  const { mean, variance } = checkBn(op, b);
  const fused = deepCopy(layer);
  const f = fused as unknown as Weighted;
  [f.weight, f.bias] = fuse(f.weight, f.bias, mean, variance, b);
  return fused;
}

/** Options of {@link fuseConvBnWeights} and {@link fuseConvBnEval}. */
export interface FuseConvBnOptions {
  /** The convolution is transposed: its weight is [in, out / groups, ...] (default false). */
  transpose?: boolean;
}

/**
 * The weight and bias of a convolution followed by an evaluation-mode
 * batch norm as one convolution, as `torch.nn.utils.fuse_conv_bn_weights`:
 * `w · (γ / √(var + eps))` per output channel and
 * `(b - mean) · γ / √(var + eps) + β` (a missing conv bias or bn affine
 * parameter counts as 0, resp. γ = 1, β = 0). New Parameters.
 */
export function fuseConvBnWeights(
  convW: Tensor,
  convB: Tensor | null,
  bnRm: Tensor,
  bnRv: Tensor,
  bnEps: number,
  bnW: Tensor | null,
  bnB: Tensor | null,
  options: FuseConvBnOptions = {},
): [Parameter, Parameter] {
  const op = "fuseConvBnWeights";
  const channels = bnRm.numel();
  const axis = options.transpose ? 1 : 0;
  if (convW.ndim < 2 || convW.shape[axis] !== channels) {
    throw new RangeError(
      `${op}: conv weight of shape ${formatShape(convW.shape)} does not have the ${channels} ${
        options.transpose ? "output channels in dim 1 (transpose)" : "output channels in dim 0"
      } of the batch norm's running mean`,
    );
  }
  return noGrad(() =>
    tidy(() => {
      const like = { dtype: bnRm.dtype, device: bnRm.device };
      const b = convB ?? zeros([channels], like);
      const gamma = bnW ?? ones([channels], like);
      const beta = bnB ?? zeros([channels], like);
      const rsqrt = bnRv.add(bnEps).rsqrt();
      const shape = convW.shape.map((_, i) => (i === axis ? -1 : 1));
      const w = convW.mul(gamma.mul(rsqrt).reshape(shape));
      const fusedB = b.sub(bnRm).mul(rsqrt).mul(gamma).add(beta);
      return [new Parameter(w), new Parameter(fusedB)];
    })
  );
}

/**
 * A copy of `conv` with `bn` (both in evaluation mode) folded in, as
 * `torch.nn.utils.fuse_conv_bn_eval`: `fused(x)` equals `bn(conv(x))`.
 * `conv` and `bn` are left unchanged.
 */
export function fuseConvBnEval<M extends Module>(
  conv: M,
  bn: Module,
  options: FuseConvBnOptions = {},
): M {
  return fusedCopy(
    "fuseConvBnEval",
    conv,
    bn,
    (w, bias, mean, variance, b) =>
      fuseConvBnWeights(w, bias, mean, variance, b.eps, b.weight, b.bias, options),
  );
}

/**
 * The weight and bias of a linear layer followed by an evaluation-mode
 * batch norm as one linear layer, as `torch.nn.utils.fuse_linear_bn_weights`:
 * `w · (γ / √(var + eps))` per output row and `(b - mean) · γ / √(var + eps) + β`.
 * As PyTorch, the batch norm must be affine (γ and β given).
 */
export function fuseLinearBnWeights(
  linearW: Tensor,
  linearB: Tensor | null,
  bnRm: Tensor,
  bnRv: Tensor,
  bnEps: number,
  bnW: Tensor,
  bnB: Tensor,
): [Parameter, Parameter] {
  const op = "fuseLinearBnWeights";
  const channels = bnRm.numel();
  if (linearW.ndim !== 2 || linearW.shape[0] !== channels) {
    throw new RangeError(
      `${op}: linear weight of shape ${
        formatShape(linearW.shape)
      } does not have the ${channels} output features of the batch norm's running mean`,
    );
  }
  if (!bnW || !bnB) {
    throw new TypeError(`${op}: the batch norm must be affine (bnW and bnB given)`);
  }
  return noGrad(() =>
    tidy(() => {
      const b = linearB ?? zeros([channels], { dtype: bnRm.dtype, device: bnRm.device });
      const scale = bnW.mul(bnRv.add(bnEps).rsqrt());
      const w = linearW.mul(scale.unsqueeze(-1));
      const fusedB = b.sub(bnRm).mul(scale).add(bnB);
      return [new Parameter(w), new Parameter(fusedB)];
    })
  );
}

/**
 * A copy of `linear` with `bn` (both in evaluation mode, `bn` affine)
 * folded in, as `torch.nn.utils.fusion.fuse_linear_bn_eval`.
 */
export function fuseLinearBnEval<M extends Module>(linear: M, bn: Module): M {
  const op = "fuseLinearBnEval";
  return fusedCopy(op, linear, bn, (w, bias, mean, variance, b) => {
    if (!b.weight || !b.bias) {
      throw new TypeError(`${op}: the batch norm must be affine (weight and bias)`);
    }
    return fuseLinearBnWeights(w, bias, mean, variance, b.eps, b.weight, b.bias);
  });
}

/**
 * Builds `new ModuleClass(...args)` whose parameters and buffers are to be
 * overwritten, as `torch.nn.utils.skip_init`: their values are unspecified
 * (multigrad still fills them, there being no uninitialized memory), and the
 * seeded random stream is left as it was before the call, as PyTorch's
 * meta-device construction draws nothing.
 */
export function skipInit<A extends unknown[], M extends Module>(
  ModuleClass: new (...args: A) => M,
  ...args: A
): M {
  if (typeof ModuleClass !== "function" || !(ModuleClass.prototype instanceof Module)) {
    throw new TypeError(`skipInit: expected a Module class, got ${String(ModuleClass)}`);
  }
  const state = getRngState();
  try {
    return new ModuleClass(...args);
  } finally {
    setRngState(state);
  }
}
