/**
 * `torch.nn.utils.stateless` (PyTorch 1.13; `torch.func.functional_call` in
 * 2.x): a module's forward run with other tensors in place of its
 * parameters and buffers.
 * @module
 */

import { Tensor } from "../../tensor.ts";
import { Module } from "../module.ts";
import { _parametrizedField } from "./parametrize.ts";

/** Options of {@link functionalCall}. */
export interface FunctionalCallOptions {
  /**
   * Require the names to be exactly the module's parameters and buffers (PyTorch 2.0's
   * `strict`), a tied tensor under each of its names (those {@link tieWeights} fills in
   * count): a missing or an unexpected name throws, naming them all. Default false: any
   * subset, and a name the module does not have is set as an attribute for the call (as
   * PyTorch 1.13).
   */
  strict?: boolean;
  /**
   * Give a tensor shared by several names (tied weights) to every one of them when it is given
   * under one (PyTorch 2.0's `tie_weights`); two different values for tied names then throw.
   * Default false: only the names given are replaced, as PyTorch 1.13.
   */
  tieWeights?: boolean;
}

type Fields = Record<string, unknown>;

function kindOf(value: unknown): string {
  if (value === null) return "null";
  return typeof value === "object" ? (value as object).constructor.name : typeof value;
}

/** The field of `m` that `name` (a field, or a buffer's state-dict name) names. */
function fieldOf(m: Module, name: string): string {
  if (Object.hasOwn(m, name) || name in m) return name;
  const parametrized = _parametrizedField(m, name);
  if (parametrized !== undefined) return parametrized;
  const buffer = m.namedBuffers("", false).find(([n]) => n === name)?.[1];
  const fields = m as unknown as Fields;
  return (buffer && Object.keys(m).find((k) => fields[k] === buffer)) ?? name;
}

/**
 * Every name of every parameter and buffer, a tied tensor or a shared submodule under each of
 * its names (PyTorch's `named_tensors(remove_duplicate=False)`, which `strict` checks against).
 */
function allNames(module: Module): string[] {
  const out: string[] = [];
  const path = new Set<Module>();
  const visit = (m: Module, prefix: string) => {
    if (path.has(m)) return;
    path.add(m);
    for (const [n] of m.namedParameters("", false)) out.push(prefix + n);
    for (const [n] of m.namedBuffers("", false)) out.push(prefix + n);
    for (const [n, child] of m.namedChildren()) visit(child, `${prefix}${n}.`);
    path.delete(m);
  };
  visit(module, "");
  return out;
}

function checkStrict(module: Module, names: string[]): void {
  const expected = new Set(allNames(module));
  const given = new Set(names);
  const unexpected = [...given].filter((n) => !expected.has(n)).sort();
  const missing = [...expected].filter((n) => !given.has(n)).sort();
  const lines = [
    ...unexpected.length > 0
      ? [`Unexpected key(s): ${unexpected.map((n) => `'${n}'`).join(", ")}.`]
      : [],
    ...missing.length > 0 ? [`Missing key(s): ${missing.map((n) => `'${n}'`).join(", ")}.`] : [],
  ];
  if (lines.length > 0) {
    throw new RangeError(
      `Error(s) in reparametrizing for ${module.constructor.name}:\n\t${lines.join("\n\t")}`,
    );
  }
}

/** Adds to `values` every name that shares its tensor with a name given (tied weights). */
function tie(module: Module, values: Map<string, unknown>): void {
  const all = module.stateDict({ keepVars: true });
  for (const t of module.namedParameters().map(([, p]) => p as Tensor).concat(module.buffers())) {
    const names = Object.keys(all).filter((k) => all[k] === t);
    if (names.length < 2) continue;
    const given = names.filter((n) => values.has(n));
    if (given.length === 0) continue;
    const value = values.get(given[0]);
    if (given.some((n) => values.get(n) !== value)) {
      throw new RangeError(
        `functionalCall got multiple values for keys ${
          given.map((n) => `'${n}'`).join(", ")
        }, which are tied. Consider using tieWeights: false`,
      );
    }
    for (const n of names) if (!values.has(n)) values.set(n, value);
  }
}

/**
 * Runs `module.forward(...args)` with the tensors of `parametersAndBuffers` (by dotted
 * state-dict name: `"fc.weight"`, `"bn.running_mean"`, or a parametrized tensor's name such as
 * `"weight"` or `"parametrizations.weight.original"`) in place of the module's own, as PyTorch
 * 1.13's `torch.nn.utils.stateless.functional_call` (`torch.func.functional_call` in 2.x), and
 * returns its result. The module's own tensors are put back afterwards, also when forward
 * throws. Gradients flow to the given tensors, not to the module's parameters, so that
 * `autograd.grad`, `autograd.functional.jacobian` and the like can differentiate with respect
 * to a dict of parameters. `args` is an array of the forward's arguments, or its single
 * argument (wrap an array argument in one more array). A module reachable under two names (a
 * shared submodule) sees a tensor given under either; a tensor shared by two modules is
 * replaced only under the names given, as PyTorch 1.13 (`tieWeights` gives it to every name, as
 * PyTorch 2.0's default). Assignments forward makes to a
 * replaced name go to the given tensors' entries, as PyTorch's.
 */
export function functionalCall<M extends Module>(
  module: M,
  parametersAndBuffers: Record<string, Tensor> | Map<string, Tensor>,
  args: unknown = [],
  options: FunctionalCallOptions = {},
): ReturnType<M["forward"]> {
  const op = "functionalCall";
  if (!(module instanceof Module)) {
    throw new TypeError(`${op}: module must be an nn.Module, got ${kindOf(module)}`);
  }
  if (parametersAndBuffers === null || typeof parametersAndBuffers !== "object") {
    throw new TypeError(
      `${op}: parametersAndBuffers must be an object of tensors, got ${
        kindOf(parametersAndBuffers)
      }`,
    );
  }
  const values = new Map<string, unknown>(
    parametersAndBuffers instanceof Map
      ? parametersAndBuffers
      : Object.entries(parametersAndBuffers),
  );
  for (const [name, t] of values) {
    if (!(t instanceof Tensor)) {
      throw new TypeError(`${op}: the value for "${name}" must be a Tensor, got ${kindOf(t)}`);
    }
  }
  if (options.tieWeights) tie(module, values);
  if (options.strict) checkStrict(module, [...values.keys()]);
  const restores: (() => void)[] = [];
  try {
    for (const name of values.keys()) {
      const parts = name.split(".");
      let m: Module = module;
      for (const part of parts.slice(0, -1)) {
        const child = (m as unknown as Fields)[part];
        if (!(child instanceof Module)) {
          throw new RangeError(
            `${op}: '${m.constructor.name}' object has no submodule '${part}' (in "${name}")`,
          );
        }
        m = child;
      }
      const field = fieldOf(m, parts.at(-1)!);
      const owner = m;
      const before = Object.getOwnPropertyDescriptor(owner, field);
      Object.defineProperty(owner, field, {
        configurable: true,
        enumerable: before?.enumerable ?? false,
        get: () => values.get(name),
        set: (next: unknown) => void values.set(name, next),
      });
      restores.push(() => {
        if (before) Object.defineProperty(owner, field, before);
        else delete (owner as unknown as Fields)[field];
      });
    }
    const spread = Array.isArray(args) ? args : [args];
    return (module as unknown as { forward: (...a: unknown[]) => ReturnType<M["forward"]> })
      .forward(...spread);
  } finally {
    for (const restore of restores.reverse()) restore();
  }
}
