/**
 * `allReduceViaHost` (the all-reduce of DistributedDataParallel's gradients
 * over a process group without exchange memory of its own, the `"tcp"`
 * group's) reuses its host array from call to call: a fresh multi-megabyte
 * array every step cost its page faults, and made a 2-rank tcp DDP step of
 * the bench's MLP take 25 ms instead of 12.
 * @module
 */

import assert from "node:assert/strict";
import {
  allReduceViaHost,
  type CollectiveCall,
  type ProcessGroupBackend,
} from "../src/distributed/backend.ts";
import type { TypedArray } from "../src/dtype.ts";

/** A one-rank stand-in whose all-reduce doubles the values, recording each array it was handed. */
function doublingBackend(seen: TypedArray[], failAt = -1): ProcessGroupBackend {
  return {
    rank: 0,
    worldSize: 1,
    allReduce(_call: CollectiveCall, data: TypedArray): Promise<void> {
      seen.push(data);
      if (seen.length - 1 === failAt) return Promise.reject(new Error("the peer left"));
      for (let i = 0; i < data.length; i++) data[i] *= 2;
      return Promise.resolve();
    },
  } as unknown as ProcessGroupBackend;
}

const call = {
  kind: "allReduce",
  seq: 0,
  dtype: "float32",
  op: "sum",
  header: new Int32Array(8),
} as unknown as CollectiveCall;

async function reduceOnce(backend: ProcessGroupBackend, values: Float32Array): Promise<number[]> {
  const result: number[] = [];
  await allReduceViaHost(
    backend,
    call,
    values.length,
    (into, start) => {
      into.set(values.subarray(start, start + into.length));
      return Promise.resolve();
    },
    (from) => result.push(...from),
  );
  return result;
}

Deno.test("allReduceViaHost: the same host array serves every call of a dtype and length", async () => {
  const seen: TypedArray[] = [];
  const backend = doublingBackend(seen);
  // A length no other test in this process uses, so the pool starts empty for it.
  const n = 100_003;
  const a = new Float32Array(n).map((_, i) => i);
  const b = new Float32Array(n).map((_, i) => -i);
  assert.deepEqual((await reduceOnce(backend, a)).slice(0, 3), [0, 2, 4]);
  assert.deepEqual((await reduceOnce(backend, b)).slice(0, 3), [-0, -2, -4]);
  assert.equal(seen.length, 2);
  assert.equal(seen[0], seen[1], "the second call got a new array: the first was not reused");
  // Another length gets an array of its own.
  await reduceOnce(backend, new Float32Array(7));
  assert.equal(seen[2].length, 7);
});

Deno.test("allReduceViaHost: an array whose collective failed is not handed out again", async () => {
  const seen: TypedArray[] = [];
  const n = 100_019;
  await assert.rejects(reduceOnce(doublingBackend(seen, 0), new Float32Array(n)), /the peer left/);
  const values = new Float32Array(n).fill(3);
  const result = await reduceOnce(doublingBackend(seen), values);
  assert.notEqual(
    seen[1],
    seen[0],
    "a failed call's array (a receive may still land in it) was reused",
  );
  assert.equal(result[n - 1], 6);
});
