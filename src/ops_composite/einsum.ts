/**
 * `einsum`: Einstein summation lowered to diagonals, sums, permutes,
 * reshapes and batched matrix products, so a contraction costs what the
 * matmul it is costs (never one broadcast product of every index).
 * @module
 */

import { isFloat } from "../dtype.ts";
import { formatShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { zeros } from "../ops/factory.ts";
import { cat, narrow } from "../ops/view.ts";
import { matmul } from "../ops/linalg.ts";

/** Labels are numbers: 0-51 for A-Z, a-z (ASCII order), 52 + k for the k-th ellipsis dim. */
const ELLIPSIS = 52;
const ARROW = "->";

interface Parsed {
  /** Per operand, the label of each of its dims (ellipsis expanded). */
  inputs: number[][];
  /** The output's labels, in order. */
  output: number[];
}

function labelOf(c: string): number {
  const code = c.charCodeAt(0);
  if (code >= 65 && code <= 90) return code - 65;
  if (code >= 97 && code <= 122) return code - 97 + 26;
  return -1;
}

const letter = (label: number) =>
  label >= ELLIPSIS ? "..." : String.fromCharCode(label < 26 ? 65 + label : 97 + label - 26);

/**
 * One side's term as its labels, with `null` standing for the ellipsis;
 * `start` is the term's index in the equation, for the messages.
 */
function parseTerm(
  term: string,
  start: number,
  fail: (why: string) => never,
  what: string,
): (number | null)[] {
  const labels: (number | null)[] = [];
  let ellipsis = false;
  for (let i = 0; i < term.length; i++) {
    const c = term[i];
    if (c === ".") {
      if (term.slice(i, i + 3) !== "...") {
        fail(`found '.' for ${what} that is not part of an ellipsis`);
      }
      if (ellipsis) fail(`found a second ellipsis for ${what}`);
      ellipsis = true;
      labels.push(null);
      i += 2;
      continue;
    }
    const label = labelOf(c);
    if (label < 0) {
      fail(
        `invalid subscript ${JSON.stringify(c)} at index ${start + i} (subscripts are a-z, A-Z)`,
      );
    }
    labels.push(label);
  }
  return labels;
}

function parse(equation: string, operands: readonly Tensor[]): Parsed {
  const shapes = () => operands.map((t) => formatShape(t.shape)).join(", ");
  const fail = (why: string): never => {
    throw new RangeError(`einsum("${equation}") with operand shapes ${shapes()}: ${why}`);
  };
  const arrow = equation.indexOf(ARROW);
  if (arrow >= 0 && equation.indexOf(ARROW, arrow + 2) >= 0) fail("more than one '->'");
  const lhs = arrow >= 0 ? equation.slice(0, arrow) : equation;
  const terms = lhs.split(",");
  if (terms.length !== operands.length) {
    fail(`the equation has ${terms.length} operand terms, got ${operands.length} operands`);
  }
  let offset = 0;
  const raw = terms.map((term, i) => {
    const labels = parseTerm(term, offset, fail, `operand ${i}`);
    offset += term.length + 1;
    return labels;
  });
  // Each operand's ellipsis covers its dims that letters do not; they align from the right.
  let ellipsisDims = 0;
  const inputs = raw.map((labels, i) => {
    const t = operands[i];
    const letters = labels.filter((l) => l !== null).length;
    const hasEllipsis = labels.includes(null);
    if (hasEllipsis ? t.ndim < letters : t.ndim !== letters) {
      fail(
        `operand ${i} has ${t.ndim} dims but its term "${terms[i]}" names ${letters}${
          hasEllipsis ? " (and an ellipsis)" : " and has no ellipsis"
        }`,
      );
    }
    const covered = t.ndim - letters;
    ellipsisDims = Math.max(ellipsisDims, hasEllipsis ? covered : 0);
    return labels.flatMap((l) =>
      l !== null ? [l] : Array.from({ length: covered }, (_, k) => k - covered)
    );
  });
  // Right-aligned: the ellipsis dim -k (from its end) is label ELLIPSIS + ellipsisDims - k.
  for (const labels of inputs) {
    for (let j = 0; j < labels.length; j++) {
      if (labels[j] < 0) labels[j] += ELLIPSIS + ellipsisDims;
    }
  }
  const ellipsisLabels = Array.from({ length: ellipsisDims }, (_, k) => ELLIPSIS + k);
  let output: number[];
  if (arrow >= 0) {
    const term = equation.slice(arrow + 2);
    const labels = parseTerm(term, arrow + 2, fail, "the output");
    output = labels.flatMap((l) => (l === null ? ellipsisLabels : [l]));
    const seen = new Set<number>();
    for (const l of labels) {
      if (l === null) continue;
      if (seen.has(l)) fail(`output subscript ${letter(l)} appears more than once in the output`);
      seen.add(l);
      if (!inputs.some((labels) => labels.includes(l))) {
        fail(`output subscript ${letter(l)} does not appear in any operand's term`);
      }
    }
  } else {
    // Implicit: the ellipsis dims, then the letters used exactly once, in ASCII order.
    const counts = new Map<number, number>();
    for (const labels of inputs) {
      for (const l of labels) if (l < ELLIPSIS) counts.set(l, (counts.get(l) ?? 0) + 1);
    }
    const once = [...counts].filter(([, n]) => n === 1).map(([l]) => l).sort((a, b) => a - b);
    output = [...ellipsisLabels, ...once];
  }
  inputs.forEach((labels, i) =>
    labels.forEach((l, j) => {
      const k = labels.indexOf(l);
      const [n, m] = [operands[i].shape[k], operands[i].shape[j]];
      if (k < j && n !== m) {
        fail(
          `subscript ${letter(l)} is repeated for operand ${i} but the sizes differ, ${n} vs ${m}`,
        );
      }
    })
  );
  // Sizes: equal, or 1 (which broadcasts), as PyTorch.
  const sizes = new Map<number, number>();
  inputs.forEach((labels, i) =>
    labels.forEach((l, j) => {
      const n = operands[i].shape[j];
      const known = sizes.get(l);
      if (known === undefined || known === 1) sizes.set(l, n);
      else if (n !== known && n !== 1) {
        fail(
          `subscript ${
            letter(l)
          } has size ${n} for operand ${i}, which does not match size ${known} elsewhere (nor broadcasts)`,
        );
      }
    })
  );
  return { inputs, output };
}

/** One operand on its way: the tensor and the label of each of its dims. */
interface Term {
  t: Tensor;
  labels: number[];
}

/** The diagonal over dims `a` < `b` (equal sizes), kept at `a`: as `torch.diagonal`, by a view trick. */
export function diagonalOf(x: Tensor, a: number, b: number): Tensor {
  const n = x.shape[a];
  const rest = x.shape.map((_, i) => i).filter((i) => i !== a && i !== b);
  const moved = permuteIfNeeded(x, [...rest, a, b]);
  const lead = rest.map((i) => x.shape[i]);
  // Flat [.., n·n] padded to [.., n·(n+1)]: row k of [.., n, n+1] starts at element k(n+1).
  const flat = moved.reshape([...lead, n * n]);
  const padded = cat([flat, zeros([...lead, n], { dtype: x.dtype, device: x.device })], -1);
  const diag = narrow(padded.reshape([...lead, n, n + 1]), -1, 0, 1).reshape([...lead, n]);
  // Back to the dim order with the diagonal at a.
  const order = [...rest, a];
  const sorted = [...order].sort((p, q) => p - q);
  return permuteIfNeeded(diag, sorted.map((d) => order.indexOf(d)));
}

function permuteIfNeeded(x: Tensor, perm: readonly number[]): Tensor {
  return perm.every((d, i) => d === i) ? x : x.permute([...perm]);
}

/** Repeated labels of one operand reduced to their diagonal (`parse` checked their sizes). */
function takeDiagonals(term: Term): Term {
  let { t, labels } = term;
  for (;;) {
    const j = labels.findIndex((l, i) => labels.indexOf(l) !== i);
    if (j < 0) return { t, labels };
    t = diagonalOf(t, labels.indexOf(labels[j]), j);
    labels = labels.filter((_, k) => k !== j);
  }
}

/** `term` summed over every label not in `keep` (dims dropped). */
function sumOut(term: Term, keep: ReadonlySet<number>): Term {
  const dims = term.labels.flatMap((l, i) => (keep.has(l) ? [] : [i]));
  if (dims.length === 0) return term;
  return { t: term.t.sum(dims), labels: term.labels.filter((l) => keep.has(l)) };
}

/** The dims of `term` with `labels`, in that order, each of size `size(l)` (size-1 dims expanded). */
function arrange(term: Term, labels: readonly number[]): Tensor {
  return permuteIfNeeded(term.t, labels.map((l) => term.labels.indexOf(l)));
}

/** `a` and `b` contracted: the labels in `keep` stay, shared ones that do not are summed. */
function contract(a: Term, b: Term, keep: ReadonlySet<number>): Term {
  // A label of only one side that nothing later needs is summed on that side first.
  const needed = (x: Term, other: Term) =>
    new Set(x.labels.filter((l) => keep.has(l) || other.labels.includes(l)));
  a = sumOut(a, needed(a, b));
  b = sumOut(b, needed(b, a));
  const sizeIn = (x: Term, l: number) => x.t.shape[x.labels.indexOf(l)];
  const shared = a.labels.filter((l) => b.labels.includes(l));
  // A shared summed label of size 1 on one side only: sum the other side (Σ_k a·b_k = a·Σ b_k).
  for (const l of shared) {
    if (keep.has(l)) continue;
    const [na, nb] = [sizeIn(a, l), sizeIn(b, l)];
    if (na === 1 && nb !== 1) b = { t: b.t.sum(b.labels.indexOf(l), true), labels: b.labels };
    if (nb === 1 && na !== 1) a = { t: a.t.sum(a.labels.indexOf(l), true), labels: a.labels };
  }
  const batch = shared.filter((l) => keep.has(l));
  const summed = shared.filter((l) => !keep.has(l));
  const left = a.labels.filter((l) => !shared.includes(l));
  const right = b.labels.filter((l) => !shared.includes(l));
  const batchShape = batch.map((l) => Math.max(sizeIn(a, l), sizeIn(b, l)));
  const leftShape = left.map((l) => sizeIn(a, l));
  const rightShape = right.map((l) => sizeIn(b, l));
  const k = summed.reduce((p, l) => p * sizeIn(a, l), 1);
  const m = leftShape.reduce((p, n) => p * n, 1);
  const n = rightShape.reduce((p, s) => p * s, 1);
  const labels = [...batch, ...left, ...right];
  if (!isFloat(a.t.dtype)) {
    // int32 has no matmul kernel: a broadcast product, summed over the shared summed labels.
    const all = [...batch, ...left, ...right, ...summed];
    const spread = (x: Term) => {
      const t = arrange(x, all.filter((l) => x.labels.includes(l)));
      return t.reshape(all.map((l) => (x.labels.includes(l) ? sizeIn(x, l) : 1)));
    };
    const product = spread(a).mul(spread(b));
    const dims = summed.map((_, i) => labels.length + i);
    return { t: dims.length ? product.sum(dims) : product, labels };
  }
  // Batch dims of size 1 on one side broadcast in the batched matmul.
  const batchOf = (x: Term) => batch.map((l) => sizeIn(x, l));
  const at = arrange(a, [...batch, ...left, ...summed]).reshape([...batchOf(a), m, k]);
  const bt = arrange(b, [...batch, ...summed, ...right]).reshape([...batchOf(b), k, n]);
  const product = matmul(at, bt);
  return { t: product.reshape([...batchShape, ...leftShape, ...rightShape]), labels };
}

/**
 * Einstein summation, as `torch.einsum`: `equation` names each operand's
 * dims with letters (a-z, A-Z), comma-separated, optionally `->` and the
 * output's; labels shared between operands are multiplied along, labels
 * absent from the output are summed. Without `->` the output is the
 * ellipsis dims then the letters used once, in ASCII order (`"ij,jk"` is
 * `"ij,jk->ik"`). A letter repeated within one operand takes its diagonal
 * (`"ii->i"`, `"ii"` is the trace); `...` stands for the dims the letters do
 * not name, broadcast across operands (aligned from the right) and summed
 * when an explicit output has no `...`. Size-1 dims broadcast against any
 * size, as PyTorch.
 *
 * Operands are contracted left to right, each pair as one batched matrix
 * product after the labels only one side uses are summed, so
 * `einsum("bij,bjk->bik", a, b)` costs what `matmul(a, b)` does. The
 * operands share one dtype and device; int32 contracts by broadcast
 * products (there is no int32 matmul).
 *
 * @example
 * ```ts
 * import { einsum, tensor } from "@multigrad/core";
 * const a = tensor([[1, 2], [3, 4]]);
 * einsum("ij,jk->ik", a, a); // a @ a
 * einsum("ii", a); // the trace, 5
 * ```
 */
export function einsum(equation: string, ...operands: Tensor[]): Tensor {
  if (typeof equation !== "string") {
    throw new TypeError(`einsum: the equation must be a string, got ${typeof equation}`);
  }
  // PyTorch also takes the operands as one list.
  const list = operands.length === 1 && Array.isArray(operands[0])
    ? operands[0] as unknown as Tensor[]
    : operands;
  const eq = equation.replace(/\s+/g, "");
  if (list.length === 0) throw new RangeError(`einsum("${equation}"): no operands given`);
  list.forEach((t, i) => {
    if (!(t instanceof Tensor)) {
      throw new TypeError(`einsum("${equation}"): operand ${i} is ${typeof t}, not a Tensor`);
    }
  });
  const first = list[0];
  list.forEach((t, i) => {
    if (t.dtype !== first.dtype || t.device !== first.device) {
      throw new TypeError(
        `einsum("${equation}"): operand ${i} is ${t.dtype} on ${t.device} (shape ${
          formatShape(t.shape)
        }), operand 0 ${first.dtype} on ${first.device} (shape ${
          formatShape(first.shape)
        }); convert with .to()`,
      );
    }
  });
  const { inputs, output } = parse(eq, list);
  return forwardScope(() => {
    let terms = inputs.map((labels, i) => takeDiagonals({ t: list[i], labels }));
    // Labels only one operand has and the output lacks are summed before any product.
    const usedBy = (l: number, except: number) =>
      output.includes(l) || terms.some((t, j) => j !== except && t.labels.includes(l));
    terms = terms.map((term, i) => sumOut(term, new Set(term.labels.filter((l) => usedBy(l, i)))));
    let acc = terms[0];
    for (let i = 1; i < terms.length; i++) {
      const later = new Set([...output, ...terms.slice(i + 1).flatMap((t) => t.labels)]);
      acc = contract(acc, terms[i], later);
    }
    acc = sumOut(acc, new Set(output));
    // A size-1 dim broadcast against nothing stays 1, as PyTorch.
    const result = arrange(acc, output);
    return result === list[0] ? result.reshape([...result.shape]) : result;
  });
}
