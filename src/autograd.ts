/**
 * Reverse-mode automatic differentiation: the graph node, the backward
 * engine, grad mode, and the user-facing `Function` (as
 * `torch.autograd.Function`). The engine only sees tensors and nodes; it knows
 * nothing of devices beyond asking each node for gradients.
 * @module
 */

import { formatShape, sameShape } from "./shape.ts";
import type { DType } from "./dtype.ts";
import type { Device } from "./device.ts";
import type { Tensor } from "./tensor.ts";
import {
  asBackwardOf,
  keep,
  madeInScope,
  noteNode,
  now,
  type ReleaseGroup,
  type Storage,
  tidy,
} from "./storage.ts";

let gradEnabled = true;
/** @internal Anomaly mode's hooks (`src/autograd/anomaly.ts`); unset, so free, while it is off. */
export const anomaly: { trace?(): string; wrap?(node: Node, fn: BackwardFn): BackwardFn } = {};
// The node whose backward runs now under createGraph (grad mode on).
let applying: Node | null = null;

/** Whether operations record the graph for backward now. */
export function isGradEnabled(): boolean {
  return gradEnabled;
}

/** Sets grad mode, returning the previous one. Prefer {@link noGrad}. */
export function setGradEnabled(enabled: boolean): boolean {
  const previous = gradEnabled;
  gradEnabled = enabled;
  return previous;
}

function withGrad<T>(enabled: boolean, op: string, fn: () => T): T {
  const previous = setGradEnabled(enabled);
  try {
    const out = fn();
    // The mode is global, so it cannot follow an async fn past its first await: refused.
    if (out instanceof Promise) {
      out.catch(() => {});
      throw new TypeError(`${op}(fn): fn returned a Promise; the grad mode cannot span an await`);
    }
    return out;
  } finally {
    setGradEnabled(previous);
  }
}

/** Runs `fn` (synchronous) without recording the graph (as `torch.no_grad()`). */
export const noGrad = <T>(fn: () => T): T => withGrad(false, "noGrad", fn);
/** Runs `fn` (synchronous) with graph recording on, even inside {@link noGrad}. */
export const enableGrad = <T>(fn: () => T): T => withGrad(true, "enableGrad", fn);

/** Shape, dtype and device of a node's output, to make zero gradients. */
export interface OutputMeta {
  /** The output's shape. */
  readonly shape: readonly number[];
  /** The output's dtype. */
  readonly dtype: DType;
  /** The output's device. */
  readonly device: Device;
}

/**
 * The gradient function of one operation: given the gradients of its outputs
 * (null where an output got none), the gradients of its inputs (null where an
 * input needs none).
 */
export type BackwardFn = (grads: (Tensor | null)[]) => (Tensor | null)[];

/** One recorded operation in the graph. */
export class Node {
  /** Inputs, in order; released after backward unless the graph is retained. */
  inputs: (Tensor | null)[];
  /** Each input's producer when recorded: an in-place op may give the tensor a new one later. */
  edges: ({ readonly node: Node; readonly index: number } | null)[];
  #backward: BackwardFn | null;
  #groups: ReleaseGroup[] = [];
  /** @internal Tensor hooks of each output (`Tensor.registerHook` on a non-leaf). */
  hooks?: TensorHook[][];
  /** When it was recorded: memory changed in place later must not be read by its backward. */
  readonly recordedAt: number = now();
  /** @internal Where its forward ran, kept in anomaly mode only. */
  readonly trace?: string = anomaly.trace?.();

  /** Records `name` with its inputs, backward and output descriptions. */
  constructor(
    readonly name: string,
    inputs: (Tensor | null)[],
    backward: BackwardFn,
    readonly outputs: readonly OutputMeta[],
  ) {
    this.inputs = inputs;
    this.edges = inputs.map((t) => (t?.gradFn ? { node: t.gradFn, index: t.outputIndex } : null));
    this.#backward = backward;
  }

  /** Runs the backward function; an error if the graph was released. */
  apply(grads: (Tensor | null)[]): (Tensor | null)[] {
    if (!this.#backward) {
      throw new Error(
        `${this.name}: backward through the graph a second time; its saved tensors were freed after the first backward (pass { retainGraph: true } to backward the first time)`,
      );
    }
    const backward = anomaly.wrap?.(this, this.#backward) ?? this.#backward;
    const outer = applying;
    applying = gradEnabled ? this : null; // createGraph: what it records needs this node's memory
    try {
      return asBackwardOf(this.name, this.recordedAt, () => backward(grads));
    } finally {
      applying = outer;
    }
  }

  /** @internal `node`, recorded by this node's backward, keeps this node's scope memory too. */
  lend(node: Node): void {
    for (const group of this.#groups) node.join(group.share());
  }

  /** False once released: backward can no longer run through it. */
  get live(): boolean {
    return this.#backward !== null;
  }

  /** The nodes that made this node's inputs. */
  *producers(): Iterable<Node> {
    for (const edge of this.edges) if (edge) yield edge.node;
  }

  /** @internal Frees a scope's memory with this node (see `tidy`). */
  join(group: ReleaseGroup): void {
    if (this.#backward) this.#groups.push(group);
    else group.nodeReleased();
  }

  /** Drops saved tensors; memory a scope left to the graph goes with its last node. */
  release(): void {
    this.#backward = null;
    this.inputs = [];
    this.edges = [];
    const groups = this.#groups;
    this.#groups = [];
    for (const group of groups) group.nodeReleased();
  }
}

/**
 * Attaches a node to freshly made outputs when grad mode is on and any input
 * requires grad. Returns the outputs.
 */
export function record<T extends Tensor | Tensor[]>(
  name: string,
  inputs: (Tensor | null)[],
  outputs: T,
  backward: BackwardFn,
): T {
  if (!gradEnabled || !inputs.some((t) => t?.requiresGrad)) return outputs;
  const list = Array.isArray(outputs) ? outputs : [outputs];
  const node = new Node(
    name,
    inputs.map((t) => (t?.requiresGrad ? t : null)),
    backward,
    list.map((t) => ({ shape: t.shape, dtype: t.dtype, device: t.device })),
  );
  list.forEach((t, i) => t._attach(node, i));
  noteNode(node);
  applying?.lend(node);
  return outputs;
}

/** Options of `Tensor.backward`. */
export interface BackwardOptions {
  /** Keep the graph so backward can run through it again (default: `createGraph`). */
  retainGraph?: boolean;
  /** Record the backward pass, so that the gradients are differentiable (higher-order gradients). */
  createGraph?: boolean;
}

/** Runs backward from `root` with `grad`, accumulating into leaves' `.grad`. */
export function runBackward(root: Tensor, grad: Tensor, options: BackwardOptions = {}): void {
  if (!root.requiresGrad) {
    throw new Error(
      "backward: the tensor does not require grad and has no grad_fn (was it made inside noGrad, or from tensors without requiresGrad?)",
    );
  }
  backwardPass([root], [grad], options, null);
}

/**
 * @internal The backward pass from `roots` seeded with `seeds`. Without
 * `inputs` it accumulates into leaves' `.grad`; with them it touches no
 * `.grad`, runs only the nodes on a path to an input, and returns the
 * gradient that reached each input (null where none did). With `createGraph`
 * the nodes run in grad mode, so the gradients get a graph of their own.
 */
export function backwardPass(
  roots: Tensor[],
  seeds: Tensor[],
  options: BackwardOptions,
  inputs: Tensor[] | null,
): (Tensor | null)[] {
  const create = options.createGraph ?? false;
  const retain = options.retainGraph ?? create;
  // Kahn's algorithm over the nodes reachable from the roots.
  const dependents = new Map<Node, number>();
  const stack = [...new Set(roots.flatMap((r) => (r.gradFn ? [r.gradFn] : [])))];
  for (const node of stack) dependents.set(node, 0);
  // Edges into each leaf, so a leaf's gradient is accumulated (and its hooks
  // run) as soon as its last contribution is in, while backward goes on.
  const leafEdges = new Map<Tensor, number>();
  const consumers = new Map<Node, Node[]>();
  while (stack.length > 0) {
    const node = stack.pop()!;
    for (const [i, input] of node.inputs.entries()) {
      const next = node.edges[i]?.node;
      if (!next) {
        if (input?.requiresGrad) leafEdges.set(input, (leafEdges.get(input) ?? 0) + 1);
        continue;
      }
      if (inputs) consumers.get(next)?.push(node) ?? consumers.set(next, [node]);
      const count = dependents.get(next);
      if (count === undefined) {
        dependents.set(next, 1);
        stack.push(next);
      } else dependents.set(next, count + 1);
    }
  }
  // With inputs, only the nodes with a path to one run (PyTorch's exec_info).
  const needed = inputs ? new Set<Node>() : null;
  const captureAt = new Map<Node, number[]>();
  inputs?.forEach((t, i) =>
    t.gradFn && captureAt.set(t.gradFn, [...(captureAt.get(t.gradFn) ?? []), i])
  );
  const wanted = inputs ? new Set(inputs) : null;
  if (needed) {
    const todo = [...captureAt.keys()].flatMap((n) => consumers.get(n) ?? []);
    for (const n of dependents.keys()) {
      // A freed node has lost its edges: an input may lie behind it, so it runs (and throws
      // "a second time") rather than the input being called unused.
      if (!n.live || n.inputs.some((t, i) => !n.edges[i] && wanted!.has(t!))) todo.push(n);
    }
    for (let node = todo.pop(); node; node = todo.pop()) {
      if (needed.has(node)) continue;
      needed.add(node);
      todo.push(...(consumers.get(node) ?? []));
    }
  }
  const captured: (Tensor | null)[] = inputs?.map(() => null) ?? [];
  const kept: Tensor[] = [];
  const leafGrads = new Map<Tensor, Tensor>();
  const engineSums = new Set<Tensor>();
  // How many gradient slots each storage was handed to in this pass: a
  // gradient made in this pass and handed to one leaf only can become its
  // .grad as it is (no copy); anything else may be shared.
  const uses = new Map<Storage, number>();
  const pending = new Map<Node, (Tensor | null)[]>();
  const addSlot = (node: Node, index: number, g: Tensor | null) => {
    const slots = pending.get(node) ?? node.outputs.map(() => null);
    const old = slots[index];
    if (g) slots[index] = old ? old.add(g) : g;
    pending.set(node, slots);
  };
  const addLeaf = (leaf: Tensor, g: Tensor) => {
    const old = leafGrads.get(leaf);
    const sum = old ? old.add(g) : g;
    if (old) engineSums.add(sum);
    leafGrads.set(leaf, sum);
  };
  return withCallbacks(() =>
    withGrad(create, "backward", () =>
      tidy(() => {
        roots.forEach((root, r) => {
          const node = root.gradFn;
          if (!node) {
            return inputs
              ? addLeaf(root, seeds[r])
              : kept.push(accumulateLeaf(root, seeds[r], false));
          }
          addSlot(node, root.outputIndex, seeds[r]);
        });
        const ready = [...pending.keys()].filter((n) => dependents.get(n) === 0);
        while (ready.length > 0) {
          const node = ready.pop()!;
          const outGrads = pending.get(node)!;
          pending.delete(node);
          for (const i of captureAt.get(node) ?? []) captured[i] = outGrads[inputs![i].outputIndex];
          const { inputs: nodeInputs, edges } = node;
          const run = !needed || needed.has(node); // a freed one throws
          // After the capture: hooks of autograd.grad's inputs do not change what it returns (1.13).
          if (node.hooks && run) {
            node.hooks.forEach((h, i) => outGrads[i] &&= runHooks(h, outGrads[i]!));
          }
          // No gradient reached this node (as PyTorch's undefined grads): it passes none on.
          const inGrads = run && outGrads.some((g) => g)
            ? node.apply(outGrads)
            : nodeInputs.map(() => null);
          if (inGrads.length !== nodeInputs.length) {
            throw new Error(
              `${node.name}: backward returned ${inGrads.length} gradients for ${nodeInputs.length} inputs`,
            );
          }
          for (const g of inGrads) if (g) uses.set(g.storage, (uses.get(g.storage) ?? 0) + 1);
          nodeInputs.forEach((input, i) => {
            const g = inGrads[i];
            if (!input) return;
            if (g) checkGrad(node.name, i, input, g);
            const next = edges[i]?.node;
            if (next) {
              if (g || !pending.has(next)) addSlot(next, edges[i]!.index, g);
              const left = dependents.get(next)! - 1;
              dependents.set(next, left);
              if (left === 0) ready.push(next);
            } else if (input.requiresGrad) {
              if (g && (!wanted || wanted.has(input))) addLeaf(input, g);
              const left = leafEdges.get(input)! - 1;
              leafEdges.set(input, left);
              const total = leafGrads.get(input);
              if (left === 0 && total && !inputs) {
                const own = engineSums.has(total) ||
                  (uses.get(total.storage) === 1 && madeInScope(total.storage));
                kept.push(accumulateLeaf(input, total, own));
              }
            }
          });
          if (!retain && run) node.release();
        }
        inputs?.forEach((t, i) => !t.gradFn && (captured[i] = leafGrads.get(t) ?? null));
        // Returned, so that the graph recorded behind them (createGraph) stays.
        return inputs ? captured : kept;
      }))
  );
}

function checkGrad(name: string, index: number, input: Tensor, g: Tensor): void {
  if (!sameShape(g.shape, input.shape)) {
    throw new Error(
      `${name}: backward gave input ${index} a gradient of shape ${
        formatShape(g.shape)
      }, expected ${formatShape(input.shape)}`,
    );
  }
  if (g.device !== input.device) {
    throw new Error(
      `${name}: backward gave input ${index} a gradient on ${g.device}, but the input is on ${input.device}`,
    );
  }
}

/**
 * @internal Adds this pass's gradient into a leaf's `.grad`, then runs the leaf's
 * post-accumulate hooks. A gradient the engine did not make itself
 * (`owned` false) may be shared (a user's tensor, or one passed to two
 * inputs), so the leaf gets its own copy.
 */
export function accumulateLeaf(leaf: Tensor, grad: Tensor, owned: boolean): Tensor {
  const g = runHooks(leafHooks.get(leaf), grad);
  const value = g.dtype === leaf.dtype ? g : g.to(leaf.dtype);
  // Under createGraph a new sum (PyTorch's), so the old .grad's graph is not rewritten.
  if (leaf.grad && gradEnabled) leaf.grad = leaf.grad.add(value);
  else if (leaf.grad) leaf.grad._assign(leaf.grad.add(value));
  else leaf.grad = owned && value === grad ? value : value.clone();
  for (const hook of postAccumulateHooks.get(leaf) ?? []) noGrad(() => void hook(leaf)); // as PyTorch
  return leaf.grad!;
}

/** Called with a leaf once a backward pass has added its gradient into `.grad`. */
export type PostAccumulateGradHook = (leaf: Tensor) => void;

const postAccumulateHooks = new WeakMap<Tensor, PostAccumulateGradHook[]>();

/**
 * Calls `hook(leaf)` every time a backward pass has accumulated `leaf`'s
 * gradient into `leaf.grad`, as soon as its last contribution is in (while
 * the rest of backward still runs), as PyTorch's
 * `register_post_accumulate_grad_hook`. A pass that gives the leaf no
 * gradient does not call it. Returns a function that removes the hook.
 */
export function registerPostAccumulateGradHook(
  leaf: Tensor,
  hook: PostAccumulateGradHook,
): () => void {
  if (!leaf.isLeaf || !leaf.requiresGrad) {
    throw new Error(
      `registerPostAccumulateGradHook: only leaves that require grad accumulate gradients; got ${leaf}`,
    );
  }
  const hooks = postAccumulateHooks.get(leaf) ?? [];
  hooks.push(hook);
  postAccumulateHooks.set(leaf, hooks);
  return () => {
    const at = hooks.indexOf(hook);
    if (at >= 0) hooks.splice(at, 1);
  };
}

/** Called with the gradient flowing into a tensor; a returned tensor replaces it. */
export type TensorHook = (grad: Tensor) => Tensor | void | null | undefined;

const leafHooks = new WeakMap<Tensor, TensorHook[]>();
const retaining = new WeakMap<Tensor, TensorHook>();

/**
 * @internal `Tensor.registerHook`. A non-leaf's hooks live on its node's output slot, so the
 * value an in-place op replaces keeps them (PyTorch 1.13); a leaf's run before accumulation.
 */
export function registerTensorHook(t: Tensor, hook: TensorHook): { remove(): void } {
  requireGrad(t, "registerHook: cannot register a hook on");
  const hooks = hooksOf(t);
  const entry: TensorHook = (g) => hook(g); // its own identity: one registration, one removal
  hooks.push(entry);
  return { remove: () => void (hooks.includes(entry) && hooks.splice(hooks.indexOf(entry), 1)) };
}

function hooksOf(t: Tensor): TensorHook[] {
  if (t.gradFn) return (t.gradFn.hooks ??= [])[t.outputIndex] ??= [];
  const hooks = leafHooks.get(t) ?? [];
  leafHooks.set(t, hooks);
  return hooks;
}

function runHooks(hooks: TensorHook[] | undefined, g: Tensor): Tensor {
  for (const hook of hooks ? [...hooks] : []) { // a copy: one removed in this pass still runs, as 1.13
    const out = hook(g);
    if (!out) continue;
    if (out instanceof Promise) throw new TypeError("registerHook: a hook returned a Promise");
    if (!sameShape(out.shape, g.shape) || out.dtype !== g.dtype || out.device !== g.device) {
      const what = (t: Tensor) => `${t.dtype} of shape ${formatShape(t.shape)} on ${t.device}`;
      throw new RangeError(`registerHook: a hook returned ${what(out)}, expected ${what(g)}`);
    }
    g = out;
  }
  return g;
}

/** @internal `Tensor.retainGrad`: a hook in registration order (1.13) holding the tensor weakly. */
export function retainGrad(t: Tensor): void {
  requireGrad(t, "retainGrad: can't retain the grad of");
  if (t.isLeaf || retaining.has(t)) return;
  const ref = new WeakRef(t);
  const entry: TensorHook = (g) => {
    const t = ref.deref(); // a new tensor (PyTorch's grad + new_grad), kept past the pass's tidy
    if (t) t.grad = keep(t.grad ? t.grad.add(g) : g.clone());
  };
  retaining.set(t, entry);
  hooksOf(t).push(entry);
}

/** @internal An in-place op gives `t` a new node: its retained grad follows (1.13), hooks stay. */
export function moveRetain(t: Tensor, to: Node, index: number): void {
  const entry = retaining.get(t), from = entry && hooksOf(t);
  if (!from?.includes(entry!)) return;
  from.splice(from.indexOf(entry!), 1);
  ((to.hooks ??= [])[index] ??= []).push(entry!);
}

function requireGrad(t: Tensor, what: string): void {
  if (!t.requiresGrad) throw new Error(`${what} a tensor that doesn't require gradient (${t})`);
}

/** @internal `Tensor.retainsGrad`. */
export const retainsGrad = (t: Tensor): boolean => retaining.has(t);

// Callbacks queued by the backward passes running now (innermost last).
const backwardCallbacks: (() => void)[][] = [];

/**
 * Runs `fn` once the backward pass that is running now has finished (every
 * leaf accumulated), before `backward()` returns, as PyTorch's
 * `queue_callback`. Only callable from inside backward (a hook or a
 * backward function). A pass that throws drops its callbacks.
 */
export function queueBackwardCallback(fn: () => void): void {
  const queue = backwardCallbacks.at(-1);
  if (!queue) {
    throw new Error(
      "queueBackwardCallback: no backward pass is running (call it from a hook or a backward function)",
    );
  }
  queue.push(fn);
}

function withCallbacks<T>(pass: () => T): T {
  const queue: (() => void)[] = [];
  backwardCallbacks.push(queue);
  try {
    const out = pass();
    // A callback may queue another one for the same pass.
    for (let i = 0; i < queue.length; i++) noGrad(() => void queue[i]()); // grad off, as hooks
    return out;
  } finally {
    backwardCallbacks.pop();
  }
}

/**
 * Clears the gradients of `params` as `zeroGrad` documents: to null (freed)
 * with `setToNone`, else to zeros in place. Shared by modules and optimizers.
 */
export function zeroGrads(params: Iterable<Tensor>, setToNone: boolean): void {
  const seen = new Set<Tensor>();
  for (const p of params) {
    if (seen.has(p)) continue;
    seen.add(p);
    const grad = p.grad;
    if (!grad) continue;
    if (setToNone) {
      p.grad = null;
      grad.dispose();
    } else if (!grad.storage.disposed) {
      // A gradient made under createGraph loses its history (PyTorch's detach_), else the
      // next createGraph backward would add onto it and the graph grow step after step.
      const zeroed = grad.requiresGrad ? (p.grad = grad.detach()) : grad;
      tidy(() => noGrad(() => zeroed._assign(zeroed.zerosLike())));
    }
  }
}
