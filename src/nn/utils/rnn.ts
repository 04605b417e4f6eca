/**
 * `padSequence`, as `torch.nn.utils.rnn.pad_sequence`: sequences of
 * different lengths in one padded batch for `RNN`/`LSTM`/`GRU` (this library
 * has no packed sequences; mask the padding, or pick each sequence's last
 * real step with `gather`).
 * @module
 */

import { full } from "../../ops/factory.ts";
import { cat, stack } from "../../ops/view.ts";
import { formatShape, sameShape } from "../../shape.ts";
import { Tensor } from "../../tensor.ts";

/** Options of {@link padSequence}. */
export interface PadSequenceOptions {
  /** Output [batch, longest, ...] (default false: [longest, batch, ...]). */
  batchFirst?: boolean;
  /** Value of the padded places (default 0). */
  paddingValue?: number;
}

/**
 * Stacks `sequences` ([length_i, ...], the trailing dims equal) into one
 * tensor padded with `paddingValue` after each sequence's end. Gradients
 * flow back to every sequence.
 */
export function padSequence(
  sequences: readonly Tensor[],
  options: PadSequenceOptions = {},
): Tensor {
  if (!Array.isArray(sequences) || sequences.length === 0) {
    throw new RangeError("padSequence: expected a non-empty array of tensors");
  }
  const first = sequences[0];
  sequences.forEach((s, i) => {
    if (!(s instanceof Tensor) || s.ndim === 0) {
      throw new TypeError(`padSequence: sequence ${i} is not a tensor of at least one dim`);
    }
    if (
      !sameShape(s.shape.slice(1), first.shape.slice(1)) || s.dtype !== first.dtype ||
      s.device !== first.device
    ) {
      throw new RangeError(
        `padSequence: sequence ${i} (shape ${
          formatShape(s.shape)
        }, ${s.dtype}, ${s.device}) does not match sequence 0 (shape ${
          formatShape(first.shape)
        }, ${first.dtype}, ${first.device}) after the length dim`,
      );
    }
  });
  const longest = Math.max(...sequences.map((s) => s.shape[0]));
  const { dtype, device } = first;
  const value = options.paddingValue ?? 0;
  const padded = sequences.map((s) =>
    s.shape[0] === longest
      ? s
      : cat([s, full([longest - s.shape[0], ...s.shape.slice(1)], value, { dtype, device })], 0)
  );
  return stack(padded, options.batchFirst ? 0 : 1);
}
