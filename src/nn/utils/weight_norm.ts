/**
 * Weight normalization, as PyTorch 1.13's `torch.nn.utils.weight_norm` and
 * `remove_weight_norm`: a parameter `w` is replaced by a magnitude `w_g`
 * and a direction `w_v`, and `w = w_v · (w_g / ‖w_v‖)` is recomputed from
 * them whenever the module reads it.
 *
 * How the recomputation reaches every layer without a forward hook: layers
 * read their parameters from fields (`F.linear(x, this.weight, ...)`), so
 * `weightNorm` deletes the module's own `weight` field and gives the module
 * a one-object prototype, inserted between it and its class, whose `weight`
 * getter computes the weight from the module's `weight_g` and `weight_v`.
 * The field is no longer an own enumerable property, so `parameters()`,
 * the state dict and the repr do not list it; the module keeps its class
 * (`instanceof`, `constructor.name`); and a replica made by
 * `_replicateWith` (which keeps the prototype) computes its weight from its
 * own copies of `weight_g` and `weight_v`. `removeWeightNorm` takes that
 * prototype out again.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { normalizeDim } from "../../shape.ts";
import { forwardScope, tidy } from "../../storage.ts";
import { Tensor } from "../../tensor.ts";
import { isLazy } from "../lazy_state.ts";
import { type Module, Parameter } from "../module.ts";
import {
  checkModule,
  checkOwnParameter,
  checkParameterName,
  installComputed,
  specsOf as specsOfKey,
  uninstallComputed,
} from "./computed_parameter.ts";

/** Options of {@link weightNorm}. */
export interface WeightNormOptions {
  /** The parameter reparametrised (default `"weight"`). */
  name?: string;
  /**
   * The dim that keeps one norm per slice (default 0, the output channels).
   * `null` or -1 normalise the whole tensor at once (PyTorch 1.13 reads -1 so).
   */
  dim?: number | null;
}

interface Spec {
  readonly name: string;
  /** The dim kept, or null for one norm of the whole tensor. */
  readonly dim: number | null;
}

const SPEC = Symbol("weightNorm");

type Fields = Record<string, unknown>;

/** PyTorch's `norm_except_dim(v, 2, dim)`: the 2-norm over every dim but `dim`, kept with size 1. */
function normExceptDim(v: Tensor, dim: number | null): Tensor {
  if (dim === null) return v.norm(2);
  const others = v.shape.map((_, d) => d).filter((d) => d !== dim);
  // One element per slice: its norm is its magnitude.
  if (others.length === 0) return v.abs();
  return v.norm(2, others, true);
}

function computeWeight(m: Module, spec: Spec): Tensor {
  const g = (m as unknown as Fields)[`${spec.name}_g`];
  const v = (m as unknown as Fields)[`${spec.name}_v`];
  if (!(g instanceof Tensor) || !(v instanceof Tensor)) {
    throw new Error(
      `weightNorm: ${m.constructor.name} lacks the tensors "${spec.name}_g" and "${spec.name}_v" its "${spec.name}" is computed from`,
    );
  }
  return forwardScope(() => v.mul(g.div(normExceptDim(v, spec.dim))));
}

function specsOf(m: Module): { proto: object; spec: Spec }[] {
  return specsOfKey<Spec>(m, SPEC);
}

/**
 * Reparametrises `module`'s parameter `name` (default `"weight"`) as
 * PyTorch 1.13's `torch.nn.utils.weight_norm`: the parameter is replaced by
 * `${name}_g` (its 2-norm over every dim but `dim`, kept with size 1; a
 * 0-dim norm of the whole tensor when `dim` is null or -1) and `${name}_v`
 * (the parameter itself, sharing its storage), registered last, so a
 * Linear's state dict reads `bias`, `weight_g`, `weight_v` as PyTorch's.
 * `module[name]` becomes `${name}_v · (${name}_g / ‖${name}_v‖)`, a plain
 * Tensor (no longer a Parameter; assigning to it throws) computed afresh
 * each time it is read, so at every forward (PyTorch recomputes it in a
 * forward pre-hook: read between forwards, PyTorch's is the last forward's
 * value, this one is current), and the gradients flow to `_g` and `_v`.
 * Returns `module`.
 */
export function weightNorm<M extends Module>(module: M, options: WeightNormOptions = {}): M {
  const op = "weightNorm";
  checkModule(op, module);
  const name = options.name ?? "weight";
  checkParameterName(op, name);
  if (specsOf(module).some(({ spec }) => spec.name === name)) {
    throw new Error(
      `${op}: ${module.constructor.name} already has weightNorm on the parameter "${name}"`,
    );
  }
  const weight = (module as unknown as Fields)[name];
  checkOwnParameter(op, module, name, weight);
  if (isLazy(weight)) {
    throw new RangeError(
      `${op}: The module passed to \`WeightNorm\` can't have uninitialized parameters. ` +
        "Make sure to run the dummy forward before applying weight normalization",
    );
  }
  const requested = options.dim === undefined ? 0 : options.dim;
  let dim: number | null;
  if (requested === null || requested === -1) {
    dim = null;
  } else if (!Number.isInteger(requested)) {
    throw new TypeError(`${op}: dim must be an integer or null, got ${requested}`);
  } else {
    dim = normalizeDim(requested, weight.ndim, op);
  }
  const spec: Spec = { name, dim };
  const g = noGrad(() => tidy(() => new Parameter(normExceptDim(weight, dim))));
  const v = new Parameter(weight);
  delete (module as unknown as Fields)[name];
  module.registerParameter(`${name}_g`, g);
  module.registerParameter(`${name}_v`, v);
  installComputed(
    module,
    SPEC,
    name,
    spec,
    (m) => computeWeight(m, spec),
    (m) =>
      `${m.constructor.name}.${name} is computed by weightNorm from ${name}_g and ${name}_v; ` +
      `assign those, or call removeWeightNorm first`,
  );
  return module;
}

/**
 * Undoes {@link weightNorm} on `module`'s parameter `name` (default
 * `"weight"`), as PyTorch's `remove_weight_norm`: `${name}_g` and
 * `${name}_v` are removed and `name` is a Parameter again, holding the
 * weight they gave (registered last, as in PyTorch). Returns `module`.
 */
export function removeWeightNorm<M extends Module>(module: M, name = "weight"): M {
  const op = "removeWeightNorm";
  checkModule(op, module);
  const specs = specsOf(module);
  const at = specs.findIndex(({ spec }) => spec.name === name);
  if (at < 0) {
    throw new RangeError(`${op}: weightNorm of "${name}" not found in ${module.constructor.name}`);
  }
  const weight = noGrad(() => tidy(() => new Parameter(computeWeight(module, specs[at].spec))));
  uninstallComputed(module, specs[at].proto);
  delete (module as unknown as Fields)[`${name}_g`];
  delete (module as unknown as Fields)[`${name}_v`];
  module.registerParameter(name, weight);
  return module;
}
