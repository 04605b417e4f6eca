/**
 * `torch.utils.tensorboard`: {@link SummaryWriter} writes the event files
 * TensorBoard reads (scalars, histograms, text, hyperparameters, images,
 * precision-recall curves, audio, custom-scalar layouts) and the Projector's
 * embedding files, as PyTorch 1.13 does.
 * @module
 */

// `export *` so that `deno doc` lists the members (a named re-export left the namespace empty);
// writer.ts exports only public API.
export * from "./writer.ts";
