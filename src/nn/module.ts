/**
 * `Module` and `Parameter`: the tree of layers, its parameters and buffers,
 * moving between devices, state dicts and the structural copy the parallel
 * layer replicates with.
 * @module
 */

import { noGrad, zeroGrads } from "../autograd.ts";
import { type Device, device as resolveDevice } from "../device.ts";
import { type DType, isFloat } from "../dtype.ts";
import { formatShape, sameShape } from "../shape.ts";
import { tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { copyFieldOrder, orderedKeys, recordFieldOrder } from "./field_order.ts";
import type {
  ForwardHook,
  ForwardHookOptions,
  ForwardPreHook,
  FullBackwardHook,
  FullBackwardPreHook,
  HookOptions,
  IncompatibleKeys,
  LoadStateDictPostHook,
  RemovableHandle,
  StateDictPostHook,
  StateDictPreHook,
} from "./hook_handle.ts";
import { hooksOf, registerHook, settled, trackModule } from "./hooks.ts";
import { isLazy, refuseLazy } from "./lazy_state.ts";

export * from "./hook_handle.ts";
export * from "./global_hooks.ts";

/**
 * A tensor that is a module's learnable parameter, as `torch.nn.Parameter`:
 * a leaf that requires grad (unless told otherwise) and whose memory survives
 * `tidy` scopes. It shares `data`'s storage, without its history.
 */
export class Parameter extends Tensor {
  /** Wraps `data`'s storage (no copy) as a parameter. */
  constructor(data: Tensor, requiresGrad = true) {
    if (!(data instanceof Tensor)) {
      throw new TypeError(
        `Parameter: expected a Tensor, got ${data === null ? "null" : typeof data}`,
      );
    }
    super(data.storage, data.shape);
    data.storage.persistent = true;
    this.requiresGrad = requiresGrad;
  }

  /** `Parameter(shape=[3, 4], dtype=float32, device=cpu:0, requiresGrad)`. */
  override toString(): string {
    return super.toString().replace(/^Tensor/, "Parameter");
  }
}

/** Options of {@link Module.registerBuffer}. */
export interface RegisterBufferOptions {
  /** Listed in `stateDict()` (default true), as PyTorch's `persistent`. */
  persistent?: boolean;
  /** The field that holds it; default: `name` in camelCase (`running_mean` → `runningMean`). */
  field?: string;
  /**
   * The value it takes when a state dict lacks it, which is then no error
   * (PyTorch's BatchNorm fills `num_batches_tracked` with 0 for checkpoints
   * older than the buffer). Default: a missing key as any other.
   */
  whenMissing?: number;
}

/** What {@link Module.loadStateDict} reports when `strict` is false. */
export interface LoadStateDictResult {
  /** Keys the module expected but the state dict lacked. */
  missingKeys: string[];
  /** Keys of the state dict the module does not have. */
  unexpectedKeys: string[];
}

/** Options of {@link Module.namedParameters} and {@link Module.namedBuffers}. */
export interface NamedTensorsOptions {
  /** Put before every name, joined with a dot (default `""`), as PyTorch's `prefix`. */
  prefix?: string;
  /** Include the submodules' (default true); false lists this module's own only. */
  recurse?: boolean;
}

/** Options of {@link Module.stateDict}. */
export interface StateDictOptions {
  /** Put before every key as it is (PyTorch's `prefix`: `"model."` gives `model.weight`). */
  prefix?: string;
  /**
   * The Parameters and buffers themselves (PyTorch's `keep_vars`), which keep `requiresGrad`
   * and `grad`, instead of detached tensors sharing their storage (default false).
   */
  keepVars?: boolean;
}

/** Options of {@link Module.loadStateDict}. */
export interface LoadStateDictOptions {
  /** Throw on missing or unexpected keys (default true). Wrong shapes always throw. */
  strict?: boolean;
}

/** The callback of {@link Module._replicateWith}: a tensor to put in place of `t`. */
export type ReplicateTensorFn = (
  t: Tensor,
  kind: "parameter" | "buffer",
  name: string,
) => Tensor;

interface BufferInfo {
  readonly name: string;
  readonly persistent: boolean;
  readonly whenMissing?: number;
}

// Buffer registrations per module, field → state-dict name. Kept outside the
// instance so that field discovery (Object.keys) never sees them and replicas
// made without running a constructor can be given a copy.
const bufferFields = new WeakMap<Module, Map<string, BufferInfo>>();

// Fields whose assignments are checked, field → kind: a buffer's (from registerBuffer) and a
// parameter's (from its first discovery on), as PyTorch's __setattr__ checks them. They are
// accessors on the instance; replicas hold plain values.
const guardedFields = new WeakMap<Module, Map<string, "parameter" | "buffer">>();

// Private methods (#) would not work on replicas, which are made with
// Object.create and never pass through the constructor: hence free functions.

/**
 * Turns field `field` of `m` into an accessor that checks what is assigned, as PyTorch's
 * `__setattr__`: a parameter takes a Parameter or null (a plain tensor would silently drop out of
 * `parameters()` and the state dict); a buffer takes a Tensor or null, and a new tensor is kept as
 * module state (else a `tidy` or a Sequential's scope around the assignment would free it).
 */
function guardField(m: Module, field: string, kind: "parameter" | "buffer"): void {
  let guarded = guardedFields.get(m);
  if (!guarded) guardedFields.set(m, guarded = new Map());
  // Still the accessor (a `delete` then a plain assignment replaces it, as PyTorch's `del m.w`).
  if (guarded.get(field) === kind && Object.getOwnPropertyDescriptor(m, field)?.get) return;
  guarded.set(field, kind);
  let value = (m as unknown as Record<string, unknown>)[field];
  Object.defineProperty(m, field, {
    enumerable: true,
    configurable: true,
    get: () => value,
    set: (next: unknown) => {
      if (next === null || next === undefined) {
        value = next;
        return;
      }
      if (kind === "parameter" && !(next instanceof Parameter)) {
        throw new TypeError(
          `${m.constructor.name}: cannot assign ${describe(next)} as parameter "${field}" ` +
            `(nn.Parameter or null expected; wrap it in new nn.Parameter(...), or registerBuffer it)`,
        );
      }
      if (kind === "buffer") {
        if (!(next instanceof Tensor)) {
          throw new TypeError(
            `${m.constructor.name}: cannot assign ${
              describe(next)
            } as buffer "${field}" (Tensor or null expected)`,
          );
        }
        next.storage.persistent = true;
      }
      value = next;
    },
  });
}

function describe(value: unknown): string {
  if (value instanceof Tensor) return `a Tensor of shape ${formatShape(value.shape)}`;
  if (value instanceof Module) return `a ${value.constructor.name}`;
  return `a ${typeof value}`;
}

/** A module's own parameters as [field, parameter] (no submodules). */
function ownParameters(m: Module): [string, Parameter][] {
  const buffers = bufferFields.get(m);
  const own = fieldsOf(m).filter((e): e is [string, Parameter] =>
    e[1] instanceof Parameter && !buffers?.has(e[0])
  );
  for (const [field] of own) guardField(m, field, "parameter");
  return own;
}

/** A module's own buffers as [state-dict name, tensor, persistent, value when missing from a state dict]. */
function ownBuffers(m: Module): [string, Tensor, boolean, number?][] {
  const buffers = bufferFields.get(m);
  if (!buffers) return [];
  const out: [string, Tensor, boolean, number?][] = [];
  for (const [field, value] of fieldsOf(m)) {
    const info = buffers.get(field);
    if (info && value instanceof Tensor) {
      out.push([info.name, value, info.persistent, info.whenMissing]);
    }
  }
  return out;
}

/** Direct submodules as [field, module], duplicates included (for printing). */
function ownChildren(m: Module): [string, Module][] {
  return fieldsOf(m).filter((e): e is [string, Module] => e[1] instanceof Module);
}

/**
 * What {@link walkState} calls: `entry` for every parameter and persistent buffer; `enter` before
 * a module's own entries, `own` after them and `leave` after its submodules' (where PyTorch's
 * recursions run the state-dict hooks).
 */
interface StateVisitor {
  entry(key: string, t: Tensor, whenMissing?: number): void;
  enter?(m: Module, prefix: string): void;
  own?(m: Module, prefix: string): void;
  leave?(m: Module, prefix: string): void;
}

/**
 * Visits `root`'s tree in state-dict order. As in PyTorch, a module or tensor reachable under two
 * names is visited under both; only cycles are cut.
 */
function walkState(root: Module, prefix: string, v: StateVisitor): void {
  const path = new Set<Module>();
  const visit = (m: Module, prefix: string) => {
    if (path.has(m)) return;
    path.add(m);
    v.enter?.(m, prefix);
    for (const [field, p] of ownParameters(m)) v.entry(prefix + field, p);
    for (const [name, t, persistent, whenMissing] of ownBuffers(m)) {
      if (persistent) v.entry(prefix + name, t, whenMissing);
    }
    v.own?.(m, prefix);
    for (const [field, child] of ownChildren(m)) visit(child, `${prefix}${field}.`);
    v.leave?.(m, prefix);
    path.delete(m);
  };
  visit(root, prefix);
}

/** [key, tensor, value when missing] of every parameter and persistent buffer, in state-dict order. */
function stateEntries(root: Module): [string, Tensor, number?][] {
  const out: [string, Tensor, number?][] = [];
  walkState(root, "", { entry: (key, t, whenMissing) => out.push([key, t, whenMissing]) });
  return out;
}

/** The key prefix of the deepest submodule along `key`'s dotted path: where PyTorch finds it unexpected. */
function ownerPrefix(root: Module, key: string): string {
  const path = new Set<Module>([root]);
  let m = root;
  let prefix = "";
  for (const part of key.split(".").slice(0, -1)) {
    const child = ownChildren(m).find(([field]) => field === part)?.[1];
    if (!child || path.has(child)) break;
    path.add(m = child);
    prefix += `${part}.`;
  }
  return prefix;
}

/**
 * The missing and unexpected keys of loading `stateDict` into `root`, in PyTorch's order: a
 * module's own missing keys, the unexpected keys under its prefix that no submodule takes, then
 * its submodules'. `leave` runs after each module's subtree with the lists as they stand, where
 * PyTorch runs the load post-hooks.
 */
function incompatibleKeys(
  root: Module,
  stateDict: Record<string, Tensor>,
  expected: Set<string>,
  leave?: (m: Module, keys: IncompatibleKeys) => void,
): IncompatibleKeys {
  const keys = { missingKeys: [] as string[], unexpectedKeys: [] as string[] };
  const byOwner = new Map<string, string[]>();
  for (const key of Object.keys(stateDict)) {
    if (expected.has(key)) continue;
    const owner = ownerPrefix(root, key);
    byOwner.set(owner, [...byOwner.get(owner) ?? [], key]);
  }
  walkState(root, "", {
    entry: (key, _t, whenMissing) => {
      if (Object.hasOwn(stateDict, key) || whenMissing !== undefined) return;
      if (!keys.missingKeys.includes(key)) keys.missingKeys.push(key);
    },
    own: (_m, prefix) => void keys.unexpectedKeys.push(...byOwner.get(prefix) ?? []),
    leave: leave && ((m) => leave(m, keys)),
  });
  return keys;
}

/** The strict-mode errors of `keys`. */
function keyErrors(keys: IncompatibleKeys): string[] {
  const list = (ks: string[]) => ks.map((k) => `"${k}"`).join(", ");
  return [
    ...keys.missingKeys.length > 0
      ? [`missing key(s) in state dict: ${list(keys.missingKeys)}`]
      : [],
    ...keys.unexpectedKeys.length > 0
      ? [`unexpected key(s) in state dict: ${list(keys.unexpectedKeys)}`]
      : [],
  ];
}

/** PyTorch's error for an uninitialized value loaded into an initialized tensor. */
const LAZY_INTO_INITIALIZED = "Can't access the shape of an uninitialized parameter or buffer. " +
  "This error usually happens in `load_state_dict` when trying to load an uninitialized " +
  "parameter into an initialized one. Call `forward` to initialize the parameters before " +
  "accessing their attributes.";

function snakeToCamel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function fieldsOf(m: Module): [string, unknown][] {
  return orderedKeys(m).map((k) => [k, (m as unknown as Record<string, unknown>)[k]]);
}

/** `namedParameters`' and `namedBuffers`' arguments: a prefix and a flag, or an options object. */
function namedOptions(
  op: string,
  prefixOrOptions: string | NamedTensorsOptions,
  recurse: boolean,
): { prefix: string; recurse: boolean } {
  const options = typeof prefixOrOptions === "string"
    ? { prefix: prefixOrOptions, recurse }
    : prefixOrOptions;
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `${op}: expected a prefix string or an options object, got ${
        options === null ? "null" : typeof options
      }`,
    );
  }
  const prefix = options.prefix ?? "";
  if (typeof prefix !== "string") {
    throw new TypeError(`${op}: prefix must be a string, got ${typeof prefix}`);
  }
  return { prefix, recurse: options.recurse ?? true };
}

/** `m`'s attribute `name` if `ok` accepts it; else PyTorch's "has no attribute" / "is not a" error. */
function childOf(m: Module, name: string, what: string, ok: (v: unknown) => boolean): unknown {
  const value = name === "" ? undefined : (m as unknown as Record<string, unknown>)[name];
  if (value === undefined) {
    throw new RangeError(`${m.constructor.name} has no attribute "${name}"`);
  }
  if (!ok(value)) throw new TypeError(`"${name}" of ${m.constructor.name} is not a ${what}`);
  return value;
}

/** `"a.b.weight"` as `["a.b", "weight"]`. */
function splitTarget(op: string, target: string): [string, string] {
  if (typeof target !== "string") {
    throw new TypeError(`${op}: target must be a string, got ${typeof target}`);
  }
  const at = target.lastIndexOf(".");
  return at < 0 ? ["", target] : [target.slice(0, at), target.slice(at + 1)];
}

/**
 * Casts the floating-point parameters, buffers and gradients of `root`'s tree to `dtype` in place
 * (the same objects hold new storage, as `to` moves them), as PyTorch's `_apply` for `double()`.
 */
function castFloats(root: Module, dtype: DType): void {
  const tensors = new Set<Tensor>();
  for (const m of root.modules()) {
    for (const [, p] of ownParameters(m)) tensors.add(p);
    for (const [, t] of ownBuffers(m)) tensors.add(t);
  }
  for (const t of tensors) {
    if (t.storage.disposed) {
      throw new Error(
        `${root.constructor.name}: cannot cast to ${dtype}: a parameter or buffer of shape ${
          formatShape(t.shape)
        } was disposed`,
      );
    }
  }
  tidy(() =>
    noGrad(() => {
      // Every copy is made before any is installed: a device without `dtype` (webgpu's float64)
      // then leaves the whole tree as it was, not half cast.
      const casts: [Tensor, Tensor, Tensor | null][] = [];
      for (const t of tensors) {
        if (!isFloat(t.dtype) || t.dtype === dtype) continue;
        const grad = t.grad && !t.grad.storage.disposed ? t.grad.to(dtype) : null;
        casts.push([t, t.detach().to(dtype), grad]);
      }
      for (const [t, copy, grad] of casts) {
        copy.storage.persistent = true;
        t.grad = null;
        t._setStorage(copy.storage);
        if (grad) t.grad = grad;
      }
    })
  );
}

function addIndent(text: string, spaces: number): string {
  const lines = text.split("\n");
  if (lines.length === 1) return text;
  const pad = " ".repeat(spaces);
  return [lines[0], ...lines.slice(1).map((l) => pad + l)].join("\n");
}

/**
 * The base of every layer and model, as `torch.nn.Module`. Subclasses set
 * their parameters (`Parameter`), submodules (`Module`) and buffers
 * ({@link registerBuffer}) as fields in the constructor and implement
 * {@link forward}. Fields are discovered in definition order
 * (`Object.keys(this)`), and names follow PyTorch's `state_dict()` keys
 * (`fc.weight`, `0.bias`, `running_mean`). Arrays and other containers in
 * fields are not searched: hold lists of layers in a `ModuleList` or a
 * `Sequential`.
 *
 * Keep state that `forward` needs in ordinary fields (or TypeScript `private`
 * ones), not in `#private` fields: replicas made by {@link _replicateWith}
 * copy own properties only.
 *
 * @example
 * ```ts
 * class Net extends nn.Module {
 *   fc1 = new nn.Linear(4, 8);
 *   fc2 = new nn.Linear(8, 2);
 *   override forward(x: Tensor): Tensor {
 *     return this.fc2.forward(this.fc1.forward(x).relu());
 *   }
 * }
 * ```
 */
export class Module {
  /** Training mode (true) or evaluation mode; set with {@link train}/{@link eval}. */
  training = true;

  /** Lists the new module's class for the global hooks ({@link registerModuleForwardHook}). */
  constructor() {
    trackModule(this);
  }

  /** The computation; subclasses override it. */
  forward(..._args: unknown[]): unknown {
    throw new Error(
      `${this.constructor.name}.forward is not implemented; subclasses of nn.Module define forward()`,
    );
  }

  /** Calls {@link forward} (TypeScript has no `__call__`). */
  call<M extends Module>(this: M, ...args: Parameters<M["forward"]>): ReturnType<M["forward"]> {
    return (this.forward as (...a: unknown[]) => unknown)(...args) as ReturnType<M["forward"]>;
  }

  /**
   * Registers `tensor` as a buffer called `name` in the state dict, stored in
   * the field `options.field` (default: `name` in camelCase), and returns it.
   * Buffers are state that is not learned (running statistics): they move
   * with {@link to} and are saved by {@link stateDict}. `null` registers an
   * absent buffer.
   */
  registerBuffer<T extends Tensor | null>(
    name: string,
    tensor: T,
    options: RegisterBufferOptions = {},
  ): T {
    if (typeof name !== "string" || name === "" || name.includes(".")) {
      throw new TypeError(
        `registerBuffer: name must be a non-empty string without ".", got ${JSON.stringify(name)}`,
      );
    }
    if (tensor !== null && !(tensor instanceof Tensor)) {
      throw new TypeError(
        `registerBuffer("${name}"): expected a Tensor or null, got ${typeof tensor}`,
      );
    }
    const field = options.field ?? snakeToCamel(name);
    // The state-dict name must not be a parameter's or a submodule's either (PyTorch: "attribute
    // already exists"), else two entries would share a key.
    for (const taken of new Set([field, name])) {
      const current = (this as unknown as Record<string, unknown>)[taken];
      if (current instanceof Parameter || current instanceof Module) {
        throw new Error(
          `registerBuffer("${name}"): "${taken}" already holds a ${current.constructor.name}`,
        );
      }
    }
    let info = bufferFields.get(this);
    for (const [otherField, other] of info ?? []) {
      if (otherField !== field && other.name === name) {
        throw new Error(
          `registerBuffer("${name}"): a buffer of that name is already held in field "${otherField}"`,
        );
      }
    }
    if (!info) bufferFields.set(this, info = new Map());
    info.set(field, {
      name,
      persistent: options.persistent ?? true,
      whenMissing: options.whenMissing,
    });
    guardField(this, field, "buffer");
    // Through the buffer's setter, which keeps the tensor as module state.
    (this as unknown as Record<string, unknown>)[field] = tensor;
    return tensor;
  }

  /**
   * Sets `param` as the parameter `name` (the field of that name) and returns it, as PyTorch's
   * `register_parameter`. From then on the field takes only a Parameter or null: assigning a plain
   * tensor throws, where it would silently drop the parameter from `parameters()` and the state
   * dict. Parameters set as plain fields get the same check from the first time they are listed.
   */
  registerParameter<P extends Parameter | null>(name: string, param: P): P {
    if (typeof name !== "string" || name === "" || name.includes(".")) {
      throw new TypeError(
        `registerParameter: name must be a non-empty string without ".", got ${
          JSON.stringify(name)
        }`,
      );
    }
    if (param !== null && !(param instanceof Parameter)) {
      throw new TypeError(
        `registerParameter("${name}"): expected an nn.Parameter or null, got ${describe(param)}`,
      );
    }
    const current = (this as unknown as Record<string, unknown>)[name];
    if (bufferFields.get(this)?.has(name) || current instanceof Module) {
      throw new Error(
        `registerParameter("${name}"): "${name}" already holds a ${
          current instanceof Module ? current.constructor.name : "buffer"
        }`,
      );
    }
    guardField(this, name, "parameter");
    (this as unknown as Record<string, unknown>)[name] = param;
    return param;
  }

  // ---- hooks ----
  // Options are PyTorch 2.x's keyword arguments: `prepend` on every method (for the state-dict
  // hooks a multigrad addition), `alwaysCall` on forward hooks; not `withKwargs`, as forward's
  // arguments are all positional.

  /**
   * Calls `hook(module, args)` before every `forward`, as PyTorch's `register_forward_pre_hook`;
   * a returned value replaces the arguments (see {@link ForwardPreHook}). Hooks run in the order
   * registered (`prepend`: first), after the global ones ({@link registerModuleForwardPreHook}).
   * They work with plain `module.forward(x)` calls: the first hook installs an instance-level
   * `forward` that runs them, and the last `remove()` takes it away.
   */
  registerForwardPreHook<M extends Module>(
    this: M,
    hook: ForwardPreHook<M>,
    options: HookOptions = {},
  ): RemovableHandle {
    return registerHook(this, "registerForwardPreHook", "pre", hook, options);
  }

  /**
   * Calls `hook(module, args, output)` after every `forward`, as PyTorch's
   * `register_forward_hook`; a returned value replaces the output (see {@link ForwardHook}).
   * `alwaysCall` (PyTorch 2.1) runs it also when the forward throws. A hook that keeps a tensor
   * past the forward should `keep` it, as in any `tidy` scope.
   */
  registerForwardHook<M extends Module>(
    this: M,
    hook: ForwardHook<M>,
    options: ForwardHookOptions = {},
  ): RemovableHandle {
    return registerHook(this, "registerForwardHook", "forward", hook, options, [
      "prepend",
      "alwaysCall",
    ]);
  }

  /**
   * Calls `hook(module, gradInput, gradOutput)` when the gradients of this module's tensor
   * arguments are computed, as PyTorch's `register_full_backward_hook`; a returned array
   * replaces `gradInput` (see {@link FullBackwardHook}). Gradients of parameters are not in
   * `gradInput`. The hooks of a forward are those registered when it ran.
   */
  registerFullBackwardHook<M extends Module>(
    this: M,
    hook: FullBackwardHook<M>,
    options: HookOptions = {},
  ): RemovableHandle {
    return registerHook(this, "registerFullBackwardHook", "backward", hook, options);
  }

  /**
   * Calls `hook(module, gradOutput)` when the gradients of this module's outputs arrive, before
   * its gradInput is computed, as PyTorch 2.0's `register_full_backward_pre_hook`; a returned
   * array replaces `gradOutput` (see {@link FullBackwardPreHook}), for the backward and for the
   * full backward hooks. The hooks of a forward are those registered when it ran.
   */
  registerFullBackwardPreHook<M extends Module>(
    this: M,
    hook: FullBackwardPreHook<M>,
    options: HookOptions = {},
  ): RemovableHandle {
    return registerHook(this, "registerFullBackwardPreHook", "backwardPre", hook, options);
  }

  /**
   * Calls `hook(module, prefix, keepVars)` in {@link stateDict} before this module's entries are
   * collected, as PyTorch 2.0's `register_state_dict_pre_hook`.
   */
  registerStateDictPreHook<M extends Module>(
    this: M,
    hook: StateDictPreHook<M>,
    options: HookOptions = {},
  ): RemovableHandle {
    return registerHook(this, "registerStateDictPreHook", "stateDictPre", hook, options);
  }

  /**
   * Calls `hook(module, stateDict, prefix)` in {@link stateDict} once this module's and its
   * submodules' entries are in, as PyTorch's `_register_state_dict_hook` (its metadata argument
   * aside); the hook may edit the dict, or return a new one (see {@link StateDictPostHook}).
   */
  registerStateDictPostHook<M extends Module>(
    this: M,
    hook: StateDictPostHook<M>,
    options: HookOptions = {},
  ): RemovableHandle {
    return registerHook(this, "registerStateDictPostHook", "stateDictPost", hook, options);
  }

  /**
   * Calls `hook(module, { missingKeys, unexpectedKeys })` in {@link loadStateDict} once this
   * module and its submodules are loaded, as PyTorch's `register_load_state_dict_post_hook`;
   * removing keys from the arrays lets a strict load pass (see {@link LoadStateDictPostHook}).
   */
  registerLoadStateDictPostHook<M extends Module>(
    this: M,
    hook: LoadStateDictPostHook<M>,
    options: HookOptions = {},
  ): RemovableHandle {
    return registerHook(this, "registerLoadStateDictPostHook", "loadStateDictPost", hook, options);
  }

  // ---- discovery ----

  /** Direct submodules by field name, each once. */
  namedChildren(): [string, Module][] {
    const seen = new Set<Module>();
    return ownChildren(this).filter(([, m]) => !seen.has(m) && !!seen.add(m));
  }

  /** Direct submodules, each once. */
  children(): Module[] {
    return this.namedChildren().map(([, m]) => m);
  }

  /** This module and every submodule, pre-order, each once, with dotted names (`""` for this one). */
  namedModules(prefix = ""): [string, Module][] {
    const out: [string, Module][] = [];
    const seen = new Set<Module>();
    const visit = (m: Module, name: string) => {
      if (seen.has(m)) return;
      seen.add(m);
      out.push([name, m]);
      for (const [field, child] of ownChildren(m)) visit(child, name ? `${name}.${field}` : field);
    };
    visit(this, prefix);
    return out;
  }

  /** This module and every submodule, pre-order, each once. */
  modules(): Module[] {
    return this.namedModules().map(([, m]) => m);
  }

  /**
   * Parameters with dotted names in PyTorch's order (each module's own, then
   * its submodules'), each parameter once. Takes PyTorch's `prefix` and
   * `recurse` as two arguments or as `{ prefix, recurse }`.
   */
  namedParameters(
    prefixOrOptions: string | NamedTensorsOptions = "",
    recurse = true,
  ): [string, Parameter][] {
    const { prefix, recurse: deep } = namedOptions("namedParameters", prefixOrOptions, recurse);
    const out: [string, Parameter][] = [];
    const seen = new Set<Parameter>();
    const modules: [string, Module][] = deep ? this.namedModules(prefix) : [[prefix, this]];
    for (const [name, m] of modules) {
      for (const [field, p] of ownParameters(m)) {
        if (seen.has(p)) continue;
        seen.add(p);
        out.push([name ? `${name}.${field}` : field, p]);
      }
    }
    return out;
  }

  /** Every parameter, each once (what an optimizer takes). */
  parameters(recurse = true): Parameter[] {
    return this.namedParameters("", recurse).map(([, p]) => p);
  }

  /** Buffers with their dotted state-dict names, each once; arguments as {@link namedParameters}'. */
  namedBuffers(
    prefixOrOptions: string | NamedTensorsOptions = "",
    recurse = true,
  ): [string, Tensor][] {
    const { prefix, recurse: deep } = namedOptions("namedBuffers", prefixOrOptions, recurse);
    const out: [string, Tensor][] = [];
    const seen = new Set<Tensor>();
    const modules: [string, Module][] = deep ? this.namedModules(prefix) : [[prefix, this]];
    for (const [name, m] of modules) {
      for (const [bufferName, t] of ownBuffers(m)) {
        if (seen.has(t)) continue;
        seen.add(t);
        out.push([name ? `${name}.${bufferName}` : bufferName, t]);
      }
    }
    return out;
  }

  /** Every buffer, each once. */
  buffers(recurse = true): Tensor[] {
    return this.namedBuffers("", recurse).map(([, t]) => t);
  }

  // ---- submodules and tensors by name ----

  /**
   * Sets `module` as the submodule `name` (the field of that name), as PyTorch's `add_module`, and
   * returns it; null registers an absent one. The name must not be taken by anything but a
   * submodule (a parameter, a buffer, a method, another field), as PyTorch's "attribute already
   * exists".
   */
  addModule<T extends Module | null>(name: string, module: T): T {
    if (typeof name !== "string" || name === "" || name.includes(".")) {
      throw new TypeError(
        `addModule: name must be a non-empty string without ".", got ${JSON.stringify(name)}`,
      );
    }
    if (module !== null && !(module instanceof Module)) {
      throw new TypeError(
        `addModule("${name}"): expected an nn.Module or null, got ${describe(module)}`,
      );
    }
    const current = (this as unknown as Record<string, unknown>)[name];
    // Registrations outlive a `delete` of their field (spectralNorm's removal): only live ones count.
    const isBuffer = [...bufferFields.get(this) ?? []].some(([f, b]) =>
      (f === name || b.name === name) && Object.hasOwn(this, f)
    );
    const isParameter = guardedFields.get(this)?.get(name) === "parameter" &&
      Object.getOwnPropertyDescriptor(this, name)?.get !== undefined;
    if (
      isBuffer || isParameter ||
      (name in this && !(current instanceof Module) &&
        !(Object.hasOwn(this, name) && current == null))
    ) {
      throw new Error(
        `addModule("${name}"): attribute "${name}" already exists in ${this.constructor.name} (${
          isBuffer ? "a buffer" : describe(current)
        })`,
      );
    }
    (this as unknown as Record<string, unknown>)[name] = module;
    // Object.keys would list an integer-like name before the fields added earlier.
    if (/^(0|[1-9]\d*)$/.test(name)) recordFieldOrder(this, name);
    return module;
  }

  /** The same as {@link addModule} (PyTorch's `register_module`). */
  registerModule<T extends Module | null>(name: string, module: T): T {
    return this.addModule(name, module);
  }

  /**
   * The submodule at the dotted path `target` (`"block.fc"`, `"layers.0"`; `""` is this module),
   * as PyTorch's `get_submodule`; an error names the step that has no such submodule.
   */
  getSubmodule(target: string): Module {
    if (typeof target !== "string") {
      throw new TypeError(`getSubmodule: target must be a string, got ${typeof target}`);
    }
    if (target === "") return this;
    return target.split(".").reduce<Module>(
      (m, item) => childOf(m, item, "nn.Module", (v) => v instanceof Module) as Module,
      this,
    );
  }

  /**
   * The parameter at the dotted path `target` (`"block.fc.weight"`), as PyTorch's `get_parameter`;
   * an error names the step that is missing or not a Parameter.
   */
  getParameter(target: string): Parameter {
    const [path, name] = splitTarget("getParameter", target);
    const m = this.getSubmodule(path);
    return childOf(m, name, "nn.Parameter", (v) => v instanceof Parameter) as Parameter;
  }

  /**
   * The buffer at the dotted path `target`, by its state-dict name (`"bn.running_mean"`; the
   * field's name, `runningMean`, is accepted too), as PyTorch's `get_buffer`; an error names the
   * step that is missing or not a buffer.
   */
  getBuffer(target: string): Tensor {
    const [path, name] = splitTarget("getBuffer", target);
    const m = this.getSubmodule(path);
    const buffers = bufferFields.get(m);
    const field = buffers?.has(name)
      ? name
      : [...buffers ?? []].find(([, info]) => info.name === name)?.[0];
    if (field === undefined || !Object.hasOwn(m, field)) {
      childOf(m, name, "buffer", () => false);
    }
    const value = (m as unknown as Record<string, unknown>)[field!];
    if (!(value instanceof Tensor)) {
      throw new RangeError(`getBuffer: the buffer "${target}" of ${m.constructor.name} is null`);
    }
    return value;
  }

  // ---- modes, devices, gradients ----

  /**
   * Sets training mode on this module and, through their own `train`, on its children (as
   * PyTorch: a child that overrides `train` to keep its BatchNorm in eval mode is obeyed); returns
   * this.
   */
  train(mode = true): this {
    this.training = mode;
    for (const child of this.children()) child.train(mode);
    return this;
  }

  /** Evaluation mode (`train(false)`); returns this. */
  eval(): this {
    return this.train(false);
  }

  /** Calls `fn` on every submodule and then on this one (post-order, as PyTorch); returns this. */
  apply(fn: (m: Module) => void): this {
    for (const child of this.children()) child.apply(fn);
    fn(this);
    return this;
  }

  /**
   * Moves every parameter, gradient and buffer to `target`, in place: the
   * same Parameter and buffer objects afterwards hold storage on the new
   * device (as `module.to` in PyTorch), so optimizers made before stay valid.
   * Copies are queued without waiting. The old storage is left to the
   * garbage collector, since other tensors may share it. A floating dtype
   * (`"float64"`, `"float32"`) casts instead, as {@link double} and
   * {@link float}; `"int32"` throws, as PyTorch's `to` takes floating dtypes
   * only. Returns this.
   */
  to(target: Device | string | DType): this {
    if (target === "float32" || target === "float64" || target === "int32") {
      if (!isFloat(target)) {
        throw new TypeError(
          `${this.constructor.name}.to only accepts floating point dtypes, but got dtype ${target}`,
        );
      }
      castFloats(this, target);
      return this;
    }
    const d = resolveDevice(target);
    const tensors: Tensor[] = [];
    for (const m of this.modules()) {
      tensors.push(...ownParameters(m).map(([, p]) => p), ...ownBuffers(m).map(([, t]) => t));
    }
    for (const t of tensors) {
      if (t.storage.disposed) {
        throw new Error(
          `${this.constructor.name}.to(${d}): a parameter or buffer of shape ${
            formatShape(t.shape)
          } was disposed`,
        );
      }
    }
    tidy(() =>
      noGrad(() => {
        for (const t of tensors) {
          if (t.device === d) continue;
          const copy = t.detach().to(d);
          copy.storage.persistent = true;
          const grad = t.grad;
          if (grad) t.grad = null;
          t._setStorage(copy.storage);
          if (grad && !grad.storage.disposed) t.grad = grad.to(d);
        }
      })
    );
    return this;
  }

  /**
   * Casts every floating-point parameter and buffer (and gradient) to float64, in place, as
   * PyTorch's `double()`: the same Parameter objects afterwards hold float64 storage. Integer
   * buffers (`num_batches_tracked`) keep their dtype. Returns this.
   */
  double(): this {
    castFloats(this, "float64");
    return this;
  }

  /** Casts every floating-point parameter and buffer (and gradient) to float32, as {@link double}. */
  float(): this {
    castFloats(this, "float32");
    return this;
  }

  /**
   * Sets `requiresGrad` on every parameter (PyTorch's `requires_grad_`):
   * `backbone.requiresGrad_(false)` freezes a part of a model. Returns this.
   */
  requiresGrad_(requiresGrad = true): this {
    for (const p of this.parameters()) p.requiresGrad = requiresGrad;
    return this;
  }

  /**
   * Clears the gradients of every parameter. By default (`setToNone`, as
   * PyTorch 2) `.grad` becomes null and the old gradient's memory is released
   * at once, so a gradient tensor read before this call is invalid after it;
   * with `setToNone` false the gradients are zeroed in place instead.
   */
  zeroGrad(setToNone = true): void {
    zeroGrads(this.parameters(), setToNone);
  }

  // ---- state dicts ----

  /**
   * Parameters and persistent buffers by PyTorch's names (`0.weight`,
   * `running_mean`), as detached tensors sharing the module's storage (as
   * PyTorch's `state_dict()`): later updates show through; `clone()` for a
   * snapshot. `num_batches_tracked` is int32 here (int64 in PyTorch). Each module's
   * {@link registerStateDictPreHook} hooks run before its entries are collected, its
   * {@link registerStateDictPostHook} hooks after its submodules'.
   */
  stateDict(options: StateDictOptions = {}): Record<string, Tensor> {
    if (options === null || typeof options !== "object") {
      throw new TypeError(
        `stateDict: options must be an object, got ${options === null ? "null" : typeof options}`,
      );
    }
    const prefix = options.prefix ?? "";
    if (typeof prefix !== "string") {
      throw new TypeError(`stateDict: prefix must be a string, got ${typeof prefix}`);
    }
    const keepVars = options.keepVars ?? false;
    let out: Record<string, Tensor> = {};
    walkState(this, prefix, {
      // An uninitialized tensor is listed as itself, as PyTorch's lazy `_save_to_state_dict`.
      entry: (key, t) => void (out[key] = keepVars || isLazy(t) ? t : t.detach()),
      enter: (m, p) => {
        for (const hook of hooksOf(m, "stateDictPre")) {
          settled("state-dict pre-hook", m, hook(m, p, keepVars));
        }
      },
      leave: (m, p) => {
        let dict = out;
        for (const hook of hooksOf(m, "stateDictPost")) {
          const result = settled("state-dict post-hook", m, hook(m, dict, p));
          if (result === undefined || result === null) continue;
          if (typeof result !== "object" || result instanceof Tensor) {
            throw new TypeError(
              `stateDict: a state-dict post-hook of ${m.constructor.name} returned ${
                describe(result)
              }, expected a state dict object or nothing`,
            );
          }
          dict = result as Record<string, Tensor>;
        }
        // As PyTorch, where a submodule's state_dict() return value is dropped by its parent.
        if (m === this) out = dict;
      },
    });
    return out;
  }

  /**
   * Copies values from `stateDict` into the module's parameters and buffers,
   * in place and without waiting (values on another device or of another
   * dtype are converted). Everything is checked before anything is written:
   * a missing key, an unexpected key (unless `strict` is false) or a wrong
   * shape throws one error naming every problem (the key and both shapes),
   * and the module is left unchanged. With {@link registerLoadStateDictPostHook}
   * hooks in the tree, as in PyTorch, the values are written first, the hooks
   * run (and may edit the missing and unexpected keys), and only then do the
   * remaining keys make a strict load throw (the values stay loaded).
   */
  loadStateDict(
    stateDict: Record<string, Tensor>,
    options: LoadStateDictOptions = {},
  ): LoadStateDictResult {
    const strict = options.strict ?? true;
    if (stateDict === null || typeof stateDict !== "object" || stateDict instanceof Tensor) {
      throw new TypeError(
        `loadStateDict: expected a plain object of tensors, got ${
          stateDict === null ? "null" : typeof stateDict
        }`,
      );
    }
    const entries = stateEntries(this);
    const expected = new Set(entries.map(([k]) => k));
    const problems: string[] = [];
    for (const [key, target] of entries) {
      if (!Object.hasOwn(stateDict, key)) continue;
      const value: unknown = stateDict[key];
      if (!(value instanceof Tensor)) {
        problems.push(
          `value for "${key}" is not a Tensor (got ${value === null ? "null" : typeof value})`,
        );
      } else if (isLazy(value) || isLazy(target)) {
        if (!isLazy(target)) problems.push(`${LAZY_INTO_INITIALIZED} (key "${key}")`);
      } else if (!sameShape(value.shape, target.shape)) {
        problems.push(
          `size mismatch for "${key}": copying a tensor of shape ${
            formatShape(value.shape)
          } from the state dict, the shape in the current model is ${formatShape(target.shape)}`,
        );
      } else if (value.storage.disposed) {
        problems.push(`value for "${key}" was disposed`);
      } else if (target.storage.disposed) {
        problems.push(`the module's tensor "${key}" was disposed`);
      }
    }
    const fail = (errors: string[]) => {
      throw new Error(
        `loadStateDict: error(s) in loading state dict for ${this.constructor.name}:\n  ${
          errors.join("\n  ")
        }`,
      );
    };
    let keys = incompatibleKeys(this, stateDict, expected);
    const hooked = this.modules().some((m) => hooksOf(m, "loadStateDictPost").length > 0);
    // A wrong shape throws before anything is written (and before any hook runs).
    const keysNow = strict && (!hooked || problems.length > 0);
    const errors = [...keysNow ? keyErrors(keys) : [], ...problems];
    if (errors.length > 0) fail(errors);
    tidy(() =>
      noGrad(() => {
        for (const [key, target, whenMissing] of entries) {
          if (!Object.hasOwn(stateDict, key)) {
            if (whenMissing !== undefined) target.fill_(whenMissing);
            continue;
          }
          const value = stateDict[key];
          if (value.storage === target.storage || isLazy(value)) continue;
          // PyTorch's `_lazy_load_hook`: an uninitialized tensor takes the value's shape; only
          // once every check passed, so a load that throws leaves it uninitialized.
          if (isLazy(target)) target.materialize(value.shape);
          target._assign(value.dtype === target.dtype ? value : value.to(target.dtype));
        }
      })
    );
    if (hooked) {
      keys = incompatibleKeys(this, stateDict, expected, (m, incompatible) => {
        for (const hook of hooksOf(m, "loadStateDictPost")) {
          const result = settled("load-state-dict post-hook", m, hook(m, incompatible));
          if (result !== undefined && result !== null) {
            throw new TypeError(
              `loadStateDict: a load-state-dict post-hook of ${m.constructor.name} returned ${
                describe(result)
              }; it must return nothing (edit incompatibleKeys' arrays in place)`,
            );
          }
        }
      });
      if (strict && keyErrors(keys).length > 0) fail(keyErrors(keys));
    }
    return { missingKeys: keys.missingKeys, unexpectedKeys: keys.unexpectedKeys };
  }

  // ---- replication (for the parallel layer) ----

  /**
   * A structural copy of this module tree whose parameters and buffers are
   * replaced by `mapTensor(t, kind, name)` (`name` is the dotted state-dict
   * name, e.g. `block1.weight`, `bn.running_mean`). Used by
   * `parallel.replicate`.
   *
   * Every module in the tree is shallow-copied: a new object with the same
   * prototype and the same own properties (descriptors included), except that
   * Parameter fields and registered buffer fields hold what `mapTensor`
   * returned and submodule fields hold the copies of those submodules. A
   * module or tensor that appears several times in the tree is copied (or
   * mapped) once, so sharing is preserved. Buffer registrations are carried
   * over. Constructors do not run, and fields that are neither parameters,
   * buffers nor modules are shared with the original (arrays and objects
   * included).
   *
   * The replacements may be any tensors of the same shape, typically
   * non-leaf tensors made by a differentiable broadcast: they are not
   * Parameters, so, as with PyTorch's replicas, `parameters()` and
   * `stateDict()` of the copy do not list them (its buffers are listed).
   * The original module is not modified.
   */
  _replicateWith(mapTensor: ReplicateTensorFn): this {
    refuseLazy([...this.parameters(), ...this.buffers()], "DataParallel");
    const modules = new Map<Module, Module>();
    const tensors = new Map<Tensor, Tensor>();
    const map = (t: Tensor, kind: "parameter" | "buffer", name: string): Tensor => {
      const done = tensors.get(t);
      if (done) return done;
      const out = mapTensor(t, kind, name);
      if (!(out instanceof Tensor) || !sameShape(out.shape, t.shape)) {
        throw new TypeError(
          `_replicateWith: mapTensor must return a Tensor of shape ${
            formatShape(t.shape)
          } for ${kind} "${name}", got ${
            out instanceof Tensor ? `shape ${formatShape(out.shape)}` : typeof out
          }`,
        );
      }
      tensors.set(t, out);
      return out;
    };
    const copy = (m: Module, prefix: string): Module => {
      const done = modules.get(m);
      if (done) return done;
      const replica = Object.create(Object.getPrototypeOf(m)) as Module;
      modules.set(m, replica);
      const buffers = bufferFields.get(m);
      const guarded = guardedFields.get(m);
      const descriptors = Object.getOwnPropertyDescriptors(m);
      for (const key of Reflect.ownKeys(descriptors)) {
        let desc = descriptors[key as string];
        if (typeof key === "string" && guarded?.has(key) && desc.get) {
          // The accessor's value, not the accessor (it would write to the original).
          desc = { value: desc.get!(), writable: true, enumerable: true, configurable: true };
        }
        if (typeof key === "string" && "value" in desc) {
          const value: unknown = desc.value;
          const buffer = buffers?.get(key);
          if (buffer && value instanceof Tensor) {
            desc.value = map(value, "buffer", prefix + buffer.name);
          } else if (value instanceof Parameter) {
            desc.value = map(value, "parameter", prefix + key);
          } else if (value instanceof Module) {
            desc.value = copy(value, `${prefix}${key}.`);
          }
        }
        Object.defineProperty(replica, key, desc);
      }
      if (buffers) bufferFields.set(replica, new Map(buffers));
      copyFieldOrder(m, replica);
      trackModule(replica);
      return replica;
    };
    return copy(this, "") as this;
  }

  // ---- printing ----

  /** The part inside the parentheses of this module's repr, e.g. `in_features=4, out_features=3, bias=True`. */
  extraRepr(): string {
    return "";
  }

  /** PyTorch's repr: `Linear(in_features=10, out_features=20, bias=True)`, nested with `(name): ...`. */
  toString(): string {
    const lines: string[] = [];
    const extra = this.extraRepr();
    if (extra) lines.push(...extra.split("\n"));
    for (const [name, child] of ownChildren(this)) {
      lines.push(`(${name}): ${addIndent(child.toString(), 2)}`);
    }
    const name = this.constructor.name;
    if (lines.length === 0) return `${name}()`;
    if (lines.length === 1 && ownChildren(this).length === 0) return `${name}(${lines[0]})`;
    return `${name}(\n  ${lines.join("\n  ")}\n)`;
  }

  /** What `console.log` shows in Deno: the repr. */
  [Symbol.for("Deno.customInspect")](): string {
    return this.toString();
  }
}
