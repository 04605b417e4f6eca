/**
 * `transferParametrizationsAndParams`, as PyTorch's
 * `torch.nn.utils.parametrize.transfer_parametrizations_and_params`.
 * @module
 */

import type { ModuleDict } from "../layers.ts";
import { Module, Parameter } from "../module.ts";
import { Tensor } from "../../tensor.ts";
import {
  isParametrized,
  type ParametrizationList,
  registerParametrization,
} from "./parametrize.ts";

type Fields = Record<string, unknown>;

/**
 * Moves the parametrizations of `fromModule` (all of them, or only that of
 * `tensorName`) onto `toModule`, as PyTorch's
 * `transfer_parametrizations_and_params`: a tensor `toModule` lacks is
 * first created as a Parameter holding `fromModule`'s parametrized value;
 * the parametrization modules are then registered on `toModule` (the same
 * objects, shared) and `toModule`'s `original` (or `original0`, ...) become
 * `fromModule`'s, the same Parameters. Does nothing when `fromModule` is not
 * parametrized. Returns `toModule`.
 */
export function transferParametrizationsAndParams<M extends Module>(
  fromModule: Module,
  toModule: M,
  tensorName?: string,
): M {
  const op = "transferParametrizationsAndParams";
  for (const [what, m] of [["fromModule", fromModule], ["toModule", toModule]] as const) {
    if (!(m instanceof Module)) throw new TypeError(`${op}: ${what} must be an nn.Module`);
  }
  if (!isParametrized(fromModule)) return toModule;
  const dict = (fromModule as unknown as Fields).parametrizations as ModuleDict;
  const names = tensorName === undefined ? dict.keys() : [tensorName];
  for (const name of names) {
    if (!dict.has(name)) {
      throw new RangeError(
        `${op}: fromModule has no parametrization on "${name}" (it has: ${dict.keys().join(", ")})`,
      );
    }
    const from = dict.get(name) as ParametrizationList;
    const fields = toModule as unknown as Fields;
    if (!(name in fields) || !(fields[name] instanceof Tensor)) {
      const value = (fromModule as unknown as Fields)[name] as Tensor;
      toModule.registerParameter(name, new Parameter(value.detach().clone()));
    }
    for (const parametrization of from) registerParametrization(toModule, name, parametrization);
    const to = ((toModule as unknown as Fields).parametrizations as ModuleDict).get(
      name,
    ) as ParametrizationList;
    const originals = from.isTensor
      ? ["original"]
      : Array.from({ length: from.ntensors }, (_, i) => `original${i}`);
    for (const field of originals) {
      (to as unknown as Fields)[field] = (from as unknown as Fields)[field];
    }
  }
  return toModule;
}
