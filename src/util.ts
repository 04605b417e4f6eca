/**
 * Small helpers shared across the library: structure tests and a seeded host
 * random generator.
 * @module
 */

/** Whether `value` is a plain object (PyTorch's dict), not a class instance or an array. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object") return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * A seeded generator of floats in [0, 1) on the host (splitmix32): for
 * shuffles and for data made in JavaScript. Tensors' own random numbers come
 * from `manualSeed` and `rand`/`randn`, which every backend computes alike.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    z = (z ^ (z >>> 16)) >>> 0;
    return z / 4294967296;
  };
}
