/**
 * What the ranks of tests/distributed_objects_test.ts run: spawned as
 * Workers (its `main`) or under `mpiexec` (run as a script, writing each
 * rank's result as JSON to a file). Every rank checks what it received
 * against {@link expected} itself (under mpiexec the values could not cross
 * as JSON) and also returns the values, for the test to compare again.
 * @module
 */

import assert from "node:assert/strict";
import { distributed, requestDevices, setDefaultDevice, tensor } from "../mod.ts";

/** Rank q's value: a different kind and size per rank. */
export function valueOf(q: number): unknown {
  switch (q % 3) {
    case 0:
      return "";
    case 1:
      // About 360 KB encoded: several int32 words per rank over the transport.
      return {
        rank: q,
        text: "é€".repeat(40_000),
        weights: Float64Array.from({ length: 20_000 }, (_, i) => i / 7 - 1000),
      };
    default: {
      const key = { k: q };
      const shared = [1, 2];
      const node: Record<string, unknown> = {
        name: `rank ${q}`,
        nums: [NaN, -0, Infinity, -Infinity, 2 ** 60, 0.1],
        big: -(2n ** 70n) + 1n,
        when: new Date(Date.UTC(2024, 1, 29)),
        map: new Map<unknown, unknown>([[key, "object key"], ["s", new Set([1, "a", key])]]),
        a: shared,
        b: shared,
        lone: "x\uD800y",
      };
      node.self = node;
      return node;
    }
  }
}

/** A JSON-friendly line per check: "ok" or the assertion's message. */
function check(actual: unknown, expected: unknown): string {
  try {
    assert.deepStrictEqual(actual, expected);
    return "ok";
  } catch (error) {
    return (error as Error).message.slice(0, 2000);
  }
}

/** What a rank's scenario returns. */
export interface Received {
  rank: number;
  /** One line per operation: "ok" or why not. */
  checks: Record<string, string>;
  /** The received values (structured-cloned to the test; absent under mpiexec). */
  values?: Record<string, unknown>;
  /** Structure that deepStrictEqual does not see. */
  identity: Record<string, boolean>;
}

async function collectives(rank: number, n: number, backend: string): Promise<Received> {
  // Sent from the cpu device even where the rank's default device is another.
  const [device] = await requestDevices({ backend });
  setDefaultDevice(device);
  const values: Record<string, unknown> = {};
  const checks: Record<string, string> = {};
  const identity: Record<string, boolean> = {};
  const all = Array.from({ length: n }, (_, q) => valueOf(q));

  values.allGather = await distributed.allGatherObject(valueOf(rank));
  checks.allGather = check(values.allGather, all);
  const gathered = values.allGather as Record<string, unknown>[];
  if (n > 2) {
    identity.cycle = gathered[2].self === gathered[2];
    identity.shared = gathered[2].a === gathered[2].b;
    const map = gathered[2].map as Map<unknown, unknown>;
    const [key] = map.keys();
    identity.mapKey = (map.get("s") as Set<unknown>).has(key);
  }

  const src = n - 1;
  const original = { lr: 0.1, layers: [64, 64] };
  const list = rank === src ? [valueOf(2), original, valueOf(1), undefined] : ["x", null, 3, 4];
  await distributed.broadcastObjectList(list, { src });
  values.broadcast = list;
  checks.broadcast = check(list, [
    valueOf(2),
    { lr: 0.1, layers: [64, 64] },
    valueOf(1),
    undefined,
  ]);
  identity.srcKeepsItsOwn = rank !== src || list[1] === original;
  // Holes in src's list are holes on every rank, not this rank's old elements.
  // deno-lint-ignore no-sparse-arrays
  const sparse = rank === src ? [, "b", ,] : ["m0", "m1", "m2"];
  await distributed.broadcastObjectList(sparse, { src });
  identity.holesKept = !(0 in sparse) && sparse[1] === "b" && !(2 in sparse);

  values.gather = await distributed.gatherObject(valueOf(rank + 1), { dst: 1 });
  checks.gather = check(values.gather, rank === 1 ? all.map((_, q) => valueOf(q + 1)) : null);

  const scatterList = rank === 0 ? all.map((_, q) => valueOf(q + 2)) : null;
  values.scatter = await distributed.scatterObjectList(scatterList);
  checks.scatter = check(values.scatter, valueOf(rank + 2));
  return { rank, checks, values, identity };
}

/** Collectives of a `newGroup([n - 1, 0])` sub-group; rank 1 is not a member (3 ranks). */
async function grouped(rank: number, n: number): Promise<Received> {
  const group = await distributed.newGroup([n - 1, 0]);
  const checks: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  if (group.rank < 0) {
    const error = await distributed.allGatherObject(rank, { group }).then(() => null, (e) => e);
    checks.nonMember = check(
      error?.message,
      `allGatherObject: rank ${rank} is not a member of the group of ranks [0, ${
        n - 1
      }]: only its members may call its collectives`,
    );
  } else {
    values.allGather = await distributed.allGatherObject(valueOf(rank), { group });
    checks.allGather = check(values.allGather, [valueOf(0), valueOf(n - 1)]);
    const list = rank === n - 1 ? ["from", n - 1] : [null, null];
    await distributed.broadcastObjectList(list, { src: n - 1, group });
    checks.broadcast = check(list, ["from", n - 1]);
    values.gather = await distributed.gatherObject({ rank }, { dst: n - 1, group });
    checks.gather = check(values.gather, rank === n - 1 ? [{ rank: 0 }, { rank: n - 1 }] : null);
    // src defaults to the group's first rank (0); entries by rank in the group.
    const scatterList = rank === 0 ? ["to 0", new Map([["to", n - 1]])] : null;
    values.scatter = await distributed.scatterObjectList(scatterList, { group });
    checks.scatter = check(values.scatter, rank === 0 ? "to 0" : new Map([["to", n - 1]]));
  }
  // The whole group goes on.
  values.world = await distributed.allGatherObject(rank * 10);
  checks.world = check(values.world, Array.from({ length: n }, (_, q) => q * 10));
  return { rank, checks, values, identity: {} };
}

/** An error as plain data, with how long the call took. */
export interface Caught {
  name: string;
  message: string;
  ranks?: number[];
  ms: number;
}

async function caught(fn: () => Promise<unknown>): Promise<Caught | null> {
  const start = performance.now();
  try {
    await fn();
    return null;
  } catch (error) {
    const ranks = error instanceof distributed.DistributedError ? [...error.ranks] : undefined;
    const e = error as Error;
    return { name: e.name, message: e.message, ranks, ms: performance.now() - start };
  }
}

class Metrics {
  loss = 1;
}

/** Each rank's errors, by case; `last` (n - 1) is the rank at fault where one is. */
async function errors(rank: number, n: number): Promise<Record<string, unknown>> {
  const last = n - 1;
  const out: Record<string, unknown> = {};
  out.function = await caught(() =>
    distributed.allGatherObject(rank === last ? { metrics: { fn: () => 1 } } : { rank })
  );
  out.afterFunction = await distributed.allGatherObject(rank);
  out.tensor = await caught(() =>
    distributed.gatherObject(rank === last ? tensor([1, 2]) : rank, { dst: 0 })
  );
  out.lengths = await caught(() =>
    distributed.broadcastObjectList(rank === 0 ? [1, 2] : [1, 2, 3], { src: last })
  );
  out.symbol = await caught(() =>
    distributed.broadcastObjectList(rank === 0 ? [1, Symbol("s")] : [0, 0], { src: 0 })
  );
  out.notArray = await caught(() =>
    distributed.broadcastObjectList(rank === last ? ("abc" as unknown as unknown[]) : [0], {
      src: 0,
    })
  );
  out.scatterLength = await caught(() =>
    distributed.scatterObjectList(rank === last ? [1] : null, { src: last })
  );
  out.scatterInstance = await caught(() =>
    distributed.scatterObjectList(
      rank === 0
        ? Array.from({ length: n }, (_, q) => ({ x: q === last ? new Metrics() : q }))
        : null,
      { src: 0 },
    )
  );
  out.badSrc = await caught(() => distributed.broadcastObjectList([1], { src: n }));
  out.badDst = await caught(() => distributed.gatherObject(1, { dst: -1 }));
  out.badScatterSrc = await caught(() => distributed.scatterObjectList(null, { src: 0.5 }));
  // No error broke the group.
  out.after = await distributed.allGatherObject(`rank ${rank}`);
  return out;
}

/** Runs `scenario` on this rank (spawn calls it with the process group initialised). */
export async function main(
  rank: number,
  worldSize: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<unknown> {
  switch (scenario) {
    case "collectives":
      return await collectives(rank, worldSize, (options.backend as string) ?? "cpu");
    case "grouped":
      return await grouped(rank, worldSize);
    case "errors":
      return await errors(rank, worldSize);
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under mpiexec: `deno run -A tests/distributed_objects_ranks.ts OUT_PREFIX SCENARIO JSON_OPTIONS`.
if (import.meta.main) {
  const [out, scenario, json] = Deno.args;
  const options = JSON.parse(json ?? "{}");
  await distributed.initProcessGroup({ timeoutMs: options.timeoutMs ?? 60_000 });
  const rank = distributed.getRank();
  const result = await main(rank, distributed.getWorldSize(), scenario, options) as Received;
  // Maps, typed arrays and bigints do not survive JSON: the checks the rank made stand for them.
  if (scenario !== "errors") delete result.values;
  await Deno.writeTextFile(`${out}.${rank}.json`, JSON.stringify(result));
  await distributed.destroyProcessGroup();
}
