/**
 * The cpu backend's WebAssembly SIMD loops for float32 arrays that live in
 * the matmul kernel's shared memory (`wasm/elementwise.wat`): ReLU, the
 * select of ReLU's gradient and binary rows give the TypeScript loops'
 * results bit for bit (NaN as NaN), at odd lengths (the scalar tails),
 * unaligned starts, rows against one value and broadcast operands; im2col
 * and col2im at every stride, padding and dilation class; batch norm
 * forward and backward at odd and even run lengths; the 2x2 max pool (NaN,
 * ties, odd sizes) and its gradient's scatter-add; Adam in every weight
 * decay mode; column sums into resident and host outputs.
 */

import assert from "node:assert/strict";
import { binary } from "../src/backends/cpu/kernels/binary.ts";
import { unary } from "../src/backends/cpu/kernels/unary.ts";
import { where } from "../src/backends/cpu/kernels/where.ts";
import { im2col } from "../src/backends/cpu/kernels/im2col.ts";
import { col2im } from "../src/backends/cpu/kernels/col2im.ts";
import { batchNorm } from "../src/backends/cpu/kernels/batch_norm.ts";
import { maxPool2d } from "../src/backends/cpu/kernels/max_pool2d.ts";
import { scatterAdd } from "../src/backends/cpu/kernels/scatter_add.ts";
import { adam } from "../src/backends/cpu/kernels/adam.ts";
import { reduce } from "../src/backends/cpu/kernels/reduce.ts";
import { batchNormBackward } from "../src/backends/cpu/kernels/batch_norm_backward.ts";
import {
  kernelFloats,
  kernelInts,
  releaseKernelFloats,
  startMatmulThreads,
} from "../src/backends/cpu/kernels/matmul.ts";
import { residentLoops } from "../src/backends/cpu/wasm/elementwise.ts";
import type { BinaryOp, WindowView } from "../src/backends/backend.ts";

const SPECIAL = [NaN, 0, -0, Infinity, -Infinity, 1, -1, 1e-40, -1e-40, 3.4e38, -3.4e38];

/** `n` float32 values: random of both signs, zeros and the special values above. */
function values(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    const r = s / 2 ** 32;
    out[i] = r < 0.1 ? SPECIAL[s % SPECIAL.length] : r < 0.15 ? 0 : (r - 0.55) * 8;
  }
  return out;
}

/** A copy of `host` in the kernel's memory (the caller releases it). */
function resident(host: Float32Array): Float32Array {
  const r = kernelFloats(host.length)!;
  r.set(host);
  return r;
}

function assertSameBits(got: Float32Array, want: Float32Array, what: string): void {
  assert.equal(got.length, want.length);
  const g = new Int32Array(got.buffer, got.byteOffset, got.length);
  const w = new Int32Array(want.buffer, want.byteOffset, want.length);
  for (let i = 0; i < got.length; i++) {
    if (Number.isNaN(got[i]) && Number.isNaN(want[i])) continue;
    if (g[i] !== w[i]) {
      assert.fail(`${what}: element ${i} is ${got[i]} (0x${g[i].toString(16)}), want ${want[i]}`);
    }
  }
}

/** Whether this engine and process put arrays in a shared kernel memory at all. */
async function haveResident(): Promise<boolean> {
  await startMatmulThreads(2);
  const probe = kernelFloats(16);
  if (probe === undefined) return false;
  const loops = residentLoops(probe);
  releaseKernelFloats(probe);
  return loops !== null;
}

const LENGTHS = [1, 3, 4, 5, 17, 1027];
const OPS: BinaryOp[] = ["add", "sub", "mul", "div", "lt", "le", "gt", "ge", "maximum", "eq"];

Deno.test("cpu wasm elementwise: relu, select, binary rows equal the TypeScript loops bitwise", async (t) => {
  if (!(await haveResident())) {
    // No shared kernel memory here: every array is a host array, nothing to compare.
    assert.equal(kernelFloats(16) === undefined || residentLoops(kernelFloats(16)!) === null, true);
    return;
  }
  const held: Float32Array[] = [];
  const keep = (a: Float32Array) => (held.push(a), a);
  await t.step("relu", () => {
    for (const n of LENGTHS) {
      const x = values(n, n);
      const want = new Float32Array(n);
      unary({ op: "relu", x, out: want, numel: n, dtype: "float32" });
      const rx = keep(resident(x));
      const got = keep(kernelFloats(n)!);
      assert.ok(residentLoops(rx, got) !== null);
      unary({ op: "relu", x: rx, out: got, numel: n, dtype: "float32" });
      assertSameBits(got, want, `relu n=${n}`);
      for (let i = 0; i < n; i++) {
        if (!Number.isNaN(x[i])) assert.ok(Object.is(want[i], x[i] > 0 ? x[i] : 0), `relu ${x[i]}`);
      }
    }
  });
  await t.step("where(cond, scalar, b): ReLU's gradient", () => {
    for (const n of LENGTHS) {
      const cond = values(n, 7 * n).map((v) => (Number.isNaN(v) ? v : +(v <= 0)));
      const b = values(n, 3 * n);
      for (const a of [0, -0, NaN, 2.5]) {
        const av = new Float32Array([a]);
        const args = { shape: [n], condStrides: [1], aStrides: [0], bStrides: [1] };
        const want = new Float32Array(n);
        const common = { ...args, condDtype: "float32", dtype: "float32" } as const;
        where({ ...common, cond, a: av, b, out: want });
        const got = keep(kernelFloats(n)!);
        const [rc, rb] = [keep(resident(cond)), keep(resident(b))];
        where({ ...common, cond: rc, a: av, b: rb, out: got });
        assertSameBits(got, want, `where n=${n} a=${a}`);
        for (let i = 0; i < n; i++) {
          assert.ok(Object.is(want[i], cond[i] !== 0 ? av[0] : b[i]) || Number.isNaN(want[i]));
        }
      }
    }
  });
  await t.step("binary: same shape, rows against one value, unaligned starts", () => {
    for (const op of OPS) {
      for (const n of LENGTHS) {
        const a = values(n, 11 * n + 1);
        const b = values(n, 13 * n + 2);
        const same = { op, shape: [n], aStrides: [1], bStrides: [1], dtype: "float32" } as const;
        const want = new Float32Array(n);
        binary({ ...same, a, b, out: want });
        // One element in: the loops must not assume 16-byte alignment.
        const ra = keep(kernelFloats(n + 1)!).subarray(1);
        ra.set(a);
        const rb = keep(resident(b));
        const got = keep(kernelFloats(n)!);
        binary({ ...same, a: ra, b: rb, out: got });
        assertSameBits(got, want, `${op} n=${n}`);
        // Rows of n against one value per row, b a host array (a bias).
        const rows = 3;
        const m = values(rows * n, n + 5);
        const bias = values(rows, n + 9);
        const layout = {
          op,
          shape: [rows, n],
          aStrides: [n, 1],
          bStrides: [1, 0],
          dtype: "float32",
        } as const;
        const wantRows = new Float32Array(rows * n);
        binary({ ...layout, a: m, b: bias, out: wantRows });
        const gotRows = keep(kernelFloats(rows * n)!);
        binary({ ...layout, a: keep(resident(m)), b: bias, out: gotRows });
        assertSameBits(gotRows, wantRows, `${op} rows of ${n} against a value`);
        // Broadcast rows of b (a host [n] row for every row of a).
        const rowB = values(n, n + 21);
        const bcast = { ...layout, bStrides: [0, 1] };
        binary({ ...bcast, a: m, b: rowB, out: wantRows });
        binary({ ...bcast, a: keep(resident(m)), b: rowB, out: gotRows });
        assertSameBits(gotRows, wantRows, `${op} rows of ${n} against a host row`);
      }
    }
  });
  await t.step("im2col and col2im: strides, padding, dilation, odd sizes, -inf padding", () => {
    // [batch, channels, H, W, kH, kW, strideH, strideW, padH, padW, dilationH, dilationW]
    const cases = [
      [2, 3, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1],
      [1, 2, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1],
      [2, 1, 8, 11, 2, 3, 2, 3, 0, 1, 1, 1],
      [1, 2, 9, 10, 3, 2, 2, 1, 1, 0, 2, 3],
      [1, 1, 5, 5, 5, 5, 1, 1, 2, 2, 1, 1],
      [3, 2, 6, 13, 1, 4, 3, 2, 0, 2, 1, 2],
      [1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1],
    ];
    for (const c of cases) {
      const [batch, channels, height, width, kernelH, kernelW, strideH, strideW] = c;
      const [padH, padW, dilationH, dilationW] = c.slice(8);
      const outH = Math.floor((height + 2 * padH - dilationH * (kernelH - 1) - 1) / strideH) + 1;
      const outW = Math.floor((width + 2 * padW - dilationW * (kernelW - 1) - 1) / strideW) + 1;
      const view: WindowView = {
        ...{ batch, channels, height, width, kernelH, kernelW, strideH, strideW },
        ...{ padH, padW, dilationH, dilationW, outH, outW },
      };
      const x = values(batch * channels * height * width, height * 31 + width);
      const colsLength = batch * channels * kernelH * kernelW * outH * outW;
      for (const padValue of [0, -Infinity]) {
        const want = new Float32Array(colsLength);
        im2col({ ...view, x, out: want, padValue, dtype: "float32" });
        const got = keep(kernelFloats(colsLength)!);
        im2col({ ...view, x: keep(resident(x)), out: got, padValue, dtype: "float32" });
        assertSameBits(got, want, `im2col ${c} pad ${padValue}`);
      }
      const cols = values(colsLength, colsLength);
      const want = new Float32Array(x.length).fill(7);
      col2im({ ...view, x: cols, out: want, dtype: "float32" });
      const got = keep(kernelFloats(x.length)!);
      got.fill(7);
      col2im({ ...view, x: keep(resident(cols)), out: got, dtype: "float32" });
      assertSameBits(got, want, `col2im ${c}`);
    }
  });
  await t.step("batchNorm and batchNormBackward: statistics and gradients", () => {
    for (
      const [outer, channels, inner] of [
        [3, 2, 7],
        [2, 3, 8],
        [1, 1, 1],
        [4, 2, 49],
        [2, 2, 2],
        ...[3, 4, 5, 6, 11, 12, 13, 14, 30].map((inner) => [2, 2, inner]),
      ]
    ) {
      const n = outer * channels * inner;
      const x = values(n, n + 3).map((v) => (Number.isFinite(v) && Math.abs(v) < 1e6 ? v + 3 : 1));
      const grad = values(n, n + 4).map((v) => (Number.isFinite(v) && Math.abs(v) < 1e6 ? v : -2));
      const weight = values(channels, 5).map((v) => (Number.isFinite(v) ? v : 0.5));
      const bias = values(channels, 6).map((v) => (Number.isFinite(v) ? v : 0.25));
      const rows = { outer, channels, inner, dtype: "float32", eps: 1e-5 } as const;
      const stats = () => ({
        mean: new Float32Array(channels),
        invstd: new Float32Array(channels),
        variance: new Float32Array(channels),
      });
      const [wantStats, gotStats] = [stats(), stats()];
      const want = new Float32Array(n);
      batchNorm({ ...rows, ...wantStats, x, weight, bias, out: want });
      const rx = keep(resident(x));
      const got = keep(kernelFloats(n)!);
      assert.ok(residentLoops(rx, got) !== null);
      batchNorm({ ...rows, ...gotStats, x: rx, weight, bias, out: got });
      assertSameBits(got, want, `batchNorm ${[outer, channels, inner]}`);
      for (const k of ["mean", "invstd", "variance"] as const) {
        assertSameBits(gotStats[k], wantStats[k], `batchNorm ${k}`);
      }
      const grads = () => ({
        gradWeight: new Float32Array(channels),
        gradBias: new Float32Array(channels),
      });
      const [wantGrads, gotGrads] = [grads(), grads()];
      const back = { ...rows, weight, mean: wantStats.mean, invstd: wantStats.invstd };
      const wantInput = new Float32Array(n);
      batchNormBackward({ ...back, ...wantGrads, x, grad, gradInput: wantInput });
      const gotInput = keep(kernelFloats(n)!);
      const rg = keep(resident(grad));
      batchNormBackward({ ...back, ...gotGrads, x: rx, grad: rg, gradInput: gotInput });
      assertSameBits(gotInput, wantInput, `batchNormBackward ${[outer, channels, inner]}`);
      for (const k of ["gradWeight", "gradBias"] as const) {
        assertSameBits(gotGrads[k], wantGrads[k], `batchNormBackward ${k}`);
      }
    }
  });
  await t.step("maxPool2d 2x2 and the scatter-add of its gradient", () => {
    for (const [planes, H, W] of [[3, 4, 6], [2, 7, 5], [1, 2, 2], [4, 28, 28]]) {
      const [outH, outW] = [Math.floor(H / 2), Math.floor(W / 2)];
      // Few distinct values: ties; NaN from the specials.
      const x = values(planes * H * W, H * W + planes).map((
        v,
      ) => (Number.isNaN(v) ? v : Math.round(v)));
      const window = {
        ...{ batch: 1, channels: planes, height: H, width: W, kernelH: 2, kernelW: 2 },
        ...{ strideH: 2, strideW: 2, padH: 0, padW: 0, dilationH: 1, dilationW: 1, outH, outW },
      };
      const count = outH * outW;
      const want = new Float32Array(planes * count);
      const wantAt = new Int32Array(planes * count);
      maxPool2d({ ...window, x, out: want, indices: wantAt, dtype: "float32" });
      const got = keep(kernelFloats(planes * count)!);
      const gotAt = kernelInts(planes * count)!;
      const rx = keep(resident(x));
      assert.ok(residentLoops(rx, got, gotAt) !== null);
      maxPool2d({ ...window, x: rx, out: got, indices: gotAt, dtype: "float32" });
      assertSameBits(got, want, `maxPool2d ${[planes, H, W]}`);
      assert.deepEqual([...gotAt], [...wantAt], `maxPool2d positions ${[planes, H, W]}`);
      // The gradient: repeated and out-of-range positions too.
      const index = wantAt.map((r, i) =>
        i % 5 === 0 ? r - H * W : i % 3 === 0 ? H * W : i % 7 === 0 ? 0 : r
      );
      gotAt.set(index);
      const grad = values(planes * count, count + 1);
      const layout = { outer: planes, size: H * W, count, inner: 1, dtype: "float32" } as const;
      const wantGrad = new Float32Array(planes * H * W);
      scatterAdd({ ...layout, x: grad, index, out: wantGrad });
      const gotGrad = keep(kernelFloats(planes * H * W)!);
      gotGrad.fill(5);
      scatterAdd({ ...layout, x: keep(resident(grad)), index: gotAt, out: gotGrad });
      assertSameBits(gotGrad, wantGrad, `scatterAdd ${[planes, H, W]}`);
      assert.ok(releaseKernelFloats(gotAt));
    }
  });
  await t.step("adam: every weight decay mode, maximize, odd lengths", () => {
    for (const n of [1, 6, 1027]) {
      for (
        const [weightDecay, decoupled, maximize] of [[0, false, false], [0.01, true, false], [
          0.01,
          false,
          true,
        ]] as const
      ) {
        const init = [values(n, n + 1), values(n, n + 2), values(n, n + 3).map(Math.abs)];
        const grad = values(n, n + 4);
        const settings = {
          numel: n,
          lr: 1e-3,
          beta1: 0.9,
          beta2: 0.999,
          eps: 1e-8,
          weightDecay,
          decoupled,
          maximize,
          stepSize: 1e-3 / 0.1,
          correction2Sqrt: Math.sqrt(0.001),
          dtype: "float32",
        } as const;
        const [param, expAvg, expAvgSq] = init.map((a) => a.slice());
        adam({ ...settings, param, grad, expAvg, expAvgSq });
        const [rp, rm, rv] = init.map((a) => keep(resident(a)));
        adam({ ...settings, param: rp, grad: keep(resident(grad)), expAvg: rm, expAvgSq: rv });
        const what = `adam n=${n} decay=${weightDecay} decoupled=${decoupled}`;
        assertSameBits(rp, param, `${what} param`);
        assertSameBits(rm, expAvg, `${what} expAvg`);
        assertSameBits(rv, expAvgSq, `${what} expAvgSq`);
      }
    }
  });
  await t.step("sum over the middle axis: resident and host outputs", () => {
    for (const [outer, size, inner] of [[1, 64, 4608], [2, 5, 7], [3, 1, 4], [1, 64, 9]]) {
      const x = values(outer * size * inner, size + inner);
      const layout = { op: "sum", outer, size, inner, dtype: "float32" } as const;
      const want = new Float32Array(outer * inner);
      reduce({ ...layout, x, out: want });
      const rx = keep(resident(x));
      const host = new Float32Array(outer * inner);
      reduce({ ...layout, x: rx, out: host });
      assertSameBits(host, want, `sum ${[outer, size, inner]} into a host array`);
      const got = keep(kernelFloats(outer * inner)!);
      reduce({ ...layout, x: rx, out: got });
      assertSameBits(got, want, `sum ${[outer, size, inner]} into the kernel's memory`);
    }
  });
  for (const a of held) assert.ok(releaseKernelFloats(a));
});
