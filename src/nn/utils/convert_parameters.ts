/**
 * Parameters as one flat vector and back, as
 * `torch.nn.utils.parameters_to_vector` and `vector_to_parameters`.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { cat } from "../../ops/view.ts";
import { formatShape } from "../../shape.ts";
import { tidy } from "../../storage.ts";
import { Tensor } from "../../tensor.ts";

function tensorsOf(op: string, parameters: Iterable<Tensor>): Tensor[] {
  if (parameters instanceof Tensor) return [parameters];
  if (parameters === null || typeof parameters !== "object" || !(Symbol.iterator in parameters)) {
    throw new TypeError(
      `${op}: parameters must be an iterable of tensors, got ${
        parameters === null ? "null" : typeof parameters
      }`,
    );
  }
  const list = [...parameters];
  list.forEach((p, i) => {
    if (!(p instanceof Tensor)) {
      throw new TypeError(
        `${op}: parameter ${i} is not a Tensor (got ${p === null ? "null" : typeof p})`,
      );
    }
  });
  return list;
}

function sameDeviceAll(op: string, tensors: Tensor[], names: (i: number) => string): void {
  const first = tensors[0]?.device;
  const other = tensors.findIndex((t) => t.device !== first);
  if (other > 0) {
    throw new Error(
      `${op}: ${names(other)} is on ${tensors[other].device}, ${
        names(0)
      } on ${first}; all must be on one device`,
    );
  }
}

/**
 * Every parameter flattened and concatenated, in order, into one 1-D tensor,
 * as `torch.nn.utils.parameters_to_vector` (differentiable; mixed float
 * dtypes are promoted as `cat` promotes them). The parameters must share
 * one device.
 */
export function parametersToVector(parameters: Iterable<Tensor>): Tensor {
  const op = "parametersToVector";
  const list = tensorsOf(op, parameters);
  if (list.length === 0) throw new RangeError(`${op}: expected at least one parameter, got none`);
  sameDeviceAll(op, list, (i) => `parameter ${i}`);
  return cat(list.map((p) => p.reshape([p.numel()])));
}

/**
 * Copies the slices of the 1-D `vec` into `parameters` in order (each slice
 * reshaped to its parameter's shape and converted to its dtype), in place
 * and without recording a gradient, as `torch.nn.utils.vector_to_parameters`.
 * `vec` must have exactly as many elements as the parameters together (PyTorch
 * ignores a longer vector's tail; here that is an error too) and be on
 * their device. The parameters keep their own storage: later changes to
 * `vec` do not show through (PyTorch makes them views of `vec`).
 */
export function vectorToParameters(vec: Tensor, parameters: Iterable<Tensor>): void {
  const op = "vectorToParameters";
  if (!(vec instanceof Tensor)) {
    throw new TypeError(
      `${op}: vec must be a Tensor, got ${vec === null ? "null" : typeof vec}`,
    );
  }
  if (vec.ndim !== 1) {
    throw new RangeError(`${op}: vec must be 1-dimensional, got shape ${formatShape(vec.shape)}`);
  }
  const list = tensorsOf(op, parameters);
  sameDeviceAll(op, [vec, ...list], (i) => (i === 0 ? "vec" : `parameter ${i - 1}`));
  const total = list.reduce((n, p) => n + p.numel(), 0);
  if (vec.numel() !== total) {
    throw new RangeError(
      `${op}: vec has ${vec.numel()} elements but the ${list.length} parameters have ${total} (shapes ${
        list.map((p) => formatShape(p.shape)).join(", ")
      })`,
    );
  }
  noGrad(() =>
    tidy(() => {
      let offset = 0;
      for (const p of list) {
        const n = p.numel();
        const slice = vec.narrow(0, offset, n).reshape(p.shape);
        p._assign(slice.dtype === p.dtype ? slice : slice.to(p.dtype));
        offset += n;
      }
    })
  );
}
