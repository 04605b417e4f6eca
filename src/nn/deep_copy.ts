/**
 * `copy.deepcopy` of a module, for the utilities that copy one (the
 * fusions of `nn.utils`, `optim.swaUtils.AveragedModel`).
 * @module
 */

import { unshareHooks } from "./hooks.ts";
import { type Module, Parameter } from "./module.ts";

/**
 * A deep copy of `module` (PyTorch's `copy.deepcopy`): fresh storage for
 * every parameter and buffer, the same classes and prototypes (so weight-
 * norm and pruning reparametrisations carry over), hooks copied.
 */
export function deepCopy<M extends Module>(module: M): M {
  const copy = module._replicateWith((t, kind) => {
    const c = t.detach().clone();
    if (kind === "parameter") return new Parameter(c, t.requiresGrad);
    c.storage.persistent = true;
    return c;
  });
  for (const m of copy.modules()) unshareHooks(m);
  return copy;
}
