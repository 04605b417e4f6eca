/**
 * PyTorch 1.13's remaining tensor collectives: `all_gather_into_tensor`
 * and `reduce_scatter_tensor` (the public names of `_all_gather_base` and
 * `_reduce_scatter_base`), and the coalesced `all_reduce_coalesced` and
 * `all_gather_coalesced`, which move several tensors in ONE collective
 * (one header check, one device read, one exchange). In stream order like
 * the others: they return at once, later ops and reads see the result.
 * @module
 */

import { empty } from "../ops/util.ts";
import { formatShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import type { DistributedGroup, ReduceOp } from "./backend.ts";
import {
  type GroupOptions,
  reduceScatter,
  type ReduceScatterOptions,
  Work,
} from "./collectives.ts";
import { allGatherOnHost, allReduceInPlace, writeFlat } from "./host.ts";
import { checkReduceOp } from "./reduce_op.ts";
import { activeGroup } from "./state.ts";

function describe(t: Tensor): string {
  return `${t.dtype} ${formatShape(t.shape)} on ${t.device}`;
}

function checkTensor(op: string, t: unknown, name: string): asserts t is Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`${op}: ${name} must be a Tensor, got ${t === null ? "null" : typeof t}`);
  }
}

/** A non-empty list of tensors of one dtype and one device (what one collective moves). */
function checkTensorList(op: string, name: string, list: unknown): readonly Tensor[] {
  if (!Array.isArray(list) || list.length === 0) {
    throw new TypeError(
      `${op}: ${name} must be a non-empty array of tensors, got ${
        Array.isArray(list) ? "an empty array" : String(list)
      }`,
    );
  }
  list.forEach((t, i) => checkTensor(op, t, `${name}[${i}]`));
  const first = list[0] as Tensor;
  list.forEach((t: Tensor, i) => {
    if (t.dtype !== first.dtype || t.device !== first.device) {
      throw new TypeError(
        `${op}: every tensor of ${name} must have one dtype and one device (they travel as one), but ${name}[0] is ${
          describe(first)
        } and ${name}[${i}] is ${describe(t)}`,
      );
    }
  });
  return list;
}

/**
 * `torch.distributed.all_gather_into_tensor` (1.13's `_all_gather_base`):
 * writes every rank's `input`, in rank order, into `output`, in place.
 * `output`'s shape is `input`'s with dim 0 times `worldSize`
 * (concatenated) or `[worldSize, ...input.shape]` (stacked); one dtype,
 * one device.
 *
 * @example
 * ```ts
 * // 2 ranks: rank r's input is [r, r]
 * const output = zeros([4]);
 * distributed.allGatherIntoTensor(output, input); // [0, 0, 1, 1] on both ranks
 * ```
 */
export function allGatherIntoTensor(
  output: Tensor,
  input: Tensor,
  options: GroupOptions = {},
): Work {
  const name = "allGatherIntoTensor";
  checkTensor(name, output, "output");
  checkTensor(name, input, "input");
  const group = activeGroup(name, options.group);
  const n = group.worldSize;
  if (output.dtype !== input.dtype || output.device !== input.device) {
    throw new TypeError(
      `${name}: output and input must have one dtype and one device, got output ${
        describe(output)
      } and input ${describe(input)}`,
    );
  }
  const [o, i] = [output.shape, input.shape];
  const concatenated = i.length > 0 && o.length === i.length && o[0] === n * i[0] &&
    o.every((d, k) => k === 0 || d === i[k]);
  const stacked = o.length === i.length + 1 && o[0] === n && i.every((d, k) => d === o[k + 1]);
  if (!concatenated && !stacked) {
    throw new RangeError(
      `${name}: output must hold worldSize (${n}) copies of input's shape along dim 0 (input ${
        formatShape(i)
      }: output ${
        i.length > 0 ? `[${n * i[0]}${i.slice(1).map((d) => `, ${d}`).join("")}] or ` : ""
      }${formatShape([n, ...i])}), got output ${formatShape(o)}`,
    );
  }
  const call = group.call({ kind: "allGather", dtype: input.dtype, shapes: [input.shape] });
  const gathered = allGatherOnHost(group, call, [input], name);
  writeFlat([output], gathered);
  return new Work(gathered);
}

/**
 * `torch.distributed.reduce_scatter_tensor` (1.13's `_reduce_scatter_base`)
 * by its PyTorch name: the same as {@link reduceScatter}, which already
 * takes one input tensor of `worldSize` parts.
 */
export function reduceScatterTensor(
  output: Tensor,
  input: Tensor,
  options: ReduceScatterOptions = {},
): Work {
  return reduceScatter(output, input, options);
}

/** Options of {@link allReduceCoalesced}. */
export interface AllReduceCoalescedOptions {
  /** How values combine over the ranks (default `"sum"`; `"avg"` needs a float dtype, the bitwise ops int32). */
  op?: ReduceOp;
  /** Among the ranks of this group only (from `newGroup`; default: every rank). */
  group?: DistributedGroup;
}

/**
 * `torch.distributed.all_reduce_coalesced`: {@link allReduce} of every
 * tensor of `tensors` (one dtype, one device; any shapes), in place, as ONE
 * collective. Every rank must pass tensors of the same shapes in the same
 * order (a difference is an error on every rank naming them).
 *
 * @example
 * ```ts
 * const [a, b] = [ones([2]).mul(rank + 1), ones([3, 2])];
 * distributed.allReduceCoalesced([a, b]); // 2 ranks: a = [3, 3], b = 2s
 * ```
 */
export function allReduceCoalesced(
  tensors: readonly Tensor[],
  options: AllReduceCoalescedOptions = {},
): Work {
  const name = "allReduceCoalesced";
  const list = checkTensorList(name, "tensors", tensors);
  const first = list[0];
  const op = checkReduceOp(name, options.op ?? "sum", first.dtype, first.shape);
  const group = activeGroup(name, options.group);
  const call = group.call({
    kind: "allReduce",
    dtype: first.dtype,
    shapes: list.map((t) => t.shape),
    op,
  });
  return new Work(allReduceInPlace(group, call, list, name));
}

/**
 * `torch.distributed.all_gather_coalesced`: every rank's `tensors` (one
 * dtype, one device; any shapes, the same on every rank), in ONE
 * collective. Returns `out[q][i]`, rank q's `tensors[i]`, as new tensors on
 * the tensors' device (PyTorch fills `output_tensor_lists[q][i]`).
 * PyTorch deprecates it; it is here for code that still calls it.
 */
export function allGatherCoalesced(
  tensors: readonly Tensor[],
  options: GroupOptions = {},
): Tensor[][] {
  const name = "allGatherCoalesced";
  const list = checkTensorList(name, "tensors", tensors);
  const { dtype, device } = list[0];
  const group = activeGroup(name, options.group);
  const call = group.call({ kind: "allGather", dtype, shapes: list.map((t) => t.shape) });
  const outs = Array.from(
    { length: group.worldSize },
    () => list.map((t) => empty(t.shape, dtype, device)),
  );
  writeFlat(outs.flat(), allGatherOnHost(group, call, list, name));
  return outs;
}
