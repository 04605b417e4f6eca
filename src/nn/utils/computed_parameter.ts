/**
 * The prototype mechanism shared by weightNorm and spectralNorm: a parameter
 * replaced by a getter on a fresh prototype inserted above the module, which
 * holds the reparametrisation's spec under a symbol. Internal: not
 * re-exported from nn.utils.
 * @module
 */

import { Tensor } from "../../tensor.ts";
import { Module, Parameter } from "../module.ts";

/** Refuses anything but a Module, naming what was given. */
export function checkModule(op: string, module: unknown): void {
  if (!(module instanceof Module)) {
    throw new TypeError(
      `${op}: expected an nn.Module, got ${module === null ? "null" : typeof module}`,
    );
  }
}

/** Refuses a `name` that cannot be a parameter's own name. */
export function checkParameterName(op: string, name: unknown): asserts name is string {
  if (typeof name !== "string" || name === "" || name.includes(".")) {
    throw new TypeError(`${op}: name must be a parameter's name, got ${JSON.stringify(name)}`);
  }
}

/** Refuses a `weight` (read as `module[name]`) that is not a Parameter held by `module` itself. */
export function checkOwnParameter(
  op: string,
  module: Module,
  name: string,
  weight: unknown,
): asserts weight is Parameter {
  if (!(weight instanceof Parameter) || !Object.hasOwn(module, name)) {
    throw new TypeError(
      `${op}: ${module.constructor.name} has no parameter "${name}" (it holds ${
        weight instanceof Tensor ? "a Tensor that is not a Parameter" : typeof weight
      })`,
    );
  }
}

/** The specs under `key` on `m`'s prototype chain, nearest first, with the prototype holding each. */
export function specsOf<S>(m: Module, key: symbol): { proto: object; spec: S }[] {
  const out: { proto: object; spec: S }[] = [];
  let proto = Object.getPrototypeOf(m) as object | null;
  while (proto && proto !== Module.prototype) {
    if (Object.hasOwn(proto, key)) {
      out.push({ proto, spec: (proto as Record<symbol, S>)[key] });
    }
    proto = Object.getPrototypeOf(proto);
  }
  return out;
}

/**
 * Makes `module[name]` read `compute(module)` through a new prototype that
 * also holds `spec` under `key`; assigning to it throws `setError(module)`.
 */
export function installComputed<S>(
  module: Module,
  key: symbol,
  name: string,
  spec: S,
  compute: (m: Module) => Tensor,
  setError: (m: Module) => string,
): void {
  const proto = Object.create(Object.getPrototypeOf(module));
  Object.defineProperty(proto, name, {
    configurable: true,
    enumerable: false,
    get(this: Module): Tensor {
      return compute(this);
    },
    set(this: Module): void {
      throw new TypeError(setError(this));
    },
  });
  Object.defineProperty(proto, key, { value: spec });
  Object.setPrototypeOf(module, proto);
}

/**
 * Takes `proto` out of `module`'s prototype chain. The prototypes nearer than
 * it (other weight or spectral norms) are rebuilt for this module alone:
 * copies made by `_replicateWith` (replicas, a TransformerEncoder's layers)
 * share them, and keep their getters.
 */
export function uninstallComputed(module: Module, proto: object): void {
  const nearer: object[] = [];
  for (let p = Object.getPrototypeOf(module) as object; p !== proto; p = Object.getPrototypeOf(p)) {
    nearer.push(p);
  }
  let base = Object.getPrototypeOf(proto) as object;
  for (const p of nearer.reverse()) {
    base = Object.create(base, Object.getOwnPropertyDescriptors(p));
  }
  Object.setPrototypeOf(module, base);
}
