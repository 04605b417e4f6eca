/**
 * Numeric gradient checks of the core ops (see `gradcheck.ts`): every
 * differentiable op's backward against central finite differences, in
 * float64 on the cpu reference backend.
 * @module
 */

import assert from "node:assert/strict";
import {
  add,
  cat,
  chunk,
  div,
  expand,
  Function,
  type FunctionCtx,
  gather,
  linear,
  logSoftmax,
  maskedFill,
  matmul,
  maximum,
  minimum,
  nn,
  pow,
  softmax,
  split,
  stack,
  sub,
  type Tensor,
  tensor,
  where,
} from "../mod.ts";
import { fold2d } from "../src/ops/window.ts";
import { check, CPU0, CPU1, distinct, inp } from "./gradcheck.ts";

// ---- elementwise binary, with broadcasting and numbers ----

check("add", (a, b) => a.add(b), [inp([2, 3], 1), inp([2, 3], 2)]);
check("add broadcast [3,1,2] + [4,1]", (a, b) => add(a, b), [inp([3, 1, 2], 3), inp([4, 1], 4)]);
check("add number", (a) => a.add(1.5), [inp([2, 3], 5)]);
check("add number on the left", (a) => add(2, a), [inp([3], 6)]);
check("sub", (a, b) => a.sub(b), [inp([2, 3], 7), inp([2, 1], 8)]);
check("sub number on the left", (a) => sub(1, a), [inp([4], 9)]);
check("mul", (a, b) => a.mul(b), [inp([2, 3], 10), inp([1, 3], 11)]);
check("mul by itself", (a) => a.mul(a), [inp([5], 12)]);
check("mul number", (a) => a.mul(-3), [inp([2, 2], 13)]);
check("div", (a, b) => a.div(b), [inp([2, 3], 14), inp([3], 15, 0.5, 2)]);
check("div number by tensor", (a) => div(2, a), [inp([4], 16, 0.5, 2)]);
check("div broadcast both ways", (a, b) => a.div(b), [inp([3, 1], 17), inp([1, 4], 18, 1, 3)]);
check("pow number exponent", (a) => a.pow(3), [inp([2, 3], 19)]);
check("pow fractional exponent", (a) => a.pow(1.5), [inp([5], 20, 0.5, 2)]);
check("pow tensor exponent", (a, b) => a.pow(b), [inp([2, 3], 21, 0.5, 2), inp([3], 22, -1, 2)]);
check("pow number base", (a) => pow(2, a), [inp([4], 23)]);
check("maximum", (a, b) => a.maximum(b), [inp([2, 3], 24), inp([3], 25)]);
check("maximum number", (a) => maximum(a, 0.25), [{ shape: [4], values: [-1, 0.1, 0.4, 2] }]);
check("minimum", (a, b) => minimum(a, b), [inp([2, 3], 26), inp([2, 1], 27)]);
check("clamp min and max", (a) => a.clamp(-0.5, 0.5), [{
  shape: [6],
  values: [-1.3, -0.7, -0.2, 0.1, 0.45, 1.9],
}]);
check("clamp min only", (a) => a.clamp(0.3), [{ shape: [4], values: [-1, 0.1, 0.7, 2] }]);
check("clamp max only", (a) => a.clamp(undefined, 0.3), [{
  shape: [4],
  values: [-1, 0.1, 0.7, 2],
}]);

// At a kink the gradient is a convention: PyTorch's, checked exactly.
Deno.test("gradient conventions at kinks and ties follow PyTorch", async () => {
  const x = tensor([-1, -0.5, 0, 0.5, 1], { dtype: "float64", requiresGrad: true });
  x.clamp(-0.5, 0.5).sum().backward();
  assert.deepEqual(Array.from(await x.grad!.data()), [0, 1, 1, 1, 0], "clamp passes at its bounds");
  const y = tensor([-1, 0, 1], { dtype: "float64", requiresGrad: true });
  y.clamp(0).sum().add(y.clamp(undefined, 0).sum()).backward();
  assert.deepEqual(Array.from(await y.grad!.data()), [1, 2, 1], "clamp(min) and clamp(max) at 0");
  const a = tensor([1, 2, 3], { dtype: "float64", requiresGrad: true });
  const b = tensor([1, 5, 0], { dtype: "float64", requiresGrad: true });
  maximum(a, b).sum().add(minimum(a, b).mul(10).sum()).backward();
  assert.deepEqual(Array.from(await a.grad!.data()), [5.5, 10, 1], "maximum/minimum split ties");
  assert.deepEqual(Array.from(await b.grad!.data()), [5.5, 1, 10]);
  const r = tensor([-1, 0, 2], { dtype: "float64", requiresGrad: true });
  r.relu().add(r.abs()).sum().backward();
  assert.deepEqual(Array.from(await r.grad!.data()), [-1, 0, 2], "relu'(0) = 0, abs'(0) = 0");
  const m = tensor([[3, 1, 3]], { dtype: "float64", requiresGrad: true });
  m.max(1).sum().backward();
  assert.deepEqual(
    Array.from(await m.grad!.data()),
    [1, 0, 0],
    "max(dim) sends the gradient to the first maximum",
  );
});

// ---- unary ----

check("neg", (a) => a.neg(), [inp([2, 3], 30)]);
check("exp", (a) => a.exp(), [inp([2, 3], 31)]);
check("log", (a) => a.log(), [inp([2, 3], 32, 0.1, 3)]);
check("sqrt", (a) => a.sqrt(), [inp([2, 3], 33, 0.1, 3)]);
check("abs", (a) => a.abs(), [{ shape: [5], values: [-2, -0.5, 0.3, 1.1, -0.01] }]);
check("relu", (a) => a.relu(), [{ shape: [6], values: [-2, -0.5, 0.3, 1.1, -0.01, 0.02] }]);
check("sigmoid", (a) => a.sigmoid(), [inp([2, 3], 34, -5, 5)]);
check("tanh", (a) => a.tanh(), [inp([2, 3], 35, -3, 3)]);
check("gelu", (a) => a.gelu(), [inp([8], 36, -4, 4)]);
check("chained unary", (a) => a.tanh().exp().sigmoid(), [inp([5], 37)]);

// ---- matmul and linear ----

check("matmul 2-D", (a, b) => a.matmul(b), [inp([3, 4], 40), inp([4, 2], 41)]);
check("matmul 1-D @ 1-D", (a, b) => matmul(a, b), [inp([4], 42), inp([4], 43)]);
check("matmul 2-D @ 1-D", (a, b) => a.matmul(b), [inp([3, 4], 44), inp([4], 45)]);
check("matmul 1-D @ 2-D", (a, b) => a.matmul(b), [inp([4], 46), inp([4, 3], 47)]);
check("matmul batched", (a, b) => a.matmul(b), [inp([2, 3, 4], 48), inp([2, 4, 2], 49)]);
check("matmul batched @ 2-D", (a, b) => a.matmul(b), [inp([2, 3, 4], 50), inp([4, 2], 51)]);
check("matmul 2-D @ batched", (a, b) => a.matmul(b), [inp([3, 4], 52), inp([2, 4, 2], 53)]);
check("matmul broadcast batch [2,1,2,3] @ [3,3,2]", (a, b) => a.matmul(b), [
  inp([2, 1, 2, 3], 54),
  inp([3, 3, 2], 55),
]);
check("matmul 1-D @ batched", (a, b) => a.matmul(b), [inp([3], 56), inp([2, 3, 2], 57)]);
check("matmul batched @ 1-D", (a, b) => a.matmul(b), [inp([2, 2, 3], 58), inp([3], 59)]);
check("matmul same operand", (a) => a.matmul(a), [inp([3, 3], 60)]);
check("linear with bias", (x, w, b) => linear(x, w, b), [
  inp([4, 3], 61),
  inp([2, 3], 62),
  inp([2], 63),
]);
check("linear without bias, 3-D input", (x, w) => linear(x, w), [
  inp([2, 2, 3], 64),
  inp([4, 3], 65),
]);

// ---- reductions ----

check("sum all", (a) => a.sum(), [inp([2, 3], 70)]);
check("sum dim 0", (a) => a.sum(0), [inp([2, 3], 71)]);
check("sum dim 1 keepdim", (a) => a.sum(1, true), [inp([2, 3], 72)]);
check("sum dims [0, 2]", (a) => a.sum([0, 2]), [inp([2, 3, 2], 73)]);
check("sum dim -1", (a) => a.sum(-1), [inp([2, 3, 2], 74)]);
check("sum of a 0-d tensor", (a) => a.sum(), [{ shape: [], values: [1.5] }]);
check("mean all", (a) => a.mean(), [inp([2, 3], 75)]);
check("mean dim 1", (a) => a.mean(1), [inp([2, 3], 76)]);
check("mean dim 0 keepdim", (a) => a.mean(0, true), [inp([2, 3], 77)]);
check("max all", (a) => a.max(), [{ shape: [2, 3], values: distinct([2, 3], 78) }]);
check("max dim 1", (a) => a.max(1), [{ shape: [3, 4], values: distinct([3, 4], 79) }]);
check("max dim 0 keepdim", (a) => a.max(0, true), [{
  shape: [3, 4],
  values: distinct([3, 4], 80),
}]);
check("min all", (a) => a.min(), [{ shape: [2, 3], values: distinct([2, 3], 81) }]);
check("min dim -1", (a) => a.min(-1), [{ shape: [2, 3, 2], values: distinct([2, 3, 2], 82) }]);
check("min dim 1 keepdim", (a) => a.min(1, true), [{
  shape: [2, 3],
  values: distinct([2, 3], 83),
}]);

// ---- shape ----

check("reshape", (a) => a.reshape([3, 2]).mul(a.reshape([3, 2])), [inp([2, 3], 90)]);
check("reshape with -1", (a) => a.reshape([-1]).exp(), [inp([2, 3], 91)]);
check("view", (a) => a.view([6, 1]).tanh(), [inp([2, 3], 92)]);
check("transpose", (a) => a.transpose(0, 1).exp(), [inp([2, 3], 93)]);
check("transpose 3-D negative dims", (a) => a.transpose(-1, 0).mul(2), [inp([2, 3, 2], 94)]);
check("t", (a, b) => a.t().matmul(b), [inp([3, 2], 95), inp([3, 2], 96)]);
check("permute", (a) => a.permute([2, 0, 1]).sigmoid(), [inp([2, 3, 4], 97)]);
check("squeeze all", (a) => a.squeeze().exp(), [inp([1, 3, 1], 98)]);
check("squeeze dim", (a) => a.squeeze(0).exp(), [inp([1, 3, 1], 99)]);
check("unsqueeze", (a, b) => a.unsqueeze(1).add(b), [inp([3], 100), inp([2, 1, 3], 101)]);
check("unsqueeze negative", (a) => a.unsqueeze(-1).mul(a.unsqueeze(0)), [inp([3], 102)]);
check("expand", (a) => a.expand([2, 3, 4]).sigmoid(), [inp([3, 1], 103)]);
check("expand with -1", (a) => expand(a, [2, -1]).tanh(), [inp([1, 3], 104)]);
check("flatten", (a) => a.flatten(1).exp(), [inp([2, 2, 3], 105)]);
check("clone", (a) => a.clone().mul(a), [inp([4], 106)]);
check("chunk", (a) => {
  const [p, q, r] = a.chunk(3, 1);
  return cat([p.exp(), q.mul(2), r.sigmoid()], 1);
}, [inp([2, 7], 107)]);
check("chunk with an unused piece", (a) => {
  const pieces = chunk(a, 2, 0);
  return pieces[1].tanh();
}, [inp([4, 2], 108)]);
check("split by size", (a) => {
  const pieces = a.split(2, 1);
  assert.equal(pieces.length, 3);
  return pieces[0].mul(pieces[1]).add(pieces[2].sum());
}, [inp([2, 6], 109)]);
check("split by sizes", (a) => {
  const [p, q] = split(a, [1, 2], 0);
  return p.exp().sum().add(q.mul(q).sum());
}, [inp([3, 2], 110)]);
check("narrow", (a) => a.narrow(1, 1, 2).exp(), [inp([2, 4], 111)]);
check("narrow negative start", (a) => a.narrow(0, -2, 2).tanh(), [inp([4, 2], 112)]);
check("cat dim 0", (a, b) => cat([a, b], 0).exp(), [inp([2, 3], 113), inp([1, 3], 114)]);
check("cat dim 1 three inputs", (a, b, c) => cat([a, b, c], 1).sigmoid(), [
  inp([2, 1], 115),
  inp([2, 3], 116),
  inp([2, 2], 117),
]);
check("cat of the same tensor", (a) => cat([a, a.mul(2), a], -1), [inp([2, 2], 118)]);
check("stack dim 0", (a, b) => stack([a, b]).tanh(), [inp([2, 3], 119), inp([2, 3], 120)]);
check("stack dim -1", (a, b) => stack([a, b], -1).exp(), [inp([3], 121), inp([3], 122)]);

// ---- softmax, index select ----

check("softmax dim 1", (a) => a.softmax(1), [inp([2, 4], 130)]);
check("softmax dim 0", (a) => softmax(a, 0), [inp([3, 2], 131)]);
check("softmax 3-D middle dim", (a) => a.softmax(1), [inp([2, 3, 2], 132)]);
check("logSoftmax dim -1", (a) => a.logSoftmax(-1), [inp([2, 4], 133)]);
check("logSoftmax dim 0", (a) => logSoftmax(a, 0), [inp([3, 2], 134)]);
check("indexSelect dim 0 with repeats", (a) => {
  const index = tensor([2, 0, 2, 1], { dtype: "int32" });
  return a.indexSelect(0, index).exp();
}, [inp([3, 2], 135)]);
check("indexSelect dim 1", (a) => {
  const index = tensor([1, 1, 0], { dtype: "int32" });
  return a.indexSelect(1, index).mul(a.indexSelect(1, index));
}, [inp([2, 3, 2], 136)]);

// ---- dtype and device movement ----

// A float32 round trip cannot resolve a 1e-6 step, so this check uses values
// and a step exact in float32 on a linear function (the central difference
// is then exact); the gradient itself goes through float32, hence 1e-6.
check(
  "to(dtype) float64 -> float32 -> float64",
  (a) => a.to("float32").mul(3).to("float64").add(a),
  [
    { shape: [4], values: [0.5, -1.25, 2, 0.125] },
  ],
  { eps: 2 ** -10 },
);
check("to(dtype) same dtype", (a) => a.to("float64").exp(), [inp([3], 140)]);
check("to(device) cpu:0 -> cpu:1", (a) => a.to(CPU1).exp(), [inp([2, 3], 141)]);
check("to(device) cpu:0 -> cpu:1 -> cpu:0, mixed", (a, b) => {
  const remote = a.to(CPU1).mul(b).tanh();
  return remote.to(CPU0).add(a);
}, [inp([2, 3], 142), inp([2, 3], 143, -2, 2, CPU1)]);
check("to(device) string name", (a) => a.to("cpu:1").sigmoid().to("cpu:0"), [inp([3], 144)]);

// ---- user Function ----

class Cube extends Function {
  static override forward(ctx: FunctionCtx, x: Tensor): Tensor {
    ctx.saveForBackward(x);
    return x.mul(x).mul(x);
  }
  static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
    const [x] = ctx.savedTensors;
    return g.mul(x.mul(x).mul(3));
  }
}

class ScaledProduct extends Function {
  static override forward(ctx: FunctionCtx, a: Tensor, b: Tensor, scale: number): Tensor {
    ctx.saveForBackward(a, b);
    ctx.scale = scale;
    return a.mul(b).mul(scale);
  }
  static override backward(ctx: FunctionCtx, g: Tensor): (Tensor | null)[] {
    const [a, b] = ctx.savedTensors;
    const scale = ctx.scale as number;
    return [g.mul(b).mul(scale), g.mul(a).mul(scale), null];
  }
}

check("user Function", (a) => Cube.apply(a).add(a), [inp([2, 3], 150)]);
check(
  "user Function with two inputs and a number",
  (a, b) => ScaledProduct.apply(a, b, 1.5).exp(),
  [
    inp([2, 2], 151, -1, 1),
    inp([2, 2], 152, -1, 1),
  ],
);

// ---- a small composite ----

check("MLP loss", (x, w1, b1, w2) => {
  const h = linear(x, w1, b1).gelu();
  return h.matmul(w2).logSoftmax(1).mean();
}, [inp([3, 4], 160), inp([5, 4], 161), inp([5], 162), inp([5, 2], 163)]);

// ---- more elementwise math ----

check("sin", (a) => a.sin(), [inp([2, 3], 170, -4, 4)]);
check("cos", (a) => a.cos(), [inp([2, 3], 171, -4, 4)]);
check("log1p", (a) => a.log1p(), [inp([2, 3], 172, -0.9, 3)]);
check("expm1", (a) => a.expm1(), [inp([2, 3], 173)]);
check("rsqrt", (a) => a.rsqrt(), [inp([2, 3], 174, 0.2, 3)]);
check("reciprocal", (a) => a.reciprocal(), [{
  shape: [5],
  values: [-2, -0.5, 0.3, 1.1, 3],
}]);
check("square", (a) => a.square(), [inp([2, 3], 175)]);
// Step functions: zero gradient away from their jumps (PyTorch's convention).
check("floor ceil round sign", (a) => a.floor().add(a.ceil()).add(a.round()).add(a.sign()).add(a), [
  { shape: [5], values: [-1.7, -0.3, 0.2, 1.4, 2.6] },
]);

// ---- selection ----

check("where broadcast both sides", (a, b) => {
  const cond = tensor([1, 0, 0, 1, 1, 0], { shape: [2, 1, 3] });
  return where(cond, a, b);
}, [inp([4, 1], 180), inp([4, 3], 181)]);
check("where with a number", (a) => where(a.gt(0), a.exp(), 0.5), [inp([2, 3], 182)]);
check("maskedFill then softmax", (a) => {
  const mask = tensor([0, 1, 0, 0, 0, 1, 1, 0], { shape: [2, 4] });
  return a.maskedFill(mask, -Infinity).softmax(1);
}, [inp([2, 4], 183)]);
check("maskedFill with a 0-d tensor value", (a, v) => {
  const mask = tensor([0, 1, 1, 0, 0, 1], { shape: [2, 3] });
  return maskedFill(a, mask.gt(0), v.reshape([]));
}, [inp([2, 3], 184), inp([1], 185)]);
check("gather dim 1 with repeats and a smaller index", (a) => {
  const index = tensor([2, 0, 2, 1, 1, 1, 0, 2], { dtype: "int32", shape: [2, 4, 1] });
  return a.gather(1, index);
}, [inp([3, 3, 2], 186)]);
check("gather dim 0", (a) => {
  const index = tensor([1, 0, 1, 1, 1, 0], { dtype: "int32", shape: [3, 2] });
  return gather(a, 0, index).exp();
}, [inp([2, 2], 187)]);
check("select", (a) => a.select(1, -1).mul(a.select(0, 0).sum()), [inp([2, 3], 188)]);

// ---- convolution, pooling, padding ----

const Fn = nn.functional;
check(
  "conv2d stride 2, padding, groups 2, bias",
  (x, w, b) => Fn.conv2d(x, w, b, { stride: 2, padding: [1, 0], groups: 2 }),
  [
    inp([1, 4, 5, 4], 190),
    inp([2, 2, 3, 2], 191),
    inp([2], 192),
  ],
);
check(
  "conv2d dilation 2, 1x1 pointwise",
  (x, w, v) => Fn.conv2d(x, w, null, { dilation: 2, padding: 1 }).add(Fn.conv2d(x, v).sum()),
  [
    inp([2, 2, 4, 4], 193),
    inp([3, 2, 2, 2], 194),
    inp([1, 2, 1, 1], 195),
  ],
);
check("conv1d", (x, w, b) => Fn.conv1d(x, w, b, { stride: 2, padding: 1 }), [
  inp([2, 2, 7], 196),
  inp([3, 2, 3], 197),
  inp([3], 198),
]);
check(
  "maxPool2d padding, ceilMode, dilation",
  (x) =>
    Fn.maxPool2d(x, 2, { stride: 2, padding: 1, ceilMode: true }).add(
      Fn.maxPool2d(x, [2, 2], { stride: 1, dilation: 2 }).sum(),
    ),
  [{ shape: [1, 2, 5, 5], values: distinct([1, 2, 5, 5], 199) }],
);
check(
  "avgPool2d both divisor rules",
  (x) =>
    Fn.avgPool2d(x, 3, { stride: 2, padding: 1, ceilMode: true, countIncludePad: false }).add(
      Fn.avgPool2d(x, 3, { stride: 2, padding: 1, ceilMode: true }),
    ),
  [inp([1, 2, 6, 5], 200)],
);
check("adaptiveAvgPool2d", (x) => Fn.adaptiveAvgPool2d(x, [3, 2]), [inp([1, 2, 7, 5], 201)]);
check(
  "pad constant (crop), reflect, replicate",
  (x) =>
    Fn.pad(x, [1, -1, 2, 0], { value: 0.5 }).sum().add(
      Fn.pad(x, [2, 1, 1, 2], { mode: "reflect" }).mul(
        Fn.pad(x, [2, 1, 1, 2], { mode: "replicate" }),
      ),
    ),
  [inp([1, 2, 3, 4], 202)],
);
check(
  "fold2d: stride 2, padding, dilation, an image larger than the windows reach",
  (cols) =>
    fold2d(cols, [6, 7], {
      kernel: [2, 3],
      stride: [2, 1],
      padding: [1, 0],
      dilation: [1, 2],
      out: [3, 2],
    }),
  [inp([2, 2, 2, 3, 3, 2], 209)],
);
check(
  "convTranspose2d stride 2, padding, outputPadding, groups 2, dilation, bias",
  (x, w, b) =>
    Fn.convTranspose2d(x, w, {
      bias: b,
      stride: [2, 1],
      padding: [1, 0],
      outputPadding: [1, 0],
      groups: 2,
      dilation: [1, 2],
    }),
  [inp([2, 4, 3, 3], 210), inp([4, 3, 3, 2], 211), inp([6], 212)],
);
check(
  "convTranspose1d stride 3, outputPadding 2",
  (x, w) => Fn.convTranspose1d(x, w, { stride: 3, outputPadding: 2 }),
  [inp([1, 2, 4], 213), inp([2, 3, 2], 214)],
);
check(
  "interpolate bilinear (both alignCorners), scale 1.7 and downsampling",
  (x) =>
    Fn.interpolate(x, { scaleFactor: 1.7, mode: "bilinear" }).sum().add(
      Fn.interpolate(x, { size: [2, 7], mode: "bilinear", alignCorners: true }).square(),
    ),
  [inp([1, 2, 3, 4], 215)],
);
check(
  "interpolate linear and nearest",
  (x) =>
    Fn.interpolate(x, { size: 7, mode: "linear" }).sum().add(
      Fn.interpolate(x, { scaleFactor: 1.7 }).square(),
    ),
  [inp([2, 2, 5], 216)],
);
// The fused crossEntropyReduced kernels (sum, and mean over the rows not ignored).
for (const reduction of ["mean", "sum"] as const) {
  check(`crossEntropy ${reduction} with an ignored row (fused reduction)`, (x) => {
    const y = tensor([2, -100, 0, 1], { dtype: "int32", device: CPU0 });
    return Fn.crossEntropy(x, y, { reduction });
  }, [inp([4, 3], 206)]);
}
check("groupNorm with affine", (x, w, b) => Fn.groupNorm(x, 2, { weight: w, bias: b }), [
  inp([2, 4, 3, 2], 203),
  inp([4], 204),
  inp([4], 205),
]);
check(
  "batchNorm over [N, C, H, W] in training",
  (x, w, b) => Fn.batchNorm(x, null, null, { weight: w, bias: b, training: true }),
  [
    inp([3, 2, 2, 3], 206),
    inp([2], 207),
    inp([2], 208),
  ],
);
