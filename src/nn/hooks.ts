/**
 * Module hooks, as PyTorch's `register_forward_pre_hook`, `register_forward_hook` and
 * `register_full_backward_hook` (internal machinery: `Module` exposes it).
 *
 * multigrad has no `__call__`: users and layers call `module.forward(x)` directly. So the first
 * hook registered on a module installs an instance-level `forward` (non-enumerable, so field
 * discovery, the repr and the state dict never see it) that runs the hooks around the class's
 * `forward`, and removing the last hook takes it away. The hook tables live in one object under a
 * symbol key: `_replicateWith` copies own properties, so DataParallel's replicas share the
 * original's tables (PyTorch's `_replicate_for_data_parallel` shares its hook dicts the same way)
 * and their `forward` runs the same hooks with the replica as the module.
 * @module
 */

import { isGradEnabled, record } from "../autograd.ts";
import { full } from "../ops/factory.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import {
  type ForwardHook,
  type ForwardPreHook,
  type FullBackwardHook,
  RemovableHandle,
} from "./hook_handle.ts";

type Kind = "pre" | "forward" | "backward";

interface HookTables {
  readonly pre: Map<number, ForwardPreHook>;
  readonly forward: Map<number, ForwardHook>;
  readonly backward: Map<number, FullBackwardHook>;
  /** An own `forward` the instance had before the wrapper (restored when the last hook goes). */
  ownForward?: PropertyDescriptor;
}

const HOOKS: unique symbol = Symbol("multigrad.moduleHooks");
type Hooked = { [HOOKS]?: HookTables; forward: (...args: unknown[]) => unknown };

let nextId = 0;

function tablesOf(module: object): HookTables {
  const m = module as Hooked;
  let tables = m[HOOKS];
  if (!tables) {
    tables = { pre: new Map(), forward: new Map(), backward: new Map() };
    Object.defineProperty(m, HOOKS, { value: tables, writable: true, configurable: true });
  }
  return tables;
}

function isWrapped(module: object): boolean {
  const own = Object.getOwnPropertyDescriptor(module, "forward");
  return own?.value === hookedForward;
}

/** @internal Registers `hook` of `kind` on `module`; the method of `Module` checks `hook` first. */
export function addHook(
  module: object,
  kind: Kind,
  hook: ForwardPreHook | ForwardHook | FullBackwardHook,
): RemovableHandle {
  const tables = tablesOf(module);
  const id = nextId++;
  (tables[kind] as Map<number, typeof hook>).set(id, hook);
  if (!isWrapped(module)) {
    tables.ownForward = Object.getOwnPropertyDescriptor(module, "forward");
    Object.defineProperty(module, "forward", {
      value: hookedForward,
      writable: true,
      enumerable: false,
      configurable: true,
    });
  }
  return new RemovableHandle(id, () => {
    tables[kind].delete(id);
    const empty = tables.pre.size + tables.forward.size + tables.backward.size === 0;
    if (!empty || !isWrapped(module)) return;
    const own = tables.ownForward;
    tables.ownForward = undefined;
    if (own) Object.defineProperty(module, "forward", own);
    else delete (module as { forward?: unknown }).forward;
  });
}

/**
 * @internal Gives `module` its own copy of the hook tables it shares with the module it was
 * copied from (same hooks, separate registrations), as `copy.deepcopy` gives a deep copy in
 * PyTorch: for copies that live on their own (a TransformerEncoder's layers), unlike replicas.
 */
export function unshareHooks(module: object): void {
  const tables = (module as Hooked)[HOOKS];
  if (!tables) return;
  const copy: HookTables = {
    pre: new Map(tables.pre),
    forward: new Map(tables.forward),
    backward: new Map(tables.backward),
    ownForward: tables.ownForward,
  };
  Object.defineProperty(module, HOOKS, { value: copy, writable: true, configurable: true });
}

/**
 * The instance-level `forward` of a module with hooks, as the hook part of PyTorch's
 * `Module._call_impl`: pre-hooks, the backward hook's input wrapping, `forward`, forward hooks,
 * then the backward hook's output wrapping. A plain function (not a closure over one module):
 * replicas copy it and run it with themselves as `this`.
 */
function hookedForward(this: Hooked, ...callArgs: unknown[]): unknown {
  const tables = this[HOOKS];
  const inner = (tables?.ownForward?.value ??
    (Object.getPrototypeOf(this) as Hooked).forward) as (...args: unknown[]) => unknown;
  if (!tables) return inner.apply(this, callArgs);
  // As a layer's own forward: what the hooks make in passing (an output they replaced) goes with
  // the graph at backward, not with the GC.
  return forwardScope(() => runHooked(this, tables, inner, callArgs));
}

/** A hook's result, refused when it is a Promise: the forward or backward it is part of cannot wait. */
function settled(kind: string, module: object, result: unknown): unknown {
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
  let args = callArgs;
  for (const hook of [...tables.pre.values()]) {
    const result = settled("forward pre-hook", module, hook(module, args));
    if (result !== undefined && result !== null) {
      args = Array.isArray(result) ? [...result] : [result];
    }
  }
  const backwardHooks = [...tables.backward.values()];
  const bw = backwardHooks.length > 0 ? new BackwardHookCall(module, backwardHooks) : null;
  if (bw) args = bw.setupInput(args);
  let output = inner.apply(module, args);
  for (const hook of [...tables.forward.values()]) {
    const result = settled("forward hook", module, hook(module, args, output));
    if (result !== undefined && result !== null) output = result;
  }
  return bw ? bw.setupOutput(output) : output;
}

/**
 * One forward's full backward hooks, as PyTorch's `torch.utils.hooks.BackwardHook`: identity
 * nodes on the tensor outputs (catching the output gradients) and on the tensor arguments (where
 * the hooks run with both and may replace the argument gradients).
 */
class BackwardHookCall {
  #gradOutputs: (Tensor | null)[] | null = null;
  #nInputs = 0;
  #inputsWrapped = false;

  constructor(readonly module: object, readonly hooks: FullBackwardHook[]) {}

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
        ) as (Tensor | null)[] | null | undefined;
        if (out === undefined || out === null) continue;
        if (!Array.isArray(out)) {
          throw new TypeError(
            `full backward hook of ${this.module.constructor.name} returned ${typeof out}, ` +
              `expected an array of ${gradInput.length} gradients (or undefined)`,
          );
        }
        if (out.length !== gradInput.length) {
          throw new RangeError(
            `full backward hook of ${this.module.constructor.name} returned an invalid number ` +
              `of grad_input, got ${out.length}, but expected ${gradInput.length}`,
          );
        }
        out.forEach((g, i) => {
          if (g !== null && !(g instanceof Tensor)) {
            throw new TypeError(
              `full backward hook of ${this.module.constructor.name}: grad_input ${i} is ` +
                `${typeof g}, expected a Tensor or null`,
            );
          }
        });
        gradInput = out;
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
      const gradOutputs: (Tensor | null)[] = Array(list.length).fill(null);
      slots.forEach((slot, k) => gradOutputs[slot] = grads[k]);
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
      return grads;
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
