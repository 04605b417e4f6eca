/**
 * Sequences of different lengths for `RNN`/`LSTM`/`GRU`, as
 * `torch.nn.utils.rnn`: `padSequence` (one padded batch), and packed
 * sequences: `PackedSequence`, `packPaddedSequence`, `padPackedSequence`,
 * `packSequence`, `unpadSequence` and `unpackSequence`. A recurrent layer
 * given a `PackedSequence` steps each sequence only over its own length and
 * returns the final states at each sequence's own last step.
 *
 * Unlike PyTorch, lengths, `batchSizes` and the sort permutations are plain
 * arrays of numbers rather than int64 cpu tensors: packing needs them on the
 * host, where a tensor's values are only read asynchronously here.
 * @module
 */

import { forwardScope } from "../../storage.ts";
import { full, tensor } from "../../ops/factory.ts";
import { cat, stack } from "../../ops/view.ts";
import { formatShape, sameShape } from "../../shape.ts";
import { Tensor } from "../../tensor.ts";
import type { Device } from "../../device.ts";
import type { DType } from "../../dtype.ts";

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
  // The padding and the padded copies are intermediates: the scope frees them.
  return forwardScope(() => {
    const padded = sequences.map((s) =>
      s.shape[0] === longest
        ? s
        : cat([s, full([longest - s.shape[0], ...s.shape.slice(1)], value, { dtype, device })], 0)
    );
    return stack(padded, options.batchFirst ? 0 : 1);
  });
}

/** `xs` as PyTorch prints a list: `[5, 3, 3, 1]`. */
function list(xs: ArrayLike<number>): string {
  return `[${Array.from(xs).join(", ")}]`;
}

/** An int32 index tensor on `device`. */
function indexTensor(indices: ArrayLike<number>, device: Device): Tensor {
  return tensor(Int32Array.from(indices), { dtype: "int32", device });
}

/** `p` as a frozen copy when it is a permutation of 0..n-1; else an error naming it. */
function checkPermutation(what: string, p: unknown, n: number): readonly number[] {
  const values = Array.isArray(p) || ArrayBuffer.isView(p)
    ? Array.from(p as ArrayLike<number>)
    : null;
  const seen = new Set(values);
  if (
    values === null || values.length !== n || seen.size !== n ||
    !values.every((i) => Number.isInteger(i) && i >= 0 && i < n)
  ) {
    throw new RangeError(
      `PackedSequence: ${what} must be a permutation of 0 to ${
        n - 1
      } (batchSizes[0] is ${n}), got ${values ? list(values) : String(p)}`,
    );
  }
  return Object.freeze(values);
}

/** The inverse of the permutation `p`. */
function invert(p: readonly number[]): number[] {
  const out = new Array<number>(p.length);
  p.forEach((v, i) => (out[v] = i));
  return out;
}

/**
 * A batch of sequences of different lengths packed step by step, as
 * `torch.nn.utils.rnn.PackedSequence`: `data` holds step 0 of every
 * sequence, then step 1 of those at least 2 long, and so on, sequences
 * taken longest first; `batchSizes[t]` is how many sequences reach step t.
 * `sortedIndices[k]` is the original batch position of the k-th longest
 * sequence and `unsortedIndices` its inverse (both null when the batch was
 * packed already sorted). Make one with {@link packPaddedSequence} or
 * {@link packSequence}; `RNN`, `LSTM` and `GRU` take and return it.
 * `tidy` keeps only the tensors it can see (in arrays and plain objects):
 * return `data` from a scope, not the PackedSequence, or `keep()` it.
 */
export class PackedSequence {
  /** The packed steps, [sum of the lengths, *]. */
  readonly data: Tensor;
  /** Sequences that reach each step (non-increasing, all positive). */
  readonly batchSizes: readonly number[];
  /** Original batch position of each sequence in packed order, or null. */
  readonly sortedIndices: readonly number[] | null;
  /** Packed position of each original sequence (the inverse of `sortedIndices`), or null. */
  readonly unsortedIndices: readonly number[] | null;

  /**
   * Wraps packed `data` ([sum(batchSizes), *]); `unsortedIndices` is
   * computed from `sortedIndices` when omitted, as PyTorch does.
   */
  constructor(
    data: Tensor,
    batchSizes: readonly number[],
    sortedIndices: readonly number[] | null = null,
    unsortedIndices: readonly number[] | null = null,
  ) {
    if (!(data instanceof Tensor) || data.ndim === 0) {
      throw new TypeError("PackedSequence: data must be a tensor of at least one dim");
    }
    const sizes = Array.isArray(batchSizes) || ArrayBuffer.isView(batchSizes)
      ? Array.from(batchSizes as ArrayLike<number>)
      : null;
    if (
      sizes === null || sizes.length === 0 ||
      !sizes.every((n, t) => Number.isInteger(n) && n > 0 && (t === 0 || n <= sizes[t - 1]))
    ) {
      throw new RangeError(
        `PackedSequence: batchSizes must be a non-empty, non-increasing list of positive integers, got ${
          sizes ? list(sizes) : String(batchSizes)
        }`,
      );
    }
    const total = sizes.reduce((a, b) => a + b, 0);
    if (data.shape[0] !== total) {
      throw new RangeError(
        `PackedSequence: data of shape ${
          formatShape(data.shape)
        } must have sum(batchSizes) = ${total} rows (batchSizes ${list(sizes)})`,
      );
    }
    const sorted = sortedIndices == null
      ? null
      : checkPermutation("sortedIndices", sortedIndices, sizes[0]);
    let unsorted: readonly number[] | null = null;
    if (unsortedIndices != null) {
      unsorted = checkPermutation("unsortedIndices", unsortedIndices, sizes[0]);
      if (sorted === null || !invert(sorted).every((v, i) => v === unsorted![i])) {
        throw new RangeError(
          `PackedSequence: unsortedIndices ${list(unsorted)} must be the inverse of sortedIndices ${
            sorted ? list(sorted) : "null"
          }`,
        );
      }
    } else if (sorted !== null) unsorted = Object.freeze(invert(sorted));
    this.data = data;
    this.batchSizes = Object.freeze(sizes);
    this.sortedIndices = sorted;
    this.unsortedIndices = unsorted;
  }

  /** The same packing with `data` moved to a device or converted to a dtype (`Tensor.to`). */
  to(target: Device | string | DType): PackedSequence {
    return new PackedSequence(
      this.data.to(target),
      this.batchSizes,
      this.sortedIndices,
      this.unsortedIndices,
    );
  }

  /** `PackedSequence(data=Tensor[12, 2], batchSizes=[4, 3, 3, 1, 1], ...)`. */
  toString(): string {
    const perm = (p: readonly number[] | null) => (p ? list(p) : "null");
    return `PackedSequence(data=Tensor${formatShape(this.data.shape)}, batchSizes=${
      list(this.batchSizes)
    }, sortedIndices=${perm(this.sortedIndices)}, unsortedIndices=${perm(this.unsortedIndices)})`;
  }
}

/** Options of {@link packPaddedSequence}. */
export interface PackPaddedSequenceOptions {
  /** The input is [batch, seq, *] (default false: [seq, batch, *]). */
  batchFirst?: boolean;
  /**
   * Require `lengths` in decreasing order (default true). With false the
   * batch is sorted here and the permutation kept in the result.
   */
  enforceSorted?: boolean;
}

/**
 * Packs `input` ([seq, batch, *], or [batch, seq, *] with `batchFirst`),
 * sequence b being the first `lengths[b]` steps of its column, as
 * `torch.nn.utils.rnn.pack_padded_sequence`. Every length must be in
 * [1, seq]; with `enforceSorted` (the default) they must not increase.
 * Sequences of equal length keep their order (a stable sort; PyTorch's
 * order among ties is unspecified). Gradients flow back to `input`.
 */
export function packPaddedSequence(
  input: Tensor,
  lengths: readonly number[],
  options: PackPaddedSequenceOptions = {},
): PackedSequence {
  return pack("packPaddedSequence", input, lengths, options);
}

function pack(
  op: string,
  input: Tensor,
  lengths: readonly number[],
  options: PackPaddedSequenceOptions,
): PackedSequence {
  const batchFirst = options.batchFirst ?? false;
  const enforceSorted = options.enforceSorted ?? true;
  if (!(input instanceof Tensor)) throw new TypeError(`${op}: input must be a Tensor`);
  if (input.ndim < 2) {
    throw new RangeError(
      `${op}: expected input of at least 2 dims (${
        batchFirst ? "[batch, seq, *]" : "[seq, batch, *]"
      }), got shape ${formatShape(input.shape)}`,
    );
  }
  if (!Array.isArray(lengths) && !ArrayBuffer.isView(lengths)) {
    throw new TypeError(
      `${op}: lengths must be an array of numbers (read a tensor's with \`await t.data()\`), got ${
        lengths instanceof Tensor ? "a Tensor" : String(lengths)
      }`,
    );
  }
  const lens = Array.from(lengths as ArrayLike<number>);
  const steps = input.shape[batchFirst ? 1 : 0];
  const batch = input.shape[batchFirst ? 0 : 1];
  if (batch === 0 || steps === 0) {
    throw new RangeError(
      `${op}: cannot pack empty tensors (input of shape ${formatShape(input.shape)})`,
    );
  }
  if (lens.length !== batch) {
    throw new RangeError(
      `${op}: expected one length per sequence, got ${lens.length} lengths ${
        list(lens)
      } for batch size ${batch} (input of shape ${formatShape(input.shape)}${
        batchFirst ? ", batchFirst" : ""
      })`,
    );
  }
  lens.forEach((n, b) => {
    if (!Number.isInteger(n) || n <= 0 || n > steps) {
      throw new RangeError(
        `${op}: length ${n} of sequence ${b} must be an integer from 1 to ${steps} (the time dim of input of shape ${
          formatShape(input.shape)
        }); lengths ${list(lens)}`,
      );
    }
  });
  const order = lens.map((_, b) => b);
  if (enforceSorted) {
    const bad = lens.findIndex((n, b) => b > 0 && n > lens[b - 1]);
    if (bad >= 0) {
      throw new RangeError(
        `${op}: lengths ${
          list(lens)
        } must be sorted in decreasing order when enforceSorted is true (length ${
          lens[bad]
        } of sequence ${bad} follows ${
          lens[bad - 1]
        }); pass { enforceSorted: false } to sort them here`,
      );
    }
  } else order.sort((a, b) => lens[b] - lens[a]);
  const batchSizes: number[] = [];
  for (let t = 0; t < lens[order[0]]; t++) {
    let n = 0;
    while (n < batch && lens[order[n]] > t) n++;
    batchSizes.push(n);
  }
  // One gather: row (t, k) of the packed data is step t of the k-th longest.
  const rows: number[] = [];
  batchSizes.forEach((n, t) => {
    for (let k = 0; k < n; k++) rows.push(batchFirst ? order[k] * steps + t : t * batch + order[k]);
  });
  const rest = input.shape.slice(2);
  const data = forwardScope(() =>
    input.reshape([steps * batch, ...rest]).indexSelect(0, indexTensor(rows, input.device))
  );
  return new PackedSequence(data, batchSizes, enforceSorted ? null : order);
}

/** Options of {@link padPackedSequence}. */
export interface PadPackedSequenceOptions {
  /** Output [batch, seq, *] (default false: [seq, batch, *]). */
  batchFirst?: boolean;
  /** Value of the places past each sequence's end (default 0). */
  paddingValue?: number;
  /** Pad to this many steps rather than the longest length (at least that). */
  totalLength?: number;
}

/**
 * Unpacks `sequence` into a padded tensor, as
 * `torch.nn.utils.rnn.pad_packed_sequence`: `[padded, lengths]`, padded
 * [seq, batch, *] (or [batch, seq, *]) in the original batch order, and each
 * sequence's length (an array of numbers; PyTorch gives an int64 tensor).
 * Gradients flow back to `sequence.data`.
 */
export function padPackedSequence(
  sequence: PackedSequence,
  options: PadPackedSequenceOptions = {},
): [Tensor, number[]] {
  if (!(sequence instanceof PackedSequence)) {
    throw new TypeError("padPackedSequence: sequence must be a PackedSequence");
  }
  const { data, batchSizes } = sequence;
  const longest = batchSizes.length;
  const steps = options.totalLength ?? longest;
  if (!Number.isInteger(steps) || steps < longest) {
    throw new RangeError(
      `padPackedSequence: expected totalLength to be an integer at least the length of the longest sequence, got totalLength=${steps} and max sequence length ${longest}`,
    );
  }
  const batch = batchSizes[0];
  const offsets: number[] = [];
  batchSizes.reduce((at, n) => (offsets.push(at), at + n), 0);
  const sortedLengths = Array.from(
    { length: batch },
    (_, k) => batchSizes.filter((n) => n > k).length,
  );
  const unsorted = sequence.unsortedIndices;
  const packedOf = (b: number) => (unsorted ? unsorted[b] : b);
  const lengths = Array.from({ length: batch }, (_, b) => sortedLengths[packedOf(b)]);
  // Every padded place reads one extra row of `paddingValue` after the data.
  const pad = data.shape[0];
  const rows: number[] = [];
  const at = (t: number, b: number) => {
    const k = packedOf(b);
    return t < sortedLengths[k] ? offsets[t] + k : pad;
  };
  for (let i = 0; i < steps * batch; i++) {
    rows.push(
      options.batchFirst
        ? at(i % steps, Math.floor(i / steps))
        : at(Math.floor(i / batch), i % batch),
    );
  }
  const rest = data.shape.slice(1);
  const padded = forwardScope(() => {
    const filler = full([1, ...rest], options.paddingValue ?? 0, {
      dtype: data.dtype,
      device: data.device,
    });
    return cat([data, filler], 0)
      .indexSelect(0, indexTensor(rows, data.device))
      .reshape(options.batchFirst ? [batch, steps, ...rest] : [steps, batch, ...rest]);
  });
  return [padded, lengths];
}

/** Options of {@link packSequence}. */
export interface PackSequenceOptions {
  /** Require the sequences longest first (default true). */
  enforceSorted?: boolean;
}

/**
 * Packs `sequences` ([length_i, *], the trailing dims equal), as
 * `torch.nn.utils.rnn.pack_sequence`: {@link padSequence} then
 * {@link packPaddedSequence}.
 */
export function packSequence(
  sequences: readonly Tensor[],
  options: PackSequenceOptions = {},
): PackedSequence {
  // The padded batch is an intermediate: only the packed data leaves the scope.
  const [data, batchSizes, sortedIndices] = forwardScope(() => {
    const padded = padSequence(sequences);
    const p = pack("packSequence", padded, sequences.map((s) => s.shape[0]), options);
    return [p.data, p.batchSizes, p.sortedIndices] as const;
  });
  return new PackedSequence(data, batchSizes, sortedIndices);
}

/** Options of {@link unpadSequence}. */
export interface UnpadSequenceOptions {
  /** The input is [batch, seq, *] (default false: [seq, batch, *]). */
  batchFirst?: boolean;
}

/**
 * The sequences of a padded batch, as `torch.nn.utils.rnn.unpad_sequence`:
 * sequence b is the first `lengths[b]` steps of its column, [lengths[b], *].
 */
export function unpadSequence(
  padded: Tensor,
  lengths: readonly number[],
  options: UnpadSequenceOptions = {},
): Tensor[] {
  if (!(padded instanceof Tensor) || padded.ndim < 2) {
    throw new RangeError(
      `unpadSequence: expected a padded tensor of at least 2 dims, got ${
        padded instanceof Tensor ? `shape ${formatShape(padded.shape)}` : String(padded)
      }`,
    );
  }
  const batchDim = options.batchFirst ? 0 : 1;
  const steps = padded.shape[1 - batchDim];
  const lens = Array.isArray(lengths) || ArrayBuffer.isView(lengths)
    ? Array.from(lengths as ArrayLike<number>)
    : null;
  if (lens === null || lens.length !== padded.shape[batchDim]) {
    throw new RangeError(
      `unpadSequence: expected ${padded.shape[batchDim]} lengths for padded of shape ${
        formatShape(padded.shape)
      }, got ${lens ? list(lens) : String(lengths)}`,
    );
  }
  lens.forEach((n, b) => {
    if (!Number.isInteger(n) || n < 0 || n > steps) {
      throw new RangeError(
        `unpadSequence: length ${n} of sequence ${b} must be an integer from 0 to ${steps}`,
      );
    }
  });
  // select copies: the scope frees each column once narrowed.
  return forwardScope(() => lens.map((n, b) => padded.select(batchDim, b).narrow(0, 0, n)));
}

/**
 * The sequences of a packed batch in their original order, as
 * `torch.nn.utils.rnn.unpack_sequence`.
 */
export function unpackSequence(sequence: PackedSequence): Tensor[] {
  // The padded batch is an intermediate: only the sequences leave the scope.
  return forwardScope(() => {
    const [padded, lengths] = padPackedSequence(sequence, { batchFirst: true });
    return unpadSequence(padded, lengths, { batchFirst: true });
  });
}
