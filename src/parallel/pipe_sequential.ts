/**
 * The partitions of `Pipe`, as PyTorch 1.13's `PipeSequential`.
 * @module
 */

import { Sequential } from "../nn/layers.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";

/**
 * A Sequential whose layers pass tuples on (PyTorch's `PipeSequential`): it
 * takes any number of arguments, and a layer that returns an array (a tuple)
 * gives the next layer its items as separate arguments. `Pipe` calls each
 * partition's `forward` as one module call, so hooks registered on
 * `pipe.partitions[j]` (and the global module hooks) fire per micro-batch,
 * as PyTorch's `partition(*inputs)` fires them.
 */
export class PipeSequential extends Sequential {
  /** Feeds `inputs` through the layers, spreading each tuple over the next layer's arguments. */
  override forward(...inputs: unknown[]): Tensor {
    // As Sequential's: what passes between layers goes with the graph at backward, not the GC.
    return forwardScope(() => {
      let value: unknown = inputs;
      for (const layer of this) {
        const forward = layer.forward as (...a: unknown[]) => unknown;
        value = Array.isArray(value) ? forward.apply(layer, value) : forward.call(layer, value);
      }
      // A tuple when a layer returns one; Pipe checks what comes back.
      return value as Tensor;
    });
  }
}
