/**
 * `torch.distributed.nn.functional`: the collectives as autograd Functions.
 * Each returns NEW tensors (its inputs are left as they were) and its
 * backward is the mirror collective (broadcast ↔ reduce, gather ↔ scatter,
 * allGather ↔ reduce-scatter by allToAll, allToAll ↔ allToAll, allReduce ↔
 * allReduce), so that model-parallel code (sharded layers, sequence
 * parallelism, contrastive losses over every rank's embeddings) can
 * differentiate through them. Forward and backward are PyTorch 1.13's,
 * quirks included (each function's comment names them), and both run in
 * stream order like the plain collectives: nothing needs an await.
 *
 * As in PyTorch, a backward that runs a collective must run on every rank
 * of the group: every rank has to call `backward` on a loss that depends on
 * the collective's outputs (a rank that does not leaves the others waiting
 * until the group's timeout, which then fails them naming it).
 *
 * Deliberate differences from 1.13: the output tensors PyTorch takes
 * (`reduceScatter`'s `output`, `allToAll`'s `outputTensorList`,
 * `allToAllSingle`'s `output`) give shapes only and are not filled in place;
 * with a `group`, `gather` and
 * `scatter` read `dst`/`src` as whole-group ranks, as everywhere else
 * (1.13's compare them with the rank in the group); and `reduce` leaves the
 * non-destination outputs as copies of the inputs (gloo leaves partial sums).
 * @module
 */

import { Function, type FunctionCtx } from "../../autograd/function.ts";
import { empty } from "../../ops/util.ts";
import { stack } from "../../ops/view.ts";
import { formatShape } from "../../shape.ts";
import { Tensor } from "../../tensor.ts";
import type { DistributedGroup, ReduceOp } from "../backend.ts";
import * as plain from "../collectives.ts";
import * as rooted from "../scatter_gather.ts";
import { activeGroup, groupRankOf } from "../state.ts";

/** Options of the functions without a reduction: the group. */
export interface FunctionalGroupOptions {
  /** Among the ranks of this group only (from `distributed.newGroup`; default: every rank). */
  group?: DistributedGroup;
}

/** Options of the reducing functions: the op and the group. */
export interface FunctionalReduceOptions extends FunctionalGroupOptions {
  /**
   * How values combine (default `"sum"`, or a `distributed.ReduceOp` member).
   * 1.13's backward is the derivative for `"sum"` only (and `"avg"` in
   * allReduce; see each function).
   */
  op?: ReduceOp;
}

/** Options of {@link allToAllSingle}. */
export interface AllToAllSingleOptions extends FunctionalGroupOptions {
  /** Rows of the output's dim 0 from each rank, in rank order (default: equal parts). */
  outputSplitSizes?: readonly number[] | null;
  /** Rows of the input's dim 0 for each rank, in rank order (default: equal parts). */
  inputSplitSizes?: readonly number[] | null;
}

function describe(t: Tensor): string {
  return `${t.dtype} ${formatShape(t.shape)} on ${t.device}`;
}

function checkTensor(op: string, name: string, t: unknown): asserts t is Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`${op}: ${name} must be a Tensor, got ${t === null ? "null" : typeof t}`);
  }
}

/** `list` as one tensor per rank of a group of `n`, all of `list[0]`'s dtype, device and shape (if `sameShape`). */
function checkList(op: string, name: string, list: unknown, n: number, sameShape = true): Tensor[] {
  if (!Array.isArray(list) || list.length !== n) {
    throw new RangeError(
      `${op}: ${name} must hold one tensor per rank of the group (${n}), got ${
        Array.isArray(list) ? `${list.length}` : String(list)
      }`,
    );
  }
  list.forEach((t, i) => checkTensor(op, `${name}[${i}]`, t));
  const first = list[0] as Tensor;
  list.forEach((t: Tensor, i) => {
    const same = t.dtype === first.dtype && t.device === first.device &&
      (!sameShape || formatShape(t.shape) === formatShape(first.shape));
    if (!same) {
      throw new TypeError(
        `${op}: every tensor of ${name} must be ${
          sameShape ? describe(first) : `${first.dtype} on ${first.device}`
        } (as ${name}[0]), but ${name}[${i}] is ${describe(t)}`,
      );
    }
  });
  return list;
}

/**
 * Zeros that stay in the graph (PyTorch's in-place `zero_()` on the
 * reduced gradient): a higher-order backward through them still reaches the
 * collective before, on every rank alike.
 */
class Zeroed extends Function {
  static override forward(_ctx: FunctionCtx, x: Tensor): Tensor {
    return x.zerosLike();
  }
  static override backward(_ctx: FunctionCtx, grad: Tensor): Tensor {
    return grad.zerosLike();
  }
}

class BroadcastFn extends Function {
  static override forward(
    ctx: FunctionCtx,
    src: number,
    group: DistributedGroup | undefined,
    tensor: Tensor,
  ): Tensor {
    const g = activeGroup("broadcast", group);
    ctx.isSource = g.rank === groupRankOf("broadcast", g, src, "src");
    ctx.src = src;
    ctx.group = group;
    const out = tensor.clone();
    plain.broadcast(out, { src, group });
    return out;
  }
  static override backward(ctx: FunctionCtx, grad: Tensor): (Tensor | null)[] {
    const reduced = ReduceFn.apply(ctx.src as number, "sum", groupOf(ctx), grad);
    return [null, null, ctx.isSource ? reduced : Zeroed.apply(reduced)];
  }
}

function groupOf(ctx: FunctionCtx): DistributedGroup | undefined {
  return ctx.group as DistributedGroup | undefined;
}

class ReduceFn extends Function {
  static override forward(
    ctx: FunctionCtx,
    dst: number,
    op: ReduceOp,
    group: DistributedGroup | undefined,
    tensor: Tensor,
  ): Tensor {
    ctx.dst = dst;
    ctx.group = group;
    const out = tensor.clone();
    rooted.reduce(out, { dst, op, group });
    return out;
  }
  static override backward(ctx: FunctionCtx, grad: Tensor): (Tensor | null)[] {
    return [null, null, null, BroadcastFn.apply(ctx.dst as number, groupOf(ctx), grad)];
  }
}

class GatherFn extends Function {
  static override forward(
    ctx: FunctionCtx,
    dst: number,
    group: DistributedGroup | undefined,
    tensor: Tensor,
  ): Tensor[] {
    const g = activeGroup("gather", group);
    const isDestination = g.rank === groupRankOf("gather", g, dst, "dst");
    ctx.dst = dst;
    ctx.group = group;
    const list = Array.from({ length: g.worldSize }, () => tensor.zerosLike());
    rooted.gather(tensor, isDestination ? list : null, { dst, group });
    return list;
  }
  static override backward(ctx: FunctionCtx, ...grads: Tensor[]): (Tensor | null)[] {
    return [null, null, ScatterFn.apply(ctx.dst as number, groupOf(ctx), ...grads)];
  }
}

class ScatterFn extends Function {
  static override forward(
    ctx: FunctionCtx,
    src: number,
    group: DistributedGroup | undefined,
    ...tensors: Tensor[]
  ): Tensor {
    const g = activeGroup("scatter", group);
    checkList("scatter", "tensors", tensors, g.worldSize);
    const isSource = g.rank === groupRankOf("scatter", g, src, "src");
    ctx.src = src;
    ctx.group = group;
    const out = tensors[0].zerosLike();
    rooted.scatter(out, isSource ? tensors : null, { src, group });
    return out;
  }
  static override backward(ctx: FunctionCtx, grad: Tensor): (Tensor | null)[] {
    return [null, null, ...GatherFn.apply(ctx.src as number, groupOf(ctx), grad)];
  }
}

class ReduceScatterFn extends Function {
  static override forward(
    ctx: FunctionCtx,
    op: ReduceOp,
    group: DistributedGroup | undefined,
    output: Tensor,
    ...inputs: Tensor[]
  ): Tensor {
    const g = activeGroup("reduceScatter", group);
    checkList("reduceScatter", "inputList", inputs, g.worldSize);
    if (describe(inputs[0]) !== describe(output)) {
      throw new TypeError(
        `reduceScatter: every tensor of inputList must be output's ${describe(output)}, got ${
          describe(inputs[0])
        }`,
      );
    }
    ctx.group = group;
    const out = empty(output.shape, output.dtype, output.device);
    plain.reduceScatter(out, stack(inputs), { op, group });
    return out;
  }
  static override backward(ctx: FunctionCtx, grad: Tensor): (Tensor | null)[] {
    return [null, null, null, ...AllGatherFn.apply(groupOf(ctx), grad)];
  }
}

class AllGatherFn extends Function {
  static override forward(
    ctx: FunctionCtx,
    group: DistributedGroup | undefined,
    tensor: Tensor,
  ): Tensor[] {
    ctx.group = group;
    return plain.allGather(tensor, { group });
  }
  static override backward(ctx: FunctionCtx, ...grads: Tensor[]): (Tensor | null)[] {
    // 1.13's path for every backend but NCCL (gloo's): all-to-all, then the sum in rank order.
    const received = AllToAllFn.apply(groupOf(ctx), grads, ...grads);
    return [null, stack(received).sum(0)];
  }
}

class AllToAllFn extends Function {
  static override forward(
    ctx: FunctionCtx,
    group: DistributedGroup | undefined,
    outputs: readonly Tensor[],
    ...inputs: Tensor[]
  ): Tensor[] {
    const g = activeGroup("allToAll", group);
    checkList("allToAll", "inputTensorList", inputs, g.worldSize, false);
    checkList("allToAll", "outputTensorList", outputs, g.worldSize, false);
    ctx.group = group;
    ctx.inputShapes = inputs.map((t) => t.shape);
    const outs = outputs.map((t) => empty(t.shape, t.dtype, t.device));
    rooted.allToAll(outs, inputs, { group });
    return outs;
  }
  static override backward(ctx: FunctionCtx, ...grads: Tensor[]): (Tensor | null)[] {
    const shapes = ctx.inputShapes as number[][];
    const like = shapes.map((s) => empty(s, grads[0].dtype, grads[0].device));
    return [null, null, ...AllToAllFn.apply(groupOf(ctx), like, ...grads)];
  }
}

class AllToAllSingleFn extends Function {
  static override forward(
    ctx: FunctionCtx,
    group: DistributedGroup | undefined,
    output: Tensor,
    outputSplitSizes: readonly number[] | null | undefined,
    inputSplitSizes: readonly number[] | null | undefined,
    input: Tensor,
  ): Tensor {
    ctx.group = group;
    ctx.inputShape = input.shape;
    // Backward sends back what came: the splits swap.
    ctx.outputSplitSizes = inputSplitSizes;
    ctx.inputSplitSizes = outputSplitSizes;
    const out = empty(output.shape, output.dtype, output.device);
    rooted.allToAllSingle(out, input, { group, outputSplitSizes, inputSplitSizes });
    return out;
  }
  static override backward(ctx: FunctionCtx, grad: Tensor): (Tensor | null)[] {
    const like = empty(ctx.inputShape as number[], grad.dtype, grad.device);
    const back = AllToAllSingleFn.apply(
      groupOf(ctx),
      like,
      ctx.outputSplitSizes as readonly number[] | null | undefined,
      ctx.inputSplitSizes as readonly number[] | null | undefined,
      grad,
    );
    return [null, null, null, null, back];
  }
}

class AllReduceFn extends Function {
  static override forward(
    ctx: FunctionCtx,
    op: ReduceOp,
    group: DistributedGroup | undefined,
    tensor: Tensor,
  ): Tensor {
    ctx.op = op;
    ctx.group = group;
    const out = tensor.clone();
    plain.allReduce(out, { op, group });
    return out;
  }
  static override backward(ctx: FunctionCtx, grad: Tensor): (Tensor | null)[] {
    return [null, null, AllReduceFn.apply(ctx.op as ReduceOp, groupOf(ctx), grad)];
  }
}

/**
 * Rank `src`'s `tensor` on every rank, as a new tensor
 * (`torch.distributed.nn.functional.broadcast`). Backward (1.13's): the
 * gradients are summed onto rank `src`, which gets the sum; every other
 * rank gets zeros.
 *
 * @example
 * ```ts
 * const w = distributed.nn.functional.broadcast(x, 0); // rank 0's x everywhere
 * w.mul(rank + 1).sum().backward(); // rank 0's x.grad: 1 + 2 + ... + worldSize; others: 0
 * ```
 */
export function broadcast(
  tensor: Tensor,
  src: number,
  options: FunctionalGroupOptions = {},
): Tensor {
  checkTensor("broadcast", "tensor", tensor);
  return BroadcastFn.apply(src, options.group, tensor);
}

/**
 * Every rank's `tensor` as a list on rank `dst` (default 0); the other
 * ranks get a list of zeros (`torch.distributed.nn.functional.gather`).
 * Backward: rank `dst`'s gradients are scattered, rank r getting the
 * gradient of its entry r. With a `group`, `dst` is a rank of the whole
 * group, as in the plain gather (1.13's functional version compares it with
 * the rank in the group, and fails where the two differ).
 *
 * @example
 * ```ts
 * const all = distributed.nn.functional.gather(x, 0); // on rank 0: [x of rank 0, x of rank 1, ...]
 * ```
 */
export function gather(
  tensor: Tensor,
  dst = 0,
  options: FunctionalGroupOptions = {},
): Tensor[] {
  checkTensor("gather", "tensor", tensor);
  return GatherFn.apply(dst, options.group, tensor);
}

/**
 * Entry r of rank `src`'s `tensors` (one per rank, of one shape) on rank r,
 * as a new tensor (`torch.distributed.nn.functional.scatter`). As in
 * PyTorch every rank passes a list of one tensor per rank (the other ranks'
 * values are unused: they give the output's shape, dtype and device).
 * Backward: the gradients are gathered on rank `src` into its tensors'
 * gradients; the other ranks' tensors get zeros. With a `group`, `src` is a
 * rank of the whole group (1.13 compares it with the rank in the group, as
 * in {@link gather}).
 *
 * @example
 * ```ts
 * const mine = distributed.nn.functional.scatter(chunks, 0); // rank r: rank 0's chunks[r]
 * ```
 */
export function scatter(
  tensors: readonly Tensor[],
  src = 0,
  options: FunctionalGroupOptions = {},
): Tensor {
  if (!Array.isArray(tensors)) {
    throw new TypeError(`scatter: tensors must be a list of Tensors, got ${String(tensors)}`);
  }
  return ScatterFn.apply(src, options.group, ...tensors);
}

/**
 * The elementwise combination (`op`, default sum) of every rank's `tensor`
 * on rank `dst`, as a new tensor; on the other ranks a copy of their own
 * `tensor` (`torch.distributed.nn.functional.reduce`; gloo may leave partial
 * sums there). Backward (1.13's): rank `dst`'s gradient is broadcast, so
 * every rank gets it, also for `op`s other than sum (where it is not the
 * derivative: avg would need it divided by the world size, max/min/product
 * a mask or the other factors), and the non-`dst` ranks' own use of their
 * output adds nothing.
 *
 * @example
 * ```ts
 * const total = distributed.nn.functional.reduce(x, 0); // on rank 0: the sum of every x
 * ```
 */
export function reduce(
  tensor: Tensor,
  dst: number,
  options: FunctionalReduceOptions = {},
): Tensor {
  checkTensor("reduce", "tensor", tensor);
  return ReduceFn.apply(dst, options.op ?? "sum", options.group, tensor);
}

/**
 * The combination (`op`, default sum) over the ranks of their
 * `inputList[rank]` (each of `output`'s shape), as a new tensor
 * (`torch.distributed.nn.functional.reduce_scatter`). `output` gives the
 * shape, dtype and device only: unlike PyTorch, which fills `output` in
 * place and returns it, it is left as it was. Backward (1.13's): the
 * gradients are all-gathered, `inputList[q]` getting rank q's gradient on
 * every rank, for every `op` (only right for sum).
 *
 * @example
 * ```ts
 * // rank r: the sum over ranks of their parts[r]
 * const mine = distributed.nn.functional.reduceScatter(zeros([4]), parts);
 * ```
 */
export function reduceScatter(
  output: Tensor,
  inputList: readonly Tensor[],
  options: FunctionalReduceOptions = {},
): Tensor {
  checkTensor("reduceScatter", "output", output);
  if (!Array.isArray(inputList)) {
    throw new TypeError(
      `reduceScatter: inputList must be a list of Tensors, got ${String(inputList)}`,
    );
  }
  return ReduceScatterFn.apply(options.op ?? "sum", options.group, output, ...inputList);
}

/**
 * Every rank's `tensor`, in rank order, as new tensors
 * (`torch.distributed.nn.functional.all_gather`). Backward (1.13's gloo
 * path): each rank's gradients are exchanged by all-to-all, and rank r's
 * input gets the sum, in rank order, of what every rank received for entry r.
 *
 * @example
 * ```ts
 * // a contrastive loss over every rank's embeddings, differentiable into this rank's
 * const all = cat(distributed.nn.functional.allGather(embeddings));
 * ```
 */
export function allGather(tensor: Tensor, options: FunctionalGroupOptions = {}): Tensor[] {
  checkTensor("allGather", "tensor", tensor);
  return AllGatherFn.apply(options.group, tensor);
}

/**
 * Rank q's `inputTensorList[rank]` as entry q of a new list
 * (`torch.distributed.nn.functional.all_to_all`). `outputTensorList` gives
 * the shapes only (unlike PyTorch, it is not filled in place): entry q
 * must have as many elements as rank q's `inputTensorList[rank]`, as in
 * the plain `distributed.allToAll`. Backward: the gradients go back by
 * all-to-all, each to the rank and shape its input came from.
 *
 * @example
 * ```ts
 * const got = distributed.nn.functional.allToAll([zeros([2]), zeros([2])], [a, b]);
 * ```
 */
export function allToAll(
  outputTensorList: readonly Tensor[],
  inputTensorList: readonly Tensor[],
  options: FunctionalGroupOptions = {},
): Tensor[] {
  if (!Array.isArray(inputTensorList)) {
    throw new TypeError(
      `allToAll: inputTensorList must be a list of Tensors, got ${String(inputTensorList)}`,
    );
  }
  return AllToAllFn.apply(options.group, outputTensorList, ...inputTensorList);
}

/**
 * `input`'s dim 0 split into one part per rank, part q to rank q; the parts
 * received, in rank order, as a new tensor of `output`'s shape
 * (`torch.distributed.nn.functional.all_to_all_single`; `output` is not
 * filled in place, unlike PyTorch), with `inputSplitSizes` and
 * `outputSplitSizes` as in the plain `distributed.allToAllSingle` (default
 * equal parts). Backward: the gradient goes back by all-to-all with the
 * split sizes swapped.
 *
 * @example
 * ```ts
 * const out = distributed.nn.functional.allToAllSingle(zeros([4, 3]), x); // x: [4, 3]
 * ```
 */
export function allToAllSingle(
  output: Tensor,
  input: Tensor,
  options: AllToAllSingleOptions = {},
): Tensor {
  checkTensor("allToAllSingle", "output", output);
  checkTensor("allToAllSingle", "input", input);
  return AllToAllSingleFn.apply(
    options.group,
    output,
    options.outputSplitSizes,
    options.inputSplitSizes,
    input,
  );
}

/**
 * The elementwise combination (`op`, default sum) of every rank's `tensor`,
 * as a new tensor on every rank (`torch.distributed.nn.functional.all_reduce`).
 * Backward (1.13's): an all-reduce of the gradients with the same `op`,
 * which is the derivative for sum and avg only (for max, min and product
 * it is not: PyTorch does the same without saying so).
 *
 * @example
 * ```ts
 * const total = distributed.nn.functional.allReduce(x); // the sum of every rank's x
 * total.sum().backward(); // x.grad: worldSize on every rank
 * ```
 */
export function allReduce(tensor: Tensor, options: FunctionalReduceOptions = {}): Tensor {
  checkTensor("allReduce", "tensor", tensor);
  return AllReduceFn.apply(options.op ?? "sum", options.group, tensor);
}
