/**
 * Training utilities, as `torch.nn.utils`: gradient clipping.
 * @module
 */

// `export *` so that `deno doc` lists the members (see src/nn/mod.ts).
export * from "./clip_grad.ts";
