/**
 * Pruning, as PyTorch 1.13's `torch.nn.utils.prune`: a parameter `w` is
 * replaced by the parameter `w_orig` (the same Parameter object, so an
 * optimizer built before keeps working) and the buffer `w_mask`, and
 * `w = w_orig · w_mask` is recomputed from them. Pruning the same
 * parameter again composes the masks in a {@link PruningContainer}: the new
 * method acts only on the entries (unstructured) or slices (structured)
 * still unpruned. {@link remove} makes the pruning permanent.
 *
 * How `w` is recomputed: PyTorch sets it in a forward pre-hook. Here, as
 * for `weightNorm`, the module gets a one-object prototype whose `w`
 * getter computes `w_orig · w_mask` whenever it is read, so at every forward
 * (and, unlike PyTorch's attribute, also between forwards after an
 * optimizer step), with gradients flowing to `w_orig`.
 *
 * Masks are computed on the device, synchronously, by stable sorts. Where
 * PyTorch's `torch.topk` meets ties (equal magnitudes, equal norms) its
 * choice depends on its selection algorithm; here the earliest index among
 * equals is pruned first (unstructured), and kept first (structured). The
 * number pruned is always PyTorch's.
 *
 * Deliberate differences: pruning again with an integer amount larger than
 * what is left unpruned (but not larger than the whole tensor) raises
 * PyTorch's `amount=… should be smaller than the number of parameters to
 * prune=…` at the next read on the device, not at once (the count left
 * lives on the device), and by then everything left is pruned; pruning again ranks the current `w_orig · w_mask` (PyTorch:
 * its `w` attribute, as of the last forward or prune); a 1-D parameter is refused by the structured methods
 * even when pruned before (PyTorch's container then indexes it as 2-D);
 * `n: "fro"` is the 2-norm over any number of dims (PyTorch refuses more
 * than two).
 *
 * @example
 * ```ts
 * import { nn } from "@multigrad/core";
 * const fc = new nn.Linear(4, 3);
 * nn.utils.prune.l1Unstructured(fc, "weight", { amount: 0.5 });
 * nn.utils.prune.lnStructured(fc, "weight", { amount: 1, n: 2, dim: 0 });
 * Object.keys(fc.stateDict()); // ["bias", "weight_orig", "weight_mask"]
 * nn.utils.prune.remove(fc, "weight");
 * ```
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { checkLater } from "../../ops/check.ts";
import { onesLike, rand, randLike, tensor } from "../../ops/factory.ts";
import { where } from "../../ops/indexing.ts";
import { cat } from "../../ops/view.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope, tidy } from "../../storage.ts";
import { Tensor } from "../../tensor.ts";
import type { Module, Parameter } from "../module.ts";
import {
  checkModule,
  checkOwnParameter,
  checkParameterName,
  installComputed,
  specsOf as specsOfKey,
  uninstallComputed,
} from "./computed_parameter.ts";

/**
 * How much to prune: an integer is a count of entries (of slices for the
 * structured methods), any other number a fraction in [0, 1] (rounded to a
 * count half to even, as Python's `round`). JavaScript has one number type,
 * so `1` is one entry, as PyTorch's int `1`; to prune everything by fraction
 * give the count. Pruning again, a fraction is of what is left unpruned.
 */
export type Amount = number;

/** PyTorch's three kinds: how a {@link PruningContainer} restricts the next method. */
export type PruningType = "unstructured" | "structured" | "global";

const SPEC = Symbol("prune");

interface Spec {
  readonly name: string;
  /** The method applied so far: the last one, or a container of all. */
  method: BasePruningMethod;
}

type Fields = Record<string, unknown>;

function specsOf(m: Module): { proto: object; spec: Spec }[] {
  return specsOfKey<Spec>(m, SPEC);
}

function pruneSpec(m: Module, name: string): Spec | undefined {
  return specsOf(m).find(({ spec }) => spec.name === name)?.spec;
}

/** PyTorch's `_validate_pruning_amount_init`. */
function checkAmountInit(amount: unknown): Amount {
  if (typeof amount !== "number" || Number.isNaN(amount)) {
    throw new TypeError(`Invalid type for amount: ${String(amount)}. Must be int or float.`);
  }
  if (Number.isInteger(amount) ? amount < 0 : amount > 1 || amount < 0) {
    throw new RangeError(
      `amount=${amount} should either be a float in the range [0, 1] or a non-negative integer`,
    );
  }
  return amount;
}

/** Python's `round`: half to even. */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** PyTorch's `_compute_nparams_toprune` then `_validate_pruning_amount` for `size` entries. */
function countToPrune(amount: Amount, size: number): number {
  if (Number.isInteger(amount)) {
    if (amount > size) {
      throw new RangeError(
        `amount=${amount} should be smaller than the number of parameters to prune=${size}`,
      );
    }
    return amount;
  }
  return roundHalfEven(amount * size);
}

/**
 * The count to prune, shape [1] int32, when only `active` of the `size`
 * entries take part (an int32 count on the device): PyTorch computes it from
 * the active count on the host; here a table of the count for every
 * possible active count, read on the device, keeps it exact (int32, the
 * double-precision rounding of Python) and synchronous. An integer amount
 * is checked against `size` (the most that can be active).
 */
function countToPruneOf(amount: Amount, size: number, active: Tensor): Tensor {
  countToPrune(amount, size);
  if (Number.isInteger(amount) && amount > 0) {
    // PyTorch checks against what is left unpruned, a count that lives on the device here: the
    // error comes at the next read instead of at once.
    checkLater(
      active.reshape([1]),
      ([left]) =>
        left < amount
          ? `amount=${amount} should be smaller than the number of parameters to prune=${left}`
          : null,
    );
  }
  const table = new Int32Array(size + 1);
  for (let c = 0; c <= size; c++) {
    table[c] = Number.isInteger(amount) ? Math.min(amount, c) : roundHalfEven(amount * c);
  }
  const k = tensor(table, { device: active.device });
  return k.gather(0, active.reshape([1]));
}

/**
 * Each entry's rank among the active ones of the 1-D `scores` (0 for the
 * first in order; inactive entries rank after every active one), ascending
 * or descending, ties in index order.
 */
function rankWithin(scores: Tensor, active: Tensor, descending: boolean): Tensor {
  const byScore = scores.argsort(0, descending);
  const inactive = active.eq(0).to("int32").gather(0, byScore);
  const order = byScore.gather(0, inactive.argsort(0));
  return order.argsort(0);
}

/** PyTorch's `_validate_structured_pruning` and `_validate_pruning_dim`; the dim made non-negative. */
function checkStructured(op: string, t: Tensor, dim: number): number {
  if (t.ndim <= 1) {
    throw new RangeError(
      `${op}: Structured pruning can only be applied to multidimensional tensors. Found tensor of shape ${
        formatShape(t.shape)
      } with ${t.ndim} dims`,
    );
  }
  if (!Number.isInteger(dim) || dim >= t.ndim || dim < -t.ndim) {
    throw new RangeError(
      `${op}: Invalid index ${dim} for tensor of size ${formatShape(t.shape)}`,
    );
  }
  return dim < 0 ? dim + t.ndim : dim;
}

/** `v` (one value per slice along `dim`) shaped to broadcast against a tensor of `ndim` dims. */
function alongDim(v: Tensor, dim: number, ndim: number): Tensor {
  const shape = new Array(ndim).fill(1);
  shape[dim] = v.shape[0];
  return v.reshape(shape);
}

/**
 * The base of the pruning methods, as PyTorch's `BasePruningMethod`: a
 * method computes a mask for a tensor ({@link computeMask}); applied to a
 * module's parameter (each class's static `apply`, or the functions
 * {@link l1Unstructured} and the others) it reparametrises it as
 * `name_orig · name_mask`.
 */
export abstract class BasePruningMethod {
  /** Which parameter the method prunes once applied (PyTorch's `_tensor_name`). */
  tensorName = "";
  /** How a {@link PruningContainer} restricts this method when it follows others. */
  abstract readonly pruningType: PruningType;

  /**
   * The mask for `t`, starting from `defaultMask` (same shape): entries set
   * to 0 are pruned. The mask has `defaultMask`'s dtype. Acts on all of `t`,
   * as PyTorch's; within a {@link PruningContainer} only the unpruned part
   * takes part.
   */
  computeMask(t: Tensor, defaultMask: Tensor): Tensor {
    this.checkMaskShape(t, defaultMask);
    return this.maskWithin(t, defaultMask, false);
  }

  /**
   * The mask with `restricted` false: over all of `t`; true: as PyTorch's
   * container restricts this method's kind to `defaultMask`'s unpruned part.
   * @internal
   */
  abstract maskWithin(t: Tensor, defaultMask: Tensor, restricted: boolean): Tensor;

  /** @internal Refuses a default mask whose shape is not `t`'s. */
  checkMaskShape(t: Tensor, defaultMask: Tensor): void {
    if (!(t instanceof Tensor) || !(defaultMask instanceof Tensor)) {
      throw new TypeError(`${this.constructor.name}.computeMask: expected two Tensors`);
    }
    if (t.shape.join() !== defaultMask.shape.join()) {
      throw new RangeError(
        `${this.constructor.name}.computeMask: the default mask has shape ${
          formatShape(defaultMask.shape)
        }, the tensor ${formatShape(t.shape)}`,
      );
    }
  }

  /** `module`'s pruned tensor: `name_mask` (in `name_orig`'s dtype) times `name_orig`. */
  applyMask(module: Module): Tensor {
    const name = this.tensorName;
    const mask = (module as unknown as Fields)[`${name}_mask`];
    const orig = (module as unknown as Fields)[`${name}_orig`];
    if (!name || !(mask instanceof Tensor) || !(orig instanceof Tensor)) {
      throw new Error(
        `${this.constructor.name}.applyMask: ${module.constructor.name} has to be pruned${
          name ? ` (it lacks "${name}_orig" or "${name}_mask")` : ""
        }`,
      );
    }
    return forwardScope(() => mask.to(orig.dtype).mul(orig));
  }

  /**
   * `t` pruned: `t · computeMask(importanceScores ?? t, defaultMask ?? 1)`,
   * as PyTorch's `prune`, without touching any module.
   */
  prune(t: Tensor, options: { defaultMask?: Tensor; importanceScores?: Tensor } = {}): Tensor {
    const scores = options.importanceScores ?? t;
    if (scores.shape.join() !== t.shape.join()) {
      throw new RangeError(
        `${this.constructor.name}.prune: importanceScores should have the same shape as tensor t: ${
          formatShape(scores.shape)
        } vs ${formatShape(t.shape)}`,
      );
    }
    return forwardScope(() => {
      const mask = noGrad(() =>
        this.computeMask(scores.detach(), options.defaultMask ?? onesLike(t))
      );
      return t.mul(mask);
    });
  }

  /**
   * Makes the pruning of `module`'s `tensorName` permanent, as PyTorch's
   * `BasePruningMethod.remove`: `name_orig` takes the pruned values and is
   * the parameter `name` again (the same Parameter object, registered
   * last); `name_mask` is dropped. Prefer {@link remove}.
   */
  remove(module: Module): void {
    removePruning("remove", module, this.tensorName);
  }
}

/**
 * Several pruning methods applied in turn to one parameter, as PyTorch's
 * `PruningContainer`: its mask is the last method's, computed on what the
 * earlier ones left (unstructured: the entries whose mask is 1; structured:
 * the slices along the method's dim with any nonzero mask entry; global:
 * everything).
 */
export class PruningContainer extends BasePruningMethod {
  /** Always `"unstructured"` (PyTorch's container has no kind of its own). */
  readonly pruningType: PruningType = "unstructured";
  /** The methods, in the order applied. */
  readonly pruningMethods: BasePruningMethod[] = [];

  /** A container of `methods`, all on the parameter of the first (which sets `tensorName`). */
  constructor(...methods: BasePruningMethod[]) {
    super();
    if (methods.length > 0) this.tensorName = methods[0].tensorName;
    for (const m of methods) this.addPruningMethod(m);
  }

  /** Appends `method`, which must prune this container's parameter. */
  addPruningMethod(method: BasePruningMethod): void {
    if (!(method instanceof BasePruningMethod)) {
      throw new TypeError(
        `PruningContainer.addPruningMethod: ${
          method === null ? "null" : typeof method
        } is not a BasePruningMethod subclass`,
      );
    }
    if (this.tensorName !== method.tensorName) {
      throw new RangeError(
        `PruningContainer.addPruningMethod: Can only add pruning methods acting on the parameter named '${this.tensorName}' to PruningContainer. Found '${method.tensorName}'`,
      );
    }
    this.pruningMethods.push(method);
  }

  /** How many methods the container holds. */
  get length(): number {
    return this.pruningMethods.length;
  }

  /** The methods, in the order applied. */
  [Symbol.iterator](): Iterator<BasePruningMethod> {
    return this.pruningMethods[Symbol.iterator]();
  }

  /** The last method's mask on the part of `t` the earlier ones left. */
  override computeMask(t: Tensor, defaultMask: Tensor): Tensor {
    this.checkMaskShape(t, defaultMask);
    const last = this.pruningMethods.at(-1);
    if (!last) throw new RangeError("PruningContainer.computeMask: the container is empty");
    return combineMask(last, t, defaultMask);
  }

  /** @internal */
  maskWithin(t: Tensor, defaultMask: Tensor): Tensor {
    return this.computeMask(t, defaultMask);
  }
}

/** PyTorch's `_combine_masks`: `method`'s mask on the part of `t` that `mask` left. */
function combineMask(method: BasePruningMethod, t: Tensor, mask: Tensor): Tensor {
  return method.pruningType === "global"
    ? method.computeMask(t, mask)
    : method.maskWithin(t, mask, true);
}

/** Leaves the mask as it is, as PyTorch's `prune.Identity`. */
export class Identity extends BasePruningMethod {
  /** `"unstructured"`. */
  readonly pruningType: PruningType = "unstructured";

  /** @internal */
  maskWithin(_t: Tensor, defaultMask: Tensor): Tensor {
    return defaultMask;
  }

  /** Applies `Identity` to `module`'s parameter `name` (see {@link identity}). */
  static override apply(module: Module, name: string): Identity {
    return applyMethod("Identity.apply", module, name, new Identity()) as Identity;
  }
}

/** Shared by the two unstructured methods: prunes the `amount` first active entries in `scores`' order. */
function unstructuredMask(
  amount: Amount,
  scores: Tensor,
  defaultMask: Tensor,
  restricted: boolean,
  descending: boolean,
): Tensor {
  const size = scores.numel();
  const flat = scores.reshape([size]);
  const active = restricted
    ? defaultMask.reshape([size]).eq(1).to("int32")
    : onesLike(flat, { dtype: "int32" });
  // int32 counts and ranks throughout: float32 would round them past 2^24 entries.
  const k = restricted
    ? countToPruneOf(amount, size, active.sum().to("int32"))
    : tensor([countToPrune(amount, size)], { device: flat.device, dtype: "int32" });
  const rank = rankWithin(flat, active, descending);
  const pruned = rank.lt(k).mul(active).reshape(scores.shape);
  return where(pruned.eq(1), 0, defaultMask).to(defaultMask.dtype);
}

/** Shared by the two structured methods: keeps, along `dim`, the active slices ranked first by `scores` (one per slice). */
function structuredMask(
  amount: Amount,
  t: Tensor,
  dim: number,
  scores: Tensor,
  defaultMask: Tensor,
  restricted: boolean,
  descending: boolean,
): Tensor {
  const size = t.shape[dim];
  const others = t.shape.map((_, d) => d).filter((d) => d !== dim);
  const active = restricted
    ? defaultMask.sum(others).ne(0).to("int32")
    : onesLike(scores, { dtype: "int32" });
  const nActive = active.sum().to("int32").reshape([1]);
  const k = restricted
    ? countToPruneOf(amount, size, nActive)
    : tensor([countToPrune(amount, size)], { device: t.device, dtype: "int32" });
  const kept = rankWithin(scores, active, descending).lt(nActive.sub(k)).mul(active);
  const keep = alongDim(kept.to(defaultMask.dtype), dim, t.ndim);
  // Slices outside the active ones keep their mask (PyTorch: active where the mask sums to nonzero).
  const activeAlong = alongDim(active, dim, t.ndim);
  return where(activeAlong.eq(1), keep.mul(defaultMask), defaultMask).to(defaultMask.dtype);
}

/**
 * Prunes `amount` entries chosen at random (from multigrad's generator:
 * `manualSeed` repeats the choice), as PyTorch's `RandomUnstructured`.
 */
export class RandomUnstructured extends BasePruningMethod {
  /** `"unstructured"`. */
  readonly pruningType: PruningType = "unstructured";
  /** How much to prune. */
  readonly amount: Amount;

  /** A method pruning `amount` (see {@link Amount}). */
  constructor(amount: Amount) {
    super();
    this.amount = checkAmountInit(amount);
  }

  /** @internal */
  maskWithin(t: Tensor, defaultMask: Tensor, restricted: boolean): Tensor {
    return unstructuredMask(
      this.amount,
      randLike(t, { dtype: "float32" }),
      defaultMask,
      restricted,
      true,
    );
  }

  /** Applies the method to `module`'s parameter `name` (see {@link randomUnstructured}). */
  static override apply(module: Module, name: string, amount: Amount): RandomUnstructured {
    return applyMethod(
      "RandomUnstructured.apply",
      module,
      name,
      new RandomUnstructured(amount),
    ) as RandomUnstructured;
  }
}

/**
 * Prunes the `amount` entries of smallest magnitude, as PyTorch's
 * `L1Unstructured` (ties: the earliest index first; see the module notes).
 */
export class L1Unstructured extends BasePruningMethod {
  /** `"unstructured"`. */
  readonly pruningType: PruningType = "unstructured";
  /** How much to prune. */
  readonly amount: Amount;

  /** A method pruning `amount` (see {@link Amount}). */
  constructor(amount: Amount) {
    super();
    this.amount = checkAmountInit(amount);
  }

  /** @internal */
  maskWithin(t: Tensor, defaultMask: Tensor, restricted: boolean): Tensor {
    return unstructuredMask(this.amount, t.abs(), defaultMask, restricted, false);
  }

  /** Applies the method to `module`'s parameter `name` (see {@link l1Unstructured}). */
  static override apply(
    module: Module,
    name: string,
    amount: Amount,
    importanceScores?: Tensor,
  ): L1Unstructured {
    return applyMethod(
      "L1Unstructured.apply",
      module,
      name,
      new L1Unstructured(amount),
      importanceScores,
    ) as L1Unstructured;
  }
}

/**
 * Prunes `amount` slices along `dim` (default -1) chosen at random, as
 * PyTorch's `RandomStructured`.
 */
export class RandomStructured extends BasePruningMethod {
  /** `"structured"`. */
  readonly pruningType: PruningType = "structured";
  /** How many slices to prune. */
  readonly amount: Amount;
  /** The dim whose slices are pruned. */
  readonly dim: number;

  /** A method pruning `amount` slices along `dim`. */
  constructor(amount: Amount, dim = -1) {
    super();
    this.amount = checkAmountInit(amount);
    this.dim = dim;
  }

  /** @internal */
  maskWithin(t: Tensor, defaultMask: Tensor, restricted: boolean): Tensor {
    const dim = checkStructured("RandomStructured", t, this.dim);
    const prob = rand([t.shape[dim]], { dtype: "float32", device: t.device });
    return structuredMask(this.amount, t, dim, prob, defaultMask, restricted, true);
  }

  /** Applies the method to `module`'s parameter `name` (see {@link randomStructured}). */
  static override apply(module: Module, name: string, amount: Amount, dim = -1): RandomStructured {
    return applyMethod(
      "RandomStructured.apply",
      module,
      name,
      new RandomStructured(amount, dim),
    ) as RandomStructured;
  }
}

/** The `n` of {@link LnStructured}: a norm order (`Infinity`, `-Infinity`, 0 included) or `"fro"`. */
export type NormOrder = number | "fro";

/**
 * Prunes the `amount` slices along `dim` (default -1) of smallest `n`-norm,
 * as PyTorch's `LnStructured` (ties: the earliest slices are kept).
 */
export class LnStructured extends BasePruningMethod {
  /** `"structured"`. */
  readonly pruningType: PruningType = "structured";
  /** How many slices to prune. */
  readonly amount: Amount;
  /** The norm order. */
  readonly n: NormOrder;
  /** The dim whose slices are pruned. */
  readonly dim: number;

  /** A method pruning `amount` slices along `dim` by their `n`-norm. */
  constructor(amount: Amount, n: NormOrder, dim = -1) {
    super();
    this.amount = checkAmountInit(amount);
    if (n !== "fro" && (typeof n !== "number" || Number.isNaN(n))) {
      throw new TypeError(`LnStructured: n must be a number or "fro", got ${String(n)}`);
    }
    this.n = n;
    this.dim = dim;
  }

  /** @internal */
  maskWithin(t: Tensor, defaultMask: Tensor, restricted: boolean): Tensor {
    const dim = checkStructured("LnStructured", t, this.dim);
    const others = t.shape.map((_, d) => d).filter((d) => d !== dim);
    const norm = t.norm(this.n === "fro" ? 2 : this.n, others);
    return structuredMask(this.amount, t, dim, norm, defaultMask, restricted, true);
  }

  /** Applies the method to `module`'s parameter `name` (see {@link lnStructured}). */
  static override apply(
    module: Module,
    name: string,
    amount: Amount,
    n: NormOrder,
    dim: number,
    importanceScores?: Tensor,
  ): LnStructured {
    return applyMethod(
      "LnStructured.apply",
      module,
      name,
      new LnStructured(amount, n, dim),
      importanceScores,
    ) as LnStructured;
  }
}

/** Prunes where a given mask is 0, as PyTorch's `CustomFromMask`. */
export class CustomFromMask extends BasePruningMethod {
  /** `"global"`: in a container it sees the whole tensor. */
  readonly pruningType: PruningType = "global";
  /** The mask multiplied in. */
  readonly mask: Tensor;

  /** A method multiplying the default mask by `mask`. */
  constructor(mask: Tensor) {
    super();
    if (!(mask instanceof Tensor)) {
      throw new TypeError(`CustomFromMask: mask must be a Tensor, got ${typeof mask}`);
    }
    this.mask = mask;
  }

  /** @internal */
  maskWithin(_t: Tensor, defaultMask: Tensor): Tensor {
    if (defaultMask.shape.join() !== this.mask.shape.join()) {
      throw new RangeError(
        `CustomFromMask: the mask has shape ${formatShape(this.mask.shape)}, the parameter ${
          formatShape(defaultMask.shape)
        }`,
      );
    }
    return defaultMask.mul(this.mask.to(defaultMask.device).to(defaultMask.dtype));
  }

  /** Applies the method to `module`'s parameter `name` (see {@link customFromMask}). */
  static override apply(module: Module, name: string, mask: Tensor): CustomFromMask {
    return applyMethod(
      "CustomFromMask.apply",
      module,
      name,
      new CustomFromMask(mask),
    ) as CustomFromMask;
  }
}

/**
 * PyTorch's `BasePruningMethod.apply`: composes `method` with the pruning
 * already on `module.name`, computes the new mask (from `importanceScores`,
 * default the parameter), and reparametrises. Nothing changes when it throws.
 */
function applyMethod(
  op: string,
  module: Module,
  name: string,
  method: BasePruningMethod,
  importanceScores?: Tensor,
): BasePruningMethod {
  checkModule(op, module);
  checkParameterName(op, name);
  const fields = module as unknown as Fields;
  const spec = pruneSpec(module, name);
  method.tensorName = name;
  let orig: Parameter;
  if (spec) {
    orig = fields[`${name}_orig`] as Parameter;
  } else {
    const weight = fields[name];
    checkOwnParameter(op, module, name, weight);
    orig = weight;
  }
  if (importanceScores !== undefined) {
    if (!(importanceScores instanceof Tensor)) {
      throw new TypeError(
        `${op}: importanceScores must be a Tensor, got ${typeof importanceScores}`,
      );
    }
    if (importanceScores.shape.join() !== orig.shape.join()) {
      throw new RangeError(
        `${op}: importanceScores should have the same shape as parameter ${name} of ${module.constructor.name}: ${
          formatShape(importanceScores.shape)
        } vs ${formatShape(orig.shape)}`,
      );
    }
  }
  const mask = noGrad(() =>
    tidy(() => {
      if (!spec) return method.computeMask((importanceScores ?? orig).detach(), onesLike(orig));
      const current = fields[`${name}_mask`] as Tensor;
      // PyTorch ranks `getattr(module, name)`, the pruned weight: a slice's norm leaves out the
      // entries already pruned.
      const t = importanceScores?.detach() ?? current.to(orig.dtype).mul(orig.detach());
      return combineMask(method, t, current.detach().clone());
    })
  );
  if (spec) {
    const old = spec.method;
    let composite: PruningContainer;
    if (old instanceof PruningContainer) {
      composite = old;
    } else {
      composite = new PruningContainer(old);
    }
    composite.addPruningMethod(method);
    spec.method = composite;
    fields[`${name}_mask`] = mask;
    return composite;
  }
  delete fields[name];
  module.registerParameter(`${name}_orig`, orig);
  module.registerBuffer(`${name}_mask`, mask, { field: `${name}_mask` });
  const newSpec: Spec = { name, method };
  installComputed(
    module,
    SPEC,
    name,
    newSpec,
    (m) => newSpec.method.applyMask(m),
    (m) =>
      `${m.constructor.name}.${name} is computed by pruning from ${name}_orig and ${name}_mask; ` +
      `assign those, or call prune.remove first`,
  );
  return method;
}

function removePruning(op: string, module: Module, name: string): void {
  checkModule(op, module);
  const specs = specsOf(module);
  const at = specs.findIndex(({ spec }) => spec.name === name);
  if (at < 0) {
    throw new RangeError(
      `${op}: Parameter '${name}' of module ${module.constructor.name} has to be pruned before pruning can be removed`,
    );
  }
  const fields = module as unknown as Fields;
  const weight = noGrad(() => tidy(() => specs[at].spec.method.applyMask(module)));
  const orig = fields[`${name}_orig`] as Parameter;
  noGrad(() => orig.copy_(weight));
  weight.dispose();
  uninstallComputed(module, specs[at].proto);
  delete fields[`${name}_orig`];
  delete fields[`${name}_mask`];
  module.registerParameter(name, orig);
}

/** Options of {@link l1Unstructured} and {@link randomUnstructured}. */
export interface UnstructuredOptions {
  /** How much to prune (see {@link Amount}). */
  amount: Amount;
  /** Scores ranked instead of the parameter's values (l1Unstructured only), of its shape. */
  importanceScores?: Tensor;
}

/** Options of {@link lnStructured} and {@link randomStructured}. */
export interface StructuredOptions {
  /** How many slices to prune (see {@link Amount}). */
  amount: Amount;
  /** The dim whose slices are pruned (`lnStructured`: required, as in PyTorch; `randomStructured`: default -1). */
  dim?: number;
  /** The norm order (`lnStructured` only; required there). */
  n?: NormOrder;
  /** Scores ranked instead of the parameter's values (`lnStructured` only), of its shape. */
  importanceScores?: Tensor;
}

function checkOptions(op: string, options: unknown): void {
  if (options === null || typeof options !== "object") {
    throw new TypeError(`${op}: expected an options object with amount, got ${String(options)}`);
  }
}

/**
 * Reparametrises `module`'s parameter `name` without pruning anything
 * (mask of ones), as PyTorch's `prune.identity`. Returns `module`.
 */
export function identity<M extends Module>(module: M, name: string): M {
  Identity.apply(module, name);
  return module;
}

/**
 * Prunes `amount` entries of `module`'s parameter `name` at random, as
 * PyTorch's `prune.random_unstructured` (later prunes choose among the
 * entries still unpruned). Returns `module`.
 */
export function randomUnstructured<M extends Module>(
  module: M,
  name: string,
  options: UnstructuredOptions,
): M {
  checkOptions("randomUnstructured", options);
  RandomUnstructured.apply(module, name, options.amount);
  return module;
}

/**
 * Prunes the `amount` entries of smallest magnitude (of `importanceScores`
 * when given) of `module`'s parameter `name`, as PyTorch's
 * `prune.l1_unstructured`. Returns `module`.
 */
export function l1Unstructured<M extends Module>(
  module: M,
  name: string,
  options: UnstructuredOptions,
): M {
  checkOptions("l1Unstructured", options);
  L1Unstructured.apply(module, name, options.amount, options.importanceScores);
  return module;
}

/**
 * Prunes `amount` random slices along `options.dim` (default -1) of
 * `module`'s parameter `name`, as PyTorch's `prune.random_structured`.
 * Returns `module`.
 */
export function randomStructured<M extends Module>(
  module: M,
  name: string,
  options: StructuredOptions,
): M {
  checkOptions("randomStructured", options);
  RandomStructured.apply(module, name, options.amount, options.dim ?? -1);
  return module;
}

/**
 * Prunes the `amount` slices along `options.dim` of smallest `options.n`-norm
 * of `module`'s parameter `name`, as PyTorch's `prune.ln_structured`.
 * Returns `module`.
 */
export function lnStructured<M extends Module>(
  module: M,
  name: string,
  options: StructuredOptions,
): M {
  checkOptions("lnStructured", options);
  if (options.n === undefined || options.dim === undefined) {
    throw new TypeError(
      `lnStructured: options.n and options.dim are required, got n=${options.n}, dim=${options.dim}`,
    );
  }
  LnStructured.apply(
    module,
    name,
    options.amount,
    options.n,
    options.dim,
    options.importanceScores,
  );
  return module;
}

/**
 * Prunes `module`'s parameter `name` where `mask` (its shape) is 0, as
 * PyTorch's `prune.custom_from_mask`. Returns `module`.
 */
export function customFromMask<M extends Module>(module: M, name: string, mask: Tensor): M {
  CustomFromMask.apply(module, name, mask);
  return module;
}

/** A pruning method class taking an amount, for {@link globalUnstructured}. */
export type GlobalPruningMethod = new (amount: Amount) => BasePruningMethod;

/** Options of {@link globalUnstructured}. */
export interface GlobalUnstructuredOptions {
  /** An unstructured method class: {@link L1Unstructured} or {@link RandomUnstructured}. */
  pruningMethod: GlobalPruningMethod;
  /** How much to prune of all the parameters together (see {@link Amount}). */
  amount: Amount;
  /** Scores per pair (same index as in `parameters`) ranked instead of the values; `undefined` entries use the parameter. */
  importanceScores?: readonly (Tensor | undefined)[];
}

/**
 * Prunes the parameters `[module, name]` of `parameters` together, as
 * PyTorch's `prune.global_unstructured`: all of them are seen as one vector
 * (what earlier pruning left of it), `pruningMethod` prunes `amount` of it,
 * and each parameter gets its part through {@link customFromMask}.
 * `importanceScores` is a list aligned with `parameters` (PyTorch: a dict
 * keyed by the pairs).
 */
export function globalUnstructured(
  parameters: Iterable<readonly [Module, string]>,
  options: GlobalUnstructuredOptions,
): void {
  const op = "globalUnstructured";
  if (
    parameters === null || typeof (parameters as Iterable<unknown>)[Symbol.iterator] !== "function"
  ) {
    throw new TypeError(`${op}: parameters is not an Iterable`);
  }
  checkOptions(op, options);
  const pairs = [...parameters];
  if (pairs.length === 0) throw new RangeError(`${op}: parameters is empty`);
  const method = new options.pruningMethod(options.amount);
  if (method.pruningType !== "unstructured") {
    throw new TypeError(
      `${op}: Only "unstructured" PRUNING_TYPE supported for the pruningMethod. Found method ${options.pruningMethod.name} of type ${method.pruningType}`,
    );
  }
  const scores = options.importanceScores ?? [];
  const current = pairs.map((pair, i) => {
    if (!Array.isArray(pair) || pair.length !== 2) {
      throw new TypeError(`${op}: parameters[${i}] must be a [module, name] pair`);
    }
    const [module, name] = pair;
    checkModule(op, module);
    checkParameterName(op, name);
    const value = (module as unknown as Fields)[name];
    if (!(value instanceof Tensor)) {
      throw new TypeError(`${op}: ${module.constructor.name} has no parameter "${name}"`);
    }
    const s = scores[i];
    if (s !== undefined && s.shape.join() !== value.shape.join()) {
      throw new RangeError(
        `${op}: importanceScores[${i}] has shape ${formatShape(s.shape)}, parameter ${name} ${
          formatShape(value.shape)
        }`,
      );
    }
    return { module, name, value, scores: s };
  });
  method.tensorName = "temp";
  const finalMask = noGrad(() =>
    tidy(() => {
      const all = cat(current.map((c) => (c.scores ?? c.value).detach().reshape([-1])));
      const defaults = cat(current.map((c) => {
        const mask = (c.module as unknown as Fields)[`${c.name}_mask`];
        return mask instanceof Tensor && pruneSpec(c.module, c.name)
          ? mask.to(all.dtype).reshape([-1])
          : onesLike(c.value, { dtype: all.dtype }).reshape([-1]);
      }));
      return combineMask(method, all, defaults);
    })
  );
  let at = 0;
  for (const c of current) {
    const n = c.value.numel();
    const part = noGrad(() => tidy(() => finalMask.narrow(0, at, n).reshape(c.value.shape)));
    customFromMask(c.module, c.name, part);
    at += n;
  }
}

/**
 * Makes the pruning of `module`'s parameter `name` permanent, as PyTorch's
 * `prune.remove`: `name` is a Parameter again (the former `name_orig`, now
 * holding the pruned values, registered last) and `name_orig`, `name_mask`
 * are gone. Throws when `name` is not pruned. Returns `module`.
 */
export function remove<M extends Module>(module: M, name: string): M {
  removePruning("remove", module, name);
  return module;
}

/** Whether `module` or any module inside it has a pruned parameter, as PyTorch's `prune.is_pruned`. */
export function isPruned(module: Module): boolean {
  checkModule("isPruned", module);
  return module.modules().some((m) => specsOf(m).length > 0);
}
