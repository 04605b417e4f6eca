/**
 * The composite tensor ops (src/ops_composite/) against PyTorch 1.13's
 * numbers (tests/fixtures/torch_ops_extra.json) on every backend: values,
 * result dtypes, sort and topk indices, and the gradients of
 * `(output * g).sum()`. float64 cases run on the cpu only (WGSL has no f64).
 * @module
 */

import assert from "node:assert/strict";
import {
  type Device,
  type DType,
  eye,
  linspace,
  type Tensor,
  tensor,
  type TensorLike,
  type ValuesIndices,
} from "../mod.ts";
import fixtures from "./fixtures/torch_ops_extra.json" with { type: "json" };
import { assertClose, backendTest, decodeFixture, type FixtureValues } from "./harness.ts";

interface Case {
  name: string;
  op: string;
  dtype: string;
  out_dtype?: string;
  args: Record<string, unknown>;
  inputs?: Record<string, FixtureValues>;
  input_shapes?: Record<string, number[]>;
  output: FixtureValues;
  shape: number[];
  indices?: FixtureValues;
  g?: FixtureValues | null;
  grads?: Record<string, FixtureValues | null> | null;
}

const CASES = fixtures.cases as unknown as Case[];

/** A number argument: JSON spells NaN and infinities as strings. */
const num = (v: unknown): number => (typeof v === "string" ? Number(v) : v as number);
/** An optional argument: null in JSON. */
const opt = <T>(v: unknown): T | undefined => (v === null ? undefined : v as T);

type Inputs = Record<string, Tensor>;
type Run = (x: Tensor, a: Record<string, unknown>, t: Inputs) => Tensor | ValuesIndices;

const dims = (a: Record<string, unknown>, key = "dims") => opt<number | number[]>(a[key]);

/** Each op called as a PyTorch user would, from the case's args. */
const RUN: Record<string, Run> = {
  flip: (x, a) => x.flip(a.dims as number[]),
  roll: (x, a) => x.roll(a.shifts as number[], dims(a)),
  repeat: (x, a) => x.repeat(a.sizes as number[]),
  tile: (x, a) => x.tile(a.dims as number[]),
  expandAs: (x, _a, t) => x.expandAs(t.other),
  viewAs: (x, _a, t) => x.viewAs(t.other),
  reshapeAs: (x, _a, t) => x.reshapeAs(t.other),
  typeAs: (x, _a, t) => x.typeAs(t.other),
  outer: (x, _a, t) => x.outer(t.other),
  cumsum: (x, a) => x.cumsum(a.dim as number),
  cumprod: (x, a) => x.cumprod(a.dim as number),
  prod: (x, a) => x.prod(opt(a.dim), a.keepdim as boolean),
  amax: (x, a) => x.amax(dims(a), a.keepdim as boolean),
  amin: (x, a) => x.amin(dims(a), a.keepdim as boolean),
  norm: (x, a) => x.norm(a.p === "fro" ? "fro" : num(a.p), dims(a, "dim"), a.keepdim as boolean),
  all: (x, a) => x.all(opt(a.dim), a.keepdim as boolean),
  any: (x, a) => x.any(opt(a.dim), a.keepdim as boolean),
  isnan: (x) => x.isnan(),
  isinf: (x) => x.isinf(),
  isfinite: (x) => x.isfinite(),
  nanToNum: (x, a) => x.nanToNum(a),
  trunc: (x) => x.trunc(),
  frac: (x) => x.frac(),
  erf: (x) => x.erf(),
  lerp: (x, a, t) => x.lerp(t.end, (t.weight ?? a.weight) as TensorLike),
  sort: (x, a) => x.sort(a.dim as number, a.descending as boolean),
  argsort: (x, a) => x.argsort(a.dim as number, a.descending as boolean),
  topk: (x, a) => x.topk(a.k as number, a.dim as number, a.largest as boolean),
};

const TOL: Record<string, { atol: number; rtol: number }> = {
  float32: { atol: 1e-5, rtol: 1e-5 },
  float64: { atol: 1e-12, rtol: 1e-12 },
  int32: { atol: 0, rtol: 0 },
};

/** Whether `d` can hold every tensor of `c` (webgpu has no float64). */
const fits = (d: Device, c: Case) => d.backend === "cpu" || c.dtype !== "float64";

for (const c of CASES.filter((c) => c.op !== "eye" && c.op !== "linspace")) {
  backendTest(`torch ops extra: ${c.name}`, async (d) => {
    if (!fits(d, c)) return;
    const inputs: Inputs = {};
    for (const [name, values] of Object.entries(c.inputs!)) {
      // Another input's dtype comes from its values: int32 for a type_as target of zeros.
      const dtype = name === "other" && c.op === "typeAs"
        ? (c.out_dtype as DType)
        : c.dtype as DType;
      inputs[name] = tensor(decodeFixture(values), {
        shape: c.input_shapes![name],
        device: d,
        dtype,
        requiresGrad: c.grads !== null && dtype !== "int32",
      });
    }
    const result = RUN[c.op](inputs.x, c.args, inputs);
    const out = Array.isArray(result) ? (result as ValuesIndices).values : result as Tensor;
    const what = `${c.name} on ${d}`;
    assert.deepEqual([...out.shape], c.shape, `${what}: shape`);
    assert.equal(out.dtype, c.out_dtype, `${what}: dtype`);
    assertClose(await out.data(), decodeFixture(c.output), {
      ...TOL[out.dtype],
      what: `${what}: output`,
    });
    if (c.indices !== undefined) {
      const indices = (result as ValuesIndices).indices;
      assert.equal(indices.dtype, "int32", `${what}: indices dtype`);
      assert.deepEqual([...await indices.data()], decodeFixture(c.indices), `${what}: indices`);
    }
    if (!c.grads) {
      assert.equal(out.requiresGrad, false, `${what}: no gradient, as PyTorch`);
      return;
    }
    const g = tensor(decodeFixture(c.g!), { shape: c.shape, device: d, dtype: out.dtype });
    out.mul(g).sum().backward();
    for (const [name, expected] of Object.entries(c.grads)) {
      const grad = inputs[name].grad;
      if (expected === null) {
        assert.equal(grad, null, `${what}: ${name} gets no gradient, as PyTorch`);
        continue;
      }
      assert.ok(grad, `${what}: ${name} has a gradient`);
      assertClose(await grad.data(), decodeFixture(expected), {
        ...TOL[c.dtype],
        what: `${what}: grad of ${name}`,
      });
    }
  });
}

backendTest("torch ops extra: eye and linspace, bit for bit", async (d) => {
  for (const c of CASES.filter((c) => c.op === "eye" || c.op === "linspace")) {
    if (!fits(d, c)) continue;
    const dtype = c.dtype as DType;
    const a = c.args;
    const t = c.op === "eye"
      ? eye(a.n as number, opt(a.m), { dtype, device: d })
      : linspace(num(a.start), num(a.end), a.steps as number, { dtype, device: d });
    assert.equal(t.dtype, dtype, `${c.name}: dtype`);
    assert.deepEqual([...t.shape], c.shape, `${c.name}: shape`);
    const got = [...await t.data()];
    const want = decodeFixture(c.output);
    // Object.is: the same bits (NaN included, -0 told from 0).
    const bad = got.findIndex((v, i) => !Object.is(v, want[i]));
    assert.equal(bad, -1, `${c.name}: element ${bad} is ${got[bad]}, PyTorch's ${want[bad]}`);
  }
});
