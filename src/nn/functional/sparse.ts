/**
 * Lookups by integer index, as `torch.nn.functional`'s sparse functions:
 * `embedding` and `oneHot`.
 * @module
 */

import { record } from "../../autograd.ts";
import { arangeOn } from "../../ops/factory.ts";
import { formatShape } from "../../shape.ts";
import { Tensor } from "../../tensor.ts";
import {
  checkClassRange,
  checkFloatInput,
  checkTensor,
  resolvePaddingIdx,
  sameDevice,
} from "../util.ts";

/** Options of {@link embedding}. */
export interface EmbeddingOptions {
  /** Rows looked up at this index get no gradient (negative counts from the end). */
  paddingIdx?: number | null;
}

/**
 * Rows of `weight` [num, dim] picked by the int32 indices in `input` [*],
 * giving [*, dim], as `torch.nn.functional.embedding`. The gradient of a row
 * looked up several times is the sum over its uses; rows looked up at
 * `paddingIdx` get none.
 */
export function embedding(input: Tensor, weight: Tensor, options: EmbeddingOptions = {}): Tensor {
  const op = "embedding";
  checkTensor(op, "input", input);
  checkFloatInput(op, weight, "weight");
  if (input.dtype !== "int32") {
    throw new TypeError(
      `${op}: indices must be int32, got ${input.dtype} (shape ${formatShape(input.shape)})`,
    );
  }
  if (weight.ndim !== 2) {
    throw new RangeError(
      `${op}: weight must be 2-dimensional [num, dim], got shape ${formatShape(weight.shape)}`,
    );
  }
  sameDevice(op, { input, weight });
  const [rows, dim] = weight.shape;
  const paddingIdx = resolvePaddingIdx(op, options.paddingIdx, rows);
  const flat = input.reshape([input.numel()]);
  let picked = weight.indexSelect(0, flat);
  if (paddingIdx !== null && picked.requiresGrad) {
    // The same values; only the gradient of padding lookups is dropped.
    const same = new Tensor(picked.storage, picked.shape);
    picked = record("embedding", [picked], same, ([g]) => {
      const keep = flat.ne(paddingIdx).to(g!.dtype).reshape([flat.numel(), 1]);
      return [g!.mul(keep)];
    });
  }
  return picked.reshape([...input.shape, dim]);
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
