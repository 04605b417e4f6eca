/**
 * The order a module's fields were added in, where `Object.keys` differs from it (internal: not
 * exported from `nn`). JavaScript lists integer-like keys first, in numeric order; a `ModuleDict`'s
 * keys keep the order they were added in, as PyTorch's, so its parameters, state dict and repr do.
 * @module
 */

const fieldOrder = new WeakMap<object, string[]>();

/** Records that `key` was added to `owner`. */
export function recordFieldOrder(owner: object, key: string): void {
  let order = fieldOrder.get(owner);
  if (!order) fieldOrder.set(owner, order = []);
  if (!order.includes(key)) order.push(key);
}

/** Gives `copy` the recorded order of `original` (a replica made without its constructor). */
export function copyFieldOrder(original: object, copy: object): void {
  const order = fieldOrder.get(original);
  if (order) fieldOrder.set(copy, [...order]);
}

/** `owner`'s own enumerable keys: unrecorded ones first as `Object.keys` gives them, then recorded ones in order. */
export function orderedKeys(owner: object): string[] {
  const keys = Object.keys(owner);
  const order = fieldOrder.get(owner);
  if (!order) return keys;
  const rank = (k: string) => order.indexOf(k);
  return keys.sort((a, b) => rank(a) - rank(b)); // stable: unrecorded keys (-1) keep their order
}

/** Forgets that `key` was added to `owner` (it was deleted: added again, it goes last). */
export function forgetFieldOrder(owner: object, key: string): void {
  const order = fieldOrder.get(owner);
  const at = order?.indexOf(key) ?? -1;
  if (at >= 0) order!.splice(at, 1);
}
