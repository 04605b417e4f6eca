/**
 * Module hooks, as PyTorch's `register_forward_pre_hook`, `register_forward_hook`,
 * `register_full_backward_hook`, `register_full_backward_pre_hook`, the global
 * `register_module_*_hook` functions and the state-dict hooks (internal machinery: `Module` and
 * global_hooks.ts expose it).
 *
 * multigrad has no `__call__`: users and layers call `module.forward(x)` directly. So the first
 * forward-side hook registered on a module installs an instance-level `forward` (non-enumerable,
 * so field discovery, the repr and the state dict never see it) that runs the hooks around the
 * class's `forward`, and removing the last hook takes it away. Global hooks wrap, for as long as
 * one is registered, the `forward` of the prototypes of every module class made so far (the
 * `Module` constructor lists each class), so a module without hooks of its own costs nothing
 * extra per call while none is registered, and no module is held.
 * The hook tables live in one object under a symbol key: `_replicateWith` copies own properties,
 * so DataParallel's replicas share the original's tables (PyTorch's
 * `_replicate_for_data_parallel` shares its hook dicts the same way) and their `forward` runs the
 * same hooks with the replica as the module.
 * @module
 */

import { isGradEnabled, record } from "../autograd.ts";
import { full } from "../ops/factory.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import {
  type ForwardHook,
  type ForwardHookOptions,
  type ForwardPreHook,
  type FullBackwardHook,
  type FullBackwardPreHook,
  type LoadStateDictPostHook,
  RemovableHandle,
  type StateDictPostHook,
  type StateDictPreHook,
} from "./hook_handle.ts";

interface HookTypes {
  pre: ForwardPreHook;
  forward: ForwardHook;
  backward: FullBackwardHook;
  backwardPre: FullBackwardPreHook;
  stateDictPre: StateDictPreHook;
  stateDictPost: StateDictPostHook;
  loadStateDictPost: LoadStateDictPostHook;
}

/** A kind of hook: the forward-side ones need the instance-level `forward`, the others do not. */
export type HookKind = keyof HookTypes;
type ForwardKind = "pre" | "forward" | "backward" | "backwardPre";
const FORWARD_KINDS: readonly ForwardKind[] = ["pre", "forward", "backward", "backwardPre"];

type HookTables = { readonly [K in HookKind]: Map<number, HookTypes[K]> } & {
  /** Ids of the forward hooks registered with `alwaysCall`. */
  readonly alwaysCalled: Set<number>;
  /** An own `forward` the instance had before the wrapper (restored when the last hook goes). */
  ownForward?: PropertyDescriptor;
};

const HOOKS: unique symbol = Symbol("multigrad.moduleHooks");
type Hooked = { [HOOKS]?: HookTables; forward: (...args: unknown[]) => unknown };

// One counter for module and global hooks, as PyTorch's RemovableHandle.next_id: `alwaysCall`
// bookkeeping of one forward tells them apart by id.
let nextId = 0;

function emptyTables(): HookTables {
  return {
    pre: new Map(),
    forward: new Map(),
    backward: new Map(),
    backwardPre: new Map(),
    stateDictPre: new Map(),
    stateDictPost: new Map(),
    loadStateDictPost: new Map(),
    alwaysCalled: new Set(),
  };
}

/** The global hooks (their state-dict tables stay empty). */
const globalHooks: HookTables = emptyTables();

// The class prototype of every module made so far: a global hook must reach modules made before
// it. Classes, not modules: they are few, and a list of WeakRefs to modules would keep every
// module a synchronous loop makes alive until the job ends (a WeakRef holds its target so long).
const moduleClasses = new Set<object>();
// While a global forward-side hook is registered: each prototype along those classes' chains that
// defines `forward`, with that own property as it was (restored when the last global hook goes).
const patched = new Map<object, PropertyDescriptor>();
// The wrappers of globalForward, each to the `forward` it wraps.
const unwrapped = new WeakMap<object, (...args: unknown[]) => unknown>();

function tablesOf(module: object): HookTables {
  const m = module as Hooked;
  let tables = m[HOOKS];
  if (!tables) {
    tables = emptyTables();
    Object.defineProperty(m, HOOKS, { value: tables, writable: true, configurable: true });
  }
  return tables;
}

function hasForwardHooks(tables: HookTables | undefined): boolean {
  return FORWARD_KINDS.some((k) => (tables?.[k].size ?? 0) > 0);
}

function isWrapped(module: object): boolean {
  const own = Object.getOwnPropertyDescriptor(module, "forward");
  return own?.value === hookedForward;
}

function wrap(module: object): void {
  if (isWrapped(module)) return;
  tablesOf(module).ownForward = Object.getOwnPropertyDescriptor(module, "forward");
  Object.defineProperty(module, "forward", {
    value: hookedForward,
    writable: true,
    enumerable: false,
    configurable: true,
  });
}

/** Takes the wrapper away once the module has no forward-side hook. */
function unwrapIfIdle(module: object): void {
  const tables = (module as Hooked)[HOOKS];
  if (!isWrapped(module) || hasForwardHooks(tables)) return;
  // ownForward stays in the tables, which replicas may share: each module restores it.
  const own = tables?.ownForward;
  if (own) Object.defineProperty(module, "forward", own);
  else delete (module as { forward?: unknown }).forward;
}

function insert<K extends HookKind>(
  tables: HookTables,
  kind: K,
  id: number,
  hook: HookTypes[K],
  prepend: boolean,
): void {
  const map = tables[kind] as Map<number, HookTypes[K]>;
  // In place: replicas share the map.
  const before = prepend ? [...map] : [];
  if (prepend) map.clear();
  map.set(id, hook);
  for (const [k, h] of before) map.set(k, h);
}

/**
 * @internal `hook` unless it is not a function: then the TypeError names `op`, the method or
 * function that registers it.
 */
export function checkHook<H>(op: string, hook: H): H {
  if (typeof hook !== "function") {
    throw new TypeError(
      `${op}: hook must be a function, got ${hook === null ? "null" : typeof hook}`,
    );
  }
  return hook;
}

/**
 * @internal `options` of a `register*Hook` call, checked: an object whose `prepend` and
 * `alwaysCall` are booleans. `withKwargs` is refused: a forward's arguments are all positional
 * (an options object is one of them), so there are no keyword arguments to pass a hook.
 */
export function checkHookOptions(
  op: string,
  options: ForwardHookOptions,
  allowed: readonly ("prepend" | "alwaysCall")[],
): ForwardHookOptions {
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `${op}: options must be an object, got ${options === null ? "null" : typeof options}`,
    );
  }
  for (const key of Object.keys(options)) {
    if (key === "withKwargs") {
      throw new TypeError(
        `${op}: withKwargs is not supported: multigrad's forward takes positional arguments ` +
          `only, and a hook gets them all in args`,
      );
    }
    if (!(allowed as string[]).includes(key)) {
      throw new TypeError(
        `${op}: unknown option "${key}" (expected ${allowed.map((a) => `"${a}"`).join(" or ")})`,
      );
    }
    const value = (options as Record<string, unknown>)[key];
    if (value !== undefined && typeof value !== "boolean") {
      throw new TypeError(`${op}: ${key} must be a boolean, got ${typeof value}`);
    }
  }
  return options;
}

/** @internal Lists `module`'s class for the global hooks (the `Module` constructor, replicas). */
export function trackModule(module: object): void {
  // The class's prototype, not the module's own (a weight norm gives a module one of its own).
  const proto = (module.constructor as { prototype?: object } | undefined)?.prototype ??
    Object.getPrototypeOf(module);
  if (moduleClasses.has(proto)) return;
  moduleClasses.add(proto);
  if (hasForwardHooks(globalHooks)) patchChain(proto);
}

/** Gives each prototype from `proto` up that defines `forward` a {@link globalForward} wrapper. */
function patchChain(proto: object | null): void {
  for (let p = proto; p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    const own = Object.getOwnPropertyDescriptor(p, "forward");
    if (patched.has(p) || typeof own?.value !== "function") continue;
    patched.set(p, own);
    Object.defineProperty(p, "forward", { ...own, value: globalForward(own.value) });
  }
}

/** Puts back the prototypes' own `forward`s (unless something replaced a wrapper since). */
function unpatchAll(): void {
  for (const [p, own] of patched) {
    if (unwrapped.has(Object.getOwnPropertyDescriptor(p, "forward")?.value)) {
      Object.defineProperty(p, "forward", own);
    }
  }
  patched.clear();
}

/**
 * The `forward` a prototype holds while global hooks are registered: `inner` with the global
 * hooks (and the module's own: a module with some has its own `forward`, which calls this one
 * for `inner`) run around it, as {@link hookedForward}. Only for the module's own call: as a
 * `super.forward(...)` of a subclass's `forward`, or as the inner call of a module's own
 * `forward`, it is `inner` alone.
 */
function globalForward(inner: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
  const wrapper = function (this: Hooked, ...args: unknown[]): unknown {
    if (this?.forward !== wrapper || !hasForwardHooks(globalHooks)) return inner.apply(this, args);
    // The module's tables, made now if need be: a hook a global pre-hook registers on the module
    // joins this call where PyTorch's does (forward hooks).
    return forwardScope(() => runHooked(this, tablesOf(this), inner, args));
  };
  Object.defineProperty(wrapper, "name", { value: inner.name });
  unwrapped.set(wrapper, inner);
  return wrapper;
}

/** @internal Registers `hook` of `kind` on `module`; the method of `Module` checks `hook` first. */
export function addHook<K extends HookKind>(
  module: object,
  kind: K,
  hook: HookTypes[K],
  options: ForwardHookOptions = {},
): RemovableHandle {
  const tables = tablesOf(module);
  const id = nextId++;
  insert(tables, kind, id, hook, options.prepend ?? false);
  if (options.alwaysCall) tables.alwaysCalled.add(id);
  if ((FORWARD_KINDS as string[]).includes(kind)) wrap(module);
  return new RemovableHandle(id, () => {
    tables[kind].delete(id);
    tables.alwaysCalled.delete(id);
    unwrapIfIdle(module);
  });
}

/**
 * @internal What the `register*Hook` methods of `Module` do: checks `hook` and `options` (only
 * `allowed` ones), naming `op` in errors, and registers the hook.
 */
export function registerHook(
  module: object,
  op: string,
  kind: HookKind,
  hook: unknown,
  options: ForwardHookOptions,
  allowed: readonly ("prepend" | "alwaysCall")[] = ["prepend"],
): RemovableHandle {
  checkHook(op, hook);
  return addHook(module, kind, hook as HookTypes[HookKind], checkHookOptions(op, options, allowed));
}

/** @internal Registers a global `hook` of `kind`, run for every module before its own hooks. */
export function addGlobalHook<K extends ForwardKind>(
  kind: K,
  hook: HookTypes[K],
  options: ForwardHookOptions = {},
): RemovableHandle {
  const first = !hasForwardHooks(globalHooks);
  const id = nextId++;
  insert(globalHooks, kind, id, hook, false);
  if (options.alwaysCall) globalHooks.alwaysCalled.add(id);
  if (first) { for (const proto of moduleClasses) patchChain(proto); }
  return new RemovableHandle(id, () => {
    globalHooks[kind].delete(id);
    globalHooks.alwaysCalled.delete(id);
    if (!hasForwardHooks(globalHooks)) unpatchAll();
  });
}

/** @internal The state-dict hooks of `kind` on `module`, in the order they run. */
export function hooksOf<K extends "stateDictPre" | "stateDictPost" | "loadStateDictPost">(
  module: object,
  kind: K,
): HookTypes[K][] {
  const map = (module as Hooked)[HOOKS]?.[kind] as Map<number, HookTypes[K]> | undefined;
  return map ? [...map.values()] : [];
}

/**
 * @internal Gives `module` its own copy of the hook tables it shares with the module it was
 * copied from (same hooks, separate registrations), as `copy.deepcopy` gives a deep copy in
 * PyTorch: for copies that live on their own (a TransformerEncoder's layers), unlike replicas.
 */
export function unshareHooks(module: object): void {
  const tables = (module as Hooked)[HOOKS];
  if (!tables) return;
  const copy = emptyTables();
  for (const kind of Object.keys(copy) as HookKind[]) {
    for (const [id, hook] of tables[kind]) (copy[kind] as Map<number, unknown>).set(id, hook);
  }
  for (const id of tables.alwaysCalled) copy.alwaysCalled.add(id);
  copy.ownForward = tables.ownForward;
  Object.defineProperty(module, HOOKS, { value: copy, writable: true, configurable: true });
}

/**
 * The instance-level `forward` of a module with hooks, as the hook part of PyTorch's
 * `Module._call_impl`: pre-hooks, the backward hooks' input wrapping, `forward`, forward hooks,
 * then the backward hooks' output wrapping; global hooks before the module's own, and the
 * `alwaysCall` forward hooks when something throws. A plain function (not a closure over one
 * module): replicas copy it and run it with themselves as `this`.
 */
function hookedForward(this: Hooked, ...callArgs: unknown[]): unknown {
  const tables = this[HOOKS];
  const own = (tables?.ownForward?.value ??
    (Object.getPrototypeOf(this) as Hooked).forward) as (...args: unknown[]) => unknown;
  // The class's forward itself, not the global hooks' wrapper of it: this call runs them, and a
  // hook removing the module's last own hook mid-call must not make the wrapper run them again.
  const inner = unwrapped.get(own) ?? own;
  if (!hasForwardHooks(tables) && !hasForwardHooks(globalHooks)) {
    return inner.apply(this, callArgs);
  }
  // As a layer's own forward: what the hooks make in passing (an output they replaced) goes with
  // the graph at backward, not with the GC.
  return forwardScope(() => runHooked(this, tables ?? emptyTables(), inner, callArgs));
}

/**
 * @internal A hook's result, refused when it is a Promise: the forward, backward or state-dict
 * call it is part of cannot wait.
 */
export function settled(kind: string, module: object, result: unknown): unknown {
  if (result instanceof Promise) {
    result.catch(() => {});
    throw new TypeError(
      `${kind} of ${module.constructor.name} returned a Promise (an async function?): ` +
        `hooks run synchronously; read values after the forward, from tensors the hook keep()s`,
    );
  }
  return result;
}

function runHooked(
  module: Hooked,
  tables: HookTables,
  inner: (...args: unknown[]) => unknown,
  callArgs: unknown[],
): unknown {
  const g = globalHooks;
  let args = callArgs;
  let output: unknown = undefined;
  const called = new Set<number>();
  try {
    // Read before the pre-hooks run, as PyTorch's _call_impl: a backward hook a pre-hook
    // registers joins from the next forward on.
    const backward = [...g.backward.values(), ...tables.backward.values()];
    const backwardPre = [...g.backwardPre.values(), ...tables.backwardPre.values()];
    for (const hook of [...g.pre.values(), ...tables.pre.values()]) {
      const result = settled("forward pre-hook", module, hook(module, args));
      if (result !== undefined && result !== null) {
        args = Array.isArray(result) ? [...result] : [result];
      }
    }
    const bw = backward.length + backwardPre.length > 0
      ? new BackwardHookCall(module, backward, backwardPre)
      : null;
    if (bw) args = bw.setupInput(args);
    output = inner.apply(module, args);
    for (const [id, hook] of [...g.forward, ...tables.forward]) {
      called.add(id);
      const result = settled("forward hook", module, hook(module, args, output));
      if (result !== undefined && result !== null) output = result;
    }
    return bw ? bw.setupOutput(output) : output;
  } catch (error) {
    // PyTorch 2.1's always_call: the hooks not yet run get the output as far as it got.
    for (const [id, hook] of [...g.forward, ...tables.forward]) {
      if (called.has(id) || !(g.alwaysCalled.has(id) || tables.alwaysCalled.has(id))) continue;
      try {
        const result = settled("forward hook", module, hook(module, args, output));
        if (result !== undefined && result !== null) output = result;
      } catch (hookError) {
        console.warn(
          `forward hook of ${module.constructor.name} with alwaysCall raised an error that was ` +
            `silenced as another error was raised in forward: ${String(hookError)}`,
        );
      }
    }
    throw error;
  }
}

/** `out`, a hook's returned gradients, checked against the `expected` number of slots. */
function checkGrads(
  what: string,
  module: object,
  name: string,
  out: unknown,
  expected: number,
): (Tensor | null)[] {
  if (!Array.isArray(out)) {
    throw new TypeError(
      `${what} of ${module.constructor.name} returned ${typeof out}, ` +
        `expected an array of ${expected} gradients (or undefined)`,
    );
  }
  if (out.length !== expected) {
    throw new RangeError(
      `${what} of ${module.constructor.name} returned an invalid number ` +
        `of ${name}, got ${out.length}, but expected ${expected}`,
    );
  }
  out.forEach((g, i) => {
    if (g !== null && !(g instanceof Tensor)) {
      throw new TypeError(
        `${what} of ${module.constructor.name}: ${name} ${i} is ` +
          `${typeof g}, expected a Tensor or null`,
      );
    }
  });
  return out;
}

/**
 * One forward's full backward hooks and pre-hooks, as PyTorch's `torch.utils.hooks.BackwardHook`:
 * identity nodes on the tensor outputs (catching the output gradients, where the pre-hooks may
 * replace them) and on the tensor arguments (where the hooks run with both and may replace the
 * argument gradients).
 */
class BackwardHookCall {
  #gradOutputs: (Tensor | null)[] | null = null;
  #nInputs = 0;
  #inputsWrapped = false;

  constructor(
    readonly module: object,
    readonly hooks: FullBackwardHook[],
    readonly preHooks: FullBackwardPreHook[],
  ) {}

  setupInput(args: unknown[]): unknown[] {
    this.#nInputs = args.length;
    // What a tensor argument that got no gradient reads as: zeros, as PyTorch's
    // BackwardHookFunction materializes them (null stays for arguments that are not tensors).
    const zeroed = args.map((a) =>
      a instanceof Tensor ? { shape: [...a.shape], dtype: a.dtype, device: a.device } : null
    );
    const wrapped = wrapTensors(args, (slots, grads) => {
      // Gradient reached the arguments without passing through the outputs (double backward).
      if (this.#gradOutputs === null) return grads;
      const got: (Tensor | null)[] = Array(this.#nInputs).fill(null);
      slots.forEach((slot, k) => got[slot] = grads[k]);
      let gradInput = zeroed.map((z, i) =>
        got[i] ?? (z && full(z.shape, 0, { dtype: z.dtype, device: z.device }))
      );
      for (const hook of this.hooks) {
        const out = settled(
          "full backward hook",
          this.module,
          hook(this.module, gradInput, this.#gradOutputs),
        );
        if (out === undefined || out === null) continue;
        gradInput = checkGrads(
          "full backward hook",
          this.module,
          "grad_input",
          out,
          gradInput.length,
        );
      }
      this.#gradOutputs = null;
      return slots.map((slot) => gradInput[slot]);
    });
    this.#inputsWrapped = wrapped !== null;
    return wrapped ?? args;
  }

  setupOutput(output: unknown): unknown {
    const list = Array.isArray(output) ? output : [output];
    const wrapped = wrapTensors(list, (slots, grads) => {
      let gradOutputs: (Tensor | null)[] = Array(list.length).fill(null);
      slots.forEach((slot, k) => gradOutputs[slot] = grads[k]);
      for (const hook of this.preHooks) {
        const out = settled("full backward pre-hook", this.module, hook(this.module, gradOutputs));
        if (out === undefined || out === null) continue;
        gradOutputs = checkGrads(
          "full backward pre-hook",
          this.module,
          "grad_output",
          out,
          gradOutputs.length,
        );
      }
      this.#gradOutputs = gradOutputs;
      if (!this.#inputsWrapped) {
        // No argument requires grad: no node on the arguments, so the hooks run here.
        const gradInput: (Tensor | null)[] = Array(this.#nInputs).fill(null);
        for (const hook of this.hooks) {
          const out = settled(
            "full backward hook",
            this.module,
            hook(this.module, gradInput, gradOutputs),
          );
          if (
            out !== undefined && out !== null &&
            !(Array.isArray(out) && out.every((g) => g === null))
          ) {
            throw new Error(
              `full backward hook of ${this.module.constructor.name}: for a module where no input ` +
                `requires gradient, a backward hook should always return undefined or null for all gradients`,
            );
          }
        }
        this.#gradOutputs = null;
      }
      return this.preHooks.length > 0 ? slots.map((slot) => gradOutputs[slot]) : grads;
    });
    if (wrapped === null) return output;
    return Array.isArray(output) ? wrapped : wrapped[0];
  }
}

/**
 * `values` with each tensor that requires grad replaced by an identity of it recorded as one node
 * whose backward is `backward(slots, grads)` (slots: the positions of those tensors); null (no
 * node) when none requires grad or grad mode is off, as PyTorch's `_apply_on_tensors`.
 */
function wrapTensors(
  values: unknown[],
  backward: (slots: number[], grads: (Tensor | null)[]) => (Tensor | null)[],
): unknown[] | null {
  if (!isGradEnabled()) return null;
  const slots: number[] = [];
  values.forEach((v, i) => {
    if (v instanceof Tensor && v.requiresGrad) slots.push(i);
  });
  if (slots.length === 0) return null;
  const inputs = slots.map((i) => values[i] as Tensor);
  const outputs = inputs.map((t) => t.detach());
  // The identity shares memory with its input: a recorded in-place change of either would miss
  // the other's history (a wrong gradient), so it is refused, as PyTorch refuses it on the views
  // BackwardHookFunction returns.
  for (const t of inputs) t.storage.aliased = true;
  record("BackwardHookFunctionBackward", inputs, outputs, (grads) => backward(slots, grads));
  const out = [...values];
  slots.forEach((slot, k) => out[slot] = outputs[k]);
  return out;
}
