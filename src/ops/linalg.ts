/**
 * Matrix products: `matmul` with PyTorch's 1-D and batch-broadcasting rules,
 * and `linear` (x @ Wᵀ + b) whose transposes cost no copy.
 * @module
 */

import { isGradEnabled, record } from "../autograd.ts";
import { broadcastShapes, formatShape, numelOf } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { commonDevice, empty, hasKernel, launch, requireFloat } from "./util.ts";
import { add } from "./elementwise.ts";
import { sumDims } from "./reduce.ts";
import { reshape } from "./view.ts";

/** Options of {@link matmulRaw}: read an operand's last two dims transposed. */
export interface MatmulOptions {
  transA?: boolean;
  transB?: boolean;
}

/**
 * One batched matmul kernel, no graph. `a` is [Ba, m, k] ([Ba, k, m] with
 * transA) or 2-D (Ba = 1); likewise `b`. Ba and Bb are equal or 1. Gives
 * [B, m, n], or [m, n] when both are 2-D.
 */
export function matmulRaw(a: Tensor, b: Tensor, options: MatmulOptions = {}): Tensor {
  return product(a, b, options, null);
}

/** The product, plus `bias` ([n], the fused `addmm` kernel) on every row when given. */
function product(a: Tensor, b: Tensor, options: MatmulOptions, bias: Tensor | null): Tensor {
  const transA = options.transA ?? false;
  const transB = options.transB ?? false;
  const batchA = a.ndim === 3 ? a.shape[0] : 1;
  const batchB = b.ndim === 3 ? b.shape[0] : 1;
  const [ar, ac] = a.shape.slice(-2);
  const [br, bc] = b.shape.slice(-2);
  const [m, k] = transA ? [ac, ar] : [ar, ac];
  const [k2, n] = transB ? [bc, br] : [br, bc];
  if (k !== k2 || (batchA !== batchB && batchA !== 1 && batchB !== 1)) {
    throw new RangeError(
      `matmul: shapes ${formatShape(a.shape)}${transA ? "ᵀ" : ""} and ${formatShape(b.shape)}${
        transB ? "ᵀ" : ""
      } cannot be multiplied (${k} vs ${k2})`,
    );
  }
  // A batch of 1 broadcasts against any other, 0 included.
  const batch = batchA === 1 ? batchB : batchA;
  const device = commonDevice("matmul", a, b);
  const shape = a.ndim === 3 || b.ndim === 3 ? [batch, m, n] : [m, n];
  const out = empty(shape, a.dtype, device);
  if (numelOf(shape) === 0) return out;
  const ob = out.storage.buffer();
  if (k === 0 && !bias) {
    launch(device, "fill", { out: ob, numel: numelOf(shape), value: 0, dtype: a.dtype });
    return out;
  }
  const args = {
    a: a.storage.buffer("matmul"),
    b: b.storage.buffer("matmul"),
    out: ob,
    batch,
    m,
    n,
    k,
    aBatchStride: batchA === 1 ? 0 : m * k,
    bBatchStride: batchB === 1 ? 0 : k * n,
    transA,
    transB,
    dtype: a.dtype,
  };
  if (bias) launch(device, "addmm", { ...args, bias: bias.storage.buffer("linear bias") });
  else launch(device, "matmul", args);
  return out;
}

/** {@link matmulRaw}, or under createGraph (grad mode on in backward) the recorded product. */
function mm(a: Tensor, b: Tensor, options: MatmulOptions = {}): Tensor {
  if (!isGradEnabled()) return matmulRaw(a, b, options);
  return matmul(options.transA ? a.transpose(-2, -1) : a, options.transB ? b.transpose(-2, -1) : b);
}

/** The batched product of two 3-D tensors with batch 1 broadcasting, with its gradient. */
function bmm(a3: Tensor, b3: Tensor): Tensor {
  const out = matmulRaw(a3, b3);
  const batch = out.shape[0];
  return record("matmul", [a3, b3], out, ([g]) => {
    let ga: Tensor | null = null;
    let gb: Tensor | null = null;
    if (a3.requiresGrad) {
      ga = mm(g!, b3, { transB: true });
      if (a3.shape[0] === 1 && batch !== 1) ga = sumDims(ga, [0], true);
    }
    if (b3.requiresGrad) {
      if (b3.shape[0] === 1 && batch !== 1) {
        const [, m, k] = a3.shape;
        gb = mm(a3.reshape([batch * m, k]), g!.reshape([batch * m, g!.shape[2]]), {
          transA: true,
        })
          .reshape(b3.shape);
      } else gb = mm(a3, g!, { transA: true });
    }
    return [ga, gb];
  });
}

/** Matrix product with PyTorch's rules for 1-D operands and batch broadcasting. */
export function matmul(a: Tensor, b: Tensor): Tensor {
  requireFloat("matmul", a);
  requireFloat("matmul", b);
  commonDevice("matmul", a, b);
  if (a.ndim === 0 || b.ndim === 0) {
    throw new RangeError(
      `matmul: both arguments need at least 1 dimension, got shapes ${formatShape(a.shape)} and ${
        formatShape(b.shape)
      }`,
    );
  }
  if (a.dtype !== b.dtype) {
    throw new TypeError(
      `matmul: dtypes differ (${a.dtype} and ${b.dtype}); convert one with .to()`,
    );
  }
  const a2 = a.ndim === 1 ? reshape(a, [1, a.shape[0]], "matmul", true) : a;
  const b2 = b.ndim === 1 ? reshape(b, [b.shape[0], 1], "matmul", true) : b;
  const [m, k] = a2.shape.slice(-2);
  const [k2, n] = b2.shape.slice(-2);
  if (k !== k2) {
    throw new RangeError(
      `matmul: shapes ${formatShape(a.shape)} and ${
        formatShape(b.shape)
      } cannot be multiplied (${k} vs ${k2})`,
    );
  }
  const batchShape = broadcastShapes(
    a2.shape.slice(0, -2),
    b2.shape.slice(0, -2),
    "matmul (batch dims)",
  );
  const batch = numelOf(batchShape);
  const as3 = (t: Tensor, rows: number, cols: number) => {
    const own = numelOf(t.shape.slice(0, -2));
    const full = own === batch ? t : own === 1 ? t : t.expand([...batchShape, rows, cols]);
    return reshape(full, [own === 1 ? 1 : batch, rows, cols], "matmul", true);
  };
  // The product's own memory: an in-place op on it is allowed (nn.ReLU(inplace) after a matmul).
  const shape = [...batchShape, ...(a.ndim === 1 ? [] : [m]), ...(b.ndim === 1 ? [] : [n])];
  return reshape(bmm(as3(a2, m, k), as3(b2, k, n)), shape, "matmul", true);
}

/** `x @ weightᵀ + bias` over the last dim of `x`, as `torch.nn.functional.linear`. */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor | null): Tensor {
  requireFloat("linear", x);
  const [outF, inF] = weight.shape;
  if (weight.ndim !== 2 || x.ndim < 1 || x.shape[x.ndim - 1] !== inF) {
    throw new RangeError(
      `linear: input of shape ${formatShape(x.shape)} does not match weight of shape ${
        formatShape(weight.shape)
      } (expected last dim ${inF})`,
    );
  }
  commonDevice("linear", x, weight, ...(bias ? [bias] : []));
  if (weight.dtype !== x.dtype || (bias && bias.dtype !== x.dtype)) {
    throw new TypeError(
      `linear: dtypes differ (input ${x.dtype}, weight ${weight.dtype}${
        bias ? `, bias ${bias.dtype}` : ""
      }); convert with .to()`,
    );
  }
  if (
    bias && (bias.ndim > 1 || (bias.ndim === 1 && bias.shape[0] !== outF && bias.shape[0] !== 1))
  ) {
    throw new RangeError(
      `linear: bias of shape ${formatShape(bias.shape)} does not match weight of shape ${
        formatShape(weight.shape)
      } (expected [${outF}])`,
    );
  }
  const rows = numelOf(x.shape.slice(0, -1));
  const x2 = reshape(x, [rows, inF], "linear", true);
  // PyTorch's addmm where the backend fuses it: the bias added by the product's kernel.
  const fused = bias?.ndim === 1 && bias.shape[0] === outF && hasKernel(x.device, "addmm");
  const y = product(x2, weight, { transB: true }, fused ? bias! : null);
  const out = record("linear", fused ? [x2, weight, bias!] : [x2, weight], y, ([g]) => {
    // The input's gradient last: the activation's backward that comes next may
    // be fused into its product by the backend (webgpu's epilogues).
    const gw = weight.requiresGrad ? mm(g!, x2, { transA: true }) : null;
    const gb = fused && bias!.requiresGrad ? sumDims(g!, [0], false) : null;
    return [x2.requiresGrad ? mm(g!, weight) : null, gw, gb].slice(0, fused ? 3 : 2);
  });
  const withBias = bias && !fused ? add(out, bias) : out;
  return reshape(withBias, [...x.shape.slice(0, -1), outF], "linear", true);
}
