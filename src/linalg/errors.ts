/**
 * `torch.linalg.LinAlgError`.
 * @module
 */

/**
 * Raised, as PyTorch's `torch.linalg.LinAlgError`, where a linear-algebra
 * function meets an input it cannot handle: a singular matrix in `inv`,
 * `solve` and what builds on them (`invEx` and `solveEx` with
 * `checkErrors`, `tensorinv`, `tensorsolve`, `matrixPower` of a negative
 * power), a matrix that is not positive-definite in `cholesky` (and
 * `choleskyEx` with `checkErrors`), non-finite values in `svd`, `svdvals`,
 * `eigh` and what builds on them. The check needs the device's values, so the
 * error comes from the next read on that device (as the checks of other ops),
 * not from the call. It extends `RangeError`, the type these failures had
 * before it existed, so `catch` clauses testing for `RangeError` (or `Error`)
 * still match. As PyTorch, `luFactor` and `ldlFactor` failures are not
 * `LinAlgError`s (PyTorch raises a plain `RuntimeError` there): they stay
 * plain `RangeError`s.
 *
 * @example
 * ```ts
 * import { linalg, zeros } from "@multigrad/core";
 * try {
 *   await linalg.inv(zeros([2, 2])).data();
 * } catch (error) {
 *   console.log(error instanceof linalg.LinAlgError); // true
 * }
 * ```
 */
export class LinAlgError extends RangeError {
  /** Creates the error with PyTorch's message. */
  constructor(message: string) {
    super(message);
    this.name = "LinAlgError";
  }
}
