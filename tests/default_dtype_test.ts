/**
 * `setDefaultDtype` / `getDefaultDtype` (PyTorch's `torch.set_default_dtype`)
 * and the overflow checks of `full`, `fill_`, `newFull` and `fullLike`.
 * The default dtype is global state: every test that changes it restores it
 * in `finally`.
 * @module
 */

import assert from "node:assert/strict";
import {
  arange,
  asTensor,
  bartlettWindow,
  type Device,
  distributions,
  type DType,
  empty,
  emptyLike,
  eye,
  finfo,
  full,
  fullLike,
  getDefaultDtype,
  hannWindow,
  linspace,
  logspace,
  manualSeed,
  nn,
  normal,
  ones,
  onesLike,
  optim,
  rand,
  randLike,
  randn,
  randnLike,
  resultType,
  scalarTensor,
  setDefaultDtype,
  type Tensor,
  tensor,
  uniform,
  where,
  zeros,
  zerosLike,
} from "../mod.ts";
import {
  assertClose,
  BACKENDS,
  backendTest,
  decodeFixture,
  type FixtureValues,
  REF,
} from "./harness.ts";

const FIXTURE = JSON.parse(
  Deno.readTextFileSync(new URL("./fixtures/torch_default_dtype.json", import.meta.url)),
);

/** Runs `fn` with `dtype` as the default, restoring the previous default however it ends. */
async function withDefault<T>(dtype: DType, fn: () => T | Promise<T>): Promise<T> {
  const previous = getDefaultDtype();
  setDefaultDtype(dtype);
  try {
    return await fn();
  } finally {
    setDefaultDtype(previous);
  }
}

function throwsWith(fn: () => unknown, ...parts: string[]): void {
  assert.throws(fn, (error: Error) => {
    for (const part of parts) {
      assert.ok(error.message.includes(part), `"${part}" in: ${error.message}`);
    }
    return true;
  });
}

// ---- full and fill_: a value the dtype cannot hold is PyTorch's overflow error ----

const F32_MAX = 3.4028234663852886e38;

backendTest("full/fill_/newFull/fullLike refuse a float32 value that overflows", (d) => {
  const f32 = { device: d, dtype: "float32" as const };
  const x = zeros([2], f32);
  // PyTorch: "value cannot be converted to type float without overflow".
  for (const v of [1e40, -1e40, 3.4028235e38, Number.MAX_VALUE]) {
    throwsWith(() => full([2], v, f32), "full", String(v), "float32", "overflow");
    throwsWith(() => full([2], v, { device: d }), "full", "float32", "overflow");
    throwsWith(() => zeros([2], f32).fill_(v), "fill_", String(v), "float32", "overflow");
    throwsWith(() => x.newFull([3], v), String(v), "float32", "overflow");
    throwsWith(() => fullLike(x, v), String(v), "float32", "overflow");
  }
});

backendTest("full/fill_ on float32 keep ±inf, NaN and the largest finite value", async (d) => {
  const f32 = { device: d, dtype: "float32" as const };
  assert.deepEqual(
    [...await full([4], Infinity, f32).data()],
    [Infinity, Infinity, Infinity, Infinity],
  );
  assert.deepEqual([...await full([1], -Infinity, f32).data()], [-Infinity]);
  assert.ok(Number.isNaN((await full([1], NaN, f32).data())[0]));
  assert.deepEqual([...await full([1], -F32_MAX, f32).data()], [-F32_MAX]);
  assert.deepEqual([...await zeros([2], f32).fill_(F32_MAX).data()], [F32_MAX, F32_MAX]);
  assert.ok(Number.isNaN((await zeros([1], f32).fill_(NaN).data())[0]));
  // tensor() rounds as a cast does: PyTorch's torch.tensor([1e40]) is inf too.
  assert.deepEqual([...await tensor([1e40, -1e40], { device: d }).data()], [Infinity, -Infinity]);
  assert.deepEqual([...await tensor(1e40, { device: d }).data()], [Infinity]);
});

backendTest("full/fill_/newFull/fullLike refuse an int32 value out of range", async (d) => {
  const i32 = { device: d, dtype: "int32" as const };
  const x = zeros([2], i32);
  for (const v of [2 ** 31, 2147483647.5, -2147483648.5, -(2 ** 31) - 1, NaN, Infinity]) {
    throwsWith(() => full([2], v, i32), "full", String(v), "int32");
    throwsWith(() => zeros([2], i32).fill_(v), "fill_", String(v), "int32");
    throwsWith(() => x.newFull([3], v), String(v), "int32");
    throwsWith(() => fullLike(x, v), String(v), "int32");
  }
  // The ends of the range are fine, and a fraction truncates toward zero as PyTorch's.
  assert.deepEqual([...await full([1], -(2 ** 31), i32).data()], [-(2 ** 31)]);
  assert.deepEqual([...await full([1], 2 ** 31 - 1, i32).data()], [2 ** 31 - 1]);
  assert.deepEqual([...await full([2], -1.7, i32).data()], [-1, -1]);
  assert.deepEqual([...await zeros([1], i32).fill_(2147483647).data()], [2147483647]);
});

backendTest("float64 full holds what float32 cannot", async (d) => {
  if (d.backend !== "cpu") return; // float64 is cpu only
  const v = await full([1], 1e40, { device: d, dtype: "float64" }).data();
  assert.deepEqual([...v], [1e40]);
  assert.deepEqual([...await zeros([1], { device: d, dtype: "float64" }).fill_(1e300).data()], [
    1e300,
  ]);
});

// ---- setDefaultDtype / getDefaultDtype ----

Deno.test("the default dtype is float32 at startup and only float dtypes can be set", async () => {
  assert.equal(getDefaultDtype(), "float32");
  // PyTorch: "only floating-point types are supported as the default type".
  throwsWith(() => setDefaultDtype("int32"), "setDefaultDtype", "floating", "got int32");
  throwsWith(() => setDefaultDtype("float16" as DType), "setDefaultDtype", "got float16");
  throwsWith(() => setDefaultDtype(42 as unknown as DType), "setDefaultDtype", "got number");
  assert.equal(getDefaultDtype(), "float32", "a refused dtype leaves the default as it was");
  await withDefault("float64", () => {
    assert.equal(getDefaultDtype(), "float64");
    assert.equal(zeros([1]).dtype, "float64");
    setDefaultDtype("float32"); // setting it back works at once
    assert.equal(getDefaultDtype(), "float32");
    assert.equal(zeros([1]).dtype, "float32");
  });
  // withDefault restores even after a throw.
  await assert.rejects(
    withDefault("float64", () => {
      throw new Error("boom");
    }),
    /boom/,
  );
  assert.equal(getDefaultDtype(), "float32");
  assert.equal(zeros([1]).dtype, "float32");
});

/** Every factory that makes a float tensor without a dtype, on `d`. */
const floatFactories: [string, (d: Device) => Tensor][] = [
  ["zeros", (d) => zeros([2], { device: d })],
  ["ones", (d) => ones([2], { device: d })],
  ["full (float value)", (d) => full([2], 1.5, { device: d })],
  ["full (integer value)", (d) => full([2], 3, { device: d })],
  ["rand", (d) => rand([2], { device: d })],
  ["randn", (d) => randn([2], { device: d })],
  ["uniform", (d) => uniform([2], -1, 1, { device: d })],
  ["normal", (d) => normal([2], 0, 1, { device: d })],
  ["empty", (d) => empty([2], { device: d })],
  ["eye", (d) => eye(2, { device: d })],
  ["linspace", (d) => linspace(0, 1, 3, { device: d })],
  ["logspace", (d) => logspace(0, 1, 3, { device: d })],
  ["arange (float step)", (d) => arange(0, 1, 0.25, { device: d })],
  ["arange (float start)", (d) => arange(0.5, 3, { device: d })],
  ["tensor (non-integers)", (d) => tensor([1.5, 2], { device: d })],
  ["tensor (integers)", (d) => tensor([1, 2], { device: d })],
  ["tensor (a number)", (d) => tensor(1.5, { device: d })],
  ["tensor (empty)", (d) => tensor([], { device: d })],
  ["asTensor (numbers)", (d) => asTensor([0.5], { device: d })],
  ["scalarTensor", (d) => scalarTensor(1, { device: d })],
  ["hannWindow", (d) => hannWindow(4, { device: d })],
  ["bartlettWindow", (d) => bartlettWindow(4, { device: d })],
  ["int32 / int32", (d) => tensor([1, 2], { dtype: "int32", device: d }).div(2)],
  ["int32 * 1.5", (d) => tensor([1, 2], { dtype: "int32", device: d }).mul(1.5)],
  ["where of two floats", (d) => where(tensor([1, 0], { dtype: "int32", device: d }), 0.5, 2)],
];

/** Factories whose dtype does not follow the default: [name, make, dtype under any default]. */
const fixedFactories: [string, (d: Device) => Tensor, DType][] = [
  ["arange (integers)", (d) => arange(3, { device: d }), "int32"],
  ["tensor (Float32Array)", (d) => tensor(new Float32Array([0.5]), { device: d }), "float32"],
  ["tensor (Int32Array)", (d) => tensor(new Int32Array([1]), { device: d }), "int32"],
  ["zeros (explicit float32)", (d) => zeros([2], { dtype: "float32", device: d }), "float32"],
  ["full (explicit int32)", (d) => full([2], 1, { dtype: "int32", device: d }), "int32"],
  ["zerosLike", (d) => zerosLike(zeros([2], { dtype: "float32", device: d })), "float32"],
  ["onesLike", (d) => onesLike(zeros([2], { dtype: "float32", device: d })), "float32"],
  ["fullLike", (d) => fullLike(zeros([2], { dtype: "float32", device: d }), 0.5), "float32"],
  ["randLike", (d) => randLike(zeros([2], { dtype: "float32", device: d })), "float32"],
  ["randnLike", (d) => randnLike(zeros([2], { dtype: "float32", device: d })), "float32"],
  ["emptyLike", (d) => emptyLike(zeros([2], { dtype: "float32", device: d })), "float32"],
  ["newZeros", (d) => zeros([2], { dtype: "float32", device: d }).newZeros([3]), "float32"],
  ["newFull", (d) => zeros([2], { dtype: "float32", device: d }).newFull([3], 0.5), "float32"],
  ["float32 * 1.5", (d) => zeros([2], { dtype: "float32", device: d }).mul(1.5), "float32"],
  [
    "int32 / float32",
    (d) => arange(3, { device: d }).div(zeros([1], { dtype: "float32", device: d })),
    "float32",
  ],
  ["int32 + 1", (d) => arange(3, { device: d }).add(1), "int32"],
];

Deno.test("every float factory makes the default dtype, float32 or float64 (cpu)", async () => {
  for (const dtype of ["float64", "float32"] as const) {
    await withDefault(dtype, () => {
      for (const [name, make] of floatFactories) assert.equal(make(REF).dtype, dtype, name);
      for (const [name, make, fixed] of fixedFactories) assert.equal(make(REF).dtype, fixed, name);
      assert.equal(finfo().dtype, dtype, "finfo()");
      assert.equal(resultType(arange(3), 1.5), dtype, "resultType(int32, 1.5)");
    });
  }
});

Deno.test("factories under a float64 default give PyTorch's float64 values", async () => {
  const calls: Record<string, () => Tensor> = {
    linspace: () => linspace(0, 1, 7),
    logspace: () => logspace(-2, 2, 5),
    arange: () => arange(0.1, 1, 0.3),
    tensor: () => tensor([0.1, 0.2, 1e-40]),
    full: () => full([2], 0.1),
    ones: () => ones([2]),
    eye: () => eye(2),
    hannWindow: () => hannWindow(5),
    scalarTensor: () => scalarTensor(0.1),
    div: () => tensor([1, 2, 7], { dtype: "int32" }).div(3),
    mul: () => tensor([1, 2, 7], { dtype: "int32" }).mul(0.1),
  };
  await withDefault("float64", async () => {
    for (const c of FIXTURE.factories as { name: string; values: FixtureValues; dtype: DType }[]) {
      const t = calls[c.name]();
      assert.equal(t.dtype, c.dtype, c.name);
      // float64 all the way: 0.1 and 1e-40 are not float32's numbers.
      assertClose([...await t.data()], decodeFixture(c.values), {
        atol: 0,
        rtol: 1e-15,
        what: c.name,
      });
    }
  });
});

// ---- nn layers: parameters and buffers in the default dtype ----

const layers: [string, (d: Device) => nn.Module][] = [
  ["Linear", (d) => new nn.Linear(3, 2, { device: d })],
  ["Bilinear", (d) => new nn.Bilinear(2, 3, 2, { device: d })],
  ["Conv1d", (d) => new nn.Conv1d(2, 3, 3, { device: d })],
  ["Conv2d", (d) => new nn.Conv2d(2, 3, 3, { device: d })],
  ["ConvTranspose2d", (d) => new nn.ConvTranspose2d(2, 3, 3, { device: d })],
  ["BatchNorm1d", (d) => new nn.BatchNorm1d(3, { device: d })],
  ["BatchNorm2d", (d) => new nn.BatchNorm2d(3, { device: d })],
  ["LayerNorm", (d) => new nn.LayerNorm([3], { device: d })],
  ["GroupNorm", (d) => new nn.GroupNorm(1, 3, { device: d })],
  [
    "InstanceNorm1d",
    (d) => new nn.InstanceNorm1d(3, { affine: true, trackRunningStats: true, device: d }),
  ],
  ["Embedding", (d) => new nn.Embedding(5, 3, { device: d })],
  ["EmbeddingBag", (d) => new nn.EmbeddingBag(5, 3, { device: d })],
  ["RNN", (d) => new nn.RNN(3, 2, { device: d })],
  ["LSTM", (d) => new nn.LSTM(3, 2, { numLayers: 2, bidirectional: true, device: d })],
  ["GRU", (d) => new nn.GRU(3, 2, { device: d })],
  ["RNNCell", (d) => new nn.RNNCell(3, 2, { device: d })],
  ["LSTMCell", (d) => new nn.LSTMCell(3, 2, { device: d })],
  ["GRUCell", (d) => new nn.GRUCell(3, 2, { device: d })],
  ["MultiheadAttention", (d) => new nn.MultiheadAttention(4, 2, { device: d })],
  ["PReLU", (d) => new nn.PReLU(3, { device: d })],
  [
    "TransformerEncoderLayer",
    (d) => new nn.TransformerEncoderLayer(4, 2, { dimFeedforward: 8, device: d }),
  ],
  ["LazyLinear", (d) => new nn.LazyLinear(2, { device: d })],
];

function assertModuleDtype(name: string, m: nn.Module, dtype: DType): void {
  const params = m.namedParameters();
  assert.ok(params.length > 0, `${name} has parameters`);
  for (const [key, p] of params) assert.equal(p.dtype, dtype, `${name}.${key}`);
  for (const [key, b] of m.namedBuffers()) {
    // As PyTorch, whose num_batches_tracked is an integer (int64) under any default.
    assert.equal(b.dtype, key.endsWith("num_batches_tracked") ? "int32" : dtype, `${name}.${key}`);
  }
}

Deno.test("nn layers make their parameters and buffers in the default dtype (cpu)", async () => {
  for (const dtype of ["float64", "float32"] as const) {
    await withDefault(dtype, () => {
      for (const [name, make] of layers) assertModuleDtype(name, make(REF), dtype);
      assert.equal(nn.Transformer.generateSquareSubsequentMask(3).dtype, dtype);
      // An explicit dtype still wins over the default.
      assertModuleDtype("Linear float32", new nn.Linear(2, 2, { dtype: "float32" }), "float32");
    });
  }
});

Deno.test("a lazy layer materializes in the default dtype it was made under", async () => {
  const lazy = await withDefault("float64", () => new nn.LazyLinear(2));
  lazy.forward(zeros([1, 3], { dtype: "float64" }));
  assertModuleDtype("LazyLinear", lazy, "float64");
});

Deno.test("a float64 forward and backward through layers made under a float64 default", async () => {
  await withDefault("float64", () => {
    manualSeed(0);
    const lstm = new nn.LSTM(3, 4, { batchFirst: true });
    const norm = new nn.LayerNorm([4]);
    const x = randn([2, 5, 3]);
    const [out] = lstm.forward(x);
    const loss = norm.forward(out).square().mean();
    loss.backward();
    assert.equal(loss.dtype, "float64");
    for (const p of [...lstm.parameters(), ...norm.parameters()]) {
      assert.equal(p.grad?.dtype, "float64");
    }
  });
});

Deno.test("distributions made from numbers take the default dtype", async () => {
  for (const dtype of ["float64", "float32"] as const) {
    await withDefault(dtype, () => {
      const normal = new distributions.Normal(0, 1);
      assert.equal(normal.loc.dtype, dtype);
      assert.equal(normal.sample([3]).dtype, dtype);
      assert.equal(new distributions.Uniform(0, 2).rsample([2]).dtype, dtype);
    });
  }
  // Numbers round as torch.tensor does: PyTorch's Normal(0., 1e40) has an infinite scale.
  assert.deepEqual([...await new distributions.Normal(0, 1e40).scale.data()], [Infinity]);
});

// ---- training in float64 by default, as PyTorch ----

Deno.test("a small MLP trains in float64 by default with PyTorch's float64 losses", async () => {
  const fx = FIXTURE.mlp;
  await withDefault("float64", async () => {
    const model = new nn.Sequential(new nn.Linear(4, 8), new nn.Tanh(), new nn.Linear(8, 3));
    const sd: Record<string, Tensor> = {};
    for (const [key, values] of Object.entries(fx.initial as Record<string, number[]>)) {
      sd[key] = tensor(values); // JS numbers: float64 under this default
    }
    model.loadStateDict(sd);
    for (const p of model.parameters()) assert.equal(p.dtype, "float64");
    const x = tensor(fx.x);
    const y = tensor(fx.y, { dtype: "int32" });
    const opt = new optim.SGD(model.parameters(), { lr: fx.lr, momentum: fx.momentum });
    const losses: number[] = [];
    for (let step = 0; step < fx.losses.length; step++) {
      opt.zeroGrad();
      const loss = nn.functional.crossEntropy(model.forward(x), y);
      assert.equal(loss.dtype, "float64");
      loss.backward();
      opt.step();
      losses.push(await loss.item());
    }
    // float32 would be ~1e-7 off: these agree to float64's rounding.
    assertClose(losses, fx.losses, { atol: 1e-12, rtol: 1e-12, what: "losses" });
    const final = model.stateDict();
    for (const [key, values] of Object.entries(fx.final as Record<string, FixtureValues>)) {
      assertClose([...await final[key].data()], decodeFixture(values), {
        atol: 1e-12,
        rtol: 1e-12,
        what: key,
      });
    }
  });
});

// ---- webgpu has no float64: the error names the default dtype ----

for (const [backend, devices] of BACKENDS) {
  if (backend === "cpu") continue;
  const d = devices[0];
  Deno.test(`a float64 default on ${backend} is an error that says how to set it back`, async () => {
    await withDefault("float64", async () => {
      const hint = ["float64 is the default dtype", 'setDefaultDtype("float32")'];
      throwsWith(() => zeros([2], { device: d }), "float64", "not supported", String(d), ...hint);
      throwsWith(() => randn([2], { device: d }), ...hint);
      throwsWith(() => tensor([1.5], { device: d }), ...hint);
      throwsWith(() => new nn.Linear(2, 2, { device: d }), ...hint);
      throwsWith(() => tensor([1, 2], { dtype: "int32", device: d }).div(2), ...hint);
      // An explicit float32 works under the float64 default, and float32 tensors stay float32.
      const x = zeros([2], { dtype: "float32", device: d });
      assert.equal(x.add(1.5).dtype, "float32");
      assert.equal(zerosLike(x).dtype, "float32");
      const lin = new nn.Linear(2, 2, { device: d, dtype: "float32" });
      assert.deepEqual(
        [...await lin.forward(zeros([1, 2], { dtype: "float32", device: d })).shape],
        [1, 2],
      );
    });
    // Set back, webgpu factories work again.
    assert.equal(zeros([2], { device: d }).dtype, "float32");
  });
}

// ---- full and fill_ against PyTorch at the edges of float32 and int32 ----

backendTest("full and fill_ accept and refuse the values PyTorch does", async (d) => {
  const cases = FIXTURE.fills as {
    dtype: DType;
    value: FixtureValues;
    ok: boolean;
    stored?: FixtureValues;
  }[];
  assert.ok(cases.length >= 80);
  for (const c of cases) {
    const value = decodeFixture(c.value)[0];
    const options = { dtype: c.dtype, device: d };
    const what = `${c.dtype} ${value}`;
    if (!c.ok) {
      throwsWith(() => full([1], value, options), "full", c.dtype);
      throwsWith(() => zeros([1], options).fill_(value), "fill_", c.dtype);
      continue;
    }
    const expected = decodeFixture(c.stored!)[0];
    const made = (await full([1], value, options).data())[0];
    assert.ok(
      Object.is(made, expected) || made === expected,
      `full ${what}: ${made} vs ${expected}`,
    );
    if (c.dtype === "int32" && !Number.isInteger(value)) continue; // fill_ refuses fractions on int32
    const filled = (await zeros([1], options).fill_(value).data())[0];
    assert.ok(Object.is(filled, expected), `fill_ ${what}: ${filled} vs ${expected}`);
  }
});
