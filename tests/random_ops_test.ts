/**
 * randint, randintLike, randperm, bernoulli, multinomial, normal with tensor
 * arguments and poisson on every backend: shapes, dtypes and devices;
 * distributions by chi-square tests at fixed seeds (each beside a check that
 * the same counts fail the test against a plausible wrong distribution, so
 * that the test has the power to catch one); reproducibility under
 * manualSeed, on one device and across devices; errors naming the bad value.
 * @module
 */

import assert from "node:assert/strict";
import {
  bernoulli,
  type Device,
  full,
  manualSeed,
  multinomial,
  normal,
  poisson,
  randint,
  randintLike,
  randperm,
  type Tensor,
  tensor,
  zeros,
} from "../mod.ts";
import { backendTest, REF } from "./harness.ts";

const list = (v: ArrayLike<number>): number[] => Array.from(v);

/** Pearson's statistic of `counts` against probabilities `probs` (which sum to 1). */
function chiSquare(counts: number[], probs: number[]): number {
  const total = counts.reduce((a, b) => a + b, 0);
  let stat = 0;
  for (let i = 0; i < counts.length; i++) {
    const expected = total * probs[i];
    if (expected === 0) {
      if (counts[i] > 0) return Infinity;
      continue;
    }
    stat += (counts[i] - expected) ** 2 / expected;
  }
  return stat;
}

/**
 * The chi-square quantile with `dof` degrees of freedom at p = 1e-4 above
 * (Wilson-Hilferty): a correct sampler at a fixed seed stays below it
 * except with probability 1e-4.
 */
function critical(dof: number): number {
  const z = 3.719;
  const a = 2 / (9 * dof);
  return dof * (1 - a + z * Math.sqrt(a)) ** 3;
}

/** Asserts that `counts` fit `probs` and do not fit `wrong` (the test's power). */
function assertFits(counts: number[], probs: number[], wrong: number[], what: string): void {
  const dof = probs.filter((p) => p > 0).length - 1;
  const limit = critical(dof);
  const stat = chiSquare(counts, probs);
  assert.ok(stat < limit, `${what}: chi-square ${stat} over ${dof} dof exceeds ${limit}`);
  const against = chiSquare(counts, wrong);
  assert.ok(
    against > limit,
    `${what}: chi-square against the wrong distribution is only ${against} (limit ${limit})`,
  );
}

function histogram(values: ArrayLike<number>, bins: number, at = (v: number) => v): number[] {
  const counts = new Array<number>(bins).fill(0);
  for (const v of Array.from(values)) counts[at(v)]++;
  return counts;
}

const uniform = (n: number) => new Array<number>(n).fill(1 / n);

// ------------------------------------------------------------------ randint

backendTest("randint: shape, dtype, device and both call forms", async (d) => {
  manualSeed(1);
  const a = randint(7, [3, 4], { device: d });
  assert.deepEqual([...a.shape], [3, 4]);
  assert.equal(a.dtype, "int32");
  assert.equal(a.device, d);
  for (const v of await a.data().then(list)) assert.ok(Number.isInteger(v) && v >= 0 && v < 7);
  const b = randint(-3, 2, [50], { device: d, dtype: "float32" });
  assert.equal(b.dtype, "float32");
  for (const v of await b.data().then(list)) assert.ok(Number.isInteger(v) && v >= -3 && v < 2);
  assert.deepEqual([...randint(0, 5, [0], { device: d }).shape], [0]);
  assert.deepEqual([...randint(5, [], { device: d }).shape], []);
});

backendTest("randint: uniform over [low, high) (chi-square, 20,000 draws)", async (d) => {
  manualSeed(11);
  const x = await randint(-4, 6, [20000], { device: d }).data().then(list);
  const counts = histogram(x, 10, (v) => v + 4);
  // Off by one (high included) is the bug this must catch.
  const wrong = [...uniform(11)];
  assertFits([...counts, 0], [...uniform(10), 0], wrong, "randint(-4, 6)");
});

backendTest("randint: wide ranges use every high bit evenly (two draws)", async (d) => {
  manualSeed(12);
  const high = 2 ** 31 - 1;
  const x = await randint(high, [16000], { device: d }).data().then(list);
  for (const v of x) assert.ok(v >= 0 && v < high);
  // Four bits at the top, the bottom and the seam of the two draws: each uniform over 16.
  const top = histogram(x, 16, (v) => Math.floor(v / 2 ** 27));
  const low = histogram(x, 16, (v) => v % 16);
  // Bits 12 to 15 straddle the seam between the coarse and the fine draw.
  const seam = histogram(x, 16, (v) => Math.floor(v / 2 ** 12) % 16);
  const skewed = uniform(16).map((p, i) => (i < 8 ? p * 1.2 : p * 0.8));
  assertFits(top, uniform(16), skewed, "top bits");
  assertFits(low, uniform(16), skewed, "low bits");
  assertFits(seam, uniform(16), skewed, "bits 12 to 15");
  const mid = await randint(-(2 ** 30), 2 ** 30 - 1, [4000], { device: d }).data().then(list);
  const halves = histogram(mid, 2, (v) => (v < 0 ? 0 : 1));
  assertFits(halves, [0.5, 0.5], [0.6, 0.4], "randint(-2^30, 2^30) sign");
});

backendTest(
  "randint and randintLike: manualSeed repeats them, on every device alike",
  async (d) => {
    const draw = (device: Device) => {
      manualSeed(99);
      return [randint(1000, [64], { device }), randint(-5, 2 ** 30, [64], { device })];
    };
    const [a1, a2] = draw(d);
    const [b1, b2] = draw(d);
    const [c1, c2] = draw(REF);
    assert.deepEqual(await a1.data().then(list), await b1.data().then(list));
    assert.deepEqual(await a2.data().then(list), await b2.data().then(list));
    assert.deepEqual(
      Array.from(await a1.data().then(list)),
      Array.from(await c1.data().then(list)),
    );
    assert.deepEqual(
      Array.from(await a2.data().then(list)),
      Array.from(await c2.data().then(list)),
    );
    const x = zeros([2, 3], { device: d });
    manualSeed(3);
    const like = randintLike(x, 10);
    assert.deepEqual([...like.shape], [2, 3]);
    assert.equal(like.dtype, "float32");
    assert.equal(like.device, d);
    for (const v of await like.data().then(list)) {
      assert.ok(Number.isInteger(v) && v >= 0 && v < 10);
    }
    const ranged = randintLike(x, 5, 8, { dtype: "int32" });
    assert.equal(ranged.dtype, "int32");
    for (const v of await ranged.data().then(list)) assert.ok(v >= 5 && v < 8);
  },
);

backendTest("randint: bad arguments are errors naming them", (d) => {
  assert.throws(
    () => randint(3, 3, [2], { device: d }),
    /randint: low must be below high, got low 3 and high 3/,
  );
  assert.throws(
    () => randint(0, [2], { device: d }),
    /low must be below high, got low 0 and high 0/,
  );
  assert.throws(
    () => randint(0.5, 3, [2], { device: d }),
    /randint: low and high must be integers, got 0.5 and 3/,
  );
  assert.throws(
    () => randint(5, [2.5], { device: d }),
    /randint: the shape must be an array of non-negative integers, got \[2.5\]/,
  );
  assert.throws(
    () => randint(-(2 ** 31), 2 ** 31, [2], { device: d }),
    /holds 4294967296 integers/,
  );
  assert.throws(
    () => randint(0, 2 ** 32, [2], { device: d }),
    /4294967295 cannot be stored as int32/,
  );
  assert.throws(
    () => randint(5, [2], { device: d, dtype: "int32", requiresGrad: true }),
    /only floating-point/,
  );
  assert.throws(
    () => randintLike(zeros([2], { device: d }), 2, 1),
    /randintLike: low must be below high, got low 2 and high 1/,
  );
});

// ------------------------------------------------------------------ randperm

backendTest("randperm: permutations, uniform over the 24 orders of 4", async (d) => {
  manualSeed(21);
  const p = randperm(1000, { device: d });
  assert.equal(p.dtype, "int32");
  assert.deepEqual(
    Array.from(await p.data().then(list)).sort((a, b) => a - b),
    Array.from({ length: 1000 }, (_, i) => i),
  );
  assert.deepEqual(Array.from(await randperm(0, { device: d }).data().then(list)), []);
  assert.deepEqual(Array.from(await randperm(1, { device: d }).data().then(list)), [0]);
  assert.equal(randperm(3, { device: d, dtype: "float32" }).dtype, "float32");
  const orders = new Map<string, number>();
  for (let i = 0; i < 360; i++) {
    const key = Array.from(await randperm(4, { device: d }).data().then(list)).join("");
    orders.set(key, (orders.get(key) ?? 0) + 1);
  }
  assert.equal(orders.size, 24, `only ${orders.size} of 24 orders seen`);
  const counts = [...orders.values()];
  // A sort by one 24-bit key per element without ties broken at random would still pass; an
  // identity-biased shuffle (a third of the mass on one order) must not.
  const wrong = counts.map((_, i) => (i === 0 ? 1 / 3 : (2 / 3) / 23));
  assertFits(counts, uniform(24), wrong, "randperm(4) orders");
  manualSeed(5);
  const a = Array.from(await randperm(50, { device: d }).data().then(list));
  manualSeed(5);
  const b = Array.from(await randperm(50, { device: REF }).data().then(list));
  assert.deepEqual(a, b);
  assert.throws(() => randperm(-1), /randperm: n must be a non-negative integer, got -1/);
});

// ------------------------------------------------------------------ bernoulli

backendTest("bernoulli: 0/1 in the probabilities' dtype, at their rates", async (d) => {
  manualSeed(31);
  const ps = [0, 0.2, 0.5, 0.9, 1];
  const n = 4000;
  const probs = tensor(ps, { device: d }).reshape([5, 1]).expand([5, n]);
  const x = bernoulli(probs);
  assert.equal(x.dtype, "float32");
  assert.deepEqual([...x.shape], [5, n]);
  const host = await x.data().then(list);
  for (const v of host) assert.ok(v === 0 || v === 1);
  for (const [i, p] of ps.entries()) {
    const ones = host.slice(i * n, (i + 1) * n).reduce((a, b) => a + b, 0);
    if (p === 0 || p === 1) {
      assert.equal(ones, p * n, `p = ${p}`);
      continue;
    }
    assertFits([n - ones, ones], [1 - p, p], [1 - p - 0.05, p + 0.05], `bernoulli(${p})`);
  }
  manualSeed(8);
  const a = Array.from(
    await bernoulli(tensor([0.3, 0.6, 0.5, 0.1], { device: d })).data().then(list),
  );
  manualSeed(8);
  const b = Array.from(
    await bernoulli(tensor([0.3, 0.6, 0.5, 0.1], { device: REF })).data().then(list),
  );
  assert.deepEqual(a, b);
});

backendTest("bernoulli: probabilities outside [0, 1] fail at the read", async (d) => {
  await assert.rejects(
    bernoulli(tensor([0.5, 1.5, -0.1], { device: d })).data().then(list),
    /bernoulli: probs must be in \[0, 1\]; 2 of them are not/,
  );
  await assert.rejects(
    bernoulli(tensor([NaN], { device: d })).data().then(list),
    /1 of them are not \(or NaN\)/,
  );
  assert.throws(() => bernoulli(tensor([1], { dtype: "int32", device: d })), /bernoulli.*int32/);
});

// ------------------------------------------------------------------ multinomial

Deno.test("multinomial with replacement holds no rows x samples x categories comparisons", async () => {
  // 2,048 samples of 2,048 categories: comparing each uniform with every cumulative weight made
  // a 16 MiB intermediate; the binary search needs a few samples-long tensors per step.
  const probs = full([2048], 1, { device: REF });
  await probs.data();
  const before = REF.memory().bytesReserved;
  const x = multinomial(probs, 2048, { replacement: true });
  const host = await x.data();
  assert.ok(host.every((v) => v >= 0 && v < 2048));
  const grown = REF.memory().bytesReserved - before;
  assert.ok(grown < 8 * 2 ** 20, `multinomial reserved ${grown} bytes more`);
});

backendTest("multinomial with replacement: frequencies proportional to the weights", async (d) => {
  manualSeed(41);
  const w = [1, 2, 3, 0, 4];
  const probs = w.map((v) => v / 10);
  const x = multinomial(tensor(w, { device: d }), 20000, { replacement: true });
  assert.equal(x.dtype, "int32");
  assert.deepEqual([...x.shape], [20000]);
  const counts = histogram(await x.data().then(list), 5);
  assert.equal(counts[3], 0, "a zero-weight category was drawn");
  assertFits(counts, probs, uniform(5), "multinomial(replacement)");
  // Rows are drawn from their own weights; a trailing zero weight is never reached.
  const rows = multinomial(tensor([[0, 0, 5, 0], [1, 1, 0, 0]], { device: d }), 3000, {
    replacement: true,
  });
  assert.deepEqual([...rows.shape], [2, 3000]);
  const host = await rows.data().then(list);
  assert.ok(host.slice(0, 3000).every((v) => v === 2));
  const second = histogram(host.slice(3000), 4);
  assertFits(second, [0.5, 0.5, 0, 0], [0.56, 0.44, 0, 0], "row 2");
});

backendTest(
  "multinomial without replacement: no repeats, first picks by weight, zeros last",
  async (d) => {
    manualSeed(42);
    const w = [1, 2, 3, 4];
    const rows = 3000;
    const x = multinomial(tensor(w, { device: d }).reshape([1, 4]).expand([rows, 4]), 4);
    assert.deepEqual([...x.shape], [rows, 4]);
    const host = await x.data().then(list);
    for (let r = 0; r < rows; r++) {
      const row = Array.from(host.slice(r * 4, r * 4 + 4)).sort();
      assert.deepEqual(row, [0, 1, 2, 3], `row ${r} repeats a category`);
    }
    const first = histogram(Array.from({ length: rows }, (_, r) => host[r * 4]), 4);
    assertFits(first, [0.1, 0.2, 0.3, 0.4], uniform(4), "first picks");
    // The second pick, given the first: P(second = j) = Σ_i p_i p_j / (1 - p_i).
    const p = [0.1, 0.2, 0.3, 0.4];
    const secondProbs = p.map((pj, j) =>
      p.reduce((s, pi, i) => (i === j ? s : s + pi * pj / (1 - pi)), 0)
    );
    const second = histogram(Array.from({ length: rows }, (_, r) => host[r * 4 + 1]), 4);
    // With replacement the second pick would follow p itself.
    assertFits(second, secondProbs, p, "second picks");
    const zeros2 = await multinomial(tensor([0, 1, 0, 1], { device: d }), 4).data().then(list);
    assert.deepEqual(Array.from(zeros2.slice(2)).sort(), [0, 2]);
    assert.deepEqual(Array.from(zeros2.slice(0, 2)).sort(), [1, 3]);
    const one = await multinomial(tensor([0, 1, 0], { device: d }), 2).data().then(list);
    assert.equal(one[0], 1);
    manualSeed(6);
    const a = Array.from(
      await multinomial(tensor([[1, 5, 2], [3, 3, 3]], { device: d }), 2).data().then(list),
    );
    manualSeed(6);
    const b = Array.from(
      await multinomial(tensor([[1, 5, 2], [3, 3, 3]], { device: REF }), 2).data().then(list),
    );
    assert.deepEqual(a, b);
  },
);

backendTest("multinomial: bad weights and arguments are errors naming them", async (d) => {
  const p = tensor([0.2, 0.8], { device: d });
  assert.throws(
    () => multinomial(tensor([[[1]]], { device: d }), 1),
    /multinomial: probs must be 1-D or 2-D, got shape \[1, 1, 1\]/,
  );
  assert.throws(
    () => multinomial(p, 3),
    /cannot draw 3 samples without replacement from 2 categories/,
  );
  assert.throws(() => multinomial(p, 0), /numSamples must be a positive integer, got 0/);
  assert.throws(
    () => multinomial(tensor([], { device: d }), 1),
    /probs has no categories \(shape \[0\]\)/,
  );
  await assert.rejects(
    multinomial(tensor([0.5, -1], { device: d }), 1, { replacement: true }).data().then(list),
    /multinomial: probs holds 1 entries that are negative, infinite or NaN/,
  );
  await assert.rejects(
    multinomial(tensor([NaN, 1, Infinity], { device: d }), 1).data().then(list),
    /holds 2 entries/,
  );
  await assert.rejects(
    multinomial(tensor([[0, 0], [1, 1]], { device: d }), 1).data().then(list),
    /multinomial: 1 rows of probs sum to 0/,
  );
});

// ------------------------------------------------------------------ normal

backendTest(
  "normal(mean, std) with tensors: broadcast, per-element moments, zero gradient",
  async (d) => {
    manualSeed(51);
    const mean = tensor([[0], [100]], { device: d });
    const std = tensor([1, 0, 3], { device: d });
    const x = normal(mean, std);
    assert.deepEqual([...x.shape], [2, 3]);
    const host = await x.data().then(list);
    assert.equal(host[1], 0);
    assert.equal(host[4], 100);
    const n = 20000;
    const big = await normal(full([n], 5, { device: d }), full([n], 2, { device: d })).data().then(
      list,
    );
    const m = big.reduce((a, b) => a + b, 0) / n;
    const v = big.reduce((a, b) => a + (b - m) ** 2, 0) / (n - 1);
    assert.ok(Math.abs(m - 5) < 4 * 2 / Math.sqrt(n), `mean ${m}`);
    assert.ok(Math.abs(v - 4) < 4 * 4 * Math.sqrt(2 / n), `variance ${v}`);
    // Bins of the standard normal's quartiles: a quarter each.
    const quartile = 0.6744897501960817;
    const counts = histogram(big, 4, (b) => {
      const z = (b - 5) / 2;
      return z < -quartile ? 0 : z < 0 ? 1 : z < quartile ? 2 : 3;
    });
    assertFits(counts, uniform(4), [0.22, 0.28, 0.28, 0.22], "normal quartiles");
    const s = normal(3, tensor([1, 2], { device: d }));
    assert.deepEqual([...s.shape], [2]);
    const mu = tensor([1, 2], { device: d, requiresGrad: true });
    const y = normal(mu, 1);
    y.sum().backward();
    assert.deepEqual(Array.from(await mu.grad!.data().then(list)), [0, 0]);
    assert.deepEqual([...normal(0, 1, [2, 3], { device: d }).shape], [2, 3]);
    assert.deepEqual([...normal([4], 0, 1, { device: d }).shape], [4]);
    manualSeed(9);
    const a = Array.from(await normal(tensor([1, 2, 3], { device: d }), 2).data().then(list));
    manualSeed(9);
    const b = Array.from(await normal(tensor([1, 2, 3], { device: REF }), 2).data().then(list));
    for (let i = 0; i < 3; i++) assert.ok(Math.abs(a[i] - b[i]) < 1e-5, `${a} vs ${b}`);
  },
);

backendTest("normal: negative std and mismatched arguments are errors", async (d) => {
  await assert.rejects(
    normal(tensor([0, 0], { device: d }), tensor([1, -1], { device: d })).data().then(list),
    /normal: std must be >= 0; 1 entries are not/,
  );
  assert.throws(() => normal(tensor([0], { device: d }), -2), /normal: std must be >= 0, got -2/);
  assert.throws(() => normal(0, -1, [2]), /std must be >= 0, got -1/);
  assert.throws(
    () => normal(tensor([0, 1], { device: d }), tensor([1, 1, 1], { device: d })),
    /normal/,
  );
  assert.throws(() => normal(tensor([0], { dtype: "int32", device: d }), 1), /normal.*int32/);
});

// ------------------------------------------------------------------ poisson

function poissonPmf(lambda: number, k: number): number {
  let log = -lambda + k * Math.log(lambda);
  for (let i = 2; i <= k; i++) log -= Math.log(i);
  return Math.exp(log);
}

/** Counts of `values` in bins [0, from), each k in [from, to), [to, ∞), and their probabilities. */
function poissonBins(values: ArrayLike<number>, lambda: number, from: number, to: number) {
  const counts = new Array<number>(to - from + 2).fill(0);
  for (const v of Array.from(values)) {
    counts[v < from ? 0 : v >= to ? to - from + 1 : v - from + 1]++;
  }
  const pmf = (k: number) => poissonPmf(lambda, k);
  let below = 0;
  for (let k = 0; k < from; k++) below += pmf(k);
  const inside = Array.from({ length: to - from }, (_, i) => pmf(from + i));
  const probs = [below, ...inside];
  probs.push(1 - probs.reduce((a, b) => a + b, 0));
  return { counts, probs };
}

backendTest("poisson: counts follow the Poisson pmf (inversion and PTRS sides)", async (d) => {
  manualSeed(61);
  const n = 20000;
  const x = poisson(full([n], 3.5, { device: d }));
  assert.equal(x.dtype, "float32");
  const small = await x.data().then(list);
  for (const v of small) assert.ok(Number.isInteger(v) && v >= 0);
  const a = poissonBins(small, 3.5, 1, 9);
  assertFits(a.counts, a.probs, poissonBins(small, 3.9, 1, 9).probs, "poisson(3.5)");
  for (const lambda of [10, 37]) {
    const values = await poisson(full([n], lambda, { device: d })).data().then(list);
    const lo = Math.floor(lambda - 2 * Math.sqrt(lambda));
    const hi = Math.ceil(lambda + 2 * Math.sqrt(lambda));
    const b = poissonBins(values, lambda, lo, hi);
    // A normal approximation rounded (the shortcut this must not be) has the wrong skew.
    const wrong = poissonBins(values, lambda + 0.6, lo, hi).probs;
    assertFits(b.counts, b.probs, wrong, `poisson(${lambda})`);
  }
  const huge = await poisson(full([n], 1e5, { device: d })).data().then(list);
  const mean = huge.reduce((s, v) => s + v, 0) / n;
  const variance = huge.reduce((s, v) => s + (v - mean) ** 2, 0) / (n - 1);
  assert.ok(Math.abs(mean - 1e5) < 4 * Math.sqrt(1e5 / n), `mean ${mean}`);
  assert.ok(Math.abs(variance / 1e5 - 1) < 4 * Math.sqrt(2 / n), `variance ${variance}`);
  const mixed = await poisson(tensor([[0, 1e-3], [12, 0]], { device: d })).data().then(list);
  assert.equal(mixed[0], 0);
  assert.equal(mixed[3], 0);
  assert.deepEqual([...poisson(zeros([0, 3], { device: d })).shape], [0, 3]);
});

backendTest("poisson: manualSeed repeats it; negative rates fail at the read", async (d) => {
  const rates = [0.5, 4, 9.9, 10, 55, 3e3];
  const draw = async (device: Device) => {
    manualSeed(17);
    return Array.from(await poisson(tensor(rates, { device })).data().then(list));
  };
  assert.deepEqual(await draw(d), await draw(d));
  const here = await draw(d);
  const there = await draw(REF);
  // Transcendentals may round differently on another backend: nearly always the same counts.
  const same = here.filter((v, i) => v === there[i]).length;
  assert.ok(same >= rates.length - 1, `${here} vs ${there}`);
  await assert.rejects(
    poisson(tensor([1, -1, NaN], { device: d })).data().then(list),
    /poisson: rates must be >= 0; 2 of them are not/,
  );
  assert.throws(() => poisson(tensor([1], { dtype: "int32", device: d })), /poisson.*int32/);
});

backendTest("random ops: float64 on cpu", (d) => {
  if (d.backend !== "cpu") return;
  manualSeed(71);
  const p = tensor([0.25, 0.75], { dtype: "float64", device: d });
  assert.equal(bernoulli(p).dtype, "float64");
  assert.equal(poisson(tensor([2, 20], { dtype: "float64", device: d })).dtype, "float64");
  assert.equal(normal(p, p).dtype, "float64");
  assert.equal(multinomial(p, 2).dtype, "int32");
  const t: Tensor = randint(4, [3], { dtype: "float64", device: d });
  assert.equal(t.dtype, "float64");
});
