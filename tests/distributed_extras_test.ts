/**
 * torch.distributed's remaining public API: every ReduceOp (product and
 * the bitwise ops included) through the reducing collectives,
 * allGatherIntoTensor / reduceScatterTensor, the coalesced collectives,
 * monitoredBarrier, newSubgroups / newSubgroupsByEnumeration and the rank
 * maps, isAvailable / isMpiAvailable, and the stores (HashStore,
 * FileStore, TCPStore, PrefixStore) in one thread, across spawned ranks,
 * across a subprocess and under mpiexec.
 * @module
 */

import assert from "node:assert/strict";
import { distributed } from "../mod.ts";
import { BACKENDS } from "./harness.ts";
import { MPICH_MPIEXEC, mpiRun } from "./mpiexec.ts";
import { expectedOf, floatsOf, intsOf } from "./distributed_extras_ranks.ts";

const RANKS = new URL("./distributed_extras_ranks.ts", import.meta.url);
// Workers, sockets and shared memory outlive a test's own ops by design (closed at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };
const text = (b: Uint8Array) => new TextDecoder().decode(b);

// ---- ReduceOp and its kernels ----

Deno.test("ReduceOp: PyTorch's members are the op strings; headers name the new ops", () => {
  assert.deepEqual(distributed.ReduceOp, {
    SUM: "sum",
    AVG: "avg",
    PRODUCT: "product",
    MIN: "min",
    MAX: "max",
    BAND: "band",
    BOR: "bor",
    BXOR: "bxor",
  });
  const h = distributed.packHeader({
    kind: "reduce",
    seq: 4,
    dtype: "int32",
    shapes: [[2, 3]],
    op: "bxor",
    dst: 5,
  });
  assert.equal(distributed.describeHeader(h), "reduce #4 (bxor, to rank 5) of int32 [2, 3]");
  for (const op of distributed.REDUCE_OPS) {
    const a = distributed.packHeader({
      kind: "allReduce",
      seq: 0,
      dtype: "int32",
      shapes: [[1]],
      op,
    });
    assert.equal(distributed.describeHeader(a), `allReduce #0 (${op}) of int32 [1]`);
  }
});

Deno.test("reduceInto: int32 products wrap as C's, bitwise ops, float32 products round per step", () => {
  const ints = [Int32Array.of(65_537, 7, -1, 0x0ff0), Int32Array.of(65_537, -3, 12, 0x00ff)];
  const out = new Int32Array(4);
  distributed.reduceInto(out, ints, 0, 4, "product");
  // 65537² = 4295098369 = 2^32 + 131073: wraps to 131073.
  assert.deepEqual([...out], [131_073, -21, -12, 0x0ff0 * 0x00ff]);
  distributed.reduceInto(out, ints, 0, 4, "band");
  assert.deepEqual([...out], [65_537, 7 & -3, 12 & -1, 0x00f0]);
  distributed.reduceInto(out, ints, 0, 4, "bor");
  assert.deepEqual([...out], [65_537, 7 | -3, -1, 0x0fff]);
  distributed.reduceInto(out, ints, 0, 4, "bxor");
  assert.deepEqual([...out], [0, 7 ^ -3, -1 ^ 12, 0x0f0f]);
  const floats = [Float32Array.of(0.1, 3), Float32Array.of(0.1, -2), Float32Array.of(0.1, 0.5)];
  const f = new Float32Array(2);
  distributed.reduceInto(f, floats, 0, 2, "product");
  assert.deepEqual([...f], [Math.fround(Math.fround(0.1 * 0.1) * Math.fround(0.1)), -3]);
});

const CPU_AND_GPU = ["cpu", ...(BACKENDS.has("webgpu") ? ["webgpu"] : [])];

interface OpsResult {
  rank: number;
  checks: string[];
  count: number;
  errors: Record<string, string>;
}

function checkOps(results: OpsResult[], n: number): void {
  results.forEach((r, rank) => {
    assert.equal(r.rank, rank);
    assert.deepEqual(r.checks, [], `rank ${rank}: ${r.checks.join("; ")}`);
    assert.equal(r.count, 65);
    const e = r.errors;
    assert.equal(
      e.bitwiseFloat,
      'TypeError: allReduce: op "bxor" (bitwise) needs an int32 tensor, got float32 (shape [1])',
    );
    assert.match(
      e.unknownOp,
      /^RangeError: allReduce: op must be one of sum, avg, max, min, product, band, bor, bxor .*got "prod"$/,
    );
    assert.match(e.avgInt, /allReduceCoalesced: op "avg" needs a floating-point tensor, got int32/);
    assert.match(
      e.mixedDtypes,
      /tensors\[0\] is float32 \[1\] on (cpu|webgpu):0 and tensors\[1\] is int32 \[1\] on (cpu|webgpu):0/,
    );
    assert.match(e.emptyList, /allGatherCoalesced: tensors must be a non-empty array/);
    assert.match(
      e.badOutput,
      new RegExp(
        `input \\[1, 2\\]: output \\[${n}, 2\\] or \\[${n}, 1, 2\\]\\), got output \\[${
          n + 1
        }, 2\\]`,
      ),
    );
    assert.match(e.dtypeOutput, /output and input must have one dtype and one device/);
    // Every rank names rank 0's shapes and the others'.
    assert.match(
      e.shapes,
      /^DistributedError: collective mismatch: .*rank 0 called allReduce #64 \(sum\) of 2 float32 tensors/,
    );
  });
}

for (const backend of CPU_AND_GPU) {
  Deno.test({
    name:
      `ReduceOp: every op through allReduce, reduce, reduceScatterTensor, allReduceCoalesced; allGatherIntoTensor, allGatherCoalesced (3 ranks) [${backend}]`,
    ...opts,
    fn: async () => {
      const results = await distributed.spawn<OpsResult>(RANKS, {
        nprocs: 3,
        args: ["ops", { backend }],
      });
      checkOps(results, 3);
    },
  });
}

Deno.test({
  name: "ReduceOp: the same with 5 ranks (the local backend's many-rank path)",
  ...opts,
  fn: async () => {
    const results = await distributed.spawn<OpsResult>(RANKS, { nprocs: 5, args: ["ops", {}] });
    checkOps(results, 5);
  },
});

Deno.test("the hand-computed expectations themselves (so the rank checks can fail)", () => {
  // Three ranks of intsOf: element 2 is 100003 * (r + 1), whose product wraps.
  const product = expectedOf("product", 3, intsOf, true);
  assert.equal(product[2], Number(BigInt.asIntN(32, 100_003n * 200_006n * 300_009n)));
  assert.notEqual(product[2], 100_003 * 200_006 * 300_009);
  assert.deepEqual(expectedOf("bxor", 2, (r) => [r + 1, 6], true), [3, 0]);
  // (1.5 + 3) / 2 for two ranks of floatsOf.
  assert.equal(expectedOf("avg", 2, floatsOf, false)[0], 2.25);
});

/** PyTorch 1.13's gloo all_reduce and subgroup maps (tests/fixtures/torch_distributed_extras.py). */
const TORCH_PATH = new URL("./fixtures/torch_distributed_extras.json", import.meta.url).pathname;
const TORCH = JSON.parse(Deno.readTextFileSync(TORCH_PATH)) as {
  inputs: { float32: number[] }[][];
  allReduce: Record<string, number[]>[];
  subgroups: Record<string, unknown>[];
};

Deno.test({
  name:
    "ReduceOp: allReduce of 3 ranks matches PyTorch's gloo on random int32 (exactly) and float32 inputs, every op",
  ...opts,
  fn: async () => {
    const results = await distributed.spawn<Record<string, number[]>[]>(RANKS, {
      nprocs: 3,
      args: ["torch", { path: TORCH_PATH }],
    });
    let compared = 0;
    let worst = 0;
    results.forEach((rows, rank) => {
      rows.forEach((row, c) => {
        for (const [key, want] of Object.entries(TORCH.allReduce[c])) {
          const got = row[key];
          assert.equal(got.length, want.length);
          if (key.endsWith("int32")) assert.deepEqual(got, want, `rank ${rank} case ${c} ${key}`);
          else {
            // gloo combines in its own order, ours is rank order: they differ by float32
            // rounding only, relative to the terms' magnitudes for a sum (which may cancel),
            // to the result for a product; min and max are exact.
            const terms = (i: number) =>
              TORCH.inputs.reduce((a, rows) => a + Math.abs(rows[c].float32[i]), 0);
            got.forEach((g, i) => {
              const scale = key.startsWith("sum") ? terms(i) : Math.abs(want[i]);
              const err = Math.abs(g - want[i]) / Math.max(scale, 1e-30);
              worst = Math.max(worst, err);
              const tol = key.startsWith("min") || key.startsWith("max") ? 0 : 2.5e-7;
              assert.ok(err <= tol, `rank ${rank} case ${c} ${key}[${i}]: ${g} vs ${want[i]}`);
            });
          }
          compared++;
        }
      });
    });
    assert.equal(compared, 3 * 8 * 11);
    console.log(
      `compared ${compared} all-reduces with PyTorch's; worst float32 relative error ${worst}`,
    );
  },
});

// ---- subgroups and rank maps ----

interface SubgroupsResult {
  rank: number;
  mine: number[];
  mineRank: number;
  all: number[][];
  enumMine: number[];
  enumAll: number[][];
  partialMine: number[] | null;
  partialAll: number[][];
  sumInMine: number[];
  sumInEnum: number[];
  maps: Record<string, unknown>;
  errors: Record<string, string>;
}

Deno.test({
  name:
    "newSubgroups, newSubgroupsByEnumeration (PyTorch's documented examples), getGlobalRank, getGroupRank, getProcessGroupRanks (4 ranks)",
  ...opts,
  fn: async () => {
    const results = await distributed.spawn<SubgroupsResult>(RANKS, {
      nprocs: 4,
      args: ["subgroups"],
    });
    results.forEach((r, rank) => {
      // new_subgroups(group_size=2) on 4 ranks: [0, 1] and [2, 3].
      assert.deepEqual(r.all, [[0, 1], [2, 3]]);
      assert.deepEqual(r.mine, rank < 2 ? [0, 1] : [2, 3]);
      assert.equal(r.mineRank, rank % 2);
      // new_subgroups_by_enumeration([[0, 2], [1, 3]]): the docs' example ([3, 1] sorted, as new_group).
      assert.deepEqual(r.enumAll, [[0, 2], [1, 3]]);
      assert.deepEqual(r.enumMine, rank % 2 === 0 ? [0, 2] : [1, 3]);
      assert.deepEqual(r.partialAll, [[0, 2], [3]]);
      assert.deepEqual(r.partialMine, rank === 1 ? null : rank === 3 ? [3] : [0, 2]);
      // Collectives inside: the sums of rank + 1 over each group.
      assert.deepEqual(r.sumInMine, [rank < 2 ? 3 : 7]);
      assert.deepEqual(r.sumInEnum, [rank % 2 === 0 ? 4 : 6]);
      const { mine, enumMine, globalOfGroupRank1, groupRankOfSelf } = TORCH.subgroups[rank];
      assert.deepEqual(r.maps, {
        globalOfGroupRank1: [1, 3],
        groupRankOf3: 1,
        ranks: [[0, 2], [1, 3]],
        world: [0, 1, 2, 3],
        worldIdentity: [2, 3],
        torch: { mine, enumMine, globalOfGroupRank1, groupRankOfSelf },
      });
      assert.deepEqual(r.errors, {
        notDivisible:
          "RangeError: newSubgroups: the world size (4) must be divisible by groupSize (3)",
        tooBig: "RangeError: newSubgroups: groupSize (5) must not exceed the world size (4)",
        zero: "RangeError: newSubgroups: groupSize must be an integer > 0, got 0",
        twice:
          "RangeError: newSubgroupsByEnumeration: rank 1 is in both subgroup [0, 1] and [1, 2] (a rank may be in one subgroup only)",
        empty:
          "RangeError: newSubgroupsByEnumeration: ranksPerSubgroupList must be a non-empty array of rank lists, got []",
        globalRank:
          "RangeError: getGlobalRank: group rank 2 is not part of the group of ranks [0, 1] (its ranks are 0 to 1)",
        groupRank:
          "RangeError: getGroupRank: global rank 3 is not part of the group of ranks [0, 1]",
      });
    });
  },
});

Deno.test("isAvailable, isMpiAvailable (no throw when the library is missing), isNcclAvailable, isGlooAvailable", async () => {
  assert.equal(distributed.isAvailable(), true);
  assert.equal(distributed.isNcclAvailable(), false);
  assert.equal(distributed.isGlooAvailable(), false);
  // MPICH's launcher here implies its library.
  if (MPICH_MPIEXEC) assert.equal(distributed.isMpiAvailable(), true);
  const script = `import { distributed } from "${new URL("../mod.ts", import.meta.url).href}";
console.log(JSON.stringify(distributed.isMpiAvailable()));`;
  const run = async (env: Record<string, string>, permissions: string[]) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", ...permissions, script],
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    return new TextDecoder().decode(out.stdout).trim() + new TextDecoder().decode(out.stderr);
  };
  assert.equal(await run({ MULTIGRAD_MPI_LIB: "/nonexistent/libmpich.so.12" }, []), "false");
});

// ---- monitoredBarrier ----

Deno.test({
  name:
    "monitoredBarrier: passes when all arrive; names the late ranks on rank 0 (first only, or all with waitAllRanks) and fails the others with it; sub-groups",
  ...opts,
  fn: async () => {
    const results = await distributed.spawn<Record<string, unknown>>(RANKS, {
      nprocs: 3,
      args: ["monitored"],
      timeoutMs: 20_000,
    });
    const told = (rank: number, what: string, monitor = 0) =>
      `DistributedError: monitoredBarrier: rank ${rank} reached monitoredBarrier, but rank ${monitor} reports: ${what}`;
    results.forEach((r, rank) => {
      assert.equal(r.onTime, "no error");
      const one = "[Rank 0]: Rank 2 failed to pass monitoredBarrier in 1000 ms";
      const first = "[Rank 0]: Rank 1 failed to pass monitoredBarrier in 200 ms";
      const all = "[Rank 0]: Ranks 1, 2 failed to pass monitoredBarrier in 200 ms";
      assert.equal(r.oneLate, rank === 0 ? `DistributedError: ${one}` : told(rank, one));
      assert.equal(
        r["allLate false"],
        rank === 0 ? `DistributedError: ${first}` : told(rank, first),
      );
      assert.equal(r["allLate true"], rank === 0 ? `DistributedError: ${all}` : told(rank, all));
      // Bounded: rank 0 fails at its timeout, not at the group's (20 s), nor when the late ranks come.
      if (rank === 0) {
        assert.ok((r.oneLateMs as number) < 2400, `${r.oneLateMs} ms`);
        assert.ok((r["allLateMs true"] as number) < 900, `${r["allLateMs true"]} ms`);
      }
      assert.deepEqual(r.after, [3], "the group is still usable");
      assert.equal(
        r.badTimeout,
        "RangeError: monitoredBarrier: timeoutMs must be a positive number of milliseconds, got -1",
      );
      const sub = "[Rank 1]: Rank 2 failed to pass monitoredBarrier in 200 ms";
      assert.equal(
        r.subgroup,
        rank === 0 ? undefined : rank === 1 ? `DistributedError: ${sub}` : told(2, sub, 1),
      );
    });
  },
});

// ---- stores ----

/** Every store kind under test, fresh, with a 5 s timeout; and what closes them. */
async function eachStore(
  fn: (name: string, store: distributed.Store, other: distributed.Store) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_store_" });
  try {
    const hash = new distributed.HashStore(5000);
    await fn("HashStore", hash, hash);
    const path = `${dir}/store`;
    const [f1, f2] = [
      new distributed.FileStore(path, { timeoutMs: 5000 }),
      new distributed.FileStore(path, { timeoutMs: 5000 }),
    ];
    await fn("FileStore", f1, f2);
    f1.close();
    f2.close();
    const master = await distributed.TCPStore.create("127.0.0.1", 0, {
      isMaster: true,
      worldSize: 2,
      timeoutMs: 5000,
      waitForWorkers: false,
    });
    const client = await distributed.TCPStore.create("127.0.0.1", master.port, {
      worldSize: 2,
      timeoutMs: 5000,
    });
    await fn("TCPStore", master, client);
    await client.close();
    await master.close();
    const under = new distributed.HashStore(5000);
    await fn(
      "PrefixStore",
      new distributed.PrefixStore("p", under),
      new distributed.PrefixStore("p", under),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "stores: set/get/add/compareSet/deleteKey/numKeys as PyTorch 1.13's (HashStore, FileStore, TCPStore, PrefixStore)",
  ...opts,
  fn: () =>
    eachStore(async (name, s, other) => {
      assert.equal(await s.numKeys(), 0, name);
      await s.set("a", "x");
      assert.equal(text(await other.get("a")), "x", name);
      assert.equal(await other.numKeys(), 1, name);
      // add: 3, then 2; stored as decimal text.
      assert.equal(await s.add("c", 3), 3, name);
      assert.equal(await other.add("c", -1), 2, name);
      assert.equal(text(await s.get("c")), "2", name);
      // compareSet (PyTorch's rule): missing + empty expected sets it; missing + other
      // expected returns expected and sets nothing; a match sets; a mismatch returns the value.
      assert.equal(text(await s.compareSet("m", "", "v1")), "v1", name);
      assert.equal(text(await other.get("m")), "v1", name);
      assert.equal(text(await s.compareSet("m2", "zz", "v1")), "zz", name);
      assert.equal(text(await s.compareSet("a", "x", "y")), "y", name);
      assert.equal(text(await other.compareSet("a", "q", "z")), "y", name);
      assert.equal(text(await s.get("a")), "y", name);
      if (s instanceof distributed.PrefixStore) {
        assert.equal(text(await s.underlyingStore.get("p/a")), "y", "keys live under prefix/");
      }
      assert.equal(await s.numKeys(), 3, name);
      assert.equal(await s.deleteKey("m"), true, name);
      assert.equal(await other.deleteKey("m"), false, name);
      assert.equal(await s.numKeys(), 2, name);
      // Bytes and empty values round-trip; a caller's array may change afterwards.
      const bytes = Uint8Array.of(0, 255, 7);
      await s.set("b", bytes);
      bytes[0] = 9;
      assert.deepEqual([...await other.get("b")], [0, 255, 7], name);
      await s.set("e", "");
      assert.equal((await other.get("e")).length, 0, name);
      assert.equal(await s.add("zero", 0), 0, name);
      await assert.rejects(s.add("a", 1), /key "(p\/)?a" holds "y", not an integer/, name);
      await assert.rejects(s.add("c", 0.5), /amount must be an integer, got 0.5/, name);
      await assert.rejects(
        s.set(3 as unknown as string, "v"),
        /a store key must be a string, got number/,
        name,
      );
      await assert.rejects(
        s.set("k", 3 as unknown as string),
        /a store value must be a Uint8Array or a string, got number/,
        name,
      );
    }),
});

Deno.test({
  name:
    "stores: get and wait wait for keys set later, and fail after the timeout naming the missing keys",
  ...opts,
  fn: () =>
    eachStore(async (name, s, other) => {
      const later = s.get("late");
      const waited = s.wait(["late", "later"]);
      setTimeout(() => other.set("late", "here"), 30);
      setTimeout(() => other.set("later", "too"), 60);
      assert.equal(text(await later), "here", name);
      await waited;
      const start = performance.now();
      await assert.rejects(s.wait(["late", "never", "nor this"], 150), (e: Error) => {
        assert.equal(e.name, "StoreTimeoutError", name);
        assert.match(
          e.message,
          /wait: keys "(p\/)?never", "(p\/)?nor this" were not set within 150 ms$/,
          name,
        );
        assert.deepEqual((e as distributed.StoreTimeoutError).keys.length, 2);
        return true;
      });
      const took = performance.now() - start;
      assert.ok(took >= 140 && took < 3000, `${name}: ${took} ms`);
      s.setTimeout(120);
      assert.equal(s.timeoutMs, 120, name);
      await assert.rejects(
        s.get("missing"),
        /get: key "(p\/)?missing" was not set within 120 ms/,
        name,
      );
      assert.throws(
        () => s.setTimeout(0),
        /timeoutMs must be a positive number of milliseconds, got 0/,
      );
    }),
});

Deno.test({
  name:
    "TCPStore: a client before the master retries; the master waits for worldSize users, else fails naming how many came; closed stores fail",
  ...opts,
  fn: async () => {
    // A free port: listen, note, close.
    const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (probe.addr as Deno.NetAddr).port;
    probe.close();
    const early = distributed.TCPStore.create("127.0.0.1", port, { worldSize: 2, timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 150));
    const master = await distributed.TCPStore.create("127.0.0.1", port, {
      isMaster: true,
      worldSize: 2,
      timeoutMs: 5000,
    });
    const client = await early;
    await client.set("k", "v");
    assert.equal(text(await master.get("k")), "v");
    assert.equal(await master.numKeys(), 1, "joins are not keys");
    await client.close();
    await assert.rejects(client.get("k"), /TCPStore.get: the TCPStore is closed/);
    await master.close();
    await assert.rejects(
      distributed.TCPStore.create("127.0.0.1", 0, { isMaster: true, worldSize: 3, timeoutMs: 200 }),
      /TCPStore.create: only 1 of the 3 users \(worldSize, the master included\) connected within 200 ms/,
    );
    await assert.rejects(
      distributed.TCPStore.create("127.0.0.1", port, { timeoutMs: 200 }),
      new RegExp(`no TCPStore server answered at 127.0.0.1:${port} within 200 ms`),
    );
    await assert.rejects(
      distributed.TCPStore.create("127.0.0.1", 0),
      /a client needs the master's port, got 0/,
    );
  },
});

interface StoreRanks {
  rank: number;
  file: Record<string, unknown>;
  tcp: Record<string, unknown>;
}

Deno.test({
  name:
    "stores across 3 spawned ranks: FileStore and TCPStore counters, one compareSet winner, waits, PrefixStore",
  ...opts,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "multigrad_store_" });
    try {
      const results = await distributed.spawn<StoreRanks>(RANKS, {
        nprocs: 3,
        args: ["stores", { path: `${dir}/store` }],
        timeoutMs: 20_000,
      });
      // Each store has its own race, so its own winner.
      const leaders = { file: new Set<unknown>(), tcp: new Set<unknown>() };
      for (const r of results) {
        for (const name of ["file", "tcp"] as const) {
          const kind = r[name];
          leaders[name].add(kind.leader);
          assert.deepEqual(kind.greetings, ["hello from 0", "hello from 1", "hello from 2"]);
          // 20 adds of rank + 1 by each rank.
          assert.equal(kind.total, 20 * (1 + 2 + 3));
          assert.equal(kind.increasing, true);
          // rank keys (3), counter, leader, done.
          assert.equal(kind.keys, 6);
        }
      }
      for (const [name, seen] of Object.entries(leaders)) {
        assert.equal(seen.size, 1, `${name}: one leader, all agree: ${[...seen]}`);
        assert.match(String([...seen][0]), /^rank [012]$/);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "stores across processes: a subprocess reads and adds to this process's FileStore and TCPStore",
  ...opts,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "multigrad_store_" });
    const file = new distributed.FileStore(`${dir}/store`, { timeoutMs: 20_000 });
    const tcp = await distributed.TCPStore.create("127.0.0.1", 0, {
      isMaster: true,
      timeoutMs: 20_000,
    });
    try {
      for (const s of [file, tcp]) {
        await s.add("sum", 1);
        await s.set("from parent", "parent's value");
      }
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          RANKS.pathname,
          `${dir}/result`,
          "client",
          JSON.stringify({ path: `${dir}/store`, port: tcp.port }),
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const [fromFile, fromTcp] = [await file.get("from child"), await tcp.get("from child")];
      const out = await child;
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
      assert.equal(text(fromFile), "child got parent's value");
      assert.equal(text(fromTcp), "child got parent's value");
      const result = JSON.parse(await Deno.readTextFile(`${dir}/result.0.json`));
      assert.deepEqual(result, {
        file: { got: "parent's value", sum: 6 },
        tcp: { got: "parent's value", sum: 6 },
      });
      assert.equal(await file.add("sum", 0), 6);
      assert.equal(await tcp.add("sum", 0), 6);
    } finally {
      file.close();
      await tcp.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

// ---- one rank, no launcher ----

Deno.test({
  name:
    "one rank: monitoredBarrier passes, newSubgroups(1), coalesced and into-tensor collectives copy",
  ...opts,
  fn: async () => {
    await distributed.initProcessGroup({ backend: "local", worldSize: 1, rank: 0 });
    try {
      await distributed.monitoredBarrier({ timeoutMs: 100 });
      const [mine, all] = await distributed.newSubgroups(1);
      assert.deepEqual(mine!.ranks, [0]);
      assert.equal(all.length, 1);
      const { tensor, zeros } = await import("../mod.ts");
      const a = tensor([2, 3], { dtype: "int32" });
      distributed.allReduceCoalesced([a], { op: "bxor" });
      assert.deepEqual([...await a.data()], [2, 3]);
      const out = zeros([1, 2]);
      await distributed.allGatherIntoTensor(out, tensor([4, 5]));
      assert.deepEqual([...await out.data()], [4, 5]);
      assert.deepEqual(distributed.getProcessGroupRanks(), [0]);
    } finally {
      await distributed.destroyProcessGroup();
    }
  },
});

// ---- the "mpi" backend, under mpiexec ----

if (!MPICH_MPIEXEC) {
  console.warn(
    "MPICH's mpiexec not found: the mpiexec tests of distributed_extras are SKIPPED (install it with `apt-get install mpich`)",
  );
}

Deno.test({
  name:
    "mpi: every ReduceOp, coalesced and into-tensor collectives, monitoredBarrier and the stores under mpiexec -n 2",
  ignore: !MPICH_MPIEXEC,
  ...opts,
  fn: async () => {
    const ops = await mpiRun<OpsResult>(RANKS, 2, "ops", {});
    assert.equal(ops.code, 0, ops.output);
    checkOps(
      ops.results.map((r, q) => r ?? assert.fail(`rank ${q} wrote nothing: ${ops.output}`)),
      2,
    );
    const monitored = await mpiRun<Record<string, unknown>>(RANKS, 2, "monitored", {
      timeoutMs: 20_000,
    });
    assert.equal(monitored.code, 0, monitored.output);
    monitored.results.forEach((r, rank) => {
      assert.ok(r, `rank ${rank} wrote nothing: ${monitored.output}`);
      const one = "[Rank 0]: Rank 1 failed to pass monitoredBarrier in 1000 ms";
      assert.equal(r.onTime, "no error");
      assert.equal(
        r.oneLate,
        rank === 0
          ? `DistributedError: ${one}`
          : `DistributedError: monitoredBarrier: rank 1 reached monitoredBarrier, but rank 0 reports: ${one}`,
      );
      assert.deepEqual(r.after, [1]);
    });
    const dir = await Deno.makeTempDir({ prefix: "multigrad_store_" });
    try {
      const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const port = (probe.addr as Deno.NetAddr).port;
      probe.close();
      const stores = await mpiRun<StoreRanks>(RANKS, 2, "stores", { path: `${dir}/store`, port });
      assert.equal(stores.code, 0, stores.output);
      for (const r of stores.results) {
        assert.ok(r, stores.output);
        for (const kind of [r.file, r.tcp]) {
          assert.deepEqual(kind.greetings, ["hello from 0", "hello from 1"]);
          assert.equal(kind.total, 20 * (1 + 2));
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
