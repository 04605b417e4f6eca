/**
 * The demo's data set: interleaved spirals, one arm per class, generated
 * from a seed on the host (no download), split into train and test rows.
 * @module
 */

import { seededRandom } from "../../mod.ts";

/** A seeded pseudo-random number generator: floats in [0, 1). */
export type Rng = () => number;

/** The host generator of the library, seeded for the demo's data and shuffles. */
export function makeRng(seed: number): Rng {
  return seededRandom(Math.trunc(seed));
}

/** A standard-normal sample from `rng` (Box-Muller). */
export function gaussian(rng: Rng): number {
  const u = 1 - rng(); // (0, 1]
  const v = rng();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

/** Rows of 2-d points with integer class labels, in host memory. */
export interface PointSet {
  /** `[length, 2]` coordinates, row-major. */
  readonly x: Float32Array;
  /** `[length]` class indices in `[0, classes)`. */
  readonly y: Int32Array;
  /** How many rows. */
  readonly length: number;
  /** How many classes. */
  readonly classes: number;
}

/** Options of {@link makeSpirals}. */
export interface SpiralOptions {
  /** Points per arm (default 1000). */
  pointsPerClass?: number;
  /** Arms, one per class (default 3). */
  classes?: number;
  /** How many turns each arm makes from the centre to radius 1 (default 2.5). */
  turns?: number;
  /** Standard deviation of the angle noise, in radians (default 0.25). */
  noise?: number;
  /** Seed of the generator (default 0). */
  seed?: number;
}

/**
 * `classes` spiral arms winding out from the origin, rotated evenly against
 * each other, with noise on the angle and a little on the position. Rows are
 * in class order; shuffle or {@link splitTrainTest} them.
 */
export function makeSpirals(options: SpiralOptions = {}): PointSet {
  const n = options.pointsPerClass ?? 1000;
  const classes = options.classes ?? DEFAULT_ARMS;
  const turns = options.turns ?? 2.5;
  const noise = options.noise ?? 0.25;
  if (!Number.isInteger(n) || n < 1) {
    throw new RangeError(`makeSpirals: pointsPerClass must be a positive integer, got ${n}`);
  }
  if (!Number.isInteger(classes) || classes < 2) {
    throw new RangeError(`makeSpirals: classes must be an integer >= 2, got ${classes}`);
  }
  const rng = makeRng(options.seed ?? 0);
  const length = n * classes;
  const x = new Float32Array(length * 2);
  const y = new Int32Array(length);
  let row = 0;
  for (let k = 0; k < classes; k++) {
    for (let i = 0; i < n; i++) {
      // Radius spreads evenly by area-ish so the outer arm is not sparse.
      const r = 0.05 + 0.95 * Math.sqrt((i + rng()) / n);
      const angle = (2 * Math.PI * k) / classes + 2 * Math.PI * turns * r + noise * gaussian(rng);
      x[2 * row] = r * Math.cos(angle) + 0.01 * gaussian(rng);
      x[2 * row + 1] = r * Math.sin(angle) + 0.01 * gaussian(rng);
      y[row] = k;
      row++;
    }
  }
  return { x, y, length, classes };
}

/** The rows of `set` at `indices`, in that order. */
export function selectRows(set: PointSet, indices: ArrayLike<number>): PointSet {
  const x = new Float32Array(indices.length * 2);
  const y = new Int32Array(indices.length);
  for (let i = 0; i < indices.length; i++) {
    const j = indices[i];
    x[2 * i] = set.x[2 * j];
    x[2 * i + 1] = set.x[2 * j + 1];
    y[i] = set.y[j];
  }
  return { x, y, length: indices.length, classes: set.classes };
}

/** `0..n-1` in an order drawn from `rng` (Fisher-Yates). */
export function permutation(n: number, rng: Rng): Int32Array {
  const order = new Int32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    const t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  return order;
}

/** Spiral arms (classes) unless told otherwise. */
export const DEFAULT_ARMS = 3;

/** How many of `rows` rows {@link splitTrainTest} holds out for testing. */
export function testRows(rows: number, testFraction: number): number {
  return Math.max(1, Math.round(rows * testFraction));
}

/** Shuffles `set` with `seed` and holds out `testFraction` of its rows as the test split. */
export function splitTrainTest(
  set: PointSet,
  testFraction: number,
  seed: number,
): { train: PointSet; test: PointSet } {
  if (!(testFraction > 0 && testFraction < 1)) {
    throw new RangeError(`splitTrainTest: testFraction must be in (0, 1), got ${testFraction}`);
  }
  const order = permutation(set.length, makeRng(seed));
  const testCount = testRows(set.length, testFraction);
  return {
    test: selectRows(set, order.subarray(0, testCount)),
    train: selectRows(set, order.subarray(testCount)),
  };
}
