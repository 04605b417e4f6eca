/**
 * `torch.nn.utils.parametrizations`: `orthogonal`, `spectralNorm` and
 * `weightNorm`.
 * @module
 */

// `export *` so that `deno doc` lists the members (see src/nn/mod.ts).
export * from "./parametrizations.ts";
export * from "./weight_norm_parametrization.ts";
