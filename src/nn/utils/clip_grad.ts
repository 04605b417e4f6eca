/**
 * Gradient clipping, as `torch.nn.utils.clip_grad_norm_` and
 * `clip_grad_value_`. Both work in place on the gradients, queue their work
 * without waiting, and accept parameters spread over several devices.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import type { Device } from "../../device.ts";
import type { DType } from "../../dtype.ts";
import { full } from "../../ops/factory.ts";
import { stack } from "../../ops/view.ts";
import { formatShape } from "../../shape.ts";
import { tidy } from "../../storage.ts";
import { Tensor } from "../../tensor.ts";
import { pNorm } from "../util.ts";
import { shardedGradientAdvice } from "./sharded_grad.ts";

/** Options of {@link clipGradNorm_}. */
export interface ClipGradNormOptions {
  /** The p of the p-norm (default 2); `Infinity` or `"inf"` for the largest absolute value. */
  normType?: number | "inf";
}

/** `refuseShards`: a norm over FSDP shards would be one rank's, not the model's (clipping by value is elementwise: fine). */
function gradsOf(
  op: string,
  parameters: Tensor | Iterable<Tensor>,
  refuseShards = false,
): Tensor[] {
  if (parameters instanceof Tensor) parameters = [parameters];
  if (parameters === null || typeof parameters !== "object" || !(Symbol.iterator in parameters)) {
    throw new TypeError(`${op}: parameters must be a Tensor or an iterable of tensors`);
  }
  const grads: Tensor[] = [];
  let i = 0;
  for (const p of parameters) {
    if (!(p instanceof Tensor)) {
      throw new TypeError(`${op}: parameter ${i} is not a Tensor (got ${typeof p})`);
    }
    const g = p.grad;
    const advice = refuseShards ? shardedGradientAdvice(p) : undefined;
    if (advice !== undefined) {
      throw new Error(
        `${op}: parameter ${i} (shape ${
          formatShape(p.shape)
        }) holds only this rank's shard of a gradient, so its norm is not the model's; ${advice}`,
      );
    }
    if (g) {
      if (g.storage.disposed) {
        throw new Error(
          `${op}: the gradient of parameter ${i} (shape ${formatShape(p.shape)}) was disposed`,
        );
      }
      grads.push(g);
    }
    i++;
  }
  return grads;
}

/** `t` on `device` in `dtype`, cast on whichever side holds both dtypes (float64 is cpu-only). */
function moveTo(t: Tensor, device: Device, dtype: DType): Tensor {
  if (t.device === device) return t.dtype === dtype ? t : t.to(dtype);
  return device.backendDevice.dtypes.includes(t.dtype)
    ? t.to(device).to(dtype)
    : t.to(dtype).to(device);
}

/**
 * Scales the gradients of `parameters` in place so that their combined
 * p-norm (the norm of the per-tensor norms, as if all gradients were one
 * vector) is at most `maxNorm`: each gradient is multiplied by
 * `min(1, maxNorm / (total + 1e-6))`. Returns the total norm before
 * clipping, as a 0-dimensional tensor on the first gradient's device (the
 * per-device norms are brought there, as PyTorch does). Parameters without
 * a gradient are skipped; with none, the result is a zero tensor.
 *
 * The flat shards of a `distributed.fsdp.FullyShardedDataParallel` sharded
 * over several ranks are an error naming `clipGradNorm_` of the FSDP root:
 * their local norm is not the model's (PyTorch silently clips by it).
 *
 * As in PyTorch, a non-finite total norm makes every gradient NaN; read the
 * returned norm (`await norm.item()`) to detect it.
 *
 * @example
 * ```ts
 * loss.backward();
 * const total = nn.utils.clipGradNorm_(model.parameters(), 1.0);
 * opt.step();
 * ```
 */
export function clipGradNorm_(
  parameters: Tensor | Iterable<Tensor>,
  maxNorm: number,
  options: ClipGradNormOptions = {},
): Tensor {
  const op = "clipGradNorm_";
  if (typeof maxNorm !== "number" || Number.isNaN(maxNorm)) {
    throw new TypeError(`${op}: maxNorm must be a number, got ${String(maxNorm)}`);
  }
  const requested = options.normType ?? 2;
  const p = requested === "inf" ? Infinity : requested;
  if (typeof p !== "number" || !(p > 0)) {
    throw new RangeError(
      `${op}: normType must be a positive number or "inf", got ${JSON.stringify(requested)}`,
    );
  }
  const grads = gradsOf(op, parameters, true);
  if (grads.length === 0) return full([], 0);
  const { device, dtype } = grads[0];
  return tidy(() =>
    noGrad(() => {
      // One gradient at a time, each in a scope of its own: their temporaries (as large as
      // the gradients) were all live at once.
      const norms = grads.map((g) => tidy(() => moveTo(pNorm(g, p), device, dtype)));
      const total = p === Infinity
        ? (norms.length === 1 ? norms[0] : stack(norms).max())
        : pNorm(stack(norms), p);
      const coefficient = full([], maxNorm, { dtype, device }).div(total.add(1e-6)).clamp(
        undefined,
        1,
      );
      const onDevice = new Map([[`${device}|${dtype}`, coefficient]]);
      for (const g of grads) {
        const key = `${g.device}|${g.dtype}`;
        let c = onDevice.get(key);
        if (!c) onDevice.set(key, c = moveTo(coefficient, g.device, g.dtype));
        const onThis = c;
        tidy(() => g._assign(g.mul(onThis)));
      }
      return total;
    })
  );
}

/**
 * Clamps every gradient of `parameters` into `[-clipValue, clipValue]` in
 * place, as `torch.nn.utils.clip_grad_value_`. Parameters without a gradient
 * are skipped.
 */
export function clipGradValue_(parameters: Tensor | Iterable<Tensor>, clipValue: number): void {
  const op = "clipGradValue_";
  if (typeof clipValue !== "number" || !(clipValue >= 0)) {
    throw new RangeError(`${op}: clipValue must be a number >= 0, got ${String(clipValue)}`);
  }
  const grads = gradsOf(op, parameters);
  tidy(() => noGrad(() => grads.forEach((g) => g._assign(g.clamp(-clipValue, clipValue)))));
}
