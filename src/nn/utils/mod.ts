/**
 * Training utilities, as `torch.nn.utils`: gradient clipping, parameters as
 * one vector (`parametersToVector`, `vectorToParameters`), `weightNorm`,
 * `spectralNorm`, pruning (`prune`, as `torch.nn.utils.prune`),
 * parametrizations (`parametrize`: `registerParametrization`,
 * `removeParametrizations`, `cached`; `parametrizations`: `orthogonal`,
 * `spectralNorm`), `stateless.functionalCall`, and
 * `torch.nn.utils.rnn` (also as `nn.utils.rnn`): `padSequence`, `unpadSequence`,
 * and packed sequences (`PackedSequence`, `packPaddedSequence`,
 * `padPackedSequence`, `packSequence`, `unpackSequence`) that `RNN`, `LSTM`
 * and `GRU` take.
 * @module
 */

// `export *` so that `deno doc` lists the members (see src/nn/mod.ts).
export * from "./clip_grad.ts";
export * from "./rnn.ts";
export * as rnn from "./rnn.ts";
export * from "./convert_parameters.ts";
export * from "./weight_norm.ts";
export * from "./spectral_norm.ts";
export * as parametrize from "./parametrize_ns.ts";
export * as parametrizations from "./parametrizations_ns.ts";
export * from "./fusion.ts";
export * as stateless from "./stateless.ts";
export * as prune from "./prune.ts";
