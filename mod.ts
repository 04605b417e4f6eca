/**
 * multigrad: train neural networks on WebGPU across several devices at once,
 * with a PyTorch-shaped API (tensors, autograd, nn, optim, data and
 * `torch.nn.parallel`).
 *
 * @example
 * ```ts
 * import { requestDevices, tensor } from "@multigrad/core";
 * const [gpu] = await requestDevices();
 * const x = tensor([[1, 2], [3, 4]], { device: gpu, requiresGrad: true });
 * const loss = x.mul(x).sum();
 * loss.backward();
 * console.log(await x.grad!.toArray()); // [[2, 4], [6, 8]]
 * ```
 * @module
 */

import "./src/backends/builtin.ts";

export { Tensor } from "./src/tensor.ts";
export type { NestedNumbers } from "./src/tensor.ts";
export * from "./src/ops/mod.ts";
export {
  backendNames,
  defaultDevice,
  Device,
  device,
  registerBackend,
  requestDevices,
  setDefaultDevice,
  unregisterBackend,
} from "./src/device.ts";
export type { RegisterBackendOptions, RequestDevicesOptions } from "./src/device.ts";
export { cpuBackend } from "./src/backends/cpu/mod.ts";
export type { CpuBackendOptions } from "./src/backends/cpu/mod.ts";
export { webgpuBackend } from "./src/backends/webgpu/mod.ts";
export type { WebGPUBackendOptions } from "./src/backends/webgpu/mod.ts";
export { enableGrad, Function, FunctionCtx, isGradEnabled, noGrad } from "./src/autograd.ts";
export { Node, queueBackwardCallback, registerPostAccumulateGradHook } from "./src/autograd.ts";
export type {
  BackwardFn,
  BackwardOptions,
  OutputMeta,
  PostAccumulateGradHook,
} from "./src/autograd.ts";
export { keep, Storage, tidy } from "./src/storage.ts";
export type { HasStorage } from "./src/storage.ts";
export { Stream } from "./src/stream.ts";
export { DeviceLostError } from "./src/errors.ts";
export { seededRandom } from "./src/util.ts";
export type { DType, TypedArray } from "./src/dtype.ts";
export type * from "./src/backends/backend.ts";
export { lowbias32 } from "./src/backends/backend.ts";
export * as parallel from "./src/parallel/mod.ts";
export * as nn from "./src/nn/mod.ts";
export * as optim from "./src/optim/mod.ts";
export * as data from "./src/data/mod.ts";
export * as distributed from "./src/distributed/mod.ts";
export {
  fromSafetensors,
  fromSafetensorsWithMetadata,
  load,
  save,
  toSafetensors,
} from "./src/serialization/mod.ts";
