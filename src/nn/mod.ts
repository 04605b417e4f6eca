/**
 * Neural-network building blocks, as `torch.nn`: `Module`, `Parameter`,
 * layers, normalisation, losses, `functional`, `init` and `utils`.
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

// `export *` (not named re-exports) so that `deno doc` lists every member of
// the namespace; the files re-exported here export only public API.
export * from "./module.ts";
export * from "./layers.ts";
export * from "./activation.ts";
export * from "./sparse.ts";
export * from "./rnn.ts";
export * from "./attention.ts";
export * from "./normalization.ts";
export * from "./conv.ts";
export * from "./loss.ts";
export * as functional from "./functional.ts";
export * as init from "./init.ts";
export * as utils from "./utils/mod.ts";
export * from "../parallel/data_parallel.ts";
