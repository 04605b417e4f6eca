/**
 * Review of `setDefaultDtype`: operations on explicit float32 and int32
 * tensors keep working, and keep their dtypes, under a float64 default, as
 * PyTorch's do: internal helpers (random integers, CTC's masks, random
 * pruning) must not make their scratch tensors in the default dtype, which
 * on webgpu (no float64) was an error. Every test restores the default in
 * `finally`.
 * @module
 */

import assert from "node:assert/strict";
import {
  clamp,
  copysign,
  corrcoef,
  cov,
  cumulativeTrapezoid,
  type Device,
  type DType,
  erf,
  floorDivide,
  fmod,
  getDefaultDtype,
  gradient,
  i0,
  ldexp,
  lgamma,
  logit,
  manualSeed,
  nn,
  rand,
  randint,
  randintLike,
  random_,
  setDefaultDtype,
  special,
  type Tensor,
  tensor,
  trapezoid,
  where,
  xlogy,
  zeros,
} from "../mod.ts";
import { backendTest } from "./harness.ts";

async function withDefault<T>(dtype: DType, fn: () => T | Promise<T>): Promise<T> {
  const previous = getDefaultDtype();
  setDefaultDtype(dtype);
  try {
    return await fn();
  } finally {
    setDefaultDtype(previous);
  }
}

const ints = (d: Device, values: number[], shape = [values.length]): Tensor =>
  tensor(Int32Array.from(values), { device: d, shape });

/** [name, call on `d` with explicit float32/int32 inputs, the dtype PyTorch gives under any default]. */
const calls: [string, (d: Device) => Tensor, DType][] = [
  ["randint", (d) => randint(0, 10, [6], { device: d }), "int32"],
  ["randint (wide range)", (d) => randint(-(2 ** 29), 2 ** 30, [6], { device: d }), "int32"],
  [
    "randintLike (float32)",
    (d) => randintLike(zeros([6], { dtype: "float32", device: d }), 9),
    "float32",
  ],
  [
    "random_ (int32, whole range)",
    (d) => random_(zeros([6], { dtype: "int32", device: d })),
    "int32",
  ],
  [
    "random_ (int32, [0, 2^30))",
    (d) => random_(zeros([6], { dtype: "int32", device: d }), 0, 2 ** 30),
    "int32",
  ],
  ["ctcLoss (float32)", (d) => ctc(d, [5, 2]), "float32"],
  ["ctcLoss (float32, an empty input)", (d) => ctc(d, [5, 0]), "float32"],
  ["prune.randomStructured (float32)", (d) => {
    const linear = new nn.Linear(3, 4, { device: d, dtype: "float32" });
    nn.utils.prune.randomStructured(linear, "weight", { amount: 0.5, dim: 0 });
    return linear.weight;
  }, "float32"],
];

function ctc(d: Device, inputLengths: number[]): Tensor {
  const logProbs = nn.functional.logSoftmax(rand([5, 2, 4], { dtype: "float32", device: d }), 2);
  return nn.functional.ctcLoss(
    logProbs,
    ints(d, [1, 2, 3, 1], [2, 2]),
    ints(d, inputLengths),
    ints(d, [2, 2]),
    {
      reduction: "none",
    },
  );
}

for (const [name, call, dtype] of calls) {
  backendTest(`${name} keeps ${dtype} under a float64 default`, async (d) => {
    const results: number[][] = [];
    for (const fallback of ["float32", "float64"] as const) {
      await withDefault(fallback, async () => {
        manualSeed(7);
        const out = call(d);
        assert.equal(out.dtype, dtype, `${name} under a ${fallback} default`);
        results.push([...await out.data()]);
      });
    }
    // The scratch dtype does not follow the default: one seed, the same numbers under either.
    assert.deepEqual(results[1], results[0], `${name}: float64 default vs float32 default`);
    assert.equal(getDefaultDtype(), "float32");
  });
}

/**
 * int32 operands whose PyTorch result is floating: the default dtype (checked with PyTorch
 * 1.13 under `torch.set_default_dtype(torch.float64)`: float64 for every one), computed in it.
 */
const promoted: [string, (x: Tensor) => Tensor][] = [
  ["cov", (x) => cov(x.reshape([1, -1]))],
  ["corrcoef", (x) => corrcoef(x.reshape([2, -1]))],
  ["erf", (x) => erf(x.div(4))],
  ["i0", (x) => i0(x)],
  ["lgamma", (x) => lgamma(x)],
  ["logit", (x) => logit(x)],
  ["xlogy", (x) => xlogy(x, x)],
  ["special.entr", (x) => special.entr(x)],
  ["special.i1", (x) => special.i1(x)],
  ["special.logNdtr", (x) => special.logNdtr(x)],
  ["trapezoid", (x) => trapezoid(x)],
  ["cumulativeTrapezoid", (x) => cumulativeTrapezoid(x)],
  ["gradient", (x) => gradient(x)[0]],
  ["clamp (float bounds)", (x) => clamp(x, 0.5, 6.5)],
  ["fmod (float)", (x) => fmod(x, 1.3)],
  ["floorDivide (float)", (x) => floorDivide(x, 1.3)],
  ["copysign", (x) => copysign(x, -1)],
  ["ldexp", (x) => ldexp(x, x)],
  ["where (int32, float)", (x) => where(x.gt(2), x, 0.1)],
  ["pow (0.5)", (x) => x.pow(0.5)],
];

Deno.test("int32 operands with a floating result compute in a float64 default (cpu)", async () => {
  const x = tensor(Int32Array.from([1, 2, 3, 7, 16777217, 5]));
  for (const [name, op] of promoted) {
    await withDefault("float64", async () => {
      const out = op(x);
      assert.equal(out.dtype, "float64", name);
      // The same op on float64 operands: int32 went straight to float64, not through float32.
      const expected = op(x.to("float64"));
      assert.deepEqual([...await out.data()], [...await expected.data()], name);
    });
  }
});
