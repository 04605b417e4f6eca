/**
 * The optimizer base class, as `torch.optim.Optimizer`: parameter groups with
 * their hyperparameters, per-parameter state, `zeroGrad`, `step` and state
 * dicts. Steps update parameters and state in place on their devices and
 * never read values back.
 * @module
 */

import { enableGrad, noGrad, zeroGrads } from "../autograd.ts";
import { isFloat } from "../dtype.ts";
import { full } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import { isLazy } from "../nn/lazy_state.ts";
import { formatShape, sameShape } from "../shape.ts";
import { keep, tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { checkOptionNames, ownKey, torchKey } from "./util.ts";

/** A hyperparameter value as it appears in a state dict. */
export type OptionValue = number | boolean | null | readonly number[];

/** A parameter group as given to a constructor: parameters plus options overriding the defaults. */
export type ParamGroupInput<O> = Partial<O> & {
  /** The group's parameters (a single Tensor is one parameter, as in PyTorch). */
  params: Iterable<Tensor> | Tensor;
};

/** A parameter group: its parameters and its complete hyperparameters (editable, e.g. `lr`). */
export type ParamGroup<O> = O & {
  /** The group's parameters. */
  params: Tensor[];
};

/** Per-parameter optimizer state: tensors (momentum buffers, moments) and numbers (`step`). */
export type ParamState = Record<string, Tensor | number>;

/**
 * What {@link Optimizer.stateDict} returns, as PyTorch's `optimizer.state_dict()`
 * with PyTorch's keys (`state`, `param_groups`, `exp_avg_sq`, `weight_decay`, ...), so
 * it moves between the two as is: per-parameter state by the parameter's index
 * (counting through the groups in order), and each group's hyperparameters with
 * the indices of its parameters. `step` is a number (PyTorch turns it back into
 * its 0-d tensor on load).
 */
export interface OptimizerStateDict {
  /** State by parameter index; parameters without state are absent. */
  state: Record<number, ParamState>;
  /** Hyperparameters of each group, plus `params`: the indices of its parameters. */
  param_groups: Array<Record<string, OptionValue> & { params: number[] }>;
}

/** The shape every optimizer's state dict has: per-parameter state by index, and the groups. */
export interface OptimizerStateDictLike {
  /** State by parameter index. */
  state: Record<number, object>;
  /** Hyperparameters of each group, plus `params`: the indices of its parameters. */
  param_groups: OptimizerStateDict["param_groups"];
}

/**
 * Any optimizer, whatever its step returns (`LBFGS`'s is a promise) and whatever its state
 * dict holds: what takes an optimizer only for its groups (a learning-rate scheduler) takes this.
 */
export type AnyOptimizer = Optimizer<object, unknown, OptimizerStateDictLike>;

/**
 * PyTorch's group flags that choose an implementation (multi-tensor, fused, CUDA-graph safe), not
 * numbers: they are dropped on load. `differentiable` (autograd through the step) is refused.
 */
const IMPLEMENTATION_FLAGS = new Set(["foreach", "fused", "capturable"]);

/** `record`'s entries under multigrad's keys; a key given in both spellings is an error. */
function ownKeys<V>(record: Record<string, V>, owner: string, where: string): Record<string, V> {
  const out: Record<string, V> = {};
  const from: Record<string, string> = {};
  for (const [key, value] of Object.entries(record)) {
    const own = ownKey(key);
    if (own in out) {
      throw new Error(`${owner}: ${where} has both "${from[own]}" and "${key}"`);
    }
    out[own] = value;
    from[own] = key;
  }
  return out;
}

/** The step's 0-dimensional constants: made once per value, device and dtype, freed with the step. */
export type ScalarFn = (value: number, like: Tensor) => Tensor;

function isGroupList<O>(params: unknown[]): params is ParamGroupInput<O>[] {
  return params.length > 0 &&
    params.every((p) => p !== null && typeof p === "object" && !(p instanceof Tensor));
}

/**
 * Base of every optimizer. Subclasses give their defaults, a check of a
 * group's options, and the update of one group.
 *
 * `StepResult` and `StateDict` are what {@link step} and {@link stateDict}
 * return; an optimizer that changes them (`LBFGS`, whose step is async and
 * whose state is one history) overrides both methods. Code that takes any
 * optimizer (the learning-rate schedulers) takes {@link AnyOptimizer}.
 */
export abstract class Optimizer<
  O extends object,
  StepResult = Tensor | undefined,
  StateDict extends OptimizerStateDictLike = OptimizerStateDict,
> {
  /** The options every group starts from. */
  readonly defaults: Readonly<O>;
  /** Parameter groups; their options can be changed between steps (learning-rate schedules). */
  readonly paramGroups: ParamGroup<O>[] = [];
  /** Per-parameter state, created by the first step that updates the parameter. */
  readonly state: Map<Tensor, ParamState> = new Map();

  /**
   * `params` is an iterable of tensors (one group) or of groups
   * `{ params, ...options }`; `defaults` fill what a group leaves out;
   * `given`: the options as the caller passed them, whose names must be
   * among the defaults'.
   */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<O>>,
    defaults: O,
    given: object = {},
  ) {
    const name = this.constructor.name;
    checkOptionNames(name, given, defaults);
    if (
      params === null || typeof params !== "object" || !(Symbol.iterator in params) ||
      params instanceof Tensor
    ) {
      throw new TypeError(
        `${name}: params must be an iterable of tensors or of parameter groups, got ${typeof params}`,
      );
    }
    this.validateOptions(defaults, true);
    this.defaults = Object.freeze({ ...defaults });
    const list = [...params] as unknown[];
    if (list.length === 0) throw new Error(`${name}: got an empty parameter list`);
    if (isGroupList<O>(list)) { for (const group of list) this.addParamGroup(group); }
    else this.addParamGroup({ params: list as Tensor[] } as unknown as ParamGroupInput<O>);
  }

  /**
   * Throws a clear error when `options` are invalid (a negative learning
   * rate, ...). `defaults`: these are the constructor's defaults, which may
   * leave out what every group gives itself (SGD's lr, as PyTorch's
   * `required`).
   */
  protected abstract validateOptions(options: O, defaults?: boolean): void;

  /**
   * Updates the parameters of `group` that have a gradient, in place. Runs
   * inside `noGrad` and `tidy`; `scalar` gives constants that are freed with
   * the step.
   */
  protected abstract updateGroup(group: ParamGroup<O>, scalar: ScalarFn): void;

  /**
   * The state a parameter of a group with `options` must have once it has
   * been stepped (camelCase keys), numbers first: a loaded state dict that
   * lacks one is refused, not turned into NaN at the next step. Empty
   * (nothing checked) unless an optimizer says.
   */
  protected requiredState(_options: O): { numbers: readonly string[]; tensors: readonly string[] } {
    return { numbers: [], tensors: [] };
  }

  /** Every parameter of every group, in order. */
  get params(): Tensor[] {
    return this.paramGroups.flatMap((g) => g.params);
  }

  /** Adds a group `{ params, ...options }`; options left out come from the defaults. */
  addParamGroup(group: ParamGroupInput<O>): void {
    const name = this.constructor.name;
    if (
      group === null || typeof group !== "object" || !group.params ||
      !(group.params instanceof Tensor || Symbol.iterator in Object(group.params))
    ) {
      throw new TypeError(`${name}: a parameter group needs a "params" iterable`);
    }
    const params = group.params instanceof Tensor ? [group.params] : [...group.params];
    if (params.length === 0) throw new Error(`${name}: a parameter group has no parameters`);
    const existing = new Set(this.params);
    const own = new Set<Tensor>();
    params.forEach((p, i) => {
      if (!(p instanceof Tensor)) {
        throw new TypeError(
          `${name}: parameter ${i} of group ${this.paramGroups.length} is not a Tensor (got ${typeof p})`,
        );
      }
      if (!p.isLeaf) {
        throw new Error(
          `${name}: can't optimize a non-leaf Tensor (parameter ${i}, shape ${
            formatShape(p.shape)
          })`,
        );
      }
      if (!isFloat(p.dtype)) {
        throw new TypeError(
          `${name}: parameter ${i} has dtype ${p.dtype}; only floating-point tensors can be optimized`,
        );
      }
      if (existing.has(p) || own.has(p)) {
        throw new Error(
          `${name}: some parameters appear more than once (parameter ${i}, shape ${
            formatShape(p.shape)
          })`,
        );
      }
      own.add(p);
    });
    const { params: _, ...options } = group;
    const merged = { ...this.defaults, ...options } as O;
    this.validateOptions(merged);
    this.paramGroups.push({ ...merged, params } as ParamGroup<O>);
  }

  /**
   * Clears the gradients of every parameter: by default `.grad` becomes null
   * and the old gradient's memory is released at once (a gradient tensor read
   * before this call is invalid after it); with `setToNone` false they are
   * zeroed in place.
   */
  zeroGrad(setToNone = true): void {
    zeroGrads(this.params, setToNone);
  }

  /**
   * One optimization step over every parameter that has a gradient, in
   * place and without waiting. With `closure`, it is called first (with grad
   * enabled) to recompute the loss, which is returned.
   */
  step(closure?: () => Tensor): StepResult {
    const loss = closure ? enableGrad(closure) : undefined;
    const name = this.constructor.name;
    // Checked up front so that an error leaves every parameter as it was.
    for (const group of this.paramGroups) {
      this.validateOptions(group);
      for (const p of group.params) {
        if (p.storage.disposed) {
          throw new Error(
            `${name}.step: a parameter of shape ${formatShape(p.shape)} was disposed`,
          );
        }
        const grad = p.grad;
        if (grad && grad.storage.disposed) {
          throw new Error(
            `${name}.step: the gradient of a parameter of shape ${
              formatShape(p.shape)
            } was disposed; call zeroGrad() before backward()`,
          );
        }
      }
    }
    this.#alignState();
    const made = new Map<string, Tensor>();
    const scalar: ScalarFn = (value, like) => {
      const key = `${like.device}|${like.dtype}|${value}`;
      let s = made.get(key);
      if (!s) {
        s = keep(full([], value, { dtype: like.dtype, device: like.device }));
        made.set(key, s);
      }
      return s;
    };
    try {
      noGrad(() => {
        // Each parameter in a scope of its own: in one scope for the whole step, every
        // parameter's temporaries were live at once (5x the parameters' memory for SGD with
        // momentum, 9x for RMSprop), where PyTorch's loop needs a few of the largest one's.
        for (const group of this.paramGroups) {
          for (const p of group.params) {
            tidy(() => this.updateGroup({ ...group, params: [p] }, scalar));
          }
        }
      });
    } finally {
      for (const s of made.values()) s.dispose();
    }
    // The base's step result; a subclass with another StepResult overrides step.
    return loss as StepResult;
  }

  /** The state of `p`, created empty on first use. */
  protected stateOf(p: Tensor): ParamState {
    let s = this.state.get(p);
    if (!s) this.state.set(p, s = {});
    return s;
  }

  /** A zero tensor like `p` that survives tidy scopes: for new state. */
  protected zerosState(p: Tensor): Tensor {
    const t = full([...p.shape], 0, { dtype: p.dtype, device: p.device });
    t.storage.persistent = true;
    return t;
  }

  /** Moves state that is not on its parameter's device or dtype (the module moved), before a step. */
  #alignState(): void {
    tidy(() =>
      noGrad(() => {
        for (const [p, s] of this.state) {
          for (const [key, v] of Object.entries(s)) {
            if (!(v instanceof Tensor) || (v.device === p.device && v.dtype === p.dtype)) continue;
            s[key] = stateCopy(v, p);
            v.dispose();
          }
        }
      })
    );
  }

  /**
   * A snapshot of the optimizer: state tensors are copied (so later steps do
   * not change it), step counts and hyperparameters are plain values.
   * Parameters are referred to by index, so it loads into an optimizer over
   * another model of the same structure.
   */
  stateDict(): StateDict {
    const index = new Map<Tensor, number>();
    const groups = this.paramGroups.map((group) => {
      const { params, ...options } = group;
      const out: Record<string, OptionValue> = {};
      for (const [k, v] of Object.entries(options)) {
        out[torchKey(k)] = Array.isArray(v) ? [...v] : v as OptionValue;
      }
      return {
        ...out,
        params: params.map((p) => {
          index.set(p, index.size);
          return index.size - 1;
        }),
      };
    });
    const state: Record<number, ParamState> = {};
    noGrad(() => {
      for (const [p, s] of this.state) {
        const i = index.get(p);
        if (i === undefined) continue;
        const copy: ParamState = {};
        for (const [k, v] of Object.entries(s)) {
          copy[torchKey(k)] = v instanceof Tensor ? v.clone() : v;
        }
        state[i] = copy;
      }
    });
    // The base's form; a subclass with another StateDict overrides stateDict.
    return { state, param_groups: groups } as OptimizerStateDict as StateDict;
  }

  /**
   * Restores a {@link stateDict}: hyperparameters of each group and the
   * per-parameter state, copied onto each parameter's device. Everything is
   * checked first (group count and sizes, indices, option values, state
   * shapes); on error the optimizer is unchanged.
   */
  loadStateDict(stateDict: OptimizerStateDict): void {
    const name = `${this.constructor.name}.loadStateDict`;
    // Checkpoints of earlier multigrad versions have `paramGroups` and camelCase keys: they load too.
    const legacy = stateDict as unknown as { paramGroups?: OptimizerStateDict["param_groups"] };
    const groups = stateDict?.param_groups ?? legacy?.paramGroups;
    if (stateDict === null || typeof stateDict !== "object" || !Array.isArray(groups)) {
      throw new TypeError(
        `${name}: expected { state, param_groups }, got ${
          stateDict === null
            ? "null"
            : typeof stateDict === "object"
            ? `an object with keys ${JSON.stringify(Object.keys(stateDict))}`
            : typeof stateDict
        }`,
      );
    }
    if (groups.length !== this.paramGroups.length) {
      throw new Error(
        `${name}: the state dict has ${groups.length} parameter groups, the optimizer ${this.paramGroups.length}`,
      );
    }
    const byIndex = new Map<number, Tensor>();
    const groupOf = new Map<Tensor, number>();
    const newOptions: O[] = groups.map((saved, g) => {
      const mine = this.paramGroups[g];
      if (!Array.isArray(saved?.params) || saved.params.length !== mine.params.length) {
        throw new Error(
          `${name}: parameter group ${g} has ${
            Array.isArray(saved?.params) ? saved.params.length : "no"
          } parameters in the state dict, ${mine.params.length} in the optimizer`,
        );
      }
      saved.params.forEach((idx, j) => {
        byIndex.set(idx, mine.params[j]);
        groupOf.set(mine.params[j], g);
      });
      const { params: _p, ...options } = ownKeys(saved, name, `parameter group ${g}`);
      if (options.differentiable === true) {
        throw new Error(
          `${name}: parameter group ${g} has differentiable: true (autograd through the step), which multigrad does not do`,
        );
      }
      const { params: _q, ...current } = mine;
      const merged = { ...current } as Record<string, unknown>;
      for (const [k, v] of Object.entries(options)) {
        if (IMPLEMENTATION_FLAGS.has(k) || k === "differentiable") continue;
        merged[k] = Array.isArray(v) ? [...v] : v;
      }
      this.validateOptions(merged as O);
      return merged as O;
    });
    const state = stateDict.state ?? {};
    if (typeof state !== "object") throw new TypeError(`${name}: state must be an object`);
    const loaded: [Tensor, Record<string, Tensor | number>][] = [];
    for (const [key, entry] of Object.entries(state)) {
      const p = byIndex.get(Number(key));
      if (!p) {
        throw new Error(
          `${name}: state for parameter index ${key}, which no parameter group lists`,
        );
      }
      if (entry === null || typeof entry !== "object") {
        throw new TypeError(`${name}: state ${key} must be an object`);
      }
      const own = ownKeys(entry, name, `state ${key}`);
      const required = this.requiredState(newOptions[groupOf.get(p)!]);
      const missing = [...required.numbers, ...required.tensors].filter((k) => !(k in own));
      if (missing.length > 0) {
        throw new Error(
          `${name}: state of parameter ${key} lacks ${
            missing.map((k) => `"${k}"`).join(", ")
          } (has ${Object.keys(own).map((k) => `"${k}"`).join(", ")}): is it another optimizer's?`,
        );
      }
      for (const [k, v] of Object.entries(own)) {
        if ((k === "step" || required.numbers.includes(k)) && typeof v !== "number") {
          throw new TypeError(
            `${name}: state "${k}" of parameter ${key} must be a number, got ${
              v instanceof Tensor ? `a tensor of shape ${formatShape(v.shape)}` : typeof v
            } (PyTorch keeps it as a 0-d tensor: give await t.item())`,
          );
        }
        if (v instanceof Tensor) {
          // An uninitialized (lazy) parameter has no shape yet: its state is taken as it is,
          // as PyTorch's (its step comes after the forward that materializes it).
          if (!isLazy(p) && !sameShape(v.shape, p.shape)) {
            throw new RangeError(
              `${name}: state "${k}" of parameter ${key} has shape ${
                formatShape(v.shape)
              }, the parameter ${formatShape(p.shape)}`,
            );
          }
          if (v.storage.disposed) {
            throw new Error(`${name}: state "${k}" of parameter ${key} was disposed`);
          }
        } else if (typeof v !== "number") {
          throw new TypeError(
            `${name}: state "${k}" of parameter ${key} must be a Tensor or a number, got ${typeof v}`,
          );
        }
      }
      loaded.push([p, own]);
    }
    // Checked: now replace.
    this.paramGroups.forEach((group, g) => Object.assign(group, newOptions[g]));
    for (const s of this.state.values()) {
      for (const v of Object.values(s)) if (v instanceof Tensor) v.dispose();
    }
    this.state.clear();
    tidy(() =>
      noGrad(() => {
        for (const [p, entry] of loaded) {
          const s: ParamState = {};
          for (const [k, v] of Object.entries(entry)) {
            s[k] = v instanceof Tensor ? stateCopy(v, p) : v;
          }
          this.state.set(p, s);
        }
      })
    );
  }
}

/** `v`'s values in new persistent state on `p`'s device, in `p`'s dtype (no zero fill first). */
function stateCopy(v: Tensor, p: Tensor): Tensor {
  const t = empty(isLazy(p) ? v.shape : p.shape, p.dtype, p.device);
  t.storage.persistent = true;
  t._assign(v.dtype === p.dtype ? v : v.to(p.dtype));
  return t;
}
