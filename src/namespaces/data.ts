/**
 * Data loading, as `torch.utils.data`: `Dataset`, `TensorDataset`, `Subset`,
 * `ConcatDataset`, `IterableDataset`, `ChainDataset`, `randomSplit`,
 * `DataLoader`, `defaultCollate`, and samplers (`SequentialSampler`,
 * `RandomSampler`, `SubsetRandomSampler`, `WeightedRandomSampler`,
 * `BatchSampler`; `DistributedSampler` gives each rank of a process group its
 * own share).
 *
 * @example
 * ```ts
 * import { data, randn } from "@multigrad/core";
 * const loader = new data.DataLoader(new data.TensorDataset(randn([100, 5])), { batchSize: 30 });
 * for (const [x] of loader) console.log(x.shape); // [30, 5] three times, then [10, 5]
 * ```
 * @module
 */

// The namespace users see: above both `data` and `distributed`, so that
// `data.DistributedSampler` exists while `data` never imports the
// distributed layer.
export * from "../data/mod.ts";
export * from "../distributed/sampler.ts";
