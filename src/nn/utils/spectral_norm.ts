/**
 * Spectral normalization, as PyTorch 1.13's `torch.nn.utils.spectral_norm`
 * and `remove_spectral_norm`: a parameter `w` is divided by an estimate of
 * its largest singular value, `σ = uᵀ W v`, where `W` is `w` as a matrix
 * (the `dim` slices as rows) and the vectors `u`, `v` (buffers) are refined
 * by power iteration.
 *
 * Two pieces, so that the power iteration runs once per forward (as
 * PyTorch's forward pre-hook) while every layer keeps reading its weight
 * from a field: a forward pre-hook that, in training mode only, runs
 * `nPowerIterations` steps updating `weight_u` and `weight_v` in place
 * (without gradient); and, as {@link weightNorm} does, a one-object
 * prototype between the module and its class whose `weight` getter divides
 * `weight_orig` by `σ` from the current `u` and `v` (no iteration). Within a
 * forward the getter's value is the one PyTorch's hook stores.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { normal } from "../../ops/factory.ts";
import { normalizeDim } from "../../shape.ts";
import { forwardScope, tidy } from "../../storage.ts";
import { Tensor } from "../../tensor.ts";
import { ConvTranspose1d, ConvTranspose2d, ConvTranspose3d } from "../conv.ts";
import { normalize } from "../functional/normalize.ts";
import type { RemovableHandle } from "../hook_handle.ts";
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

/** Options of {@link spectralNorm}. */
export interface SpectralNormOptions {
  /** The parameter normalised (default `"weight"`). */
  name?: string;
  /** Power-iteration steps per training forward (default 1; at least 1). */
  nPowerIterations?: number;
  /** Smallest norm `u` and `v` are divided by (default 1e-12). */
  eps?: number;
  /**
   * The dim of the outputs, the rows of the matrix whose largest singular
   * value is estimated (default 0; 1 for ConvTranspose1d/2d/3d).
   */
  dim?: number;
}

interface Spec {
  readonly name: string;
  readonly dim: number;
  readonly nPowerIterations: number;
  readonly eps: number;
  /** The module spectralNorm was applied to, and its pre-hook's handle. */
  owner?: Module;
  handle?: RemovableHandle;
}

const SPEC = Symbol("spectralNorm");

type Fields = Record<string, unknown>;

/** PyTorch's `reshape_weight_to_matrix`: `dim` first, the other dims flattened into columns. */
function weightMatrix(weight: Tensor, dim: number): Tensor {
  const others = weight.shape.map((_, d) => d).filter((d) => d !== dim);
  const mat = dim === 0 ? weight : weight.permute([dim, ...others]);
  const cols = others.reduce((n, d) => n * weight.shape[d], 1);
  return mat.reshape([weight.shape[dim], cols]);
}

function tensorsOf(m: Module, spec: Spec): [Tensor, Tensor, Tensor] {
  const names = ["_orig", "_u", "_v"].map((s) => spec.name + s);
  const ts = names.map((n) => (m as unknown as Fields)[n]);
  ts.forEach((t, i) => {
    if (!(t instanceof Tensor)) {
      throw new Error(
        `spectralNorm: ${m.constructor.name} lacks the tensor "${
          names[i]
        }" its "${spec.name}" is computed from`,
      );
    }
  });
  return ts as [Tensor, Tensor, Tensor];
}

/** `weight_orig / (uᵀ W v)` with the current `u` and `v`, differentiable in `weight_orig`. */
function computeWeight(m: Module, spec: Spec): Tensor {
  const [orig, u, v] = tensorsOf(m, spec);
  return forwardScope(() => {
    // Copies, as PyTorch's clones: the graph must not see a later forward's in-place update.
    const sigma = u.clone().mul(weightMatrix(orig, spec.dim).matmul(v.clone())).sum();
    return orig.div(sigma);
  });
}

/** `nPowerIterations` steps of `v = normalize(Wᵀu)`, `u = normalize(W v)`, written into the buffers. */
function powerIterate(m: Module, spec: Spec): void {
  const [orig, u, v] = tensorsOf(m, spec);
  noGrad(() =>
    tidy(() => {
      const mat = weightMatrix(orig.detach(), spec.dim);
      const matT = mat.t();
      let [uu, vv] = [u, v];
      for (let i = 0; i < spec.nPowerIterations; i++) {
        vv = normalize(matT.matmul(uu), { dim: 0, eps: spec.eps });
        uu = normalize(mat.matmul(vv), { dim: 0, eps: spec.eps });
      }
      v._assign(vv);
      u._assign(uu);
    })
  );
}

function specsOf(m: Module): { proto: object; spec: Spec }[] {
  return specsOfKey<Spec>(m, SPEC);
}

/**
 * Applies spectral normalization to `module`'s parameter `name` (default
 * `"weight"`), as PyTorch 1.13's `torch.nn.utils.spectral_norm`: the
 * parameter (the same Parameter object, so optimizers made before keep
 * working) becomes `${name}_orig`, and the buffers `${name}_u` [rows] and
 * `${name}_v` [columns] hold the power iteration's unit vectors (random
 * normal draws, normalised, at the start). A Linear's state dict reads
 * `bias`, `weight_orig`, `weight_u`, `weight_v` as PyTorch's.
 *
 * Before every `forward` in training mode, `nPowerIterations` steps
 * `v = Wᵀu / max(‖Wᵀu‖, eps)`, `u = W v / max(‖W v‖, eps)` update `u` and
 * `v` in place without gradient; in evaluation mode they are left as they
 * are. `module[name]` is then `${name}_orig / σ` with `σ = uᵀ W v`, a plain
 * Tensor (assigning to it throws) recomputed from the current `u` and `v`
 * whenever it is read, so gradients flow to `${name}_orig` through `σ` as
 * well. `W` is the parameter with `dim` moved first and the other dims
 * flattened. Returns `module`.
 *
 * Unlike PyTorch, where `module.weight` holds the unnormalised weight until
 * the first forward, it is normalised from the start.
 */
export function spectralNorm<M extends Module>(module: M, options: SpectralNormOptions = {}): M {
  const op = "spectralNorm";
  checkModule(op, module);
  const name = options.name ?? "weight";
  checkParameterName(op, name);
  const nPowerIterations = options.nPowerIterations ?? 1;
  if (!Number.isInteger(nPowerIterations) || nPowerIterations <= 0) {
    throw new RangeError(
      `${op}: expected nPowerIterations to be a positive integer, got ${nPowerIterations}`,
    );
  }
  const eps = options.eps ?? 1e-12;
  if (typeof eps !== "number" || !Number.isFinite(eps)) {
    throw new RangeError(`${op}: eps must be a finite number, got ${eps}`);
  }
  if (specsOf(module).some(({ spec }) => spec.name === name)) {
    throw new Error(
      `${op}: cannot register two spectralNorm hooks on the same parameter "${name}" of ${module.constructor.name}`,
    );
  }
  const weight = (module as unknown as Fields)[name];
  if (weight === null && Object.hasOwn(module, name)) {
    throw new TypeError(
      `${op}: cannot be applied to ${module.constructor.name}, as its parameter "${name}" is null`,
    );
  }
  checkOwnParameter(op, module, name, weight);
  if (isLazy(weight)) {
    throw new RangeError(
      `${op}: The module passed to \`SpectralNorm\` can't have uninitialized parameters. ` +
        "Make sure to run the dummy forward before applying spectral normalization",
    );
  }
  if (weight.ndim === 0) {
    throw new RangeError(
      `${op}: the parameter "${name}" of ${module.constructor.name} has shape [], ` +
        `which has no matrix to normalise (at least 1 dim expected)`,
    );
  }
  const isTransposed = module instanceof ConvTranspose1d || module instanceof ConvTranspose2d ||
    module instanceof ConvTranspose3d;
  const requested = options.dim ?? (isTransposed ? 1 : 0);
  if (!Number.isInteger(requested)) {
    throw new TypeError(`${op}: dim must be an integer, got ${requested}`);
  }
  const dim = normalizeDim(requested, weight.ndim, op);
  const spec: Spec = { name, dim, nPowerIterations, eps };
  const [u, v] = noGrad(() =>
    tidy(() => {
      const mat = weightMatrix(weight, dim);
      const draw = (n: number) =>
        normalize(normal([n], 0, 1, { dtype: weight.dtype, device: weight.device }), {
          dim: 0,
          eps,
        });
      return [draw(mat.shape[0]), draw(mat.shape[1])];
    })
  );
  delete (module as unknown as Fields)[name];
  module.registerParameter(`${name}_orig`, weight);
  module.registerBuffer(`${name}_u`, u, { field: `${name}_u` });
  module.registerBuffer(`${name}_v`, v, { field: `${name}_v` });
  installComputed(
    module,
    SPEC,
    name,
    spec,
    (m) => computeWeight(m, spec),
    (m) =>
      `${m.constructor.name}.${name} is computed by spectralNorm from ${name}_orig, ${name}_u ` +
      `and ${name}_v; assign ${name}_orig, or call removeSpectralNorm first`,
  );
  // The hook looks for this very spec on the module it runs for: on a copy (a replica, a
  // TransformerEncoder's layer) it iterates the copy's own u and v, and it does nothing once
  // removeSpectralNorm has taken the spec off that module.
  spec.owner = module;
  spec.handle = module.registerForwardPreHook((m: Module) => {
    if (m.training && specsOf(m).some((s) => s.spec === spec)) powerIterate(m, spec);
  });
  return module;
}

/**
 * Undoes {@link spectralNorm} on `module`'s parameter `name` (default
 * `"weight"`), as PyTorch's `remove_spectral_norm`: `${name}_orig`,
 * `${name}_u` and `${name}_v` are removed, the pre-hook with them, and
 * `name` is a Parameter again holding `${name}_orig / σ` from the current
 * `u` and `v` (no further iteration), registered last as in PyTorch.
 * Returns `module`.
 */
export function removeSpectralNorm<M extends Module>(module: M, name = "weight"): M {
  const op = "removeSpectralNorm";
  checkModule(op, module);
  const specs = specsOf(module);
  const at = specs.findIndex(({ spec }) => spec.name === name);
  if (at < 0) {
    throw new RangeError(
      `${op}: spectralNorm of "${name}" not found in ${module.constructor.name}`,
    );
  }
  const { proto, spec } = specs[at];
  const weight = noGrad(() => tidy(() => new Parameter(computeWeight(module, spec).detach())));
  uninstallComputed(module, proto);
  // A copy may have its own hook tables (TransformerEncoder's layers): there the hook stays but
  // finds no spec, and the original's, which still has it, keeps its hook.
  if (spec.owner === module) spec.handle?.remove();
  for (const suffix of ["_orig", "_u", "_v"]) delete (module as unknown as Fields)[name + suffix];
  module.registerParameter(name, weight);
  return module;
}
