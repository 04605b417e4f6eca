/**
 * erf to float64 accuracy: the Taylor series where it converges fast, the
 * continued fraction of erfc beyond. The reference backend needs more than
 * float32 accuracy because gradient checks run in float64.
 */
export function erf(x: number): number {
  const ax = Math.abs(x);
  if (ax < 2.5) {
    let term = x;
    let sum = x;
    const x2 = x * x;
    for (let n = 1; n < 80; n++) {
      term *= -x2 / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return (2 / Math.sqrt(Math.PI)) * sum;
  }
  if (ax > 27) return Math.sign(x);
  // erfc(x) = exp(-x²)/√π · 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...)))), Lentz's method.
  const tiny = 1e-300;
  let f = ax;
  let c = ax;
  let d = 0;
  for (let n = 1; n < 200; n++) {
    const an = n / 2;
    d = ax + an * d;
    d = d === 0 ? tiny : d;
    c = ax + an / c;
    c = c === 0 ? tiny : c;
    d = 1 / d;
    const delta = c * d;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f;
  return Math.sign(x) * (1 - erfc);
}
