/**
 * The backend contract suite: every kernel of the table, and memory with
 * offsets, run on every registered backend that starts here and compared
 * with the cpu reference, using only `src/backends/backend.ts` (allocate,
 * write, read, the kernel table). A backend's optional fused kernels are
 * checked where it has them. The third backend of `third_backend.ts` runs it
 * too, and the ops conformance cases at the end check that the ops compose
 * the fused kernels it leaves out.
 */

import assert from "node:assert/strict";
import {
  type BackendDevice,
  type DeviceBuffer,
  type DType,
  type KernelArgs,
  type KernelName,
  OPTIONAL_KERNELS,
  REBUILD,
  type TypedArray,
  type UnaryOp,
} from "../src/backends/backend.ts";
import {
  backendNames,
  type Device,
  manualSeed,
  nn,
  optim,
  registerBackend,
  requestDevices,
  tensor,
  tidy,
} from "../mod.ts";
import { assertClose, BACKENDS, floats, ints as intValues } from "./harness.ts";
import { thirdBackend } from "./third_backend.ts";

if (!backendNames().includes("third")) registerBackend("third", thirdBackend, { priority: -5 });
const [THIRD] = await requestDevices({ backend: "third" });

/** The reference: the cpu backend's device. */
const REF: BackendDevice = BACKENDS.get("cpu")![0].backendDevice;

/** Every started backend but cpu, and the third one. */
const SUBJECTS: [string, Device][] = [
  ...[...BACKENDS].filter(([name]) => name !== "cpu").map(([name, ds]) =>
    [name, ds[0]] as [string, Device]
  ),
  ["third", THIRD],
];

/** Host data for one buffer argument. */
type HostBuffer = TypedArray | { readonly numel: number; readonly dtype: DType };

/** One kernel call: its non-buffer arguments, its inputs, and its outputs to compare. */
interface Case<K extends KernelName> {
  readonly kernel: K;
  readonly what: string;
  /** Buffer fields and what they start as (host arrays are written; the others are allocated). */
  readonly buffers: Readonly<Record<string, HostBuffer>>;
  /** The fields read back and compared. */
  readonly outputs: readonly string[];
  /** Every other argument (the buffers come from `buffers`). */
  readonly args: Partial<KernelArgs[K]>;
  /** Absolute and relative tolerance (default exact). */
  readonly tolerance?: number;
  /**
   * The expected outputs where the cpu reference does not fuse this kernel:
   * from its primitives on the reference (default: the kernel on the reference).
   */
  readonly reference?: () => Promise<TypedArray[]>;
}

function dtypeOf(h: HostBuffer): DType {
  if (h instanceof Float32Array) return "float32";
  if (h instanceof Int32Array) return "int32";
  if (h instanceof Float64Array) return "float64";
  return (h as { dtype: DType }).dtype;
}

/** Runs `c` on `device` from the table alone; resolves with each output's values. */
async function run<K extends KernelName>(
  device: BackendDevice,
  c: Case<K>,
): Promise<TypedArray[] | null> {
  const kernel = device.kernels[c.kernel] as ((args: KernelArgs[K]) => void) | undefined;
  if (kernel === undefined) return null;
  const allocated: Record<string, DeviceBuffer> = {};
  const dtypes: Record<string, DType> = {};
  const sizes: Record<string, number> = {};
  for (const [field, host] of Object.entries(c.buffers)) {
    const dtype = dtypeOf(host);
    const numel = "numel" in host ? host.numel : host.length;
    allocated[field] = device.allocate(numel, dtype);
    dtypes[field] = dtype;
    sizes[field] = numel;
    if (!("numel" in host)) device.write(allocated[field], 0, host);
  }
  kernel({ ...c.args, ...allocated } as unknown as KernelArgs[K]);
  const results = await Promise.all(
    c.outputs.map((field) => device.read(allocated[field], 0, sizes[field], dtypes[field])),
  );
  for (const buffer of Object.values(allocated)) device.free(buffer);
  return results;
}

function supports(device: BackendDevice, c: Case<KernelName>): boolean {
  return Object.values(c.buffers).every((h) => device.dtypes.includes(dtypeOf(h)));
}

const f32 = (values: number[]) => Float32Array.from(values);
const i32 = (values: number[]) => Int32Array.from(values);
const random = (n: number, seed: number, lo = -3, hi = 3) => f32(floats([n], seed, lo, hi));
const ints = (n: number, seed: number, lo: number, hi: number) => i32(intValues([n], seed, lo, hi));
const out = (numel: number, dtype: DType = "float32") => ({ numel, dtype });

/** NaN and the infinities at fixed places in `values`. */
function withSpecials(values: Float32Array): Float32Array {
  const copy = values.slice();
  copy[1] = NaN;
  copy[4] = Infinity;
  copy[7] = -Infinity;
  return copy;
}

const FLOAT_UNARY: [UnaryOp, number][] = [
  ["neg", 0],
  ["exp", 2e-6],
  ["log", 2e-6],
  ["sqrt", 2e-6],
  ["abs", 0],
  ["relu", 0],
  ["sigmoid", 2e-6],
  ["tanh", 2e-6],
  ["erf", 2e-6],
  ["sign", 0],
  ["sin", 2e-6],
  ["cos", 2e-6],
  ["floor", 0],
  ["ceil", 0],
  ["round", 0],
  ["log1p", 2e-6],
  ["expm1", 2e-6],
  ["rsqrt", 2e-6],
  ["reciprocal", 2e-6],
  ["square", 2e-6],
];
const INT_UNARY: UnaryOp[] = ["neg", "abs", "relu", "sign", "floor", "ceil", "round", "square"];
const POSITIVE_ONLY = new Set<UnaryOp>(["log", "sqrt", "rsqrt", "log1p"]);

function cases(): Case<KernelName>[] {
  const list: Case<KernelName>[] = [];
  const add = <K extends KernelName>(c: Case<K>) => list.push(c as unknown as Case<KernelName>);
  add({
    kernel: "fill",
    what: "fill float32",
    buffers: { out: out(37) },
    outputs: ["out"],
    args: { numel: 37, value: -2.5, dtype: "float32" },
  });
  add({
    kernel: "fill",
    what: "fill int32",
    buffers: { out: out(8, "int32") },
    outputs: ["out"],
    args: { numel: 8, value: 7, dtype: "int32" },
  });
  add({
    kernel: "cast",
    what: "cast float32 -> int32",
    buffers: { x: random(41, 1, -100, 100), out: out(41, "int32") },
    outputs: ["out"],
    args: { numel: 41, dtype: "float32", to: "int32" },
  });
  add({
    kernel: "cast",
    what: "cast int32 -> float32",
    buffers: { x: ints(41, 2, -1000, 1000), out: out(41) },
    outputs: ["out"],
    args: { numel: 41, dtype: "int32", to: "float32" },
  });
  for (const n of [40, 37]) {
    for (const [op, tolerance] of FLOAT_UNARY) {
      const base = POSITIVE_ONLY.has(op) ? random(n, 3, 0.01, 5) : random(n, 3);
      add({
        kernel: "unary",
        what: `unary ${op} float32 (${n})`,
        buffers: { x: withSpecials(base), out: out(n) },
        outputs: ["out"],
        args: { op, numel: n, dtype: "float32" },
        tolerance,
      });
    }
  }
  for (const op of INT_UNARY) {
    add({
      kernel: "unary",
      what: `unary ${op} int32`,
      buffers: { x: ints(37, 4, -50, 50), out: out(37, "int32") },
      outputs: ["out"],
      args: { op, numel: 37, dtype: "int32" },
    });
  }
  const layouts: [string, number[], number[], number[], number, number][] = [
    ["same shape", [40], [1], [1], 40, 40],
    ["scalar b", [37], [1], [0], 37, 1],
    ["row broadcast", [5, 8], [8, 1], [0, 1], 40, 8],
    ["column broadcast", [5, 8], [1, 5], [1, 0], 40, 5],
    ["rank 3 strided", [2, 3, 4], [1, 2, 6], [12, 4, 1], 24, 24],
  ];
  const binaryOps = [
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
  ] as const;
  for (const [layout, shape, aStrides, bStrides, na, nb] of layouts) {
    for (const op of binaryOps) {
      const a = op === "pow" ? random(na, 5, 0.1, 3) : withSpecials(random(na, 5));
      const b = op === "pow" ? random(nb, 6, -2, 2) : random(nb, 6);
      if (op !== "pow" && nb > 2) b[2] = a[2]; // ties for the comparisons
      const numel = shape.reduce((x, y) => x * y, 1);
      add({
        kernel: "binary",
        what: `binary ${op} float32 ${layout}`,
        buffers: { a, b, out: out(numel) },
        outputs: ["out"],
        args: { op, shape, aStrides, bStrides, dtype: "float32" },
        tolerance: op === "pow" || op === "div" ? 2e-6 : 0,
      });
    }
    for (const op of ["add", "sub", "mul", "div", "maximum", "minimum", "eq", "lt"] as const) {
      const numel = shape.reduce((x, y) => x * y, 1);
      const b = ints(nb, 8, 1, 9).map((v, i) => (i % 2 ? -v : v));
      add({
        kernel: "binary",
        what: `binary ${op} int32 ${layout}`,
        buffers: { a: ints(na, 7, -40, 40), b, out: out(numel, "int32") },
        outputs: ["out"],
        args: { op, shape, aStrides, bStrides, dtype: "int32" },
      });
    }
  }
  const views: [number, number, number][] = [[1, 7, 1], [3, 300, 1], [2, 5, 3], [1, 2000, 1], [
    2,
    1100,
    2,
  ]];
  for (const [outer, size, inner] of views) {
    for (const op of ["sum", "max", "min", "argmax", "argmin"] as const) {
      const arg = op === "argmax" || op === "argmin";
      const x = random(outer * size * inner, size);
      if (op !== "sum") x[Math.floor(x.length / 2)] = NaN;
      add({
        kernel: "reduce",
        what: `reduce ${op} float32 [${outer}, ${size}, ${inner}]`,
        buffers: { x, out: out(outer * inner, arg ? "int32" : "float32") },
        outputs: ["out"],
        args: { op, outer, size, inner, dtype: "float32" },
        tolerance: op === "sum" ? 1e-4 : 0,
      });
      add({
        kernel: "reduce",
        what: `reduce ${op} int32 [${outer}, ${size}, ${inner}]`,
        buffers: {
          x: ints(outer * size * inner, size + 1, -9, 9),
          out: out(outer * inner, "int32"),
        },
        outputs: ["out"],
        args: { op, outer, size, inner, dtype: "int32" },
      });
    }
  }
  for (
    const [batch, m, n, k, transA, transB, aBatch, bBatch] of [
      [1, 5, 7, 3, false, false, true, true],
      [3, 17, 9, 33, true, false, true, false],
      [2, 8, 16, 12, false, true, false, true],
      [2, 33, 65, 20, true, true, true, true],
    ] as [number, number, number, number, boolean, boolean, boolean, boolean][]
  ) {
    add({
      kernel: "matmul",
      what: `matmul ${batch}x${m}x${n}x${k} transA=${transA} transB=${transB}`,
      buffers: {
        a: random((aBatch ? batch : 1) * m * k, m),
        b: random((bBatch ? batch : 1) * k * n, n),
        out: out(batch * m * n),
      },
      outputs: ["out"],
      args: {
        batch,
        m,
        n,
        k,
        aBatchStride: aBatch ? m * k : 0,
        bBatchStride: bBatch ? k * n : 0,
        transA,
        transB,
        dtype: "float32",
      },
      tolerance: 1e-5 * k,
    });
  }
  for (const dtype of ["float32", "int32"] as const) {
    const x = dtype === "float32" ? random(80, 9) : ints(80, 9, -99, 99);
    add({
      kernel: "copy",
      what: `copy ${dtype}: a permuted, offset region into an offset region`,
      // Positions the copy does not name keep what was there.
      buffers: { x, out: dtype === "float32" ? new Float32Array(70) : new Int32Array(70) },
      outputs: ["out"],
      args: {
        shape: [3, 4, 5],
        xStrides: [1, 3, 12],
        xOffset: 10,
        outStrides: [20, 5, 1],
        outOffset: 6,
        dtype,
      },
    });
  }
  add({
    kernel: "copy",
    what: "copy: expand (repeated source positions)",
    buffers: { x: random(4, 10), out: out(12) },
    outputs: ["out"],
    args: {
      shape: [3, 4],
      xStrides: [0, 1],
      xOffset: 0,
      outStrides: [4, 1],
      outOffset: 0,
      dtype: "float32",
    },
  });
  add({
    kernel: "indexSelect",
    what: "indexSelect [2, 5, 3] picking 4",
    buffers: { x: random(30, 11), indices: i32([4, 0, 4, 2]), out: out(24) },
    outputs: ["out"],
    args: { outer: 2, size: 5, inner: 3, count: 4, dtype: "float32" },
  });
  for (const kind of ["uniform", "normal"] as const) {
    add({
      kernel: "random",
      what: `random ${kind}`,
      buffers: { out: out(1001) },
      outputs: ["out"],
      args: {
        numel: 1001,
        kind,
        seed: 12345,
        a: kind === "uniform" ? -2 : 1,
        b: 3,
        dtype: "float32",
      },
      tolerance: 1e-5,
    });
  }
  add({
    kernel: "where",
    what: "where: float cond with NaN and ±0, broadcast a",
    buffers: {
      cond: f32([1, 0, NaN, -0, 2, 0, 0, -1]),
      a: random(4, 12),
      b: random(8, 13),
      out: out(8),
    },
    outputs: ["out"],
    args: {
      shape: [2, 4],
      condStrides: [4, 1],
      aStrides: [0, 1],
      bStrides: [4, 1],
      condDtype: "float32",
      dtype: "float32",
    },
  });
  add({
    kernel: "where",
    what: "where: int32 cond, int32 values, scalar b",
    buffers: {
      cond: i32([0, 1, 1, 0, 5]),
      a: ints(5, 14, -9, 9),
      b: i32([42]),
      out: out(5, "int32"),
    },
    outputs: ["out"],
    args: {
      shape: [5],
      condStrides: [1],
      aStrides: [1],
      bStrides: [0],
      condDtype: "int32",
      dtype: "int32",
    },
  });
  add({
    kernel: "gather",
    what: "gather [2, 5, 3] -> [2, 4, 3]",
    buffers: { x: random(30, 15), index: ints(24, 16, 0, 5), out: out(24) },
    outputs: ["out"],
    args: { outer: 2, size: 5, count: 4, inner: 3, dtype: "float32" },
  });
  add({
    kernel: "scatterAdd",
    what: "scatterAdd [2, 4, 3] -> [2, 5, 3], repeated indices",
    buffers: { x: random(24, 17), index: ints(24, 18, 0, 5), out: out(30) },
    outputs: ["out"],
    args: { outer: 2, size: 5, count: 4, inner: 3, dtype: "float32" },
    tolerance: 1e-6,
  });
  const window = {
    batch: 2,
    channels: 3,
    height: 6,
    width: 7,
    kernelH: 3,
    kernelW: 2,
    strideH: 2,
    strideW: 1,
    padH: 1,
    padW: 1,
    dilationH: 1,
    dilationW: 2,
    outH: 3,
    outW: 7,
  };
  const planes = window.batch * window.channels;
  const columns = planes * window.kernelH * window.kernelW * window.outH * window.outW;
  for (const padValue of [0, -Infinity]) {
    add({
      kernel: "im2col",
      what: `im2col padValue ${padValue}`,
      buffers: { x: random(planes * 42, 19), out: out(columns) },
      outputs: ["out"],
      args: { ...window, padValue, dtype: "float32" },
    });
  }
  add({
    kernel: "col2im",
    what: "col2im",
    buffers: { x: random(columns, 20), out: out(planes * 42) },
    outputs: ["out"],
    args: { ...window, dtype: "float32" },
    tolerance: 1e-6,
  });
  for (const [outer, size, inner] of [[3, 5, 1], [2, 300, 1], [2, 6, 4]]) {
    for (const log of [false, true]) {
      add({
        kernel: "softmax",
        what: `softmax log=${log} [${outer}, ${size}, ${inner}] (optional)`,
        buffers: {
          x: random(outer * size * inner, size + 30, -20, 20),
          out: out(outer * size * inner),
        },
        outputs: ["out"],
        args: { outer, size, inner, log, dtype: "float32" },
        tolerance: 2e-6,
      });
    }
  }
  for (const kernel of ["gelu", "geluDerivative"] as const) {
    add({
      kernel,
      what: `${kernel} (optional)`,
      buffers: { x: withSpecials(random(41, 21, -8, 8)), out: out(41) },
      outputs: ["out"],
      args: { numel: 41, dtype: "float32" },
      tolerance: 3e-6,
    });
  }
  {
    // geluBackward: grad times the reference's geluDerivative, rounded.
    const x = withSpecials(random(41, 31, -8, 8));
    const grad = random(41, 32);
    add({
      kernel: "geluBackward",
      what: "geluBackward (optional)",
      buffers: { x, grad, out: out(41) },
      outputs: ["out"],
      args: { numel: 41, dtype: "float32" },
      tolerance: 3e-6,
      reference: async () => {
        const [d] = (await run(REF, {
          kernel: "geluDerivative",
          what: "",
          buffers: { x, out: out(41) },
          outputs: ["out"],
          args: { numel: 41, dtype: "float32" },
        }))!;
        return [d.map((v, i) => Math.fround(grad[i] * v))];
      },
    });
  }
  for (const [transB, m, n, k] of [[true, 5, 7, 3], [false, 9, 8, 16], [true, 4, 6, 0]] as const) {
    // addmm: the reference's product plus the bias, rounded.
    const [a, b, bias] = [random(m * k, 33), random(k * n, 34), random(n, 35)];
    const args = {
      batch: 1,
      m,
      n,
      k,
      aBatchStride: 0,
      bBatchStride: 0,
      transA: false,
      transB,
      dtype: "float32",
    } as const;
    add({
      kernel: "addmm",
      what: `addmm ${m}x${n}x${k} transB=${transB} (optional)`,
      buffers: { a, b, bias, out: out(m * n) },
      outputs: ["out"],
      args,
      tolerance: 1e-5 * Math.max(k, 1),
      reference: async () => {
        const buffers = { a, b, out: out(m * n) };
        const c = { kernel: "matmul", what: "", buffers, outputs: ["out"], args } as const;
        const [p] = k === 0 ? [new Float32Array(m * n)] : (await run(REF, c))!;
        return [p.map((v, i) => Math.fround(v + bias[i % n]))];
      },
    });
  }
  for (
    const [decoupled, maximize, weightDecay] of [[false, false, 0], [true, false, 0.1], [
      false,
      true,
      0.01,
    ]] as [boolean, boolean, number][]
  ) {
    add({
      kernel: "adam",
      what: `adam decoupled=${decoupled} maximize=${maximize} (optional)`,
      buffers: {
        param: random(37, 22),
        grad: random(37, 23),
        expAvg: random(37, 24, -0.1, 0.1),
        expAvgSq: random(37, 25, 0, 0.1),
      },
      outputs: ["param", "expAvg", "expAvgSq"],
      args: {
        numel: 37,
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weightDecay,
        decoupled,
        maximize,
        stepSize: 0.01 / (1 - 0.9 ** 3),
        correction2Sqrt: Math.sqrt(1 - 0.999 ** 3),
        dtype: "float32",
      },
      tolerance: 2e-6,
    });
    add({
      kernel: "sgd",
      what: `sgd maximize=${maximize} weightDecay=${weightDecay} (optional)`,
      buffers: { param: random(37, 26), grad: random(37, 27) },
      outputs: ["param"],
      args: { numel: 37, lr: 0.1, weightDecay, maximize, dtype: "float32" },
      tolerance: 1e-6,
    });
  }
  {
    // batchNorm / batchNormBackward over [3, 4, 5]: references in float64 on the host.
    const [outer, channels, inner] = [3, 4, 5];
    const numel = outer * channels * inner;
    const x = random(numel, 36);
    const [weight, bias, grad] = [random(channels, 37), random(channels, 38), random(numel, 39)];
    const eps = 1e-5;
    const at = (o: number, c: number, i: number) => (o * channels + c) * inner + i;
    const each = (c: number, f: (k: number) => void) => {
      for (let o = 0; o < outer; o++) for (let i = 0; i < inner; i++) f(at(o, c, i));
    };
    const n = outer * inner;
    const mean = new Float64Array(channels);
    const variance = new Float64Array(channels);
    for (let c = 0; c < channels; c++) {
      each(c, (k) => mean[c] += x[k] / n);
      each(c, (k) => variance[c] += (x[k] - mean[c]) ** 2 / n);
    }
    const invstd = variance.map((v) => 1 / Math.sqrt(v + eps));
    const y = new Float32Array(numel);
    for (let c = 0; c < channels; c++) {
      each(c, (k) => y[k] = (x[k] - mean[c]) * invstd[c] * weight[c] + bias[c]);
    }
    const shape = { outer, channels, inner, dtype: "float32" } as const;
    add({
      kernel: "batchNorm",
      what: "batchNorm [3, 4, 5] (optional)",
      buffers: {
        x,
        weight,
        bias,
        mean: out(channels),
        invstd: out(channels),
        variance: out(channels),
        out: out(numel),
      },
      outputs: ["out", "mean", "invstd", "variance"],
      args: { ...shape, eps },
      tolerance: 1e-5,
      reference: () => Promise.resolve([y, f32([...mean]), f32([...invstd]), f32([...variance])]),
    });
    const gradInput = new Float32Array(numel);
    const gradWeight = new Float32Array(channels);
    const gradBias = new Float32Array(channels);
    for (let c = 0; c < channels; c++) {
      let [gsum, gxc] = [0, 0];
      each(c, (k) => {
        gsum += grad[k];
        gxc += grad[k] * (x[k] - mean[c]);
      });
      gradWeight[c] = gxc * invstd[c];
      gradBias[c] = gsum;
      each(c, (k) => {
        const xc = x[k] - mean[c];
        gradInput[k] = weight[c] * invstd[c] *
          (grad[k] - gsum / n - xc * invstd[c] ** 2 * gxc / n);
      });
    }
    add({
      kernel: "batchNormBackward",
      what: "batchNormBackward [3, 4, 5] (optional)",
      buffers: {
        x,
        weight,
        mean: f32([...mean]),
        invstd: f32([...invstd]),
        grad,
        gradInput: out(numel),
        gradWeight: out(channels),
        gradBias: out(channels),
      },
      outputs: ["gradInput", "gradWeight", "gradBias"],
      args: shape,
      tolerance: 1e-4,
      reference: () =>
        Promise.resolve([
          gradInput,
          gradWeight.subarray(0, channels),
          gradBias.subarray(0, channels),
        ]),
    });
  }
  for (
    const [what, pool] of [["3x2 stride 2x1, padding, dilation", window], ["2x2 stride 2", {
      ...window,
      kernelH: 2,
      kernelW: 2,
      strideH: 2,
      strideW: 2,
      padH: 0,
      padW: 0,
      dilationW: 1,
      outH: 3,
      outW: 3,
    }]] as const
  ) {
    // maxPool2d: the host's window maxima (the last NaN wins, as PyTorch; the first on ties;
    // padding never wins).
    const x = withSpecials(random(planes * 42, 40));
    x[10] = x[11] = 2.5;
    const outputs = planes * pool.outH * pool.outW;
    const values = new Float32Array(outputs);
    const indices = new Int32Array(outputs);
    let o = 0;
    for (let p = 0; p < planes; p++) {
      for (let oh = 0; oh < pool.outH; oh++) {
        for (let ow = 0; ow < pool.outW; ow++, o++) {
          let best = -1;
          for (let ki = 0; ki < pool.kernelH; ki++) {
            for (let kj = 0; kj < pool.kernelW; kj++) {
              const h = oh * pool.strideH - pool.padH + ki * pool.dilationH;
              const w = ow * pool.strideW - pool.padW + kj * pool.dilationW;
              if (h < 0 || h >= pool.height || w < 0 || w >= pool.width) continue;
              const v = x[p * 42 + h * 7 + w];
              const b = x[p * 42 + best];
              if (best < 0 || v > b || Number.isNaN(v)) best = h * 7 + w;
            }
          }
          values[o] = x[p * 42 + best];
          indices[o] = best;
        }
      }
    }
    add({
      kernel: "maxPool2d",
      what: `maxPool2d ${what} (optional)`,
      buffers: { x, out: out(outputs), indices: out(outputs, "int32") },
      outputs: ["out", "indices"],
      args: { ...pool, dtype: "float32" },
      reference: () => Promise.resolve([values, indices]),
    });
  }
  for (const [outer, size, inner] of [[2, 37, 3], [1, 1100, 1]]) {
    // sort: a host stable sort (NaN last ascending, first descending; -0 equal to +0).
    const n = outer * size * inner;
    const floatX = withSpecials(random(n, size)).map((v, k) => (k % 3 ? Math.round(v) : v));
    floatX[2] = -0;
    floatX[9] = NaN;
    const intX = i32(
      intValues([n], size, -4, 4).map((v, k) => (k % 5 ? v : k % 2 ? -(2 ** 31) : 2 ** 31 - 1)),
    );
    for (const [x, dtype] of [[floatX, "float32"], [intX, "int32"]] as const) {
      // k < size: only each row's first k (topk; the cpu kernel selects on the long row).
      for (
        const [descending, k] of [[false, size], [true, size], [true, 10], [false, 3]] as const
      ) {
        const values = x.slice(0, outer * k * inner);
        const indices = new Int32Array(outer * k * inner);
        const rank = (v: number) => (Number.isNaN(v) ? Infinity : v) * (descending ? -1 : 1);
        const nan = (v: number) => Number(Number.isNaN(v)) * (descending ? -1 : 1);
        for (let o = 0; o < outer; o++) {
          for (let i = 0; i < inner; i++) {
            const at = (r: number) => (o * size + r) * inner + i;
            const order = Array.from({ length: size }, (_, r) => r).sort((a, b) =>
              rank(x[at(a)]) - rank(x[at(b)]) || nan(x[at(a)]) - nan(x[at(b)]) || a - b
            );
            const kept = (r: number) => (o * k + r) * inner + i;
            order.slice(0, k).forEach((from, r) => (
              (values[kept(r)] = x[at(from)]), (indices[kept(r)] = from)
            ));
          }
        }
        add({
          kernel: "sort",
          what:
            `sort ${dtype} [${outer}, ${size}, ${inner}] k=${k} descending=${descending} (optional)`,
          buffers: {
            x,
            values: out(outer * k * inner, dtype),
            indices: out(outer * k * inner, "int32"),
          },
          outputs: ["values", "indices"],
          args: { outer, size, inner, k, descending, dtype },
          reference: () => Promise.resolve([values, indices]),
        });
      }
    }
  }
  // eigh, svd, qr: matrices with exact answers (Pythagorean rotations), as PyTorch gives them up
  // to each vector's sign; the cpu kernel's signs (largest |entry| positive), LAPACK's for qr.
  // eigh reads the lower triangle only: 99 above it.
  add({
    kernel: "eigh",
    what: "eigh [2, 2, 2]: Q diag(1, 2) Qᵀ, Q = [[.6, -.8], [.8, .6]], and diag(3, -1) (optional)",
    buffers: {
      a: f32([41 / 25, 99, -12 / 25, 34 / 25, 3, 99, 0, -1]),
      values: out(4),
      vectors: out(8),
    },
    outputs: ["values", "vectors"],
    args: { batch: 2, m: 2, n: 2, dtype: "float32" },
    tolerance: 1e-6,
    reference: () => Promise.resolve([f32([1, 2, -1, 3]), f32([0.6, 0.8, 0.8, -0.6, 0, 1, 1, 0])]),
  });
  add({
    kernel: "svd",
    what: "svd [3, 2]: S = (3, 2) (optional)",
    buffers: { a: f32([0, 2, 3, 0, 0, 0]), u: out(6), s: out(2), vh: out(4) },
    outputs: ["u", "s", "vh"],
    args: { batch: 1, m: 3, n: 2, dtype: "float32" },
    tolerance: 1e-6,
    reference: () => Promise.resolve([f32([0, 1, 1, 0, 0, 0]), f32([3, 2]), f32([1, 0, 0, 1])]),
  });
  for (const complete of [false, true]) {
    add({
      kernel: "qr",
      what: `qr [3, 2] complete=${complete}: LAPACK's signs (optional)`,
      buffers: {
        a: f32([3, 1, 4, 2, 0, 0]),
        q: out(complete ? 9 : 6),
        r: out(complete ? 6 : 4),
      },
      outputs: ["q", "r"],
      args: { batch: 1, m: 3, n: 2, complete, dtype: "float32" },
      tolerance: 1e-6,
      reference: () =>
        Promise.resolve(
          complete
            ? [f32([-0.6, -0.8, 0, -0.8, 0.6, 0, 0, 0, 1]), f32([-5, -2.2, 0, 0.4, 0, 0])]
            : [f32([-0.6, -0.8, -0.8, 0.6, 0, 0]), f32([-5, -2.2, 0, 0.4])],
        ),
    });
  }
  const target = i32([2, 0, -100, 4, 1, 3, 0]);
  add({
    kernel: "crossEntropy",
    what: "crossEntropy [7, 5], one ignored row (optional)",
    buffers: {
      logits: random(35, 28, -6, 6),
      target,
      losses: out(7),
      weights: out(7),
      probs: out(35),
    },
    outputs: ["losses", "weights", "probs"],
    args: { rows: 7, classes: 5, ignoreIndex: -100, dtype: "float32" },
    tolerance: 2e-6,
  });
  add({
    kernel: "crossEntropyBackward",
    what: "crossEntropyBackward [7, 5], one ignored row (optional)",
    buffers: { probs: random(35, 29, 0, 1), gradLoss: random(7, 30), target, out: out(35) },
    outputs: ["out"],
    args: { rows: 7, classes: 5, ignoreIndex: -100, dtype: "float32" },
    tolerance: 2e-6,
  });
  const allIgnored = i32([-100, -100, -100]);
  for (const mean of [true, false]) {
    const labelled = [[7, target, "one ignored row"], [3, allIgnored, "all ignored"]] as const;
    for (const [rows, labels, what] of labelled) {
      const logits = random(rows * 5, 31, -6, 6);
      const args = { rows, classes: 5, ignoreIndex: -100, dtype: "float32" } as const;
      add({
        kernel: "crossEntropyReduced",
        what: `crossEntropyReduced [${rows}, 5] mean=${mean}, ${what} (optional)`,
        buffers: { logits, target: labels, probs: out(rows * 5), loss: out(1), weightSum: out(1) },
        outputs: ["loss", "weightSum", "probs"],
        args: { ...args, mean },
        tolerance: 4e-6,
        // The per-row kernel's losses, summed (and divided) as the composition does.
        reference: async () => {
          const [losses, weights, probs] = (await run(REF, {
            kernel: "crossEntropy",
            what: "",
            buffers: {
              logits,
              target: labels,
              losses: out(rows),
              weights: out(rows),
              probs: out(rows * 5),
            },
            outputs: ["losses", "weights", "probs"],
            args,
          }))!;
          const total = Math.fround([...losses].reduce((a, b) => a + b, 0));
          const count = [...weights].reduce((a, b) => a + b, 0);
          return [f32([mean ? total / count : total]), f32([count]), probs];
        },
      });
    }
    const probs = random(35, 32, 0, 1);
    const args = { rows: 7, classes: 5, ignoreIndex: -100, dtype: "float32" } as const;
    add({
      kernel: "crossEntropyReducedBackward",
      what: `crossEntropyReducedBackward [7, 5] mean=${mean}, one ignored row (optional)`,
      buffers: { probs, target, gradLoss: f32([0.75]), weightSum: f32([6]), out: out(35) },
      outputs: ["out"],
      args: { ...args, mean },
      tolerance: 2e-6,
      // The per-row kernel with the scalar gradient (over the weights) on every row.
      reference: async () =>
        (await run(REF, {
          kernel: "crossEntropyBackward",
          what: "",
          buffers: {
            probs,
            target,
            gradLoss: f32(Array(7).fill(mean ? 0.75 / 6 : 0.75)),
            out: out(35),
          },
          outputs: ["out"],
          args,
        }))!,
    });
  }
  {
    // segmentReduce max: ties (the first wins), NaN (kept only where first, as PyTorch's), -inf,
    // rows skipped (-1 and 9 out of range), an empty segment, a segment of skipped rows only,
    // and bounds past either end (clamped).
    const rows = 6;
    const inner = 3;
    const x = f32([
      ...[1, 5, -Infinity],
      ...[3, 5, -Infinity],
      ...[3, NaN, 2],
      ...[-1, 7, NaN],
      ...[0, -0, 4],
      ...[3, 2, 1],
    ]);
    const index = i32([0, 1, 2, 5, 3, 9, -1, 4, 1, 0, 5, 2, 2]);
    const bounds = i32([-2, 3, 3, 5, 7, 7, 13, 40]);
    const size = bounds.length - 1;
    const count = index.length;
    const values = new Float32Array(size * inner);
    const indices = new Int32Array(size * inner).fill(-1);
    for (let s = 0; s < size; s++) {
      const [start, end] = [bounds[s], bounds[s + 1]].map((b) => Math.min(Math.max(b, 0), count));
      for (let c = 0; c < inner; c++) {
        let best: number | null = null;
        for (let i = start; i < end; i++) {
          const r = index[i];
          if (r < 0 || r >= rows) continue;
          const v = x[r * inner + c];
          const wins = best === null || v > best;
          if (wins) [best, indices[s * inner + c]] = [v, r];
        }
        values[s * inner + c] = best ?? 0;
      }
    }
    const args = { rows, count, size, inner, dtype: "float32" } as const;
    add({
      kernel: "segmentReduce",
      what: "segmentReduce max [6, 3], 7 segments, ties, NaN, skipped rows (optional)",
      buffers: { x, index, bounds, out: out(size * inner), indices: out(size * inner, "int32") },
      outputs: ["out", "indices"],
      args: { ...args, weights: null, mode: "max", transpose: false },
      reference: () => Promise.resolve([values, indices]),
    });
    // Sums (weighted or not) and means of the same segments, and their adjoint (transpose):
    // a float64 host reference rounded once; the kernels round every add.
    const finite = x.map((v) => (Number.isFinite(v) ? v : 0.5));
    const weights = random(count, 81);
    const g = random(size * inner, 82);
    for (const mode of ["sum", "mean"] as const) {
      for (const weighted of mode === "sum" ? [false, true] : [false]) {
        const sums = new Float64Array(size * inner);
        const scattered = new Float64Array(rows * inner);
        for (let s = 0; s < size; s++) {
          const [start, end] = [bounds[s], bounds[s + 1]].map((b) =>
            Math.min(Math.max(b, 0), count)
          );
          const at = [];
          for (let i = start; i < end; i++) if (index[i] >= 0 && index[i] < rows) at.push(i);
          const scale = mode === "mean" ? 1 / Math.max(at.length, 1) : 1;
          for (const i of at) {
            const f = (weighted ? weights[i] : 1) * scale;
            for (let c = 0; c < inner; c++) {
              sums[s * inner + c] += finite[index[i] * inner + c] * f;
              scattered[index[i] * inner + c] += g[s * inner + c] * f;
            }
          }
        }
        const what = `segmentReduce ${mode}${weighted ? ", weighted" : ""} [6, 3], 7 segments`;
        const common = { index, bounds, ...(weighted ? { weights } : {}) };
        const extra = { ...args, mode, indices: null, ...(weighted ? {} : { weights: null }) };
        add({
          kernel: "segmentReduce",
          what: `${what} (optional)`,
          buffers: { ...common, x: finite, out: out(size * inner) },
          outputs: ["out"],
          args: { ...extra, transpose: false },
          tolerance: 1e-6,
          reference: () => Promise.resolve([f32([...sums])]),
        });
        add({
          kernel: "segmentReduce",
          what: `${what}, transposed (optional)`,
          buffers: { ...common, x: g, out: out(rows * inner) },
          outputs: ["out"],
          args: { ...extra, transpose: true },
          tolerance: 1e-6,
          reference: () => Promise.resolve([f32([...scattered])]),
        });
      }
    }
  }
  {
    // ctcAlpha and its backward: a host reference of the lse recurrence, with unreachable
    // (-inf) states, a predecessor list reading the dead state 0, and a gradient everywhere.
    const [steps, batch, states] = [5, 2, 6];
    const frame = batch * states;
    const x = random(steps * frame, 71, -3, 0);
    const start = f32(Array.from({ length: frame }, (_, k) => (k % states < 3 ? 0 : -Infinity)));
    start[0] = start[states] = -Infinity;
    const sources = i32(
      Array.from({ length: batch * 3 * states }, (_, k) => {
        const [n, kind, j] = [Math.floor(k / (3 * states)), Math.floor(k / states) % 3, k % states];
        const from = j - kind;
        return from >= 1 && (kind < 2 || (n + j) % 2 === 0) ? from : 0;
      }),
    );
    const g = random(steps * frame, 72);
    const alpha = new Float64Array(steps * frame);
    const terms = (t: number, n: number, j: number) =>
      [0, 1, 2].map((k) => (t - 1) * frame + n * states + sources[(n * 3 + k) * states + j]);
    const lse = (at: number[], values: Float64Array) => {
      const top = Math.max(...at.map((i) => values[i]));
      const m = Math.min(Math.max(top, -3e38), 3e38);
      const e = at.map((i) => Math.exp(values[i] - m));
      const sum = e[0] + e[1] + e[2];
      return { value: Math.log(Math.max(sum, 0.5)) + top, e, sum };
    };
    for (let k = 0; k < frame; k++) alpha[k] = Math.fround(x[k] + start[k]);
    for (let t = 1; t < steps; t++) {
      for (let n = 0; n < batch; n++) {
        for (let j = 0; j < states; j++) {
          const at = t * frame + n * states + j;
          alpha[at] = Math.fround(lse(terms(t, n, j), alpha).value + x[at]);
        }
      }
    }
    const grad = Float64Array.from(g);
    for (let t = steps - 1; t >= 1; t--) {
      for (let n = 0; n < batch; n++) {
        for (let j = 0; j < states; j++) {
          const at = terms(t, n, j);
          const { e, sum } = lse(at, alpha);
          if (!(sum >= 0.5)) continue;
          at.forEach((i, k) => (grad[i] += (grad[t * frame + n * states + j] / sum) * e[k]));
        }
      }
    }
    const shape = { steps, batch, states, dtype: "float32" } as const;
    add({
      kernel: "ctcAlpha",
      what: "ctcAlpha [5, 2, 6] (optional)",
      buffers: { x, start, sources, out: out(steps * frame) },
      outputs: ["out"],
      args: shape,
      tolerance: 1e-5,
      reference: () => Promise.resolve([Float32Array.from(alpha)]),
    });
    add({
      kernel: "ctcAlphaBackward",
      what: "ctcAlphaBackward [5, 2, 6] (optional)",
      buffers: { alpha: Float32Array.from(alpha), sources, g, out: out(steps * frame) },
      outputs: ["out"],
      args: shape,
      tolerance: 1e-5,
      reference: () => Promise.resolve([Float32Array.from(grad)]),
    });
  }
  {
    // scatterReduce, every mode with and without self: [2, 4, 2] sources into [2, 3, 2], indices
    // out of range (skipped), a place no source reaches, ties, zeros of both signs and NaN; a
    // host reference folding each place's values in order, rounding each step.
    const [outer, size, count, inner] = [2, 3, 4, 2];
    const self = f32([0, -0, 1, NaN, 2, -1, 0.5, 3, -0, 4, 1, -2]);
    const x = f32([-0, 0, 2, 1, NaN, 5, 1, -3, 0.25, 2, 2, -0, 1.5, -1, 3, 0.75]);
    const index = i32([0, 0, 2, 1, 0, -1, 2, 1, 1, 3, 1, 0, 2, 0, 1, 0]);
    const modes = ["assign", "sum", "prod", "mean", "amax", "amin"] as const;
    for (const mode of modes) {
      for (const includeSelf of [true, false]) {
        const want = self.slice();
        const counts = new Int32Array(self.length);
        for (let o = 0; o < outer; o++) {
          for (let i = 0; i < inner; i++) {
            for (let r = 0; r < size; r++) {
              const k = (o * size + r) * inner + i;
              const values: number[] = [];
              for (let j = 0; j < count; j++) {
                const at = (o * count + j) * inner + i;
                if (index[at] === r) values.push(x[at]);
              }
              counts[k] = values.length;
              if (values.length === 0) continue;
              const fold = (a: number, v: number) =>
                Math.fround(
                  mode === "prod"
                    ? a * v
                    : mode === "amax"
                    ? (v > a || v !== v ? v : a)
                    : mode === "amin"
                    ? (v < a || v !== v ? v : a)
                    : mode === "assign"
                    ? v
                    : a + v,
                );
              const withSelf = includeSelf && mode !== "assign";
              const first = withSelf ? self[k] : mode === "sum" || mode === "mean" ? 0 : null;
              let acc = first === null ? values[0] : fold(first, values[0]);
              for (const v of values.slice(1)) acc = fold(acc, v);
              const n = values.length + (withSelf ? 1 : 0);
              want[k] = mode === "mean" ? Math.fround(acc / n) : acc;
            }
          }
        }
        add({
          kernel: "scatterReduce",
          what: `scatterReduce ${mode}, includeSelf ${includeSelf}, [2, 4, 2] into [2, 3, 2]`,
          buffers: { self, x, index, out: out(self.length), counts: out(self.length, "int32") },
          outputs: ["out", "counts"],
          args: { outer, size, count, inner, mode, includeSelf, dtype: "float32" },
          reference: () => Promise.resolve([want, counts]),
        });
      }
    }
  }
  return list;
}

const CASES = cases();

Deno.test("contract: the suite has a case for every kernel of the table", () => {
  const covered = new Set(CASES.map((c) => c.kernel));
  const missing = (Object.keys(REBUILD) as KernelName[]).filter((k) => !covered.has(k));
  assert.deepEqual(missing, [], "kernels without a contract case: add one in cases()");
});

Deno.test({
  name: "contract: the cpu's fused kernels match their references",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    let checked = 0;
    for (const c of CASES) {
      if (!c.reference) continue;
      const got = await run(REF, c);
      if (got === null) continue;
      const want = await c.reference();
      const tol = c.tolerance ?? 0;
      for (let i = 0; i < want.length; i++) {
        assertClose(got[i], want[i], { atol: tol, rtol: tol, what: `${c.what} on cpu` });
      }
      checked++;
    }
    assert.ok(checked >= 8, `only ${checked} referenced cases ran on cpu`);
  },
});

for (const [name, device] of SUBJECTS) {
  const subject = device.backendDevice;
  Deno.test({
    name: `contract: every kernel of the table matches cpu [${name}]`,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => {
      let checked = 0;
      for (const c of CASES) {
        if (!supports(subject, c)) continue;
        const got = await run(subject, c);
        if (got === null) {
          assert.ok(
            (OPTIONAL_KERNELS as readonly string[]).includes(c.kernel),
            `${name} lacks the required kernel ${c.kernel}`,
          );
          continue;
        }
        const want = c.reference ? await c.reference() : (await run(REF, c))!;
        const tol = c.tolerance ?? 0;
        for (let i = 0; i < want.length; i++) {
          assertClose(got[i], want[i], { atol: tol, rtol: tol, what: `${c.what} on ${name}` });
        }
        checked++;
      }
      assert.ok(checked > 150, `only ${checked} cases ran on ${name}`);
    },
  });

  Deno.test({
    name: `contract: write and read with offsets; handles are checked [${name}]`,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => {
      for (const d of [subject, REF]) {
        const b = d.allocate(20, "float32");
        d.kernels.fill({ out: b, numel: 20, value: 0, dtype: "float32" });
        d.write(b, 5, f32([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]));
        d.write(b, 0, f32([-1, -2]));
        assert.deepEqual(
          [...await d.read(b, 3, 10, "float32")],
          [0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
          "read from element 3",
        );
        assert.deepEqual([...await d.read(b, 0, 3, "float32")], [-1, -2, 0], "read from 0");
        assert.deepEqual([...await d.read(b, 20, 0, "float32")], [], "empty read at the end");
        const ints = d.allocate(4, "int32");
        d.write(ints, 1, i32([7, -8, 9]));
        assert.deepEqual([...(await d.read(ints, 1, 3, "int32"))], [7, -8, 9]);
        const foreign = (d === REF ? subject : REF).allocate(1, "float32");
        assert.throws(
          () => d.kernels.fill({ out: foreign, numel: 1, value: 0, dtype: "float32" }),
          /not allocated by this device/,
        );
        d.free(b);
        assert.throws(
          () => d.kernels.fill({ out: b, numel: 1, value: 0, dtype: "float32" }),
          /used after free/,
        );
        d.free(ints);
      }
    },
  });
}

Deno.test({
  name: "third backend: the ops compose the fused kernels it leaves out (softmax, gelu)",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    assert.equal(THIRD.backendDevice.kernels.softmax, undefined);
    assert.equal(THIRD.backendDevice.kernels.gelu, undefined);
    const cpu = BACKENDS.get("cpu")![0];
    const values = floats([24], 30, -4, 4);
    values[5] = NaN;
    for (const d of [cpu, THIRD]) assert.ok(d.backendDevice.kernels.matmul);
    const outputs = async (d: Device) => {
      const x = tensor(values, { shape: [4, 6], device: d, requiresGrad: true });
      const y = tidy(() => {
        const loss = x.softmax(1).add(x.logSoftmax(0)).add(x.gelu()).sum();
        loss.backward();
        return loss;
      });
      return [await y.data(), await x.grad!.data(), await x.softmax(1).data()];
    };
    const [want, got] = [await outputs(cpu), await outputs(THIRD)];
    for (let i = 0; i < want.length; i++) {
      assertClose(got[i], want[i], { atol: 1e-5, rtol: 1e-5, what: `output ${i}` });
    }
  },
});

Deno.test({
  name:
    "third backend: batchNorm and maxPool2d composed equal the cpu's fused kernels, gradients too",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    assert.equal(THIRD.backendDevice.kernels.batchNorm, undefined);
    assert.equal(THIRD.backendDevice.kernels.maxPool2d, undefined);
    const cpu = BACKENDS.get("cpu")![0];
    const F = nn.functional;
    const outputs = (d: Device) => {
      const x = tensor(floats([2 * 3 * 6 * 4], 50, -2, 2), {
        shape: [2, 3, 6, 4],
        device: d,
        requiresGrad: true,
      });
      const w = tensor(floats([3], 51, 0.5, 1.5), { device: d, requiresGrad: true });
      const b = tensor(floats([3], 52, -1, 1), { device: d, requiresGrad: true });
      const [mean, variance] = [
        tensor([0, 0.5, -1], { device: d }),
        tensor([1, 2, 0.5], { device: d }),
      ];
      const g = tensor(floats([2 * 3 * 3 * 2], 53, -1, 1), { shape: [2, 3, 3, 2], device: d });
      const y = tidy(() => {
        const normed = F.batchNorm(x, mean, variance, { weight: w, bias: b, training: true });
        const pooled = F.maxPool2d(normed, 2).add(
          F.maxPool2d(normed, 3, { stride: 2, padding: 1 }),
        );
        const loss = pooled.mul(g).sum();
        loss.backward();
        return pooled;
      });
      return [y, x.grad!, w.grad!, b.grad!, mean, variance].map((t) => t.data());
    };
    const [want, got] = [outputs(cpu), outputs(THIRD)];
    for (let i = 0; i < want.length; i++) {
      assertClose(await got[i], await want[i], { atol: 1e-5, rtol: 1e-5, what: `output ${i}` });
    }
  },
});

Deno.test({
  name: "third backend: an MLP trains to the same weights as on cpu",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const train = async (d: Device) => {
      manualSeed(7);
      const model = new nn.Sequential(new nn.Linear(3, 8), new nn.GELU(), new nn.Linear(8, 2));
      const init = model.parameters().map((p) => p.to("cpu"));
      model.to(d);
      const opt = new optim.Adam(model.parameters(), { lr: 0.01 });
      const x = tensor(floats([30], 40, -1, 1), { shape: [10, 3], device: d });
      const target = tensor(intValues([10], 41, 0, 2), { device: d, dtype: "int32" });
      for (let step = 0; step < 5; step++) {
        tidy(() => {
          opt.zeroGrad();
          new nn.CrossEntropyLoss().forward(model.forward(x), target).backward();
          opt.step();
        });
      }
      return { init, weights: await Promise.all(model.parameters().map((p) => p.data())) };
    };
    const cpu = BACKENDS.get("cpu")![0];
    const a = await train(cpu);
    const b = await train(THIRD);
    for (let i = 0; i < a.weights.length; i++) {
      // Same start (seeded initialisation), same end.
      assertClose(await b.init[i].data(), await a.init[i].data(), { what: `initial param ${i}` });
      assertClose(b.weights[i], a.weights[i], { atol: 1e-5, rtol: 1e-4, what: `param ${i}` });
    }
  },
});
