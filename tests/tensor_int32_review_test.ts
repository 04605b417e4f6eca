/**
 * `tensor(Float64Array | Float32Array, { dtype: "int32" })` as PyTorch 1.13's
 * `torch.tensor(numpy_array, dtype=torch.int32)`: fractions truncate toward zero and the range
 * is checked after truncation (float64 2147483647.5 gives 2147483647, where a list of numbers
 * overflows, as PyTorch's list path). A value whose truncation int32 cannot hold is an error
 * here, where PyTorch's cast gives -2^31 silently. Against tests/fixtures/torch_tensor_int32_typed.json
 * on every backend.
 */

import assert from "node:assert/strict";
import { tensor } from "../mod.ts";
import fixtures from "./fixtures/torch_tensor_int32_typed.json" with { type: "json" };
import { backendTest } from "./harness.ts";

const decode = (v: number | string): number =>
  typeof v === "number" ? v : { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity }[v]!;

const OUT_OF_RANGE = /tensor: .* cannot be stored as int32/;

for (const [name, Array32or64] of [["float64", Float64Array], ["float32", Float32Array]] as const) {
  backendTest(
    `tensor(${Array32or64.name}, int32) truncates as PyTorch's from a ${name} numpy array, refuses what int32 cannot hold`,
    async (d) => {
      const rows = fixtures[name];
      const fits = rows.filter((r) => r.int32 !== null);
      const values = new Array32or64(fits.map((r) => decode(r.value)));
      const t = tensor(values, { dtype: "int32", device: d });
      assert.equal(t.dtype, "int32");
      assert.deepEqual(Array.from(await t.data()), fits.map((r) => r.int32));
      let refused = 0;
      for (const r of rows) {
        if (r.int32 !== null) continue;
        refused++;
        const v = decode(r.value);
        assert.throws(
          () => tensor(new Array32or64([0, v]), { dtype: "int32", device: d }),
          OUT_OF_RANGE,
          `${v}`,
        );
      }
      // Both sides, and the list path's edge that a float64 array lets through.
      assert.ok(refused > 0 && fits.length > refused);
      if (name === "float64") {
        assert.deepEqual(Array.from(await tensor(values.subarray(0, 0)).data()), []);
        const edge = await tensor(new Float64Array([2147483647.5, -2147483648.5]), {
          dtype: "int32",
          device: d,
        }).data();
        assert.deepEqual(Array.from(edge), [2147483647, -2147483648]);
        assert.throws(() => tensor([2147483647.5], { dtype: "int32", device: d }), RangeError);
      }
    },
  );
}
