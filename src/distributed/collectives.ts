/**
 * Collectives on tensors of any device (`torch.distributed.all_reduce` and
 * friends). Like every op they return without waiting: the tensor is read
 * when the work producing it has run, the group's backend combines the
 * ranks' values, and the result is written back in stream order, so later
 * ops and reads on the tensor see it. The returned {@link Work} can be
 * awaited (PyTorch's `async_op=True` handle).
 * @module
 */

import type { TypedArray } from "../dtype.ts";
import { empty } from "../ops/util.ts";
import { formatShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import type { DistributedGroup, ReduceOp } from "./backend.ts";
import {
  allGatherOnHost,
  allReduceInPlace,
  borrowHost,
  giveBackHost,
  orderAfter,
  readFlat,
  runOnHost,
  writeFlat,
} from "./host.ts";
import { activeGroup } from "./state.ts";
import { checkReduceOp } from "./reduce_op.ts";

/**
 * A collective in flight: `await work` (or `work.wait()`) resolves once
 * this rank's part is done and rejects with the collective's error. The
 * tensors involved need no await: later ops on them are ordered after it.
 */
export class Work implements PromiseLike<void> {
  readonly #done: Promise<void>;
  #settled = false;

  /** Wraps the promise of a collective. */
  constructor(done: Promise<unknown>) {
    this.#done = done.then(
      () => {
        this.#settled = true;
      },
      (error) => {
        this.#settled = true;
        throw error;
      },
    );
    // Its errors also reach the tensor's next read: no unhandled rejection.
    this.#done.catch(() => {});
  }

  /** Resolves when the collective is done on this rank. */
  wait(): Promise<void> {
    return this.#done;
  }

  /** Whether the collective has finished (or failed). */
  isCompleted(): boolean {
    return this.#settled;
  }

  /** Lets `await work` wait for the collective. */
  then<A = void, B = never>(
    onFulfilled?: ((value: void) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.#done.then(onFulfilled, onRejected);
  }
}

function checkTensor(op: string, t: unknown): asserts t is Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(
      `${op}: expected a Tensor, got ${t === null ? "null" : typeof t}`,
    );
  }
}

function checkOp(name: string, op: ReduceOp, t: Tensor): ReduceOp {
  return checkReduceOp(name, op, t.dtype, t.shape);
}

/** Options of {@link allReduce}. */
export interface AllReduceOptions {
  /** How values combine over the ranks (default `"sum"`; `"avg"` needs a float dtype, the bitwise ops int32). */
  op?: ReduceOp;
  /** Among the ranks of this group only (from `newGroup`; default: every rank). */
  group?: DistributedGroup;
}

/**
 * Replaces `t` on every rank by the elementwise combination (`op`) of every
 * rank's `t`, in place, as `torch.distributed.all_reduce`. Every rank gets
 * bit-identical values.
 */
export function allReduce(t: Tensor, options: AllReduceOptions = {}): Work {
  checkTensor("allReduce", t);
  const op = checkOp("allReduce", options.op ?? "sum", t);
  const group = activeGroup("allReduce", options.group);
  const call = group.call({ kind: "allReduce", dtype: t.dtype, shapes: [t.shape], op });
  return new Work(allReduceInPlace(group, call, [t], "allReduce"));
}

/** Options of {@link broadcast}. */
export interface BroadcastOptions {
  /** The rank whose values every rank gets (its rank in the whole group, as PyTorch's). */
  src: number;
  /** Among the ranks of this group only (from `newGroup`; `src` must be one). */
  group?: DistributedGroup;
}

/**
 * Replaces `t` on every rank by rank `src`'s `t`, in place, as
 * `torch.distributed.broadcast`.
 */
export function broadcast(t: Tensor, options: BroadcastOptions): Work {
  checkTensor("broadcast", t);
  const group = activeGroup("broadcast", options?.group);
  const members = group.members;
  const given = options?.src;
  const src = members ? members.indexOf(given) : given;
  if (members && src < 0) {
    throw new RangeError(
      `broadcast: src must be a rank of the group [${members.join(", ")}], got ${given}`,
    );
  }
  if (!Number.isInteger(src) || src < 0 || src >= group.worldSize) {
    throw new RangeError(
      `broadcast: src must be a rank in [0, ${group.worldSize}), got ${src}`,
    );
  }
  const call = group.call({ kind: "broadcast", dtype: t.dtype, shapes: [t.shape], src });
  if (group.rank === src) {
    const values = readFlat([t], "broadcast");
    const sent = runOnHost(group, call, values, async (host) => {
      await group.backend.broadcast(call, host);
      giveBackHost(host);
    });
    orderAfter(t.device, sent);
    return new Work(sent);
  }
  // The receivers' own values do not matter: nothing to read.
  const host = Promise.resolve(borrowHost(t.dtype, t.numel()));
  const result = runOnHost(group, call, host, async (data) => {
    await group.backend.broadcast(call, data);
    return data;
  });
  writeFlat([t], result);
  return new Work(result);
}

/** Options of {@link allGather} and {@link barrier}. */
export interface GroupOptions {
  /** Among the ranks of this group only (from `newGroup`; default: every rank). */
  group?: DistributedGroup;
}

/**
 * Every rank's `t`, in rank order, as new tensors on `t`'s device
 * (`torch.distributed.all_gather`; with `group`, its ranks' in its order).
 * They are returned at once; reads and later ops see the gathered values.
 */
export function allGather(t: Tensor, options: GroupOptions = {}): Tensor[] {
  checkTensor("allGather", t);
  const group = activeGroup("allGather", options.group);
  const call = group.call({ kind: "allGather", dtype: t.dtype, shapes: [t.shape] });
  const outs = Array.from({ length: group.worldSize }, () => empty(t.shape, t.dtype, t.device));
  writeFlat(outs, allGatherOnHost(group, call, [t], "allGather"));
  return outs;
}

/** Options of {@link reduceScatter}. */
export interface ReduceScatterOptions {
  /** How values combine over the ranks (default `"sum"`; `"avg"` needs a float dtype, the bitwise ops int32). */
  op?: ReduceOp;
  /** Among the ranks of this group only (from `newGroup`; parts by rank in the group). */
  group?: DistributedGroup;
}

/**
 * `torch.distributed.reduce_scatter_tensor`: combines every rank's `input`
 * elementwise (`op`) and writes part `rank` of the result into `output`, in
 * place. `input` holds `worldSize` parts along dim 0: its shape is
 * `output`'s with dim 0 times `worldSize` (concatenated), or
 * `[worldSize, ...output.shape]` (stacked). Both on one device, one dtype.
 * Every rank gets bit-identical values for its part.
 *
 * @example
 * ```ts
 * // 2 ranks: rank r's input is [1, 2, 3, 4] * (r + 1)
 * const output = zeros([2]);
 * distributed.reduceScatter(output, input); // rank 0: [3, 6]; rank 1: [9, 12]
 * ```
 */
export function reduceScatter(
  output: Tensor,
  input: Tensor,
  options: ReduceScatterOptions = {},
): Work {
  checkTensor("reduceScatter", output);
  checkTensor("reduceScatter", input);
  const op = checkOp("reduceScatter", options.op ?? "sum", input);
  const group = activeGroup("reduceScatter", options.group);
  const n = group.worldSize;
  const [o, i] = [formatShape(output.shape), formatShape(input.shape)];
  if (output.dtype !== input.dtype || output.device !== input.device) {
    throw new TypeError(
      `reduceScatter: output and input must have one dtype and one device, got output ${output.dtype} on ${output.device} and input ${input.dtype} on ${input.device}`,
    );
  }
  const concatenated = output.shape.length > 0 && input.shape.length === output.shape.length &&
    input.shape[0] === n * output.shape[0] &&
    input.shape.every((d, k) => k === 0 || d === output.shape[k]);
  const stacked = input.shape.length === output.shape.length + 1 && input.shape[0] === n &&
    output.shape.every((d, k) => d === input.shape[k + 1]);
  if (!concatenated && !stacked) {
    throw new RangeError(
      `reduceScatter: input must hold worldSize (${n}) parts of output's shape along dim 0 (output ${o}: input [${
        n * (output.shape[0] ?? 1)
      }, ...] or [${n}, ...output's]), got input ${i}`,
    );
  }
  const call = group.call({ kind: "reduceScatter", dtype: input.dtype, shapes: [input.shape], op });
  const values = readFlat([input], "reduceScatter");
  const result = runOnHost(group, call, values, async (host) => {
    const backend = group.backend;
    let part: TypedArray;
    if (backend.reduceScatterInto) {
      // A reused array: a fresh one per call cost page faults (1.3-2.3 ms
      // of 800 KiB in an FSDP step of 2 cpu ranks).
      part = borrowHost(input.dtype, host.length / n);
      await backend.reduceScatterInto(call, host, part);
    } else if (backend.reduceScatter) part = await backend.reduceScatter(call, host);
    else {
      await backend.allReduce(call, host);
      const m = host.length / n;
      part = host.slice(group.rank * m, (group.rank + 1) * m);
    }
    giveBackHost(host);
    return part;
  });
  writeFlat([output], result);
  return new Work(result);
}

/** Resolves once every rank (of `group`, when given) has called `barrier` (`torch.distributed.barrier`). */
export function barrier(options: GroupOptions = {}): Promise<void> {
  const group = activeGroup("barrier", options.group);
  const call = group.call({ kind: "barrier", dtype: null, shapes: [] });
  return group.run(call, () => group.backend.barrier(call));
}
