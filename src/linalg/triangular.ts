/**
 * Triangular solves: `solveTriangular`, row by row (column by column)
 * with batched tensor ops per step.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { sumTo } from "../ops/elementwise.ts";
import { zeros } from "../ops/factory.ts";
import { broadcastShapes, formatShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { indices, mT, requireSquare } from "./util.ts";

/** `A⁻¹B` for triangular `A` (`[..., n, n]`, `B`: `[..., n, k]`, batch dims broadcast), no gradient. */
function substitute(a: Tensor, b: Tensor, upper: boolean, unit: boolean): Tensor {
  return noGrad(() =>
    forwardScope(() => {
      const n = a.shape.at(-1)!;
      const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2), "solveTriangular");
      const rows = indices(n, a).unsqueeze(-1);
      let x = zeros([...batch, n, b.shape.at(-1)!], { dtype: a.dtype, device: a.device });
      for (let step = 0; step < n; step++) {
        const i = upper ? n - 1 - step : step;
        // Rows of x not solved yet are zero, so the whole row of A can multiply.
        const r = b.narrow(-2, i, 1).sub(a.narrow(-2, i, 1).matmul(x));
        const xi = unit ? r : r.div(a.narrow(-2, i, 1).narrow(-1, i, 1));
        x = x.add(rows.eq(i).mul(xi));
      }
      return x;
    })
  );
}

/** `A⁻¹B` (left) or `BA⁻¹` for triangular `A`, no gradient. */
function triSolve(
  a: Tensor,
  b: Tensor,
  upper: boolean,
  left: boolean,
  unit: boolean,
): Tensor {
  return left ? substitute(a, b, upper, unit) : mT(substitute(mT(a), mT(b), !upper, unit));
}

/** Options of {@link solveTriangular}. */
export interface SolveTriangularOptions {
  /** Whether `A` is upper (true) or lower (false) triangular; required, as in PyTorch. */
  upper: boolean;
  /** Solve `AX = B` (default) or, when false, `XA = B`. */
  left?: boolean;
  /** Take `A`'s diagonal as ones (without reading it). */
  unitriangular?: boolean;
}

/**
 * The solution of `AX = B` (or `XA = B`) for triangular `A`, as
 * `torch.linalg.solve_triangular`: only the triangle `upper` names is read;
 * batch dims broadcast. A zero on the diagonal gives inf/NaN, as in
 * PyTorch (no error). Gradients are PyTorch's: `gB` solves the transposed
 * system, `gA = -gB Xᵀ` (left) or `-Xᵀ gB` kept to the triangle (off the
 * diagonal when unitriangular).
 */
export function solveTriangular(A: Tensor, B: Tensor, options: SolveTriangularOptions): Tensor {
  const op = "linalg.solve_triangular";
  if (typeof options?.upper !== "boolean") {
    throw new TypeError(`${op}: the upper option is required (true or false)`);
  }
  const { upper, left = true, unitriangular = false } = options;
  const n = requireSquare(op, A);
  if (B.dtype !== A.dtype) {
    throw new TypeError(
      `${op}: Expected A and B to have the same dtype, got ${A.dtype} and ${B.dtype}`,
    );
  }
  if (B.ndim < 2 || (left ? B.shape.at(-2) : B.shape.at(-1)) !== n) {
    throw new RangeError(
      `${op}: Incompatible shapes of A and B for the equation ${
        left ? "AX = B" : "XA = B"
      } (${n}x${n} and ${B.ndim < 2 ? formatShape(B.shape) : B.shape.slice(-2).join("x")})`,
    );
  }
  const x = triSolve(A, B, upper, left, unitriangular);
  // A solve (recorded) and the output (whose node is this one): differentiable under createGraph.
  return record(op, [A, B], x, ([g]) => {
    const gb = solveTriangular(mT(A), g!, { upper: !upper, left, unitriangular });
    const full = left ? gb.matmul(mT(x)).neg() : mT(x).matmul(gb).neg();
    const shift = unitriangular ? 1 : 0;
    const ga = upper ? full.triu(shift) : full.tril(-shift);
    return [sumTo(ga, A.shape), sumTo(gb, B.shape)];
  });
}
