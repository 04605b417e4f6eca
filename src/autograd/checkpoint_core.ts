/**
 * The mechanism of activation checkpointing (PyTorch's
 * `torch.utils.checkpoint` and the checkpoints of GPipe's `Pipe`): a forward
 * run without a graph on one node whose backward runs it again in grad mode
 * and differentiates that. Internal: the public functions are in
 * `checkpoint.ts`; `Pipe` uses {@link runCheckpoint} with its partition's
 * parameters.
 * @module
 */

import {
  accumulateLeaf,
  backwardPass,
  enableGrad,
  isGradEnabled,
  type Node,
  noGrad,
  record,
} from "../autograd.ts";
import { getRngState, type RngState, setRngState, zeros } from "../ops/factory.ts";
import { keep, tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";

/** Options of a checkpoint (PyTorch's keyword arguments). */
export interface CheckpointOptions {
  /**
   * PyTorch's `use_reentrant` (default true, as 1.13): backward of the
   * recomputed graph accumulates into every leaf it reaches, so it refuses
   * `autograd.grad` and `autograd.backward`'s `inputs`. False: those work,
   * differentiating only the tensor arguments.
   */
  useReentrant?: boolean;
  /** Restore the random generator before the recomputation, so dropout draws the same mask (default true). */
  preserveRngState?: boolean;
}

let recomputingDepth = 0;
let inputsPassDepth = 0;

/** @internal Whether a checkpoint's forward is being recomputed in backward (PyTorch's `is_recomputing`). */
export const isRecomputing = (): boolean => recomputingDepth > 0;

/**
 * @internal Runs `fn` (a backward pass that returns gradients of chosen
 * inputs rather than accumulating into leaves: `autograd.grad`,
 * `autograd.backward` with `inputs`), so that a reentrant checkpoint can
 * refuse it.
 */
export function inputsPass<T>(fn: () => T): T {
  inputsPassDepth++;
  try {
    return fn();
  } finally {
    inputsPassDepth--;
  }
}

// The node's input when no tensor argument requires grad: the parameters inside `fn` are known
// only when it is recomputed, and without an input requiring grad no node would be recorded.
let phonyLeaf: Tensor | null = null;
// Kept: made inside some caller's tidy, it outlives it. Never read: its gradient is always null.
const phony = (): Tensor => (phonyLeaf ??= keep(zeros([]).requiresGrad_()));

/** @internal What {@link runCheckpoint} is told beyond the public options. */
export interface CheckpointInternals {
  /** The leaves `fn` uses, made the node's inputs (their gradients go through the engine). */
  params?: readonly Tensor[];
  /** Called before each recomputation; what it returns is called after it. */
  beforeRecompute?: () => () => void;
}

type Output = Tensor | Tensor[];

function outputsOf(op: string, out: unknown): Tensor[] {
  if (out instanceof Tensor) return [out];
  if (Array.isArray(out) && out.length > 0 && out.every((t) => t instanceof Tensor)) return out;
  throw new TypeError(
    `${op}: the function must return a Tensor or a non-empty array of Tensors, got ${
      Array.isArray(out)
        ? `an array of ${out.map((t) => t?.constructor?.name ?? typeof t).join(", ")}`
        : out === null
        ? "null"
        : typeof out
    }`,
  );
}

/**
 * @internal `fn(...args)` without keeping its activations: only `args` are
 * saved, and backward runs `fn` again in grad mode (the random generator as
 * it was) and differentiates that, with a graph when backward has
 * `createGraph`. Without `params`, the leaves reached by the recomputed
 * graph get their gradients by accumulation (reentrant, or a plain
 * backward), or only the tensor arguments are differentiated
 * (non-reentrant inside `autograd.grad`).
 */
export function runCheckpoint<A extends unknown[], R extends Output>(
  op: string,
  fn: (...args: A) => R,
  args: A,
  options: CheckpointOptions = {},
  internals: CheckpointInternals = {},
): R {
  if (typeof fn !== "function") throw new TypeError(`${op}: expected a function, got ${typeof fn}`);
  const reentrant = options.useReentrant ?? true;
  const preserve = options.preserveRngState ?? true;
  const rng: RngState | null = preserve ? getRngState() : null;
  // In a scope of its own: what fn makes besides its outputs is freed now (the point of it).
  const out = tidy(() => noGrad(() => fn(...args)));
  const outs = outputsOf(op, out);
  if (!isGradEnabled()) return out;
  const tensors = args.filter((a): a is Tensor => a instanceof Tensor);
  const params = internals.params ?? [];
  // An argument given back as an output gets a new tensor object: the node must not take it over.
  const aliased = outs.map((t) => (tensors.includes(t) ? t.detach() : t));
  const result = (Array.isArray(out) ? aliased : aliased[0]) as R;
  const needsPhony = !internals.params && !tensors.some((t) => t.requiresGrad);
  const inputs = [...tensors, ...params, ...(needsPhony ? [phony()] : [])];
  return record("CheckpointBackward", inputs, result, (grads) => {
    const selective = inputsPassDepth > 0;
    if (selective && reentrant && !internals.params) {
      throw new Error(
        `${op}: the reentrant variant (useReentrant true, the default) is not compatible with autograd.grad or autograd.backward's inputs option, as in PyTorch; pass { useReentrant: false }`,
      );
    }
    const createGraph = isGradEnabled();
    const outerRng = getRngState();
    const restore = internals.beforeRecompute?.();
    if (rng !== null) setRngState(rng);
    recomputingDepth++;
    // In a scope of its own: the recomputed activations are freed as soon as this node's
    // gradients are made, not at the end of the whole backward pass.
    try {
      return tidy(() => recomputeBackward());
    } finally {
      recomputingDepth--;
      setRngState(outerRng);
      restore?.();
    }

    function recomputeBackward(): (Tensor | null)[] {
      // Each tensor argument enters the recomputation through an identity node whose input is
      // the argument itself: the gradients are captured there, and their graph (createGraph)
      // reaches the argument, so a second derivative flows on to it.
      const aliases = new Map<Tensor, Tensor>();
      const again = outputsOf(
        op,
        enableGrad(() => {
          const recomputed = args.map((a) => {
            if (!(a instanceof Tensor)) return a;
            const alias = aliases.get(a) ??
              (a.requiresGrad
                ? record("CheckpointInput", [a], a.detach(), ([g]) => [g])
                : a.detach());
            aliases.set(a, alias);
            return alias;
          }) as A;
          return fn(...recomputed);
        }),
      );
      if (again.length !== outs.length) {
        throw new Error(
          `${op}: the recomputation returned ${again.length} outputs, the forward ${outs.length}`,
        );
      }
      const roots: Tensor[] = [];
      const seeds: Tensor[] = [];
      again.forEach((t, i) => {
        if (grads[i] && t.requiresGrad) [roots.push(t), seeds.push(grads[i]!)];
      });
      const none = inputs.map(() => null);
      if (roots.length === 0) return none;
      const own = inputs.filter((t) => t.requiresGrad && t !== phonyLeaf);
      // The leaves inside fn: the given parameters, or (reentrant, or a plain backward) every
      // leaf the recomputed graph reaches short of the arguments.
      const inner = internals.params ? [] : selective ? [] : leavesOf(roots, aliases);
      const wanted = [...new Set([...own.map((t) => aliases.get(t) ?? t), ...inner])];
      if (wanted.length === 0) return none;
      const found = backwardPass(roots, seeds, { createGraph }, wanted);
      if (inner.length > 0) {
        // As PyTorch's reentrant backward: the leaves inside fn accumulate their gradients now,
        // in the pass's grad mode; kept, so the enclosing pass's scope does not free the graph
        // behind them (createGraph).
        inner.forEach((leaf) => {
          const g = found[wanted.indexOf(leaf)];
          if (g) keep(accumulateLeaf(leaf, g, false));
        });
      }
      // A tensor passed twice has one total gradient: its first slot takes it all.
      return inputs.map((t, i) =>
        t !== phonyLeaf && t.requiresGrad && inputs.indexOf(t) === i
          ? found[wanted.indexOf(aliases.get(t) ?? t)]
          : null
      );
    }
  });
}

/** The leaves requiring grad that the graph of `roots` reaches, not going past the arguments' aliases. */
function leavesOf(roots: readonly Tensor[], aliases: Map<Tensor, Tensor>): Tensor[] {
  const stops = new Set([...aliases.values()].map((t) => t.gradFn));
  const leaves = new Set<Tensor>(roots.filter((t) => !t.gradFn && t.requiresGrad));
  const seen = new Set<Node>();
  const todo = roots.flatMap((t) => (t.gradFn && !stops.has(t.gradFn) ? [t.gradFn] : []));
  for (let node = todo.pop(); node; node = todo.pop()) {
    if (seen.has(node)) continue;
    seen.add(node);
    node.inputs.forEach((t, i) => {
      const next = node!.edges[i]?.node;
      if (next) {
        if (!stops.has(next)) todo.push(next);
      } else if (t?.requiresGrad) leaves.add(t);
    });
  }
  return [...leaves];
}
