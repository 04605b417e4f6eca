/**
 * `torch.randperm(n, generator=g)` after `g.manual_seed(seed)` on the cpu,
 * bit for bit (PyTorch 1.13): the generator is MT19937 seeded with the low 32
 * bits of `seed`, and randperm swaps element i with i + (next 32-bit draw
 * mod (n - i)). `DistributedSampler` shuffles with it, so every rank gets
 * the indices PyTorch's sampler gives for the same seed and epoch. The
 * MT19937 is `Generator`'s (src/random/generator.ts).
 * @module
 */

import { MT19937 } from "../random/generator.ts";

/**
 * The permutation of 0..n-1 that `torch.randperm(n, generator=g)` gives
 * after `g.manual_seed(seed)` (PyTorch 1.13's cpu algorithm, which 1.13 uses
 * for every n: checked above 2^32 / 20, where later versions switch to
 * another). A typed array, so that datasets longer than a JS array can hold
 * (2^27 items) shuffle too, and faster.
 */
export function torchRandperm(n: number, seed: number): Uint32Array {
  const mt = new MT19937(seed);
  const next = () => mt.next();
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
