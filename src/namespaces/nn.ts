/**
 * Neural-network building blocks, as `torch.nn`: `Module`, `Parameter`,
 * layers, normalisation, losses, `functional`, `init`, `utils`, and
 * `DataParallel`.
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

// The namespace users see. It sits above `nn`, `parallel` and `distributed` so
// that `nn.DataParallel` and `nn.SyncBatchNorm` exist (as in `torch.nn`) while
// `nn` itself never imports the layers that import `nn`.
export * from "../nn/mod.ts";
export * from "../parallel/data_parallel.ts";
export * from "../distributed/sync_batch_norm.ts";
