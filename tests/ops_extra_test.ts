/**
 * The composite tensor ops (src/ops_composite/) beyond PyTorch's numbers
 * (those are in ops_extra_torch_test.ts): float64 gradient checks on the cpu
 * (see `gradcheck.ts`), errors that name the shapes and values involved, and
 * the choices where multigrad differs from PyTorch (1/0 masks in the input's
 * dtype, int32 indices, a stable sort).
 * @module
 */

import assert from "node:assert/strict";
import {
  all,
  amax,
  any,
  argsort,
  cumprod,
  cumsum,
  erf,
  eye,
  flip,
  frac,
  isfinite,
  isinf,
  isnan,
  lerp,
  linspace,
  nanToNum,
  norm,
  outer,
  prod,
  roll,
  sort,
  type Tensor,
  tensor,
  tile,
  topk,
  trunc,
  zeros,
} from "../mod.ts";
import { check, CPU0, distinct, inp, values } from "./gradcheck.ts";
import { backendTest } from "./harness.ts";

// ---- gradient checks (float64, cpu) ----

check("flip two dims", (x) => x.flip([0, -1]), [inp([2, 3, 4], 4001)]);
check("flip function", (x) => flip(x, 1), [inp([3, 2], 4002)]);
check("roll flattened", (x) => x.roll(4), [inp([2, 3], 4003)]);
check("roll two dims", (x) => roll(x, [1, -2], [0, 2]), [inp([2, 3, 4], 4004)]);
check("repeat with a new dim", (x) => x.repeat([2, 1, 3]), [inp([2, 2], 4005)]);
check("tile", (x) => tile(x, [2]), [inp([2, 3], 4006)]);
check("expandAs", (x) => x.expandAs(zeros([2, 3, 4], { device: CPU0 })), [inp([3, 1], 4007)]);
check("viewAs and reshapeAs", (x) => {
  const other = zeros([6], { device: CPU0 });
  return x.viewAs(other).mul(x.reshapeAs(other));
}, [inp([2, 3], 4008)]);
check("typeAs float64 to float64", (x) => x.typeAs(x).mul(2), [inp([3], 4009)]);
check("cumsum", (x) => x.cumsum(1), [inp([3, 5], 4010)]);
check("cumsum negative dim", (x) => cumsum(x, -3), [inp([5, 2, 3], 4011)]);
check("cumprod", (x) => x.cumprod(1), [inp([3, 6], 4012, 0.5, 1.5)]);
const ZEROS = [2, 0, 3, 0, 5, -1, 0, 1.5, 0.5, 2, -0.5, 1.25, 0, 0, 2, 3, 0.75, -2];
check("cumprod with one, two and three zeros per row", (x) => cumprod(x, 1), [{
  shape: [3, 6],
  values: ZEROS,
}]);
check("cumprod with zeros along dim 0", (x) => x.cumprod(0), [{ shape: [6, 3], values: ZEROS }]);
check("prod over a dim with zeros", (x) => x.prod(1), [{ shape: [3, 6], values: ZEROS }]);
check("prod over a dim, keepdim", (x) => prod(x, -1, true), [inp([2, 3, 4], 4013, 0.5, 2)]);
check("prod of all, no zero", (x) => x.prod(), [inp([2, 3], 4014, 0.5, 2)]);
check("prod of all, one zero", (x) => x.prod(), [{ shape: [4], values: [2, 0, -3, 1.5] }]);
check("prod of all, two zeros", (x) => x.prod(), [{ shape: [4], values: [2, 0, -3, 0] }]);
check("amax over two dims", (x) => x.amax([0, 2]), [{
  shape: [2, 3, 4],
  values: distinct([24], 4015),
}]);
check("amin keepdim", (x) => x.amin(1, true), [{ shape: [3, 4], values: distinct([12], 4016) }]);
check("amax of all", (x) => amax(x), [{ shape: [5], values: distinct([5], 4017) }]);
for (const p of [2, 1, Infinity, -Infinity, 3, 0.5, 1.5, -1]) {
  const positive = values([12], 4018, 0.3, 2);
  const signed = distinct([12], 4019, -2, 0.3).map((v, i) => v === 0 ? 0.1 : i % 3 ? v : -v);
  check(`norm p=${p} over dim 1`, (x) => x.norm(p, 1), [{ shape: [3, 4], values: signed }]);
  check(`norm p=${p} of all`, (x) => norm(x, p), [{ shape: [12], values: positive }]);
}
check("norm over two dims, keepdim", (x) => x.norm(2, [0, -1], true), [inp([2, 3, 2], 4020)]);
check("outer", (x, y) => outer(x, y), [inp([3], 4021), inp([4], 4022)]);
check("trunc (zero gradient)", (x) => x.trunc().add(x.mul(0.5)), [{
  shape: [4],
  values: [-2.7, -0.4, 0.3, 1.6],
}]);
check("frac", (x) => frac(x), [{ shape: [4], values: [-2.7, -0.4, 0.3, 1.6] }]);
check("erf", (x) => erf(x), [inp([2, 4], 4023, -3, 3)]);
check("lerp, number weights on both branches", (x, e) => x.lerp(e, 0.3).add(lerp(x, e, 0.8)), [
  inp([2, 3], 4024),
  inp([2, 3], 4025),
]);
check("lerp, tensor weight, broadcast", (x, e, w) => x.lerp(e, w), [
  inp([3, 1], 4026),
  inp([4], 4027),
  inp([2, 1, 1], 4028, -0.5, 1.5),
]);
check("nanToNum (finite values pass)", (x) => x.nanToNum({ nan: 1 }), [inp([5], 4029)]);
check("sort values", (x) => x.sort(1).values, [{ shape: [3, 5], values: distinct([15], 4030) }]);
check("sort values descending, dim 0", (x) => sort(x, 0, true)[0], [{
  shape: [5, 3],
  values: distinct([15], 4031),
}]);
check("topk values", (x) => x.topk(2, 0).values, [{ shape: [4, 3], values: distinct([12], 4032) }]);
check("topk smallest", (x) => topk(x, 3, -1, false)[0], [{
  shape: [7],
  values: distinct([7], 4033),
}]);

// ---- choices where multigrad differs from PyTorch ----

const t = (v: number[], dtype: "float32" | "int32" | "float64" = "float32", shape?: number[]) =>
  tensor(v, { dtype, device: CPU0, shape });

Deno.test("all, any, isnan, isinf, isfinite: 1/0 in the input's dtype (no bool dtype)", async () => {
  const x = t([1, 0, NaN, Infinity, -Infinity, -0], "float32", [2, 3]);
  for (
    const [name, got, want] of [
      ["all", all(x, 1), [0, 0]],
      ["any", any(x, 0), [1, 1, 1]],
      ["isnan", isnan(x), [0, 0, 1, 0, 0, 0]],
      ["isinf", isinf(x), [0, 0, 0, 1, 1, 0]],
      ["isfinite", isfinite(x), [1, 1, 0, 0, 0, 1]],
    ] as const
  ) {
    assert.equal(got.dtype, "float32", name);
    assert.deepEqual([...await got.data()], want, name);
  }
  const ints = t([3, 0, -1], "int32");
  for (const got of [ints.all(), ints.any(), ints.isnan(), ints.isinf(), ints.isfinite()]) {
    assert.equal(got.dtype, "int32");
  }
  assert.deepEqual([...await ints.isfinite().data()], [1, 1, 1]);
  // A mask as where() and maskedFill() take it.
  assert.deepEqual([...await x.nanToNum().where(isfinite(x), 9).data()].slice(0, 3), [1, 0, 9]);
  // Empty: all is 1, any is 0, as PyTorch.
  assert.equal(await zeros([0], { device: CPU0 }).all().item(), 1);
  assert.equal(await zeros([0], { device: CPU0 }).any().item(), 0);
});

Deno.test("sort, argsort, topk: [values, indices] and .values/.indices; int32 indices", async () => {
  const x = t([3, 1, 2]);
  const result = x.sort();
  const [values, indices] = result;
  assert.equal(result.values, values);
  assert.equal(result.indices, indices);
  assert.equal(indices.dtype, "int32");
  assert.deepEqual([...await values.data()], [1, 2, 3]);
  assert.deepEqual([...await argsort(x, 0, true).data()], [0, 2, 1]);
  // sorted=false: PyTorch leaves the order open; multigrad gives the sorted one.
  assert.deepEqual([...await x.topk(2, 0, true, false).values.data()], [3, 2]);
  // A 0-d tensor sorts to itself, index 0.
  const [v0, i0] = t([5], "float32", []).sort();
  assert.deepEqual([v0.shape, await v0.item(), await i0.item()], [[], 5, 0]);
});

Deno.test("sort is stable and matches a host sort on long rows with ties (both orders)", async () => {
  const n = 777; // not a power of two: padded to 1024
  const rows = [0, 1].map((r) =>
    values([n], 4100 + r, -20, 20).map((v, i) => (i % 97 === 0 ? NaN : Math.round(v)))
  );
  const x = t(rows.flat(), "float32", [2, n]);
  for (const descending of [false, true]) {
    const [v, i] = x.sort(1, descending);
    const gotV = await v.data();
    const gotI = await i.data();
    rows.forEach((row, r) => {
      const key = (a: number) => (Number.isNaN(row[a]) ? Infinity : row[a]);
      const order = row.map((_, k) => k).sort((a, b) => {
        const nanA = Number.isNaN(row[a]);
        const nanB = Number.isNaN(row[b]);
        if (nanA !== nanB) return (nanA ? 1 : -1) * (descending ? -1 : 1);
        const diff = descending ? key(b) - key(a) : key(a) - key(b);
        return diff || a - b; // stable
      });
      assert.deepEqual(
        [...gotI.slice(r * n, (r + 1) * n)],
        order,
        `indices, descending ${descending}`,
      );
      assert.deepEqual(
        [...gotV.slice(r * n, (r + 1) * n)],
        order.map((k) => row[k]),
        `values, descending ${descending}`,
      );
    });
  }
});

Deno.test("cumsum and prod of int32 stay int32 (PyTorch: int64)", async () => {
  const x = t([3, -1, 4], "int32");
  assert.equal(x.cumsum(0).dtype, "int32");
  assert.deepEqual([...await x.cumsum(0).data()], [3, 2, 6]);
  assert.equal(x.prod().dtype, "int32");
  assert.equal(await x.prod().item(), -12);
});

Deno.test("eye and linspace: options, requiresGrad, the dtype's values", async () => {
  const e = eye(2, { dtype: "int32", device: CPU0 });
  assert.equal(e.dtype, "int32");
  assert.deepEqual(await e.toArray(), [[1, 0], [0, 1]]);
  assert.ok(eye(2, 3, { device: CPU0, requiresGrad: true }).requiresGrad);
  assert.deepEqual([...await linspace(0, 10, 7, { dtype: "int32", device: CPU0 }).data()], [
    0,
    1,
    3,
    5,
    6,
    8,
    10,
  ]);
  assert.deepEqual([...await linspace(3, 5, 1, { device: CPU0 }).data()], [3]);
});

Deno.test("nanToNum defaults are the dtype's largest finite values", async () => {
  const x = t([NaN, Infinity, -Infinity], "float64");
  assert.deepEqual([...await nanToNum(x).data()], [0, Number.MAX_VALUE, -Number.MAX_VALUE]);
  assert.deepEqual([...await trunc(t([-2.5, 2.5])).data()], [-2, 2]);
});

// ---- errors: clear messages naming shapes and values ----

function fails(fn: () => unknown, pattern: RegExp, what = String(pattern)): void {
  assert.throws(fn, (e: Error) => {
    assert.match(e.message, pattern, what);
    return true;
  });
}

Deno.test("errors: bad dims name the dim and the shape", () => {
  const x = zeros([2, 3], { device: CPU0 });
  fails(() => x.flip([0, 0]), /flip: dim 0 appears more than once in \[0,0\] \(shape \[2, 3\]\)/);
  fails(
    () => x.flip(2),
    /flip: dim 2 out of range for a 2-dimensional tensor \(expected -2 to 1\)/,
  );
  fails(() => x.cumsum(-3), /cumsum: dim -3 out of range/);
  fails(() => x.cumprod(5), /cumprod: dim 5 out of range/);
  fails(() => x.prod(2), /prod: dim 2 out of range/);
  fails(() => x.amax([1, -1]), /amax: dim 1 appears more than once in \[1,-1\]/);
  fails(() => x.norm(2, 3), /norm: dim 3 out of range/);
  fails(() => x.all(2), /all: dim 2 out of range/);
  fails(() => x.sort(2), /sort: dim 2 out of range/);
  fails(() => x.topk(1, -3), /topk: dim -3 out of range/);
  fails(
    () => zeros([0, 3], { device: CPU0 }).amax(0),
    /amax: cannot reduce dim 0 of size 0 \(shape \[0, 3\]\)/,
  );
});

Deno.test("errors: repeat, tile, roll, outer, topk arguments", () => {
  const x = zeros([2, 3], { device: CPU0 });
  fails(
    () => x.repeat([2]),
    /repeat: 1 sizes \[2\] for a tensor of 2 dims \(shape \[2, 3\]\): give a size for every dim/,
  );
  fails(
    () => x.repeat([2, -1]),
    /repeat: sizes must be an array of non-negative integers, got \[2,-1\]/,
  );
  fails(() => x.tile([1.5]), /tile: sizes must be an array of non-negative integers, got \[1.5\]/);
  fails(
    () => x.roll([1, 2], [0]),
    /roll: shifts \[1,2\] and dims \[0\] must have the same length \(2 vs 1\)/,
  );
  fails(() => x.roll([1, 2]), /roll: without dims, shifts must be one number .* got \[1,2\]/);
  fails(() => x.roll(1.5, 0), /roll: shifts must be an integer or an array of integers, got 1.5/);
  fails(
    () => x.outer(zeros([3], { device: CPU0 })),
    /outer: expects two 1-dimensional tensors, got shapes \[2, 3\] and \[3\]/,
  );
  fails(
    () => x.topk(4, 1),
    /topk: k = 4 is out of range for dim 1 of size 3 \(shape \[2, 3\]\): expected 0 to 3/,
  );
  fails(() => x.norm("nuc" as "fro"), /norm: p must be a number or "fro", got "nuc"/);
});

Deno.test("errors: dtypes (norm, frac, lerp)", () => {
  const ints = zeros([2], { dtype: "int32", device: CPU0 });
  const x = zeros([2], { device: CPU0 });
  fails(() => ints.norm(), /norm: expected a floating-point tensor, got int32 \(shape \[2\]\)/);
  fails(() => ints.frac(), /frac: expected a floating-point tensor, got int32/);
  fails(
    () => x.lerp(zeros([2], { dtype: "float64", device: CPU0 }), 0.5),
    /lerp: end is float64 \(shape \[2\]\), expected float32 as the input/,
  );
  fails(() => x.lerp(x, zeros([3], { device: CPU0 })), /lerp: .*cannot be broadcast/);
});

Deno.test("errors: eye and linspace arguments name the value", () => {
  fails(() => eye(-1), /eye: n must be a non-negative integer, got -1/);
  fails(() => eye(2, 1.5), /eye: m must be a non-negative integer, got 1.5/);
  fails(() => linspace(0, 1, -1), /linspace: steps must be a non-negative integer, got -1/);
  fails(() => linspace(0, 1, 2.5), /linspace: steps must be a non-negative integer, got 2.5/);
  fails(
    () => linspace(0, 1e30, 3, { dtype: "int32" }),
    /linspace: 1e\+30 cannot be stored as int32/,
  );
  fails(() => linspace(0, "1" as unknown as number, 3), /linspace: start and end must be numbers/);
});

Deno.test("the functions and the methods are the same ops", async () => {
  const x = t([2, -1, 0.5, 3], "float32", [2, 2]);
  const pairs: [Tensor, Tensor][] = [
    [flip(x, 0), x.flip(0)],
    [cumprod(x, 1), x.cumprod(1)],
    [prod(x, 0), x.prod(0)],
    [amax(x, 1), x.amax(1)],
    [norm(x, 1), x.norm(1)],
    [isnan(x), x.isnan()],
    [erf(x), x.erf()],
  ];
  for (const [a, b] of pairs) assert.deepEqual([...await a.data()], [...await b.data()]);
});

Deno.test("norm of no elements is 0 for p = ±Infinity too, as PyTorch (no max or min to take)", async () => {
  for (const p of [Infinity, -Infinity]) {
    assert.equal(await zeros([0]).norm(p).item(), 0);
    assert.deepEqual(await zeros([2, 0]).norm(p, 1).toArray(), [0, 0]);
    assert.deepEqual(zeros([0, 0]).norm(p, -1).shape, [0]);
  }
});

Deno.test("norm(0) gives no gradient, as PyTorch (None), and the ops before it get none", () => {
  const x = tensor([[1, 2, 0], [3, 0, 1]], { requiresGrad: true });
  const y = tensor([[1, 1, 1], [1, 1, 1]], { requiresGrad: true });
  x.sub(y).norm(0, -1).sum().backward();
  assert.equal(x.grad, null);
  assert.equal(y.grad, null);
});

Deno.test("a long sort keeps no stage tables once it is done (they total N·log²N/2 values)", async () => {
  const x = tensor(Array.from({ length: 10_000 }, (_, i) => (i * 7919) % 10_007), { device: CPU0 });
  // Only the positions table (64 KiB) and a few scalars may stay cached.
  const before = CPU0.memory().bytesInUse;
  const { values, indices } = x.sort(0);
  assert.equal(await values.max().item(), 10_006);
  values.dispose();
  indices.dispose();
  // Before, each of the 105 stages cached a 64 KiB table (6.7 MiB): now they go with their stage.
  assert.ok(CPU0.memory().bytesInUse - before < 256 * 1024, "no stage tables held");
});

backendTest(
  "topk of a few largest (one round each) equals the stable descending sort's first k",
  async (device) => {
    // Ties, NaN, ±inf and the lowest int32: the rounds must pick what the sort puts first.
    const rows = [
      [3, NaN, 3, -Infinity, 7, NaN, -Infinity, 7, 0, -0, 2, Infinity, 1, 3, 5, 5, -1, 4, 6, 8],
      [
        -Infinity,
        -Infinity,
        -Infinity,
        1,
        -Infinity,
        2,
        2,
        2,
        -3,
        9,
        9,
        -9,
        0,
        0,
        1,
        1,
        5,
        5,
        5,
        5,
      ],
    ];
    for (const dtype of ["float32", "int32"] as const) {
      const data = dtype === "int32"
        ? rows.map((r) => r.map((v) => (Number.isFinite(v) ? v : -(2 ** 31))))
        : rows;
      const x = tensor(data, { dtype, device });
      for (const k of [1, 3, 5, 9]) {
        const top = x.topk(k, 1);
        const sorted = x.sort(1, true);
        const want = await sorted.indices.narrow(1, 0, k).toArray();
        assert.deepEqual(await top.indices.toArray(), want, `${dtype} k=${k} indices`);
        const values = await top.values.toArray();
        assert.deepEqual(values, await sorted.values.narrow(1, 0, k).toArray(), `${dtype} values`);
      }
    }
    const g = tensor([[1, 5, 5, 2, 0, 9, 3, 3]], { device, requiresGrad: true });
    g.topk(3, 1).values.sum().backward();
    assert.deepEqual(Array.from(await g.grad!.data()), [0, 1, 1, 0, 0, 1, 0, 0]);
  },
);
