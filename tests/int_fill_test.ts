/**
 * A fraction filled into an int32 tensor truncates toward zero, as PyTorch 1.13's `fill_`,
 * `full`, `fullLike`, `newFull`, `maskedFill(_)`, `indexFill(_)`, `fillDiagonal_` and
 * `scatter(_)` with a number (and `fill_`/`maskedFill(_)` with a 0-d float tensor); a value
 * outside int32's range is still refused. The numbers are `torch_int_fill.json`.
 * @module
 */

import assert from "node:assert/strict";
import * as mg from "../mod.ts";
import type { Device, Tensor } from "../mod.ts";
import fx from "./fixtures/torch_int_fill.json" with { type: "json" };
import { backendTest, on } from "./harness.ts";

/** The fixture's key back to a number (Python's repr; inf and nan as words). */
const parse = (key: string): number =>
  key === "inf" ? Infinity : key === "-inf" ? -Infinity : key === "nan" ? NaN : Number(key);

/** Each entry point on `d`, writing `v` into int32 zeros; a 4-element result. */
function numberOps(d: Device): Record<string, (v: number) => Tensor> {
  const z = (...shape: number[]) => mg.zeros(shape, { dtype: "int32", device: d });
  const mask = on(d, [4], [1, 0, 1, 0]).gt(0);
  const index = on(d, [2], [0, 3], "int32");
  return {
    fill_: (v) => z(4).fill_(v),
    full: (v) => mg.full([4], v, { dtype: "int32", device: d }),
    fullLike: (v) => mg.fullLike(z(4), v),
    newFull: (v) => z(2).newFull([4], v),
    maskedFill: (v) => z(4).maskedFill(mask, v),
    maskedFill_: (v) => z(4).maskedFill_(mask, v),
    indexFill: (v) => z(4).indexFill(0, index, v),
    indexFill_: (v) => z(4).indexFill_(0, index, v),
    fillDiagonal_: (v) => z(2, 2).fillDiagonal_(v).reshape([4]),
    scatter: (v) => z(4).scatter(0, index, v),
    scatter_: (v) => z(4).scatter_(0, index, v),
  };
}

/** The result of `f()` on the host, or the error it (or the next read) raised. */
async function outcome(d: Device, f: () => Tensor): Promise<number[] | Error> {
  try {
    const t = f();
    assert.equal(t.dtype, "int32");
    return Array.from(await t.data());
  } catch (e) {
    // A 0-d GPU value is checked when read: the verdict comes with the next read.
    await mg.zeros([1], { device: d }).data();
    return e as Error;
  }
}

function check(name: string, got: number[] | Error, want: number[] | string): void {
  if (want === "overflow") {
    assert.ok(got instanceof Error, `${name}: PyTorch overflows, got ${got}`);
    assert.match(got.message, /without overflow|cannot be stored as int32/, name);
  } else {
    if (got instanceof Error) assert.fail(`${name}: PyTorch gives ${want}, got ${got.message}`);
    assert.deepEqual(got, want, name);
  }
}

backendTest("a number filled into int32 truncates toward zero, as PyTorch's", async (d) => {
  const ops = numberOps(d);
  assert.deepEqual(Object.keys(ops).sort(), Object.keys(fx.number).sort());
  for (const [name, f] of Object.entries(ops)) {
    const cases = (fx.number as Record<string, Record<string, number[] | string>>)[name];
    for (const key of fx.values) {
      check(
        `${name}(${key})`,
        await outcome(d, () => f(parse(key))),
        cases[key],
      );
    }
  }
});

backendTest(
  "a 0-d float tensor filled into int32 truncates toward zero, as PyTorch's",
  async (d) => {
    const z = () => mg.zeros([4], { dtype: "int32", device: d });
    const mask = on(d, [4], [1, 0, 1, 0]).gt(0);
    const ops: Record<string, (v: Tensor) => Tensor> = {
      fill_: (v) => z().fill_(v),
      maskedFill: (v) => z().maskedFill(mask, v),
      maskedFill_: (v) => z().maskedFill_(mask, v),
    };
    assert.deepEqual(Object.keys(ops).sort(), Object.keys(fx.tensor).sort());
    for (const [name, f] of Object.entries(ops)) {
      const cases = (fx.tensor as Record<string, Record<string, number[] | string>>)[name];
      for (const key of fx.values) {
        // Computed on the device (a float32 0-d tensor, as torch.tensor(v)), so no host copy exists.
        const value = () => on(d, [], [parse(key)]).mul(1);
        check(`${name}(tensor(${key}))`, await outcome(d, () => f(value())), cases[key]);
      }
    }
  },
);

backendTest("where(mask, int32, number) promotes to float32 instead of truncating", async (d) => {
  const mask = on(d, [4], [1, 0, 1, 0]).gt(0);
  const z = mg.zeros([4], { dtype: "int32", device: d });
  for (const [key, want] of Object.entries(fx.where)) {
    const v = parse(key.replace(" first", ""));
    const r = key.endsWith("first") ? mg.where(mask, v, z) : mg.where(mask, z, v);
    assert.equal(r.dtype, want.dtype, key);
    assert.deepEqual(Array.from(await r.data()), Array.from(Float32Array.from(want.values)), key);
  }
});
