/**
 * Review of DistributedSampler's PyTorch shuffle: torch.randperm after
 * manual_seed bit for bit (n from 0 to 1e5, negative seeds and seeds of 2^32
 * and above), the sampler's edge configurations against PyTorch 1.13
 * (tests/fixtures/torch_distributed_sampler_review.py); a seed JS cannot hold
 * exactly is an error, not another order; a dataset too long for a JS array
 * still samples.
 */

import assert from "node:assert/strict";
import { data } from "../mod.ts";
import { torchRandperm } from "../src/distributed/torch_randperm.ts";

interface PermCase {
  n: number;
  seed: number;
  perm: number[] | { head: number[]; tail: number[]; checksum: number };
}
interface SamplerCase {
  n: number;
  replicas: number;
  dropLast: boolean;
  shuffle: boolean;
  seed: number;
  epoch: number;
  length: number;
  ranks: number[][];
}
const FIXTURE = JSON.parse(
  await Deno.readTextFile(
    new URL("./fixtures/torch_distributed_sampler_review.json", import.meta.url),
  ),
) as { randperm: PermCase[]; samplers: SamplerCase[] };

Deno.test("torchRandperm: torch.randperm(n, generator=g.manual_seed(seed)) for n 0 to 1e5 and large or negative seeds", () => {
  for (const c of FIXTURE.randperm) {
    const got = Array.from(torchRandperm(c.n, c.seed));
    const what = `n ${c.n}, seed ${c.seed}`;
    if (Array.isArray(c.perm)) {
      assert.deepEqual(got, c.perm, what);
      continue;
    }
    assert.deepEqual(got.slice(0, 16), c.perm.head, what);
    assert.deepEqual(got.slice(-16), c.perm.tail, what);
    let sum = 0n;
    got.forEach((v, i) => sum += BigInt(i) * BigInt(v));
    assert.equal(Number(sum % 2147483647n), c.perm.checksum, what);
  }
});

Deno.test("DistributedSampler: PyTorch's indices for empty, short and padded datasets, dropLast, large and negative seeds", () => {
  for (const c of FIXTURE.samplers) {
    const { n, replicas, dropLast, shuffle, seed, epoch } = c;
    c.ranks.forEach((want, rank) => {
      const s = new data.DistributedSampler({ length: n }, {
        numReplicas: replicas,
        rank,
        shuffle,
        seed,
        dropLast,
      });
      s.setEpoch(epoch);
      const what = JSON.stringify({ n, replicas, rank, dropLast, shuffle, seed, epoch });
      assert.equal(s.length, c.length, what);
      assert.deepEqual([...s], want, what);
    });
  }
});

Deno.test("DistributedSampler: a seed or seed + epoch beyond 2^53 is an error (JS would round it to another order)", () => {
  // PyTorch's generator keeps seed mod 2^32: 2^63 - 1 rounds to 2^63 here, whose order differs.
  assert.throws(
    () => new data.DistributedSampler({ length: 4 }, { numReplicas: 1, rank: 0, seed: 2 ** 63 }),
    /DistributedSampler: seed must be a safe integer.*9223372036854776000/,
  );
  const s = new data.DistributedSampler({ length: 4 }, {
    numReplicas: 1,
    rank: 0,
    seed: Number.MAX_SAFE_INTEGER,
  });
  assert.deepEqual([...s].sort(), [0, 1, 2, 3]);
  s.setEpoch(2);
  assert.throws(() => [...s], /seed \+ epoch.*9007199254740991 \+ 2/);
  assert.throws(() => s.setEpoch(2 ** 60), /safe integer, below 2\^53/);
});

Deno.test("DistributedSampler: a dataset longer than a JS array can hold samples lazily without shuffle", () => {
  const n = 2 ** 28 + 3;
  const s = new data.DistributedSampler({ length: n }, { numReplicas: 2, rank: 1, shuffle: false });
  assert.equal(s.length, 2 ** 27 + 2);
  const it = s[Symbol.iterator]();
  assert.deepEqual([it.next().value, it.next().value, it.next().value], [1, 3, 5]);
});
