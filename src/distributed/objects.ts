/**
 * The object collectives (`torch.distributed`'s `all_gather_object`,
 * `broadcast_object_list`, `gather_object` and `scatter_object_list`):
 * JavaScript values instead of tensors, for metrics, configs and the like.
 * Values are encoded with structured-clone semantics (see
 * {@link allGatherObject} for what can be sent) and moved as int32 tensors
 * on the cpu device by the tensor collectives, as PyTorch pickles them into
 * byte tensors: first every rank's byte length, then the bytes padded to the
 * longest.
 *
 * Unlike the tensor collectives these wait (as PyTorch's do): each is two
 * collectives, the second called once the first is done, so await one
 * before calling the next collective.
 * @module
 */

import { device } from "../device.ts";
import { tensor, zeros } from "../ops/factory.ts";
import { Tensor } from "../tensor.ts";
import { DistributedError } from "./backend.ts";
import { allGather, broadcast, type BroadcastOptions, type GroupOptions } from "./collectives.ts";
import { gather, type GatherOptions, scatter, type ScatterOptions } from "./scatter_gather.ts";
import { activeGroup, groupRankOf, type ProcessGroup } from "./state.ts";
import { decodeValue, encodeValue } from "./value_codec.ts";

/*
 * A value that cannot be encoded (or a bad list) is known on one rank only.
 * Throwing there before communicating would leave the other ranks waiting
 * in the exchange until timeoutMs, and break the group. So every rank still
 * takes part in the first exchange (the lengths), sending FAILED instead;
 * then every rank sees who failed at once: that rank raises its own error,
 * the others a DistributedError naming it, nobody starts the second
 * exchange, and the group stays usable. Arguments every rank must agree on
 * (`src`, `dst`, `group`) are checked before, as the tensor collectives do.
 */
const FAILED = -1;

/** This rank's part of the first exchange, or the error it raises after it. */
type Prepared<T> = { ok: true; value: T; sizes: number[] } | { ok: false; error: unknown };

function prepare<T>(
  width: number,
  body: () => { value: T; sizes: number[] },
): Prepared<T> {
  try {
    const { value, sizes } = body();
    if (sizes.length !== width) throw new Error("internal: wrong number of sizes");
    return { ok: true, value, sizes };
  } catch (error) {
    return { ok: false, error };
  }
}

function encode(op: string, value: unknown, at = ""): Uint8Array {
  const bytes = encodeValue(value, { op, at, describe: describeTensor });
  if (bytes.length > 2 ** 31 - 1) {
    throw new RangeError(
      `${op}: the value${
        at ? ` at ${at}` : ""
      } takes ${bytes.length} bytes encoded, more than the 2^31 - 1 an int32 length holds`,
    );
  }
  return bytes;
}

function describeTensor(value: object): string | undefined {
  return value instanceof Tensor
    ? "a multigrad Tensor: send tensors with the tensor collectives (allGather, broadcast, gather, scatter), or send its values, await t.toArray()"
    : undefined;
}

function cpu() {
  // The host: a rank whose default device is webgpu still moves bytes here.
  return device("cpu");
}

/** `bytes` as int32 words (its bytes in memory order), zero-padded to `words`. */
function pack(bytes: Uint8Array, words: number): Int32Array {
  const out = new Int32Array(words);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

const wordsFor = (bytes: number) => Math.ceil(bytes / 4);

/** The values of `parts`, then `parts` and `also` disposed. */
async function dataOf(parts: readonly Tensor[], ...also: Tensor[]): Promise<Int32Array[]> {
  try {
    return (await Promise.all(parts.map((p) => p.data()))) as Int32Array[];
  } finally {
    for (const p of [...parts, ...also]) p.dispose();
  }
}

function decodeEach(all: readonly Int32Array[], sizes: readonly Int32Array[]): unknown[] {
  return all.map((w, q) => decodeValue(new Uint8Array(w.buffer, w.byteOffset, sizes[q][1])));
}

/**
 * Every rank's `[status, ...sizes]` (status 0, or FAILED), after raising
 * this rank's error, or one naming the ranks that failed.
 */
async function exchangeSizes(
  op: string,
  group: ProcessGroup,
  groupOption: GroupOptions["group"],
  mine: Prepared<unknown>,
  width: number,
): Promise<Int32Array[]> {
  const row = mine.ok ? [0, ...mine.sizes] : [FAILED, ...new Array(width).fill(0)];
  const t = tensor(Int32Array.from(row), { device: cpu() });
  const rows = await dataOf(allGather(t, { group: groupOption }), t);
  if (!mine.ok) throw mine.error;
  const failed = rows.flatMap((r, q) => r[0] === FAILED ? [group.members?.[q] ?? q] : []);
  if (failed.length > 0) {
    throw new DistributedError(
      `${op}: ${failed.length === 1 ? "rank" : "ranks"} ${
        failed.join(", ")
      } could not send (the error raised there says why); nothing was exchanged, and the group remains usable`,
      failed,
    );
  }
  return rows;
}

/**
 * `obj` encoded on this rank, every rank's byte length (after the first
 * exchange), the longest in int32 words, and this rank's bytes padded to it
 * as a cpu tensor: the first half of allGatherObject and gatherObject.
 */
async function encodedEveryRank(
  op: string,
  group: ProcessGroup,
  groupOption: GroupOptions["group"],
  obj: unknown,
): Promise<{ sizes: Int32Array[]; words: number; t: Tensor }> {
  const mine = prepare(1, () => {
    const bytes = encode(op, obj);
    return { value: bytes, sizes: [bytes.length] };
  });
  const sizes = await exchangeSizes(op, group, groupOption, mine, 1);
  const words = wordsFor(Math.max(...sizes.map((s) => s[1])));
  const t = tensor(pack(mine.ok ? mine.value : new Uint8Array(0), words), { device: cpu() });
  return { sizes, words, t };
}

/**
 * Every rank's `obj`, in rank order (`torch.distributed.all_gather_object`;
 * with `group`, its ranks' in its order). PyTorch fills an output list in
 * place; this returns a new array. Every rank must call it, and await it
 * before its next collective.
 *
 * Values travel with structured-clone semantics: `undefined`, `null`,
 * booleans, numbers (NaN, ±Infinity, -0), bigints, strings, arrays (holes
 * kept), plain objects (own enumerable string keys, in order), `Map`,
 * `Set`, `Date`, `RegExp`, `ArrayBuffer`, typed arrays and `DataView` (a
 * view sends its whole buffer), nested, with shared references and cycles
 * kept. Anything else (a function, a symbol, a class instance, a Tensor:
 * use the tensor collectives, or `await t.toArray()`) is a TypeError on
 * that rank naming the path to it (`allGatherObject: cannot send value at
 * .metrics.fn (a function)`); every other rank then raises a
 * {@link DistributedError} naming that rank, at once, not after timeoutMs.
 *
 * @example
 * ```ts
 * const all = await distributed.allGatherObject({ rank, loss }); // [{ rank: 0, loss: ... }, ...]
 * ```
 */
export async function allGatherObject(
  obj: unknown,
  options: GroupOptions = {},
): Promise<unknown[]> {
  const op = "allGatherObject";
  const group = activeGroup(op, options.group);
  const { sizes, t } = await encodedEveryRank(op, group, options.group, obj);
  return decodeEach(await dataOf(allGather(t, options), t), sizes);
}

/**
 * Replaces the elements of `objects` on every rank by rank `src`'s, in
 * place (`torch.distributed.broadcast_object_list`); `src`'s list keeps its
 * own. The lists must have the same length on every rank: a mismatch is a
 * {@link DistributedError} on every rank naming each rank's length. What
 * can be sent, and the errors when something cannot: see
 * {@link allGatherObject} (paths start at the list: `[2].fn`).
 *
 * @example
 * ```ts
 * const config = [rank === 0 ? { lr: 0.1, layers: [64, 64] } : null];
 * await distributed.broadcastObjectList(config, { src: 0 }); // config[0] is rank 0's on every rank
 * ```
 */
export async function broadcastObjectList(
  objects: unknown[],
  options: BroadcastOptions,
): Promise<void> {
  const op = "broadcastObjectList";
  const group = activeGroup(op, options.group);
  const src = groupRankOf(op, group, options.src, "src");
  const mine = prepare(2, () => {
    if (!Array.isArray(objects)) {
      throw new TypeError(
        `${op}: objects must be an array, got ${objects === null ? "null" : typeof objects}`,
      );
    }
    const bytes = group.rank === src ? encode(op, objects) : new Uint8Array(0);
    return { value: bytes, sizes: [objects.length, bytes.length] };
  });
  const sizes = await exchangeSizes(op, group, options.group, mine, 2);
  const lengths = sizes.map((s) => s[1]);
  if (lengths.some((n) => n !== lengths[src])) {
    const whole = (q: number) => group.members?.[q] ?? q;
    throw new DistributedError(
      `${op}: objects must have the same length on every rank, got ${
        lengths.map((n, q) => `rank ${whole(q)}: ${n}`).join(", ")
      }`,
      lengths.flatMap((n, q) => n === lengths[src] ? [] : [whole(q)]),
    );
  }
  const byteLength = sizes[src][2];
  const words = wordsFor(byteLength);
  const t = group.rank === src && mine.ok
    ? tensor(pack(mine.value, words), { device: cpu() })
    : zeros([words], { dtype: "int32", device: cpu() });
  broadcast(t, options);
  const [received] = await dataOf([t]);
  if (group.rank === src) return;
  const list = decodeValue(new Uint8Array(received.buffer, received.byteOffset, byteLength));
  // Holes in src's list become holes here too (forEach would skip them and keep this rank's).
  const values = list as unknown[];
  for (let i = 0; i < values.length; i++) {
    if (i in values) objects[i] = values[i];
    else delete objects[i];
  }
}

/**
 * Rank `dst` receives every rank's `obj`, in rank order, as a new array
 * (`torch.distributed.gather_object`, which fills a list in place); the
 * other ranks get null. `dst` defaults to 0 (a group's first rank). What
 * can be sent, and the errors when something cannot: see
 * {@link allGatherObject}.
 */
export async function gatherObject(
  obj: unknown,
  options: GatherOptions = {},
): Promise<unknown[] | null> {
  const op = "gatherObject";
  const group = activeGroup(op, options.group);
  const given = options.dst ?? group.members?.[0] ?? 0;
  const dst = groupRankOf(op, group, given, "dst");
  const { sizes, words, t } = await encodedEveryRank(op, group, options.group, obj);
  const list = group.rank === dst
    ? sizes.map(() => zeros([words], { dtype: "int32", device: cpu() }))
    : null;
  const work = gather(t, list, { dst: given, group: options.group });
  if (!list) {
    try {
      await work;
    } finally {
      t.dispose();
    }
    return null;
  }
  return decodeEach(await dataOf(list, t), sizes);
}

/**
 * Rank `src` passes `scatterList`, one value per rank of the group (in
 * its order); every rank gets its entry, as the returned value
 * (`torch.distributed.scatter_object_list` writes it into
 * `scatter_object_output_list[0]` instead). The other ranks' `scatterList`
 * is ignored (pass null), as in PyTorch. `src` defaults to 0 (a group's
 * first rank). A `scatterList` on `src` that is not an array of group-size
 * values is an error there, and a {@link DistributedError} naming `src` on
 * the others, at once. What can be sent: see {@link allGatherObject} (paths
 * start at the list: `[2].fn`).
 */
export async function scatterObjectList(
  scatterList: unknown[] | null,
  options: ScatterOptions = {},
): Promise<unknown> {
  const op = "scatterObjectList";
  const group = activeGroup(op, options.group);
  const given = options.src ?? group.members?.[0] ?? 0;
  const src = groupRankOf(op, group, given, "src");
  const n = group.worldSize;
  const isSource = group.rank === src;
  const mine = prepare(n, () => {
    if (!isSource) return { value: [], sizes: new Array(n).fill(0) };
    if (!Array.isArray(scatterList) || scatterList.length !== n) {
      throw new RangeError(
        `${op}: scatterList on src (rank ${given}) must hold one value per rank of the group (${n}), got ${
          Array.isArray(scatterList) ? `an array of ${scatterList.length}` : String(scatterList)
        }`,
      );
    }
    const parts = scatterList.map((value, q) => encode(op, value, `[${q}]`));
    return { value: parts, sizes: parts.map((p) => p.length) };
  });
  // Only src knows the sizes (and whether it failed): it broadcasts them.
  const row = mine.ok ? [0, ...mine.sizes] : [FAILED, ...new Array(n).fill(0)];
  const header = tensor(Int32Array.from(row), { device: cpu() });
  broadcast(header, { src: given, group: options.group });
  const sizes = (await dataOf([header]))[0];
  if (!mine.ok) throw mine.error;
  if (sizes[0] === FAILED) {
    throw new DistributedError(
      `${op}: src (rank ${given}) could not send (the error raised there says why); nothing was exchanged, and the group remains usable`,
      [given],
    );
  }
  const words = wordsFor(Math.max(...sizes.subarray(1)));
  const output = zeros([words], { dtype: "int32", device: cpu() });
  const inputs = isSource
    ? (mine.value as Uint8Array[]).map((bytes) => tensor(pack(bytes, words), { device: cpu() }))
    : null;
  scatter(output, inputs, { src: given, group: options.group });
  const [mineReceived] = await dataOf([output], ...(inputs ?? []));
  const byteLength = sizes[1 + group.rank];
  return decodeValue(new Uint8Array(mineReceived.buffer, mineReceived.byteOffset, byteLength));
}
