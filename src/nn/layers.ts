/**
 * Layers: `Linear`, containers (`Sequential`, `ModuleList`), activations,
 * `Dropout`, `Flatten` and `Identity`.
 * @module
 */

import type { Device } from "../device.ts";
import { type DType, getDefaultDtype } from "../dtype.ts";
import { resolveFactory } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { calculateFanInAndFanOut, kaimingUniform_, uniform_ } from "./init.ts";
import * as F from "./functional.ts";
import { Module, Parameter } from "./module.ts";
import { orderedKeys, recordFieldOrder } from "./field_order.ts";
import { checkCount, pyBool, pyFloat } from "./util.ts";
import { applyInPlace, type InplaceOptions, inplaceRepr } from "./functional/inplace.ts";

/** Where a layer creates its parameters (PyTorch's factory kwargs). */
export interface FactoryOptions {
  /** Device of the parameters; default the default device. */
  device?: Device | string;
  /** dtype of the parameters; default float32. */
  dtype?: DType;
}

/** Options of {@link Linear}. */
export interface LinearOptions extends FactoryOptions {
  /** Learn an additive bias (default true). */
  bias?: boolean;
}

/**
 * `y = x Wᵀ + b`, as `torch.nn.Linear`: `weight` [outFeatures, inFeatures]
 * and `bias` [outFeatures] (null without bias), initialised as PyTorch's
 * `reset_parameters`: `kaimingUniform_(weight, { a: √5 })`, i.e.
 * U(-1/√in, 1/√in), then the bias from U(-1/√in, 1/√in), from the seeded
 * stream (`manualSeed`).
 */
export class Linear extends Module {
  /** Size of each input's last dim. */
  readonly inFeatures: number;
  /** Size of each output's last dim. */
  readonly outFeatures: number;
  /** [outFeatures, inFeatures]. */
  weight: Parameter;
  /** [outFeatures], or null. */
  bias: Parameter | null;

  /** A layer from `inFeatures` to `outFeatures`. */
  constructor(inFeatures: number, outFeatures: number, options: LinearOptions = {}) {
    super();
    this.inFeatures = checkCount("Linear: inFeatures", inFeatures);
    this.outFeatures = checkCount("Linear: outFeatures", outFeatures);
    const { dtype, device } = resolveFactory(options, getDefaultDtype());
    this.weight = this.registerParameter(
      "weight",
      new Parameter(empty([outFeatures, inFeatures], dtype, device)),
    );
    this.bias = this.registerParameter(
      "bias",
      (options.bias ?? true) ? new Parameter(empty([outFeatures], dtype, device)) : null,
    );
    this.resetParameters();
  }

  /** Draws new weights and bias, as at construction (PyTorch's `reset_parameters`). */
  resetParameters(): void {
    kaimingUniform_(this.weight, { a: Math.sqrt(5) });
    if (this.bias) {
      const [fanIn] = calculateFanInAndFanOut(this.weight);
      const bound = fanIn > 0 ? 1 / Math.sqrt(fanIn) : 0;
      uniform_(this.bias, { a: -bound, b: bound });
    }
  }

  /** Applies the layer over the last dim of `x`. */
  override forward(x: Tensor): Tensor {
    return F.linear(x, this.weight, this.bias);
  }

  /** `in_features=4, out_features=3, bias=True`. */
  override extraRepr(): string {
    return `in_features=${this.inFeatures}, out_features=${this.outFeatures}, bias=${
      pyBool(this.bias !== null)
    }`;
  }
}

function checkModule(owner: string, m: unknown, i: number): Module {
  if (!(m instanceof Module)) {
    throw new TypeError(
      `${owner}: argument ${i} is not an nn.Module (got ${m === null ? "null" : typeof m})`,
    );
  }
  return m;
}

/**
 * Modules held in fields `"0"`, `"1"`, ... so that their parameters are named
 * `0.weight`, `1.bias`, as PyTorch's `ModuleList`. It has no `forward`.
 */
export class ModuleList extends Module {
  /** Holds `modules` in order. */
  constructor(modules: Iterable<Module> = []) {
    super();
    for (const m of modules) this.append(m);
  }

  /** Number of modules. */
  get length(): number {
    let n = 0;
    while (Object.hasOwn(this, String(n))) n++;
    return n;
  }

  /** The module at `index` (negative counts from the end). */
  at(index: number): Module {
    const n = this.length;
    const i = index < 0 ? index + n : index;
    if (!Number.isInteger(i) || i < 0 || i >= n) {
      throw new RangeError(
        `${this.constructor.name}.at: index ${index} is out of range for ${n} modules`,
      );
    }
    return (this as unknown as Record<string, Module>)[String(i)];
  }

  /** Adds `module` at the end; returns this. */
  append(module: Module): this {
    const n = this.length;
    (this as unknown as Record<string, Module>)[String(n)] = checkModule(
      this.constructor.name,
      module,
      n,
    );
    return this;
  }

  /** The modules in order. */
  *[Symbol.iterator](): IterableIterator<Module> {
    const n = this.length;
    for (let i = 0; i < n; i++) yield (this as unknown as Record<string, Module>)[String(i)];
  }
}

/**
 * Modules held by name, as PyTorch's `ModuleDict`: each is a field, so its
 * parameters are named `<key>.weight`. Keys keep the order they were added
 * in, integer-like ones too. (A JavaScript object literal already lists its
 * integer-like keys first: give `[key, module]` pairs to keep another order.)
 * It has no `forward`.
 */
export class ModuleDict extends Module {
  /** Holds the modules of `modules` (an object or [key, module] pairs). */
  constructor(modules: Record<string, Module> | Iterable<[string, Module]> = {}) {
    super();
    const entries = Symbol.iterator in modules ? modules : Object.entries(modules);
    for (const [key, m] of entries as Iterable<[string, Module]>) this.set(key, m);
  }

  /** The keys, in the order they were added. */
  keys(): string[] {
    return orderedKeys(this).filter((key) => this.has(key));
  }

  /** The module under `key`; an error naming the keys there are when it is missing. */
  get(key: string): Module {
    const m = (this as unknown as Record<string, unknown>)[key];
    if (!Object.hasOwn(this, key) || !(m instanceof Module)) {
      throw new RangeError(`ModuleDict.get: no module "${key}" (keys: ${this.keys().join(", ")})`);
    }
    return m;
  }

  /** Whether a module is held under `key`. */
  has(key: string): boolean {
    return Object.hasOwn(this, key) &&
      (this as unknown as Record<string, unknown>)[key] instanceof Module;
  }

  /** Holds `module` under `key` (replacing one there); returns this. */
  set(key: string, module: Module): this {
    // A key that names a field or method of every module (training, forward) would break the module.
    if (
      typeof key !== "string" || key === "" || key.includes(".") || (key in this && !this.has(key))
    ) {
      throw new RangeError(
        `ModuleDict: key ${
          JSON.stringify(key)
        } is not usable (empty, has a ".", or names a Module field or method)`,
      );
    }
    (this as unknown as Record<string, Module>)[key] = checkModule("ModuleDict", module, 0);
    recordFieldOrder(this, key);
    return this;
  }

  /** [key, module] pairs in order. */
  *[Symbol.iterator](): IterableIterator<[string, Module]> {
    for (const key of this.keys()) yield [key, this.get(key)];
  }
}

/**
 * Runs modules one after another, as `torch.nn.Sequential`; children are
 * named `0`, `1`, ...
 */
export class Sequential extends ModuleList {
  /** Chains `modules` in order. */
  constructor(...modules: Module[]) {
    modules.forEach((m, i) => checkModule("Sequential", m, i));
    super(modules);
  }

  /** Feeds `input` through every module in order. */
  override forward(input: Tensor): Tensor {
    // What passes between layers goes with the graph at backward, not with the GC.
    return forwardScope(() => {
      let x: unknown = input;
      for (const m of this) x = (m.forward as (a: unknown) => unknown).call(m, x);
      return x as Tensor;
    });
  }
}

/** max(x, 0), as `torch.nn.ReLU`. */
export class ReLU extends Module {
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** `inplace` overwrites the input, as PyTorch's `inplace=True`. */
  constructor(options: InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
  }

  /** Applies ReLU. */
  override forward(x: Tensor): Tensor {
    return applyInPlace("relu_", x, this.inplace, (x) => F.relu(x));
  }

  /** `inplace=True` when set. */
  override extraRepr(): string {
    return inplaceRepr(this.inplace).slice(2);
  }
}

/** The logistic sigmoid, as `torch.nn.Sigmoid`. */
export class Sigmoid extends Module {
  /** Applies the sigmoid. */
  override forward(x: Tensor): Tensor {
    return F.sigmoid(x);
  }
}

/** Hyperbolic tangent, as `torch.nn.Tanh`. */
export class Tanh extends Module {
  /** Applies tanh. */
  override forward(x: Tensor): Tensor {
    return F.tanh(x);
  }
}

/** GELU, as `torch.nn.GELU` (exact erf form unless `approximate` is `"tanh"`). */
export class GELU extends Module {
  /** `"none"` or `"tanh"`. */
  readonly approximate: "none" | "tanh";

  /** A GELU layer. */
  constructor(options: F.GeluOptions = {}) {
    super();
    this.approximate = options.approximate ?? "none";
    if (this.approximate !== "none" && this.approximate !== "tanh") {
      throw new RangeError(
        `GELU: approximate must be "none" or "tanh", got ${JSON.stringify(this.approximate)}`,
      );
    }
  }

  /** Applies GELU. */
  override forward(x: Tensor): Tensor {
    return F.gelu(x, { approximate: this.approximate });
  }

  /** `approximate='none'`. */
  override extraRepr(): string {
    return `approximate='${this.approximate}'`;
  }
}

/** softmax along `dim`, as `torch.nn.Softmax`. */
export class Softmax extends Module {
  /** The dim normalized over. */
  readonly dim: number;

  /** Softmax along `dim`. */
  constructor(dim: number) {
    super();
    if (!Number.isInteger(dim)) throw new TypeError(`Softmax: dim must be an integer, got ${dim}`);
    this.dim = dim;
  }

  /** Applies softmax. */
  override forward(x: Tensor): Tensor {
    return F.softmax(x, this.dim);
  }

  /** `dim=1`. */
  override extraRepr(): string {
    return `dim=${this.dim}`;
  }
}

/** log(softmax) along `dim`, as `torch.nn.LogSoftmax`. */
export class LogSoftmax extends Module {
  /** The dim normalized over. */
  readonly dim: number;

  /** Log-softmax along `dim`. */
  constructor(dim: number) {
    super();
    if (!Number.isInteger(dim)) {
      throw new TypeError(`LogSoftmax: dim must be an integer, got ${dim}`);
    }
    this.dim = dim;
  }

  /** Applies log-softmax. */
  override forward(x: Tensor): Tensor {
    return F.logSoftmax(x, this.dim);
  }

  /** `dim=1`. */
  override extraRepr(): string {
    return `dim=${this.dim}`;
  }
}

/**
 * In training mode zeroes each element with probability `p` and scales the
 * others by `1 / (1 - p)`; in evaluation mode it is the identity, as
 * `torch.nn.Dropout`.
 */
export class Dropout extends Module {
  /** Probability of zeroing an element. */
  readonly p: number;
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** Dropout with probability `p` (default 0.5); `inplace` as PyTorch's `inplace=True`. */
  constructor(p = 0.5, options: InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
    if (typeof p !== "number" || !(p >= 0 && p <= 1)) {
      throw new RangeError(`Dropout: probability has to be between 0 and 1, but got ${p}`);
    }
    this.p = p;
  }

  /** Applies dropout when training. */
  override forward(x: Tensor): Tensor {
    return applyInPlace("dropout_", x, this.inplace, (x) => F.dropout(x, this.p, this.training));
  }

  /** `p=0.5, inplace=False`, as PyTorch prints it. */
  override extraRepr(): string {
    return `p=${pyFloat(this.p)}, inplace=${pyBool(this.inplace)}`;
  }
}

/** Flattens dims `startDim..endDim` (default 1..-1), as `torch.nn.Flatten`. */
export class Flatten extends Module {
  /** First dim flattened. */
  readonly startDim: number;
  /** Last dim flattened. */
  readonly endDim: number;

  /** Flattens `startDim..endDim`. */
  constructor(startDim = 1, endDim = -1) {
    super();
    this.startDim = startDim;
    this.endDim = endDim;
  }

  /** Applies the flattening. */
  override forward(x: Tensor): Tensor {
    if (!(x instanceof Tensor)) throw new TypeError("Flatten: input must be a Tensor");
    return x.flatten(this.startDim, this.endDim);
  }

  /** `start_dim=1, end_dim=-1`. */
  override extraRepr(): string {
    return `start_dim=${this.startDim}, end_dim=${this.endDim}`;
  }
}

/**
 * Expands dim `dim` into `unflattenedSize` (one entry may be -1), as
 * `torch.nn.Unflatten`: the inverse of {@link Flatten}.
 */
export class Unflatten extends Module {
  /** The dim expanded. */
  readonly dim: number;
  /** The sizes it becomes. */
  readonly unflattenedSize: readonly number[];

  /** Unflattens `dim` into `unflattenedSize`. */
  constructor(dim: number, unflattenedSize: readonly number[]) {
    super();
    if (!Number.isInteger(dim)) {
      throw new TypeError(`Unflatten: dim must be an integer, got ${dim}`);
    }
    if (
      !Array.isArray(unflattenedSize) || unflattenedSize.length === 0 ||
      !unflattenedSize.every((n) => Number.isInteger(n) && n >= -1)
    ) {
      throw new TypeError(
        `Unflatten: unflattenedSize must be a non-empty array of sizes (one may be -1), got ${
          JSON.stringify(unflattenedSize)
        }`,
      );
    }
    this.dim = dim;
    this.unflattenedSize = [...unflattenedSize];
  }

  /** Applies the unflattening. */
  override forward(x: Tensor): Tensor {
    if (!(x instanceof Tensor)) throw new TypeError("Unflatten: input must be a Tensor");
    const d = this.dim < 0 ? this.dim + x.ndim : this.dim;
    if (d < 0 || d >= x.ndim) {
      throw new RangeError(
        `Unflatten: dim ${this.dim} is out of range for input of shape [${x.shape.join(", ")}]`,
      );
    }
    const shape = [...x.shape.slice(0, d), ...this.unflattenedSize, ...x.shape.slice(d + 1)];
    const known = this.unflattenedSize.reduce((n, s) => (s === -1 ? n : n * s), 1);
    const free = this.unflattenedSize.filter((s) => s === -1).length;
    if (free > 1 || (free === 0 ? known !== x.shape[d] : known === 0 || x.shape[d] % known !== 0)) {
      throw new RangeError(
        `Unflatten: sizes (${this.unflattenedSize.join(", ")}) do not multiply to ${
          x.shape[d]
        }, dim ${d} of input of shape [${x.shape.join(", ")}]`,
      );
    }
    return x.reshape(shape);
  }

  /** `dim=1, unflattened_size=(2, 5)`. */
  override extraRepr(): string {
    return `dim=${this.dim}, unflattened_size=(${this.unflattenedSize.join(", ")}${
      this.unflattenedSize.length === 1 ? "," : ""
    })`;
  }
}

/** Returns its input, as `torch.nn.Identity`. */
export class Identity extends Module {
  /** Returns `x`. */
  override forward(x: Tensor): Tensor {
    return x;
  }
}
