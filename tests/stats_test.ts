/**
 * median, nanmedian, quantile, nanquantile, mode, varMean, stdMean, nansum,
 * nanmean, countNonzero, histc and bincount against PyTorch 1.13
 * (tests/fixtures/torch_stats.json: odd and even lengths, ties, NaN, ±inf,
 * every interpolation, dims and keepdim, values, indices and input
 * gradients) on every backend; float64 gradient checks on cpu; errors
 * naming the bad value or shape.
 * @module
 */

import assert from "node:assert/strict";
import {
  bincount,
  countNonzero,
  type Device,
  histc,
  median,
  mode,
  nanmean,
  nanmedian,
  nanquantile,
  nansum,
  quantile,
  stdMean,
  type Tensor,
  tensor,
  varMean,
} from "../mod.ts";
import type { QuantileOptions, VarMeanOptions } from "../src/ops_composite/stats.ts";
import {
  assertClose,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  REF,
} from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_stats.json" with { type: "json" };

interface Case {
  fn: string;
  dtype: string;
  input: FixtureValues;
  input_shape: number[];
  args: unknown[];
  outputs: FixtureValues[];
  shapes: number[][];
  out_dtypes: string[];
  ties?: boolean;
  g?: (FixtureValues | null)[];
  grad?: FixtureValues;
}

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-6, rtol: 1e-5 } : { atol: 1e-5, rtol: 1e-4 };
}

function qArg(q: unknown, device: Device): number | Tensor {
  if (typeof q === "number") return q;
  if (Array.isArray(q)) return tensor(q as number[], { device });
  return tensor((q as { tensor0d: number }).tensor0d, { device });
}

/** Runs a case's function, as multigrad spells it; the outputs in PyTorch's order. */
function apply(c: Case, x: Tensor, device: Device): Tensor[] {
  const a = c.args;
  const dim = a[0] as number | number[] | null;
  switch (c.fn) {
    case "median":
    case "nanmedian": {
      const f = c.fn === "median" ? median : nanmedian;
      if (a.length === 0) return [f(x)];
      return [...f(x, a[0] as number, a[1] as boolean)];
    }
    case "quantile":
    case "nanquantile": {
      const f = c.fn === "quantile" ? quantile : nanquantile;
      return [f(x, qArg(a[0], device), a[1] as QuantileOptions)];
    }
    case "mode":
      return [...mode(x, a[0] as number, a[1] as boolean)];
    case "varMean":
    case "stdMean": {
      const f = c.fn === "varMean" ? varMean : stdMean;
      return [...f(x, dim ?? undefined, a[1] as VarMeanOptions)];
    }
    case "nansum":
      return [nansum(x, dim ?? undefined, a[1] as boolean)];
    case "nanmean":
      return [nanmean(x, dim ?? undefined, a[1] as boolean)];
    case "countNonzero":
      return [countNonzero(x, dim ?? undefined)];
    case "histc":
      return [histc(x, a[0] as Record<string, number>)];
    case "bincount": {
      const o = a[0] as { weights?: number[]; minlength?: number };
      const weights = o.weights ? tensor(o.weights, { device }) : undefined;
      return [bincount(x, { weights, minlength: o.minlength })];
    }
  }
  throw new Error(`unknown function ${c.fn}`);
}

const DTYPES: Record<string, string> = { int64: "int32", int32: "int32", float32: "float32" };

async function runCase(c: Case, device: Device, name: string): Promise<void> {
  const float = c.dtype === "float32";
  const x = tensor(decodeFixture(c.input), {
    shape: c.input_shape,
    device,
    dtype: float ? "float32" : "int32",
    requiresGrad: float && c.grad !== undefined,
  });
  const outs = apply(c, x, device);
  assert.equal(outs.length, c.outputs.length, `${name}: number of outputs`);
  const host = await x.data();
  for (const [i, out] of outs.entries()) {
    const what = `${name} output ${i}`;
    assert.deepEqual([...out.shape], c.shapes[i], `${what}: shape`);
    assert.equal(out.dtype, DTYPES[c.out_dtypes[i]], `${what}: dtype`);
    const expected = decodeFixture(c.outputs[i]);
    const actual = Array.from(await out.data());
    if (c.ties && out.dtype === "int32" && outs.length === 2 && c.fn !== "mode") {
      // PyTorch's choice among equal values is unspecified: the index must hold the value.
      const values = Array.from(await outs[0].data());
      const kept = c.args[1] as boolean;
      const d = ((c.args[0] as number) + c.input_shape.length) % c.input_shape.length;
      const outer = c.input_shape.slice(0, d).reduce((p, q) => p * q, 1);
      const n = c.input_shape[d];
      const inner = c.input_shape.slice(d + 1).reduce((p, q) => p * q, 1);
      void kept;
      for (let o = 0; o < outer; o++) {
        for (let k = 0; k < inner; k++) {
          const j = o * inner + k;
          const at = host[(o * n + actual[j]) * inner + k];
          assert.ok(
            Object.is(at, values[j]) || at === values[j],
            `${what}: index ${actual[j]} holds ${at}, not the value ${values[j]}`,
          );
        }
      }
      continue;
    }
    assertClose(actual, expected, { ...tol(device), what });
  }
  if (c.grad !== undefined && c.g) {
    const loss = outs
      .map((o, i) => c.g![i] === null ? null : o.mul(fixtureTensor(c.g![i]!, device)).sum())
      .filter((t): t is Tensor => t !== null)
      .reduce((p, q) => p.add(q));
    loss.backward();
    assertClose(await x.grad!.data(), decodeFixture(c.grad), {
      ...tol(device),
      what: `${name} grad`,
    });
  }
}

for (
  const section of ["median", "quantile", "mode", "moments", "nan_reduce", "histc", "bincount"]
) {
  const cases = (fixtures as unknown as Record<string, Case[]>)[section];
  backendTest(`stats: ${section} equals PyTorch (${cases.length} cases)`, async (device) => {
    for (const [i, c] of cases.entries()) {
      await runCase(c, device, `${section}[${i}] ${c.fn} ${JSON.stringify(c.args)}`);
    }
  });
}

Deno.test("stats: median and quantile of 2^17 elements (a sort past 4,096: tables made on the device)", async () => {
  // Speed is bench's business (no timed tests); this checks the long path's values.
  const x = tensor(Array.from({ length: 2 ** 17 }, (_, i) => (i * 7919) % 131_071), {
    device: REF,
  });
  assert.deepEqual([await median(x).item(), await quantile(x, 0.25).item()], [65_534, 32_766.75]);
});

backendTest("stats: varMean and stdMean of a 0-d tensor along dim 0 (one element)", async (d) => {
  // PyTorch counts the 0-d tensor's one element: variance 0 with correction 0, gradient 0.
  for (const f of [varMean, stdMean]) {
    const x = tensor(0.75, { device: d, requiresGrad: true });
    const [v, m] = f(x, 0, { correction: 0 });
    assert.deepEqual([[...v.shape], await v.item(), await m.item()], [[], 0, 0.75]);
    v.backward();
    assert.equal(await x.grad!.item(), 0);
    const [v1] = f(tensor(0.75, { device: d }), [-1], { correction: 1, keepdim: true });
    assert.ok(Number.isNaN(await v1.item()), "0/0 with correction 1");
  }
});

backendTest("stats: median with dim on a 0-d tensor and quantile of a 0-d tensor", async (d) => {
  const [v, i] = median(tensor(4, { device: d }), 0);
  assert.equal(await v.item(), 4);
  assert.equal(await i.item(), 0);
  assert.equal(await quantile(tensor(2, { device: d }), 0.5).item(), 2);
});

backendTest(
  "stats: nanquantile of an all-NaN slice is NaN; quantile of a NaN slice too",
  async (d) => {
    const x = tensor([[NaN, NaN], [1, NaN]], { device: d });
    assertClose(await nanquantile(x, 0.5, { dim: 1 }).data(), [NaN, 1]);
    assertClose(await quantile(x, 0.5, { dim: 1 }).data(), [NaN, NaN]);
  },
);

backendTest("stats: bincount of device-computed input takes minlength as its length", async (d) => {
  const x = tensor([1, 2, 2], { dtype: "int32", device: d }).add(1);
  assert.throws(() => bincount(x), /bincount: the input was computed on the device/);
  assert.deepEqual(Array.from(await bincount(x, { minlength: 5 }).data()), [0, 0, 1, 2, 0]);
  await assert.rejects(
    bincount(x, { minlength: 3 }).data(),
    /bincount: the input holds 3, not below minlength 3/,
  );
});

backendTest("stats: mode along a long dim counts runs (1,000 values)", async (d) => {
  const values = Array.from({ length: 1000 }, (_, i) => (i * 7919) % 13);
  const [v, i] = mode(tensor(values, { device: d }), 0);
  // 1000 = 13·76 + 12: values 0..11 occur 77 times, 12 occurs 76 times.
  assert.equal(await v.item(), 0);
  assert.equal(await i.item(), values.lastIndexOf(0));
});

// ------------------------------------------------------------------ errors

backendTest("stats: bad arguments are errors naming the value", async (d) => {
  const x = tensor([[1, 2], [3, 4]], { device: d });
  assert.throws(() => quantile(x, 1.5), /quantile: q must be in \[0, 1\], got 1.5/);
  assert.throws(() => quantile(x, -0.1), /got -0.1/);
  assert.throws(() => quantile(x, NaN), /got NaN/);
  assert.throws(
    () => quantile(x, 0.5, { interpolation: "cubic" as "linear" }),
    /interpolation must be one of linear, lower, higher, midpoint, nearest, got "cubic"/,
  );
  assert.throws(
    () => quantile(tensor([], { device: d }), 0.5),
    /quantile: the input must be non-empty, got shape \[0\]/,
  );
  assert.throws(
    () => quantile(x, tensor([[0.5]], { device: d })),
    /q must be a number or a 0-d or 1-d tensor, got shape \[1, 1\]/,
  );
  assert.throws(() => quantile(x, 0.5, { dim: 2 }), /quantile/);
  assert.throws(
    () => quantile(tensor([1, 2], { dtype: "int32", device: d }), 0.5),
    /quantile.*int32/,
  );
  await assert.rejects(
    quantile(x, tensor([0.5, 2], { device: d })).data(),
    /quantile: q values must be in \[0, 1\]; 1 of them are not/,
  );
  assert.throws(
    () => median(tensor([[]], { device: d }), 1),
    /median: cannot reduce dim 1 of size 0 \(shape \[1, 0\]\)/,
  );
  assert.throws(() => mode(tensor([[]], { device: d }), 1), /mode: cannot reduce dim 1 of size 0/);
  assert.throws(() => median(x, 2), /median/);
  assert.throws(
    () => varMean(x, 0, { correction: 1, unbiased: true }),
    /varMean: give correction or unbiased, not both/,
  );
  assert.throws(() => nanmean(tensor([1], { dtype: "int32", device: d })), /nanmean.*int32/);
  assert.throws(() => histc(x, { bins: 0 }), /histc: bins must be a positive integer, got 0/);
  assert.throws(
    () => histc(x, { min: 3, max: 1 }),
    /histc: max must be larger than min, got min 3 and max 1/,
  );
  assert.throws(
    () => histc(x, { min: -Infinity, max: 1 }),
    /histc: range of \[-Infinity, 1\] is not finite/,
  );
  await assert.rejects(
    histc(tensor([1, NaN], { device: d }), { bins: 3 }).data(),
    /histc: range of \[NaN, NaN\] is not finite/,
  );
  assert.throws(
    () => bincount(x),
    /bincount: the input must be a 1-D int32 tensor, got float32 of shape \[2, 2\]/,
  );
  await assert.rejects(
    bincount(tensor([1, -2], { dtype: "int32", device: d })).data(),
    /bincount: the input holds a negative value, -2/,
  );
  // Rows picked from host data keep their source's range as a bound: a length taken from a bound
  // the values do not reach would differ from PyTorch's, so the read rejects it.
  const picked = tensor([0, 5], { dtype: "int32", device: d }).indexSelect(
    0,
    tensor([0], { dtype: "int32", device: d }),
  );
  await assert.rejects(
    bincount(picked).data(),
    /bincount: the input's maximum is 0, below the bound 5 its length was taken from/,
  );
  assert.deepEqual(Array.from(await bincount(picked, { minlength: 6 }).data()), [1, 0, 0, 0, 0, 0]);
  assert.throws(
    () =>
      bincount(tensor([1], { dtype: "int32", device: d }), {
        weights: tensor([1, 2], { device: d }),
      }),
    /bincount: weights of shape \[2\] must be 1-D and as long as the input \(shape \[1\]\)/,
  );
  assert.throws(
    () => bincount(tensor([1], { dtype: "int32", device: d }), { minlength: -1 }),
    /minlength must be a non-negative integer, got -1/,
  );
});

// ------------------------------------------------------- float64 gradchecks

const f64 = { tol: 1e-6 };
// Distinct values (gaps of 0.1 or more), so that a small step never reorders them.
const distinctInput = (shape: number[], seed: number) => {
  const n = shape.reduce((a, b) => a * b, 1);
  const base = inp([n], seed, 0, 0.05).values.map((v, i) => v + ((i * 7) % n) * 0.1);
  return { shape, values: base };
};
check("median", (x) => median(x), [distinctInput([7], 1)], f64);
check("median dim", (x) => median(x, 1)[0], [distinctInput([3, 6], 2)], f64);
check("nanmedian dim", (x) => nanmedian(x, 0, true)[0], [distinctInput([5, 2], 3)], f64);
for (const interpolation of ["linear", "lower", "higher", "midpoint", "nearest"] as const) {
  check(
    `quantile ${interpolation}`,
    (x) =>
      quantile(x, tensor([0.1, 0.55, 1], { dtype: "float64", device: x.device }), {
        dim: 1,
        interpolation,
      }),
    [distinctInput([2, 7], 4)],
    f64,
  );
}
check("nanquantile", (x) => nanquantile(x, 0.35, { dim: 0, keepdim: true }), [
  distinctInput([6, 2], 5),
], f64);
check("mode", (x) => mode(x.round(), 1)[0].add(x.sum(1)), [distinctInput([2, 5], 6)], f64);
check(
  "varMean",
  (x) => {
    const [v, m] = varMean(x, 1, { correction: 2 });
    return v.add(m.mul(3));
  },
  [inp([3, 5], 7)],
  f64,
);
check(
  "stdMean",
  (x) => {
    const [s, m] = stdMean(x, [0, 2], { keepdim: true });
    return s.add(m.mul(2));
  },
  [inp([2, 3, 4], 8)],
  f64,
);
check("nansum", (x) => nansum(x.mul(x), 0), [inp([4, 3], 9)], f64);
check("nanmean", (x) => nanmean(x, [1]), [inp([3, 4], 10)], f64);
