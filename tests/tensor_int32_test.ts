/**
 * `tensor(numbers, { dtype: "int32" })` as PyTorch 1.13's `torch.tensor(floats,
 * dtype=torch.int32)`: fractions truncate toward zero, and a value int32 cannot hold before
 * truncation (NaN, ±inf, beyond [-2^31, 2^31 - 1], 2147483647.5 included) is an overflow error.
 * Against tests/fixtures/torch_tensor_int32.json on every backend.
 */

import assert from "node:assert/strict";
import { tensor } from "../mod.ts";
import fixtures from "./fixtures/torch_tensor_int32.json" with { type: "json" };
import { backendTest } from "./harness.ts";

const decode = (v: number | string): number =>
  typeof v === "number" ? v : { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity }[v]!;

const OVERFLOW =
  /tensor: .* cannot be stored as int32 without overflow \(-2147483648 to 2147483647\)/;

backendTest(
  "tensor(fractions, int32) truncates toward zero as PyTorch's (200 random cases)",
  async (d) => {
    let overflows = 0;
    for (const { data, int32 } of fixtures.cases) {
      if (int32 === null) {
        overflows++;
        assert.throws(() => tensor(data, { dtype: "int32", device: d }), OVERFLOW);
        continue;
      }
      const t = tensor(data, { dtype: "int32", device: d });
      assert.equal(t.dtype, "int32");
      assert.deepEqual(t.shape, [data.length, data[0].length]);
      assert.deepEqual(Array.from(await t.data()), int32.flat());
    }
    // The fixture must exercise both sides.
    assert.ok(overflows > 0 && overflows < fixtures.cases.length);
  },
);

backendTest("tensor(x, int32) at the edges: -0.5, ±2^31, NaN, ±inf, as PyTorch's", async (d) => {
  for (const { value, int32 } of fixtures.edges) {
    const v = decode(value);
    if (int32 === null) {
      assert.throws(() => tensor([v], { dtype: "int32", device: d }), OVERFLOW, `${v}`);
      assert.throws(() => tensor(v, { dtype: "int32", device: d }), RangeError, `0-d ${v}`);
    } else {
      assert.deepEqual(Array.from(await tensor([v], { dtype: "int32", device: d }).data()), [
        int32,
      ]);
      assert.equal(await tensor(v, { dtype: "int32", device: d }).item(), int32, `0-d ${v}`);
    }
  }
});

backendTest("tensor(int32): booleans and a mixed nested list truncate as PyTorch's", async (d) => {
  const t = tensor([[true, 2.5], [-3.9, 4]], { dtype: "int32", device: d });
  assert.deepEqual(Array.from(await t.data()), [1, 2, -3, 4]);
});
