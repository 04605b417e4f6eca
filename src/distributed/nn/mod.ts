/**
 * `torch.distributed.nn`: `functional` holds the collectives as autograd
 * Functions (new tensors out, the mirror collective in backward).
 *
 * @example
 * ```ts
 * import { cat, distributed } from "@multigrad/core";
 * // every rank's embeddings, differentiable into this rank's own
 * const all = cat(distributed.nn.functional.allGather(embeddings));
 * ```
 * @module
 */

export * as functional from "./functional.ts";
