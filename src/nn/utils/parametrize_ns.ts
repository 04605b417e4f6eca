/**
 * `torch.nn.utils.parametrize`: `registerParametrization`,
 * `removeParametrizations`, `isParametrized`, `typeBeforeParametrizations`,
 * `cached`, `ParametrizationList` and `transferParametrizationsAndParams`.
 * @module
 */

// `export *` so that `deno doc` lists the members (see src/nn/mod.ts).
export * from "./parametrize.ts";
export * from "./parametrize_transfer.ts";
