/**
 * Training utilities, as `torch.nn.utils`: gradient clipping, and
 * `padSequence` (`torch.nn.utils.rnn.pad_sequence`).
 * @module
 */

// `export *` so that `deno doc` lists the members (see src/nn/mod.ts).
export * from "./clip_grad.ts";
export * from "./rnn.ts";
