/**
 * The layers, losses and helpers of the `nn` namespace (`mod.ts` adds
 * `DataParallel` from the parallel layer, see `src/namespaces/nn.ts`).
 * @module
 */

// `export *` (not named re-exports) so that `deno doc` lists every member of
// the namespace; the files re-exported here export only public API.
export * from "./module.ts";
// Gives Parameter its PyTorch repr (`Parameter containing:`); exports nothing.
import "./parameter_str.ts";
export * from "./layers.ts";
export * from "./activation.ts";
export * from "./activation_extra.ts";
export * from "./dropout.ts";
export * from "./normalization_extra.ts";
export * from "./pixel_shuffle.ts";
export * from "./sparse.ts";
export * from "./rnn.ts";
export * from "./rnn_cell.ts";
export * from "./attention.ts";
export * from "./transformer.ts";
export * from "./transformer_decoder.ts";
export * from "./normalization.ts";
export * from "./conv.ts";
export * from "./upsample.ts";
export * from "./upsampling.ts";
export * from "./loss.ts";
export * from "./loss_extra.ts";
export * from "./loss_more.ts";
export * from "./adaptive_max_pool.ts";
export * from "./padding.ts";
export * from "./fold.ts";
export * from "./pool_extra.ts";
export * from "./parameter_containers.ts";
export * from "./bilinear.ts";
export * from "./embedding_bag.ts";
export * from "./lazy.ts";
export * from "./nn_gaps.ts";
export * from "./adaptive_log_softmax.ts";
export * as functional from "./functional.ts";
export * as init from "./init.ts";
export * as utils from "./utils/mod.ts";
