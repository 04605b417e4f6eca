/**
 * Elementwise operations with PyTorch broadcasting and dtype promotion, and
 * their gradients.
 * @module
 */

import type { BinaryOp, UnaryOp } from "../backends/backend.ts";
import { isGradEnabled, record } from "../autograd.ts";
import { checkFill, type DType, getDefaultDtype, isFloat, promoteTypes } from "../dtype.ts";
import { broadcastShapes, broadcastStrides, numelOf, sameShape, type Shape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import {
  asTensor,
  commonDevice,
  empty,
  hasKernel,
  launch,
  numberDType,
  requireFloat,
  scalar,
  type TensorLike,
} from "./util.ts";
import { sumDims } from "./reduce.ts";

/** `x` converted to `dtype` (a new tensor; the same tensor when equal). */
export function cast(x: Tensor, dtype: DType): Tensor {
  if (x.dtype === dtype) return x;
  const out = empty(x.shape, dtype, x.device);
  const src = x.storage.buffer("to");
  const dst = out.storage.buffer();
  const from = x.dtype;
  launch(x.device, "cast", { x: src, out: dst, numel: x.numel(), dtype: from, to: dtype });
  if (!isFloat(dtype)) return out;
  return record("to", [x], out, ([g]) => [isFloat(from) ? cast(g!, from) : null]);
}

/** Forward of a unary kernel, no graph. */
export function unaryRaw(op: UnaryOp, x: Tensor): Tensor {
  const out = empty(x.shape, x.dtype, x.device);
  const src = x.storage.buffer(op);
  const dst = out.storage.buffer();
  launch(x.device, "unary", { op, x: src, out: dst, numel: x.numel(), dtype: x.dtype });
  return out;
}

const INT_OK: ReadonlySet<UnaryOp> = new Set([
  "neg",
  "abs",
  "relu",
  "sign",
  "floor",
  "ceil",
  "round",
  "square",
]);

function unary(op: UnaryOp, x: Tensor, backward: (g: Tensor, out: Tensor) => Tensor): Tensor {
  if (!INT_OK.has(op)) requireFloat(op, x);
  const out = unaryRaw(op, x);
  return record(op, [x], out, ([g]) => [backward(g!, out)]);
}

/** The where kernel after promotion, no graph; `shape` is the output's. */
export function whereRaw(cond: Tensor, a: Tensor, b: Tensor, shape: Shape): Tensor {
  const out = empty(shape, a.dtype, a.device);
  if (out.numel() === 0) return out;
  const layout = {
    shape: [...shape],
    condStrides: broadcastStrides(cond.shape, shape),
    aStrides: broadcastStrides(a.shape, shape),
    bStrides: broadcastStrides(b.shape, shape),
    condDtype: cond.dtype,
    dtype: a.dtype,
  };
  const cb = cond.storage.buffer("where");
  const ab = a.storage.buffer("where");
  const bb = b.storage.buffer("where");
  const ob = out.storage.buffer();
  launch(a.device, "where", { cond: cb, a: ab, b: bb, out: ob, ...layout });
  return out;
}

/** -x. */
export const neg = (x: Tensor): Tensor => unary("neg", x, (g) => neg(g));
/** e^x. */
export const exp = (x: Tensor): Tensor => unary("exp", x, (g, y) => mul(g, y));
/** Natural logarithm. */
export const log = (x: Tensor): Tensor => unary("log", x, (g) => div(g, x));
/** Square root. */
export const sqrt = (x: Tensor): Tensor => unary("sqrt", x, (g, y) => div(g, mul(y, 2)));
/** |x|. */
export const abs = (x: Tensor): Tensor => unary("abs", x, (g) => mul(g, unaryRaw("sign", x)));
/**
 * max(x, 0), NaN kept. The gradient is PyTorch's `threshold_backward(g, y,
 * 0)`: `g` where the output is not <= 0 (so at NaN too), else 0, chosen
 * rather than multiplied, so that a NaN or infinite `g` at a clamped place
 * gives 0 as in PyTorch.
 */
export const relu = (x: Tensor): Tensor =>
  unary(
    "relu",
    x,
    (g, y) => threshold(compare("le", y, 0), g),
  );
/** `g` with 0 where `mask` holds; its gradient (under createGraph) the same. */
const threshold = (mask: Tensor, g: Tensor): Tensor =>
  record("threshold", [g], whereRaw(mask, scalar(0, g.dtype, g.device), g, g.shape), ([gg]) => [
    threshold(mask, gg!),
  ]);
/** 1 / (1 + e^-x). */
export const sigmoid = (x: Tensor): Tensor =>
  unary("sigmoid", x, (g, y) => mul(g, mul(y, sub(1, y))));
/** Hyperbolic tangent. */
export const tanh = (x: Tensor): Tensor => unary("tanh", x, (g, y) => mul(g, sub(1, mul(y, y))));
/**
 * A fused kernel of one float operand where the backend has it, else
 * `compose` over primitive kernels (no graph either way).
 */
function fused(
  name: "gelu" | "geluDerivative",
  x: Tensor,
  compose: (x: Tensor, constant: (v: number) => Tensor) => Tensor,
): Tensor {
  if (!hasKernel(x.device, name)) return compose(x, (v) => scalar(v, x.dtype, x.device));
  const out = empty(x.shape, x.dtype, x.device);
  const args = { x: x.storage.buffer(name), out: out.storage.buffer() };
  launch(x.device, name, { ...args, numel: x.numel(), dtype: x.dtype });
  return out;
}

/** Applies the raw binary kernels `steps` in turn, freeing each intermediate. */
function chain(first: Tensor, steps: [BinaryOp, Tensor][]): Tensor {
  let acc = first;
  for (const [op, operand] of steps) {
    const next = binaryRaw(op, acc, operand);
    if (acc !== first) acc.dispose();
    acc = next;
  }
  return acc;
}

/** Φ(x) = (1 + erf(x / √2)) / 2 from primitive kernels. */
function normalCdf(x: Tensor, c: (v: number) => Tensor): Tensor {
  const scaled = binaryRaw("mul", x, c(Math.SQRT1_2));
  const erf = unaryRaw("erf", scaled);
  scaled.dispose();
  const out = chain(erf, [["add", c(1)], ["mul", c(0.5)]]);
  erf.dispose();
  return out;
}

/** x Φ(x), the exact GELU. */
const geluForward = (x: Tensor): Tensor =>
  fused("gelu", x, (v, c) => {
    const cdf = normalCdf(v, c);
    const out = binaryRaw("mul", v, cdf);
    cdf.dispose();
    return out;
  });

/** d gelu / dx = Φ(x) + x φ(x), with φ(x) = e^(-x²/2) / √(2π). */
const geluDerivative = (x: Tensor): Tensor =>
  fused("geluDerivative", x, (v, c) => {
    const square = binaryRaw("mul", v, v);
    const scaled = binaryRaw("mul", square, c(-0.5));
    const density = unaryRaw("exp", scaled);
    const term = chain(density, [["mul", c(1 / Math.sqrt(2 * Math.PI))], ["mul", v]]);
    const cdf = normalCdf(v, c);
    const out = binaryRaw("add", cdf, term);
    for (const t of [square, scaled, density, term, cdf]) t.dispose();
    return out;
  });

/** `g * gelu'(x)`: the fused `geluBackward` kernel where the backend has it. */
function geluBackward(x: Tensor, g: Tensor): Tensor {
  if (isGradEnabled()) { // createGraph: Φ(x) + x φ(x) from differentiable ops
    const cdf = mul(add(erf(mul(x, Math.SQRT1_2)), 1), 0.5);
    return mul(g, add(cdf, mul(x, mul(exp(mul(square(x), -0.5)), 1 / Math.sqrt(2 * Math.PI)))));
  }
  if (!hasKernel(x.device, "geluBackward")) return mul(g, geluDerivative(x));
  const out = empty(x.shape, x.dtype, x.device);
  const [xb, grad] = [x.storage.buffer("gelu backward"), g.storage.buffer("gelu backward")];
  launch(x.device, "geluBackward", {
    x: xb,
    grad,
    out: out.storage.buffer(),
    numel: x.numel(),
    dtype: x.dtype,
  });
  return out;
}

/** GELU with the exact erf (PyTorch's default). */
export function gelu(x: Tensor): Tensor {
  requireFloat("gelu", x);
  const out = geluForward(x);
  return record("gelu", [x], out, ([g]) => [geluBackward(x, g!)]);
}
/** erf, for gelu's differentiable backward. */
const erf = (x: Tensor): Tensor =>
  unary("erf", x, (g) => mul(g, mul(exp(neg(square(x))), 2 / Math.sqrt(Math.PI))));
/** A step function: its gradient is zero everywhere (PyTorch's convention). */
function step(op: UnaryOp, x: Tensor): Tensor {
  return unary(op, x, (g) => g.zerosLike());
}
/** -1, 0 or 1 (0 for NaN, as PyTorch); zero gradient. */
export const sign = (x: Tensor): Tensor => step("sign", x);
/** Sine. */
export const sin = (x: Tensor): Tensor => unary("sin", x, (g) => mul(g, cos(x)));
/** Cosine. */
export const cos = (x: Tensor): Tensor => unary("cos", x, (g) => mul(g, neg(sin(x))));
/** Largest integer <= x; zero gradient. */
export const floor = (x: Tensor): Tensor => step("floor", x);
/** Smallest integer >= x; zero gradient. */
export const ceil = (x: Tensor): Tensor => step("ceil", x);
/** Nearest integer, halves to even (`round(2.5) = 2`, as PyTorch); zero gradient. */
export const round = (x: Tensor): Tensor => step("round", x);
/** ln(1 + x), accurate for small x. */
export const log1p = (x: Tensor): Tensor => unary("log1p", x, (g) => div(g, add(x, 1)));
/** e^x - 1, accurate for small x. */
export const expm1 = (x: Tensor): Tensor => unary("expm1", x, (g, y) => mul(g, add(y, 1)));
/** 1 / sqrt(x). */
export const rsqrt = (x: Tensor): Tensor =>
  unary("rsqrt", x, (g, y) => mul(g, mul(mul(y, mul(y, y)), -0.5)));
/** 1 / x. */
export const reciprocal = (x: Tensor): Tensor =>
  unary("reciprocal", x, (g, y) => neg(mul(g, mul(y, y))));
/** x * x. */
export const square = (x: Tensor): Tensor => unary("square", x, (g) => mul(g, mul(x, 2)));

/** Forward of a binary kernel after promotion and broadcasting, no graph. */
export function binaryRaw(op: BinaryOp, a: Tensor, b: Tensor): Tensor {
  const device = commonDevice(op, a, b);
  const shape = broadcastShapes(a.shape, b.shape, op);
  const dtype = a.dtype;
  const out = empty(shape, dtype, device);
  if (numelOf(shape) === 0) return out;
  const layout = {
    shape,
    aStrides: broadcastStrides(a.shape, shape),
    bStrides: broadcastStrides(b.shape, shape),
    dtype,
  };
  const ab = a.storage.buffer(op);
  const bb = b.storage.buffer(op);
  const ob = out.storage.buffer();
  launch(device, "binary", { op, a: ab, b: bb, out: ob, ...layout });
  return out;
}

/** Promotes two operands to one dtype (a number takes the dtype and device of the tensor beside it). */
export function operands(op: string, a: TensorLike, b: TensorLike): [Tensor, Tensor] {
  if (typeof a === "number" && typeof b === "number") {
    throw new TypeError(
      `${op}: expected at least one Tensor operand, got the numbers ${a} and ${b}`,
    );
  }
  const ta = asTensor(a, b as Tensor, op);
  const tb = asTensor(b, ta, op);
  commonDevice(op, ta, tb);
  // Shapes are checked before a cast allocates, so a failing op leaves nothing behind.
  broadcastShapes(ta.shape, tb.shape, op);
  // As PyTorch: a 0-d tensor beside a dimensioned one of its kind (float, int) does not widen it.
  const [lone, wide] = ta.ndim === 0 ? [ta, tb] : [tb, ta];
  const keep = lone.ndim === 0 && wide.ndim > 0 && isFloat(lone.dtype) === isFloat(wide.dtype);
  const dtype = keep ? wide.dtype : promoteTypes(ta.dtype, tb.dtype);
  return [cast(ta, dtype), cast(tb, dtype)];
}

/** Sums a broadcast gradient back to `shape`. */
export function sumTo(g: Tensor, shape: Shape): Tensor {
  if (sameShape(g.shape, shape)) return g;
  const lead = g.ndim - shape.length;
  const dims: number[] = [];
  for (let i = 0; i < g.ndim; i++) {
    if (i < lead || (shape[i - lead] === 1 && g.shape[i] !== 1)) dims.push(i);
  }
  const summed = dims.length > 0 ? sumDims(g, dims, false) : g;
  return summed.reshape(shape);
}

function binary(
  op: BinaryOp,
  a: TensorLike,
  b: TensorLike,
  backward: (g: Tensor, a: Tensor, b: Tensor, out: Tensor) => [Tensor | null, Tensor | null],
): Tensor {
  const [ta, tb] = operands(op, a, b);
  const out = binaryRaw(op, ta, tb);
  return record(op, [ta, tb], out, ([g]) => {
    const [ga, gb] = backward(g!, ta, tb, out);
    return [
      ta.requiresGrad && ga ? sumTo(ga, ta.shape) : null,
      tb.requiresGrad && gb ? sumTo(gb, tb.shape) : null,
    ];
  });
}

/** a + b. */
export const add = (a: TensorLike, b: TensorLike): Tensor => binary("add", a, b, (g) => [g, g]);
/** a - b. */
export const sub = (a: TensorLike, b: TensorLike): Tensor =>
  binary("sub", a, b, (g, _a, tb) => [g, tb.requiresGrad ? neg(g) : null]);
/** a * b. */
export const mul = (a: TensorLike, b: TensorLike): Tensor =>
  binary("mul", a, b, (g, ta, tb) => [
    ta.requiresGrad ? mul(g, tb) : null,
    tb.requiresGrad ? mul(g, ta) : null,
  ]);

/** a / b (true division: int32 operands give the default dtype, as in PyTorch). */
export function div(a: TensorLike, b: TensorLike): Tensor {
  const [ta, tb] = operands("div", a, b);
  const fa = isFloat(ta.dtype) ? ta : cast(ta, isFloat(tb.dtype) ? tb.dtype : getDefaultDtype());
  const fb = isFloat(tb.dtype) ? tb : cast(tb, fa.dtype);
  return binary("div", fa, fb, (g, x, y) => [
    x.requiresGrad ? div(g, y) : null,
    y.requiresGrad ? neg(div(mul(g, x), mul(y, y))) : null,
  ]);
}

/** a ** b (float). */
export function pow(a: TensorLike, b: TensorLike): Tensor {
  const [ta, tb] = operands("pow", a, b);
  requireFloat("pow", ta);
  // PyTorch's masks: x^0 has gradient 0 at x = 0, and 0^y (y >= 0, not NaN) gradient 0 in y.
  return binary("pow", ta, tb, (g, x, y, out) => [
    x.requiresGrad ? mul(g, mul(y, pow(x, sub(y, 1))).where(y.ne(0), 0)) : null,
    y.requiresGrad ? mul(g, mul(out, log(x)).where(x.ne(0).add(y.lt(0)).add(y.ne(y)), 0)) : null,
  ]);
}

/** Elementwise maximum; ties split the gradient evenly, as PyTorch does. */
export const maximum = (a: TensorLike, b: TensorLike): Tensor =>
  binary("maximum", a, b, (g, x, y) => tieSplit(g, x, y, "gt"));
/** Elementwise minimum; ties split the gradient evenly. */
export const minimum = (a: TensorLike, b: TensorLike): Tensor =>
  binary("minimum", a, b, (g, x, y) => tieSplit(g, x, y, "lt"));

function tieSplit(g: Tensor, x: Tensor, y: Tensor, wins: "gt" | "lt"): [Tensor, Tensor] {
  const half = mul(compare("eq", x, y), 0.5);
  const ga = mul(g, add(compare(wins, x, y), half));
  const gb = mul(g, add(compare(wins, y, x), half));
  return [ga, gb];
}

/**
 * Clamps into [min, max] (either may be omitted; numbers or tensors that
 * broadcast). As in PyTorch, the gradient passes where `min <= x <= max`,
 * bounds included (unlike {@link maximum}'s tie split); a tensor bound gets
 * it where it is the result (`max` also wherever `max < min`).
 */
export function clamp(x: Tensor, min?: TensorLike, max?: TensorLike): Tensor {
  if (min instanceof Tensor || max instanceof Tensor) return clampTensor(x, min, max);
  for (const b of [min, max]) {
    if (typeof b === "number") checkFill(numberDType(b, x.dtype), b, "clamp");
  }
  let out = x;
  if (min !== undefined) out = binaryRaw("maximum", ...operands("clamp", out, min));
  if (max !== undefined) out = binaryRaw("minimum", ...operands("clamp", out, max));
  if (out === x) return x;
  return record("clamp", [x], out, ([g]) => {
    const lo = min === undefined ? null : compare("ge", x, min);
    const hi = max === undefined ? null : compare("le", x, max);
    const mask = lo && hi ? mul(lo, hi) : (lo ?? hi)!;
    return [mul(g!, mask)];
  });
}

/** {@link clamp} with a tensor bound: PyTorch's `clamp.Tensor` and its gradients. */
function clampTensor(x: Tensor, min?: TensorLike, max?: TensorLike): Tensor {
  const inputs = [x, min, max].filter((b): b is Tensor => b instanceof Tensor);
  let out = x;
  if (min !== undefined) out = binaryRaw("maximum", ...operands("clamp", out, min));
  if (max !== undefined) out = binaryRaw("minimum", ...operands("clamp", out, max));
  return record("clamp", inputs, out, ([g]) => {
    const pass = (mask: Tensor | null, t: TensorLike) =>
      t instanceof Tensor && t.requiresGrad && mask ? sumTo(g!.where(mask, 0), t.shape) : null;
    const lo = min === undefined ? null : compare("ge", x, min);
    const hi = max === undefined ? null : compare("le", x, max);
    const inRange = lo && hi ? mul(lo, hi) : (lo ?? hi)!;
    const minWins = min === undefined ? null : compare("lt", x, min);
    const maxWins = max === undefined ? null : compare("gt", x, max);
    // Where min > max the result is max: min gets nothing there (NaN bounds: neither).
    const both = min !== undefined && max !== undefined;
    const minBelowMax = both ? compare("lt", min, max) : null;
    const maxBelowMin = both ? compare("lt", max, min) : null;
    return [
      x.requiresGrad ? sumTo(g!.where(inRange, 0), x.shape) : null,
      ...(min instanceof Tensor ? [pass(both ? mul(minWins!, minBelowMax!) : minWins, min)] : []),
      ...(max instanceof Tensor
        ? [pass(both ? maximum(maxWins!, maxBelowMin!) : maxWins, max)]
        : []),
    ];
  });
}

/** Comparison giving 1 or 0 in the promoted dtype (no gradient). */
export function compare(
  op: "eq" | "ne" | "lt" | "le" | "gt" | "ge",
  a: TensorLike,
  b: TensorLike,
): Tensor {
  const [ta, tb] = operands(op, a, b);
  return binaryRaw(op, ta, tb);
}
