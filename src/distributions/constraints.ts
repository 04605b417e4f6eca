/**
 * `torch.distributions.constraints`: the base constraints of
 * `distribution.ts` and the rest of PyTorch's (bounds, integer ranges,
 * simplex, triangular and Cholesky factors, `independent`, `cat`,
 * `stack`), each with the event dims it spans.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { cat as catTensors, stack as stackTensors } from "../ops/mod.ts";
import { choleskyEx, eigvalsh } from "../linalg/mod.ts";
import type { Constraint } from "./distribution.ts";
import { constraints as base, eps } from "./util.ts";

/**
 * A constraint with PyTorch's `event_dim` (how many rightmost dims one
 * check spans; 0 when absent) and `is_discrete`.
 */
export interface EventConstraint extends Constraint {
  /** The rightmost dims checked together (`event_dim`). */
  readonly eventDim?: number;
  /** Whether the values are discrete (`is_discrete`). */
  readonly isDiscrete?: boolean;
}

/** The event dims of `c` (0 for elementwise constraints). */
export function eventDimOf(c: Constraint): number {
  return (c as EventConstraint).eventDim ?? 0;
}

/** A bound as text for a constraint's name. */
function boundText(b: number | Tensor): string {
  return typeof b === "number" ? String(b) : `tensor of shape [${b.shape.join(", ")}]`;
}

/** `x` (0/1) reduced over the last `n` dims by "all", kept as size-1 dims, expanded back. */
function allOver(mask: Tensor, n: number, like: Tensor): Tensor {
  let m = mask;
  for (let i = 0; i < n; i++) m = m.amin(-1 - i, true);
  return m.expand([...like.shape]);
}

/** 1 where `x` is an integer, as a 0/1 tensor (not ±inf: PyTorch's `inf % 1` is NaN). */
function isInteger(x: Tensor): Tensor {
  const whole = x.eq(x.floor());
  return x.dtype === "int32" ? whole : whole.mul(x.abs().lt(Infinity));
}

function make(
  name: string,
  check: (x: Tensor) => Tensor,
  holds: (x: number) => boolean,
  extra: { eventDim?: number; isDiscrete?: boolean } = {},
): EventConstraint {
  return { name, check, holds, ...extra };
}

/** `lower < x`. */
function greaterThan(lower: number | Tensor): EventConstraint {
  return make(
    `x > ${boundText(lower)}`,
    (x) => x.gt(lower),
    (x) => typeof lower === "number" ? x > lower : true,
  );
}

/** `lower <= x`. */
function greaterThanEq(lower: number | Tensor): EventConstraint {
  return make(
    `x >= ${boundText(lower)}`,
    (x) => x.ge(lower),
    (x) => typeof lower === "number" ? x >= lower : true,
  );
}

/** `x < upper`. */
function lessThan(upper: number | Tensor): EventConstraint {
  return make(
    `x < ${boundText(upper)}`,
    (x) => x.lt(upper),
    (x) => typeof upper === "number" ? x < upper : true,
  );
}

/** `lower <= x <= upper`. */
function interval(lower: number | Tensor, upper: number | Tensor): EventConstraint {
  return make(
    `${boundText(lower)} <= x <= ${boundText(upper)}`,
    (x) => x.ge(lower).mul(x.le(upper)),
    (x) =>
      (typeof lower === "number" ? x >= lower : true) &&
      (typeof upper === "number" ? x <= upper : true),
  );
}

/** `lower <= x < upper`. */
function halfOpenInterval(lower: number | Tensor, upper: number | Tensor): EventConstraint {
  return make(
    `${boundText(lower)} <= x < ${boundText(upper)}`,
    (x) => x.ge(lower).mul(x.lt(upper)),
    (x) =>
      (typeof lower === "number" ? x >= lower : true) &&
      (typeof upper === "number" ? x < upper : true),
  );
}

/** Integers in `[lower, upper]`. */
function integerInterval(lower: number, upper: number): EventConstraint {
  return make(
    `integer in [${lower}, ${upper}]`,
    (x) => isInteger(x).mul(x.ge(lower)).mul(x.le(upper)),
    (x) => Number.isInteger(x) && x >= lower && x <= upper,
    { isDiscrete: true },
  );
}

/** Integers `>= lower`. */
function integerGreaterThan(lower: number): EventConstraint {
  return make(
    `integer >= ${lower}`,
    (x) => isInteger(x).mul(x.ge(lower)),
    (x) => Number.isInteger(x) && x >= lower,
    { isDiscrete: true },
  );
}

/**
 * `c` with its rightmost `reinterpretedBatchNdims` dims checked together
 * (all must hold), as `constraints.independent`.
 */
function independent(c: Constraint, reinterpretedBatchNdims: number): EventConstraint {
  const n = reinterpretedBatchNdims;
  if (!Number.isInteger(n) || n < 0) {
    throw new RangeError(
      `constraints.independent: reinterpretedBatchNdims must be a nonnegative integer, got ${n}`,
    );
  }
  const ed = eventDimOf(c);
  return make(
    n === 0 ? c.name : `independent(${c.name}, ${n})`,
    (x) => {
      if (x.ndim < ed + n) {
        throw new RangeError(
          `constraints.independent: expected value.ndim >= ${ed + n}, got shape [${
            x.shape.join(", ")
          }]`,
        );
      }
      return allOver(c.check(x), n, x);
    },
    c.holds,
    { eventDim: ed + n, isDiscrete: (c as EventConstraint).isDiscrete },
  );
}

/** Nonnegative entries summing to at most `upperBound` along the last dim. */
function multinomial(upperBound: number): EventConstraint {
  return make(
    `nonnegative with sum <= ${upperBound}`,
    (x) => allOver(x.ge(0), 1, x).mul(x.sum(-1, true).le(upperBound)),
    (x) => x >= 0,
    { eventDim: 1, isDiscrete: true },
  );
}

/** The lower triangle (with the diagonal) of `x` equals `x`. */
function lowerTriangularMask(x: Tensor): Tensor {
  return allOver(x.tril().eq(x), 2, x);
}

/** The diagonal of each matrix is positive. */
function positiveDiagonal(x: Tensor): Tensor {
  return allOver(x.diagonal(0, -2, -1).gt(0).unsqueeze(-1), 2, x);
}

/** Whether the last two dims of `x` are square, as a 0/1 tensor of x's shape. */
function squareMask(x: Tensor): Tensor {
  const square = x.ndim >= 2 && x.shape[x.ndim - 1] === x.shape[x.ndim - 2];
  return x.mul(0).add(square ? 1 : 0);
}

/** Symmetric square matrices (within 1e-6 + 1e-5 relative, or equal infinities, as `isclose`). */
function symmetricMask(x: Tensor): Tensor {
  const sq = squareMask(x);
  if (x.ndim < 2 || x.shape[x.ndim - 1] !== x.shape[x.ndim - 2]) return sq;
  const t = x.transpose(-1, -2);
  const close = x.sub(t).abs().le(t.abs().mul(1e-5).add(1e-6));
  return allOver(close.add(x.eq(t)).gt(0), 2, x);
}

/** 1 where every entry of the matrix is finite (repeated over the matrix). */
function finiteMask(x: Tensor): Tensor {
  return allOver(x.abs().lt(Infinity), 2, x);
}

/**
 * `cseq[i]` on the `lengths[i]`-long slices of `dim`, as
 * `constraints.cat` (lengths default to 1 each).
 */
function catConstraint(
  cseq: readonly Constraint[],
  dim = 0,
  lengths?: readonly number[],
): EventConstraint {
  const ls = lengths ?? cseq.map(() => 1);
  if (ls.length !== cseq.length) {
    throw new RangeError(
      `constraints.cat: ${cseq.length} constraints but ${ls.length} lengths`,
    );
  }
  return make(
    `cat(${cseq.map((c) => c.name).join(", ")})`,
    (x) => {
      let start = 0;
      const parts = cseq.map((c, i) => {
        const v = x.narrow(dim, start, ls[i]);
        start += ls[i];
        return c.check(v);
      });
      return catTensors(parts, dim);
    },
    (x) => cseq.every((c) => c.holds(x)),
    {
      eventDim: Math.max(0, ...cseq.map(eventDimOf)),
      isDiscrete: cseq.some((c) => (c as EventConstraint).isDiscrete),
    },
  );
}

/** `cseq[i]` on the `i`-th slice of `dim`, as `constraints.stack`. */
function stackConstraint(cseq: readonly Constraint[], dim = 0): EventConstraint {
  let ed = Math.max(0, ...cseq.map(eventDimOf));
  if (dim + ed < 0) ed += 1;
  return make(
    `stack(${cseq.map((c) => c.name).join(", ")})`,
    (x) => {
      const d = dim < 0 ? dim + x.ndim : dim;
      if (x.shape[d] !== cseq.length) {
        throw new RangeError(
          `constraints.stack: value has ${
            x.shape[d]
          } slices along dim ${dim}, expected ${cseq.length}`,
        );
      }
      return stackTensors(cseq.map((c, i) => c.check(x.select(d, i))), d);
    },
    (x) => cseq.every((c) => c.holds(x)),
    { eventDim: ed, isDiscrete: cseq.some((c) => (c as EventConstraint).isDiscrete) },
  );
}

/** A constraint that cannot be checked: it depends on other parameters (`constraints.dependent`). */
const dependent: EventConstraint = {
  name: "dependent",
  check: () => {
    throw new TypeError("constraints.dependent: cannot determine validity of dependent constraint");
  },
  holds: () => true,
};

/** The type of {@link constraints}: PyTorch's constraint objects and constraint factories. */
export interface Constraints {
  /** Any number except NaN. */
  readonly real: Constraint;
  /** `x > 0`. */
  readonly positive: Constraint;
  /** `x >= 0`. */
  readonly nonnegative: Constraint;
  /** `0 <= x <= 1`. */
  readonly unitInterval: Constraint;
  /** 0 or 1. */
  readonly boolean: Constraint;
  /** Cannot be checked: depends on other parameters. */
  readonly dependent: EventConstraint;
  /** Integers `>= 0`. */
  readonly nonnegativeInteger: EventConstraint;
  /** Integers `>= 1`. */
  readonly positiveInteger: EventConstraint;
  /** Real vectors. */
  readonly realVector: EventConstraint;
  /** One-hot vectors along the last dim. */
  readonly oneHot: EventConstraint;
  /** Nonnegative vectors summing to 1 along the last dim. */
  readonly simplex: EventConstraint;
  /** Lower-triangular square matrices. */
  readonly lowerTriangular: EventConstraint;
  /** Lower-triangular square matrices with a positive diagonal. */
  readonly lowerCholesky: EventConstraint;
  /** Lower Cholesky factors whose rows have unit length. */
  readonly corrCholesky: EventConstraint;
  /** Square matrices. */
  readonly square: EventConstraint;
  /** Symmetric square matrices. */
  readonly symmetric: EventConstraint;
  /** Symmetric positive-definite matrices. */
  readonly positiveDefinite: EventConstraint;
  /** Symmetric positive-semidefinite matrices. */
  readonly positiveSemidefinite: EventConstraint;
  /** `x > lower`. */
  readonly greaterThan: (lower: number | Tensor) => EventConstraint;
  /** `x >= lower`. */
  readonly greaterThanEq: (lower: number | Tensor) => EventConstraint;
  /** `x < upper`. */
  readonly lessThan: (upper: number | Tensor) => EventConstraint;
  /** `lower <= x <= upper`. */
  readonly interval: (lower: number | Tensor, upper: number | Tensor) => EventConstraint;
  /** `lower <= x < upper`. */
  readonly halfOpenInterval: (lower: number | Tensor, upper: number | Tensor) => EventConstraint;
  /** Integers in `[lower, upper]`. */
  readonly integerInterval: (lower: number, upper: number) => EventConstraint;
  /** Nonnegative integer vectors summing to at most `upperBound`. */
  readonly multinomial: (upperBound: number) => EventConstraint;
  /** `c` over its rightmost `reinterpretedBatchNdims` more dims together. */
  readonly independent: (c: Constraint, reinterpretedBatchNdims: number) => EventConstraint;
  /** Constraints on consecutive slices along `dim`. */
  readonly cat: (
    cseq: readonly Constraint[],
    dim?: number,
    lengths?: readonly number[],
  ) => EventConstraint;
  /** Constraints on each slice along `dim`. */
  readonly stack: (cseq: readonly Constraint[], dim?: number) => EventConstraint;
}

/**
 * The constraints PyTorch names (`constraints.real`, `.positive`,
 * `.greaterThan(0)`, `.simplex`, `.independent(c, 1)`, ...). Every `check`
 * returns a 0/1 tensor of the value's shape: event constraints repeat
 * their verdict over the event dims.
 */
export const constraints: Constraints = {
  ...base,
  /** Cannot be checked: depends on other parameters. */
  dependent,
  /** Integers `>= 0`. */
  nonnegativeInteger: integerGreaterThan(0),
  /** Integers `>= 1`. */
  positiveInteger: integerGreaterThan(1),
  /** Real vectors (`independent(real, 1)`). */
  realVector: independent(base.real, 1),
  /** One-hot vectors along the last dim. */
  oneHot: make(
    "one-hot",
    (x) => allOver(x.eq(0).add(x.eq(1)), 1, x).mul(x.sum(-1, true).eq(1)),
    (x) => x === 0 || x === 1,
    { eventDim: 1, isDiscrete: true },
  ),
  /** Nonnegative vectors summing to 1 (within 1e-6) along the last dim. */
  simplex: make(
    "simplex",
    (x) => allOver(x.ge(0), 1, x).mul(x.sum(-1, true).sub(1).abs().lt(1e-6)),
    (x) => x >= 0 && x <= 1,
    { eventDim: 1 },
  ),
  /** Lower-triangular square matrices. */
  lowerTriangular: make("lower triangular", lowerTriangularMask, () => true, { eventDim: 2 }),
  /** Lower-triangular square matrices with a positive diagonal. */
  lowerCholesky: make(
    "lower Cholesky factor",
    (x) => lowerTriangularMask(x).mul(positiveDiagonal(x)),
    () => true,
    { eventDim: 2 },
  ),
  /** Lower Cholesky factors whose rows have unit length (correlation matrices' factors). */
  corrCholesky: make(
    "Cholesky factor of a correlation matrix",
    (x) => {
      const tol = eps(x.dtype) * x.shape[x.ndim - 1] * 10;
      const rowNorm = x.detach().square().sum(-1).sqrt();
      const unit = allOver(rowNorm.sub(1).abs().le(tol).unsqueeze(-1), 2, x);
      return lowerTriangularMask(x).mul(positiveDiagonal(x)).mul(unit);
    },
    () => true,
    { eventDim: 2 },
  ),
  /** Square matrices. */
  square: make("square", squareMask, () => true, { eventDim: 2 }),
  /** Symmetric square matrices (within 1e-6 + 1e-5 relative, as `isclose`). */
  symmetric: make("symmetric", (x) => symmetricMask(x), () => true, { eventDim: 2 }),
  /** Symmetric positive-definite matrices (a Cholesky factorization succeeds). */
  positiveDefinite: make(
    "positive definite",
    (x) => {
      const sym = symmetricMask(x);
      if (x.ndim < 2 || x.shape[x.ndim - 1] !== x.shape[x.ndim - 2]) return sym;
      // Non-finite matrices are not positive definite; the factorization sees zeros instead.
      const finite = finiteMask(x);
      const [, info] = choleskyEx(x.detach().where(finite, 0));
      return sym.mul(finite).mul(info.eq(0).to(x.dtype).unsqueeze(-1).unsqueeze(-1));
    },
    () => true,
    { eventDim: 2 },
  ),
  /** Symmetric positive-semidefinite matrices (no negative eigenvalue). */
  positiveSemidefinite: make(
    "positive semidefinite",
    (x) => {
      const sym = symmetricMask(x);
      if (x.ndim < 2 || x.shape[x.ndim - 1] !== x.shape[x.ndim - 2]) return sym;
      // eigvalsh refuses non-finite input: such matrices are not semidefinite (as PyTorch's answer).
      const finite = finiteMask(x);
      const nonneg = eigvalsh(x.detach().where(finite, 0)).ge(0).amin(-1, true).unsqueeze(-1);
      return sym.mul(finite).mul(nonneg);
    },
    () => true,
    { eventDim: 2 },
  ),
  /** `x > lower`. */
  greaterThan,
  /** `x >= lower`. */
  greaterThanEq,
  /** `x < upper`. */
  lessThan,
  /** `lower <= x <= upper`. */
  interval,
  /** `lower <= x < upper`. */
  halfOpenInterval,
  /** Integers in `[lower, upper]`. */
  integerInterval,
  /** Nonnegative integer vectors summing to at most `upperBound`. */
  multinomial,
  /** `c` over its rightmost `reinterpretedBatchNdims` more dims together. */
  independent,
  /** Constraints on consecutive slices along `dim`. */
  cat: catConstraint,
  /** Constraints on each slice along `dim`. */
  stack: stackConstraint,
};
