/**
 * The collectives with a root or a part per rank (`torch.distributed`'s
 * `reduce`, `gather`, `scatter`, `all_to_all` and `all_to_all_single`), in
 * stream order like the others: they return a {@link Work} at once, and
 * later ops and reads on the tensors they fill see the result. A backend
 * that lacks one gets a composition of the basic collectives.
 * @module
 */

import type { DType, TypedArray } from "../dtype.ts";
import { formatShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import type { DistributedGroup, ReduceOp } from "./backend.ts";
import { type GroupOptions, Work } from "./collectives.ts";
import { borrowHost, giveBackHost, orderAfter, readFlat, runOnHost, writeFlat } from "./host.ts";
import { activeGroup, groupRankOf, type ProcessGroup } from "./state.ts";
import { checkReduceOp } from "./reduce_op.ts";

function describe(t: Tensor): string {
  return `${t.dtype} ${formatShape(t.shape)} on ${t.device}`;
}

/** Every tensor of `list` must be a Tensor of `like`'s shape, dtype and device. */
function checkLike(op: string, what: string, list: readonly unknown[], like: Tensor): void {
  list.forEach((t, i) => {
    const ok = t instanceof Tensor && t.dtype === like.dtype && t.device === like.device &&
      t.shape.length === like.shape.length && t.shape.every((d, k) => d === like.shape[k]);
    if (!ok) {
      throw new TypeError(
        `${op}: every tensor of ${what} must be ${
          describe(like)
        } (as the first), but ${what}[${i}] is ${t instanceof Tensor ? describe(t) : String(t)}`,
      );
    }
  });
}

function checkList(op: string, what: string, list: unknown, n: number): readonly Tensor[] {
  if (!Array.isArray(list) || list.length !== n) {
    throw new RangeError(
      `${op}: ${what} must hold one tensor per rank of the group (${n}), got ${
        Array.isArray(list) ? `${list.length}` : String(list)
      }`,
    );
  }
  return list;
}

function checkTensor(op: string, t: unknown, name: string): asserts t is Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`${op}: ${name} must be a Tensor, got ${t === null ? "null" : typeof t}`);
  }
}

/** Options of {@link reduce}. */
export interface ReduceOptions {
  /** The rank (of the whole group, as PyTorch's) whose tensor gets the result. */
  dst: number;
  /** How values combine (default `"sum"`; `"avg"` needs a float dtype). */
  op?: ReduceOp;
  /** Among the ranks of this group only (from `newGroup`; `dst` must be one). */
  group?: DistributedGroup;
}

/**
 * `torch.distributed.reduce`: replaces `t` on rank `dst` by the elementwise
 * combination (`op`) of every rank's `t`, combined in rank order; the other
 * ranks' `t` keep their values.
 *
 * @example
 * ```ts
 * const t = tensor([rank + 1]);
 * distributed.reduce(t, { dst: 0 }); // rank 0: [1 + 2 + ... + worldSize]; others unchanged
 * ```
 */
export function reduce(t: Tensor, options: ReduceOptions): Work {
  checkTensor("reduce", t, "t");
  const group = activeGroup("reduce", options?.group);
  const dst = groupRankOf("reduce", group, options?.dst, "dst");
  const op = checkReduceOp("reduce", options.op ?? "sum", t.dtype, t.shape);
  const call = group.call({ kind: "reduce", dtype: t.dtype, shapes: [t.shape], op, dst });
  const values = readFlat([t], "reduce");
  const result = runOnHost(group, call, values, async (host) => {
    const backend = group.backend;
    if (backend.reduce) await backend.reduce(call, host);
    else await backend.allReduce(call, host);
    return host;
  });
  if (group.rank === dst) writeFlat([t], result);
  else orderAfter(t.device, result.then(giveBackHost));
  return new Work(result);
}

/**
 * The group and the root's rank in it (default: the group's first) of
 * `gather` or `scatter`, after checking that the root passed a list of one
 * tensor like `t` per rank and the others none (as PyTorch).
 */
function rootAndList(
  op: "gather" | "scatter",
  t: Tensor,
  list: readonly Tensor[] | null | undefined,
  rootName: "dst" | "src",
  given: number | undefined,
  groupOption: DistributedGroup | undefined,
): { group: ProcessGroup; root: number } {
  const listName = `${op}List`;
  checkTensor(op, t, op === "gather" ? "t" : "output");
  const group = activeGroup(op, groupOption);
  const root = groupRankOf(op, group, given ?? group.members?.[0] ?? 0, rootName);
  if (group.rank === root) {
    checkLike(op, listName, checkList(op, listName, list, group.worldSize), t);
  } else if (list != null) {
    throw new TypeError(
      `${op}: ${listName} must not be given on a rank other than ${rootName} (${
        given ?? group.members?.[0] ?? 0
      }), as in PyTorch`,
    );
  }
  return { group, root };
}

/** Options of {@link gather}. */
export interface GatherOptions {
  /** The rank (of the whole group) that receives every rank's tensor (default 0 / the group's first). */
  dst?: number;
  /** Among the ranks of this group only (from `newGroup`; `dst` must be one). */
  group?: DistributedGroup;
}

/**
 * `torch.distributed.gather`: rank `dst` receives every rank's `t`, in rank
 * order, into `gatherList` (there: one tensor per rank, each of `t`'s
 * shape, dtype and device, filled in place); the other ranks pass none.
 */
export function gather(
  t: Tensor,
  gatherList?: readonly Tensor[] | null,
  options: GatherOptions = {},
): Work {
  const { group, root: dst } = rootAndList(
    "gather",
    t,
    gatherList,
    "dst",
    options.dst,
    options.group,
  );
  const call = group.call({ kind: "gather", dtype: t.dtype, shapes: [t.shape], dst });
  const values = readFlat([t], "gather");
  const result = runOnHost(group, call, values, async (host) => {
    const backend = group.backend;
    const parts = backend.gather
      ? await backend.gather(call, host)
      : await backend.allGather(call, host);
    giveBackHost(host);
    return parts && joined(t.dtype, parts);
  });
  if (gatherList && group.rank === dst) writeFlat(gatherList, result.then((all) => all!));
  else orderAfter(t.device, result);
  return new Work(result);
}

function joined(dtype: DType, parts: readonly TypedArray[]): TypedArray {
  const m = parts[0].length;
  const all = borrowHost(dtype, m * parts.length);
  parts.forEach((part, q) => all.set(part, q * m));
  return all;
}

/** Options of {@link scatter}. */
export interface ScatterOptions {
  /** The rank (of the whole group) whose `scatterList` is scattered (default 0 / the group's first). */
  src?: number;
  /** Among the ranks of this group only (from `newGroup`; `src` must be one). */
  group?: DistributedGroup;
}

/**
 * `torch.distributed.scatter`: rank `src` passes `scatterList` (one tensor
 * per rank, each of `output`'s shape, dtype and device); every rank's
 * `output` gets its entry, in place. The other ranks pass none.
 */
export function scatter(
  output: Tensor,
  scatterList?: readonly Tensor[] | null,
  options: ScatterOptions = {},
): Work {
  const { group, root: src } = rootAndList(
    "scatter",
    output,
    scatterList,
    "src",
    options.src,
    options.group,
  );
  const n = group.worldSize;
  const isSource = group.rank === src;
  const call = group.call({ kind: "scatter", dtype: output.dtype, shapes: [output.shape], src });
  const m = output.numel();
  const values = isSource
    ? readFlat(scatterList!, "scatter")
    : Promise.resolve(borrowHost(output.dtype, group.backend.scatter ? 0 : n * m));
  const result = runOnHost(group, call, values, async (host) => {
    const backend = group.backend;
    let out: TypedArray;
    if (backend.scatter) {
      out = borrowHost(output.dtype, m);
      await backend.scatter(call, host, out);
    } else {
      await backend.broadcast(call, host);
      out = host.slice(group.rank * m, (group.rank + 1) * m);
    }
    giveBackHost(host);
    return out;
  });
  writeFlat([output], result);
  return new Work(result);
}

/**
 * The exchange of {@link allToAll} and {@link allToAllSingle}: `inputs`
 * concatenated hold part q for rank q; `outputs` get the parts in rank order.
 */
function exchange(
  op: string,
  group: ProcessGroup,
  outputs: readonly Tensor[],
  inputs: readonly Tensor[],
  shapes: readonly (readonly number[])[],
): Work {
  const { dtype } = inputs[0];
  const n = group.worldSize;
  const call = group.call({ kind: "allToAll", dtype, shapes });
  const values = readFlat(inputs, op);
  const result = runOnHost(group, call, values, async (host) => {
    const backend = group.backend;
    if (backend.allToAll) {
      const out = await backend.allToAll(call, host);
      giveBackHost(host);
      return out;
    }
    // Every rank's whole array, of which this rank keeps part `rank` of each.
    const parts = await backend.allGather(call, host);
    const m = host.length / n;
    giveBackHost(host);
    const r = group.rank;
    return joined(dtype, parts.map((all) => all.subarray(r * m, (r + 1) * m)));
  });
  writeFlat(outputs, result);
  return new Work(result);
}

/**
 * `torch.distributed.all_to_all`: rank r sends `inputs[q]` to rank q and
 * receives rank q's `inputs[r]` into `outputs[q]`, in place. Every rank
 * passes one input and one output per rank, all of one shape, dtype and
 * device (unequal sizes per rank are not supported).
 *
 * @example
 * ```ts
 * // 2 ranks: rank r sends [10r + q] to rank q
 * const inputs = [0, 1].map((q) => tensor([10 * rank + q]));
 * const outputs = [zeros([1]), zeros([1])];
 * distributed.allToAll(outputs, inputs); // rank 0: [[0], [10]]; rank 1: [[1], [11]]
 * ```
 */
export function allToAll(
  outputs: readonly Tensor[],
  inputs: readonly Tensor[],
  options: GroupOptions = {},
): Work {
  const group = activeGroup("allToAll", options.group);
  const n = group.worldSize;
  checkList("allToAll", "inputs", inputs, n);
  checkList("allToAll", "outputs", outputs, n);
  checkTensor("allToAll", inputs[0], "inputs[0]");
  checkLike("allToAll", "inputs", inputs, inputs[0]);
  checkLike("allToAll", "outputs", outputs, inputs[0]);
  return exchange("allToAll", group, outputs, inputs, [[n, ...inputs[0].shape]]);
}

/**
 * `torch.distributed.all_to_all_single` with equal splits: `input`'s dim 0
 * holds `worldSize` equal parts, part q for rank q; `output` (of `input`'s
 * shape, dtype and device) gets the part each rank sent this one, in rank
 * order, in place.
 */
export function allToAllSingle(output: Tensor, input: Tensor, options: GroupOptions = {}): Work {
  checkTensor("allToAllSingle", output, "output");
  checkTensor("allToAllSingle", input, "input");
  const group = activeGroup("allToAllSingle", options.group);
  const n = group.worldSize;
  checkLike("allToAllSingle", "output", [output], input);
  if (input.shape.length === 0 || input.shape[0] % n !== 0) {
    throw new RangeError(
      `allToAllSingle: input's dim 0 must split into worldSize (${n}) equal parts, got input ${
        formatShape(input.shape)
      }`,
    );
  }
  return exchange("allToAllSingle", group, [output], [input], [input.shape]);
}
