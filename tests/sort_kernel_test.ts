/**
 * The backends' `sort` kernel and the composite bitonic network behind
 * `sort`, `argsort` and `topk`: values AND indices against a plain
 * TypeScript stable sort (rows of 1 to 4097 elements along every dim of 3-d
 * tensors, ascending and descending, NaN, ±inf, -0/+0, many ties, int32
 * extremes, float64), the network against the same reference, PyTorch 1.13
 * (tests/fixtures/torch_sort_kernel.json: values, indices and input
 * gradients), float64 gradient checks on cpu, and that the cpu backend has
 * the kernel (so a regression to the network is caught).
 * @module
 */

import assert from "node:assert/strict";
import { argsort, type Device, type DType, sort, type Tensor, tensor, topk } from "../mod.ts";
import { hasKernel } from "../src/ops/util.ts";
import { networkSortIndices } from "../src/ops_composite/sort.ts";
import { assertClose, backendTest, decodeFixture, floats, ints, REF } from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_sort_kernel.json" with { type: "json" };

/** The contract's order: NaN after everything; -0 equal to +0. */
function compare(a: number, b: number): number {
  const na = Number.isNaN(a), nb = Number.isNaN(b);
  if (na || nb) return Number(na) - Number(nb);
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The stable reference: `[values, indices]` of `data` (shape) sorted along `d`. */
function reference(
  data: readonly number[],
  shape: readonly number[],
  d: number,
  descending: boolean,
): [number[], number[]] {
  const size = shape[d];
  const inner = shape.slice(d + 1).reduce((a, b) => a * b, 1);
  const outer = data.length / (size * inner);
  const values = new Array<number>(data.length), indices = new Array<number>(data.length);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const at = (r: number) => (o * size + r) * inner + i;
      const order = Array.from({ length: size }, (_, r) => r);
      order.sort((a, b) =>
        (descending ? -compare(data[at(a)], data[at(b)]) : compare(data[at(a)], data[at(b)])) ||
        a - b
      );
      order.forEach((from, r) => {
        values[at(r)] = data[at(from)];
        indices[at(r)] = from;
      });
    }
  }
  return [values, indices];
}

/** float32 values with many ties, NaN, ±inf and both zeros mixed in. */
function special(n: number, seed: number): number[] {
  const base = floats([n], seed, -4, 4);
  const pick = ints([n], seed + 1, 0, 14);
  return base.map((v, k) =>
    [NaN, Infinity, -Infinity, -0, 0][pick[k]] ??
      (pick[k] < 9 ? Math.round(v) / 2 : v)
  );
}

/** Asserts values (sign of zero included) and indices equal the reference's. */
async function assertSorted(
  what: string,
  values: Tensor | null,
  indices: Tensor,
  expected: [number[], number[]],
): Promise<void> {
  assert.deepEqual(Array.from(await indices.data()), expected[1], `${what}: indices`);
  if (values) {
    const got = Array.from(await values.data());
    assertClose(got, expected[0], { atol: 0, rtol: 0, what: `${what}: values` });
    got.forEach((v, k) => {
      if (v === 0) assert.equal(Object.is(v, -0), Object.is(expected[0][k], -0), `${what}: ±0`);
    });
  }
}

const LENGTHS = [1, 2, 3, 17, 1000, 4097];

for (const n of LENGTHS) {
  backendTest(
    `sort kernel: float32 rows of ${n} along dims 0, 1, 2, both orders`,
    async (device) => {
      for (let d = 0; d < 3; d++) {
        const shape = [2, 3, 2].map((s, i) => (i === d ? n : s));
        const data = special(shape.reduce((a, b) => a * b, 1), 10 * n + d);
        const x = tensor(data, { shape, device });
        for (const descending of [false, true]) {
          const what = `[${shape}] dim ${d}${descending ? " descending" : ""}`;
          const expected = reference(data, shape, d, descending);
          const [values, indices] = sort(x, d, descending);
          await assertSorted(what, values, indices, expected);
          await assertSorted(`argsort ${what}`, null, argsort(x, d, descending), expected);
        }
      }
    },
  );
}

backendTest("sort kernel: int32 extremes and ties along dims 0 and 1", async (device) => {
  const extremes = [2 ** 31 - 1, -(2 ** 31), 0, -1, 1, 2 ** 31 - 1, -(2 ** 31)];
  for (const n of [5, 17, 300]) {
    const shape = [n, 4];
    const data = ints(shape, n, -3, 4).map((v, k) => (k % 7 === 3 ? extremes[k % 5] : v));
    const x = tensor(data, { shape, dtype: "int32", device });
    for (const d of [0, 1]) {
      for (const descending of [false, true]) {
        const [values, indices] = sort(x, d, descending);
        assert.equal(values.dtype, "int32");
        await assertSorted(
          `int32 [${shape}] dim ${d}`,
          values,
          indices,
          reference(data, shape, d, descending),
        );
      }
    }
  }
});

backendTest("sort kernel: the composite network agrees with the reference", async (device) => {
  for (const [n, seed] of [[2, 1], [17, 2], [1000, 3]]) {
    for (const dtype of ["float32", "int32"] as DType[]) {
      for (const d of [0, 1]) {
        const shape = d === 0 ? [n, 3] : [3, n];
        const data = dtype === "int32" ? ints(shape, seed, -4, 4) : special(3 * n, seed);
        const x = tensor(data, { shape, dtype, device });
        for (const descending of [false, true]) {
          await assertSorted(
            `network ${dtype} [${shape}] dim ${d}`,
            null,
            networkSortIndices(x, d, descending),
            reference(data, shape, d, descending),
          );
        }
      }
    }
  }
});

Deno.test("sort kernel: float64 rows (two-word keys) of 40 and 3000 elements", async () => {
  for (const n of [40, 3000]) {
    // Values that differ only in the low word must still be ordered.
    const data = special(n, n).map((v, k) => (k % 5 === 0 && Number.isFinite(v) ? v + 1e-12 : v));
    const x = tensor(data, { shape: [1, n], dtype: "float64", device: REF });
    for (const descending of [false, true]) {
      const [values, indices] = sort(x, 1, descending);
      await assertSorted(`float64 [${n}]`, values, indices, reference(data, [1, n], 1, descending));
    }
  }
});

Deno.test("sort kernel: the cpu backend has it (the network is the fallback only)", () => {
  assert.equal(hasKernel(REF, "sort"), true);
});

backendTest("sort kernel: the cpu and webgpu backends launch it", (device) => {
  if (device.backend === "cpu" || device.backend === "webgpu") {
    assert.equal(hasKernel(device, "sort"), true);
  }
});

interface Case {
  fn: "sort" | "argsort" | "topk";
  input: (number | string)[];
  shape: number[];
  dtype?: DType;
  args: (number | boolean)[];
  values?: (number | string)[];
  indices: number[];
  g?: (number | string)[];
  grad?: (number | string)[];
}

const CASES = fixtures.cases as Case[];

backendTest("sort kernel: sort, argsort and topk match PyTorch", async (device: Device) => {
  assert.ok(CASES.length >= 15);
  for (const [c, at] of CASES.map((c, k) => [c, k] as const)) {
    const what = `case ${at} (${c.fn} [${c.shape}] ${JSON.stringify(c.args)})`;
    const dtype = c.dtype ?? "float32";
    const x = tensor(decodeFixture(c.input), {
      shape: c.shape,
      dtype,
      device,
      requiresGrad: c.grad !== undefined,
    });
    let values: Tensor | null = null;
    let indices: Tensor;
    if (c.fn === "sort") [values, indices] = sort(x, c.args[0] as number, c.args[1] as boolean);
    else if (c.fn === "argsort") indices = argsort(x, c.args[0] as number, c.args[1] as boolean);
    else {
      const [k, dim, largest] = c.args as [number, number, boolean];
      [values, indices] = topk(x, k, dim, largest);
    }
    const expected: [number[], number[]] = [c.values ? decodeFixture(c.values) : [], c.indices];
    await assertSorted(what, values, indices, expected);
    if (c.grad && values) {
      const g = tensor(decodeFixture(c.g!), { shape: [...values.shape], device });
      values.mul(g).sum().backward();
      assertClose(await x.grad!.data(), decodeFixture(c.grad), { what: `${what}: grad` });
    }
  }
});

check("sort values (dim 1, ascending)", (x) => sort(x, 1).values, [inp([3, 7], 1)]);
check("sort values (dim 0, descending)", (x) => sort(x, 0, true).values, [inp([6, 2, 3], 2)]);
check("topk values (k 3 of 9, dim 1)", (x) => topk(x, 3, 1).values, [inp([2, 9], 3)]);

backendTest("sort kernel: errors name the bad dim or k", (device) => {
  const x = tensor([[1, 2], [3, 4]], { device });
  assert.throws(() => sort(x, 2), /dim.*2/);
  assert.throws(() => argsort(x, -3), /-3/);
  assert.throws(() => topk(x, 3, 1), /k = 3 is out of range for dim 1 of size 2/);
});
