/**
 * The WebAssembly SIMD sums of all-reduces give the same bits as the
 * scalar loop (`reduceInto`) they replace, for every rank count the
 * direct exchanges use, every tail length, and the special values
 * gradients can hold; a local group's all-reduce takes them, also when
 * the values go in and out through `allReduceVia` (DDP on cpu ranks).
 * @module
 */

import assert from "node:assert/strict";
import {
  type CollectiveCall,
  packHeader,
  reduceInto,
  type ReduceOp,
} from "../src/distributed/backend.ts";
import { createLocalShared, LocalBackend } from "../src/distributed/local.ts";
import { ReduceArea, wasmReducer } from "../src/distributed/wasm_reduce.ts";

/** Deterministic float32 values with specials mixed in (NaN, infinities, zeros, subnormals, extremes). */
function values(seed: number, n: number): Float32Array {
  const specials = [
    NaN,
    Infinity,
    -Infinity,
    0,
    -0,
    1e-45,
    -3e-39,
    3.4e38,
    -3.4e38,
    1e-7,
    16777217,
  ];
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const u = s / 2 ** 32;
    out[i] = i % 13 === 7
      ? specials[(s >>> 8) % specials.length]
      : (u - 0.5) * 10 ** ((s >>> 4) % 12 - 6);
  }
  return out;
}

/** Bitwise equality, any NaN matching any NaN (payloads are not specified). */
function assertSameBits(actual: Float32Array, expected: Float32Array, what: string): void {
  const a = new Uint32Array(actual.buffer, actual.byteOffset, actual.length);
  const e = new Uint32Array(expected.buffer, expected.byteOffset, expected.length);
  for (let i = 0; i < actual.length; i++) {
    if (Number.isNaN(actual[i]) && Number.isNaN(expected[i])) continue;
    assert.equal(a[i], e[i], `${what}: element ${i}: ${actual[i]} vs ${expected[i]}`);
  }
}

Deno.test("SIMD all-reduce sums: the same bits as the scalar loop (2-4 ranks, sum and avg, every tail)", () => {
  let checked = 0;
  for (const ranks of [2, 3, 4]) {
    for (const n of [1, 3, 4, 5, 8, 17, 1001]) {
      for (const op of ["sum", "avg"] as ReduceOp[]) {
        const area = ReduceArea.create(ranks, n);
        if (!area) {
          console.warn("no WebAssembly SIMD with shared memory here: the SIMD sums are SKIPPED");
          return;
        }
        const parts = Array.from({ length: ranks }, (_, q) => values(31 * q + n, n));
        parts.forEach((p, q) => area.part(q).set(p));
        const expected = new Float32Array(n);
        reduceInto(expected, parts, 0, n, op);
        assertSameBits(area.reduce(op), expected, `${ranks} ranks, ${n} elements, ${op}`);
        checked++;
      }
    }
  }
  assert.equal(checked, 3 * 7 * 2);
});

Deno.test("SIMD all-reduce sums: only float sum and avg of two or more arrays", () => {
  const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
  const reducer = wasmReducer(memory);
  if (!reducer) return;
  assert.equal(reducer.reduce(0, [16, 32], 4, "max"), false);
  assert.equal(reducer.reduce(0, [16], 4, "sum"), false);
  assert.equal(reducer.reduce(0, [16, 32], 4, "avg"), true);
  const area = ReduceArea.create(2, 4)!;
  assert.throws(() => area.reduce("min"), /op min over 2 parts is not a SIMD sum/);
});

Deno.test("a local group's exchange memory is WebAssembly memory (the SIMD sums run on its slots)", () => {
  const shared = createLocalShared(2, 1024);
  assert.ok(shared.memory instanceof WebAssembly.Memory);
  assert.equal(shared.data, shared.memory.buffer);
  assert.ok(shared.data.byteLength >= 2 * 2 * 1024);
});

Deno.test("allReduceVia: chunk by chunk straight from and into the caller's arrays, the same bits as allReduce (2 and 5 ranks)", async () => {
  // Atomics.waitAsync wakes up on a task that does not keep Deno's event loop alive.
  const alive = setInterval(() => {}, 5);
  for (const ranks of [2, 5]) {
    for (const op of ["sum", "avg"] as ReduceOp[]) {
      const n = 1000; // 256 float32 per slot: 4 chunks
      const call = (seq: number): CollectiveCall => {
        const shape = { kind: "allReduce" as const, seq, dtype: "float32" as const, op };
        return { ...shape, header: packHeader({ ...shape, shapes: [[n]] }) };
      };
      const shared = createLocalShared(ranks, 1024);
      const backends = Array.from({ length: ranks }, (_, q) => new LocalBackend(shared, q, 10_000));
      const inputs = backends.map((_, q) => values(7 * q + ranks, n));
      const expected = new Float32Array(n);
      reduceInto(expected, inputs, 0, n, op);
      const outs = backends.map(() => new Float32Array(n).fill(NaN));
      const seen = backends.map(() => [] as number[]);
      await Promise.all(backends.map((b, q) =>
        b.allReduceVia(call(0), n, async (into, start) => {
          seen[q].push(start);
          await Promise.resolve();
          into.set(inputs[q].subarray(start, start + into.length));
        }, (from, start) => outs[q].set(from, start))
      ));
      const plain = inputs.map((x) => x.slice());
      await Promise.all(backends.map((b, q) => b.allReduce(call(1), plain[q])));
      for (let q = 0; q < ranks; q++) {
        assertSameBits(outs[q], expected, `${ranks} ranks ${op}, rank ${q}`);
        assertSameBits(outs[q], plain[q], `${ranks} ranks ${op}, rank ${q} vs allReduce`);
      }
      assert.deepEqual(seen[0], ranks === 2 ? [0, 256, 512, 768] : [0]);
    }
  }
  clearInterval(alive);
});

Deno.test("allReduceVia over 2 ranks: each sums half in place; back-to-back calls reuse the slots with the right values", async () => {
  const alive = setInterval(() => {}, 5);
  const shared = createLocalShared(2, 1024);
  const backends = [0, 1].map((q) => new LocalBackend(shared, q, 10_000));
  const n = 777; // 256 float32 per slot: 4 chunks, the last odd
  let seq = 0;
  for (let step = 0; step < 7; step++) {
    // max and min take the whole-chunk path (the scalar loop cannot sum in place).
    const op: ReduceOp = (["avg", "sum", "avg", "max", "sum", "min", "avg"] as const)[step];
    const shape = { kind: "allReduce" as const, seq: seq++, dtype: "float32" as const, op };
    const call: CollectiveCall = { ...shape, header: packHeader({ ...shape, shapes: [[n]] }) };
    const inputs = [0, 1].map((q) => values(13 * q + step, n));
    const expected = new Float32Array(n);
    reduceInto(expected, inputs, 0, n, op);
    const outs = [0, 1].map(() => new Float32Array(n).fill(NaN));
    await Promise.all(backends.map((b, q) =>
      b.allReduceVia(call, n, async (into, start) => {
        // The ranks reach the exchange at different times.
        if (q === step % 2) await new Promise((resolve) => setTimeout(resolve, 2));
        into.set(inputs[q].subarray(start, start + into.length));
      }, (from, start) => outs[q].set(from, start))
    ));
    for (const q of [0, 1]) assertSameBits(outs[q], expected, `step ${step} ${op}, rank ${q}`);
  }
  clearInterval(alive);
});
