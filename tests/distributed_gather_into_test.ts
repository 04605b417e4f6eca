/**
 * The local group's `allGatherInto` and `reduceScatterInto` (what
 * `allGatherIntoTensor`, `reduceScatterTensor` and FSDP run on cpu ranks):
 * straight into the caller's array, chunk by chunk (parts straddling the
 * chunks at unaligned offsets), with this rank's data inside the output
 * or apart from it, for every dtype and op; the same values as `allGather`
 * and the same bits as `allReduce`'s part; a reused output gets the new
 * values of every call.
 * @module
 */

import assert from "node:assert/strict";
import {
  type CollectiveCall,
  type CollectiveKind,
  packHeader,
  type ReduceOp,
} from "../src/distributed/backend.ts";
import type { DType, TypedArray } from "../src/dtype.ts";
import { createLocalShared, LocalBackend } from "../src/distributed/local.ts";

function makeCall(
  kind: CollectiveKind,
  seq: number,
  dtype: DType,
  n: number,
  op?: ReduceOp,
): CollectiveCall {
  const shape = { kind, seq, dtype, op };
  return { ...shape, header: packHeader({ ...shape, shapes: [[n]] }) };
}

/** Deterministic values of `dtype` (floats with a NaN and an infinity mixed in). */
function values(dtype: DType, seed: number, n: number): TypedArray {
  const out = dtype === "float32"
    ? new Float32Array(n)
    : dtype === "float64"
    ? new Float64Array(n)
    : new Int32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = dtype === "int32"
      ? (s | 0) >> 8
      : i % 17 === 5
      ? NaN
      : i % 23 === 3
      ? -Infinity
      : (s / 2 ** 32 - 0.5) * 100;
  }
  return out;
}

/** Element-by-element equality (NaN equals NaN; -0 and 0 kept apart by the bits). */
function assertSame(actual: TypedArray, expected: TypedArray, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < actual.length; i++) {
    assert.ok(
      Object.is(actual[i], expected[i]),
      `${what}: element ${i}: ${actual[i]} vs ${expected[i]}`,
    );
  }
}

/** `ranks` local backends on one shared memory of 1 KiB slots (float32: 256 per chunk). */
function group(ranks: number): LocalBackend[] {
  const shared = createLocalShared(ranks, 1024);
  return Array.from({ length: ranks }, (_, q) => new LocalBackend(shared, q, 10_000));
}

Deno.test("allGatherInto: every rank's data in rank order straight into out, chunk by chunk, from inside out or apart", async () => {
  // Atomics.waitAsync wakes up on a task that does not keep Deno's event loop alive.
  const alive = setInterval(() => {}, 5);
  try {
    for (const ranks of [2, 3, 5]) {
      for (const dtype of ["float32", "int32", "float64"] as DType[]) {
        for (const m of [1, 255, 601]) {
          const backends = group(ranks);
          const inputs = backends.map((_, q) => values(dtype, 31 * q + m, m));
          const expected = values(dtype, 0, ranks * m);
          inputs.forEach((x, q) => expected.set(x, q * m));
          // Apart: data is its own array; inside: data is out's part `rank`.
          const apart = backends.map(() => values(dtype, 99, ranks * m));
          await Promise.all(
            backends.map((b, q) =>
              b.allGatherInto(makeCall("allGather", 0, dtype, m), inputs[q], apart[q])
            ),
          );
          const inside = backends.map((_, q) => {
            const out = values(dtype, 77, ranks * m);
            out.set(inputs[q], q * m);
            return out;
          });
          await Promise.all(backends.map((b, q) =>
            b.allGatherInto(
              makeCall("allGather", 1, dtype, m),
              inside[q].subarray(q * m, (q + 1) * m),
              inside[q],
            )
          ));
          const lists = await Promise.all(
            backends.map((b, q) => b.allGather(makeCall("allGather", 2, dtype, m), inputs[q])),
          );
          for (let q = 0; q < ranks; q++) {
            const what = `${ranks} ranks, ${dtype}, ${m} each, rank ${q}`;
            assertSame(apart[q], expected, `${what} (apart)`);
            assertSame(inside[q], expected, `${what} (inside)`);
            lists[q].forEach((part, r) =>
              assertSame(part, inputs[r], `${what}: allGather's part ${r}`)
            );
          }
        }
      }
    }
  } finally {
    clearInterval(alive);
  }
});

Deno.test("reduceScatterInto: this rank's part of every op, the same bits as allReduce's part, into a reused out", async () => {
  const alive = setInterval(() => {}, 5);
  try {
    const cases: [DType, ReduceOp][] = [
      ["float32", "sum"],
      ["float32", "avg"],
      ["float32", "max"],
      ["float32", "product"],
      ["float64", "avg"],
      ["float64", "min"],
      ["int32", "sum"],
      ["int32", "bxor"],
    ];
    for (const ranks of [2, 3, 5]) {
      for (const [dtype, op] of cases) {
        // Parts of 1 and of 333 elements: the latter straddle the 256- (float64:
        // 128-) element chunks at offsets that are not multiples of 4.
        for (const part of [1, 333]) {
          const n = ranks * part;
          const backends = group(ranks);
          const reused = backends.map(() => values(dtype, 5, part));
          let seq = 0;
          for (let round = 0; round < 2; round++) {
            const inputs = backends.map((_, q) => values(dtype, 13 * q + 7 * round + part, n));
            const reduced = inputs.map((x) => x.slice());
            await Promise.all(
              backends.map((b, q) =>
                b.allReduce(makeCall("allReduce", seq, dtype, n, op), reduced[q])
              ),
            );
            seq++;
            await Promise.all(
              backends.map((b, q) =>
                b.reduceScatterInto(
                  makeCall("reduceScatter", seq, dtype, n, op),
                  inputs[q],
                  reused[q],
                )
              ),
            );
            seq++;
            const fresh = await Promise.all(
              backends.map((b, q) =>
                b.reduceScatter(makeCall("reduceScatter", seq, dtype, n, op), inputs[q])
              ),
            );
            seq++;
            for (let q = 0; q < ranks; q++) {
              const what =
                `${ranks} ranks, ${dtype} ${op}, parts of ${part}, call ${round}, rank ${q}`;
              const expected = reduced[q].subarray(q * part, (q + 1) * part);
              assertSame(reused[q], expected, what);
              assertSame(fresh[q], expected, `${what} (reduceScatter)`);
              // The input is left as it was.
              assertSame(inputs[q], values(dtype, 13 * q + 7 * round + part, n), `${what}: input`);
            }
          }
        }
      }
    }
  } finally {
    clearInterval(alive);
  }
});
