/**
 * The object collectives (`allGatherObject`, `broadcastObjectList`,
 * `gatherObject`, `scatterObjectList`) and their value encoding: exact
 * round trips of every supported kind, values of different sizes per rank,
 * sub-groups, errors on the rank at fault and naming it on the others in
 * bounded time, and a run under mpiexec.
 * @module
 */

import assert from "node:assert/strict";
import { distributed } from "../mod.ts";
import { decodeValue, encodeValue } from "../src/distributed/value_codec.ts";
import { BACKENDS } from "./harness.ts";
import { MPICH_MPIEXEC, type MpiRun, mpiRun as runUnderMpiexec } from "./mpiexec.ts";
import { type Caught, type Received, valueOf } from "./distributed_objects_ranks.ts";

const RANKS = new URL("./distributed_objects_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

const roundTrip = <T>(value: T): T => decodeValue(encodeValue(value)) as T;

// ---- the value encoding on its own ----

Deno.test("value codec: primitives round-trip exactly (-0, NaN, ±Infinity, bigints, strings)", () => {
  const numbers = [
    0,
    -0,
    1,
    -1,
    NaN,
    Infinity,
    -Infinity,
    0.1,
    2 ** 52 - 1,
    2 ** 52,
    -(2 ** 53) - 2,
    2 ** 60,
    Number.MAX_VALUE,
    Number.MIN_VALUE,
    -1e-300,
  ];
  for (const n of numbers) assert.ok(Object.is(roundTrip(n), n), `${n}`);
  for (const b of [0n, -1n, 255n, 2n ** 64n, -(2n ** 200n) + 7n]) assert.equal(roundTrip(b), b);
  const strings = ["", "a", "é€😀", "x".repeat(70_000), "\uD800", "a\uDC00b", "\uDBFF\uDFFF"];
  for (const s of strings) assert.equal(roundTrip(s), s);
  for (const v of [null, undefined, true, false]) assert.equal(roundTrip(v), v);
  // The wire format: version 1, an array of 2, int 1 (zigzag 2), a UTF-8 string "a".
  assert.deepEqual([...encodeValue([1, "a"])], [1, 9, 2, 4, 2, 7, 1, 97]);
});

Deno.test("value codec: objects, arrays (holes), Map, Set, Date, RegExp round-trip", () => {
  const value = {
    // deno-lint-ignore no-sparse-arrays
    list: [1, , "three", [null, undefined]],
    nested: { deep: { deeper: [{}] } },
    "a b": 1,
    2: "integer keys first, as JS orders them",
    map: new Map<unknown, unknown>([["x", 1], [2, new Set(["y"])], [null, -0]]),
    when: new Date(Date.UTC(2020, 0, 1, 12)),
    invalidDate: new Date(NaN),
    pattern: /a+\/b/giu,
  };
  const out = roundTrip(value);
  assert.deepStrictEqual(out, value);
  assert.deepEqual(Object.keys(out), Object.keys(value));
  assert.equal(out.list.length, 4);
  assert.ok(!(1 in out.list), "a hole stays a hole");
  assert.ok(1 in (out.list[3] as unknown[]), "an undefined element is no hole");
  assert.equal(out.pattern.flags, "giu");
  assert.equal(out.pattern.source, "a+\\/b");
  assert.ok(Number.isNaN(out.invalidDate.getTime()));
  // A "__proto__" key is data, not the prototype; a null-prototype object stays one.
  const proto = roundTrip(JSON.parse('{"__proto__": {"polluted": true}, "k": 1}'));
  assert.equal(Object.getPrototypeOf(proto), Object.prototype);
  assert.deepEqual(Object.keys(proto), ["__proto__", "k"]);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  const bare = Object.assign(Object.create(null), { a: 1 });
  const bareOut = roundTrip(bare);
  assert.equal(Object.getPrototypeOf(bareOut), null);
  assert.equal(bareOut.a, 1);
});

Deno.test("value codec: shared references and cycles stay shared (Map with object keys)", () => {
  const key = { id: 1 };
  const shared = [1, 2, 3];
  const root: Record<string, unknown> = {
    a: shared,
    b: shared,
    map: new Map<unknown, unknown>([[key, "value of key"], ["again", key]]),
    set: new Set([key]),
  };
  root.self = root;
  (shared as unknown[]).push(root);
  const out = roundTrip(root);
  assert.equal(out.self, out);
  assert.equal(out.a, out.b);
  assert.equal((out.a as unknown[])[3], out);
  const map = out.map as Map<unknown, unknown>;
  const [outKey] = map.keys();
  assert.deepEqual(outKey, { id: 1 });
  assert.equal(map.get(outKey), "value of key");
  assert.equal(map.get("again"), outKey);
  assert.ok((out.set as Set<unknown>).has(outKey));
  // A Map that contains itself, as key and value.
  const selfMap = new Map<unknown, unknown>();
  selfMap.set(selfMap, selfMap);
  const selfOut = roundTrip(selfMap);
  assert.equal(selfOut.get(selfOut), selfOut);
});

Deno.test("value codec: ArrayBuffer, every typed array kind and DataView, with offsets and shared buffers", () => {
  const buffer = new ArrayBuffer(64);
  new Uint8Array(buffer).forEach((_, i, a) => a[i] = (i * 37) & 0xff);
  const kinds = [
    Int8Array,
    Uint8Array,
    Uint8ClampedArray,
    Int16Array,
    Uint16Array,
    Int32Array,
    Uint32Array,
    Float32Array,
    Float64Array,
    BigInt64Array,
    BigUint64Array,
    ...("Float16Array" in globalThis
      ? [(globalThis as unknown as { Float16Array: typeof Float32Array }).Float16Array]
      : []),
  ];
  const views = kinds.map((Kind) => new Kind(buffer, 8, 2));
  const dataView = new DataView(buffer, 3, 10);
  const out = roundTrip({ views, dataView, buffer, alone: new Float64Array([NaN, -0, 1.5]) });
  out.views.forEach((view, i) => {
    assert.equal(view.constructor, kinds[i]);
    assert.equal(view.byteOffset, 8);
    assert.equal(view.length, 2);
    assert.equal(view.buffer, out.buffer, "every view still shares the one buffer");
    assert.deepStrictEqual(view, views[i]);
  });
  assert.ok(out.dataView instanceof DataView);
  assert.equal(out.dataView.byteOffset, 3);
  assert.equal(out.dataView.byteLength, 10);
  assert.equal(out.dataView.buffer, out.buffer);
  assert.deepEqual([...new Uint8Array(out.buffer)], [...new Uint8Array(buffer)]);
  assert.ok(Object.is(out.alone[1], -0) && Number.isNaN(out.alone[0]) && out.alone[2] === 1.5);
  assert.equal(out.alone.buffer.byteLength, 24);
  // The copy is the decoder's own: writing to it leaves the input alone.
  const bytes = encodeValue(new Uint8Array([1, 2]));
  (decodeValue(bytes) as Uint8Array)[0] = 9;
  assert.deepEqual([...(decodeValue(bytes) as Uint8Array)], [1, 2]);
  assert.deepEqual(roundTrip(new ArrayBuffer(0)), new ArrayBuffer(0));
});

Deno.test("value codec: what cannot be sent is a TypeError naming its path", () => {
  const op = "allGatherObject";
  const fails = (value: unknown, message: string) =>
    assert.throws(() => encodeValue(value, { op }), { name: "TypeError", message });
  fails(
    { metrics: { fn: () => 1 } },
    "allGatherObject: cannot send value at .metrics.fn (a function)",
  );
  fails(() => 1, "allGatherObject: cannot send the value (a function)");
  fails([0, Symbol("s")], "allGatherObject: cannot send value at [1] (a symbol)");
  fails(
    { "a b": [{ c: Symbol.iterator }] },
    'allGatherObject: cannot send value at ["a b"][0].c (a symbol)',
  );
  fails(
    new Map([["k", { f() {} }]]),
    'allGatherObject: cannot send value at .get("k").f (a function)',
  );
  fails(new Map([[1, Symbol()]]), "allGatherObject: cannot send value at .get(1) (a symbol)");
  fails(
    new Map<unknown, number>([[{}, 1], [() => 0, 2]]),
    "allGatherObject: cannot send value at .<Map entry 1 key> (a function)",
  );
  fails(new Set([1, Symbol()]), "allGatherObject: cannot send value at .<Set member 1> (a symbol)");
  class Point {
    x = 1;
  }
  const only =
    "only primitives, arrays, plain objects, Map, Set, Date, RegExp, ArrayBuffer, typed arrays and DataView can be sent";
  fails(
    { p: new Point() },
    `allGatherObject: cannot send value at .p (an instance of Point: ${only})`,
  );
  fails(new WeakMap(), `allGatherObject: cannot send the value (an instance of WeakMap: ${only})`);
  fails(
    Object.create({}),
    `allGatherObject: cannot send the value (an object with a prototype other than Object.prototype: ${only})`,
  );
  fails(
    { s: new SharedArrayBuffer(4) },
    "allGatherObject: cannot send value at .s (a SharedArrayBuffer, whose memory cannot be shared with another rank: copy it into an ArrayBuffer)",
  );
  fails(
    { v: new Int32Array(new SharedArrayBuffer(8)) },
    "allGatherObject: cannot send value at .v.buffer (a SharedArrayBuffer, whose memory cannot be shared with another rank: copy it into an ArrayBuffer)",
  );
  assert.throws(() => encodeValue([{ x: () => 0 }], { op: "scatterObjectList", at: "[2]" }), {
    message: "scatterObjectList: cannot send value at [2][0].x (a function)",
  });
  assert.throws(() => decodeValue(encodeValue({ a: "long string" }).subarray(0, 6)), {
    name: "RangeError",
    message: /^decodeValue: malformed data at byte \d+: /,
  });
  assert.throws(() => decodeValue(new Uint8Array([7, 1])), /format 7, expected 1/);
});

// ---- the collectives over spawned ranks ----

function checkAll(results: Received[], n: number): void {
  results.forEach((r, rank) => {
    assert.equal(r.rank, rank);
    for (const [name, line] of Object.entries(r.checks)) {
      assert.equal(line, "ok", `rank ${rank} ${name}`);
    }
    for (const [name, ok] of Object.entries(r.identity)) assert.ok(ok, `rank ${rank} ${name}`);
    assert.deepEqual(Object.keys(r.checks).sort(), ["allGather", "broadcast", "gather", "scatter"]);
  });
  // And once more here, on the values as they came back (structured-cloned by postMessage).
  const all = Array.from({ length: n }, (_, q) => valueOf(q));
  results.forEach((r, rank) => {
    const v = r.values!;
    assert.deepStrictEqual(v.allGather, all);
    assert.deepStrictEqual(v.gather, rank === 1 ? all.map((_, q) => valueOf(q + 1)) : null);
    assert.deepStrictEqual(v.scatter, valueOf(rank + 2));
  });
  const big = (results[0].values!.allGather as { text: string }[])[1];
  assert.equal(big.text.length, 80_000);
}

for (const backend of ["cpu", ...(BACKENDS.has("webgpu") ? ["webgpu"] : [])]) {
  Deno.test({
    name:
      `objects: allGatherObject, broadcastObjectList, gatherObject, scatterObjectList over 3 ranks (default device ${backend})`,
    ...opts,
    fn: async () => {
      const results = await distributed.spawn<Received>(RANKS, {
        nprocs: 3,
        args: ["collectives", { backend }],
      });
      checkAll(results, 3);
      const identity = {
        cycle: true,
        shared: true,
        mapKey: true,
        srcKeepsItsOwn: true,
        holesKept: true,
      };
      assert.deepEqual(results.map((r) => r.identity), [identity, identity, identity]);
    },
  });
}

Deno.test({
  name: "objects: among a newGroup sub-group; a non-member's call is an error naming it",
  ...opts,
  fn: async () => {
    const results = await distributed.spawn<Received>(RANKS, { nprocs: 3, args: ["grouped"] });
    results.forEach((r, rank) => {
      for (const [name, line] of Object.entries(r.checks)) {
        assert.equal(line, "ok", `rank ${rank} ${name}`);
      }
      const names = rank === 1
        ? ["nonMember", "world"]
        : ["allGather", "broadcast", "gather", "scatter", "world"];
      assert.deepEqual(Object.keys(r.checks), names);
    });
    assert.deepStrictEqual(results[2].values!.gather, [{ rank: 0 }, { rank: 2 }]);
    assert.deepStrictEqual(results[2].values!.scatter, new Map([["to", 2]]));
  },
});

/** What rank `rank` of `n` must have caught, per case of the errors scenario. */
function expectedErrors(rank: number, n: number): Record<string, unknown> {
  const last = n - 1;
  const others = (op: string, culprit: number) => ({
    name: "DistributedError",
    message:
      `${op}: rank ${culprit} could not send (the error raised there says why); nothing was exchanged, and the group remains usable`,
    ranks: [culprit],
  });
  const own = (name: string, message: string) => ({ name, message, ranks: undefined });
  const only =
    "only primitives, arrays, plain objects, Map, Set, Date, RegExp, ArrayBuffer, typed arrays and DataView can be sent";
  const lengths = Array.from({ length: n }, (_, q) => `rank ${q}: ${q === 0 ? 2 : 3}`).join(", ");
  const range = (op: string, name: string, got: number) =>
    own("RangeError", `${op}: ${name} must be a rank in [0, ${n}), got ${got}`);
  return {
    function: rank === last
      ? own("TypeError", "allGatherObject: cannot send value at .metrics.fn (a function)")
      : others("allGatherObject", last),
    afterFunction: Array.from({ length: n }, (_, q) => q),
    tensor: rank === last
      ? own(
        "TypeError",
        "gatherObject: cannot send the value (a multigrad Tensor: send tensors with the tensor collectives (allGather, broadcast, gather, scatter), or send its values, await t.toArray())",
      )
      : others("gatherObject", last),
    lengths: {
      name: "DistributedError",
      message:
        `broadcastObjectList: objects must have the same length on every rank, got ${lengths}`,
      ranks: [0],
    },
    symbol: rank === 0
      ? own("TypeError", "broadcastObjectList: cannot send value at [1] (a symbol)")
      : others("broadcastObjectList", 0),
    notArray: rank === last
      ? own("TypeError", "broadcastObjectList: objects must be an array, got string")
      : others("broadcastObjectList", last),
    scatterLength: rank === last
      ? own(
        "RangeError",
        `scatterObjectList: scatterList on src (rank ${last}) must hold one value per rank of the group (${n}), got an array of 1`,
      )
      : {
        name: "DistributedError",
        message:
          `scatterObjectList: src (rank ${last}) could not send (the error raised there says why); nothing was exchanged, and the group remains usable`,
        ranks: [last],
      },
    scatterInstance: rank === 0
      ? own(
        "TypeError",
        `scatterObjectList: cannot send value at [${last}].x (an instance of Metrics: ${only})`,
      )
      : {
        name: "DistributedError",
        message:
          "scatterObjectList: src (rank 0) could not send (the error raised there says why); nothing was exchanged, and the group remains usable",
        ranks: [0],
      },
    badSrc: range("broadcastObjectList", "src", n),
    badDst: range("gatherObject", "dst", -1),
    badScatterSrc: range("scatterObjectList", "src", 0.5),
    after: Array.from({ length: n }, (_, q) => `rank ${q}`),
  };
}

/** Every rank caught what it must, each error well within the group's timeout. */
function checkErrors(results: Record<string, unknown>[], n: number, timeoutMs: number): void {
  results.forEach((r, rank) => {
    const got: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(r)) {
      if (value && typeof value === "object" && "ms" in value) {
        const { ms, ...rest } = value as Caught;
        assert.ok(ms < timeoutMs / 3, `rank ${rank} ${name} took ${ms} ms`);
        got[name] = { ranks: undefined, ...rest };
      } else got[name] = value;
    }
    assert.deepStrictEqual(got, expectedErrors(rank, n), `rank ${rank}`);
  });
}

Deno.test({
  name:
    "objects: a value that cannot be sent (or a bad list) fails on its rank and names it on the others, at once; bad src/dst",
  ...opts,
  fn: async () => {
    const timeoutMs = 30_000;
    const results = await distributed.spawn<Record<string, unknown>>(RANKS, {
      nprocs: 3,
      args: ["errors"],
      timeoutMs,
    });
    checkErrors(results, 3, timeoutMs);
  },
});

// ---- the "mpi" backend, under mpiexec ----

const MPIEXEC = MPICH_MPIEXEC ? "mpiexec" : null;
if (!MPIEXEC) {
  console.warn(
    "MPICH's mpiexec not found: the mpiexec test of the object collectives is SKIPPED (install it with `apt-get install mpich`)",
  );
}

/** Runs the ranks module under `mpiexec -n ranks`. */
function mpiRun<T>(
  ranks: number,
  scenario: string,
  options: Record<string, unknown>,
): Promise<MpiRun<T>> {
  return runUnderMpiexec<T>(RANKS, ranks, scenario, options);
}

Deno.test({
  name: "mpi: the object collectives and their errors under mpiexec -n 2",
  ignore: !MPIEXEC,
  ...opts,
  fn: async () => {
    const run = await mpiRun<Received>(2, "collectives", { backend: "cpu" });
    assert.equal(run.code, 0, run.output);
    run.results.forEach((r, rank) => {
      assert.ok(r, `rank ${rank} wrote no result: ${run.output}`);
      assert.equal(r.rank, rank);
      assert.deepEqual(r.checks, { allGather: "ok", broadcast: "ok", gather: "ok", scatter: "ok" });
      assert.deepEqual(r.identity, { srcKeepsItsOwn: true, holesKept: true });
    });
    const timeoutMs = 30_000;
    const errors = await mpiRun<Record<string, unknown>>(2, "errors", { timeoutMs });
    assert.equal(errors.code, 0, errors.output);
    errors.results.forEach((r, rank) =>
      assert.ok(r, `rank ${rank} wrote no result: ${errors.output}`)
    );
    checkErrors(errors.results as Record<string, unknown>[], 2, timeoutMs);
  },
});
