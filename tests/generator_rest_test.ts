/**
 * The rest of `Generator`'s PyTorch 1.13 cpu streams
 * (tests/fixtures/torch_generator_rest.py): `exponential_`, `geometric_`,
 * `cauchy_` and `logNormal_` given a generator, `multinomial` (1-d and 2-d,
 * with and without replacement), `WeightedRandomSampler` without
 * replacement, and a user-built sampler in a `DataLoader` read lazily, so
 * draws from its generator inside the loop interleave as in PyTorch.
 * @module
 */

import assert from "node:assert/strict";
import {
  cauchy_,
  data,
  type DType,
  exponential_,
  Generator,
  geometric_,
  logNormal_,
  manualSeed,
  multinomial,
  rand,
  randint,
  type Tensor,
  tensor,
  zeros,
} from "../mod.ts";
import { backendTest, REF } from "./harness.ts";

interface Fill {
  seed: string;
  n: number;
  op: "exponential_" | "geometric_" | "cauchy_" | "log_normal_";
  args: number[];
  dtype: DType;
  values: number[];
  next: number[];
}
interface Multinomial {
  seed: string;
  probs: number[];
  shape: number[];
  dtype: "float32" | "float64";
  n: number;
  replacement: boolean;
  values: number[];
  next: number[];
}
const fixtures = JSON.parse(
  Deno.readTextFileSync(new URL("./fixtures/torch_generator_rest.json", import.meta.url)),
) as {
  torch: string;
  fills: Fill[];
  multinomial: Multinomial[];
  ties: {
    seed: string;
    probs: number[];
    n: number;
    dtype: "float32" | "float64";
    values: number[];
    next: number[];
  }[];
  weighted: {
    seed: string;
    weights: number[];
    numSamples: number;
    replacement: boolean;
    orders: number[][];
    next: number[];
  }[];
  inLoop: {
    kind: "random" | "subset" | "weighted";
    n: number;
    batchSize: number | null;
    dropLast: boolean;
    replacement: boolean;
    numSamples: number | null;
    seed: string;
    epochs: [number[], number][][];
    next: number[];
  }[];
};

const gen = (seed: string) => new Generator().manualSeed(BigInt(seed));
const flat = async (t: Tensor): Promise<number[]> => [await t.toArray()].flat(2) as number[];
const next = async (g: Generator) =>
  await flat(randint(0, 1000, [2], { dtype: "int32", generator: g }));

const f64 = new Float64Array(1);
const i64 = new BigInt64Array(f64.buffer);
/** How many float64 steps apart `a` and `b` are (same sign). */
function ulps(a: number, b: number): number {
  if (Object.is(a, b)) return 0;
  f64[0] = a;
  const x = i64[0];
  f64[0] = b;
  const d = x - i64[0];
  return Number(d < 0n ? -d : d);
}

/** Runs one fill of the fixture on `t` (the function form, or the method form for odd seeds). */
function fill(c: Fill, t: Tensor, generator: Generator): Tensor {
  const [a, b] = c.args;
  const method = BigInt(c.seed) % 2n === 1n;
  switch (c.op) {
    case "exponential_":
      if (method) {
        return a === undefined ? t.exponential_({ generator }) : t.exponential_(a, { generator });
      }
      return a === undefined ? exponential_(t, { generator }) : exponential_(t, a, { generator });
    case "geometric_":
      return method ? t.geometric_(a, { generator }) : geometric_(t, a, { generator });
    case "cauchy_":
      if (a === undefined) return method ? t.cauchy_({ generator }) : cauchy_(t, { generator });
      return method ? t.cauchy_(a, b, { generator }) : cauchy_(t, a, b, { generator });
    case "log_normal_": {
      const options = a === undefined ? { generator } : { mean: a, std: b, generator };
      return method ? t.logNormal_(options) : logNormal_(t, options);
    }
  }
}

backendTest(
  "Generator rest: exponential_, geometric_, cauchy_, logNormal_ draw PyTorch's cpu values",
  async (device) => {
    let compared = 0;
    let off = 0;
    for (const c of fixtures.fills) {
      if (!device.backendDevice.dtypes.includes(c.dtype)) continue; // webgpu: no float64
      const g = gen(c.seed);
      const t = fill(c, zeros([c.n], { dtype: c.dtype, device }), g);
      const what = `${c.op}(${c.args}) ${c.dtype} n ${c.n} seed ${c.seed}`;
      const got = await flat(t);
      if (c.dtype !== "float64") assert.deepEqual(got, c.values, what);
      else {
        assert.equal(got.length, c.values.length, what);
        got.forEach((v, i) => {
          const d = ulps(v, c.values[i]);
          assert.ok(d <= 4, `${what} [${i}]: ${v} vs PyTorch's ${c.values[i]} (${d} ulp)`);
          if (d > 0) off++;
        });
      }
      assert.deepEqual(await next(g), c.next, `${what}: the stream position after`);
      compared += c.n;
    }
    assert.ok(compared > 10000, `compared ${compared} values`);
    // glibc's log/tan/exp (PyTorch's) and V8's differ in the last bits of a few float64 values.
    assert.ok(off <= 16, `${off} float64 values off by an ulp or more`);
  },
);

Deno.test("Generator rest: multinomial draws PyTorch's cpu samples (1-d, 2-d, with and without replacement)", async () => {
  for (const c of fixtures.multinomial) {
    const g = gen(c.seed);
    const p = tensor(c.probs, { dtype: c.dtype, shape: c.shape, device: REF });
    const got = multinomial(p, c.n, { replacement: c.replacement, generator: g });
    const what = `${c.dtype} ${c.shape} n ${c.n} replacement ${c.replacement} seed ${c.seed}`;
    assert.deepEqual(got.shape, c.shape.length === 1 ? [c.n] : [c.shape[0], c.n], what);
    assert.deepEqual(await flat(got), c.values, what);
    assert.deepEqual(await next(g), c.next, `${what}: the stream position after`);
  }
  // The Tensor method takes the generator too.
  const c = fixtures.multinomial[0];
  const p = tensor(c.probs, { dtype: c.dtype, shape: c.shape });
  assert.deepEqual(
    await flat(p.multinomial(c.n, { replacement: c.replacement, generator: gen(c.seed) })),
    c.values,
  );
});

Deno.test("Generator rest: multinomial forcing zero weights in orders the ties as PyTorch's topk", async () => {
  for (const c of fixtures.ties) {
    const g = gen(c.seed);
    const p = tensor(c.probs, { dtype: c.dtype });
    const got = await flat(multinomial(p, c.n, { generator: g }));
    assert.deepEqual(
      got,
      c.values,
      `${c.dtype} ${c.probs.length} weights, n ${c.n}, seed ${c.seed}`,
    );
    assert.deepEqual(await next(g), c.next);
  }
});

Deno.test("Generator rest: multinomial with a generator refuses bad weights and probs it cannot read now", () => {
  const g = new Generator();
  assert.throws(
    () => multinomial(tensor([1, -1, 2]), 2, { generator: g }),
    /multinomial: probs\[1\] = -1; .*inf, nan or an element < 0/,
  );
  assert.throws(
    () => multinomial(tensor([[1, 2], [0, 0]]), 1, { generator: g }),
    /multinomial: row 1 of probs sums to 0/,
  );
  assert.throws(
    () => multinomial(tensor([1, 2]), 3, { generator: g }),
    /cannot draw 3 samples without replacement from 2 categories/,
  );
  assert.throws(
    () => multinomial(tensor([1, 2]), 1, { generator: {} as unknown as Generator }),
    /multinomial: generator must be a Generator/,
  );
});

backendTest(
  "Generator rest: multinomial on a device it cannot read now is a clear error",
  (device) => {
    if (device.backendDevice.readSync !== undefined) return;
    assert.throws(
      () => multinomial(tensor([1, 2], { device }), 1, { generator: new Generator() }),
      /multinomial: a Generator draws on the host, so probs must be readable there now/,
    );
  },
);

Deno.test("Generator rest: WeightedRandomSampler without replacement (and of one sample) as PyTorch", async () => {
  for (const c of fixtures.weighted) {
    const g = gen(c.seed);
    const s = new data.WeightedRandomSampler(c.weights, c.numSamples, {
      replacement: c.replacement,
      generator: g,
    });
    const orders = [[...s], [...s], [...s]];
    assert.deepEqual(orders, c.orders, `${c.weights} n ${c.numSamples} seed ${c.seed}`);
    assert.deepEqual(await next(g), c.next);
  }
});

class Range extends data.Dataset<number> {
  constructor(readonly n: number) {
    super();
  }
  get length(): number {
    return this.n;
  }
  get(index: number): number {
    return index;
  }
}

Deno.test("Generator rest: a sampler's draws and draws inside the DataLoader loop interleave as in PyTorch", async () => {
  for (const c of fixtures.inLoop) {
    const g = gen(c.seed);
    const sampler = c.kind === "random"
      ? new data.RandomSampler(new Range(c.n), {
        replacement: c.replacement,
        numSamples: c.numSamples ?? undefined,
        generator: g,
      })
      : c.kind === "subset"
      ? new data.SubsetRandomSampler(Array.from({ length: c.n }, (_, j) => c.n - 1 - j), {
        generator: g,
      })
      : new data.WeightedRandomSampler(
        Array.from({ length: c.n }, (_, j) => (j % 3) + 0.5),
        c.numSamples!,
        { replacement: c.replacement, generator: g },
      );
    const loader = new data.DataLoader(new Range(c.n), {
      sampler,
      batchSize: c.batchSize,
      dropLast: c.dropLast,
      ...(c.batchSize === null ? { convert: (s: number) => [s] } : { collate: (s: number[]) => s }),
    });
    const epochs: [number[], number][][] = [];
    for (let epoch = 0; epoch < 3; epoch++) {
      const got: [number[], number][] = [];
      for (const batch of loader) {
        got.push([batch as number[], await rand([1], { generator: g }).item()]);
      }
      epochs.push(got);
    }
    const what =
      `${c.kind} n ${c.n} batchSize ${c.batchSize} dropLast ${c.dropLast} seed ${c.seed}`;
    assert.deepEqual(epochs, c.epochs, what);
    assert.deepEqual(await next(g), c.next, what);
  }
});

Deno.test("Generator rest: the fills check their generator; without one they keep the global stream", async () => {
  const bad = {} as unknown as Generator;
  assert.throws(
    () => exponential_(zeros([2]), { generator: bad }),
    /exponential_: generator must be a Generator/,
  );
  assert.throws(
    () => cauchy_(zeros([2]), 0, 1, { generator: bad }),
    /cauchy_: generator must be a Generator/,
  );
  assert.throws(
    () => geometric_(zeros([2]), 0.5, { generator: bad }),
    /geometric_: generator must be a Generator/,
  );
  assert.throws(
    () => logNormal_(zeros([2]), { generator: bad }),
    /logNormal_: generator must be a Generator/,
  );
  // Without a generator: manualSeed repeats the draws, which are not the Generator's.
  const draws = async () => {
    manualSeed(3);
    return [
      ...await flat(exponential_(zeros([4]), 2)),
      ...await flat(cauchy_(zeros([4]), 1, 2)),
      ...await flat(geometric_(zeros([4]), 0.3)),
      ...await flat(logNormal_(zeros([4]))),
    ];
  };
  const first = await draws();
  assert.deepEqual(await draws(), first);
  const g = new Generator().manualSeed(3);
  assert.notDeepEqual(await flat(exponential_(zeros([4]), 2, { generator: g })), first.slice(0, 4));
});
