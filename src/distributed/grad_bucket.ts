/**
 * What a DDP communication hook is handed (`torch.distributed.GradBucket`)
 * and the hook's type.
 * @module
 */

import type { DType } from "../dtype.ts";
import type { Parameter } from "../nn/module.ts";
import { formatShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";

/**
 * One gradient bucket of {@link DistributedDataParallel} as a communication
 * hook sees it (PyTorch's `dist.GradBucket`): the flat gradient of some
 * parameters of one dtype, in bucket order (reverse registration order;
 * bucket 0 holds the last parameters, whose gradients backward produces
 * first). Parameters without a gradient in this pass count as zeros.
 */
export class GradBucket {
  readonly #index: number;
  #buffer: Tensor;
  readonly #params: readonly Parameter[];
  readonly #isLast: boolean;

  /** @internal Built by DistributedDataParallel at the end of a synchronising backward. */
  constructor(index: number, buffer: Tensor, params: readonly Parameter[], isLast: boolean) {
    this.#index = index;
    this.#buffer = buffer;
    this.#params = params;
    this.#isLast = isLast;
  }

  /** The bucket's index: 0 for the first bucket (the last parameters), as PyTorch's `index()`. */
  index(): number {
    return this.#index;
  }

  /** The flat gradient: every parameter's gradient flattened, in bucket order, one dtype. */
  buffer(): Tensor {
    return this.#buffer;
  }

  /** The dtype of {@link buffer}. */
  get dtype(): DType {
    return this.#buffer.dtype;
  }

  /**
   * The buffer cut into one tensor per parameter, each of its parameter's
   * shape (PyTorch's `gradients()`). Unlike PyTorch's they are not views
   * that write through into the buffer (multigrad has no strided views):
   * build a new flat tensor and return it, or pass it to {@link setBuffer}.
   */
  gradients(): Tensor[] {
    const params = this.#params;
    if (params.length === 1) return [this.#buffer.reshape(params[0].shape).clone()];
    return this.#buffer.split(params.map((p) => p.numel())).map((t, i) =>
      t.reshape(params[i].shape)
    );
  }

  /** The bucket's parameters, in bucket order (PyTorch's `parameters()`). */
  parameters(): Parameter[] {
    return [...this.#params];
  }

  /** Whether this is the last bucket of the pass (PyTorch's `is_last()`): hooks count iterations with it. */
  isLast(): boolean {
    return this.#isLast;
  }

  /**
   * Replaces the flat gradient (PyTorch's `set_buffer`): `t` must have the
   * buffer's shape and dtype and be on its device.
   */
  setBuffer(t: Tensor): void {
    checkBucketTensor(t, this, "GradBucket.setBuffer");
    this.#buffer = t;
  }
}

/**
 * A DDP communication hook (PyTorch's `hook(state, bucket) -> Future[Tensor]`):
 * called once per bucket, in bucket order, at the end of every backward pass
 * that synchronises, it returns the bucket's reduced flat gradient, which
 * DDP writes into the parameters' `.grad`. Collectives here are stream-ordered
 * (`allReduce(t)` updates `t` for every later op), so the hook returns a
 * Tensor, not a promise: it must not await.
 */
export type CommHook<S> = (state: S, bucket: GradBucket) => Tensor;

/** @internal A tensor that may stand for `bucket`'s buffer, or a clear error naming both. */
export function checkBucketTensor(t: unknown, bucket: GradBucket, op: string): asserts t is Tensor {
  const b = bucket.buffer();
  const expected = `${formatShape(b.shape)} ${b.dtype} on ${b.device}`;
  if (!(t instanceof Tensor)) {
    const got = t === null
      ? "null"
      : typeof (t as { then?: unknown })?.then === "function"
      ? "a Promise (hooks must not await: collectives are stream-ordered, return the tensor)"
      : typeof t;
    throw new TypeError(
      `${op}: bucket ${bucket.index()} needs a Tensor of ${expected} (its flat gradient), got ${got}`,
    );
  }
  if (t.dtype !== b.dtype || t.ndim !== 1 || t.shape[0] !== b.shape[0] || t.device !== b.device) {
    throw new RangeError(
      `${op}: bucket ${bucket.index()} needs a Tensor of ${expected} (its flat gradient), got ${
        formatShape(t.shape)
      } ${t.dtype} on ${t.device}`,
    );
  }
}
