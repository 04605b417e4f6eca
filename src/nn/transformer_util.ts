/**
 * What the Transformer encoder, decoder and their layers share (internal: not
 * exported from `nn`): the feed-forward activation an option names, PyTorch's
 * `_get_clones`, and the causal mask an `isCausal` hint stands for.
 * @module
 */

import { ones } from "../ops/factory.ts";
import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import { unshareHooks } from "./hooks.ts";
import { ModuleList } from "./layers.ts";
import { Module, Parameter } from "./module.ts";
import { checkCount } from "./util.ts";

/** The function `activation` names (PyTorch's `_get_activation_fn`); `op` names the layer in errors. */
export function resolveActivation(
  op: string,
  activation: "relu" | "gelu" | ((x: Tensor) => Tensor) | undefined,
): (x: Tensor) => Tensor {
  const a = activation ?? "relu";
  if (typeof a === "function") return a;
  if (a === "relu") return F.relu;
  // PyTorch's F.gelu is the exact (erf) form.
  if (a === "gelu") return (x) => F.gelu(x);
  throw new RangeError(
    `${op}: activation must be "relu", "gelu" or a function, got ${JSON.stringify(a)}`,
  );
}

/**
 * `n` independent deep copies of `layer` (PyTorch's `_get_clones`): each starts
 * from `layer`'s values but owns its storage, and `layer` is none of them;
 * `what` names the argument in errors.
 */
export function cloneLayers(op: string, what: string, layer: Module, n: number): ModuleList {
  // 0 is allowed, as in PyTorch: the stack is then only its final norm, if any.
  checkCount(`${op}: numLayers`, n);
  if (!(layer instanceof Module)) throw new TypeError(`${op}: ${what} must be an nn.Module`);
  const copy = () =>
    layer._replicateWith((t, kind) => {
      const c = t.detach().clone();
      if (kind === "parameter") return new Parameter(c, t.requiresGrad);
      c.storage.persistent = true;
      return c;
    });
  const clones = Array.from({ length: n }, copy);
  // Hooks on `layer` are copied, not shared: removing one from a clone leaves the others.
  for (const clone of clones) for (const m of clone.modules()) unshareHooks(m);
  return new ModuleList(clones);
}

/**
 * [rows, cols] int32, nonzero above the diagonal: query i may attend to keys
 * 0..i only, aligned top-left as PyTorch's `is_causal` (`ones(L, S).tril()`).
 */
export function causalMask(rows: number, cols: number, like: Tensor): Tensor {
  return ones([rows, cols], { dtype: "int32", device: like.device }).triu(1);
}
