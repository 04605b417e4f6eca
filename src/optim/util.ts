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

/** PyTorch's spelling of an option or state key: `expAvgSq` is `exp_avg_sq`. */
export function torchKey(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** multigrad's spelling of a PyTorch key (`exp_avg_sq` is `expAvgSq`); camelCase stays. */
export function ownKey(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}
