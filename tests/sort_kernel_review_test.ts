/**
 * Review regressions of the `sort` kernel and the ops on it (each failed
 * before its fix): `topk` with nothing to sort gives `k` indices along the
 * dim (PyTorch 1.13: `topk(tensor([5.]), 0)` is empty); the sort's gradient
 * is differentiable again (createGraph), as PyTorch's and as the network's
 * gather, on every backend; the webgpu kernel's scratch-size error names the
 * view, dtype and limit; topk's `k` given to the kernel (the cpu kernel
 * selects on long rows) gives exactly the stable sort's first k (ties, NaN,
 * ±0, values a last bit apart, int32 extremes). Also views (transposed,
 * narrowed, expanded, permuted), the second device of a backend, `noGrad`.
 * @module
 */

import assert from "node:assert/strict";
import { autograd, type DType, noGrad, sort, type Tensor, tensor, topk, zeros } from "../mod.ts";
import { sort as webgpuSort } from "../src/backends/webgpu/kernels/sort.ts";
import type { Runtime } from "../src/backends/webgpu/runtime.ts";
import { backendTest, floats, ints } from "./harness.ts";
import { gradgradcheck, inp } from "./gradcheck.ts";

backendTest(
  "sort review: topk with nothing to sort gives k indices along the dim",
  async (device) => {
    // [shape, k, dim] -> PyTorch 1.13's output shape.
    const cases: [number[], number, number, number[]][] = [
      [[1], 0, 0, [0]],
      [[3, 1], 0, 1, [3, 0]],
      [[0, 5], 2, 1, [0, 2]],
      [[4, 0, 6], 3, -1, [4, 0, 3]],
      [[2, 1, 3], 1, 1, [2, 1, 3]],
    ];
    for (const [shape, k, dim, want] of cases) {
      const x = zeros(shape, { device });
      const [values, indices] = topk(x, k, dim);
      const what = `topk([${shape}], k = ${k}, dim ${dim})`;
      assert.deepEqual(values.shape, want, `${what}: values' shape`);
      assert.deepEqual(indices.shape, want, `${what}: indices' shape`);
      assert.equal(indices.dtype, "int32");
      assert.deepEqual(Array.from(await indices.data()), new Array(values.numel()).fill(0), what);
    }
  },
);

Deno.test("sort review: gradgradcheck of sort values (kernel path, float64 cpu)", async () => {
  await gradgradcheck((x) => sort(x, 1).values.mul(sort(x, 0, true).values), [inp([3, 5], 7)]);
});

backendTest("sort review: the sort's gradient has a graph (createGraph)", async (device) => {
  // y = sort(x) (ascending) and g = ∂Σ y·w/∂x = w scattered back; ∂Σ g·v/∂w = v gathered.
  const x = tensor([3, NaN, 1, -0, 0, 1], { device, requiresGrad: true });
  const w = tensor([1, 2, 3, 4, 5, 6], { device, requiresGrad: true });
  const v = tensor([10, 20, 30, 40, 50, 60], { device });
  const [values, indices] = sort(x);
  assert.deepEqual(Array.from(await indices.data()), [3, 4, 2, 5, 0, 1]);
  const [g] = autograd.grad(values.mul(w).sum(), x, { createGraph: true });
  assert.deepEqual(Array.from(await g!.data()), [5, 6, 3, 1, 2, 4]);
  const [gw] = autograd.grad(g!.mul(v).sum(), w);
  assert.deepEqual(Array.from(await gw!.data()), [40, 50, 30, 60, 10, 20]);
});

backendTest("sort review: views, the second device and noGrad", async (device, devices) => {
  const base = tensor([[3, -1, 2, 2], [0, -0, 5, -7], [1, 1, NaN, 4]], { device });
  const plain = async (t: Tensor, d: number, descending: boolean) => {
    const c = tensor(Array.from(await t.data()), { shape: [...t.shape], device });
    return sort(c, d, descending);
  };
  const views: [string, Tensor][] = [
    ["transposed", base.transpose(0, 1)],
    ["narrowed", base.narrow(1, 1, 3)],
    ["expanded", base.narrow(0, 2, 1).expand([3, 4])],
    ["permuted", base.reshape([3, 2, 2]).permute([2, 0, 1])],
  ];
  for (const [name, view] of views) {
    for (let d = 0; d < view.ndim; d++) {
      for (const descending of [false, true]) {
        const [v, i] = sort(view, d, descending);
        const [pv, pi] = await plain(view, d, descending);
        const what = `${name} [${view.shape}] dim ${d}${descending ? " descending" : ""}`;
        assert.deepEqual(Array.from(await i.data()), Array.from(await pi.data()), what);
        const got = Array.from(await v.data()), want = Array.from(await pv.data());
        got.forEach((g, k) => assert.ok(Object.is(g, want[k]), `${what}: value ${k}`));
      }
    }
  }
  const other = devices[1];
  if (other) {
    const x = tensor([2, -0, 0, 1, 0], { device: other });
    const [v, i] = sort(x, 0, true);
    assert.equal(v.device, other);
    assert.equal(i.device, other);
    assert.deepEqual(Array.from(await i.data()), [0, 3, 1, 2, 4]);
    assert.ok(Object.is((await v.data())[2], -0), "-0 keeps its sign and place");
  }
  const x = tensor([3, 1, 2], { device, requiresGrad: true });
  const [v] = noGrad(() => sort(x));
  assert.equal(v.requiresGrad, false);
  assert.equal(v.gradFn, null);
});

Deno.test("sort review: the webgpu kernel's scratch error names the view, dtype and limit", () => {
  const rt = { maxBinding: 1 << 20 } as unknown as Runtime;
  const buffer = {} as GPUBuffer;
  assert.throws(
    () =>
      webgpuSort(rt, {
        x: buffer,
        values: buffer,
        indices: buffer,
        outer: 3,
        size: 100_001,
        inner: 2,
        k: 100_001,
        descending: false,
        dtype: "float32",
      }),
    (e: Error) =>
      e instanceof RangeError &&
      /\[3, 100001, 2\]/.test(e.message) && /float32/.test(e.message) &&
      /3145728 bytes/.test(e.message) && /1048576/.test(e.message),
  );
});

backendTest(
  "sort review: topk of long rows (the cpu kernel's selection) is the stable sort's head",
  async (device) => {
    // Heavy ties, NaN, ±inf, ±0 and values a last bit apart, in rows long enough for the selection.
    const pick = [NaN, Infinity, -Infinity, -0, 0, 1 + 2 ** -52, 1, 1 + 2 ** -23];
    for (const dtype of ["float32", "float64", "int32"] as DType[]) {
      if (dtype === "float64" && device.backend !== "cpu") continue;
      for (const [shape, dim] of [[[3, 2000], 1], [[700, 2, 3], 0], [[4, 49], 1]] as const) {
        const n = shape.reduce((a: number, b: number) => a * b, 1);
        const kinds = ints([n], n, 0, 12);
        const data = dtype === "int32"
          ? ints([n], n + 1, -4, 4).map((
            v,
            j,
          ) => (kinds[j] === 0 ? 2 ** 31 - 1 : kinds[j] === 1 ? -(2 ** 31) : v))
          : floats([n], n + 2).map((v, j) => pick[kinds[j]] ?? Math.round(v * 2) / 2);
        const x = tensor(data, { shape: [...shape], dtype, device });
        for (const largest of [true, false]) {
          const [sv, si] = sort(x, dim, largest);
          for (const k of [1, 2, 7, 30, shape[dim]]) {
            const [v, i] = topk(x, k, dim, largest);
            const what = `${dtype} [${shape}] dim ${dim} k ${k} largest ${largest}`;
            const wantI = Array.from(await si.narrow(dim, 0, k).data());
            assert.deepEqual(Array.from(await i.data()), wantI, `${what}: indices`);
            const want = Array.from(await sv.narrow(dim, 0, k).data());
            Array.from(await v.data()).forEach((g, j) =>
              assert.ok(Object.is(g, want[j]), `${what}: ${j}`)
            );
          }
        }
      }
    }
  },
);
