/**
 * Lookups by integer index, as `torch.nn.functional`'s sparse functions:
 * `embedding` and `oneHot`.
 * @module
 */

import { noGrad, record } from "../../autograd.ts";
import { where } from "../../ops/indexing.ts";
import { tidy } from "../../storage.ts";
import { arangeOn } from "../../ops/factory.ts";
import { formatShape } from "../../shape.ts";
import { Tensor } from "../../tensor.ts";
import {
  checkClassRange,
  checkFloatInput,
  checkLookup,
  checkMaxNorm,
  checkTensor,
  pNorm,
  resolvePaddingIdx,
  sameDevice,
} from "../util.ts";
import { owned } from "../../ops_composite/owned.ts";

/** Options of {@link embedding}. */
export interface EmbeddingOptions {
  /** Rows looked up at this index get no gradient (negative counts from the end). */
  paddingIdx?: number | null;
  /**
   * Before the lookup, every row looked up whose `normType`-norm exceeds
   * this is rescaled in place (under no-grad) to norm `maxNorm`, as
   * PyTorch's `max_norm`: `weight` itself changes.
   */
  maxNorm?: number | null;
  /** The p of the norm `maxNorm` bounds (default 2; `Infinity` for the largest |w|). */
  normType?: number;
  /**
   * Divide each row's gradient by how many times the mini-batch looks it up
   * (default false), as PyTorch's `scale_grad_by_freq`.
   */
  scaleGradByFreq?: boolean;
}

/**
 * `torch.embedding_renorm_`: the rows of `weight` listed in `indices` whose
 * p-norm exceeds `maxNorm` are multiplied in place by
 * `maxNorm / (norm + 1e-7)`, without recording a gradient.
 */
function renormLookedUp_(weight: Tensor, indices: Tensor, maxNorm: number, p: number): void {
  const rows = weight.shape[0];
  noGrad(() =>
    tidy(() => {
      const lookups = lookupCounts(indices, rows, weight.dtype);
      const norms = pNorm(weight, p, 1);
      const rescale = lookups.gt(0).mul(norms.gt(maxNorm));
      const scale = where(rescale, norms.add(1e-7).reciprocal().mul(maxNorm), 1);
      weight.mul_(scale.to(weight.dtype).reshape([rows, 1]));
    })
  );
}

/** How many times each of the `rows` rows appears in the int32 `indices` [n], as `dtype` [rows]. */
function lookupCounts(indices: Tensor, rows: number, dtype: Tensor["dtype"]): Tensor {
  const n = indices.numel();
  return indices.reshape([n, 1]).eq(arangeOn(rows, indices.device).reshape([1, rows])).to(dtype)
    .sum(0);
}

/**
 * Rows of `weight` [num, dim] picked by the int32 indices in `input` [*],
 * giving [*, dim], as `torch.nn.functional.embedding`. The gradient of a row
 * looked up several times is the sum over its uses (divided by the count
 * with `scaleGradByFreq`); rows looked up at `paddingIdx` get none. With
 * `maxNorm`, the looked-up rows of `weight` are first renormalised in place.
 */
export function embedding(input: Tensor, weight: Tensor, options: EmbeddingOptions = {}): Tensor {
  return owned(
    () => {
      const op = "embedding";
      checkTensor(op, "input", input);
      checkFloatInput(op, weight, "weight");
      checkLookup(op, input, weight);
      sameDevice(op, { input, weight });
      const [rows, dim] = weight.shape;
      const paddingIdx = resolvePaddingIdx(op, options.paddingIdx, rows);
      const { maxNorm, normType } = checkMaxNorm(op, options.maxNorm, options.normType ?? 2);
      const scaleGradByFreq = options.scaleGradByFreq ?? false;
      const flat = input.reshape([input.numel()]);
      // An index out of range matches no row here; indexSelect below names it.
      if (maxNorm !== null && flat.numel() > 0) renormLookedUp_(weight, flat, maxNorm, normType);
      let picked = weight.indexSelect(0, flat);
      if ((paddingIdx !== null || scaleGradByFreq) && picked.requiresGrad) {
        // The same values; only the gradient of each lookup is rescaled (padding
        // lookups: by 0; with scaleGradByFreq: by 1 / the count of its row).
        const same = new Tensor(picked.storage, picked.shape);
        picked = record("embedding", [picked], same, ([g]) => {
          const n = flat.numel();
          let factor: Tensor | null = null;
          if (scaleGradByFreq) {
            factor = lookupCounts(flat, rows, g!.dtype).reciprocal().indexSelect(0, flat);
          }
          if (paddingIdx !== null) {
            const keep = flat.ne(paddingIdx).to(g!.dtype);
            factor = factor ? factor.mul(keep) : keep;
          }
          return [g!.mul(factor!.reshape([n, 1]))];
        });
      }
      return picked.reshape([...input.shape, dim]);
    },
    input,
    weight,
  );
}

/**
 * One-hot encoding, as `torch.nn.functional.one_hot`: an int32 tensor of
 * class indices [*] gives an int32 tensor [*, numClasses] with a 1 at each
 * index. `numClasses` is required (PyTorch infers it from the largest value,
 * which would need reading the values back).
 */
export function oneHot(indices: Tensor, numClasses: number): Tensor {
  checkTensor("oneHot", "input", indices);
  if (indices.dtype !== "int32") {
    throw new TypeError(
      `oneHot: expected int32 class indices, got ${indices.dtype} (shape ${
        formatShape(indices.shape)
      })`,
    );
  }
  if (!Number.isInteger(numClasses) || numClasses < 1) {
    throw new RangeError(`oneHot: numClasses must be a positive integer, got ${numClasses}`);
  }
  checkClassRange("oneHot", indices, numClasses);
  return indices.unsqueeze(-1).eq(
    arangeOn(numClasses, indices.device).reshape([...indices.shape.map(() => 1), numClasses]),
  );
}
