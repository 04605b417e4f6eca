/**
 * Datasets, loaders and samplers of the `data` namespace (`mod.ts` adds
 * `DistributedSampler` from the distributed layer, see
 * `src/namespaces/data.ts`).
 * @module
 */

// `export *` (not named re-exports) so that `deno doc` lists every member of
// the namespace; the files re-exported here export only public API.
export * from "./dataset.ts";
export * from "./dataloader.ts";
export * from "./convert.ts";
export * from "./sampler.ts";
export * from "./subset.ts";
export * from "./samplers.ts";
export * from "./concat.ts";
export * from "./iterable.ts";
export * from "./worker_info.ts";
export * from "./worker_source.ts";
