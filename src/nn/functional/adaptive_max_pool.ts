/**
 * `adaptiveMaxPool2d` and `adaptiveMaxPool1d`, as `torch.nn.functional`'s:
 * PyTorch's windows `[floor(i·in/out), ceil((i+1)·in/out))`, composed from
 * `narrow` and `max(dim)` (every backend, no kernel of their own).
 * @module
 */

import { cat } from "../../ops/view.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFloatInput } from "../util.ts";
import { poolArgmax } from "./pool_argmax.ts";
import { batched } from "./window_args.ts";

/**
 * Max over PyTorch's adaptive windows of `dim`: one `narrow` + `max` per
 * output position (the windows overlap or differ in size when `out` does
 * not divide the length, so no single view covers them).
 */
function adaptiveMax(x: Tensor, dim: number, out: number): Tensor {
  const size = x.shape[dim];
  if (size === out) return x;
  const parts: Tensor[] = [];
  for (let i = 0; i < out; i++) {
    const start = Math.floor((i * size) / out);
    const end = Math.ceil(((i + 1) * size) / out);
    const part = x.narrow(dim, start, end - start);
    parts.push(part.gather(dim, poolArgmax(part, dim)));
  }
  return parts.length === 1 ? parts[0] : cat(parts, dim);
}

function checkSize(op: string, value: number | null, fallback: number, given: unknown): number {
  const s = value ?? fallback;
  if (!Number.isInteger(s) || s < 1) {
    throw new RangeError(
      `${op}: outputSize must be a positive integer${
        op.endsWith("2d") ? " or a pair of them (or null)" : ""
      }, got ${JSON.stringify(given)}`,
    );
  }
  return s;
}

/**
 * Max pooling of [N, C, H, W] (or [C, H, W]) to `outputSize` (a number for
 * both dims, or [outH, outW] with null keeping that dim), as
 * `torch.nn.functional.adaptive_max_pool2d` (values only). The gradient goes
 * to each window's first maximum in row-major order, as PyTorch's: the max
 * is taken over columns, then rows, each picking its first maximum, which
 * lands on the same element. A window holding NaN gives NaN, as PyTorch;
 * its gradient goes to the last NaN in row-major order, as PyTorch's
 * kernel (each stage picks its last NaN).
 */
export function adaptiveMaxPool2d(
  input: Tensor,
  outputSize: number | readonly [number | null, number | null],
): Tensor {
  const op = "adaptiveMaxPool2d";
  const x = batched(op, input, 4);
  const [, , h, w] = x.shape;
  const sizes = typeof outputSize === "number" ? [outputSize, outputSize] : [...outputSize];
  if (sizes.length !== 2) {
    throw new RangeError(
      `${op}: outputSize must be a positive integer or a pair of them (or null), got ${
        JSON.stringify(outputSize)
      }`,
    );
  }
  const oh = checkSize(op, sizes[0], h, outputSize);
  const ow = checkSize(op, sizes[1], w, outputSize);
  if (h === 0 || w === 0) {
    throw new RangeError(`${op}: input of shape ${formatShape(input.shape)} has an empty window`);
  }
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => {
    let y = adaptiveMax(adaptiveMax(x, 3, ow), 2, oh);
    if (y === x) y = x.clone();
    return input.ndim === 3 ? y.squeeze(0) : y;
  });
}

/**
 * Max pooling of [N, C, L] (or [C, L]) to `outputSize` positions, as
 * `torch.nn.functional.adaptive_max_pool1d` (values only); the gradient goes
 * to each window's first maximum.
 */
export function adaptiveMaxPool1d(input: Tensor, outputSize: number | readonly [number]): Tensor {
  const op = "adaptiveMaxPool1d";
  checkFloatInput(op, input);
  if (input.ndim !== 2 && input.ndim !== 3) {
    throw new RangeError(
      `${op}: expected [N, C, L] or [C, L], got shape ${formatShape(input.shape)}`,
    );
  }
  const given = typeof outputSize === "number" ? outputSize : outputSize[0];
  if (typeof outputSize !== "number" && outputSize.length !== 1) {
    throw new RangeError(
      `${op}: outputSize must be a positive integer, got ${JSON.stringify(outputSize)}`,
    );
  }
  const out = checkSize(op, given, -1, outputSize);
  if (input.shape[input.ndim - 1] === 0) {
    throw new RangeError(`${op}: input of shape ${formatShape(input.shape)} has an empty window`);
  }
  return forwardScope(() => {
    const y = adaptiveMax(input, input.ndim - 1, out);
    return y === input ? input.clone() : y;
  });
}
