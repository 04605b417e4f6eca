/**
 * The cpu backend's strided `copy` kernel, which merges dims that both
 * sides step through as one (and drops size-1 dims) before walking runs:
 * against an element-by-element reference for random shapes, strides
 * (permuted, zero, negative, with size-1 dims of any stride), offsets, and
 * runs on either side of the length where it switches from a loop to
 * `TypedArray.set`; positions the copy does not name keep what was there.
 * Then permuted, narrowed and expanded tensors (each a copy) on every
 * backend against values computed here.
 * @module
 */

import assert from "node:assert/strict";
import { arange } from "../mod.ts";
import { copy } from "../src/backends/cpu/kernels/copy.ts";
import { backendTest } from "./harness.ts";

/** A small deterministic generator (tests must not depend on Math.random). */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

interface Layout {
  shape: number[];
  xStrides: number[];
  xOffset: number;
  outStrides: number[];
  outOffset: number;
}

/** The copy one element at a time: what the kernel must equal. */
function reference(x: Float32Array, out: Float32Array, l: Layout): void {
  const numel = l.shape.reduce((a, b) => a * b, 1);
  for (let flat = 0; flat < numel; flat++) {
    let rest = flat;
    let si = l.xOffset;
    let di = l.outOffset;
    for (let d = l.shape.length - 1; d >= 0; d--) {
      const i = rest % l.shape[d];
      rest = Math.floor(rest / l.shape[d]);
      si += i * l.xStrides[d];
      di += i * l.outStrides[d];
    }
    out[di] = x[si];
  }
}

/** The span of positions a layout's strides reach: [lowest offset from the start, highest]. */
function span(shape: number[], strides: number[]): [number, number] {
  let lo = 0;
  let hi = 0;
  shape.forEach((s, d) => {
    const reach = (s - 1) * strides[d];
    if (reach < 0) lo += reach;
    else hi += reach;
  });
  return [lo, hi];
}

function check(l: Layout, what: string): void {
  const [xLo, xHi] = span(l.shape, l.xStrides);
  const [oLo, oHi] = span(l.shape, l.outStrides);
  const x = Float32Array.from({ length: l.xOffset + xHi + 1 }, (_, i) => i * 0.5 - 7);
  const fill = (n: number) => new Float32Array(n).fill(-99);
  const got = fill(l.outOffset + oHi + 3);
  const want = fill(got.length);
  assert.ok(l.xOffset + xLo >= 0 && l.outOffset + oLo >= 0, `${what}: bad test layout`);
  copy({ ...l, x, out: got, dtype: "float32" });
  reference(x, want, l);
  assert.deepEqual(Array.from(got), Array.from(want), `${what}: ${JSON.stringify(l)}`);
}

Deno.test("cpu copy: hand-picked layouts (merged runs, size-1 dims, zero and negative strides)", () => {
  const cases: [string, Layout][] = [
    ["contiguous 5-D: one run", {
      shape: [4, 3, 2, 5, 7],
      xStrides: [210, 70, 35, 7, 1],
      xOffset: 0,
      outStrides: [210, 70, 35, 7, 1],
      outOffset: 0,
    }],
    ["permuted, inner pair mergeable", {
      shape: [2, 3, 4, 5],
      xStrides: [60, 5, 15, 1],
      xOffset: 3,
      outStrides: [60, 20, 5, 1],
      outOffset: 2,
    }],
    ["size-1 dims with odd strides", {
      shape: [1, 3, 1, 4, 1],
      xStrides: [999, 4, 7, 1, 123],
      xOffset: 5,
      outStrides: [0, 4, 55, 1, 9],
      outOffset: 1,
    }],
    ["all dims size 1", {
      shape: [1, 1, 1],
      xStrides: [5, 6, 7],
      xOffset: 9,
      outStrides: [3, 2, 1],
      outOffset: 4,
    }],
    ["expand: zero strides, merged", {
      shape: [3, 4, 70],
      xStrides: [0, 0, 1],
      xOffset: 1,
      outStrides: [280, 70, 1],
      outOffset: 0,
    }],
    ["expand of a scalar", {
      shape: [5, 6],
      xStrides: [0, 0],
      xOffset: 2,
      outStrides: [6, 1],
      outOffset: 0,
    }],
    ["flipped rows (negative stride)", {
      shape: [3, 80],
      xStrides: [80, -1],
      xOffset: 79,
      outStrides: [80, 1],
      outOffset: 0,
    }],
    ["negative outer strides merge", {
      shape: [3, 4, 5],
      xStrides: [-20, -5, -1],
      xOffset: 59,
      outStrides: [20, 5, 1],
      outOffset: 0,
    }],
    ["into a strided region (gaps kept)", {
      shape: [3, 4, 5],
      xStrides: [20, 5, 1],
      xOffset: 0,
      outStrides: [40, 10, 1],
      outOffset: 3,
    }],
    ["long runs (set) beside short ones", {
      shape: [2, 3, 64],
      xStrides: [192, 64, 1],
      xOffset: 0,
      outStrides: [64, 128, 1],
      outOffset: 0,
    }],
    ["transposed: strided on both sides", {
      shape: [6, 9],
      xStrides: [1, 6],
      xOffset: 0,
      outStrides: [9, 1],
      outOffset: 0,
    }],
  ];
  for (const [what, l] of cases) check(l, what);
});

Deno.test("cpu copy: random permuted, narrowed and expanded views match element by element", () => {
  const rand = lcg(2026);
  for (let t = 0; t < 300; t++) {
    const nd = 1 + Math.floor(rand() * 5);
    // At most one long dim (runs past the loop/set switch), so cases stay small.
    const long = Math.floor(rand() * nd * 2);
    const shape = Array.from(
      { length: nd },
      (_, d) => 1 + Math.floor(rand() * (d === long ? 90 : 5)),
    );
    // The source strides: a contiguous block's (padded per dim, as a narrowed view's) permuted,
    // some dims expanded (stride 0), some flipped (negative stride); x spans what they reach.
    const padded = shape.map((s) => s + (rand() < 0.3 ? Math.floor(rand() * 3) : 0));
    const base: number[] = new Array(nd);
    for (let d = nd - 1, acc = 1; d >= 0; d--) {
      base[d] = acc;
      acc *= padded[d];
    }
    const order = Array.from({ length: nd }, (_, d) => d).sort(() => rand() - 0.5);
    let xOffset = Math.floor(rand() * 4);
    const xStrides = order.map((d) => base[d]);
    for (let d = 0; d < nd; d++) {
      const kind = rand();
      if (kind < 0.15) xStrides[d] = 0;
      else if (kind < 0.3) {
        xOffset += (shape[d] - 1) * xStrides[d];
        xStrides[d] = -xStrides[d];
      }
    }
    const outStrides: number[] = new Array(nd);
    const gap = rand() < 0.3 ? 2 : 1;
    for (let d = nd - 1, acc = gap; d >= 0; d--) {
      outStrides[d] = acc;
      acc *= shape[d];
    }
    check({ shape, xStrides, xOffset, outStrides, outOffset: Math.floor(rand() * 3) }, `case ${t}`);
  }
});

backendTest(
  "permuted, narrowed and expanded views copy to the values they show",
  async (device) => {
    const x = arange(0, 2 * 3 * 4 * 5, 1, { device }).reshape([2, 3, 4, 5]);
    const at = (n: number, c: number, h: number, w: number) => ((n * 3 + c) * 4 + h) * 5 + w;
    const permuted = await x.permute([0, 2, 1, 3]).data();
    const want: number[] = [];
    for (let n = 0; n < 2; n++) {
      for (let h = 0; h < 4; h++) {
        for (let c = 0; c < 3; c++) for (let w = 0; w < 5; w++) want.push(at(n, c, h, w));
      }
    }
    assert.deepEqual(Array.from(permuted), want);
    const narrowed = await x.narrow(3, 1, 3).narrow(1, 1, 1).data();
    const want2: number[] = [];
    for (let n = 0; n < 2; n++) {
      for (let h = 0; h < 4; h++) for (let w = 1; w < 4; w++) want2.push(at(n, 1, h, w));
    }
    assert.deepEqual(Array.from(narrowed), want2);
    const expanded = await x.narrow(0, 1, 1).narrow(2, 2, 1).expand([3, 3, 1, 5]).data();
    const want3: number[] = [];
    for (let r = 0; r < 3; r++) {
      for (let c = 0; c < 3; c++) for (let w = 0; w < 5; w++) want3.push(at(1, c, 2, w));
    }
    assert.deepEqual(Array.from(expanded), want3);
  },
);
