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
import { DistributedError, type DistributedGroup, type ReduceOp } from "./backend.ts";
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

/** One dtype and one device for every tensor of `list`: those of `like` (named `likeName`). */
function checkKind(
  op: string,
  what: string,
  list: readonly unknown[],
  like: Tensor,
  likeName: string,
): void {
  list.forEach((t, i) => {
    if (t instanceof Tensor && t.dtype === like.dtype && t.device === like.device) return;
    throw new TypeError(
      `${op}: every tensor of ${what} must be ${like.dtype} on ${like.device} (as ${likeName}), but ${what}[${i}] is ${
        t instanceof Tensor ? describe(t) : String(t)
      }`,
    );
  });
}

/**
 * Every pair's counts agree (rank p sends rank q what q expects from p), else the same error
 * on every rank, naming the pairs: `counts[p]` holds rank p's send counts, then its receive
 * counts, in elements.
 */
function checkCounts(op: string, counts: readonly ArrayLike<number>[], n: number): void {
  const wrong: string[] = [];
  const ranks = new Set<number>();
  for (let p = 0; p < n; p++) {
    for (let q = 0; q < n; q++) {
      const sent = counts[p][q];
      const expected = counts[q][n + p];
      if (sent === expected) continue;
      wrong.push(`rank ${p} sends ${sent} elements to rank ${q}, which expects ${expected}`);
      ranks.add(p).add(q);
    }
  }
  if (wrong.length === 0) return;
  throw new DistributedError(
    `${op}: the parts do not match across ranks (each rank's output part q must hold what rank q sends it): ${
      wrong.slice(0, 6).join("; ")
    }${wrong.length > 6 ? `; and ${wrong.length - 6} more` : ""}`,
    [...ranks].sort((x, y) => x - y),
  );
}

/**
 * The exchange of parts of any sizes: `send[q]` elements of the inputs (in order) go to rank q
 * and `receive[q]` come from rank q into the outputs (in order). First every rank gathers every
 * rank's counts, so that a disagreement is the same error on every rank; then the parts travel
 * as one equal all-to-all, each padded to the longest part of any rank.
 */
function unevenExchange(
  op: string,
  group: ProcessGroup,
  outputs: readonly Tensor[],
  inputs: readonly Tensor[],
  send: readonly number[],
  receive: readonly number[],
): Work {
  const { dtype } = inputs[0];
  const n = group.worldSize;
  const countsCall = group.call({ kind: "allGather", dtype: "int32", shapes: [[2 * n]] });
  const dataCall = group.reserveCall();
  const sending = inputs.filter((t) => t.numel() > 0);
  const values = sending.length > 0 ? readFlat(sending, op) : Promise.resolve(borrowHost(dtype, 0));
  const result = runOnHost(group, countsCall, values, async (host) => {
    const backend = group.backend;
    const counts = await backend.allGather(countsCall, Int32Array.from([...send, ...receive]));
    checkCounts(op, counts, n);
    // At least one element a part: no backend is asked to move an empty array.
    const longest = Math.max(1, ...counts.flatMap((c) => Array.from(c.subarray(0, n))));
    const call = dataCall({ kind: "allToAll", dtype, shapes: [[n, longest]] });
    const padded = borrowHost(dtype, n * longest);
    for (let q = 0, from = 0; q < n; from += send[q++]) {
      padded.set(host.subarray(from, from + send[q]), q * longest);
    }
    giveBackHost(host);
    let parts: TypedArray[];
    if (backend.allToAll) {
      const got = await backend.allToAll(call, padded);
      parts = Array.from({ length: n }, (_, q) => got.subarray(q * longest, (q + 1) * longest));
    } else {
      const r = group.rank;
      const all = await backend.allGather(call, padded);
      parts = all.map((whole) => whole.subarray(r * longest, (r + 1) * longest));
    }
    giveBackHost(padded);
    const out = borrowHost(dtype, receive.reduce((a, b) => a + b, 0));
    for (let q = 0, at = 0; q < n; at += receive[q++]) {
      out.set(parts[q].subarray(0, receive[q]), at);
    }
    return out;
  });
  writeFlat(outputs.filter((t) => t.numel() > 0), result);
  return new Work(result);
}

/**
 * `torch.distributed.all_to_all`: rank r sends `inputs[q]` to rank q and
 * receives rank q's `inputs[r]` into `outputs[q]`, in place. Every rank
 * passes one input and one output per rank, all of one dtype and device;
 * the tensors may differ in shape, but `outputs[q]` must have as many
 * elements as rank q's `inputs[r]` (else an error on every rank naming the
 * ranks and counts). The ranks first exchange their counts (one small
 * all-gather), then every part, padded to the longest.
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
  checkKind("allToAll", "inputs", inputs, inputs[0], "inputs[0]");
  checkKind("allToAll", "outputs", outputs, inputs[0], "inputs[0]");
  const numels = (list: readonly Tensor[]) => list.map((t) => t.numel());
  return unevenExchange("allToAll", group, outputs, inputs, numels(inputs), numels(outputs));
}

/** Options of {@link allToAllSingle}. */
export interface AllToAllSingleOptions extends GroupOptions {
  /**
   * Rows of `output`'s dim 0 that come from each rank, in rank order (PyTorch's
   * `output_split_sizes`); default `worldSize` equal parts.
   */
  outputSplitSizes?: readonly number[] | null;
  /**
   * Rows of `input`'s dim 0 that go to each rank, in rank order (PyTorch's
   * `input_split_sizes`); default `worldSize` equal parts.
   */
  inputSplitSizes?: readonly number[] | null;
}

/**
 * The split sizes given (checked: one per rank, whole numbers summing to `t`'s dim 0), null
 * when absent; an error naming them and `t`'s shape otherwise.
 */
function splitsOf(
  name: string,
  sizes: readonly number[] | null | undefined,
  t: Tensor,
  what: string,
  n: number,
): readonly number[] | null {
  if (sizes == null || sizes.length === 0) return null;
  const rows = t.shape[0];
  const whole = Array.isArray(sizes) && sizes.every((s) => Number.isInteger(s) && s >= 0);
  if (
    !whole || sizes.length !== n || rows === undefined || sizes.reduce((a, b) => a + b) !== rows
  ) {
    throw new RangeError(
      `allToAllSingle: ${name} ${
        Array.isArray(sizes) ? `[${sizes.join(", ")}]` : String(sizes)
      } must be ${n} whole numbers (one per rank) that sum to ${what}'s dim 0, but ${what} is ${
        formatShape(t.shape)
      }`,
    );
  }
  return sizes;
}

/**
 * `torch.distributed.all_to_all_single`: `input`'s dim 0 holds one part per
 * rank, part q for rank q; `output` (of `input`'s dtype and device) gets the
 * part each rank sent this one, in rank order, in place. Without split
 * sizes the parts are `worldSize` equal parts of dim 0 (and `output` has
 * `input`'s shape); with `inputSplitSizes` / `outputSplitSizes` they are
 * those rows, and `output`'s part q must hold as many elements as rank q
 * sends (else an error on every rank naming the ranks and counts). Pass
 * split sizes on every rank or on none: the two take different exchanges,
 * and a mix is a collective mismatch on every rank.
 *
 * @example
 * ```ts
 * // 2 ranks: rank 0 sends 1 row to itself and 2 to rank 1; rank 1 sends 3 to rank 0, 1 to itself
 * const input = rank === 0 ? zeros([3, 4]) : ones([4, 4]);
 * const [send, receive] = rank === 0 ? [[1, 2], [1, 3]] : [[3, 1], [2, 1]];
 * const output = zeros([receive[0] + receive[1], 4]);
 * distributed.allToAllSingle(output, input, { inputSplitSizes: send, outputSplitSizes: receive });
 * ```
 */
export function allToAllSingle(
  output: Tensor,
  input: Tensor,
  options: AllToAllSingleOptions = {},
): Work {
  checkTensor("allToAllSingle", output, "output");
  checkTensor("allToAllSingle", input, "input");
  const group = activeGroup("allToAllSingle", options.group);
  const n = group.worldSize;
  const sendRows = splitsOf("inputSplitSizes", options.inputSplitSizes, input, "input", n);
  const receiveRows = splitsOf("outputSplitSizes", options.outputSplitSizes, output, "output", n);
  if (sendRows || receiveRows) {
    checkKind("allToAllSingle", "output", [output], input, "input");
    // A tensor without split sizes splits into equal parts, as PyTorch's.
    const counts = (rows: readonly number[] | null, t: Tensor) => {
      const row = t.shape.length === 0 ? 1 : t.numel() / (t.shape[0] || 1);
      if (rows) return rows.map((r) => r * row);
      if (t.shape.length === 0 || t.shape[0] % n !== 0) {
        throw new RangeError(
          `allToAllSingle: a tensor without split sizes must split into worldSize (${n}) equal parts of dim 0, got ${
            formatShape(t.shape)
          }`,
        );
      }
      return Array.from({ length: n }, () => t.numel() / n);
    };
    const send = counts(sendRows, input);
    const receive = counts(receiveRows, output);
    return unevenExchange("allToAllSingle", group, [output], [input], send, receive);
  }
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
