/**
 * Lazy modules, as PyTorch's `torch.nn.modules.lazy`: `LazyLinear`, `LazyConv1d/2d/3d`,
 * `LazyConvTranspose1d/2d/3d`, `LazyBatchNorm1d/2d/3d` and `LazyInstanceNorm1d/2d/3d` hold
 * {@link UninitializedParameter}s (and {@link UninitializedBuffer}s) until their first forward,
 * which infers the input size, materializes and initializes them exactly as the regular module's
 * constructor would, and turns the module into that regular module (PyTorch's `cls_to_become`).
 * @module
 */

import { noGrad } from "../autograd.ts";
import type { Device } from "../device.ts";
import { type DType, getDefaultDtype } from "../dtype.ts";
import { full, resolveFactory } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import { formatShape } from "../shape.ts";
import { tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import {
  Conv1d,
  type Conv1dModuleOptions,
  Conv2d,
  type Conv2dModuleOptions,
  Conv3d,
  type Conv3dModuleOptions,
  ConvTranspose1d,
  type ConvTranspose1dModuleOptions,
  ConvTranspose2d,
  type ConvTranspose2dModuleOptions,
  ConvTranspose3d,
  type ConvTranspose3dModuleOptions,
} from "./conv.ts";
import type { Size2 } from "./functional/conv.ts";
import type { Size1, Size3 } from "./functional.ts";
import { type FactoryOptions, Linear } from "./layers.ts";
import { isLazy, setLazy } from "./lazy_state.ts";
import { type Module, Parameter } from "./module.ts";
import {
  BatchNorm1d,
  BatchNorm2d,
  BatchNorm3d,
  type BatchNormBase,
  type BatchNormModuleOptions,
} from "./normalization.ts";
import {
  InstanceNorm1d,
  InstanceNorm2d,
  InstanceNorm3d,
  type InstanceNormBase,
  type InstanceNormModuleOptions,
} from "./normalization_extra.ts";
import { resetRunningStats } from "./norm_state.ts";
import { checkCount } from "./util.ts";

/** Options of {@link UninitializedParameter} and {@link UninitializedBuffer}. */
export interface UninitializedOptions {
  /** Whether the tensor requires grad (default: true for a parameter, false for a buffer). */
  requiresGrad?: boolean;
  /** Device the data will have when materialized; default the default device. */
  device?: Device | string;
  /** dtype the data will have when materialized; default float32. */
  dtype?: DType;
}

/** Options of {@link UninitializedParameter.materialize}: what to take instead of the tensor's own. */
export interface MaterializeOptions {
  /** Device of the data; default the tensor's (as moved by `module.to`). */
  device?: Device | string;
  /** dtype of the data; default the tensor's (as cast by `module.double()`). */
  dtype?: DType;
}

const SHAPE_ERROR = "Can't access the shape of an uninitialized parameter or buffer. " +
  "This error usually happens in `load_state_dict` when trying to load an uninitialized " +
  "parameter into an initialized one. Call `forward` to initialize the parameters before " +
  "accessing their attributes.";

/** The tensor methods an uninitialized tensor still has (PyTorch's `_allowed_methods`, roughly). */
const ALLOWED = new Set([
  "constructor",
  "size",
  "detach",
  "to",
  "float",
  "double",
  "toString",
  "materialize",
  "retainGrad",
]);

function useError(cls: string, what: string): TypeError {
  return new TypeError(
    `Attempted to use an uninitialized parameter in ${what}. This error happens when you are ` +
      `using a \`LazyModule\` or explicitly manipulating \`torch.nn.parameter.${cls}\` objects. ` +
      "When using LazyModules Call `forward` with a dummy batch to initialize the parameters " +
      "before calling torch functions",
  );
}

/**
 * Makes every Tensor method of `proto` (the class of an uninitialized tensor) throw PyTorch's
 * error, except the few PyTorch allows; internal ones (`_...`) stay, since module machinery
 * (moving, casting) calls them on the storage.
 */
function refuseTensorMethods(proto: object, cls: string): void {
  for (const name of Object.getOwnPropertyNames(Tensor.prototype)) {
    if (ALLOWED.has(name) || Object.hasOwn(proto, name)) continue;
    if (name.startsWith("_") && name !== "_assign") continue;
    const desc = Object.getOwnPropertyDescriptor(Tensor.prototype, name);
    if (desc && typeof desc.value === "function") {
      // An async method (data, toArray) rejects, as it would for any other failure.
      const async = desc.value.constructor.name === "AsyncFunction";
      Object.defineProperty(proto, name, {
        configurable: true,
        writable: true,
        value: async ? () => Promise.reject(useError(cls, name)) : () => {
          throw useError(cls, name);
        },
      });
    }
  }
}

function checkShape(op: string, shape: readonly number[]): number[] {
  if (!Array.isArray(shape) || shape.some((s) => !Number.isInteger(s) || s < 0)) {
    throw new RangeError(
      `${op}: shape must be an array of non-negative integers, got ${JSON.stringify(shape)}`,
    );
  }
  return [...shape];
}

/** Gives `t` data of `shape` (uninitialized values) and the class it becomes. */
function materializeInto(
  t: Tensor,
  op: string,
  shape: readonly number[],
  options: MaterializeOptions,
  becomes: object,
): void {
  const dims = checkShape(op, shape);
  const { device, dtype } = resolveFactory(
    { device: options.device ?? t.device, dtype: options.dtype },
    t.dtype,
  );
  const data = empty(dims, dtype, device);
  data.storage.persistent = true;
  t._setStorage(data.storage, dims);
  setLazy(t, false);
  Object.setPrototypeOf(t, becomes);
}

/**
 * A parameter whose shape is not known yet, as `torch.nn.UninitializedParameter`: a lazy module
 * holds them until its first forward. It has a dtype, a device and `requiresGrad` (moved and cast
 * by `module.to`/`double()`) but no data: reading `shape` or using it in any op throws PyTorch's
 * error. {@link materialize} gives it data and makes it a plain {@link Parameter}, the same object.
 */
export class UninitializedParameter extends Parameter {
  /** An uninitialized parameter of the given device and dtype. */
  constructor(options: UninitializedOptions = {}) {
    const { device, dtype } = resolveFactory(options, getDefaultDtype());
    super(empty([0], dtype, device), options.requiresGrad ?? true);
    setLazy(this, true);
  }

  /** Throws: the shape is not known before {@link materialize}. */
  override get shape(): readonly number[] {
    throw new Error(SHAPE_ERROR);
  }

  /** Throws, as {@link shape}. */
  override get ndim(): number {
    throw new Error(SHAPE_ERROR);
  }

  /** `[0]`, as PyTorch's `size()` of an uninitialized parameter. */
  override size(): readonly number[];
  /** Throws: there are no dims. */
  override size(dim: number): number;
  override size(dim?: number): number | readonly number[] {
    if (dim === undefined) return [0];
    throw useError("UninitializedParameter", "size");
  }

  /** A plain empty tensor sharing the (empty) storage: what `module.to` moves. */
  override detach(): Tensor {
    return new Tensor(this.storage, [0]);
  }

  /** The (empty) data moved or cast, as a plain tensor. */
  override to(target: Device | string | DType): Tensor {
    return this.detach().to(target);
  }

  /** `<UninitializedParameter>`, as PyTorch. */
  override toString(): string {
    return "<UninitializedParameter>";
  }

  /**
   * Gives this parameter data of `shape` (uninitialized values: the module's `resetParameters`
   * fills them) on its device with its dtype unless `options` says otherwise; it is then a
   * {@link Parameter}, the same object, so optimizers made before stay valid.
   */
  materialize(shape: readonly number[], options: MaterializeOptions = {}): void {
    materializeInto(
      this,
      "UninitializedParameter.materialize",
      shape,
      options,
      Parameter.prototype,
    );
  }
}
refuseTensorMethods(UninitializedParameter.prototype, "UninitializedParameter");

/**
 * A buffer whose shape is not known yet, as `torch.nn.UninitializedBuffer` (the running
 * statistics of the lazy norms). As {@link UninitializedParameter}, but it becomes a plain
 * Tensor.
 */
export class UninitializedBuffer extends Tensor {
  /** An uninitialized buffer of the given device and dtype. */
  constructor(options: UninitializedOptions = {}) {
    const { device, dtype } = resolveFactory(options, getDefaultDtype());
    const data = empty([0], dtype, device);
    data.storage.persistent = true;
    super(data.storage, [0]);
    if (options.requiresGrad) this.requiresGrad = true;
    setLazy(this, true);
  }

  /** Throws: the shape is not known before {@link materialize}. */
  override get shape(): readonly number[] {
    throw new Error(SHAPE_ERROR);
  }

  /** Throws, as {@link shape}. */
  override get ndim(): number {
    throw new Error(SHAPE_ERROR);
  }

  /** `[0]`, as PyTorch's `size()` of an uninitialized buffer. */
  override size(): readonly number[];
  /** Throws: there are no dims. */
  override size(dim: number): number;
  override size(dim?: number): number | readonly number[] {
    if (dim === undefined) return [0];
    throw useError("UninitializedBuffer", "size");
  }

  /** A plain empty tensor sharing the (empty) storage: what `module.to` moves. */
  override detach(): Tensor {
    return new Tensor(this.storage, [0]);
  }

  /** The (empty) data moved or cast, as a plain tensor. */
  override to(target: Device | string | DType): Tensor {
    return this.detach().to(target);
  }

  /** `<UninitializedBuffer>`, as PyTorch. */
  override toString(): string {
    return "<UninitializedBuffer>";
  }

  /** Gives this buffer data of `shape`, as {@link UninitializedParameter.materialize}; it is then a Tensor. */
  materialize(shape: readonly number[], options: MaterializeOptions = {}): void {
    materializeInto(this, "UninitializedBuffer.materialize", shape, options, Tensor.prototype);
  }
}
refuseTensorMethods(UninitializedBuffer.prototype, "UninitializedBuffer");

/** Whether `m`'s own parameters or buffers include an uninitialized one (PyTorch's `has_uninitialized_params`). */
function hasLazy(m: Module): boolean {
  return [...m.namedParameters({ recurse: false }), ...m.namedBuffers({ recurse: false })].some((
    [, t],
  ) => isLazy(t));
}

/** What every lazy module has: PyTorch's `LazyModuleMixin`. */
export interface LazyModuleMixin {
  /** Whether this module still holds uninitialized parameters or buffers. */
  hasUninitializedParams(): boolean;
  /** Infers the sizes from `input`, materializes and initializes the parameters. */
  initializeParameters(input: Tensor): void;
}

/**
 * PyTorch's `LazyModuleMixin.__init__`: a forward pre-hook that initializes the parameters from
 * the first input, checks nothing stayed uninitialized, removes itself and turns `m` into
 * `becomes` (as `cls_to_become`), all before `forward` runs.
 */
function installLazy(m: Module & LazyModuleMixin, becomes: object): void {
  const handle = m.registerForwardPreHook((_m, args) => {
    const input = args[0];
    if (!(input instanceof Tensor)) {
      throw new TypeError(
        `${m.constructor.name}: the first forward needs a Tensor input to infer the parameters' shapes, got ${
          input === null ? "null" : typeof input
        }`,
      );
    }
    noGrad(() => tidy(() => m.initializeParameters(input)));
    if (m.hasUninitializedParams()) {
      throw new Error(`module ${m.constructor.name} has not been fully initialized`);
    }
    handle.remove();
    Object.setPrototypeOf(m, becomes);
  });
}

function checkOutCount(op: string, n: unknown): number {
  return checkCount(`${op}: out`, n, false);
}

/**
 * A {@link Linear} whose `inFeatures` is inferred from the first input's last dim, as
 * `torch.nn.LazyLinear`. Until then `weight` and `bias` are {@link UninitializedParameter}s and
 * the repr reads `in_features=0`; the first forward draws them as `new Linear(inFeatures,
 * outFeatures)` would at that moment (same RNG draws) and the module becomes a Linear.
 */
export class LazyLinear extends Linear implements LazyModuleMixin {
  /** A lazy linear layer with `outFeatures` outputs; `bias` (default true), `device`, `dtype`. */
  constructor(outFeatures: number, options: { bias?: boolean } & FactoryOptions = {}) {
    checkOutCount("LazyLinear", outFeatures);
    super(0, 0, { ...options, bias: false });
    const factory = { device: options.device, dtype: options.dtype };
    this.weight = new UninitializedParameter(factory);
    Object.assign(this, { outFeatures });
    if (options.bias ?? true) this.bias = new UninitializedParameter(factory);
    installLazy(this, Linear.prototype);
  }

  /** Draws the parameters as Linear's, once they are materialized (a no-op before). */
  override resetParameters(): void {
    if (!this.hasUninitializedParams() && this.inFeatures !== 0) super.resetParameters();
  }

  /** Whether `weight` or `bias` is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }

  /** Takes `inFeatures` from `input`'s last dim and materializes and draws the parameters. */
  initializeParameters(input: Tensor): void {
    if (!this.hasUninitializedParams()) return;
    if (input.ndim === 0) {
      throw new RangeError("LazyLinear: the input must have at least 1 dim, got a 0-d tensor");
    }
    const inFeatures = input.shape[input.ndim - 1];
    Object.assign(this, { inFeatures });
    if (isLazy(this.weight)) this.weight.materialize([this.outFeatures, inFeatures]);
    if (isLazy(this.bias)) this.bias.materialize([this.outFeatures]);
    this.resetParameters();
  }
}

type ConvBase = Conv1d | Conv2d | Conv3d | ConvTranspose1d | ConvTranspose2d | ConvTranspose3d;

/** The lazy part of a convolution's constructor: its parameters replaced by uninitialized ones. */
function lazyConv(
  m: ConvBase & LazyModuleMixin,
  outChannels: number,
  options: FactoryOptions & { bias?: boolean; groups?: number },
  becomes: object,
): void {
  const factory = { device: options.device, dtype: options.dtype };
  m.weight = new UninitializedParameter(factory);
  Object.assign(m, { outChannels });
  if (options.bias ?? true) m.bias = new UninitializedParameter(factory);
  installLazy(m, becomes);
}

/** PyTorch's `_LazyConvXdMixin.initialize_parameters`. */
function initializeConv(m: ConvBase, input: Tensor, spatial: number, transposed: boolean): void {
  const unbatched = spatial + 1;
  if (input.ndim !== unbatched && input.ndim !== unbatched + 1) {
    throw new RangeError(
      `Expected ${unbatched}D (unbatched) or ${
        unbatched + 1
      }D (batched) input to ${m.constructor.name}, but got input of size: ${
        formatShape(input.shape)
      }`,
    );
  }
  const inChannels = input.ndim === unbatched ? input.shape[0] : input.shape[1];
  // Set before the check, as PyTorch's (its repr then shows it).
  Object.assign(m, { inChannels });
  if (inChannels % m.groups !== 0) {
    throw new RangeError(
      `${m.constructor.name}: in_channels must be divisible by groups (in_channels ${inChannels}, groups ${m.groups})`,
    );
  }
  const { outChannels, groups, kernelSize } = m;
  if (isLazy(m.weight)) {
    m.weight.materialize(
      transposed
        ? [inChannels, outChannels / groups, ...kernelSize]
        : [outChannels, inChannels / groups, ...kernelSize],
    );
  }
  if (isLazy(m.bias)) m.bias.materialize([outChannels]);
  m.resetParameters();
}

function checkConvOut(op: string, outChannels: unknown, groups: unknown): number {
  const out = checkOutCount(op, outChannels);
  if (typeof groups === "number" && Number.isInteger(groups) && groups > 0 && out % groups) {
    throw new RangeError(
      `${op}: groups (${groups}) must divide outChannels (${out})`,
    );
  }
  return out;
}

/** A {@link Conv1d} whose `inChannels` is inferred from the first input, as `torch.nn.LazyConv1d`. */
export class LazyConv1d extends Conv1d implements LazyModuleMixin {
  /** A lazy 1-d convolution with `outChannels` outputs; options as Conv1d's. */
  constructor(outChannels: number, kernelSize: Size1, options: Conv1dModuleOptions = {}) {
    checkConvOut("LazyConv1d", outChannels, options.groups);
    super(0, 0, kernelSize, { ...options, bias: false });
    lazyConv(this, outChannels, options, Conv1d.prototype);
  }
  /** Draws the parameters as Conv1d's, once they are materialized (a no-op before). */
  override resetParameters(): void {
    if (!this.hasUninitializedParams() && this.inChannels !== 0) super.resetParameters();
  }
  /** Whether `weight` or `bias` is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `inChannels` from `input` ([N, C, L] or [C, L]), materializes and draws the parameters. */
  initializeParameters(input: Tensor): void {
    if (this.hasUninitializedParams()) initializeConv(this, input, 1, false);
  }
}

/** A {@link Conv2d} whose `inChannels` is inferred from the first input, as `torch.nn.LazyConv2d`. */
export class LazyConv2d extends Conv2d implements LazyModuleMixin {
  /** A lazy 2-d convolution with `outChannels` outputs; options as Conv2d's. */
  constructor(outChannels: number, kernelSize: Size2, options: Conv2dModuleOptions = {}) {
    checkConvOut("LazyConv2d", outChannels, options.groups);
    super(0, 0, kernelSize, { ...options, bias: false });
    lazyConv(this, outChannels, options, Conv2d.prototype);
  }
  /** Draws the parameters as Conv2d's, once they are materialized (a no-op before). */
  override resetParameters(): void {
    if (!this.hasUninitializedParams() && this.inChannels !== 0) super.resetParameters();
  }
  /** Whether `weight` or `bias` is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `inChannels` from `input` ([N, C, H, W] or [C, H, W]), materializes and draws the parameters. */
  initializeParameters(input: Tensor): void {
    if (this.hasUninitializedParams()) initializeConv(this, input, 2, false);
  }
}

/** A {@link Conv3d} whose `inChannels` is inferred from the first input, as `torch.nn.LazyConv3d`. */
export class LazyConv3d extends Conv3d implements LazyModuleMixin {
  /** A lazy 3-d convolution with `outChannels` outputs; options as Conv3d's. */
  constructor(outChannels: number, kernelSize: Size3, options: Conv3dModuleOptions = {}) {
    checkConvOut("LazyConv3d", outChannels, options.groups);
    super(0, 0, kernelSize, { ...options, bias: false });
    lazyConv(this, outChannels, options, Conv3d.prototype);
  }
  /** Draws the parameters as Conv3d's, once they are materialized (a no-op before). */
  override resetParameters(): void {
    if (!this.hasUninitializedParams() && this.inChannels !== 0) super.resetParameters();
  }
  /** Whether `weight` or `bias` is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `inChannels` from `input` ([N, C, D, H, W] or [C, D, H, W]), materializes and draws the parameters. */
  initializeParameters(input: Tensor): void {
    if (this.hasUninitializedParams()) initializeConv(this, input, 3, false);
  }
}

/** A {@link ConvTranspose1d} whose `inChannels` is inferred, as `torch.nn.LazyConvTranspose1d`. */
export class LazyConvTranspose1d extends ConvTranspose1d implements LazyModuleMixin {
  /** A lazy 1-d transposed convolution with `outChannels` outputs; options as ConvTranspose1d's. */
  constructor(outChannels: number, kernelSize: Size1, options: ConvTranspose1dModuleOptions = {}) {
    checkConvOut("LazyConvTranspose1d", outChannels, options.groups);
    super(0, 0, kernelSize, { ...options, bias: false });
    lazyConv(this, outChannels, options, ConvTranspose1d.prototype);
  }
  /** Draws the parameters as ConvTranspose1d's, once they are materialized (a no-op before). */
  override resetParameters(): void {
    if (!this.hasUninitializedParams() && this.inChannels !== 0) super.resetParameters();
  }
  /** Whether `weight` or `bias` is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `inChannels` from `input` ([N, C, L] or [C, L]), materializes and draws the parameters. */
  initializeParameters(input: Tensor): void {
    if (this.hasUninitializedParams()) initializeConv(this, input, 1, true);
  }
}

/** A {@link ConvTranspose2d} whose `inChannels` is inferred, as `torch.nn.LazyConvTranspose2d`. */
export class LazyConvTranspose2d extends ConvTranspose2d implements LazyModuleMixin {
  /** A lazy 2-d transposed convolution with `outChannels` outputs; options as ConvTranspose2d's. */
  constructor(outChannels: number, kernelSize: Size2, options: ConvTranspose2dModuleOptions = {}) {
    checkConvOut("LazyConvTranspose2d", outChannels, options.groups);
    super(0, 0, kernelSize, { ...options, bias: false });
    lazyConv(this, outChannels, options, ConvTranspose2d.prototype);
  }
  /** Draws the parameters as ConvTranspose2d's, once they are materialized (a no-op before). */
  override resetParameters(): void {
    if (!this.hasUninitializedParams() && this.inChannels !== 0) super.resetParameters();
  }
  /** Whether `weight` or `bias` is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `inChannels` from `input` ([N, C, H, W] or [C, H, W]), materializes and draws the parameters. */
  initializeParameters(input: Tensor): void {
    if (this.hasUninitializedParams()) initializeConv(this, input, 2, true);
  }
}

/** A {@link ConvTranspose3d} whose `inChannels` is inferred, as `torch.nn.LazyConvTranspose3d`. */
export class LazyConvTranspose3d extends ConvTranspose3d implements LazyModuleMixin {
  /** A lazy 3-d transposed convolution with `outChannels` outputs; options as ConvTranspose3d's. */
  constructor(outChannels: number, kernelSize: Size3, options: ConvTranspose3dModuleOptions = {}) {
    checkConvOut("LazyConvTranspose3d", outChannels, options.groups);
    super(0, 0, kernelSize, { ...options, bias: false });
    lazyConv(this, outChannels, options, ConvTranspose3d.prototype);
  }
  /** Draws the parameters as ConvTranspose3d's, once they are materialized (a no-op before). */
  override resetParameters(): void {
    if (!this.hasUninitializedParams() && this.inChannels !== 0) super.resetParameters();
  }
  /** Whether `weight` or `bias` is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `inChannels` from `input` ([N, C, D, H, W] or [C, D, H, W]), materializes and draws the parameters. */
  initializeParameters(input: Tensor): void {
    if (this.hasUninitializedParams()) initializeConv(this, input, 3, true);
  }
}

type NormBase = BatchNormBase | InstanceNormBase;
type NormOptions = FactoryOptions & { affine?: boolean; trackRunningStats?: boolean };

/**
 * PyTorch's `_LazyNormBase.__init__` over a norm built with one feature and no affine parameters
 * or statistics: `numFeatures` 0, uninitialized parameters and buffers where `options` asks
 * (`affine` and `trackRunningStats` default to true, for the instance norms too, as 1.13's).
 */
function lazyNorm(m: NormBase & LazyModuleMixin, options: NormOptions, becomes: object): void {
  const affine = options.affine ?? true;
  const trackRunningStats = options.trackRunningStats ?? true;
  const factory = { device: options.device, dtype: options.dtype };
  Object.assign(m, { numFeatures: 0, affine, trackRunningStats });
  if (affine) {
    m.weight = new UninitializedParameter(factory);
    m.bias = new UninitializedParameter(factory);
  }
  if (trackRunningStats) {
    m.runningMean = new UninitializedBuffer(factory);
    m.runningVar = new UninitializedBuffer(factory);
    const device = resolveFactory(factory, "float32").device;
    m.numBatchesTracked = full([], 0, { device, dtype: "int32" });
  }
  installLazy(m, becomes);
}

/** PyTorch's `_LazyNormBase.initialize_parameters`: C is `input.shape[1]`. */
function initializeNorm(m: NormBase, input: Tensor): void {
  if (!hasLazy(m)) return;
  if (input.ndim < 2) {
    throw new RangeError(
      `${m.constructor.name}: the input must have at least 2 dims to infer num_features, got shape ${
        formatShape(input.shape)
      }`,
    );
  }
  const numFeatures = input.shape[1];
  Object.assign(m, { numFeatures });
  for (const t of [m.weight, m.bias, m.runningMean, m.runningVar]) {
    if (isLazy(t)) t.materialize([numFeatures]);
  }
  resetNorm(m);
}

/** PyTorch's `_NormBase.reset_parameters`: statistics reset, weight 1, bias 0. */
function resetNorm(m: NormBase): void {
  if (m.numFeatures === 0 || hasLazy(m)) return;
  resetRunningStats([m.runningMean, m.runningVar, m.numBatchesTracked]);
  noGrad(() => {
    m.weight?.fill_(1);
    m.bias?.fill_(0);
  });
}

/** Options of the lazy batch norms: BatchNorm's, where `numFeatures` is inferred. */
export type LazyBatchNormOptions = BatchNormModuleOptions;

/** Options of the lazy instance norms; `affine` and `trackRunningStats` default to true, as 1.13's. */
export type LazyInstanceNormOptions = InstanceNormModuleOptions;

/** A {@link BatchNorm1d} whose `numFeatures` is inferred from the first input, as `torch.nn.LazyBatchNorm1d`. */
export class LazyBatchNorm1d extends BatchNorm1d implements LazyModuleMixin {
  /** A lazy batch norm; options as BatchNorm1d's. */
  constructor(options: LazyBatchNormOptions = {}) {
    super(1, { ...options, affine: false, trackRunningStats: false });
    lazyNorm(this, options, BatchNorm1d.prototype);
  }
  /** Whether a parameter or running statistic is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `numFeatures` from `input.shape[1]`, materializes and initializes the parameters. */
  initializeParameters(input: Tensor): void {
    initializeNorm(this, input);
  }
}

/** A {@link BatchNorm2d} whose `numFeatures` is inferred from the first input, as `torch.nn.LazyBatchNorm2d`. */
export class LazyBatchNorm2d extends BatchNorm2d implements LazyModuleMixin {
  /** A lazy batch norm; options as BatchNorm2d's. */
  constructor(options: LazyBatchNormOptions = {}) {
    super(1, { ...options, affine: false, trackRunningStats: false });
    lazyNorm(this, options, BatchNorm2d.prototype);
  }
  /** Whether a parameter or running statistic is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `numFeatures` from `input.shape[1]`, materializes and initializes the parameters. */
  initializeParameters(input: Tensor): void {
    initializeNorm(this, input);
  }
}

/** A {@link BatchNorm3d} whose `numFeatures` is inferred from the first input, as `torch.nn.LazyBatchNorm3d`. */
export class LazyBatchNorm3d extends BatchNorm3d implements LazyModuleMixin {
  /** A lazy batch norm; options as BatchNorm3d's. */
  constructor(options: LazyBatchNormOptions = {}) {
    super(1, { ...options, affine: false, trackRunningStats: false });
    lazyNorm(this, options, BatchNorm3d.prototype);
  }
  /** Whether a parameter or running statistic is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `numFeatures` from `input.shape[1]`, materializes and initializes the parameters. */
  initializeParameters(input: Tensor): void {
    initializeNorm(this, input);
  }
}

/**
 * An {@link InstanceNorm1d} whose `numFeatures` is inferred from the first input's dim 1, as
 * `torch.nn.LazyInstanceNorm1d` (so an unbatched [C, L] input gives L, as in PyTorch).
 */
export class LazyInstanceNorm1d extends InstanceNorm1d implements LazyModuleMixin {
  /** A lazy instance norm; options as InstanceNorm1d's, but `affine`/`trackRunningStats` default true. */
  constructor(options: LazyInstanceNormOptions = {}) {
    super(1, { ...options, affine: false, trackRunningStats: false });
    lazyNorm(this, options, InstanceNorm1d.prototype);
  }
  /** Whether a parameter or running statistic is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `numFeatures` from `input.shape[1]`, materializes and initializes the parameters. */
  initializeParameters(input: Tensor): void {
    initializeNorm(this, input);
  }
}

/** An {@link InstanceNorm2d} whose `numFeatures` is inferred, as `torch.nn.LazyInstanceNorm2d`. */
export class LazyInstanceNorm2d extends InstanceNorm2d implements LazyModuleMixin {
  /** A lazy instance norm; options as InstanceNorm2d's, but `affine`/`trackRunningStats` default true. */
  constructor(options: LazyInstanceNormOptions = {}) {
    super(1, { ...options, affine: false, trackRunningStats: false });
    lazyNorm(this, options, InstanceNorm2d.prototype);
  }
  /** Whether a parameter or running statistic is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `numFeatures` from `input.shape[1]`, materializes and initializes the parameters. */
  initializeParameters(input: Tensor): void {
    initializeNorm(this, input);
  }
}

/** An {@link InstanceNorm3d} whose `numFeatures` is inferred, as `torch.nn.LazyInstanceNorm3d`. */
export class LazyInstanceNorm3d extends InstanceNorm3d implements LazyModuleMixin {
  /** A lazy instance norm; options as InstanceNorm3d's, but `affine`/`trackRunningStats` default true. */
  constructor(options: LazyInstanceNormOptions = {}) {
    super(1, { ...options, affine: false, trackRunningStats: false });
    lazyNorm(this, options, InstanceNorm3d.prototype);
  }
  /** Whether a parameter or running statistic is still uninitialized. */
  hasUninitializedParams(): boolean {
    return hasLazy(this);
  }
  /** Takes `numFeatures` from `input.shape[1]`, materializes and initializes the parameters. */
  initializeParameters(input: Tensor): void {
    initializeNorm(this, input);
  }
}
