/**
 * Tests of the webgpu backend's kernels against plain TypeScript references.
 * Skipped when no WebGPU adapter exists.
 */

import assert from "node:assert/strict";
import type {
  BackendDevice,
  BinaryOp,
  DeviceBuffer,
  ReduceOp,
  UnaryOp,
} from "../src/backends/backend.ts";
import type { DType, TypedArray } from "../src/dtype.ts";
import { DeviceLostError } from "../src/errors.ts";
import { type MatmulTuning, webgpuBackend } from "../src/backends/webgpu/mod.ts";
import type { WebGPUDevice } from "../src/backends/webgpu/device.ts";
import type { WrappedDevice } from "../src/backends/backend.ts";
import { cpuBackend } from "../src/backends/cpu/mod.ts";
import {
  backendNames,
  registerBackend,
  requestDevices,
  tensor,
  unregisterBackend,
} from "../mod.ts";

const backend = await webgpuBackend().catch(() => null);
const ignore = backend === null;

type GpuDevice = WrappedDevice<WebGPUDevice>;

/** Starts webgpu device `index`, keeping the backend's own device reachable as `impl`. */
async function start(index: number): Promise<GpuDevice> {
  return (await backend!.createDevice(index)) as GpuDevice;
}

let shared: GpuDevice | null = null;
async function dev(): Promise<GpuDevice> {
  if (!shared) shared = await start(0);
  return shared;
}

function test(name: string, fn: () => Promise<void>): void {
  Deno.test({ name: `webgpu: ${name}`, ignore, fn });
}

// ---------------------------------------------------------------- helpers

/** A deterministic pseudo-random stream for test inputs. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function randArray(n: number, seed: number, lo = -1, hi = 1): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + (hi - lo) * r();
  return out;
}

function upload(d: BackendDevice, data: TypedArray): DeviceBuffer {
  const dtype: DType = data instanceof Int32Array ? "int32" : "float32";
  const b = d.allocate(data.length, dtype);
  d.write(b, 0, data);
  return b;
}

function assertClose(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  rtol = 1e-5,
  atol = 1e-6,
  what = "",
): void {
  assert.equal(actual.length, expected.length, `${what} length`);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i];
    const e = expected[i];
    if (Number.isNaN(e)) {
      assert.ok(Number.isNaN(a), `${what}[${i}]: expected NaN, got ${a}`);
      continue;
    }
    if (!Number.isFinite(e)) {
      assert.equal(a, e, `${what}[${i}]`);
      continue;
    }
    const tol = atol + rtol * Math.abs(e);
    assert.ok(
      Math.abs(a - e) <= tol,
      `${what}[${i}]: got ${a}, expected ${e} (tolerance ${tol})`,
    );
  }
}

function contiguousStrides(shape: readonly number[]): number[] {
  const s = new Array(shape.length).fill(1);
  for (let d = shape.length - 2; d >= 0; d--) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

/** erf in float64: Taylor series near 0, continued fraction for erfc. */
function erf(x: number): number {
  const z = Math.abs(x);
  let r: number;
  if (z < 3) {
    let term = z;
    let sum = z;
    for (let n = 1; n < 200; n++) {
      term *= -z * z / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    r = 2 / Math.sqrt(Math.PI) * sum;
  } else {
    // erfc(z) = exp(-z^2)/sqrt(pi) * 1/(z + 1/2/(z + 1/(z + 3/2/(z + ...))))
    let f = z;
    for (let n = 60; n >= 1; n--) f = z + (n / 2) / f;
    r = 1 - Math.exp(-z * z) / Math.sqrt(Math.PI) / f;
  }
  return x < 0 ? -r : r;
}

function normalCdf(x: number): number {
  if (x < -3) {
    // 1 - erf loses the tail; use the continued fraction directly.
    const z = -x / Math.SQRT2;
    let f = z;
    for (let n = 60; n >= 1; n--) f = z + (n / 2) / f;
    return 0.5 * Math.exp(-z * z) / Math.sqrt(Math.PI) / f;
  }
  return 0.5 * (1 + erf(x / Math.SQRT2));
}

function lowbias32(x: number): number {
  x >>>= 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

function contractU(j: number, key: number): number {
  return (lowbias32((j ^ key) >>> 0) >>> 8) * 2 ** -24;
}

// ---------------------------------------------------------------- basics

test("device info, dtypes and adapter dedupe", async () => {
  const d = await dev();
  assert.ok(d.info.length > 0);
  assert.deepEqual([...d.dtypes], ["float32", "int32"]);
});

test("write/read round trip, offsets and snapshot semantics", async () => {
  const d = await dev();
  const b = d.allocate(8, "float32");
  d.write(b, 0, new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]));
  d.write(b, 3, new Float32Array([10, 11]));
  const first = d.read(b, 0, 8, "float32");
  // A kernel recorded after the read must not change what it resolves with.
  d.kernels.fill({ out: b, numel: 8, value: -1, dtype: "float32" });
  assert.deepEqual([...await first], [1, 2, 3, 10, 11, 6, 7, 8]);
  assert.deepEqual([...await d.read(b, 0, 8, "float32")], new Array(8).fill(-1));
  d.free(b);
});

test("readInto: the values land in the given array (a piece of a larger one), float and int, as read's", async () => {
  const d = await dev();
  const f = upload(d, new Float32Array([1.5, -2, 3, 4, 5]));
  const out = new Float32Array(8).fill(9);
  const pending = d.readInto!(f, 1, 3, "float32", out.subarray(2, 5));
  // A kernel recorded after the read must not change what lands.
  d.kernels.fill({ out: f, numel: 5, value: -1, dtype: "float32" });
  await pending;
  assert.deepEqual([...out], [9, 9, -2, 3, 4, 9, 9, 9]);
  const i = upload(d, new Int32Array([7, -8, 2 ** 30]));
  const ints = new Int32Array(new SharedArrayBuffer(16));
  await d.readInto!(i, 0, 3, "int32", ints);
  assert.deepEqual([...ints], [7, -8, 2 ** 30, 0]);
  d.free(f);
  d.free(i);
});

test("write after queued kernels keeps call order", async () => {
  const d = await dev();
  const x = upload(d, new Float32Array([1, 2, 3, 4]));
  const y = d.allocate(4, "float32");
  d.kernels.unary({ op: "neg", x: x, out: y, numel: 4, dtype: "float32" }); // queued, not yet submitted
  d.write(x, 0, new Float32Array([5, 6, 7, 8])); // must land after the neg
  const layout = {
    shape: [4],
    aStrides: [1],
    bStrides: [1],
    dtype: "float32" as const,
  };
  const z = d.allocate(4, "float32");
  d.kernels.binary({ op: "add", a: x, b: y, out: z, ...layout });
  assert.deepEqual([...await d.read(z, 0, 4, "float32")], [4, 4, 4, 4]);
  for (const b of [x, y, z]) d.free(b);
});

test("fill and cast, float and int", async () => {
  const d = await dev();
  for (const n of [1, 7, 8, 1000]) {
    const f = d.allocate(n, "float32");
    d.kernels.fill({ out: f, numel: n, value: 2.5, dtype: "float32" });
    assert.deepEqual([...await d.read(f, 0, n, "float32")], new Array(n).fill(2.5));
    const i = d.allocate(n, "int32");
    d.kernels.fill({ out: i, numel: n, value: -7, dtype: "int32" });
    assert.deepEqual([...await d.read(i, 0, n, "int32")], new Array(n).fill(-7));
    d.free(f);
    d.free(i);
  }
  const src = new Float32Array([-2.7, -0.5, 0, 0.5, 2.7, 1e6, -3.999]);
  const x = upload(d, src);
  const xi = d.allocate(src.length, "int32");
  d.kernels.cast({ x: x, out: xi, numel: src.length, dtype: "float32", to: "int32" });
  assert.deepEqual([...await d.read(xi, 0, src.length, "int32")], [
    -2,
    0,
    0,
    0,
    2,
    1000000,
    -3,
  ]);
  const back = d.allocate(src.length, "float32");
  d.kernels.cast({ x: xi, out: back, numel: src.length, dtype: "int32", to: "float32" });
  assert.deepEqual([...await d.read(back, 0, src.length, "float32")], [
    -2,
    0,
    0,
    0,
    2,
    1000000,
    -3,
  ]);
});

// ---------------------------------------------------------------- unary

const UNARY_REF: Record<UnaryOp, (x: number) => number> = {
  neg: (x) => -x,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  abs: Math.abs,
  relu: (x) => (x < 0 ? 0 : x),
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  tanh: Math.tanh,
  erf,
  sign: Math.sign,
  sin: Math.sin,
  cos: Math.cos,
  floor: Math.floor,
  ceil: Math.ceil,
  // Half to even (the inputs hold -0.5 and -9.5).
  round: (x) => {
    const r = Math.round(x);
    return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
  },
  log1p: Math.log1p,
  expm1: Math.expm1,
  rsqrt: (x) => 1 / Math.sqrt(x),
  reciprocal: (x) => 1 / x,
  square: (x) => x * x,
};

/** The fused one-operand kernels with their references. */
const FUSED_REF: Record<"gelu" | "geluDerivative", (x: number) => number> = {
  gelu: (x) => x * normalCdf(x),
  geluDerivative: (x) => normalCdf(x) + x * Math.exp(-0.5 * x * x) / Math.sqrt(2 * Math.PI),
};

test("unary float ops match references", async () => {
  const d = await dev();
  const base = [
    ...randArray(97, 1, -6, 6),
    0,
    -0.5,
    1e-8,
    -1e-8,
    20,
    -20,
    100,
    -100,
    -9.5,
  ];
  for (const n of [base.length, 104]) { // odd length and a vec4 multiple
    const data = new Float32Array(n);
    data.set(base.slice(0, n));
    const x = upload(d, data);
    const out = d.allocate(n, "float32");
    for (const op of Object.keys(UNARY_REF) as UnaryOp[]) {
      const positive = op === "log" || op === "sqrt" || op === "rsqrt" || op === "log1p";
      const input = positive ? data.map((v) => Math.abs(v) + 1e-3) : data;
      const xin = positive ? upload(d, input) : x;
      d.kernels.unary({ op: op, x: xin, out: out, numel: n, dtype: "float32" });
      const got = await d.read(out, 0, n, "float32");
      const want = [...input].map((v) => Math.fround(UNARY_REF[op](v)));
      const exp = op === "exp" || op === "sigmoid" || op === "expm1";
      assertClose(got, want, exp ? 1e-5 : 3e-6, 1e-6, op);
    }
    for (const [name, ref] of Object.entries(FUSED_REF) as [keyof typeof FUSED_REF, typeof erf][]) {
      d.kernels[name]!({ x, out, numel: n, dtype: "float32" });
      const got = await d.read(out, 0, n, "float32");
      assertClose(got, [...data].map((v) => Math.fround(ref(v))), 3e-6, 1e-6, name);
    }
  }
});

test("unary int32 ops", async () => {
  const d = await dev();
  const data = new Int32Array([-5, -1, 0, 1, 7, -2147483647, 123456]);
  const x = upload(d, data);
  const out = d.allocate(data.length, "int32");
  const refs: [UnaryOp, (v: number) => number][] = [
    ["neg", (v) => -v],
    ["abs", Math.abs],
    ["relu", (v) => Math.max(v, 0)],
    ["sign", Math.sign],
  ];
  for (const [op, f] of refs) {
    d.kernels.unary({ op: op, x: x, out: out, numel: data.length, dtype: "int32" });
    const got = await d.read(out, 0, data.length, "int32");
    assert.deepEqual([...got], [...data].map((v) => f(v) | 0), op);
  }
  assert.throws(() =>
    d.kernels.unary({ op: "exp", x: x, out: out, numel: data.length, dtype: "int32" })
  );
});

// ---------------------------------------------------------------- binary

function binaryRef(op: BinaryOp, int: boolean): (a: number, b: number) => number {
  const b2 = (c: boolean) => (c ? 1 : 0);
  switch (op) {
    case "add":
      return (a, b) => a + b;
    case "sub":
      return (a, b) => a - b;
    case "mul":
      return int ? (a, b) => Math.imul(a, b) : (a, b) => a * b;
    case "div":
      return int ? (a, b) => Math.trunc(a / b) : (a, b) => a / b;
    case "pow":
      return Math.pow;
    case "fmod":
      return (a, b) => a % b;
    case "maximum":
      return Math.max;
    case "minimum":
      return Math.min;
    case "eq":
      return (a, b) => b2(a === b);
    case "ne":
      return (a, b) => b2(a !== b);
    case "lt":
      return (a, b) => b2(a < b);
    case "le":
      return (a, b) => b2(a <= b);
    case "gt":
      return (a, b) => b2(a > b);
    case "ge":
      return (a, b) => b2(a >= b);
    case "bitwiseAnd":
      return (a, b) => a & b;
    case "bitwiseOr":
      return (a, b) => a | b;
    case "bitwiseXor":
      return (a, b) => a ^ b;
    case "leftShift":
      return (a, b) => a << b;
    case "rightShift":
      return (a, b) => a >> b;
  }
}

/** Reference broadcasting binary op over strided inputs. */
function broadcastRef(
  f: (a: number, b: number) => number,
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  shape: number[],
  as: number[],
  bs: number[],
): number[] {
  const n = shape.reduce((p, s) => p * s, 1);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    let rem = i;
    let ia = 0;
    let ib = 0;
    for (let d = shape.length - 1; d >= 0; d--) {
      const c = rem % shape[d];
      rem = Math.floor(rem / shape[d]);
      ia += c * as[d];
      ib += c * bs[d];
    }
    out.push(f(a[ia], b[ib]));
  }
  return out;
}

const BINARY_OPS: BinaryOp[] = [
  "add",
  "sub",
  "mul",
  "div",
  "pow",
  "maximum",
  "minimum",
  "eq",
  "ne",
  "lt",
  "le",
  "gt",
  "ge",
];

test("binary ops with broadcasting (fast and strided paths)", async () => {
  const d = await dev();
  // [shape, a shape-strides, b strides, a numel, b numel]
  const cases: [number[], number[], number[], number, number][] = [
    [[37], [1], [1], 37, 37], // contiguous, odd
    [[64], [1], [1], 64, 64], // contiguous, vec4
    [[3, 4], [4, 1], [0, 0], 12, 1], // scalar b
    [[2, 8], [0, 0], [8, 1], 1, 16], // scalar a, vec4
    [[3, 1, 5].map((s) => s), [5, 5, 1], [0, 0, 1], 15, 5].map((v) => v) as [
      number[],
      number[],
      number[],
      number,
      number,
    ],
    [[3, 4, 5], [5, 0, 1], [0, 5, 1], 15, 20], // [3,1,5] op [1,4,5]
    [[4, 3], [1, 4], [3, 1], 12, 12], // transposed a
    [[2, 3, 2, 2], [1, 2, 6, 0], [0, 1, 3, 6], 12, 12],
  ];
  for (const [shape, as, bs, na, nb] of cases) {
    const fa = randArray(na, na * 7 + 1, -3, 3);
    const fb = randArray(nb, nb * 13 + 2, -3, 3);
    // Some exact ties so the comparisons see equality.
    fb[0] = fa[0];
    const a = upload(d, fa);
    const b = upload(d, fb);
    const n = shape.reduce((p, s) => p * s, 1);
    const out = d.allocate(n, "float32");
    for (const op of BINARY_OPS) {
      const layout = { shape, aStrides: as, bStrides: bs, dtype: "float32" as const };
      let ain = fa;
      let abuf = a;
      if (op === "pow") {
        ain = fa.map((v) => Math.abs(v) + 0.1);
        abuf = upload(d, ain);
      }
      d.kernels.binary({ op: op, a: abuf, b: b, out: out, ...layout });
      const got = await d.read(out, 0, n, "float32");
      const want = broadcastRef(binaryRef(op, false), ain, fb, shape, as, bs);
      assertClose(got, Float32Array.from(want), 2e-6, 1e-6, `${op} ${shape}`);
    }
  }
});

test("binary int32 ops, div truncates toward zero", async () => {
  const d = await dev();
  const fa = new Int32Array([7, -7, 7, -7, 100, 0, 2147483647, -5, 9]);
  const fb = new Int32Array([2, 2, -2, -2, 7, 3, 1, -5, 9]);
  const a = upload(d, fa);
  const b = upload(d, fb);
  const out = d.allocate(fa.length, "int32");
  const layout = {
    shape: [fa.length],
    aStrides: [1],
    bStrides: [1],
    dtype: "int32" as const,
  };
  // The bitwise ops are int32 only (shift counts modulo 32, as the contract says).
  const bitwise: BinaryOp[] = ["bitwiseAnd", "bitwiseOr", "bitwiseXor", "leftShift", "rightShift"];
  for (const op of [...BINARY_OPS.filter((o) => o !== "pow"), ...bitwise]) {
    d.kernels.binary({ op: op, a: a, b: b, out: out, ...layout });
    const got = await d.read(out, 0, fa.length, "int32");
    const f = binaryRef(op, true);
    assert.deepEqual([...got], [...fa].map((v, i) => f(v, fb[i]) | 0), op);
  }
  // Broadcast int path.
  const out2 = d.allocate(9, "int32");
  d.kernels.binary({
    op: "mul",
    a: a,
    b: b,
    out: out2,
    shape: [3, 3],
    aStrides: [3, 1],
    bStrides: [0, 1],
    dtype: "int32",
  });
  const got = await d.read(out2, 0, 9, "int32");
  assert.deepEqual(
    [...got],
    broadcastRef(binaryRef("mul", true), fa, fb, [3, 3], [3, 1], [0, 1]).map(
      (v) => v | 0,
    ),
  );
});

test("pow with negative bases, zero and special exponents", async () => {
  const d = await dev();
  const fa = new Float32Array([-2, -2, -2, -8, 0, 0, 3, 1, -3, 2.5]);
  const fb = new Float32Array([2, 3, 0.5, -1, 0, 2, 0.5, NaN, 4, 1.5]);
  const a = upload(d, fa);
  const b = upload(d, fb);
  const out = d.allocate(fa.length, "float32");
  d.kernels.binary({
    op: "pow",
    a: a,
    b: b,
    out: out,
    shape: [fa.length],
    aStrides: [1],
    bStrides: [1],
    dtype: "float32",
  });
  const got = await d.read(out, 0, fa.length, "float32");
  // PyTorch (and C) give pow(1, NaN) = 1 where JavaScript gives NaN.
  const want = [...fa].map((v, i) => v === 1 ? 1 : Math.pow(v, fb[i]));
  assertClose(got, want, 3e-6, 0, "pow");
});

test("NaN propagates through maximum, minimum and comparisons", async () => {
  const d = await dev();
  const fa = new Float32Array([NaN, 1, -2, 3, NaN, 0, 5, NaN]);
  const fb = new Float32Array([0, NaN, 0, 0, NaN, 1, 1, 2]);
  const a = upload(d, fa);
  const b = upload(d, fb);
  const out = d.allocate(8, "float32");
  for (const n of [7, 8]) { // scalar and vec4 paths
    const layout = { shape: [n], aStrides: [1], bStrides: [1], dtype: "float32" as const };
    const cases: [BinaryOp, (x: number, y: number) => number][] = [
      ["maximum", Math.max],
      ["minimum", Math.min],
      ["eq", (x, y) => x === y ? 1 : 0],
      ["ne", (x, y) => x !== y ? 1 : 0],
      ["lt", (x, y) => x < y ? 1 : 0],
      ["ge", (x, y) => x >= y ? 1 : 0],
    ];
    for (const [op, f] of cases) {
      d.kernels.binary({ op: op, a: a, b: b, out: out, ...layout });
      const got = await d.read(out, 0, n, "float32");
      assertClose(got, [...fa.slice(0, n)].map((x, i) => f(x, fb[i])), 0, 0, `${op} ${n}`);
    }
  }
});

test("NaN wins max/min/argmax/argmin reductions (short and long axes)", async () => {
  const d = await dev();
  for (const size of [3, 300, 5000]) {
    const data = randArray(size, size);
    data[size - 1] = NaN;
    data[size >> 1] = NaN;
    const x = upload(d, data);
    const out = d.allocate(1, "float32");
    const outI = d.allocate(1, "int32");
    for (const op of ["max", "min"] as ReduceOp[]) {
      d.kernels.reduce({ op: op, x: x, out: out, outer: 1, size, inner: 1, dtype: "float32" });
      assert.ok(Number.isNaN((await d.read(out, 0, 1, "float32"))[0]), `${op} ${size}`);
    }
    for (const op of ["argmax", "argmin"] as ReduceOp[]) {
      d.kernels.reduce({ op: op, x: x, out: outI, outer: 1, size, inner: 1, dtype: "float32" });
      assert.equal((await d.read(outI, 0, 1, "int32"))[0], size >> 1, `${op} ${size}`);
    }
  }
});

// ---------------------------------------------------------------- reduce

function reduceRef(
  op: ReduceOp,
  x: ArrayLike<number>,
  outer: number,
  size: number,
  inner: number,
): number[] {
  const out: number[] = [];
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      let best = x[o * size * inner + i];
      let bi = 0;
      let sum = 0;
      for (let r = 0; r < size; r++) {
        const v = x[(o * size + r) * inner + i];
        sum += v;
        if ((op === "max" || op === "argmax") ? v > best : v < best) {
          best = v;
          bi = r;
        }
      }
      out.push(
        op === "sum" ? sum : op === "argmax" || op === "argmin" ? bi : best,
      );
    }
  }
  return out;
}

test("reductions over [outer, size, inner], short and long axes", async () => {
  const d = await dev();
  const shapes: [number, number, number][] = [
    [1, 1, 1],
    [3, 5, 1],
    [2, 7, 3],
    [1, 300, 1],
    [4, 1000, 1],
    [2, 5000, 1],
    [1, 3000, 5],
    [3, 2000, 2],
    [5, 257, 1],
    [1, 70000, 1],
  ];
  for (const [outer, size, inner] of shapes) {
    const n = outer * size * inner;
    // Values on a coarse grid so ties happen and argmax must pick the first.
    const data = randArray(n, n + size).map((v) => Math.round(v * 20) / 4);
    const x = upload(d, data);
    const outF = d.allocate(outer * inner, "float32");
    const outI = d.allocate(outer * inner, "int32");
    for (const op of ["sum", "max", "min", "argmax", "argmin"] as ReduceOp[]) {
      const arg = op === "argmax" || op === "argmin";
      const o = arg ? outI : outF;
      d.kernels.reduce({ op: op, x: x, out: o, outer, size, inner, dtype: "float32" });
      const got = await d.read(o, 0, outer * inner, arg ? "int32" : "float32");
      const want = reduceRef(op, data, outer, size, inner);
      if (arg) assert.deepEqual([...got], want, `${op} ${outer},${size},${inner}`);
      else assertClose(got, want, 1e-6, 1e-4, `${op} ${outer},${size},${inner}`);
    }
    d.free(x);
    d.free(outF);
    d.free(outI);
  }
});

test("argmax/argmin ties give the first index", async () => {
  const d = await dev();
  for (const size of [6, 5000]) {
    const data = new Float32Array(size * 2).fill(1);
    // Row 0: extremes at 2 and at the end; row 1: all equal.
    data[2] = 9;
    data[size - 1] = 9;
    data[3] = -9;
    data[size - 2] = -9;
    const x = upload(d, data);
    const out = d.allocate(2, "int32");
    d.kernels.reduce({ op: "argmax", x: x, out: out, outer: 2, size, inner: 1, dtype: "float32" });
    assert.deepEqual([...await d.read(out, 0, 2, "int32")], [2, 0]);
    d.kernels.reduce({ op: "argmin", x: x, out: out, outer: 2, size, inner: 1, dtype: "float32" });
    assert.deepEqual([...await d.read(out, 0, 2, "int32")], [3, 0]);
    // The same along a strided axis: [1, size, 2] with both columns equal.
    d.kernels.reduce({ op: "argmax", x: x, out: out, outer: 1, size, inner: 2, dtype: "float32" });
    const got = await d.read(out, 0, 2, "int32");
    assert.equal(got[0], 1); // element 2 = row 1, col 0
  }
});

test("sum over 4M elements is accurate to float32 rounding", async () => {
  const d = await dev();
  const n = 4 * 1024 * 1024;
  const data = randArray(n, 42, 0, 1);
  let exact = 0;
  for (let i = 0; i < n; i++) exact += data[i];
  const x = upload(d, data);
  const out = d.allocate(1, "float32");
  d.kernels.reduce({ op: "sum", x: x, out: out, outer: 1, size: n, inner: 1, dtype: "float32" });
  const [got] = await d.read(out, 0, 1, "float32");
  assert.ok(
    Math.abs(got - exact) / exact < 1e-6,
    `sum ${got} vs ${exact}: relative error ${Math.abs(got - exact) / exact}`,
  );
  // The same along a strided axis.
  d.kernels.reduce({
    op: "sum",
    x: x,
    out: out,
    outer: 1,
    size: n / 4,
    inner: 4,
    dtype: "float32",
  });
  const cols = await d.read(out, 0, 4, "float32");
  const want = [0, 0, 0, 0];
  for (let i = 0; i < n; i++) want[i % 4] += data[i];
  assertClose(cols, want, 1e-6, 0, "column sums");
  d.free(x);
  d.free(out);
});

test("int32 reductions", async () => {
  const d = await dev();
  const data = new Int32Array(3000);
  for (let i = 0; i < data.length; i++) data[i] = ((i * 7919) % 1001) - 500;
  const x = upload(d, data);
  const out = d.allocate(3, "int32");
  for (const op of ["sum", "max", "min", "argmax", "argmin"] as ReduceOp[]) {
    d.kernels.reduce({ op: op, x: x, out: out, outer: 3, size: 1000, inner: 1, dtype: "int32" });
    assert.deepEqual(
      [...await d.read(out, 0, 3, "int32")],
      reduceRef(op, data, 3, 1000, 1),
      op,
    );
  }
});

// ---------------------------------------------------------------- matmul

function matmulRef(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  l: {
    batch: number;
    m: number;
    n: number;
    k: number;
    aBatchStride: number;
    bBatchStride: number;
    transA: boolean;
    transB: boolean;
  },
): Float64Array {
  const { batch, m, n, k } = l;
  const out = new Float64Array(batch * m * n);
  for (let t = 0; t < batch; t++) {
    const ao = t * l.aBatchStride;
    const bo = t * l.bBatchStride;
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let p = 0; p < k; p++) {
          const av = l.transA ? a[ao + p * m + i] : a[ao + i * k + p];
          const bv = l.transB ? b[bo + j * k + p] : b[bo + p * n + j];
          s += av * bv;
        }
        out[(t * m + i) * n + j] = s;
      }
    }
  }
  return out;
}

async function checkMatmul(
  d: BackendDevice,
  batch: number,
  m: number,
  n: number,
  k: number,
  transA: boolean,
  transB: boolean,
  aBroadcast = false,
  bBroadcast = false,
): Promise<void> {
  const l = {
    batch,
    m,
    n,
    k,
    aBatchStride: aBroadcast ? 0 : m * k,
    bBatchStride: bBroadcast ? 0 : k * n,
    transA,
    transB,
    dtype: "float32" as const,
  };
  const fa = randArray((aBroadcast ? 1 : batch) * m * k, m * 31 + k);
  const fb = randArray((bBroadcast ? 1 : batch) * k * n, n * 17 + k);
  const a = upload(d, fa);
  const b = upload(d, fb);
  const out = d.allocate(batch * m * n, "float32");
  d.kernels.matmul({ a: a, b: b, out: out, ...l });
  const got = await d.read(out, 0, batch * m * n, "float32");
  assertClose(
    got,
    matmulRef(fa, fb, l),
    1e-5,
    1e-5 * Math.sqrt(k),
    `matmul ${JSON.stringify(l)}`,
  );
  d.free(a);
  d.free(b);
  d.free(out);
}

/** A device of its own with the given matmul tuning (destroy it after). */
async function tuned(matmul: Partial<MatmulTuning>): Promise<GpuDevice> {
  return (await (await webgpuBackend({ matmul })).createDevice(0)) as GpuDevice;
}

for (const variant of ["register", "tiled"] as const) {
  test(`matmul (${variant}) odd sizes, transposes, batches, broadcast`, async () => {
    const d = await tuned({ variant });
    try {
      await checkMatmul(d, 1, 37, 29, 61, false, false);
      await checkMatmul(d, 1, 1, 1, 1, false, false);
      await checkMatmul(d, 1, 5, 3, 2, false, false);
      for (const ta of [false, true]) {
        for (const tb of [false, true]) {
          await checkMatmul(d, 1, 37, 29, 61, ta, tb);
          await checkMatmul(d, 3, 64, 32, 16, ta, tb); // vec4-aligned paths
          await checkMatmul(d, 2, 20, 12, 8, ta, tb); // m % 8 == 4
          await checkMatmul(d, 4, 13, 8, 12, ta, tb, true, false);
          await checkMatmul(d, 4, 16, 9, 7, ta, tb, false, true);
        }
      }
      await checkMatmul(d, 2, 130, 70, 200, false, false);
    } finally {
      d.destroy();
    }
  });
}

test("matmul register variant with other block shapes", async () => {
  for (const [rows, cols] of [[4, 4], [8, 4], [8, 16], [4, 12], [16, 16]]) {
    const d = await tuned({ variant: "register", rows, cols });
    try {
      for (const ta of [false, true]) {
        for (const tb of [false, true]) {
          await checkMatmul(d, 2, 37, 29, 61, ta, tb);
          await checkMatmul(d, 2, 36, 32, 16, ta, tb);
          await checkMatmul(d, 1, 20, 36, 8, ta, tb);
        }
      }
    } finally {
      d.destroy();
    }
  }
});

test("matmul with k = 0 gives zeros", async () => {
  const d = await dev();
  const a = d.allocate(0, "float32");
  const out = d.allocate(6, "float32");
  d.kernels.fill({ out: out, numel: 6, value: 5, dtype: "float32" });
  d.kernels.matmul({
    a: a,
    b: a,
    out: out,
    batch: 1,
    m: 2,
    n: 3,
    k: 0,
    aBatchStride: 0,
    bBatchStride: 0,
    transA: false,
    transB: false,
    dtype: "float32",
  });
  assert.deepEqual([...await d.read(out, 0, 6, "float32")], [0, 0, 0, 0, 0, 0]);
});

// ---------------------------------------------------------------- softmax

function softmaxRef(
  x: ArrayLike<number>,
  outer: number,
  size: number,
  inner: number,
  log: boolean,
): Float64Array {
  const out = new Float64Array(outer * size * inner);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const at = (r: number) => (o * size + r) * inner + i;
      let m = -Infinity;
      for (let r = 0; r < size; r++) m = Math.max(m, x[at(r)]);
      let s = 0;
      for (let r = 0; r < size; r++) s += Math.exp(x[at(r)] - m);
      for (let r = 0; r < size; r++) {
        out[at(r)] = log ? x[at(r)] - m - Math.log(s) : Math.exp(x[at(r)] - m) / s;
      }
    }
  }
  return out;
}

test("softmax and logSoftmax, stable with large values", async () => {
  const d = await dev();
  const shapes: [number, number, number][] = [
    [4, 10, 1],
    [3, 7, 4],
    [2, 1000, 1],
    [1, 5, 1],
    [3, 300, 2],
  ];
  for (const [outer, size, inner] of shapes) {
    const n = outer * size * inner;
    const data = randArray(n, n, -5, 5);
    data[0] = 1000;
    data[n - 1] = 1001;
    data[1] = -1000;
    const x = upload(d, data);
    const out = d.allocate(n, "float32");
    for (const log of [false, true]) {
      d.kernels.softmax!({ x: x, out: out, outer, size, inner, log, dtype: "float32" });
      const got = await d.read(out, 0, n, "float32");
      for (const v of got) assert.ok(Number.isFinite(v));
      assertClose(
        got,
        softmaxRef(data, outer, size, inner, log),
        1e-5,
        1e-6,
        `softmax ${outer},${size},${inner},${log}`,
      );
    }
  }
});

// ---------------------------------------------------------------- copy

function copyRef(
  src: ArrayLike<number>,
  dst: number[],
  shape: number[],
  ss: number[],
  so: number,
  ds: number[],
  dso: number,
): number[] {
  const n = shape.reduce((p, s) => p * s, 1);
  for (let i = 0; i < n; i++) {
    let rem = i;
    let is = so;
    let id = dso;
    for (let d = shape.length - 1; d >= 0; d--) {
      const c = rem % shape[d];
      rem = Math.floor(rem / shape[d]);
      is += c * ss[d];
      id += c * ds[d];
    }
    dst[id] = src[is];
  }
  return dst;
}

test("copy: permute, expand, narrow, concat, contiguous", async () => {
  const d = await dev();
  const src = randArray(60, 3);
  const s = upload(d, src);
  const cases: [number[], number[], number, number[], number, number][] = [
    // shape, xStrides, xOffset, outStrides, outOffset, dst numel
    [[3, 4, 5], [1, 3, 12], 0, contiguousStrides([3, 4, 5]), 0, 60], // permute
    [[4, 3, 5], [0, 5, 1], 0, contiguousStrides([4, 3, 5]), 0, 60], // expand
    [[2, 3], [10, 1], 7, contiguousStrides([2, 3]), 0, 6], // narrow
    [[3, 5], [5, 1], 0, [10, 1], 5, 30], // second half of a concat
    [[37], [1], 3, [1], 2, 40], // contiguous, unaligned (buffer copy)
    [[2, 2, 3, 5], [30, 15, 1, 3], 0, contiguousStrides([2, 2, 3, 5]), 0, 60],
  ];
  for (const [shape, ss, so, ds, dso, dn] of cases) {
    const dst = d.allocate(dn, "float32");
    d.kernels.fill({ out: dst, numel: dn, value: -1, dtype: "float32" });
    d.kernels.copy({
      x: s,
      out: dst,
      shape,
      xStrides: ss,
      xOffset: so,
      outStrides: ds,
      outOffset: dso,
      dtype: "float32",
    });
    const got = await d.read(dst, 0, dn, "float32");
    const want = copyRef(src, new Array(dn).fill(-1), shape, ss, so, ds, dso);
    assert.deepEqual([...got], want.map((v) => Math.fround(v)), `copy ${shape}`);
    d.free(dst);
  }
  // int32 uses the same word copy.
  const si = upload(d, new Int32Array([1, 2, 3, 4, 5, 6]));
  const di = d.allocate(6, "int32");
  d.kernels.copy({
    x: si,
    out: di,
    shape: [2, 3],
    xStrides: [1, 2],
    xOffset: 0,
    outStrides: [3, 1],
    outOffset: 0,
    dtype: "int32",
  });
  assert.deepEqual([...await d.read(di, 0, 6, "int32")], [1, 3, 5, 2, 4, 6]);
});

test("indexSelect, including out-of-range indices", async () => {
  const d = await dev();
  const outer = 2;
  const size = 5;
  const inner = 3;
  const src = randArray(outer * size * inner, 9);
  const x = upload(d, src);
  const idx = [4, 0, 0, 2];
  const ind = upload(d, new Int32Array(idx));
  const count = idx.length;
  const out = d.allocate(outer * count * inner, "float32");
  d.kernels.indexSelect({
    x: x,
    indices: ind,
    out: out,
    outer,
    size,
    inner,
    count,
    dtype: "float32",
  });
  const want: number[] = [];
  for (let o = 0; o < outer; o++) {
    for (const j of idx) {
      for (let i = 0; i < inner; i++) want.push(src[(o * size + j) * inner + i]);
    }
  }
  assert.deepEqual([...await d.read(out, 0, want.length, "float32")], want);
  const bad = upload(d, new Int32Array([-1, 99]));
  d.kernels.indexSelect({
    x: x,
    indices: bad,
    out: out,
    outer,
    size,
    inner,
    count: 2,
    dtype: "float32",
  });
  const got = await d.read(out, 0, outer * 2 * inner, "float32");
  assert.deepEqual([...got], new Array(outer * 2 * inner).fill(0));
});

// ---------------------------------------------------------------- random

test("random uniform is bit-identical to the contract formula", async () => {
  const d = await dev();
  const n = 10007;
  const out = d.allocate(n, "float32");
  for (
    const [seed, low, high] of [[0, 0, 1], [12345, -0.3, 0.7], [
      7,
      -1 / Math.sqrt(3),
      1 / Math.sqrt(3),
    ], [0xffffffff, 2, 5.5]]
  ) {
    d.kernels.random({
      out: out,
      numel: n,
      kind: "uniform",
      seed,
      a: low,
      b: high,
      dtype: "float32",
    });
    const got = await d.read(out, 0, n, "float32");
    const key = lowbias32(seed);
    let mismatches = 0;
    for (let i = 0; i < n; i++) {
      const want = Math.fround(low + (high - low) * contractU(i, key));
      if (got[i] !== want) mismatches++;
    }
    assert.equal(mismatches, 0, `seed ${seed} [${low}, ${high})`);
  }
});

test("random normal follows the contract's Box-Muller", async () => {
  const d = await dev();
  const n = 20000;
  const out = d.allocate(n, "float32");
  d.kernels.random({ out: out, numel: n, kind: "normal", seed: 99, a: 1, b: 2, dtype: "float32" });
  const got = await d.read(out, 0, n, "float32");
  const key = lowbias32(99);
  const want = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const u1 = contractU(2 * i, key);
    const u2 = contractU(2 * i + 1, key);
    want[i] = 1 + 2 * Math.sqrt(-2 * Math.log(1 - u1)) * Math.cos(2 * Math.PI * u2);
  }
  assertClose(got, want, 1e-5, 1e-5, "normal");
});

test("agrees with the cpu backend", async () => {
  const g = await dev();
  const c = await (await cpuBackend()).createDevice(0);
  const n = 4099;
  const run = async (
    d: BackendDevice,
    f: (x: DeviceBuffer, out: DeviceBuffer) => void,
  ): Promise<TypedArray> => {
    const x = d.allocate(n, "float32");
    d.kernels.random({ out: x, numel: n, kind: "normal", seed: 5, a: 0, b: 3, dtype: "float32" });
    const out = d.allocate(n, "float32");
    f(x, out);
    return await d.read(out, 0, n, "float32");
  };
  const both = async (
    what: string,
    f: (d: BackendDevice, x: DeviceBuffer, out: DeviceBuffer) => void,
    rtol: number,
  ) => {
    const want = await run(c, (x, o) => f(c, x, o));
    const got = await run(g, (x, o) => f(g, x, o));
    if (rtol === 0) assert.deepEqual(got, want, what);
    else assertClose(got, want, rtol, 1e-6, what);
  };
  await both(
    "uniform",
    (d, _x, o) =>
      d.kernels.random({
        out: o,
        numel: n,
        kind: "uniform",
        seed: 77,
        a: -0.1,
        b: 0.25,
        dtype: "float32",
      }),
    0,
  );
  await both(
    "normal",
    (d, x, o) =>
      d.kernels.copy({
        x: x,
        out: o,
        shape: [n],
        xStrides: [1],
        xOffset: 0,
        outStrides: [1],
        outOffset: 0,
        dtype: "float32",
      }),
    1e-5,
  );
  for (const name of ["gelu", "geluDerivative"] as const) {
    await both(
      name,
      (d, x, o) => d.kernels[name]!({ x, out: o, numel: n, dtype: "float32" }),
      1e-5,
    );
  }
  for (const op of ["sigmoid", "tanh", "exp"] as UnaryOp[]) {
    await both(
      op,
      (d, x, o) => d.kernels.unary({ op: op, x: x, out: o, numel: n, dtype: "float32" }),
      1e-5,
    );
  }
  await both(
    "softmax",
    (d, x, o) =>
      d.kernels.softmax!({
        x: x,
        out: o,
        outer: 1,
        size: n,
        inner: 1,
        log: true,
        dtype: "float32",
      }),
    1e-5,
  );
  c.destroy();
});

// ---------------------------------------------------------------- runtime

test("zero-size buffers and kernels", async () => {
  const d = await dev();
  const z = d.allocate(0, "float32");
  const zi = d.allocate(0, "int32");
  d.write(z, 0, new Float32Array(0));
  d.kernels.fill({ out: z, numel: 0, value: 1, dtype: "float32" });
  d.kernels.unary({ op: "exp", x: z, out: z, numel: 0, dtype: "float32" });
  d.kernels.cast({ x: z, out: zi, numel: 0, dtype: "float32", to: "int32" });
  d.kernels.binary({
    op: "add",
    a: z,
    b: z,
    out: z,
    shape: [0, 3],
    aStrides: [3, 1],
    bStrides: [3, 1],
    dtype: "float32",
  });
  d.kernels.reduce({ op: "sum", x: z, out: z, outer: 0, size: 3, inner: 1, dtype: "float32" });
  d.kernels.softmax!({ x: z, out: z, outer: 0, size: 3, inner: 1, log: false, dtype: "float32" });
  d.kernels.copy({
    x: z,
    out: z,
    shape: [0],
    xStrides: [1],
    xOffset: 0,
    outStrides: [1],
    outOffset: 0,
    dtype: "float32",
  });
  d.kernels.random({ out: z, numel: 0, kind: "normal", seed: 1, a: 0, b: 1, dtype: "float32" });
  d.kernels.matmul({
    a: z,
    b: z,
    out: z,
    batch: 0,
    m: 2,
    n: 2,
    k: 2,
    aBatchStride: 4,
    bBatchStride: 4,
    transA: false,
    transB: false,
    dtype: "float32",
  });
  assert.equal((await d.read(z, 0, 0, "float32")).length, 0);
  assert.ok((await d.read(zi, 0, 0, "int32")) instanceof Int32Array);
  d.free(z);
  d.free(zi);
});

test("read after many queued kernels", async () => {
  const d = await dev();
  const n = 1000;
  let x = upload(d, new Float32Array(n).fill(0));
  const one = upload(d, new Float32Array([1]));
  const layout = { shape: [n], aStrides: [1], bStrides: [0], dtype: "float32" as const };
  for (let i = 0; i < 1500; i++) {
    const y = d.allocate(n, "float32");
    d.kernels.binary({ op: "add", a: x, b: one, out: y, ...layout });
    d.free(x);
    x = y;
  }
  const got = await d.read(x, 0, n, "float32");
  assert.deepEqual([...got], new Array(n).fill(1500));
});

test("memory() is flat after repeated allocate/free", async () => {
  const d = await dev();
  const before = d.memory();
  const sizes = [1, 100, 1000, 12345, 1 << 16];
  for (let i = 0; i < 3; i++) {
    const bufs = sizes.map((s) => d.allocate(s, "float32"));
    for (const b of bufs) d.kernels.fill({ out: b, numel: 1, value: i, dtype: "float32" });
    assert.ok(d.memory().bytesInUse >= before.bytesInUse + 4 * 12345);
    for (const b of bufs) d.free(b);
  }
  const keep = d.allocate(1, "float32");
  await d.read(keep, 0, 1, "float32");
  // One more round so the pool holds a buffer of every class again.
  for (const b of sizes.map((s) => d.allocate(s, "float32"))) d.free(b);
  const mid = d.memory();
  for (let i = 0; i < 20; i++) {
    const bufs = sizes.map((s) => d.allocate(s, "float32"));
    for (const b of bufs) d.free(b);
  }
  const after = d.memory();
  assert.equal(after.bytesInUse, mid.bytesInUse);
  assert.equal(after.bytesReserved, mid.bytesReserved);
});

test("a failing kernel rejects the next read, naming it", async () => {
  const d = await dev();
  const x = upload(d, new Float32Array([1, 2, 3, 4]));
  d.impl.runtime.dispatch({
    name: "brokenKernel",
    key: "broken",
    wgsl: () => "this is not wgsl",
    signature: "w",
    buffers: [d.impl.runtime.storage.acquire(16)],
    params: [],
    groups: [1, 1, 1],
  });
  await assert.rejects(d.read(x, 0, 4, "float32"), /brokenKernel/);
  // The error is reported once; the device keeps working.
  assert.deepEqual([...await d.read(x, 0, 4, "float32")], [1, 2, 3, 4]);
});

test("device-call errors (bad write) reach the next read; huge allocations throw", async () => {
  const d = await dev();
  const x = upload(d, new Float32Array([1, 2, 3, 4]));
  let threw = false;
  try {
    d.write(x, 0, new Float32Array(1000)); // far past the end of the buffer
  } catch {
    threw = true; // reported at once is fine too
  }
  if (!threw) await assert.rejects(d.read(x, 0, 4, "float32"), /write/);
  assert.deepEqual([...await d.read(x, 0, 4, "float32")], [1, 2, 3, 4]);
  assert.throws(() => d.allocate(2 ** 40, "float32"), RangeError);
});

test("two devices from one adapter work independently", async () => {
  const d0 = await start(0);
  const d1 = await start(1);
  assert.equal(d0.info, d1.info);
  const a = upload(d0, new Float32Array([1, 2, 3]));
  const b = upload(d1, new Float32Array([10, 20, 30]));
  const oa = d0.allocate(3, "float32");
  const ob = d1.allocate(3, "float32");
  d0.kernels.unary({ op: "neg", x: a, out: oa, numel: 3, dtype: "float32" });
  d1.kernels.unary({ op: "sqrt", x: b, out: ob, numel: 3, dtype: "float32" });
  d1.destroy();
  assert.deepEqual([...await d0.read(oa, 0, 3, "float32")], [-1, -2, -3]);
  assert.throws(() => d1.allocate(1, "float32"), DeviceLostError);
  d0.destroy();
});

test("after destroy every method throws DeviceLostError; reads reject", async () => {
  const d = await start(3);
  const x = upload(d, new Float32Array(1 << 16).fill(1));
  const out = d.allocate(1, "float32");
  d.kernels.reduce({
    op: "sum",
    x: x,
    out: out,
    outer: 1,
    size: 1 << 16,
    inner: 1,
    dtype: "float32",
  });
  const pending = d.read(out, 0, 1, "float32");
  d.destroy();
  await assert.rejects(pending, DeviceLostError);
  assert.throws(() => d.allocate(1, "float32"), /webgpu:3/);
  assert.throws(
    () => d.kernels.fill({ out: x, numel: 1, value: 0, dtype: "float32" }),
    DeviceLostError,
  );
  assert.throws(() => d.memory(), DeviceLostError);
  await assert.rejects(async () => await d.read(x, 0, 1, "float32"), DeviceLostError);
});

test("webgpuBackend({ gpu, name }): any GPU object, registered under another name", async () => {
  // A wrapper standing for another implementation (a browser's, dawn's).
  let requests = 0;
  const real = navigator.gpu;
  const gpu = {
    requestAdapter: (options?: GPURequestAdapterOptions) => {
      requests++;
      return real.requestAdapter(options);
    },
    getPreferredCanvasFormat: () => real.getPreferredCanvasFormat(),
  } as GPU;
  registerBackend("other-gpu", () => webgpuBackend({ gpu, name: "other-gpu" }), {
    priority: 5,
  });
  try {
    assert.equal(backendNames()[0], "other-gpu");
    const [d] = await requestDevices({ count: 1 });
    assert.equal(d.backend, "other-gpu");
    assert.ok(requests >= 1, "the given GPU object was asked for adapters");
    assert.equal((d.backendDevice as GpuDevice).impl.runtime.name, "other-gpu:0");
    assert.deepEqual(await tensor([1, 2]).to(d).add(1).toArray(), [2, 3]);
    assert.throws(
      () => d.backendDevice.kernels.fill({ out: {}, numel: 1, value: 0, dtype: "float32" }),
      /other-gpu:0: buffer was not allocated/,
    );
  } finally {
    unregisterBackend("other-gpu");
  }
  await assert.rejects(
    webgpuBackend({ gpu: { requestAdapter: () => Promise.resolve(null) } as unknown as GPU }),
    /webgpu backend unavailable: no WebGPU adapter/,
  );
});

test("shared device teardown", async () => {
  (await dev()).destroy();
  shared = null;
});
