/**
 * A third backend, written from `src/backends/backend.ts` alone: every
 * required kernel in plain TypeScript over a different memory layout (a
 * buffer is a JavaScript array of numbers, rounded to its dtype on every
 * store), and none of the optional fused kernels, so the ops compose
 * softmax and GELU from primitives on it. Slow and small on purpose; the
 * contract suite and the ops conformance run against it.
 * @module
 */

import {
  type Backend,
  type DeviceImpl,
  type DType,
  type KernelTable,
  lowbias32,
  type MemoryInfo,
  toInt32,
  type TypedArray,
  type UnaryOp,
  wrapDevice,
} from "../src/backends/backend.ts";

/** A buffer: plain numbers, each already rounded to the buffer's dtype. */
type Cells = number[];

/** Rounds a number to what a dtype stores (int32 wraps, as a typed array does). */
function rounder(dtype: DType): (v: number) => number {
  if (dtype === "float32") return Math.fround;
  if (dtype === "int32") return (v) => v | 0;
  return (v) => v;
}

function hostArray(dtype: DType, values: ArrayLike<number>): TypedArray {
  if (dtype === "float32") return Float32Array.from(values);
  if (dtype === "int32") return Int32Array.from(values);
  return Float64Array.from(values);
}

/** Visits every index tuple of `shape` in row-major order with one running offset per stride list. */
function walk(
  shape: readonly number[],
  strides: readonly (readonly number[])[],
  visit: (offsets: number[], linear: number) => void,
): void {
  const total = shape.reduce((a, b) => a * b, 1);
  for (let linear = 0; linear < total; linear++) {
    let rest = linear;
    const offsets = strides.map(() => 0);
    for (let d = shape.length - 1; d >= 0; d--) {
      const c = rest % shape[d];
      rest = Math.floor(rest / shape[d]);
      for (let k = 0; k < strides.length; k++) offsets[k] += c * strides[k][d];
    }
    visit(offsets, linear);
  }
}

/** erf to about 1e-14 (series below 3, continued fraction above). */
function erf(x: number): number {
  const z = Math.abs(x);
  if (Number.isNaN(x)) return x;
  let r: number;
  if (z < 3) {
    let term = z;
    let sum = z;
    for (let n = 1; n < 100; n++) {
      term *= -z * z / n;
      sum += term / (2 * n + 1);
    }
    r = 2 / Math.sqrt(Math.PI) * sum;
  } else {
    let f = z;
    for (let n = 60; n >= 1; n--) f = z + (n / 2) / f;
    r = 1 - Math.exp(-z * z) / Math.sqrt(Math.PI) / f;
  }
  return x < 0 ? -r : r;
}

function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

const UNARY: Record<UnaryOp, (x: number) => number> = {
  neg: (x) => -x,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  abs: Math.abs,
  relu: (x) => (x > 0 || Number.isNaN(x) ? x : 0),
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  tanh: Math.tanh,
  erf,
  sign: (x) => (x > 0 ? 1 : x < 0 ? -1 : 0),
  sin: Math.sin,
  cos: Math.cos,
  floor: Math.floor,
  ceil: Math.ceil,
  round: roundHalfEven,
  log1p: Math.log1p,
  expm1: Math.expm1,
  rsqrt: (x) => 1 / Math.sqrt(x),
  reciprocal: (x) => 1 / x,
  square: (x) => x * x,
};

function binary(op: string, dtype: DType): (a: number, b: number) => number {
  const int = dtype === "int32";
  switch (op) {
    case "add":
      return (a, b) => a + b;
    case "sub":
      return (a, b) => a - b;
    case "mul":
      return int ? Math.imul : (a, b) => a * b;
    case "div":
      return int ? (a, b) => (b === 0 ? 0 : Math.trunc(a / b)) : (a, b) => a / b;
    case "pow":
      return (a, b) => (a === 1 ? 1 : Math.pow(a, b));
    case "maximum":
      return (a, b) => (Number.isNaN(a) || a > b ? a : b);
    case "minimum":
      return (a, b) => (Number.isNaN(a) || a < b ? a : b);
    case "eq":
      return (a, b) => (a === b ? 1 : 0);
    case "ne":
      return (a, b) => (a !== b ? 1 : 0);
    case "lt":
      return (a, b) => (a < b ? 1 : 0);
    case "le":
      return (a, b) => (a <= b ? 1 : 0);
    case "gt":
      return (a, b) => (a > b ? 1 : 0);
    default:
      return (a, b) => (a >= b ? 1 : 0);
  }
}

const KERNELS: KernelTable<Cells> = {
  fill({ out, numel, value, dtype }) {
    const v = rounder(dtype)(value);
    for (let i = 0; i < numel; i++) out[i] = v;
  },
  cast({ x, out, numel, to }) {
    const store = rounder(to);
    for (let i = 0; i < numel; i++) out[i] = store(to === "int32" ? toInt32(x[i]) : x[i]);
  },
  unary({ op, x, out, numel, dtype }) {
    const store = rounder(dtype);
    const f = op === "square" && dtype === "int32" ? (v: number) => Math.imul(v, v) : UNARY[op];
    for (let i = 0; i < numel; i++) out[i] = store(f(x[i]));
  },
  binary({ op, a, b, out, shape, aStrides, bStrides, dtype }) {
    const store = rounder(dtype);
    const f = binary(op, dtype);
    walk(shape, [aStrides, bStrides], ([ia, ib], i) => out[i] = store(f(a[ia], b[ib])));
  },
  reduce({ op, x, out, outer, size, inner, dtype }) {
    const store = rounder(op === "argmax" || op === "argmin" ? "int32" : dtype);
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < inner; i++) {
        const at = (r: number) => x[(o * size + r) * inner + i];
        let result: number;
        if (op === "sum") {
          result = 0;
          for (let r = 0; r < size; r++) result += at(r);
        } else {
          // NaN wins (its first index); otherwise the first extreme.
          let best = 0;
          const max = op === "max" || op === "argmax";
          for (let r = 1; r < size && !Number.isNaN(at(best)); r++) {
            if (Number.isNaN(at(r)) || (max ? at(r) > at(best) : at(r) < at(best))) best = r;
          }
          result = op === "argmax" || op === "argmin" ? best : at(best);
        }
        out[o * inner + i] = store(result);
      }
    }
  },
  matmul({ a, b, out, batch, m, n, k, aBatchStride, bBatchStride, transA, transB, dtype }) {
    const store = rounder(dtype);
    for (let t = 0; t < batch; t++) {
      const a0 = t * aBatchStride;
      const b0 = t * bBatchStride;
      for (let i = 0; i < m; i++) {
        for (let j = 0; j < n; j++) {
          let sum = 0;
          for (let p = 0; p < k; p++) {
            const av = a[a0 + (transA ? p * m + i : i * k + p)];
            const bv = b[b0 + (transB ? j * k + p : p * n + j)];
            sum += av * bv;
          }
          out[(t * m + i) * n + j] = store(sum);
        }
      }
    }
  },
  copy({ x, out, shape, xStrides, xOffset, outStrides, outOffset }) {
    walk(shape, [xStrides, outStrides], ([ix, io]) => out[outOffset + io] = x[xOffset + ix]);
  },
  indexSelect({ x, indices, out, outer, size, inner, count }) {
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < count; j++) {
        const r = indices[j];
        for (let i = 0; i < inner; i++) {
          out[(o * count + j) * inner + i] = r >= 0 && r < size ? x[(o * size + r) * inner + i] : 0;
        }
      }
    }
  },
  random({ out, numel, kind, seed, a, b, dtype }) {
    const store = rounder(dtype);
    const key = lowbias32(seed);
    const u = (j: number) => (lowbias32((j ^ key) >>> 0) >>> 8) * 2 ** -24;
    for (let i = 0; i < numel; i++) {
      out[i] = store(
        kind === "uniform"
          ? a + (b - a) * u(i)
          : a + b * Math.sqrt(-2 * Math.log(1 - u(2 * i))) * Math.cos(2 * Math.PI * u(2 * i + 1)),
      );
    }
  },
  where({ cond, a, b, out, shape, condStrides, aStrides, bStrides }) {
    walk(shape, [condStrides, aStrides, bStrides], ([ic, ia, ib], i) => {
      // Only ±0 is false (NaN is true, as bool(nan) in PyTorch).
      out[i] = cond[ic] !== 0 ? a[ia] : b[ib];
    });
  },
  gather({ x, index, out, outer, size, count, inner }) {
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < count; j++) {
        for (let i = 0; i < inner; i++) {
          const at = (o * count + j) * inner + i;
          const r = index[at];
          out[at] = r >= 0 && r < size ? x[(o * size + r) * inner + i] : 0;
        }
      }
    }
  },
  scatterAdd({ x, index, out, outer, size, count, inner, dtype }) {
    const store = rounder(dtype);
    for (let e = 0; e < outer * size * inner; e++) out[e] = 0;
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < count; j++) {
        for (let i = 0; i < inner; i++) {
          const at = (o * count + j) * inner + i;
          const r = index[at];
          if (r >= 0 && r < size) {
            const to = (o * size + r) * inner + i;
            out[to] = store(out[to] + x[at]);
          }
        }
      }
    }
  },
  im2col(w) {
    const { x, out, height, width, kernelH, kernelW, outH, outW, padValue } = w;
    const store = rounder(w.dtype);
    let at = 0;
    for (let plane = 0; plane < w.batch * w.channels; plane++) {
      for (let ki = 0; ki < kernelH; ki++) {
        for (let kj = 0; kj < kernelW; kj++) {
          for (let oh = 0; oh < outH; oh++) {
            for (let ow = 0; ow < outW; ow++) {
              const h = oh * w.strideH - w.padH + ki * w.dilationH;
              const c = ow * w.strideW - w.padW + kj * w.dilationW;
              const inside = h >= 0 && h < height && c >= 0 && c < width;
              out[at++] = inside ? x[(plane * height + h) * width + c] : store(padValue);
            }
          }
        }
      }
    }
  },
  col2im(w) {
    const { x, out, height, width, kernelH, kernelW, outH, outW } = w;
    const store = rounder(w.dtype);
    const planes = w.batch * w.channels;
    const sums = new Array<number>(planes * height * width).fill(0);
    let at = 0;
    for (let plane = 0; plane < planes; plane++) {
      for (let ki = 0; ki < kernelH; ki++) {
        for (let kj = 0; kj < kernelW; kj++) {
          for (let oh = 0; oh < outH; oh++) {
            for (let ow = 0; ow < outW; ow++, at++) {
              const h = oh * w.strideH - w.padH + ki * w.dilationH;
              const c = ow * w.strideW - w.padW + kj * w.dilationW;
              if (h >= 0 && h < height && c >= 0 && c < width) {
                sums[(plane * height + h) * width + c] += x[at];
              }
            }
          }
        }
      }
    }
    for (let e = 0; e < sums.length; e++) out[e] = store(sums[e]);
  },
};

/** One device of the third backend. */
class ThirdDevice implements DeviceImpl<Cells> {
  readonly info = "third backend: number arrays, TypeScript kernels, no fused kernels";
  readonly dtypes: readonly DType[] = ["float32", "int32", "float64"];
  readonly kernels = KERNELS;
  #bytes = 0;
  readonly #sizes = new WeakMap<Cells, number>();

  allocate(numel: number, dtype: DType): Cells {
    const buffer = new Array<number>(numel).fill(0);
    const bytes = numel * (dtype === "float64" ? 8 : 4);
    this.#sizes.set(buffer, bytes);
    this.#bytes += bytes;
    return buffer;
  }
  free(buffer: Cells): void {
    this.#bytes -= this.#sizes.get(buffer) ?? 0;
    buffer.length = 0;
  }
  write(buffer: Cells, offset: number, data: TypedArray): void {
    for (let i = 0; i < data.length; i++) buffer[offset + i] = data[i];
  }
  read(buffer: Cells, offset: number, numel: number, dtype: DType): Promise<TypedArray> {
    return Promise.resolve(hostArray(dtype, buffer.slice(offset, offset + numel)));
  }
  memory(): MemoryInfo {
    return { bytesInUse: this.#bytes, bytesReserved: this.#bytes };
  }
  destroy(): void {}
}

/** The third backend's factory. */
export function thirdBackend(): Backend {
  return { createDevice: (index: number) => wrapDevice(`third:${index}`, new ThirdDevice()) };
}
