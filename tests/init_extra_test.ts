/**
 * nn.init's orthogonal_, truncNormal_, dirac_, eye_ and sparse_ against PyTorch 1.13
 * (tests/fixtures/torch_module_hooks.json `init`): dirac_ and eye_ value for value on every
 * backend; orthogonality to 1e-5 and the Haar distribution's entry moments for orthogonal_; the
 * truncated normal's exact mean and standard deviation (also far in a tail) and PyTorch's own
 * draw's statistics for truncNormal_; the zeros per column and the spread for sparse_; errors
 * naming the bad shape or value. The random numbers come from multigrad's generator and differ
 * from PyTorch's.
 */

import assert from "node:assert/strict";
import { manualSeed, nn, type Tensor, zeros } from "../mod.ts";
import { assertClose, assertTensor, backendTest } from "./harness.ts";
import fixtures from "./fixtures/torch_module_hooks.json" with { type: "json" };

const { init } = nn;
const F = nn.functional;
const cases = fixtures.init;

async function host(t: Tensor): Promise<number[]> {
  return Array.from(await t.data());
}

function moments(values: number[]) {
  const n = values.length;
  const mean = values.reduce((a, v) => a + v, 0) / n;
  const variance = values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1);
  return { mean, std: Math.sqrt(variance) };
}

backendTest("dirac_ equals PyTorch's, groups included", async (device) => {
  for (const c of cases.dirac) {
    const w = zeros(c.shape, { device });
    assert.equal(init.dirac_(w, { groups: c.groups }), w);
    await assertTensor(w, c.values, { atol: 0, rtol: 0, what: `dirac_ ${c.shape}/${c.groups}` });
  }
  const ints = zeros([2, 2, 3], { dtype: "int32", device });
  init.dirac_(ints);
  assert.deepEqual(await host(ints), [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
});

backendTest("a convolution with a dirac_ weight passes its input through", async (device) => {
  const w = init.dirac_(zeros([3, 3, 3, 3], { device }));
  const x = nn.init.normal_(zeros([2, 3, 5, 4], { device }));
  const y = F.conv2d(x, w, null, { padding: 1 });
  assertClose(await host(y), await host(x), { atol: 1e-6, rtol: 0 });
});

backendTest("eye_ equals PyTorch's, non-square too", async (device) => {
  for (const c of cases.eye) {
    const w = zeros(c.shape, { device });
    init.normal_(w);
    init.eye_(w);
    await assertTensor(w, c.values, { atol: 0, rtol: 0, what: `eye_ ${c.shape}` });
  }
  const p = new nn.Parameter(zeros([2, 2], { device }));
  init.eye_(p);
  assert.ok(p.isLeaf && p.requiresGrad, "init keeps a parameter a leaf");
});

backendTest(
  "orthogonal_: rows or columns orthonormal to 1e-5, times gain, as PyTorch's Gram",
  async (device) => {
    manualSeed(5);
    for (const c of cases.orthogonal) {
      const w = zeros(c.shape, { device });
      init.orthogonal_(w, { gain: c.gain });
      const rows = c.shape[0];
      const cols = c.shape.reduce((a, b) => a * b, 1) / rows;
      const v = await host(w);
      // Gram of the smaller side: gain²·I.
      const k = Math.min(rows, cols);
      const gram: number[] = [];
      for (let i = 0; i < k; i++) {
        for (let j = 0; j < k; j++) {
          let dot = 0;
          if (rows <= cols) {
            for (let t = 0; t < cols; t++) {
              dot += v[i * cols + t] * v[j * cols + t];
            }
          } else for (let t = 0; t < rows; t++) dot += v[t * cols + i] * v[t * cols + j];
          gram.push(dot);
        }
      }
      assertClose(gram, c.torch_gram, { atol: 1e-5, rtol: 1e-5, what: `gram of ${c.shape}` });
    }
  },
);

Deno.test("orthogonal_ is Haar: entries have mean 0 and variance 1/n, both signs on the diagonal", async () => {
  manualSeed(11);
  const n = 6;
  const draws = 600;
  const first: number[] = [];
  const diagonal: number[] = [];
  for (let d = 0; d < draws; d++) {
    const v = await host(init.orthogonal_(zeros([n, n])));
    first.push(v[0]);
    for (let i = 0; i < n; i++) diagonal.push(v[i * n + i]);
  }
  const m = moments(first);
  // Entries of a Haar orthogonal matrix: mean 0, variance 1/n (standard error of the mean √(1/(n·draws))).
  assert.ok(Math.abs(m.mean) < 5 * Math.sqrt(1 / n / draws), `mean ${m.mean}`);
  assert.ok(Math.abs(m.std ** 2 - 1 / n) < 0.03, `variance ${m.std ** 2}`);
  const positive = diagonal.filter((x) => x > 0).length / diagonal.length;
  assert.ok(Math.abs(positive - 0.5) < 0.05, `fraction of positive diagonal entries ${positive}`);
});

Deno.test("orthogonal_ repeats under manualSeed; a zero-element tensor is left alone", async () => {
  manualSeed(3);
  const a = await host(init.orthogonal_(zeros([4, 3])));
  manualSeed(3);
  const b = await host(init.orthogonal_(zeros([4, 3])));
  assert.deepEqual(a, b);
  const c = await host(init.orthogonal_(zeros([4, 3])));
  assert.notDeepEqual(a, c);
  const empty = zeros([0, 3]);
  assert.equal(init.orthogonal_(empty), empty);
});

backendTest(
  "truncNormal_: the truncated normal's exact moments and PyTorch's draw",
  async (device) => {
    manualSeed(21);
    for (const c of cases.trunc_normal) {
      const w = zeros([200000], { device });
      init.truncNormal_(w, { mean: c.mean, std: c.std, a: c.a, b: c.b });
      const v = await host(w);
      const m = moments(v);
      const what = `truncNormal_(${c.mean}, ${c.std}, ${c.a}, ${c.b})`;
      const se = c.expected_std / Math.sqrt(v.length);
      assert.ok(Math.abs(m.mean - c.expected_mean) < 5 * se, `${what}: mean ${m.mean}`);
      assert.ok(Math.abs(m.std - c.expected_std) < 0.01 * c.expected_std, `${what}: std ${m.std}`);
      // PyTorch's own draw has the same statistics.
      assert.ok(Math.abs(m.mean - c.torch_mean) < 10 * se, `${what}: mean vs PyTorch's`);
      assert.ok(Math.abs(m.std - c.torch_std) < 0.02 * c.expected_std, `${what}: std vs PyTorch's`);
      const min = v.reduce((a, x) => Math.min(a, x), Infinity);
      const max = v.reduce((a, x) => Math.max(a, x), -Infinity);
      assert.ok(min >= c.a && max <= c.b, `${what}: range [${min}, ${max}]`);
      // As PyTorch's, the draw reaches close to both ends (PyTorch's: within 0.01).
      assert.ok(min - c.a < 0.05 && c.b - max < 0.05, `${what}: range [${min}, ${max}]`);
      assert.ok(c.torch_min - c.a < 0.01 && c.b - c.torch_max < 0.01);
    }
  },
);

Deno.test("truncNormal_ far in a tail (where PyTorch warns) still has the exact moments", async () => {
  manualSeed(22);
  for (const c of cases.trunc_normal_tail) {
    const v = await host(init.truncNormal_(zeros([100000], { dtype: "float64" }), c));
    const m = moments(v);
    const what = `truncNormal_(${c.mean}, ${c.std}, ${c.a}, ${c.b})`;
    const se = c.expected_std / Math.sqrt(v.length);
    assert.ok(Math.abs(m.mean - c.expected_mean) < 6 * se, `${what}: mean ${m.mean}`);
    assert.ok(Math.abs(m.std - c.expected_std) < 0.02 * c.expected_std, `${what}: std ${m.std}`);
    assert.ok(v.every((x) => x >= c.a && x <= c.b), `${what}: out of range`);
  }
  // std 0: the mean, clamped.
  assert.deepEqual(await host(init.truncNormal_(zeros([3]), { mean: 5, std: 0 })), [2, 2, 2]);
});

backendTest(
  "sparse_: ⌈sparsity·rows⌉ zeros in every column, N(0, std²) elsewhere",
  async (device) => {
    manualSeed(31);
    for (const c of cases.sparse) {
      const w = zeros([c.rows, c.cols], { device });
      init.sparse_(w, c.sparsity, { std: c.std });
      const v = await host(w);
      for (let col = 0; col < c.cols; col++) {
        let zerosInColumn = 0;
        for (let r = 0; r < c.rows; r++) if (v[r * c.cols + col] === 0) zerosInColumn++;
        assert.equal(zerosInColumn, c.zeros_per_column, `column ${col}`);
      }
      const nonzero = v.filter((x) => x !== 0);
      const m = moments(nonzero);
      // A few hundred values: their spread within 15% of std, as PyTorch's draw's.
      assert.ok(Math.abs(m.std - c.std) < 0.15 * c.std, `std ${m.std}, expected ${c.std}`);
      assert.ok(Math.abs(c.torch_nonzero_std - c.std) < 0.15 * c.std);
    }
    const dense = await host(init.sparse_(zeros([4, 5]), 0, { std: 1 }));
    assert.ok(dense.every((x) => x !== 0));
    const empty = await host(init.sparse_(zeros([4, 5]), 1));
    assert.ok(empty.every((x) => x === 0));
  },
);

Deno.test("init extras: errors name the bad shape or value", () => {
  assert.throws(
    () => init.orthogonal_(zeros([5])),
    /orthogonal_: only tensors with 2 or more dimensions are supported, got shape \[5\]/,
  );
  assert.throws(
    () => init.orthogonal_(zeros([2, 2], { dtype: "int32" })),
    /orthogonal_: needs a floating-point tensor, got int32/,
  );
  assert.throws(() => init.orthogonal_(zeros([2, 2]), { gain: NaN }), /gain must be a finite/);
  assert.throws(
    () => init.dirac_(zeros([3, 3])),
    /dirac_: only tensors with 3, 4, or 5 dimensions are supported, got shape \[3, 3\]/,
  );
  assert.throws(
    () => init.dirac_(zeros([4, 2, 3]), { groups: 3 }),
    /dim 0 must be divisible by groups, got shape \[4, 2, 3\] and groups=3/,
  );
  assert.throws(
    () => init.dirac_(zeros([4, 2, 3]), { groups: 0 }),
    /groups must be a positive integer, got 0/,
  );
  assert.throws(
    () => init.eye_(zeros([2, 2, 2])),
    /eye_: only tensors with 2 dimensions are supported, got shape \[2, 2, 2\]/,
  );
  assert.throws(
    () => init.sparse_(zeros([4]), 0.5),
    /sparse_: only tensors with 2 dimensions are supported, got shape \[4\]/,
  );
  assert.throws(() => init.sparse_(zeros([4, 4]), 1.5), /sparsity must be in \[0, 1\], got 1.5/);
  assert.throws(() => init.sparse_(zeros([4, 4]), 0.5, { std: -1 }), /std >= 0, got -1/);
  assert.throws(
    () => init.truncNormal_(zeros([4]), { a: 2, b: 1 }),
    /truncNormal_: expects a <= b, got a=2, b=1/,
  );
  assert.throws(() => init.truncNormal_(zeros([4]), { std: -1 }), /expects std >= 0, got -1/);
  assert.throws(() => init.truncNormal_(zeros([4]), { a: NaN }), /a must be a number, got NaN/);
  assert.throws(() => init.eye_(null as unknown as Tensor), /eye_: expected a Tensor, got null/);
});
