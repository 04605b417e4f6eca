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

import { BUILTIN_BACKENDS } from "./src/backends/builtin.ts";
import { registerBackend } from "./src/device.ts";

for (const { name, factory, priority } of BUILTIN_BACKENDS) {
  registerBackend(name, factory, { priority });
}

export { Tensor } from "./src/tensor.ts";
export type { NestedNumbers } from "./src/tensor.ts";
// Printing as PyTorch (`await t.format()`, console.log); installs Tensor.prototype.format.
export {
  getPrintOptions,
  type PrintOptions,
  type ResolvedPrintOptions,
  setPrintOptions,
} from "./src/printing/tensor_str.ts";
export type { TensorMethods } from "./src/ops_composite/tensor_methods.ts";
export * from "./src/ops/mod.ts";
export * from "./src/ops_composite/mod.ts";
// The composite `normal` also takes tensors (`torch.normal(mean, std)`) and the core's forms.
export { normal } from "./src/ops_composite/mod.ts";
// `torch.Generator`: PyTorch's exact cpu streams, for factories, samplers and DataLoader.
export { Generator } from "./src/random/generator.ts";
export type { GeneratorState } from "./src/random/generator.ts";
export type { HostRandom, RandomOptions } from "./src/ops/factory.ts";
// `torch.pdist` is `nn.functional.pdist`.
export { pdist } from "./src/nn/functional/nn_gaps.ts";
export type { PdistOptions } from "./src/nn/functional/nn_gaps.ts";
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
export type { CpuBackendOptions, MatmulKernel } from "./src/backends/cpu/mod.ts";
export { webgpuBackend } from "./src/backends/webgpu/mod.ts";
export type {
  MatmulTuning,
  MatmulVariant,
  WebGPUBackendOptions,
} from "./src/backends/webgpu/mod.ts";
export { enableGrad, isGradEnabled, noGrad } from "./src/autograd.ts";
export {
  queueBackwardCallback,
  registerPostAccumulateGradHook,
  type TensorHook,
} from "./src/autograd.ts";
export type { BackwardOptions, PostAccumulateGradHook } from "./src/autograd.ts";
export { Function, FunctionCtx } from "./src/autograd/function.ts";
export { keep, tidy } from "./src/storage.ts";
export { DeviceLostError } from "./src/errors.ts";
// The backend contract's types: `registerBackend` takes a factory of this
// shape. Writing a backend also needs `wrapDevice` and `lowbias32`, from
// the contract module itself (`@multigrad/core/backend`).
export type * from "./src/backends/backend.ts";
export { seededRandom } from "./src/util.ts";
export type { DType, TypedArray } from "./src/dtype.ts";
export * as parallel from "./src/parallel/mod.ts";
export * as nn from "./src/namespaces/nn.ts";
export * as optim from "./src/optim/mod.ts";
export * as linalg from "./src/linalg/mod.ts";
// torch.* linear algebra beside torch.linalg (older names and conventions; Tensor methods too).
export {
  choleskyInverse,
  choleskySolve,
  inverse,
  logdet,
  lu,
  luSolve,
  luUnpack,
  matrixExp,
  pinverse,
  svd,
  triangularSolve,
} from "./src/linalg/torch_level.ts";
export type {
  CholeskyFactorOptions,
  LuUnpackOptions,
  TorchLuOptions,
  TorchSvdOptions,
  TriangularSolveOptions,
} from "./src/linalg/torch_level.ts";
// torch.* conveniences (their Tensor methods are installed by the same module).
export {
  asStrided,
  cholesky,
  cross,
  det,
  frexp,
  igamma,
  igammac,
  isFloatingPoint,
  isNonzero,
  isSameSize,
  matrixPower,
  narrowCopy,
  prelu,
  qr,
  slogdet,
  splitWithSizes,
} from "./src/namespaces/upper_methods.ts";
export type { NewTensorData, NewTensorOptions } from "./src/namespaces/upper_methods.ts";
export {
  areDeterministicAlgorithmsEnabled,
  inferenceMode,
  isDeterministicAlgorithmsWarnOnlyEnabled,
  isInferenceModeEnabled,
  isTensor,
  numel,
  seed,
  setGradEnabled,
  useDeterministicAlgorithms,
} from "./src/ops_composite/torch_utils.ts";
export type { DeterministicOptions } from "./src/ops_composite/torch_utils.ts";
export * as special from "./src/namespaces/special.ts";
export * as autograd from "./src/autograd/mod.ts";
export * as func from "./src/namespaces/func.ts";
export * as utils from "./src/namespaces/utils.ts";
export * as distributions from "./src/distributions/mod.ts";
export * as data from "./src/namespaces/data.ts";
export * as distributed from "./src/namespaces/distributed.ts";
export {
  fromSafetensors,
  fromSafetensorsWithMetadata,
  load,
  save,
  toSafetensors,
} from "./src/serialization/mod.ts";
