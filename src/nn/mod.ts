/**
 * Neural-network building blocks, as `torch.nn`: `Module`, `Parameter`,
 * layers, normalisation, losses and `functional`.
 *
 * @example
 * ```ts
 * import { nn, tensor } from "@multigrad/core";
 * const model = new nn.Sequential(new nn.Linear(4, 8), new nn.ReLU(), new nn.Linear(8, 2));
 * const loss = new nn.CrossEntropyLoss().forward(
 *   model.forward(tensor([[1, 2, 3, 4]])),
 *   tensor([1], { dtype: "int32" }),
 * );
 * loss.backward();
 * ```
 * @module
 */

export { Module, Parameter } from "./module.ts";
export type {
  LoadStateDictOptions,
  LoadStateDictResult,
  RegisterBufferOptions,
  ReplicateTensorFn,
} from "./module.ts";
export {
  Dropout,
  Flatten,
  GELU,
  Identity,
  Linear,
  LogSoftmax,
  ModuleList,
  ReLU,
  Sequential,
  Sigmoid,
  Softmax,
  Tanh,
} from "./layers.ts";
export type { FactoryOptions, LinearOptions } from "./layers.ts";
export { BatchNorm1d, LayerNorm } from "./normalization.ts";
export type { BatchNormModuleOptions, LayerNormModuleOptions } from "./normalization.ts";
export { CrossEntropyLoss, MSELoss } from "./loss.ts";
export * as functional from "./functional.ts";
export { DataParallel } from "../parallel/data_parallel.ts";
