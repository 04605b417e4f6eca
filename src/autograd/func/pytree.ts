/**
 * The pytrees of the `func` transforms: arrays and plain objects nest, anything else (a
 * Tensor, a number, null) is a leaf, as functorch's tuples, lists and dicts.
 * @module
 */

import { Tensor } from "../../tensor.ts";

/** A tensor, or arrays and plain objects of them, nested (functorch's pytree). */
export type PyTree = Tensor | readonly PyTree[] | { readonly [key: string]: PyTree };

/**
 * A function a transform takes: whatever arguments it declares (`never[]` admits any
 * parameter list without `any`), pytrees of tensors (or `[output, aux]`) out.
 */
export type UserFn = (...args: never[]) => unknown;

/** How a pytree nests, without its leaves. */
export type Spec =
  | { kind: "leaf" }
  | { kind: "array"; children: Spec[] }
  | { kind: "object"; keys: string[]; children: Spec[] };

/** A plain object (not a Tensor, class instance or array): a pytree node. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** The leaves of `tree`, in order, and its structure. */
export function flatten(tree: unknown): { leaves: unknown[]; spec: Spec } {
  const leaves: unknown[] = [];
  const walk = (node: unknown): Spec => {
    if (Array.isArray(node)) return { kind: "array", children: node.map(walk) };
    if (isPlainObject(node)) {
      const keys = Object.keys(node);
      return { kind: "object", keys, children: keys.map((k) => walk(node[k])) };
    }
    leaves.push(node);
    return { kind: "leaf" };
  };
  return { leaves, spec: walk(tree) };
}

/** The tree of structure `spec` with `leaves` in order. */
export function unflatten(spec: Spec, leaves: readonly unknown[]): unknown {
  let i = 0;
  const build = (s: Spec): unknown => {
    if (s.kind === "leaf") return leaves[i++];
    const children = s.children.map(build);
    if (s.kind === "array") return children;
    return Object.fromEntries(s.keys.map((k, j) => [k, children[j]]));
  };
  return build(spec);
}

/** How many leaves a tree of structure `spec` has. */
export function countLeaves(spec: Spec): number {
  return spec.kind === "leaf" ? 1 : spec.children.reduce((n, c) => n + countLeaves(c), 0);
}

/** functorch's way of printing a structure: `*` a leaf, `[..]` an array, `{k: ..}` an object. */
export function formatSpec(spec: Spec): string {
  if (spec.kind === "leaf") return "*";
  if (spec.kind === "array") return `[${spec.children.map(formatSpec).join(", ")}]`;
  return `{${spec.keys.map((k, i) => `${k}: ${formatSpec(spec.children[i])}`).join(", ")}}`;
}

/** Whether two structures are the same. */
export function sameSpec(a: Spec, b: Spec): boolean {
  return formatSpec(a) === formatSpec(b);
}

/**
 * `prefix` (a leaf applying to everything under it, or arrays and objects that follow
 * `spec`) spread to one value per leaf of `spec`; null where it does not fit.
 */
export function broadcastPrefix(prefix: unknown, spec: Spec): unknown[] | null {
  const out: unknown[] = [];
  const fill = (p: unknown, s: Spec): number => {
    if (s.kind === "leaf") return out.push(p);
    return s.children.reduce((n, c) => n + fill(p, c), 0);
  };
  const walk = (p: unknown, s: Spec): boolean => {
    if (!Array.isArray(p) && !isPlainObject(p)) return fill(p, s) >= 0;
    if (s.kind === "leaf") return false;
    if (Array.isArray(p)) {
      if (s.kind !== "array" || p.length !== s.children.length) return false;
      return p.every((c, i) => walk(c, s.children[i]));
    }
    const keys = Object.keys(p);
    if (s.kind !== "object" || keys.length !== s.keys.length) return false;
    return s.keys.every((k, i) => Object.hasOwn(p, k) && walk(p[k], s.children[i]));
  };
  return walk(prefix, spec) ? out : null;
}

/** A value's kind, for messages. */
export function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (value instanceof Tensor) return `Tensor of shape [${value.shape.join(", ")}]`;
  if (typeof value === "object") return (value as object).constructor?.name ?? "object";
  return typeof value;
}

/**
 * `fn(...args)`, refusing a Promise: the transforms differentiate and stack what `fn` returns
 * synchronously, and an async `fn` (one that awaits `item()` or `toArray()`, which functorch's
 * vmap refuses as `.item()`) would run on after the transform returned, its errors unhandled.
 */
export function callSync(fn: UserFn, args: readonly unknown[], op: string): unknown {
  const out = (fn as (...a: readonly unknown[]) => unknown)(...args);
  if (out !== null && typeof (out as { then?: unknown })?.then === "function") {
    // Its rejection is this error's consequence, not a second one to report.
    (out as Promise<unknown>).then(undefined, () => {});
    throw new TypeError(
      `${op}: the function returned a Promise; the func transforms call it synchronously, so it cannot await (reading values with item() or toArray() inside a transform is not supported: use tensor ops)`,
    );
  }
  return out;
}
