/**
 * Learning-rate schedules, as `torch.optim.lr_scheduler`: each scheduler
 * writes `optimizer.paramGroups[i].lr` when it steps, with PyTorch 1.13's
 * (mostly recursive) formulas evaluated in the same order, so the learning
 * rate of every step is PyTorch's.
 *
 * Call `scheduler.step()` after `optimizer.step()`, once per epoch (or per
 * batch for `OneCycleLR` and `CyclicLR`). `SequentialLR` hands the epochs
 * to one scheduler after another at milestones; `ChainedScheduler` steps
 * several at once. Building a scheduler performs its first step, as
 * in PyTorch: the groups' `lr` is the schedule's value at epoch 0 from then
 * on.
 *
 * @example
 * ```ts
 * import { nn, optim } from "@multigrad/core";
 * const opt = new optim.SGD(new nn.Linear(4, 2).parameters(), { lr: 0.1 });
 * const scheduler = new optim.lrScheduler.StepLR(opt, 30, { gamma: 0.1 });
 * for (let epoch = 0; epoch < 100; epoch++) {
 *   // train: opt.zeroGrad(); loss.backward(); opt.step();
 *   scheduler.step();
 * }
 * ```
 * @module
 */

import { type AnyOptimizer, Optimizer } from "./optimizer.ts";
import { ownKey, torchKey } from "./util.ts";

/** A value in a scheduler's state dict: plain data that survives `JSON.stringify`. */
export type SchedulerStateValue =
  | number
  | boolean
  | string
  | null
  | SchedulerStateValue[]
  | { [key: string]: SchedulerStateValue };

/**
 * What a scheduler's `stateDict()` returns: its counters and settings under
 * PyTorch's names and in PyTorch's form (`base_lrs`, `last_epoch`,
 * `_step_count`, `_last_lr`, `T_max`, a `MultiStepLR`'s milestones as counts
 * by epoch), so it moves between the two as is. Functions (`LambdaLR`'s
 * factors) are `null`, as PyTorch writes them. `loadStateDict` also reads the
 * camelCase names of earlier multigrad versions.
 */
export type SchedulerStateDict = Record<string, SchedulerStateValue>;

/** Options every scheduler built on {@link LRScheduler} takes. */
export interface SchedulerOptions {
  /**
   * The index of the last epoch when resuming (default -1: start). When not
   * -1, every parameter group must already hold `initialLr` (an optimizer
   * restored from a state dict that a scheduler had stepped does).
   */
  lastEpoch?: number;
}

/** The optimizer's groups seen as records: schedulers read and write `lr` and their own keys. */
type Group = Record<string, unknown> & { lr: number };

function groupsOf(optimizer: AnyOptimizer): Group[] {
  return optimizer.paramGroups as unknown as Group[];
}

function checkOptimizer(owner: string, optimizer: unknown): asserts optimizer is AnyOptimizer {
  if (!(optimizer instanceof Optimizer)) {
    throw new TypeError(
      `${owner}: ${
        optimizer === null
          ? "null"
          : typeof optimizer === "object"
          ? (optimizer as object).constructor?.name ?? "object"
          : typeof optimizer
      } is not an Optimizer`,
    );
  }
}

function checkFinite(owner: string, what: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new RangeError(`${owner}: ${what} must be a finite number, got ${String(value)}`);
  }
  return value;
}

function checkInteger(owner: string, what: string, value: unknown, min: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min) {
    throw new RangeError(`${owner}: ${what} must be an integer >= ${min}, got ${String(value)}`);
  }
  return value;
}

/** One value per group: `value` repeated, or an array that must have one entry per group. */
function perGroup(
  owner: string,
  what: string,
  value: number | readonly number[],
  groups: number,
): number[] {
  if (Array.isArray(value)) {
    if (value.length !== groups) {
      throw new RangeError(`${owner}: expected ${groups} values for ${what}, got ${value.length}`);
    }
    return value.map((v, i) => checkFinite(owner, `${what}[${i}]`, v));
  }
  return new Array(groups).fill(checkFinite(owner, what, value));
}

function copyState(value: SchedulerStateValue): SchedulerStateValue {
  return value !== null && typeof value === "object" ? structuredClone(value) : value;
}

function kindOf(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
}

/** PyTorch's names of the fields whose name is not just the field's in snake_case. */
const TORCH_FIELD_NAMES: Readonly<Record<string, string>> = {
  stepCount: "_step_count",
  lastLr: "_last_lr",
  tMax: "T_max",
  t0: "T_0",
  tI: "T_i",
  tMult: "T_mult",
  tCur: "T_cur",
  schedulePhases: "_schedule_phases",
  annealStrategy: "_anneal_func_type",
  schedulers: "_schedulers",
};

/** The name PyTorch's state dict gives field `key` (`names` first: a class's own renames). */
function torchField(key: string, names: Readonly<Record<string, string>> = {}): string {
  return names[key] ?? TORCH_FIELD_NAMES[key] ?? torchKey(key);
}

/** How one scheduler class names and converts its fields in a state dict. */
interface FieldForm {
  /** Field names that differ from {@link TORCH_FIELD_NAMES}' (SequentialLR's `_milestones`). */
  names?: Readonly<Record<string, string>>;
  /** PyTorch's form of a field's value. */
  encode?: (key: string, value: SchedulerStateValue) => SchedulerStateValue;
  /** A field's value from PyTorch's form (or already in multigrad's); throws on a bad one. */
  decode?: (key: string, value: SchedulerStateValue) => SchedulerStateValue;
  /** Fields that keep their value when the state dict has none (PyTorch writes them only sometimes). */
  optional?: readonly string[];
}

/** `value` if it is one of `allowed`, else a RangeError naming the field. */
function oneOf(
  owner: string,
  name: string,
  value: SchedulerStateValue,
  allowed: readonly string[],
): SchedulerStateValue {
  if (typeof value !== "string" || !allowed.includes(value)) {
    throw new RangeError(
      `${owner}.loadStateDict: "${name}" must be one of ${JSON.stringify(allowed)}, got ${
        JSON.stringify(value)
      }`,
    );
  }
  return value;
}

/** `keys` of `source` under PyTorch's names, copied and in PyTorch's form. */
function saveFields(
  source: object,
  keys: readonly string[],
  form: FieldForm = {},
): SchedulerStateDict {
  const fields = source as Record<string, SchedulerStateValue>;
  const out: SchedulerStateDict = {};
  for (const key of keys) {
    const value = copyState(fields[key]);
    out[torchField(key, form.names)] = form.encode ? form.encode(key, value) : value;
  }
  return out;
}

/** The value of field `key` in `stateDict`: under PyTorch's name, else under multigrad's own. */
function storedField(
  stateDict: SchedulerStateDict,
  key: string,
  names?: Readonly<Record<string, string>>,
): { name: string; found: boolean; value: SchedulerStateValue } {
  const name = torchField(key, names);
  if (name in stateDict) return { name, found: true, value: stateDict[name] };
  if (key in stateDict) return { name: key, found: true, value: stateDict[key] };
  return { name, found: false, value: null };
}

/** Restores the fields `keys` of `target` from `stateDict`, checked first so that an error changes nothing. */
function loadFields(
  owner: string,
  target: object,
  keys: readonly string[],
  stateDict: SchedulerStateDict,
  nullable: readonly string[] = [],
  form: FieldForm = {},
): void {
  if (stateDict === null || typeof stateDict !== "object" || Array.isArray(stateDict)) {
    throw new TypeError(
      `${owner}.loadStateDict: expected a state dict object, got ${kindOf(stateDict)}`,
    );
  }
  const fields = target as Record<string, SchedulerStateValue>;
  const present = keys.filter((key) =>
    !form.optional?.includes(key) || storedField(stateDict, key, form.names).found
  );
  const values = present.map((key) => {
    const { name, found, value } = storedField(stateDict, key, form.names);
    if (!found) throw new Error(`${owner}.loadStateDict: the state dict has no "${name}"`);
    const decoded = form.decode ? form.decode(key, value) : value;
    const want = kindOf(fields[key]);
    const got = kindOf(decoded);
    if (got !== want && !(got === "null" && nullable.includes(key))) {
      throw new TypeError(`${owner}.loadStateDict: "${name}" must be a ${want}, got ${got}`);
    }
    return decoded;
  });
  present.forEach((key, i) => fields[key] = copyState(values[i]));
}

/** The fields every {@link LRScheduler} saves, in PyTorch's order after the subclass's own. */
const BASE_KEYS = ["baseLrs", "lastEpoch", "stepCount", "lastLr"] as const;

/**
 * The base of the epoch-driven schedulers, as PyTorch's `_LRScheduler`:
 * `step()` advances `lastEpoch`, computes every group's new learning rate
 * (`getLr`) and writes it into `optimizer.paramGroups[i].lr`.
 *
 * A subclass calls {@link initialStep} at the end of its constructor, once
 * its own fields are set.
 */
export abstract class LRScheduler {
  /** The optimizer whose groups' `lr` this scheduler sets. */
  readonly optimizer: AnyOptimizer;
  /** Each group's `initialLr` when the scheduler was made. */
  baseLrs: number[];
  /** The index of the last epoch stepped (0 after construction). */
  lastEpoch: number;
  /** Steps taken, the initial one included (PyTorch's `_step_count`). */
  stepCount = 0;
  /** The learning rates the last step set. */
  lastLr: number[] = [];

  /** Attaches to `optimizer`, setting each group's `initialLr` (to its `lr`) when starting. */
  constructor(optimizer: AnyOptimizer, lastEpoch = -1) {
    const name = new.target.name;
    checkOptimizer(name, optimizer);
    checkInteger(name, "lastEpoch", lastEpoch, -1);
    this.optimizer = optimizer;
    const groups = groupsOf(optimizer);
    if (lastEpoch === -1) {
      for (const group of groups) if (group.initialLr === undefined) group.initialLr = group.lr;
    } else {
      groups.forEach((group, i) => {
        if (typeof group.initialLr !== "number") {
          throw new Error(
            `${name}: param 'initialLr' is not specified in paramGroups[${i}] when resuming an optimizer (lastEpoch ${lastEpoch})`,
          );
        }
      });
    }
    this.baseLrs = groups.map((g) => g.initialLr as number);
    this.lastEpoch = lastEpoch;
  }

  /**
   * The first step, which sets the epoch-0 learning rates (PyTorch's
   * `_initial_step`): subclasses call it last in their constructor, and
   * {@link SequentialLR} to start its first scheduler again.
   */
  initialStep(): void {
    this.stepCount = 0;
    this.step();
  }

  /** The learning rate of every group for the epoch `lastEpoch` (just advanced). */
  protected abstract getLr(): number[];

  /**
   * The learning rates at `lastEpoch` from the initial ones alone (PyTorch's
   * `_get_closed_form_lr`), for {@link step} with an epoch; null where the
   * schedule has none, and `getLr` serves.
   */
  protected closedFormLr(): number[] | null {
    return null;
  }

  /** The names of the subclass's fields that its state dict holds besides the base's. */
  protected abstract stateKeys(): readonly string[];

  /**
   * Advances one epoch and sets every group's `lr`. With `epoch`, jumps to
   * that epoch instead and uses the closed form where the schedule has one,
   * as PyTorch's (deprecated) `step(epoch)`; {@link SequentialLR} does so at
   * its milestones.
   */
  step(epoch?: number): void {
    this.stepCount += 1;
    let values: number[];
    if (epoch === undefined) {
      this.lastEpoch += 1;
      values = this.getLr();
    } else {
      this.lastEpoch = checkInteger(this.constructor.name, "epoch", epoch, 0);
      values = this.closedFormLr() ?? this.getLr();
    }
    this.#setLrs(values);
  }

  /** Writes `values` into the groups' `lr` and remembers them. */
  #setLrs(values: number[]): void {
    const groups = groupsOf(this.optimizer);
    groups.forEach((group, i) => group.lr = values[i]);
    this.lastLr = groups.map((g) => g.lr);
  }

  /** The learning rates the last step set, one per group. */
  getLastLr(): number[] {
    return [...this.lastLr];
  }

  /** The scheduler's counters and settings (plain data; see {@link SchedulerStateDict}). */
  stateDict(): SchedulerStateDict {
    return saveFields(this, [...this.stateKeys(), ...BASE_KEYS], this.fieldForm());
  }

  /** How the subclass's fields look in PyTorch's state dict, where not as they are here. */
  protected fieldForm(): FieldForm {
    return {};
  }

  /**
   * Restores a {@link stateDict}. Load the optimizer's state dict too: the
   * groups' learning rates live there.
   */
  loadStateDict(stateDict: SchedulerStateDict): void {
    loadFields(
      this.constructor.name,
      this,
      [...BASE_KEYS, ...this.stateKeys()],
      stateDict,
      [],
      this.fieldForm(),
    );
  }
}

/** Options of {@link StepLR}. */
export interface StepLROptions extends SchedulerOptions {
  /** Factor of each decay (default 0.1). */
  gamma?: number;
}

/** Multiplies the learning rate by `gamma` every `stepSize` epochs, as `torch.optim.lr_scheduler.StepLR`. */
export class StepLR extends LRScheduler {
  /** Epochs between decays. */
  stepSize: number;
  /** Factor of each decay. */
  gamma: number;

  /** Decays `optimizer`'s learning rates every `stepSize` epochs. */
  constructor(optimizer: AnyOptimizer, stepSize: number, options: StepLROptions = {}) {
    super(optimizer, options.lastEpoch);
    this.stepSize = checkInteger("StepLR", "stepSize", stepSize, 1);
    this.gamma = checkFinite("StepLR", "gamma", options.gamma ?? 0.1);
    this.initialStep();
  }

  /** PyTorch's recursive form. */
  protected override getLr(): number[] {
    const groups = groupsOf(this.optimizer);
    if (this.lastEpoch === 0 || this.lastEpoch % this.stepSize !== 0) {
      return groups.map((g) => g.lr);
    }
    return groups.map((g) => g.lr * this.gamma);
  }

  /** `base · gamma^⌊epoch / stepSize⌋`. */
  protected override closedFormLr(): number[] {
    return this.baseLrs.map((base) =>
      base * this.gamma ** Math.floor(this.lastEpoch / this.stepSize)
    );
  }

  /** `stepSize`, `gamma`. */
  protected override stateKeys(): readonly string[] {
    return ["stepSize", "gamma"];
  }
}

/** Options of {@link MultiStepLR}. */
export interface MultiStepLROptions extends SchedulerOptions {
  /** Factor of each decay (default 0.1). */
  gamma?: number;
}

/**
 * Multiplies the learning rate by `gamma` at each milestone epoch (by
 * `gamma^k` at a milestone listed k times), as
 * `torch.optim.lr_scheduler.MultiStepLR`.
 */
export class MultiStepLR extends LRScheduler {
  /** The milestone epochs, sorted (repeats kept). */
  milestones: number[];
  /** Factor of each decay. */
  gamma: number;

  /** Decays `optimizer`'s learning rates at `milestones`. */
  constructor(
    optimizer: AnyOptimizer,
    milestones: readonly number[],
    options: MultiStepLROptions = {},
  ) {
    super(optimizer, options.lastEpoch);
    if (!Array.isArray(milestones)) {
      throw new TypeError(
        `MultiStepLR: milestones must be an array of epochs, got ${kindOf(milestones)}`,
      );
    }
    this.milestones = milestones.map((m, i) =>
      checkInteger("MultiStepLR", `milestones[${i}]`, m, 0)
    )
      .sort((a, b) => a - b);
    this.gamma = checkFinite("MultiStepLR", "gamma", options.gamma ?? 0.1);
    this.initialStep();
  }

  /** PyTorch's recursive form. */
  protected override getLr(): number[] {
    const groups = groupsOf(this.optimizer);
    const count = this.milestones.filter((m) => m === this.lastEpoch).length;
    if (count === 0) return groups.map((g) => g.lr);
    return groups.map((g) => g.lr * this.gamma ** count);
  }

  /** `base · gamma^(milestones passed)`. */
  protected override closedFormLr(): number[] {
    const passed = this.milestones.filter((m) => m <= this.lastEpoch).length;
    return this.baseLrs.map((base) => base * this.gamma ** passed);
  }

  /** `milestones`, `gamma`. */
  protected override stateKeys(): readonly string[] {
    return ["milestones", "gamma"];
  }

  /** Milestones as PyTorch's `Counter`: how many times each epoch is one, by epoch. */
  protected override fieldForm(): FieldForm {
    return {
      encode: (key, value) => {
        if (key !== "milestones") return value;
        const counts: Record<string, number> = {};
        for (const m of value as number[]) counts[m] = (counts[m] ?? 0) + 1;
        return counts;
      },
      decode: (key, value) => {
        if (key !== "milestones" || value === null || typeof value !== "object") return value;
        if (Array.isArray(value)) return value;
        const epochs: number[] = [];
        for (const [epoch, count] of Object.entries(value)) {
          const m = checkInteger(
            "MultiStepLR.loadStateDict",
            `milestones[${epoch}]`,
            Number(epoch),
            0,
          );
          const n = checkInteger(
            "MultiStepLR.loadStateDict",
            `the count of milestone ${epoch}`,
            count,
            1,
          );
          for (let i = 0; i < n; i++) epochs.push(m);
        }
        return epochs.sort((a, b) => a - b);
      },
    };
  }
}

/** Multiplies the learning rate by `gamma` every epoch, as `torch.optim.lr_scheduler.ExponentialLR`. */
export class ExponentialLR extends LRScheduler {
  /** Factor of each decay. */
  gamma: number;

  /** Decays `optimizer`'s learning rates by `gamma` per epoch. */
  constructor(optimizer: AnyOptimizer, gamma: number, options: SchedulerOptions = {}) {
    super(optimizer, options.lastEpoch);
    this.gamma = checkFinite("ExponentialLR", "gamma", gamma);
    this.initialStep();
  }

  /** PyTorch's recursive form. */
  protected override getLr(): number[] {
    const groups = groupsOf(this.optimizer);
    if (this.lastEpoch === 0) return groups.map((g) => g.lr);
    return groups.map((g) => g.lr * this.gamma);
  }

  /** `base · gamma^epoch`. */
  protected override closedFormLr(): number[] {
    return this.baseLrs.map((base) => base * this.gamma ** this.lastEpoch);
  }

  /** `gamma`. */
  protected override stateKeys(): readonly string[] {
    return ["gamma"];
  }
}

/** Options of {@link CosineAnnealingLR}. */
export interface CosineAnnealingLROptions extends SchedulerOptions {
  /** The lowest learning rate (default 0). */
  etaMin?: number;
}

/**
 * Cosine annealing from each group's initial learning rate to `etaMin` over
 * `tMax` epochs, as `torch.optim.lr_scheduler.CosineAnnealingLR`, in
 * PyTorch's recursive form: past `tMax` the rate climbs back up (the cosine
 * continues), and changes made to `lr` from outside carry on.
 */
export class CosineAnnealingLR extends LRScheduler {
  /** Epochs of one half period. */
  tMax: number;
  /** The lowest learning rate. */
  etaMin: number;

  /** Anneals `optimizer`'s learning rates over `tMax` epochs. */
  constructor(optimizer: AnyOptimizer, tMax: number, options: CosineAnnealingLROptions = {}) {
    super(optimizer, options.lastEpoch);
    this.tMax = checkInteger("CosineAnnealingLR", "tMax", tMax, 1);
    this.etaMin = checkFinite("CosineAnnealingLR", "etaMin", options.etaMin ?? 0);
    this.initialStep();
  }

  /** PyTorch's recursive form (the closed form on a resumed first step). */
  protected override getLr(): number[] {
    const groups = groupsOf(this.optimizer);
    const { lastEpoch: e, tMax, etaMin } = this;
    if (e === 0) return groups.map((g) => g.lr);
    if (this.stepCount === 1 && e > 0) {
      return this.baseLrs.map((base) =>
        etaMin + (base - etaMin) * (1 + Math.cos(e * Math.PI / tMax)) / 2
      );
    }
    if ((e - 1 - tMax) % (2 * tMax) === 0) {
      return groups.map((g, i) =>
        g.lr + (this.baseLrs[i] - etaMin) * (1 - Math.cos(Math.PI / tMax)) / 2
      );
    }
    return groups.map((g) =>
      (1 + Math.cos(Math.PI * e / tMax)) / (1 + Math.cos(Math.PI * (e - 1) / tMax)) *
        (g.lr - etaMin) + etaMin
    );
  }

  /** `etaMin + (base - etaMin)(1 + cos(π epoch / tMax)) / 2`. */
  protected override closedFormLr(): number[] {
    const { lastEpoch: e, tMax, etaMin } = this;
    return this.baseLrs.map((base) =>
      etaMin + (base - etaMin) * (1 + Math.cos(Math.PI * e / tMax)) / 2
    );
  }

  /** `tMax`, `etaMin`. */
  protected override stateKeys(): readonly string[] {
    return ["tMax", "etaMin"];
  }
}

/** Options of {@link LinearLR}. */
export interface LinearLROptions extends SchedulerOptions {
  /** Factor of the first epoch, in (0, 1] (default 1/3). */
  startFactor?: number;
  /** Factor from `totalIters` on, in [0, 1] (default 1). */
  endFactor?: number;
  /** Epochs over which the factor moves from start to end (default 5). */
  totalIters?: number;
}

/**
 * Scales the learning rate by a factor that moves linearly from
 * `startFactor` to `endFactor` over `totalIters` epochs (a warm-up, or a
 * linear decay), as `torch.optim.lr_scheduler.LinearLR`.
 */
export class LinearLR extends LRScheduler {
  /** Factor of the first epoch. */
  startFactor: number;
  /** Factor from `totalIters` on. */
  endFactor: number;
  /** Epochs of the ramp. */
  totalIters: number;

  /** Ramps `optimizer`'s learning rates. */
  constructor(optimizer: AnyOptimizer, options: LinearLROptions = {}) {
    super(optimizer, options.lastEpoch);
    const start = checkFinite("LinearLR", "startFactor", options.startFactor ?? 1 / 3);
    const end = checkFinite("LinearLR", "endFactor", options.endFactor ?? 1);
    // 0 would divide by zero at the second step (PyTorch 1.13 raises ZeroDivisionError there).
    if (!(start > 0 && start <= 1)) {
      throw new RangeError(`LinearLR: startFactor must be in (0, 1], got ${start}`);
    }
    if (!(end >= 0 && end <= 1)) {
      throw new RangeError(`LinearLR: endFactor must be in [0, 1], got ${end}`);
    }
    this.startFactor = start;
    this.endFactor = end;
    this.totalIters = checkInteger("LinearLR", "totalIters", options.totalIters ?? 5, 1);
    this.initialStep();
  }

  /** PyTorch's recursive form. */
  protected override getLr(): number[] {
    const groups = groupsOf(this.optimizer);
    const { lastEpoch: e, startFactor: start, endFactor: end, totalIters } = this;
    if (e === 0) return groups.map((g) => g.lr * start);
    if (e > totalIters) return groups.map((g) => g.lr);
    return groups.map((g) =>
      g.lr * (1 + (end - start) / (totalIters * start + (e - 1) * (end - start)))
    );
  }

  /** `base · (start + (end - start) · min(totalIters, epoch) / totalIters)`. */
  protected override closedFormLr(): number[] {
    const { lastEpoch: e, startFactor: start, endFactor: end, totalIters } = this;
    return this.baseLrs.map((base) =>
      base * (start + (end - start) * Math.min(totalIters, e) / totalIters)
    );
  }

  /** `startFactor`, `endFactor`, `totalIters`. */
  protected override stateKeys(): readonly string[] {
    return ["startFactor", "endFactor", "totalIters"];
  }
}

/** A factor of the initial learning rate by epoch, for {@link LambdaLR}. */
export type LrLambda = (epoch: number) => number;

/**
 * Shared by {@link LambdaLR} and {@link MultiplicativeLR}: one factor
 * function per group (one given is shared by every group), checked to be
 * functions returning numbers, and kept out of the state dict.
 */
abstract class LambdaScheduler extends LRScheduler {
  /** The factor functions, one per group. */
  readonly lrLambdas: LrLambda[];

  constructor(
    private readonly owner: string,
    optimizer: AnyOptimizer,
    lrLambda: LrLambda | readonly LrLambda[],
    options: SchedulerOptions,
  ) {
    super(optimizer, options.lastEpoch);
    const groups = this.optimizer.paramGroups.length;
    if (Array.isArray(lrLambda)) {
      if (lrLambda.length !== groups) {
        throw new RangeError(`${owner}: expected ${groups} lrLambdas, but got ${lrLambda.length}`);
      }
      this.lrLambdas = [...lrLambda];
    } else this.lrLambdas = new Array(groups).fill(lrLambda);
    this.lrLambdas.forEach((fn, i) => {
      if (typeof fn !== "function") {
        throw new TypeError(`${owner}: lrLambda ${i} is not a function (got ${typeof fn})`);
      }
    });
    this.initialStep();
  }

  /** Group `i`'s factor at the current epoch, an error unless a number. */
  protected groupFactor(i: number): number {
    const factor = this.lrLambdas[i](this.lastEpoch);
    if (typeof factor !== "number" || Number.isNaN(factor)) {
      throw new TypeError(
        `${this.owner}: lrLambda ${i} returned ${
          String(factor)
        } for epoch ${this.lastEpoch}; expected a number`,
      );
    }
    return factor;
  }

  /** None: the functions are code, not state. */
  protected override stateKeys(): readonly string[] {
    return [];
  }

  /** The base's fields, and `lr_lambdas` as PyTorch writes functions: `null`, one per group. */
  override stateDict(): SchedulerStateDict {
    return { ...super.stateDict(), lr_lambdas: this.lrLambdas.map(() => null) };
  }
}

/**
 * Sets each group's learning rate to its initial one times `fn(epoch)`, as
 * `torch.optim.lr_scheduler.LambdaLR`; one function for every group, or one
 * per group. The functions are not part of the state dict.
 */
export class LambdaLR extends LambdaScheduler {
  /** Scales `optimizer`'s initial learning rates by `lrLambda(epoch)`. */
  constructor(
    optimizer: AnyOptimizer,
    lrLambda: LrLambda | readonly LrLambda[],
    options: SchedulerOptions = {},
  ) {
    super("LambdaLR", optimizer, lrLambda, options);
  }

  /** `baseLr · fn(lastEpoch)`. */
  protected override getLr(): number[] {
    return this.baseLrs.map((base, i) => base * this.groupFactor(i));
  }
}

/** Options of {@link ConstantLR}. */
export interface ConstantLROptions extends SchedulerOptions {
  /** The factor of the first `totalIters` epochs, in [0, 1] (default 1/3). */
  factor?: number;
  /** Epochs at the reduced rate (default 5). */
  totalIters?: number;
}

/**
 * Multiplies the learning rate by `factor` for the first `totalIters`
 * epochs, then restores it (a constant warm-up), as
 * `torch.optim.lr_scheduler.ConstantLR`.
 */
export class ConstantLR extends LRScheduler {
  /** The factor until `totalIters`. */
  factor: number;
  /** Epochs at the reduced rate. */
  totalIters: number;

  /** Reduces `optimizer`'s learning rates for `totalIters` epochs. */
  constructor(optimizer: AnyOptimizer, options: ConstantLROptions = {}) {
    super(optimizer, options.lastEpoch);
    const factor = checkFinite("ConstantLR", "factor", options.factor ?? 1 / 3);
    if (!(factor >= 0 && factor <= 1)) {
      throw new RangeError(
        `ConstantLR: the constant multiplicative factor must be in [0, 1], got ${factor}`,
      );
    }
    // PyTorch takes any integer; a negative one never restores the rate, which is surely a mistake.
    const totalIters = checkInteger("ConstantLR", "totalIters", options.totalIters ?? 5, 0);
    // The restoring step divides by the factor (PyTorch 1.13 raises ZeroDivisionError there).
    if (factor === 0 && totalIters > 0) {
      throw new RangeError(
        `ConstantLR: factor 0 can't be undone at epoch totalIters (${totalIters}): it divides by the factor`,
      );
    }
    this.factor = factor;
    this.totalIters = totalIters;
    this.initialStep();
  }

  /** PyTorch's recursive form. */
  protected override getLr(): number[] {
    const groups = groupsOf(this.optimizer);
    const { lastEpoch: e, factor, totalIters } = this;
    if (e === 0) return groups.map((g) => g.lr * factor);
    if (e !== totalIters) return groups.map((g) => g.lr);
    return groups.map((g) => g.lr * (1 / factor));
  }

  /** `base · factor` before `totalIters`, `base` from then on. */
  protected override closedFormLr(): number[] {
    const { lastEpoch: e, factor, totalIters } = this;
    return this.baseLrs.map((base) => base * (factor + (e >= totalIters ? 1 : 0) * (1 - factor)));
  }

  /** `factor`, `totalIters`. */
  protected override stateKeys(): readonly string[] {
    return ["factor", "totalIters"];
  }
}

/**
 * Multiplies each group's learning rate by `fn(epoch)` every epoch after
 * the first (the factors compound, unlike {@link LambdaLR}'s), as
 * `torch.optim.lr_scheduler.MultiplicativeLR`; one function for every
 * group, or one per group. The functions are not part of the state dict.
 */
export class MultiplicativeLR extends LambdaScheduler {
  /** Scales `optimizer`'s learning rates by `lrLambda(epoch)` at each epoch. */
  constructor(
    optimizer: AnyOptimizer,
    lrLambda: LrLambda | readonly LrLambda[],
    options: SchedulerOptions = {},
  ) {
    super("MultiplicativeLR", optimizer, lrLambda, options);
  }

  /** `lr · fn(lastEpoch)` after epoch 0. */
  protected override getLr(): number[] {
    const groups = groupsOf(this.optimizer);
    if (this.lastEpoch <= 0) return groups.map((g) => g.lr);
    return groups.map((g, i) => g.lr * this.groupFactor(i));
  }
}

/** One phase of {@link OneCycleLR}: from one group key's value to another's, ending at `endStep`. */
export interface OneCyclePhase {
  /** The last step of the phase (a float, as PyTorch computes it). */
  endStep: number;
  /** The group key holding the phase's first learning rate (`initialLr`, `maxLr`). */
  startLr: string;
  /** The group key holding its last learning rate (`maxLr`, `initialLr`, `minLr`). */
  endLr: string;
  /** The group key of its first momentum (`maxMomentum`, `baseMomentum`). */
  startMomentum: string;
  /** The group key of its last momentum. */
  endMomentum: string;
  /** Plain data, so that phases are part of the state dict. */
  [key: string]: SchedulerStateValue;
}

/** Options of {@link OneCycleLR}. */
export interface OneCycleLROptions extends SchedulerOptions {
  /** The peak learning rate, for every group or one per group (required). */
  maxLr: number | readonly number[];
  /** Steps in the cycle; else `epochs · stepsPerEpoch`. */
  totalSteps?: number;
  /** Epochs, with `stepsPerEpoch`, when `totalSteps` is not given. */
  epochs?: number;
  /** Steps per epoch, with `epochs`. */
  stepsPerEpoch?: number;
  /** Fraction of the cycle spent increasing the learning rate (default 0.3). */
  pctStart?: number;
  /** `"cos"` (default) or `"linear"` annealing. */
  annealStrategy?: "cos" | "linear";
  /** Cycle the momentum (SGD's `momentum`, Adam's `betas[0]`) inversely to the learning rate (default true). */
  cycleMomentum?: boolean;
  /** The momentum at the learning rate's peak, for every group or per group (default 0.85). */
  baseMomentum?: number | readonly number[];
  /** The momentum at the cycle's ends, for every group or per group (default 0.95). */
  maxMomentum?: number | readonly number[];
  /** `initialLr = maxLr / divFactor` (default 25). */
  divFactor?: number;
  /** `minLr = initialLr / finalDivFactor` (default 1e4). */
  finalDivFactor?: number;
  /** Three phases (up, down to `initialLr`, down to `minLr`) instead of two (default false). */
  threePhase?: boolean;
}

/**
 * The 1cycle policy, as `torch.optim.lr_scheduler.OneCycleLR`: the
 * learning rate climbs from `maxLr / divFactor` to `maxLr`, then anneals to
 * `initialLr / finalDivFactor`, while the momentum moves the other way
 * between `maxMomentum` and `baseMomentum`. Step it after every batch;
 * stepping past `totalSteps` is an error. It writes `initialLr`, `maxLr`,
 * `minLr`, `maxMomentum` and `baseMomentum` into each parameter group.
 */
export class OneCycleLR extends LRScheduler {
  /** Steps in the cycle. */
  totalSteps: number;
  /** The phases of the cycle. */
  schedulePhases: OneCyclePhase[];
  /** `"cos"` or `"linear"`. */
  annealStrategy: "cos" | "linear";
  /** Whether the momentum is cycled. */
  cycleMomentum: boolean;
  /** Whether the momentum is Adam's `betas[0]` rather than SGD's `momentum`. */
  useBeta1: boolean;

  /** A 1cycle schedule over `optimizer`. */
  constructor(optimizer: AnyOptimizer, options: OneCycleLROptions) {
    const name = "OneCycleLR";
    checkOptimizer(name, optimizer);
    if (options === null || typeof options !== "object" || options.maxLr === undefined) {
      throw new TypeError(`${name}: options { maxLr, totalSteps } are required`);
    }
    let totalSteps: number;
    if (options.totalSteps !== undefined) {
      totalSteps = checkInteger(name, "totalSteps", options.totalSteps, 1);
    } else if (options.epochs !== undefined || options.stepsPerEpoch !== undefined) {
      totalSteps = checkInteger(name, "epochs", options.epochs, 1) *
        checkInteger(name, "stepsPerEpoch", options.stepsPerEpoch, 1);
    } else {
      throw new TypeError(
        `${name}: you must define either totalSteps OR (epochs AND stepsPerEpoch)`,
      );
    }
    const pctStart = options.pctStart ?? 0.3;
    if (typeof pctStart !== "number" || !(pctStart >= 0 && pctStart <= 1)) {
      throw new RangeError(`${name}: expected pctStart between 0 and 1, got ${String(pctStart)}`);
    }
    const annealStrategy = options.annealStrategy ?? "cos";
    if (annealStrategy !== "cos" && annealStrategy !== "linear") {
      throw new RangeError(
        `${name}: annealStrategy must be one of "cos" or "linear", got ${
          JSON.stringify(annealStrategy)
        }`,
      );
    }
    const lastEpoch = options.lastEpoch ?? -1;
    const groups = groupsOf(optimizer);
    const maxLrs = perGroup(name, "maxLr", options.maxLr, groups.length);
    const divFactor = checkFinite(name, "divFactor", options.divFactor ?? 25);
    const finalDivFactor = checkFinite(name, "finalDivFactor", options.finalDivFactor ?? 1e4);
    const cycleMomentum = options.cycleMomentum ?? true;
    let useBeta1 = false;
    let maxMomentums: number[] = [];
    let baseMomentums: number[] = [];
    if (cycleMomentum) {
      if (!("momentum" in optimizer.defaults) && !("betas" in optimizer.defaults)) {
        throw new TypeError(
          `${name}: optimizer ${optimizer.constructor.name} must support momentum (momentum or betas) with cycleMomentum enabled`,
        );
      }
      useBeta1 = "betas" in optimizer.defaults;
      maxMomentums = perGroup(name, "maxMomentum", options.maxMomentum ?? 0.95, groups.length);
      baseMomentums = perGroup(name, "baseMomentum", options.baseMomentum ?? 0.85, groups.length);
    }
    // Checked: now write the groups, as PyTorch does before the base constructor runs.
    if (lastEpoch === -1) {
      groups.forEach((group, i) => {
        group.initialLr = maxLrs[i] / divFactor;
        group.maxLr = maxLrs[i];
        group.minLr = (group.initialLr as number) / finalDivFactor;
      });
      if (cycleMomentum) {
        groups.forEach((group, i) => {
          if (useBeta1) group.betas = [maxMomentums[i], ...(group.betas as number[]).slice(1)];
          else group.momentum = maxMomentums[i];
          group.maxMomentum = maxMomentums[i];
          group.baseMomentum = baseMomentums[i];
        });
      }
    }
    super(optimizer, lastEpoch);
    this.totalSteps = totalSteps;
    const phase = (
      endStep: number,
      startLr: string,
      endLr: string,
      startMomentum: string,
      endMomentum: string,
    ): OneCyclePhase => ({ endStep, startLr, endLr, startMomentum, endMomentum });
    this.schedulePhases = options.threePhase
      ? [
        phase(pctStart * totalSteps - 1, "initialLr", "maxLr", "maxMomentum", "baseMomentum"),
        phase(2 * pctStart * totalSteps - 2, "maxLr", "initialLr", "baseMomentum", "maxMomentum"),
        phase(totalSteps - 1, "initialLr", "minLr", "maxMomentum", "maxMomentum"),
      ]
      : [
        phase(pctStart * totalSteps - 1, "initialLr", "maxLr", "maxMomentum", "baseMomentum"),
        phase(totalSteps - 1, "maxLr", "minLr", "baseMomentum", "maxMomentum"),
      ];
    this.annealStrategy = annealStrategy;
    this.cycleMomentum = cycleMomentum;
    this.useBeta1 = useBeta1;
    this.initialStep();
  }

  #anneal(start: number, end: number, pct: number): number {
    if (this.annealStrategy === "cos") {
      const cosOut = Math.cos(Math.PI * pct) + 1;
      return end + (start - end) / 2 * cosOut;
    }
    return (end - start) * pct + start;
  }

  /** Advances one step (or jumps to step `epoch`); past `totalSteps` it throws and changes nothing. */
  override step(epoch?: number): void {
    // PyTorch's get_lr raises once lastEpoch + 1 > totalSteps; checked before anything moves.
    const next = epoch ?? this.lastEpoch + 1;
    if (next > this.totalSteps) {
      throw new RangeError(
        `OneCycleLR: tried to step ${
          next + 1
        } times; the specified number of total steps is ${this.totalSteps}`,
      );
    }
    super.step(epoch);
  }

  /** The learning rate of the current phase; also sets the cycled momentum. */
  protected override getLr(): number[] {
    const stepNum = this.lastEpoch;
    const phases = this.schedulePhases;
    return groupsOf(this.optimizer).map((group) => {
      let startStep = 0;
      for (let i = 0; i < phases.length; i++) {
        const phase = phases[i];
        const endStep = phase.endStep;
        if (stepNum <= endStep || i === phases.length - 1) {
          const pct = (stepNum - startStep) / (endStep - startStep);
          const lr = this.#anneal(
            group[phase.startLr] as number,
            group[phase.endLr] as number,
            pct,
          );
          if (this.cycleMomentum) {
            const momentum = this.#anneal(
              group[phase.startMomentum] as number,
              group[phase.endMomentum] as number,
              pct,
            );
            if (this.useBeta1) group.betas = [momentum, ...(group.betas as number[]).slice(1)];
            else group.momentum = momentum;
          }
          return lr;
        }
        startStep = phase.endStep;
      }
      throw new Error("OneCycleLR: no phase"); // unreachable: the last phase always matches
    });
  }

  /** `totalSteps`, `schedulePhases`, `annealStrategy`, `cycleMomentum`, and `useBeta1` when cycling momentum (as PyTorch). */
  protected override stateKeys(): readonly string[] {
    const keys = ["totalSteps", "schedulePhases", "annealStrategy", "cycleMomentum"];
    return this.cycleMomentum ? [...keys, "useBeta1"] : keys;
  }

  /** Phases as PyTorch's dicts: `end_step`, and group keys as PyTorch names them (`max_lr`). */
  protected override fieldForm(): FieldForm {
    const convert = (value: SchedulerStateValue, rename: (key: string) => string) =>
      Array.isArray(value)
        ? value.map((phase) =>
          phase !== null && typeof phase === "object" && !Array.isArray(phase)
            ? Object.fromEntries(
              Object.entries(phase).map((
                [k, v],
              ) => [rename(k), typeof v === "string" ? rename(v) : v]),
            )
            : phase
        )
        : value;
    return {
      encode: (key, value) => key === "schedulePhases" ? convert(value, torchKey) : value,
      decode: (key, value) =>
        key === "schedulePhases"
          ? convert(value, ownKey)
          : key === "annealStrategy"
          ? oneOf("OneCycleLR", "_anneal_func_type", value, ["cos", "linear"])
          : value,
      // PyTorch 1.13 keeps the annealing function itself (code), 2.x its name.
      optional: ["annealStrategy", "useBeta1"],
    };
  }
}

/** Options of {@link ReduceLROnPlateau}. */
export interface ReduceLROnPlateauOptions {
  /** `"min"` (default): lower metrics are better; `"max"`: higher are. */
  mode?: "min" | "max";
  /** Factor applied to the learning rate on a plateau, in [0, 1) (default 0.1). */
  factor?: number;
  /** Epochs without improvement tolerated before reducing (default 10). */
  patience?: number;
  /** How much better a metric must be to count as an improvement (default 1e-4). */
  threshold?: number;
  /** `"rel"` (default): relative to the best; `"abs"`: absolute. */
  thresholdMode?: "rel" | "abs";
  /** Epochs to wait after a reduction before counting again (default 0). */
  cooldown?: number;
  /** The lowest learning rate, for every group or one per group (default 0). */
  minLr?: number | readonly number[];
  /** Reductions smaller than this are skipped (default 1e-8). */
  eps?: number;
}

/**
 * Reduces the learning rate by `factor` once a metric has stopped improving
 * for `patience` epochs, as `torch.optim.lr_scheduler.ReduceLROnPlateau`.
 * `step(metric)` takes the epoch's metric as a number (read a loss tensor
 * with `await loss.item()` first).
 *
 * @example
 * ```ts
 * const scheduler = new optim.lrScheduler.ReduceLROnPlateau(opt, { mode: "min", patience: 2 });
 * // each epoch, after validating:
 * scheduler.step(validationLoss);
 * ```
 */
export class ReduceLROnPlateau {
  /** The optimizer whose groups' `lr` this scheduler sets. */
  readonly optimizer: AnyOptimizer;
  /** `"min"` or `"max"`. */
  mode: "min" | "max";
  /** Factor applied on a plateau. */
  factor: number;
  /** Epochs without improvement tolerated. */
  patience: number;
  /** Improvement threshold. */
  threshold: number;
  /** `"rel"` or `"abs"`. */
  thresholdMode: "rel" | "abs";
  /** Epochs to wait after a reduction. */
  cooldown: number;
  /** Epochs of cooldown left. */
  cooldownCounter = 0;
  /** The lowest learning rate of each group. */
  minLrs: number[];
  /** Reductions smaller than this are skipped. */
  eps: number;
  /** The best metric so far (±Infinity before the first). */
  best: number;
  /** Epochs since the last improvement. */
  numBadEpochs = 0;
  /** The index of the last epoch stepped. */
  lastEpoch = 0;
  /** The learning rates after the last step. */
  lastLr: number[];

  /** Watches a metric and reduces `optimizer`'s learning rates on plateaus. */
  constructor(optimizer: AnyOptimizer, options: ReduceLROnPlateauOptions = {}) {
    const name = "ReduceLROnPlateau";
    checkOptimizer(name, optimizer);
    const factor = checkFinite(name, "factor", options.factor ?? 0.1);
    if (!(factor >= 0 && factor < 1)) {
      throw new RangeError(`${name}: factor should be >= 0 and < 1.0, got ${factor}`);
    }
    const mode = options.mode ?? "min";
    if (mode !== "min" && mode !== "max") {
      throw new RangeError(
        `${name}: mode ${JSON.stringify(mode)} is unknown (expected "min" or "max")`,
      );
    }
    const thresholdMode = options.thresholdMode ?? "rel";
    if (thresholdMode !== "rel" && thresholdMode !== "abs") {
      throw new RangeError(
        `${name}: threshold mode ${
          JSON.stringify(thresholdMode)
        } is unknown (expected "rel" or "abs")`,
      );
    }
    const groups = groupsOf(optimizer);
    this.optimizer = optimizer;
    this.factor = factor;
    this.minLrs = perGroup(name, "minLr", options.minLr ?? 0, groups.length);
    this.patience = checkInteger(name, "patience", options.patience ?? 10, 0);
    this.cooldown = checkInteger(name, "cooldown", options.cooldown ?? 0, 0);
    this.mode = mode;
    this.threshold = checkFinite(name, "threshold", options.threshold ?? 1e-4);
    this.thresholdMode = thresholdMode;
    this.eps = checkFinite(name, "eps", options.eps ?? 1e-8);
    this.best = this.#modeWorse();
    this.lastLr = groups.map((g) => g.lr);
  }

  #modeWorse(): number {
    return this.mode === "min" ? Infinity : -Infinity;
  }

  /** Whether `a` improves on `best` by more than the threshold. */
  isBetter(a: number, best: number): boolean {
    if (this.mode === "min" && this.thresholdMode === "rel") return a < best * (1 - this.threshold);
    if (this.mode === "min") return a < best - this.threshold;
    if (this.thresholdMode === "rel") return a > best * (this.threshold + 1);
    return a > best + this.threshold;
  }

  /** Whether a reduction happened less than `cooldown` epochs ago. */
  get inCooldown(): boolean {
    return this.cooldownCounter > 0;
  }

  /** Records the epoch's `metric` and reduces the learning rates when it has plateaued. */
  step(metric: number): void {
    if (typeof metric !== "number") {
      throw new TypeError(
        `ReduceLROnPlateau.step: metric must be a number, got ${kindOf(metric)}${
          metric !== null && typeof metric === "object"
            ? " (read a tensor with await t.item())"
            : ""
        }`,
      );
    }
    this.lastEpoch += 1;
    if (this.isBetter(metric, this.best)) {
      this.best = metric;
      this.numBadEpochs = 0;
    } else this.numBadEpochs += 1;
    if (this.inCooldown) {
      this.cooldownCounter -= 1;
      this.numBadEpochs = 0; // bad epochs in cooldown do not count
    }
    const groups = groupsOf(this.optimizer);
    if (this.numBadEpochs > this.patience) {
      groups.forEach((group, i) => {
        const oldLr = group.lr;
        const newLr = Math.max(oldLr * this.factor, this.minLrs[i]);
        if (oldLr - newLr > this.eps) group.lr = newLr;
      });
      this.cooldownCounter = this.cooldown;
      this.numBadEpochs = 0;
    }
    this.lastLr = groups.map((g) => g.lr);
  }

  /** The learning rates after the last step (the groups' rates before any). */
  getLastLr(): number[] {
    return [...this.lastLr];
  }

  /** Counters and settings; `best` is ±Infinity until a metric came (`null` in JSON is read back as that). */
  stateDict(): SchedulerStateDict {
    // PyTorch keeps `mode_worse` too (and its load takes it as is): derived from `mode` here.
    return { ...saveFields(this, PLATEAU_KEYS), mode_worse: this.#modeWorse() };
  }

  /** Restores a {@link stateDict} (checked first; on error nothing changes). */
  loadStateDict(stateDict: SchedulerStateDict): void {
    loadFields("ReduceLROnPlateau", this, PLATEAU_KEYS, stateDict, ["best"], {
      decode: (key, value) =>
        key === "mode"
          ? oneOf("ReduceLROnPlateau", "mode", value, ["min", "max"])
          : key === "thresholdMode"
          ? oneOf("ReduceLROnPlateau", "threshold_mode", value, ["rel", "abs"])
          : value,
    });
    // JSON writes ±Infinity as null: before the first metric, best is the mode's worst value.
    if ((this.best as number | null) === null) this.best = this.#modeWorse();
  }
}

const PLATEAU_KEYS = [
  "mode",
  "factor",
  "patience",
  "threshold",
  "thresholdMode",
  "cooldown",
  "cooldownCounter",
  "minLrs",
  "eps",
  "best",
  "numBadEpochs",
  "lastEpoch",
  "lastLr",
] as const;

/** Options of {@link PolynomialLR}. */
export interface PolynomialLROptions extends SchedulerOptions {
  /** Epochs over which the rate decays to 0 (default 5). */
  totalIters?: number;
  /** The power of the polynomial (default 1). */
  power?: number;
}

/**
 * Decays the learning rate to 0 over `totalIters` epochs as
 * `base · (1 - epoch / totalIters)^power`, then keeps it there, as
 * `torch.optim.lr_scheduler.PolynomialLR` (PyTorch 1.13's recursive form).
 */
export class PolynomialLR extends LRScheduler {
  /** Epochs of the decay. */
  totalIters: number;
  /** The power of the polynomial. */
  power: number;

  /** Decays `optimizer`'s learning rates polynomially. */
  constructor(optimizer: AnyOptimizer, options: PolynomialLROptions = {}) {
    super(optimizer, options.lastEpoch);
    this.totalIters = checkInteger("PolynomialLR", "totalIters", options.totalIters ?? 5, 1);
    this.power = checkFinite("PolynomialLR", "power", options.power ?? 1);
    this.initialStep();
  }

  /** PyTorch's recursive form. */
  protected override getLr(): number[] {
    const groups = groupsOf(this.optimizer);
    const { lastEpoch: e, totalIters: n } = this;
    if (e === 0 || e > n) return groups.map((g) => g.lr);
    const factor = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** this.power;
    return groups.map((g) => g.lr * factor);
  }

  /** `base · (1 - min(totalIters, epoch) / totalIters)^power`. */
  protected override closedFormLr(): number[] {
    const { lastEpoch: e, totalIters: n } = this;
    return this.baseLrs.map((base) => base * (1.0 - Math.min(n, e) / n) ** this.power);
  }

  /** `totalIters`, `power`. */
  protected override stateKeys(): readonly string[] {
    return ["totalIters", "power"];
  }
}

/** Options of {@link CosineAnnealingWarmRestarts}. */
export interface CosineAnnealingWarmRestartsOptions extends SchedulerOptions {
  /** Each period is `tMult` times the one before (an integer >= 1, default 1). */
  tMult?: number;
  /** The lowest learning rate (default 0). */
  etaMin?: number;
}

/**
 * Cosine annealing from each group's initial learning rate to `etaMin`,
 * restarting after `t0` epochs, then after `t0 · tMult`, ... (SGDR), as
 * `torch.optim.lr_scheduler.CosineAnnealingWarmRestarts`. `step(epoch)`
 * takes fractional epochs too (`epoch + i / batches` per batch).
 */
export class CosineAnnealingWarmRestarts extends LRScheduler {
  /** Epochs of the first period. */
  t0: number;
  /** Epochs of the current period. */
  tI: number;
  /** Growth factor of the periods. */
  tMult: number;
  /** The lowest learning rate. */
  etaMin: number;
  /** Epochs since the last restart (fractional after a fractional `step(epoch)`). */
  tCur: number;

  /** Anneals `optimizer`'s learning rates with restarts every `t0` (then `t0 · tMult`, ...) epochs. */
  constructor(
    optimizer: AnyOptimizer,
    t0: number,
    options: CosineAnnealingWarmRestartsOptions = {},
  ) {
    const name = "CosineAnnealingWarmRestarts";
    super(optimizer, options.lastEpoch);
    this.t0 = checkInteger(name, "t0", t0, 1);
    this.tI = t0;
    this.tMult = checkInteger(name, "tMult", options.tMult ?? 1, 1);
    this.etaMin = checkFinite(name, "etaMin", options.etaMin ?? 0);
    this.tCur = this.lastEpoch;
    this.initialStep();
  }

  /** `etaMin + (base - etaMin)(1 + cos(π tCur / tI)) / 2`. */
  protected override getLr(): number[] {
    const { etaMin, tCur, tI } = this;
    return this.baseLrs.map((base) =>
      etaMin + (base - etaMin) * (1 + Math.cos(Math.PI * tCur / tI)) / 2
    );
  }

  /**
   * Advances one epoch, restarting at the end of a period; or, with `epoch`
   * (a non-negative number, fractional allowed), moves to that point of the
   * schedule, as PyTorch's `step(epoch)`.
   */
  override step(epoch?: number): void {
    const name = "CosineAnnealingWarmRestarts";
    if (epoch === undefined && this.lastEpoch < 0) epoch = 0;
    if (epoch === undefined) {
      epoch = this.lastEpoch + 1;
      this.tCur += 1;
      if (this.tCur >= this.tI) {
        this.tCur -= this.tI;
        this.tI *= this.tMult;
      }
    } else {
      if (typeof epoch !== "number" || !(epoch >= 0) || !Number.isFinite(epoch)) {
        throw new RangeError(`${name}: expected a non-negative epoch, got ${String(epoch)}`);
      }
      if (epoch >= this.t0) {
        if (this.tMult === 1) this.tCur = epoch % this.t0;
        else {
          const n = Math.trunc(
            Math.log(epoch / this.t0 * (this.tMult - 1) + 1) / Math.log(this.tMult),
          );
          this.tCur = epoch - this.t0 * (this.tMult ** n - 1) / (this.tMult - 1);
          this.tI = this.t0 * this.tMult ** n;
        }
      } else {
        this.tI = this.t0;
        this.tCur = epoch;
      }
    }
    // PyTorch's own step() here never counts (its `_step_count` stays 0): neither does this one.
    this.lastEpoch = Math.floor(epoch);
    const values = this.getLr();
    const groups = groupsOf(this.optimizer);
    groups.forEach((group, i) => group.lr = values[i]);
    this.lastLr = groups.map((g) => g.lr);
  }

  /** `t0`, `tI`, `tMult`, `etaMin`, `tCur`. */
  protected override stateKeys(): readonly string[] {
    return ["t0", "tI", "tMult", "etaMin", "tCur"];
  }
}

/** A scale of the cycle's amplitude for {@link CyclicLR}, by cycle number or by step. */
export type CyclicScaleFn = (x: number) => number;

/** Options of {@link CyclicLR}. */
export interface CyclicLROptions extends SchedulerOptions {
  /** Steps of the rising half of a cycle (default 2000). */
  stepSizeUp?: number;
  /** Steps of the falling half (default `stepSizeUp`). */
  stepSizeDown?: number;
  /**
   * `"triangular"` (default: constant amplitude), `"triangular2"` (halved
   * each cycle) or `"expRange"` (times `gamma^step`); ignored with `scaleFn`.
   */
  mode?: "triangular" | "triangular2" | "expRange";
  /** The base of `"expRange"` (default 1). */
  gamma?: number;
  /** A custom amplitude scale, in [0, 1] for every argument; replaces `mode`. Not part of the state dict. */
  scaleFn?: CyclicScaleFn | null;
  /** Whether `scaleFn` takes the cycle number (`"cycle"`, default) or the step (`"iterations"`). */
  scaleMode?: "cycle" | "iterations";
  /** Cycle SGD's `momentum` inversely to the learning rate (default true). */
  cycleMomentum?: boolean;
  /** The momentum at the learning rate's peak, for every group or per group (default 0.8). */
  baseMomentum?: number | readonly number[];
  /** The momentum at the cycle's ends, for every group or per group (default 0.9). */
  maxMomentum?: number | readonly number[];
}

/**
 * The cyclical learning rate policy, as `torch.optim.lr_scheduler.CyclicLR`:
 * each group's rate rises from `baseLr` to `maxLr` over `stepSizeUp` steps
 * and falls back over `stepSizeDown`, the amplitude scaled by the mode (or
 * `scaleFn`); the momentum (SGD's) moves the other way between
 * `maxMomentum` and `baseMomentum`. Step it after every batch. The
 * optimizer's groups start at `baseLr` (and `baseMomentum`).
 */
export class CyclicLR extends LRScheduler {
  /** The peak learning rate of each group. */
  maxLrs: number[];
  /** Steps in one cycle. */
  totalSize: number;
  /** The fraction of a cycle spent rising. */
  stepRatio: number;
  /** The amplitude mode (unused with a custom `scaleFn`). */
  mode: "triangular" | "triangular2" | "expRange";
  /** The base of `"expRange"`. */
  gamma: number;
  /** What the amplitude scale takes: the cycle number or the step. */
  scaleMode: "cycle" | "iterations";
  /** Whether the momentum is cycled. */
  cycleMomentum: boolean;
  /** The momentum at the peak, per group (empty without momentum cycling). */
  baseMomentums: number[];
  /** The momentum at the ends, per group (empty without momentum cycling). */
  maxMomentums: number[];
  /** The custom amplitude scale, or null. */
  readonly scaleFn: CyclicScaleFn | null;

  /** Cycles `optimizer`'s learning rates between `baseLr` and `maxLr`. */
  constructor(
    optimizer: AnyOptimizer,
    baseLr: number | readonly number[],
    maxLr: number | readonly number[],
    options: CyclicLROptions = {},
  ) {
    const name = "CyclicLR";
    checkOptimizer(name, optimizer);
    const lastEpoch = options.lastEpoch ?? -1;
    const groups = groupsOf(optimizer);
    const baseLrs = perGroup(name, "baseLr", baseLr, groups.length);
    const maxLrs = perGroup(name, "maxLr", maxLr, groups.length);
    const up = checkFinite(name, "stepSizeUp", options.stepSizeUp ?? 2000);
    const down = checkFinite(name, "stepSizeDown", options.stepSizeDown ?? up);
    if (!(up > 0) || !(down >= 0)) {
      throw new RangeError(
        `${name}: stepSizeUp must be positive and stepSizeDown non-negative, got ${up} and ${down}`,
      );
    }
    const scaleFn = options.scaleFn ?? null;
    if (scaleFn !== null && typeof scaleFn !== "function") {
      throw new TypeError(`${name}: scaleFn must be a function, got ${kindOf(scaleFn)}`);
    }
    const mode = options.mode ?? "triangular";
    if (!["triangular", "triangular2", "expRange"].includes(mode) && scaleFn === null) {
      throw new RangeError(
        `${name}: mode ${
          JSON.stringify(mode)
        } is invalid (expected "triangular", "triangular2" or "expRange") and no scaleFn is given`,
      );
    }
    const scaleMode = scaleFn
      ? options.scaleMode ?? "cycle"
      : mode === "expRange"
      ? "iterations"
      : "cycle";
    if (scaleMode !== "cycle" && scaleMode !== "iterations") {
      throw new RangeError(
        `${name}: scaleMode must be "cycle" or "iterations", got ${JSON.stringify(scaleMode)}`,
      );
    }
    const cycleMomentum = options.cycleMomentum ?? true;
    let baseMomentums: number[] = [];
    let maxMomentums: number[] = [];
    if (cycleMomentum) {
      if (!("momentum" in optimizer.defaults)) {
        throw new TypeError(
          `${name}: optimizer ${optimizer.constructor.name} must support momentum with cycleMomentum enabled (SGD's momentum; pass cycleMomentum: false)`,
        );
      }
      baseMomentums = perGroup(name, "baseMomentum", options.baseMomentum ?? 0.8, groups.length);
      maxMomentums = perGroup(name, "maxMomentum", options.maxMomentum ?? 0.9, groups.length);
    }
    // Checked: now write the groups, as PyTorch does before the base constructor runs.
    if (lastEpoch === -1) {
      groups.forEach((group, i) => group.lr = baseLrs[i]);
      if (cycleMomentum) groups.forEach((group, i) => group.momentum = baseMomentums[i]);
    }
    super(optimizer, lastEpoch);
    this.maxLrs = maxLrs;
    this.totalSize = up + down;
    this.stepRatio = up / this.totalSize;
    this.mode = mode;
    this.gamma = checkFinite(name, "gamma", options.gamma ?? 1);
    this.scaleFn = scaleFn;
    this.scaleMode = scaleMode;
    this.cycleMomentum = cycleMomentum;
    this.baseMomentums = cycleMomentum ? groups.map((g) => g.momentum as number) : [];
    this.maxMomentums = maxMomentums;
    // PyTorch's first step reads base_lrs from the groups' initialLr; `baseLr` is kept after it.
    this.initialStep();
    this.baseLrs = baseLrs;
  }

  #scale(x: number): number {
    if (this.scaleFn) return this.scaleFn(x);
    if (this.mode === "triangular2") return 1 / (2.0 ** (x - 1));
    if (this.mode === "expRange") return this.gamma ** x;
    return 1.0;
  }

  /** The rate at step `lastEpoch` of the cycle; also sets the cycled momentum. */
  protected override getLr(): number[] {
    const e = this.lastEpoch;
    const cycle = Math.floor(1 + e / this.totalSize);
    const x = 1.0 + e / this.totalSize - cycle;
    const scaleFactor = x <= this.stepRatio ? x / this.stepRatio : (x - 1) / (this.stepRatio - 1);
    const scale = this.#scale(this.scaleMode === "cycle" ? cycle : e);
    const lrs = this.baseLrs.map((base, i) => base + (this.maxLrs[i] - base) * scaleFactor * scale);
    if (this.cycleMomentum) {
      const groups = groupsOf(this.optimizer);
      this.baseMomentums.forEach((base, i) => {
        const max = this.maxMomentums[i];
        groups[i].momentum = max - (max - base) * scaleFactor * scale;
      });
    }
    return lrs;
  }

  /**
   * The cycle's settings, the momenta only when cycling momentum (as PyTorch); the custom
   * `scaleFn`, code, is not part of it.
   */
  protected override stateKeys(): readonly string[] {
    const keys = [
      "maxLrs",
      "totalSize",
      "stepRatio",
      "mode",
      "gamma",
      "scaleMode",
      "cycleMomentum",
    ];
    return this.cycleMomentum ? [...keys, "baseMomentums", "maxMomentums"] : keys;
  }

  /** `mode` as PyTorch spells it (`exp_range`). */
  protected override fieldForm(): FieldForm {
    return {
      encode: (key, value) => key === "mode" && value === "expRange" ? "exp_range" : value,
      decode: (key, value) => {
        if (key === "mode") {
          return oneOf("CyclicLR", "mode", value === "exp_range" ? "expRange" : value, [
            "triangular",
            "triangular2",
            "expRange",
          ]);
        }
        if (key === "scaleMode") {
          return oneOf("CyclicLR", "scale_mode", value, ["cycle", "iterations"]);
        }
        return value;
      },
      optional: ["baseMomentums", "maxMomentums"],
    };
  }
}

/** A scheduler stepped once per epoch without a metric: what {@link ChainedScheduler} chains. */
export type EpochScheduler = LRScheduler | SequentialLR | ChainedScheduler;

/** The schedulers' common optimizer; throws naming the index of one that differs. */
function sharedOptimizer(
  owner: string,
  schedulers: readonly unknown[],
  optimizer?: AnyOptimizer,
): AnyOptimizer {
  if (!Array.isArray(schedulers) || schedulers.length === 0) {
    throw new TypeError(`${owner}: expected a non-empty array of schedulers`);
  }
  const allowed = owner === "SequentialLR"
    ? [LRScheduler]
    : [LRScheduler, SequentialLR, ChainedScheduler];
  schedulers.forEach((s, i) => {
    if (!allowed.some((Cls) => s instanceof Cls)) {
      throw new TypeError(
        `${owner}: schedulers[${i}] is not ${
          owner === "SequentialLR" ? "an epoch scheduler (LRScheduler)" : "a chainable scheduler"
        }, got ${
          s !== null && typeof s === "object" ? s.constructor.name : kindOf(s)
        } (ReduceLROnPlateau steps on a metric and cannot be chained)`,
      );
    }
  });
  const first = optimizer ?? (schedulers[0] as EpochScheduler).optimizer;
  schedulers.forEach((s, i) => {
    if ((s as EpochScheduler).optimizer !== first) {
      throw new Error(
        `${owner}: expects all schedulers to belong to the same optimizer, but schedulers[${i}] has a different one`,
      );
    }
  });
  return first;
}

/** Saves `schedulers`' state dicts in order. */
function childStates(schedulers: readonly EpochScheduler[]): SchedulerStateValue[] {
  return schedulers.map((s) => s.stateDict());
}

/** Restores `schedulers` from `stateDict`'s `_schedulers` (an array of as many state dicts). */
function loadChildStates(
  owner: string,
  schedulers: readonly EpochScheduler[],
  stateDict: SchedulerStateDict,
): void {
  const { name, value: states } = storedField(stateDict, "schedulers");
  if (!Array.isArray(states) || states.length !== schedulers.length) {
    throw new TypeError(
      `${owner}.loadStateDict: "${name}" must be an array of ${schedulers.length} state dicts, got ${
        Array.isArray(states) ? `${states.length}` : kindOf(states)
      }`,
    );
  }
  schedulers.forEach((s, i) => s.loadStateDict(states[i] as SchedulerStateDict));
}

/** SequentialLR's milestones are PyTorch's `_milestones` (a MultiStepLR's are `milestones`). */
const SEQUENTIAL_FORM: FieldForm = { names: { milestones: "_milestones" } };

/**
 * Runs `schedulers` one after another, switching at the `milestones`
 * epochs, as `torch.optim.lr_scheduler.SequentialLR`: a warm-up then a
 * decay, say. At a milestone the next scheduler starts from its epoch 0
 * (its closed form, as PyTorch's `step(0)`).
 *
 * @example
 * ```ts
 * import { nn, optim } from "@multigrad/core";
 * const { LinearLR, CosineAnnealingLR, SequentialLR } = optim.lrScheduler;
 * const opt = new optim.SGD(new nn.Linear(4, 2).parameters(), { lr: 0.1 });
 * const warmup = new LinearLR(opt, { startFactor: 0.1, totalIters: 5 });
 * const decay = new CosineAnnealingLR(opt, 45);
 * const scheduler = new SequentialLR(opt, [warmup, decay], [5]);
 * ```
 */
export class SequentialLR {
  /** The optimizer whose groups' `lr` the schedulers set. */
  readonly optimizer: AnyOptimizer;
  /** The schedulers, in order. */
  readonly schedulers: readonly LRScheduler[];
  /** The epochs at which the next scheduler takes over. */
  milestones: number[];
  /** The index of the last epoch stepped. */
  lastEpoch: number;
  /** The learning rates the last step set. */
  lastLr: number[];

  /** Hands `optimizer`'s epochs to `schedulers[i]` from `milestones[i - 1]` on. */
  constructor(
    optimizer: AnyOptimizer,
    schedulers: readonly LRScheduler[],
    milestones: readonly number[],
    options: SchedulerOptions = {},
  ) {
    const name = "SequentialLR";
    checkOptimizer(name, optimizer);
    sharedOptimizer(name, schedulers, optimizer);
    if (!Array.isArray(milestones) || milestones.length !== schedulers.length - 1) {
      throw new RangeError(
        `${name}: expects one milestone fewer than schedulers, got ${schedulers.length} schedulers and ${
          Array.isArray(milestones) ? milestones.length : kindOf(milestones)
        } milestones`,
      );
    }
    milestones.forEach((m, i) => {
      checkInteger(name, `milestones[${i}]`, m, 0);
      if (i > 0 && m < milestones[i - 1]) {
        throw new RangeError(
          `${name}: milestones must be increasing, got [${milestones.join(", ")}]`,
        );
      }
    });
    this.optimizer = optimizer;
    this.schedulers = [...schedulers];
    this.milestones = [...milestones];
    this.lastEpoch = checkInteger(name, "lastEpoch", options.lastEpoch ?? -1, -1) + 1;
    // Back to the initial rates, the others' first steps undone; the first scheduler starts again.
    for (const group of groupsOf(optimizer)) group.lr = group.initialLr as number;
    for (const s of this.schedulers) s.lastEpoch -= 1;
    this.schedulers[0].initialStep();
    this.lastLr = this.schedulers[0].getLastLr();
  }

  /** Advances one epoch on the scheduler whose turn it is. */
  step(): void {
    this.lastEpoch += 1;
    const index = this.milestones.filter((m) => m <= this.lastEpoch).length;
    const scheduler = this.schedulers[index];
    if (index > 0 && this.milestones[index - 1] === this.lastEpoch) scheduler.step(0);
    else scheduler.step();
    this.lastLr = scheduler.getLastLr();
  }

  /** The learning rates the last step set, one per group. */
  getLastLr(): number[] {
    return [...this.lastLr];
  }

  /** `lastEpoch`, `milestones`, `lastLr` and every scheduler's state dict (`schedulers`). */
  stateDict(): SchedulerStateDict {
    return {
      ...saveFields(this, ["milestones", "lastEpoch", "lastLr"], SEQUENTIAL_FORM),
      _schedulers: childStates(this.schedulers),
    };
  }

  /** Restores a {@link stateDict}, the schedulers' included. */
  loadStateDict(stateDict: SchedulerStateDict): void {
    loadFields(
      "SequentialLR",
      this,
      ["lastEpoch", "milestones", "lastLr"],
      stateDict,
      [],
      SEQUENTIAL_FORM,
    );
    loadChildStates("SequentialLR", this.schedulers, stateDict);
  }
}

/**
 * Steps several schedulers of one optimizer together, each acting on the
 * rate the one before set, as `torch.optim.lr_scheduler.ChainedScheduler`
 * (for schedules in recursive form: ExponentialLR, StepLR, LinearLR, ...).
 */
export class ChainedScheduler {
  /** The optimizer the schedulers share. */
  readonly optimizer: AnyOptimizer;
  /** The chained schedulers, stepped in order. */
  readonly schedulers: readonly EpochScheduler[];
  /** The learning rates after the last step. */
  lastLr: number[];

  /** Chains `schedulers` (all of one optimizer). */
  constructor(schedulers: readonly EpochScheduler[]) {
    this.optimizer = sharedOptimizer("ChainedScheduler", schedulers);
    this.schedulers = [...schedulers];
    this.lastLr = groupsOf(this.optimizer).map((g) => g.lr);
  }

  /** Steps every scheduler once, in order. */
  step(): void {
    for (const s of this.schedulers) s.step();
    this.lastLr = groupsOf(this.optimizer).map((g) => g.lr);
  }

  /** The learning rates after the last step, one per group. */
  getLastLr(): number[] {
    return [...this.lastLr];
  }

  /** `lastLr` and every scheduler's state dict (`schedulers`). */
  stateDict(): SchedulerStateDict {
    return { ...saveFields(this, ["lastLr"]), _schedulers: childStates(this.schedulers) };
  }

  /** Restores a {@link stateDict}, the schedulers' included. */
  loadStateDict(stateDict: SchedulerStateDict): void {
    loadFields("ChainedScheduler", this, ["lastLr"], stateDict);
    loadChildStates("ChainedScheduler", this.schedulers, stateDict);
  }
}
