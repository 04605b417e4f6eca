/**
 * `torch.randperm(n, generator=g)` after `g.manual_seed(seed)` on the cpu,
 * bit for bit (PyTorch 1.13): the generator is MT19937 seeded with the low 32
 * bits of `seed`, and randperm swaps element i with i + (next 32-bit draw
 * mod (n - i)). `DistributedSampler` shuffles with it, so every rank gets
 * the indices PyTorch's sampler gives for the same seed and epoch.
 * @module
 */

/** The MT19937 stream of PyTorch's cpu generator seeded with `seed` (its low 32 bits). */
function mt19937(seed: number): () => number {
  const state = new Uint32Array(624);
  state[0] = Number(BigInt.asUintN(32, BigInt(seed)));
  for (let i = 1; i < 624; i++) {
    const prev = state[i - 1] ^ (state[i - 1] >>> 30);
    // 1812433253 * prev + i, mod 2^32, without losing bits to float rounding.
    state[i] = (Math.imul(1812433253, prev) + i) >>> 0;
  }
  let index = 624;
  const twist = () => {
    for (let i = 0; i < 624; i++) {
      const y = (state[i] & 0x80000000) | (state[(i + 1) % 624] & 0x7fffffff);
      state[i] = state[(i + 397) % 624] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
    }
    index = 0;
  };
  return () => {
    if (index >= 624) twist();
    let y = state[index++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  };
}

/**
 * The permutation of 0..n-1 that `torch.randperm(n, generator=g)` gives
 * after `g.manual_seed(seed)` (PyTorch 1.13's cpu algorithm, which 1.13 uses
 * for every n: checked above 2^32 / 20, where later versions switch to
 * another). A typed array, so that datasets longer than a JS array can hold
 * (2^27 items) shuffle too, and faster.
 */
export function torchRandperm(n: number, seed: number): Uint32Array {
  const next = mt19937(seed);
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  for (let i = 0; i < n - 1; i++) {
    const z = i + next() % (n - i);
    const saved = order[i];
    order[i] = order[z];
    order[z] = saved;
  }
  return order;
}
