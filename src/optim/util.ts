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

/** Throws unless `betas` is two numbers in [0, 1), as PyTorch's Adam family checks them. */
export function checkBetas(owner: string, betas: unknown): void {
  if (!Array.isArray(betas) || betas.length !== 2) {
    throw new TypeError(`${owner}: betas must be two numbers, got ${JSON.stringify(betas)}`);
  }
  checkNumber(owner, "beta parameter at index 0", betas[0], 0, 1);
  checkNumber(owner, "beta parameter at index 1", betas[1], 0, 1);
}

/** A copy of `betas` (so editing the caller's array changes no group), or the default; a wrong length is left for {@link checkBetas} to name. */
export function copyBetas(betas: readonly number[] | undefined): [number, number] {
  return (Array.isArray(betas) ? [...betas] : betas ?? [0.9, 0.999]) as [number, number];
}

/**
 * An error naming the options of `given` that `defaults` does not have: PyTorch refuses an
 * unknown keyword, and a misspelt or foreign option (NAdam has no `maximize`) must not be
 * silently ignored.
 */
export function checkOptionNames(name: string, given: object, defaults: object): void {
  const unknown = Object.keys(given ?? {}).filter((k) => !(k in defaults));
  if (unknown.length > 0) {
    throw new TypeError(
      `${name}: unknown option${unknown.length > 1 ? "s" : ""} ${
        unknown.map((k) => `"${k}"`).join(", ")
      } (${name} takes ${Object.keys(defaults).join(", ")})`,
    );
  }
}
