/**
 * Data loading, as `torch.utils.data`: `Dataset`, `TensorDataset`, `Subset`,
 * `randomSplit`, `DataLoader`, `defaultCollate`, and samplers
 * (`DistributedSampler` gives each rank of a process group its own share).
 *
 * @example
 * ```ts
 * import { data, randn } from "@multigrad/core";
 * const loader = new data.DataLoader(new data.TensorDataset(randn([100, 5])), { batchSize: 30 });
 * for (const [x] of loader) console.log(x.shape); // [30, 5] three times, then [10, 5]
 * ```
 * @module
 */

// `export *` (not named re-exports) so that `deno doc` lists every member of
// the namespace; the files re-exported here export only public API.
export * from "./dataset.ts";
export * from "./dataloader.ts";
export * from "./sampler.ts";
export * from "./subset.ts";
