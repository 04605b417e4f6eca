/**
 * Argument checks shared by the optimizers and schedulers (internal: not
 * exported from `optim`).
 * @module
 */

/** Throws unless `value` is a number >= `min` (and < `max` when given). */
export function checkNumber(
  owner: string,
  what: string,
  value: unknown,
  min = 0,
  max?: number,
): void {
  if (typeof value !== "number" || !(value >= min) || (max !== undefined && !(value < max))) {
    throw new RangeError(
      `${owner}: invalid ${what}: ${value} (expected a number >= ${min}${
        max !== undefined ? ` and < ${max}` : ""
      })`,
    );
  }
}
