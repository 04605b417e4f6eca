/**
 * The seed gradients of a backward pass over several roots, checked
 * against the roots (shared by `autograd.grad` and `autograd.backward`).
 * @module
 */

import { formatShape, sameShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { full } from "../ops/mod.ts";

/**
 * @internal The seed of each output's backward: its entry of `gradOutputs`
 * (checked, converted to the output's dtype), or 1 for a one-element output
 * given null. `op` names the caller and `name` the gradients in errors.
 */
export function seedsFor(
  outs: Tensor[],
  gradOutputs: Tensor | null | undefined | readonly (Tensor | null | undefined)[],
  op: string,
  name = "gradOutputs",
): Tensor[] {
  const given = gradOutputs === undefined || gradOutputs === null
    ? outs.map(() => null)
    : Array.isArray(gradOutputs)
    ? gradOutputs
    : [gradOutputs];
  if (given.length !== outs.length) {
    throw new RangeError(
      `${op}: got ${given.length} ${name} for ${outs.length} outputs (one each, null for 1)`,
    );
  }
  return outs.map((out, i) => {
    if (!out.requiresGrad) {
      throw new Error(
        `${op}: element ${i} of tensors does not require grad and does not have a grad_fn (output ${
          describe(out)
        })`,
      );
    }
    const g = given[i];
    if (g === null || g === undefined) {
      if (out.numel() !== 1) {
        throw new Error(
          `${op}: grad can be implicitly created only for scalar outputs; output ${i} has shape ${
            formatShape(out.shape)
          }, pass ${name}`,
        );
      }
      return full([...out.shape], 1, { dtype: out.dtype, device: out.device });
    }
    if (!(g instanceof Tensor)) {
      throw new TypeError(
        `${op}: ${name} ${i} must be a Tensor or null, got ${typeof g}`,
      );
    }
    if (!sameShape(g.shape, out.shape)) {
      throw new RangeError(
        `${op}: mismatch in shape: ${name}[${i}] has a shape of ${
          formatShape(g.shape)
        } and outputs[${i}] has a shape of ${formatShape(out.shape)}`,
      );
    }
    if (g.device !== out.device) {
      throw new Error(
        `${op}: ${name}[${i}] is on ${g.device}, outputs[${i}] on ${out.device}`,
      );
    }
    // As PyTorch: a gradient of another dtype is converted to the output's.
    return g.dtype === out.dtype ? g : g.to(out.dtype);
  });
}

export function describe(t: Tensor): string {
  return `${t.dtype} of shape ${formatShape(t.shape)} on ${t.device}`;
}

/** `value` as a list of tensors (one tensor: a list of one); anything else is `op`'s error. */
export function tensorList(op: string, value: unknown, what: string): Tensor[] {
  const list = Array.isArray(value) ? value : [value];
  list.forEach((t, i) => {
    if (!(t instanceof Tensor)) {
      throw new TypeError(
        `${op}: ${what} ${i} must be a Tensor, got ${t === null ? "null" : typeof t}`,
      );
    }
  });
  return list;
}
