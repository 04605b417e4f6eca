/**
 * Tensor printing against PyTorch 1.13's `repr(t)` (torch/_tensor_str.py,
 * tests/fixtures/torch_tensor_str.json): `await t.format()` to the character
 * on every backend (the device suffix on devices other than the default),
 * `console.log` / `Deno.inspect` on host memory and its one-line form
 * elsewhere, print options and profiles, Python's float formatting (ties to
 * even), nn.Parameter, and the errors of setPrintOptions.
 * @module
 */

import assert from "node:assert/strict";
import {
  type Device,
  getPrintOptions,
  nn,
  type PrintOptions,
  setPrintOptions,
  type Tensor,
  tensor,
} from "../mod.ts";
import { formatExponent, formatFixed } from "../src/printing/tensor_str.ts";
import { BACKENDS, backendTest, decodeFixture, type FixtureValues, REF } from "./harness.ts";
import fixture from "./fixtures/torch_tensor_str.json" with { type: "json" };

interface Case {
  name: string;
  dtype: "float32" | "float64" | "int32";
  shape: number[];
  values: FixtureValues[];
  options: PrintOptions;
  requiresGrad: boolean;
  op: string | null;
  parameter: boolean;
  cpu: string;
  device: string | null;
}

const CASES = fixture.cases as unknown as Case[];

function build(c: Case, d: Device): Tensor {
  const leaf = tensor(decodeFixture(c.values), {
    shape: c.shape,
    dtype: c.dtype,
    device: d,
    requiresGrad: c.requiresGrad || c.op !== null,
  });
  if (c.parameter) return new nn.Parameter(leaf.detach(), c.requiresGrad);
  switch (c.op) {
    case null:
      return leaf;
    case "mul2":
      return leaf.mul(2);
    case "add1":
      return leaf.add(1);
    case "exp":
      return leaf.exp();
    case "neg":
      return leaf.neg();
    case "sum":
      return leaf.sum();
  }
  throw new Error(`unknown op ${c.op}`);
}

/** Runs `fn` under `c`'s print options, restoring the defaults after. */
async function withOptions<T>(options: PrintOptions, fn: () => Promise<T>): Promise<T> {
  setPrintOptions({ profile: "default" });
  setPrintOptions(options);
  try {
    return await fn();
  } finally {
    setPrintOptions({ profile: "default" });
  }
}

assert.ok(CASES.length >= 300, `only ${CASES.length} cases`);

for (const c of CASES) {
  backendTest(`format equals PyTorch's repr: ${c.name}`, async (d) => {
    if (!d.backendDevice.dtypes.includes(c.dtype)) return;
    // exp on a GPU may round its last bit otherwise than PyTorch's cpu, which the text would show.
    if (c.op === "exp" && d.backend !== "cpu") return;
    const onCpu = d.backend === "cpu" && String(d) === "cpu:0";
    const expected = onCpu ? c.cpu : c.device?.replace("webgpu:0", String(d));
    if (expected === undefined) return; // Parameters: PyTorch's repr is for the default device only
    const t = build(c, d);
    await withOptions(c.options, async () => {
      assert.equal(await t.format(), expected);
      const inspected = Deno.inspect(t);
      if (onCpu || t.numel() === 0) {
        assert.equal(inspected, expected, "Deno.inspect shows the values it has now");
      } else if (d.backend !== "cpu") {
        // Reads from a GPU are async: one line that says how to get the values.
        assert.match(
          inspected,
          /^(Parameter containing:\n)?tensor\(<\d+ values on .*await t\.format\(\) reads them>/,
        );
      }
    });
  });
}

Deno.test("Python's '{:.pf}' and '{:.pe}': ties to even, exponents of two digits or more", () => {
  const formats = fixture.formats as [FixtureValues, number, string, string][];
  assert.ok(formats.length > 500);
  for (const [x, p, f, e] of formats) {
    const v = decodeFixture(x)[0];
    assert.equal(formatFixed(v, p), f, `'{:.${p}f}'.format(${x})`);
    assert.equal(formatExponent(v, p), e, `'{:.${p}e}'.format(${x})`);
  }
  // JavaScript rounds these ties away from zero; Python to even.
  assert.equal((0.125).toFixed(2), "0.13");
  assert.equal(formatFixed(0.125, 2), "0.12");
  assert.equal(formatExponent(2.5, 0), "2e+00");
});

Deno.test("console.log of a cpu tensor prints its values; String(t) keeps its short form", () => {
  const t = tensor([[1.5, 2, 3e-5], [1, 2, 3]], { device: REF });
  assert.equal(
    Deno.inspect(t),
    "tensor([[1.5000e+00, 2.0000e+00, 3.0000e-05],\n        [1.0000e+00, 2.0000e+00, 3.0000e+00]])",
  );
  assert.equal(String(t), "Tensor(shape=[2, 3], dtype=float32, device=cpu:0)");
  assert.equal(`${t}`, "Tensor(shape=[2, 3], dtype=float32, device=cpu:0)");
  // Inside other values too (Deno.inspect calls it for nested tensors).
  assert.equal(
    Deno.inspect({ x: tensor([1, 2], { dtype: "int32" }) }),
    "{ x: tensor([1, 2], dtype=torch.int32) }",
  );
});

Deno.test("a released tensor inspects as one line that says so, and format() rejects", async () => {
  const t = tensor([1, 2, 3], { device: REF });
  t.storage.dispose();
  assert.match(
    Deno.inspect(t),
    /^tensor\(<3 values on cpu:0: released by dispose\(\), tidy\(\) or zeroGrad\(\)>/,
  );
  await assert.rejects(() => t.format(), /released/);
});

Deno.test("setPrintOptions / getPrintOptions follow torch.set_printoptions", async () => {
  try {
    assert.deepEqual(getPrintOptions(), {
      precision: 4,
      threshold: 1000,
      edgeitems: 3,
      linewidth: 80,
      sciMode: null,
    });
    setPrintOptions({ profile: "short", linewidth: 100, sciMode: true });
    assert.deepEqual(getPrintOptions(), {
      precision: 2,
      threshold: 1000,
      edgeitems: 2,
      linewidth: 100,
      sciMode: true,
    });
    assert.equal(await tensor([1.5]).format(), "tensor([1.50e+00])");
    // As in PyTorch, a call without sciMode resets it to automatic; the rest stays.
    setPrintOptions({ precision: 3 });
    assert.deepEqual(getPrintOptions(), {
      precision: 3,
      threshold: 1000,
      edgeitems: 2,
      linewidth: 100,
      sciMode: null,
    });
    setPrintOptions({ profile: "full" });
    assert.equal(getPrintOptions().threshold, Infinity);
    // The returned object is a copy.
    const o = getPrintOptions() as { precision: number };
    o.precision = 9;
    assert.equal(getPrintOptions().precision, 4);
  } finally {
    setPrintOptions({ profile: "default" });
  }
  assert.deepEqual(getPrintOptions(), {
    precision: 4,
    threshold: 1000,
    edgeitems: 3,
    linewidth: 80,
    sciMode: null,
  });
});

Deno.test("setPrintOptions refuses bad options, naming them, and changes nothing", () => {
  const before = getPrintOptions();
  assert.throws(
    () => setPrintOptions({ profile: "long" as "full" }),
    /profile must be "default", "short" or "full", got "long"/,
  );
  assert.throws(
    () => setPrintOptions({ precision: -1 }),
    /precision must be an integer >= 0, got -1/,
  );
  assert.throws(
    () => setPrintOptions({ precision: 1.5 }),
    /precision must be an integer >= 0, got 1.5/,
  );
  assert.throws(
    () => setPrintOptions({ linewidth: 0 }),
    /linewidth must be an integer >= 1, got 0/,
  );
  assert.throws(() => setPrintOptions({ edgeitems: NaN }), /edgeitems must be an integer >= 0/);
  assert.throws(
    () => setPrintOptions({ sciMode: "yes" as unknown as boolean }),
    /sciMode must be true, false or null/,
  );
  assert.deepEqual(getPrintOptions(), before);
});

Deno.test("nn.Parameter prints as PyTorch's: Parameter containing:", async () => {
  const p = new nn.Parameter(tensor([1, 2.5], { device: REF }));
  const expected = "Parameter containing:\ntensor([1.0000, 2.5000], requires_grad=True)";
  assert.equal(await p.format(), expected);
  assert.equal(Deno.inspect(p), expected);
  assert.equal(String(p), "Parameter(shape=[2], dtype=float32, device=cpu:0, requiresGrad)");
});

Deno.test("an UninitializedParameter inspects as PyTorch's <UninitializedParameter>", () => {
  assert.equal(Deno.inspect(new nn.UninitializedParameter()), "<UninitializedParameter>");
});

Deno.test("a Parameter on a GPU inspects as its header and the one-line form", () => {
  for (const [backend, [d]] of BACKENDS) {
    if (backend === "cpu") continue;
    const p = new nn.Parameter(tensor([1, 2], { device: d }));
    assert.equal(
      Deno.inspect(p),
      `Parameter containing:\ntensor(<2 values on ${d}: await t.format() reads them>, size=(2,), dtype=torch.float32, device='${d}')`,
    );
  }
});
