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
import { asBackwardOf, madeInScope, noteNode, now, type Storage, tidy } from "./storage.ts";

let gradEnabled = true;

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
  #groups: { nodeReleased(): void }[] = [];
  /** When it was recorded: memory changed in place later must not be read by its backward. */
  readonly recordedAt: number = now();

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
    const backward = this.#backward;
    return asBackwardOf(this.name, this.recordedAt, () => backward(grads));
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
  join(group: { nodeReleased(): void }): void {
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
  return outputs;
}

/** Options of `Tensor.backward`. */
export interface BackwardOptions {
  /** Keep the graph so backward can run through it again. */
  retainGraph?: boolean;
}

/** Runs backward from `root` with `grad`, accumulating into leaves' `.grad`. */
export function runBackward(
  root: Tensor,
  grad: Tensor,
  options: BackwardOptions = {},
): void {
  const rootNode = root.gradFn;
  if (!rootNode) {
    if (root.requiresGrad) {
      withCallbacks(() => accumulateLeaf(root, grad, false));
      return;
    }
    throw new Error(
      "backward: the tensor does not require grad and has no grad_fn (was it made inside noGrad, or from tensors without requiresGrad?)",
    );
  }
  // Kahn's algorithm over the nodes reachable from the root.
  const dependents = new Map<Node, number>();
  const stack = [rootNode];
  dependents.set(rootNode, 0);
  // Edges into each leaf, so a leaf's gradient is accumulated (and its hooks
  // run) as soon as its last contribution is in, while backward goes on.
  const leafEdges = new Map<Tensor, number>();
  while (stack.length > 0) {
    const node = stack.pop()!;
    for (const [i, input] of node.inputs.entries()) {
      const next = node.edges[i]?.node;
      if (!next) {
        if (input?.requiresGrad) leafEdges.set(input, (leafEdges.get(input) ?? 0) + 1);
        continue;
      }
      const count = dependents.get(next);
      if (count === undefined) {
        dependents.set(next, 1);
        stack.push(next);
      } else dependents.set(next, count + 1);
    }
  }
  const leafGrads = new Map<Tensor, Tensor>();
  const engineSums = new Set<Tensor>();
  // How many gradient slots each storage was handed to in this pass: a
  // gradient made in this pass and handed to one leaf only can become its
  // .grad as it is (no copy); anything else may be shared.
  const uses = new Map<Storage, number>();
  withCallbacks(() =>
    tidy(() => {
      const pending = new Map<Node, (Tensor | null)[]>();
      pending.set(rootNode, rootNode.outputs.map((_, i) => (i === root.outputIndex ? grad : null)));
      const ready = [rootNode];
      while (ready.length > 0) {
        const node = ready.pop()!;
        const outGrads = pending.get(node)!;
        pending.delete(node);
        const { inputs, edges } = node;
        // No gradient reached this node (as PyTorch's undefined grads): it passes none on.
        const inGrads = outGrads.some((g) => g)
          ? noGrad(() => node.apply(outGrads))
          : inputs.map(() => null);
        if (inGrads.length !== inputs.length) {
          throw new Error(
            `${node.name}: backward returned ${inGrads.length} gradients for ${inputs.length} inputs`,
          );
        }
        for (const g of inGrads) if (g) uses.set(g.storage, (uses.get(g.storage) ?? 0) + 1);
        inputs.forEach((input, i) => {
          const g = inGrads[i];
          if (!input) return;
          if (g) checkGrad(node.name, i, input, g);
          const next = edges[i]?.node;
          if (next) {
            if (g) {
              const slots = pending.get(next) ?? next.outputs.map(() => null);
              const old = slots[edges[i]!.index];
              slots[edges[i]!.index] = old ? old.add(g) : g;
              pending.set(next, slots);
            } else if (!pending.has(next)) pending.set(next, next.outputs.map(() => null));
            const left = dependents.get(next)! - 1;
            dependents.set(next, left);
            if (left === 0) ready.push(next);
          } else if (input.requiresGrad) {
            const old = leafGrads.get(input);
            if (g && old) {
              const sum = old.add(g);
              engineSums.add(sum);
              leafGrads.set(input, sum);
            } else if (g) leafGrads.set(input, g);
            const left = leafEdges.get(input)! - 1;
            leafEdges.set(input, left);
            const total = leafGrads.get(input);
            if (left === 0 && total) {
              const own = engineSums.has(total) ||
                (uses.get(total.storage) === 1 && madeInScope(total.storage));
              accumulateLeaf(input, total, own);
            }
          }
        });
        if (!options.retainGraph) node.release();
      }
    })
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
 * Adds this pass's gradient into a leaf's `.grad`, then runs the leaf's
 * post-accumulate hooks. A gradient the engine did not make itself
 * (`owned` false) may be shared (a user's tensor, or one passed to two
 * inputs), so the leaf gets its own copy.
 */
function accumulateLeaf(leaf: Tensor, g: Tensor, owned: boolean): void {
  const value = g.dtype === leaf.dtype ? g : g.to(leaf.dtype);
  if (leaf.grad) leaf.grad._assign(leaf.grad.add(value));
  else leaf.grad = owned && value === g ? value : value.clone();
  for (const hook of postAccumulateHooks.get(leaf) ?? []) noGrad(() => void hook(leaf)); // as PyTorch
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

function withCallbacks(pass: () => void): void {
  const queue: (() => void)[] = [];
  backwardCallbacks.push(queue);
  try {
    pass();
    // A callback may queue another one for the same pass.
    for (let i = 0; i < queue.length; i++) noGrad(() => void queue[i]()); // grad off, as hooks
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
      tidy(() => noGrad(() => grad._assign(grad.zerosLike())));
    }
  }
}
