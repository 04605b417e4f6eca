/**
 * `torch.utils.tensorboard`: {@link SummaryWriter} writes the event files
 * TensorBoard reads (scalars, histograms, text, hyperparameters), as PyTorch
 * 1.13 does.
 * @module
 */

export { SummaryWriter } from "./writer.ts";
export type { HistogramOptions, Hparam, HparamsOptions, SummaryWriterOptions } from "./writer.ts";
