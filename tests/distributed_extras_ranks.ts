/**
 * What the ranks of tests/distributed_extras_test.ts run: spawned as
 * Workers (its `main`) or under `mpiexec` (run as a script, writing each
 * rank's result as JSON to a file), or as a plain subprocess that only
 * uses a store. Every expected value here is computed from the inputs with
 * plain loops (BigInt for int32 products), apart from the library.
 * @module
 */

import { distributed, requestDevices, setDefaultDevice, tensor, zeros } from "../mod.ts";

/** Rank r's int32 values: signs, large values whose products wrap, bit patterns. */
export function intsOf(r: number): number[] {
  return [r + 1, -(r + 2) * 3, 100_003 * (r + 1), 0x0f0f << r, (r * 7919) ^ 0x5a5a, -1 - r];
}

/** Rank r's float32 values. */
export function floatsOf(r: number): number[] {
  return [1.5 * (r + 1), -0.25 - r, 3 / (r + 1), 1e10 * (r + 1), -7, 0.1 * r];
}

/** The elementwise `op` over ranks 0..n-1 of `values`, combined in rank order with plain loops. */
export function expectedOf(
  op: string,
  n: number,
  values: (r: number) => number[],
  int: boolean,
): number[] {
  const rows = Array.from({ length: n }, (_, r) => values(r));
  const round = int ? (x: number) => x | 0 : Math.fround;
  return rows[0].map((_, i) => {
    const col = rows.map((row) => round(row[i]));
    switch (op) {
      case "sum":
        return col.reduce((a, b) => round(a + b));
      case "avg":
        return round(col.reduce((a, b) => round(a + b)) / n);
      case "product":
        return int
          ? Number(BigInt.asIntN(32, col.reduce((a, b) => a * BigInt(b), 1n)))
          : col.reduce((a, b) => round(a * b));
      case "max":
        return Math.max(...col);
      case "min":
        return Math.min(...col);
      case "band":
        return col.reduce((a, b) => a & b);
      case "bor":
        return col.reduce((a, b) => a | b);
      case "bxor":
        return col.reduce((a, b) => a ^ b);
      default:
        throw new Error(op);
    }
  });
}

const INT_OPS = ["sum", "product", "max", "min", "band", "bor", "bxor"];
const FLOAT_OPS = ["sum", "avg", "product", "max", "min"];

/** "ok" or what differs. */
function same(what: string, got: number[], want: number[]): string {
  const ok = got.length === want.length && got.every((v, i) => Object.is(v, want[i]));
  return ok ? "ok" : `${what}: got [${got}], want [${want}]`;
}

async function caught(fn: () => unknown): Promise<string> {
  try {
    await fn();
    return "no error";
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
}

/** Every ReduceOp through allReduce, reduce, reduceScatter and the coalesced and into-tensor collectives. */
async function ops(rank: number, n: number, backend: string): Promise<Record<string, unknown>> {
  const [device] = await requestDevices({ backend });
  setDefaultDevice(device);
  const checks: string[] = [];
  const kinds = [
    { dtype: "int32" as const, values: intsOf, list: INT_OPS },
    { dtype: "float32" as const, values: floatsOf, list: FLOAT_OPS },
  ];
  for (const { dtype, values, list } of kinds) {
    const int = dtype === "int32";
    for (const op of list) {
      const want = expectedOf(op, n, values, int);
      const options = { op: op as distributed.ReduceOp };
      const a = tensor(values(rank), { dtype });
      distributed.allReduce(a, options);
      checks.push(same(`allReduce ${op} ${dtype}`, Array.from(await a.data()), want));
      const b = tensor(values(rank), { dtype });
      distributed.reduce(b, { dst: n - 1, ...options });
      const kept = rank === n - 1 ? want : values(rank).map(int ? (x) => x | 0 : Math.fround);
      checks.push(same(`reduce ${op} ${dtype}`, Array.from(await b.data()), kept));
      // reduceScatterTensor: n parts of 2 elements, part q of rank r = values(r + q) slice.
      const parts = (r: number) =>
        Array.from({ length: n }, (_, q) => values(r).slice(q % 3 * 2, q % 3 * 2 + 2)).flat();
      const wantParts = expectedOf(op, n, parts, int);
      const out = zeros([2], { dtype });
      distributed.reduceScatterTensor(out, tensor(parts(rank), { dtype }), options);
      checks.push(
        same(
          `reduceScatterTensor ${op} ${dtype}`,
          Array.from(await out.data()),
          wantParts.slice(rank * 2, rank * 2 + 2),
        ),
      );
      // allReduceCoalesced: two tensors of other shapes, one collective.
      const v = values(rank);
      const c1 = tensor([v.slice(0, 2), v.slice(2, 4)], { dtype });
      const c2 = tensor(v.slice(4), { dtype });
      distributed.allReduceCoalesced([c1, c2], options);
      checks.push(
        same(
          `allReduceCoalesced ${op} ${dtype}`,
          [...await c1.data(), ...await c2.data()],
          want,
        ),
      );
      // ReduceOp members are the same strings.
      const m = tensor(values(rank), { dtype });
      const member = Object.entries(distributed.ReduceOp).find(([, v]) => v === op)![1];
      distributed.allReduce(m, { op: member });
      checks.push(same(`ReduceOp member ${op}`, Array.from(await m.data()), want));
    }
  }
  // allGatherIntoTensor, concatenated and stacked; allGatherCoalesced.
  const mine = tensor([[rank, 10 + rank]], { dtype: "int32" });
  const cat = zeros([n, 2], { dtype: "int32" });
  distributed.allGatherIntoTensor(cat, mine);
  const stacked = zeros([n, 1, 2], { dtype: "int32" });
  await distributed.allGatherIntoTensor(stacked, mine);
  const rows = Array.from({ length: n }, (_, q) => [q, 10 + q]).flat();
  checks.push(same("allGatherIntoTensor concatenated", Array.from(await cat.data()), rows));
  checks.push(same("allGatherIntoTensor stacked", Array.from(await stacked.data()), rows));
  const scalar = zeros([n]);
  distributed.allGatherIntoTensor(scalar, tensor(rank * 0.5));
  checks.push(
    same(
      "allGatherIntoTensor 0-d",
      Array.from(await scalar.data()),
      rows.filter((_, i) => i % 2 === 0).map((q) => q * 0.5),
    ),
  );
  const gathered = distributed.allGatherCoalesced([tensor([rank, -rank]), tensor([[rank * 3]])]);
  const flat = [];
  for (const list of gathered) for (const t of list) flat.push(...await t.data());
  const wantFlat = Array.from({ length: n }, (_, q) => [q, -q, q * 3]).flat();
  checks.push(same("allGatherCoalesced", flat.map((x) => x + 0), wantFlat.map((x) => x + 0)));
  checks.push(
    same(
      "allGatherCoalesced shapes",
      gathered.flat().map((t) => t.ndim),
      Array.from({ length: n }, () => [1, 2]).flat(),
    ),
  );
  const errors = {
    bitwiseFloat: await caught(() => distributed.allReduce(tensor([1.5]), { op: "bxor" })),
    unknownOp: await caught(() => distributed.allReduce(tensor([1]), { op: "prod" as "sum" })),
    avgInt: await caught(() =>
      distributed.allReduceCoalesced([tensor([1], { dtype: "int32" })], { op: "avg" })
    ),
    mixedDtypes: await caught(() =>
      distributed.allReduceCoalesced([tensor([1]), tensor([1], { dtype: "int32" })])
    ),
    emptyList: await caught(() => distributed.allGatherCoalesced([])),
    badOutput: await caught(() =>
      distributed.allGatherIntoTensor(zeros([n + 1, 2]), zeros([1, 2]))
    ),
    dtypeOutput: await caught(() =>
      distributed.allGatherIntoTensor(zeros([n, 2], { dtype: "int32" }), zeros([1, 2]))
    ),
    // A coalesced call whose shapes differ between ranks: an error on every rank.
    shapes: await caught(() =>
      distributed.allReduceCoalesced(
        rank === 0 ? [zeros([2]), zeros([3])] : [zeros([3]), zeros([2])],
      )
    ),
  };
  return { rank, checks: checks.filter((c) => c !== "ok"), count: checks.length, errors };
}

/** Subgroups and the rank maps, with collectives inside them (4 ranks). */
async function subgroups(rank: number, n: number): Promise<Record<string, unknown>> {
  const [mine, all] = await distributed.newSubgroups(2);
  const byEnum = await distributed.newSubgroupsByEnumeration([[0, 2], [3, 1]]);
  const partial = await distributed.newSubgroupsByEnumeration([[2, 0], [3]]);
  const t = tensor([rank + 1]);
  distributed.allReduce(t, { group: mine! });
  const u = tensor([rank + 1]);
  distributed.allReduce(u, { group: byEnum[0]! });
  const maps = {
    globalOfGroupRank1: all.map((g) => distributed.getGlobalRank(g, 1)),
    groupRankOf3: distributed.getGroupRank(byEnum[1][1], 3),
    ranks: byEnum[1].map((g) => distributed.getProcessGroupRanks(g)),
    world: distributed.getProcessGroupRanks(),
    worldIdentity: [
      distributed.getGlobalRank(undefined, 2),
      distributed.getGroupRank(undefined, 3),
    ],
    // What tests/fixtures/torch_distributed_extras.json has of PyTorch's.
    torch: {
      mine: distributed.getProcessGroupRanks(mine!),
      enumMine: distributed.getProcessGroupRanks(byEnum[0]!),
      globalOfGroupRank1: distributed.getGlobalRank(byEnum[0]!, 1),
      groupRankOfSelf: distributed.getGroupRank(byEnum[0]!, rank),
    },
  };
  return {
    rank,
    mine: mine!.ranks,
    mineRank: mine!.rank,
    all: all.map((g) => g.ranks),
    enumMine: byEnum[0]!.ranks,
    enumAll: byEnum[1].map((g) => g.ranks),
    partialMine: partial[0]?.ranks ?? null,
    partialAll: partial[1].map((g) => g.ranks),
    sumInMine: Array.from(await t.data()),
    sumInEnum: Array.from(await u.data()),
    maps,
    errors: {
      notDivisible: await caught(() => distributed.newSubgroups(3)),
      tooBig: await caught(() => distributed.newSubgroups(n + 1)),
      zero: await caught(() => distributed.newSubgroups(0)),
      twice: await caught(() => distributed.newSubgroupsByEnumeration([[0, 1], [1, 2]])),
      empty: await caught(() => distributed.newSubgroupsByEnumeration([])),
      globalRank: await caught(() => distributed.getGlobalRank(all[0], 2)),
      groupRank: await caught(() => distributed.getGroupRank(all[0], 3)),
    },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** monitoredBarrier: everyone on time, then ranks late by much more than the timeout. */
async function monitored(rank: number, n: number): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = { rank };
  const ms = () => performance.now();
  let start = ms();
  out.onTime = await caught(() => distributed.monitoredBarrier({ timeoutMs: 5000 }));
  out.onTimeMs = ms() - start;
  // Rank n-1 is late by 2.5 s against a 1 s timeout (the others have 1 s to arrive, under load).
  if (rank === n - 1) await sleep(2500);
  start = ms();
  out.oneLate = await caught(() => distributed.monitoredBarrier({ timeoutMs: 1000 }));
  out.oneLateMs = ms() - start;
  await distributed.barrier();
  // Ranks 1.. late: only the first is named, unless waitAllRanks.
  for (const waitAllRanks of [false, true]) {
    if (rank > 0) await sleep(1000);
    start = ms();
    out[`allLate ${waitAllRanks}`] = await caught(() =>
      distributed.monitoredBarrier({ timeoutMs: 200, waitAllRanks })
    );
    out[`allLateMs ${waitAllRanks}`] = ms() - start;
    await distributed.barrier();
  }
  // The group is still usable: every late rank's message was taken.
  const t = tensor([rank]);
  distributed.allReduce(t);
  out.after = Array.from(await t.data());
  out.badTimeout = await caught(() => distributed.monitoredBarrier({ timeoutMs: -1 }));
  if (n < 3) return out;
  // In a sub-group, whose first rank monitors; ranks are the whole group's.
  const group = await distributed.newGroup([1, 2]);
  if (rank === 2) await sleep(800);
  if (rank > 0) {
    out.subgroup = await caught(() => distributed.monitoredBarrier({ group, timeoutMs: 200 }));
  }
  await distributed.barrier();
  return out;
}

/** Stores shared by ranks: a FileStore at `path` and a TCPStore whose master is rank 0. */
async function stores(
  rank: number,
  n: number,
  path: string,
  port: number,
): Promise<Record<string, unknown>> {
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  const file = new distributed.FileStore(path, { timeoutMs: 20_000 });
  let tcp: distributed.TCPStore;
  if (port === 0) {
    // Spawned ranks: rank 0 picks a free port and tells the others.
    tcp = rank === 0
      ? await distributed.TCPStore.create("127.0.0.1", 0, {
        isMaster: true,
        worldSize: n,
        timeoutMs: 20_000,
        waitForWorkers: false,
      })
      : (undefined as unknown as distributed.TCPStore);
    const list = [rank === 0 ? tcp.port : 0];
    await distributed.broadcastObjectList(list, { src: 0 });
    const picked = list[0];
    if (rank !== 0) {
      tcp = await distributed.TCPStore.create("127.0.0.1", picked, {
        worldSize: n,
        timeoutMs: 20_000,
      });
    }
  } else {
    tcp = await distributed.TCPStore.create("127.0.0.1", port, {
      isMaster: rank === 0,
      worldSize: n,
      timeoutMs: 20_000,
    });
  }
  const out: Record<string, unknown> = { rank };
  for (const [name, store] of [["file", file], ["tcp", tcp]] as const) {
    const prefixed = new distributed.PrefixStore("job", store);
    await prefixed.set(`rank ${rank}`, `hello from ${rank}`);
    const counted: number[] = [];
    for (let i = 0; i < 20; i++) counted.push(await store.add("counter", rank + 1));
    // Every rank races to be the leader: exactly one wins, all see it.
    const leader = decode(await store.compareSet("leader", "", `rank ${rank}`));
    await store.add("done", 1);
    await store.wait(Array.from({ length: n }, (_, q) => `job/rank ${q}`));
    const greetings = [];
    for (let q = 0; q < n; q++) greetings.push(decode(await prefixed.get(`rank ${q}`)));
    // The last to finish sees the full count.
    while (Number(decode(await store.get("done"))) < n) await sleep(5);
    out[name] = {
      greetings,
      leader,
      total: Number(decode(await store.get("counter"))),
      increasing: counted.every((c, i) => i === 0 || c > counted[i - 1]),
      keys: await store.numKeys(),
    };
  }
  // Everyone has read everything before the master's server goes.
  await file.add("finished", 1);
  await file.wait(["finished"]);
  while (Number(decode(await file.get("finished"))) < n) await sleep(5);
  file.close();
  if (rank !== 0) await tcp.close();
  else {
    await sleep(100);
    await tcp.close();
  }
  return out;
}

/** The fixture's inputs of this rank through allReduce with every op PyTorch's gloo has. */
async function torchCases(rank: number, path: string): Promise<Record<string, number[]>[]> {
  const fixture = JSON.parse(await Deno.readTextFile(path));
  const rows: Record<string, number[]>[] = [];
  for (const inputs of fixture.inputs[rank] as Record<string, number[]>[]) {
    const row: Record<string, number[]> = {};
    for (const key of Object.keys(fixture.allReduce[0])) {
      const [op, dtype] = key.split(" ") as [distributed.ReduceOp, "int32" | "float32"];
      const t = tensor(inputs[dtype], { dtype });
      distributed.allReduce(t, { op });
      row[key] = Array.from(await t.data());
    }
    rows.push(row);
  }
  return rows;
}

/** Runs `scenario` on this rank (spawn calls it with the process group initialised). */
export async function main(
  rank: number,
  worldSize: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<unknown> {
  switch (scenario) {
    case "ops":
      return await ops(rank, worldSize, (options.backend as string) ?? "cpu");
    case "subgroups":
      return await subgroups(rank, worldSize);
    case "torch":
      return await torchCases(rank, options.path as string);
    case "monitored":
      return await monitored(rank, worldSize);
    case "stores":
      return await stores(rank, worldSize, options.path as string, (options.port as number) ?? 0);
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// `deno run -A tests/distributed_extras_ranks.ts OUT_PREFIX SCENARIO JSON_OPTIONS`: under
// mpiexec (a process group), or with scenario "client" as a plain subprocess using the stores.
if (import.meta.main) {
  const [out, scenario, json] = Deno.args;
  const options = JSON.parse(json ?? "{}");
  if (scenario === "client") {
    const decode = (b: Uint8Array) => new TextDecoder().decode(b);
    const file = new distributed.FileStore(options.path, { timeoutMs: 20_000 });
    const tcp = await distributed.TCPStore.create("127.0.0.1", options.port, { timeoutMs: 20_000 });
    const result: Record<string, unknown> = {};
    for (const [name, store] of [["file", file], ["tcp", tcp]] as const) {
      const got = decode(await store.get("from parent"));
      const sum = await store.add("sum", 5);
      await store.set("from child", `child got ${got}`);
      result[name] = { got, sum };
    }
    file.close();
    await tcp.close();
    await Deno.writeTextFile(`${out}.0.json`, JSON.stringify(result));
  } else {
    await distributed.initProcessGroup({ timeoutMs: options.timeoutMs ?? 60_000 });
    const rank = distributed.getRank();
    const result = await main(rank, distributed.getWorldSize(), scenario, options);
    await Deno.writeTextFile(`${out}.${rank}.json`, JSON.stringify(result));
    await distributed.destroyProcessGroup();
  }
}
