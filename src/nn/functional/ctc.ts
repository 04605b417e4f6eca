/**
 * `ctcLoss`, as `torch.nn.functional.ctc_loss`: the connectionist temporal
 * classification loss, composed from tensor ops. The forward variables
 * (alphas) of all samples advance together in log space, a handful of
 * batched ops per time step, so every backend runs it and autograd gives the
 * gradient (a backend with the optional `ctcAlpha` kernels, as cpu, runs the
 * recursion and its gradient in one launch each); a zero-valued node adds
 * PyTorch's extra `exp(log_probs)` term.
 * @module
 */

import { noGrad, record } from "../../autograd.ts";
import { recomputedBackward, recording } from "../../autograd/recompute.ts";
import { checkLater } from "../../ops/check.ts";
import { arangeOn, full, tensor } from "../../ops/factory.ts";
import { gatherInRange, where } from "../../ops/indexing.ts";
import { reduceKeepdim } from "../../ops/reduce.ts";
import { empty, hasKernel, launch } from "../../ops/util.ts";
import { cat, stack } from "../../ops/view.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import { Tensor } from "../../tensor.ts";
import {
  checkClassRange,
  checkFloatInput,
  checkReduction,
  checkTensor,
  sameDevice,
} from "../util.ts";
import type { ReductionOptions } from "./loss.ts";

/** Options of {@link ctcLoss}. */
export interface CTCLossOptions extends ReductionOptions {
  /** The blank label (default 0); it must be a class of the input. */
  blank?: number;
  /** Turn infinite losses (impossible alignments) and their gradients into 0 (default false). */
  zeroInfinity?: boolean;
}

/** Sequence lengths: one per sample, as numbers or an int32 tensor ([N], or [] when unbatched). */
export type CTCLengths = number | readonly number[] | Tensor;

/** Lengths on the device, with their host values where they came from the host. */
interface Lengths {
  device: Tensor;
  host: number[] | null;
  /** The smallest and largest value, where known without a read. */
  range: readonly [number, number] | null;
}

function lengthsOf(op: string, name: string, value: CTCLengths, n: number, like: Tensor): Lengths {
  if (value instanceof Tensor) {
    if (value.dtype !== "int32" || value.ndim > 1 || value.numel() !== n) {
      throw new RangeError(
        `${op}: ${name} must hold ${n} int32 length(s) (one per sample), got ${value.dtype} of shape ${
          formatShape(value.shape)
        }`,
      );
    }
    sameDevice(op, { logProbs: like, [name]: value });
    return { device: value.reshape([n]), host: null, range: value.storage.knownRange };
  }
  const host = typeof value === "number" ? [value] : Array.isArray(value) ? [...value] : null;
  if (!host || host.length !== n || host.some((v) => !Number.isInteger(v) || v < 0)) {
    throw new RangeError(
      `${op}: ${name} must be ${n} non-negative integer(s) (one per sample), got ${
        JSON.stringify(value)
      }`,
    );
  }
  const device = tensor(host, { dtype: "int32", device: like.device });
  const range = host.reduce<[number, number]>(
    ([lo, hi], v) => [Math.min(lo, v), Math.max(hi, v)],
    [Infinity, -Infinity],
  );
  return { device, host, range: n ? range : null };
}

/**
 * `log Σ exp` over `dim` of `x`, whose gradient is finite where every
 * term is -inf (`logsumexp`'s is NaN there, 0/0): the sum of the shifted
 * exponentials is at least 1 unless all terms are -inf, so clamping it at
 * 0.5 changes nothing else and cuts that gradient.
 */
function logSumExpOver(x: Tensor, dim: number): Tensor {
  const top = noGrad(() => reduceKeepdim("max", x, dim));
  // Never an infinite shift: -inf - -inf would be NaN.
  const shift = noGrad(() => top.clamp(-3e38, 3e38));
  return x.sub(shift).exp().sum(dim).clamp(0.5).log().add(top.squeeze(dim));
}

/**
 * The CTC loss of `logProbs` [T, N, C] (log-probabilities over C classes,
 * blank included; or [T, C] unbatched) against `targets`: padded [N, S] or
 * the N targets concatenated [Σ targetLengths] (int32 class indices, never the blank
 * for a usual alignment), as `torch.nn.functional.ctc_loss`. `inputLengths`
 * and `targetLengths` hold one length per sample (numbers or an int32 tensor).
 * A target needs a blank between repeated labels, so a sample whose input is
 * too short has no alignment: its loss is `inf` (0 with `zeroInfinity`).
 * `"mean"` divides each loss by its target length (at least 1), then averages
 * over the batch; `"none"` gives [N] ([] unbatched).
 *
 * The gradient is PyTorch's: `exp(lp) - posterior / exp(lp)`, the gradient of
 * the logits when `logProbs` is their `logSoftmax`; 0 past a sample's input
 * length, NaN before it for an impossible alignment (0 with `zeroInfinity`).
 * A target label equal to the blank (invalid in PyTorch's docs) gets the
 * gradient of this loss; PyTorch's CPU kernel drops a term of it at the last
 * frame when the last label is the blank.
 * Target labels outside [0, C) are reported by the next read on the device;
 * lengths given as a tensor computed on the device are checked that way too,
 * and with concatenated targets such lengths make the work grow with the
 * total target length instead of the longest.
 */
export function ctcLoss(
  logProbs: Tensor,
  targets: Tensor,
  inputLengths: CTCLengths,
  targetLengths: CTCLengths,
  options: CTCLossOptions = {},
): Tensor {
  // The per-step alphas go with the graph at backward, not with the GC.
  return forwardScope(() => ctcUnscoped(logProbs, targets, inputLengths, targetLengths, options));
}

function ctcUnscoped(
  logProbs: Tensor,
  targets: Tensor,
  inputLengths: CTCLengths,
  targetLengths: CTCLengths,
  options: CTCLossOptions,
): Tensor {
  const op = "ctcLoss";
  checkFloatInput(op, logProbs, "logProbs");
  checkTensor(op, "targets", targets);
  const reduction = options.reduction ?? "mean";
  checkReduction(op, reduction);
  const zeroInfinity = options.zeroInfinity ?? false;
  if (logProbs.ndim !== 3 && logProbs.ndim !== 2) {
    throw new RangeError(
      `${op}: expected logProbs of shape [T, N, C] or [T, C] (unbatched), got ${
        formatShape(logProbs.shape)
      }`,
    );
  }
  const batched = logProbs.ndim === 3;
  const lp = batched ? logProbs : logProbs.unsqueeze(1);
  const [T, N, C] = lp.shape;
  const blank = options.blank ?? 0;
  if (!Number.isInteger(blank) || blank < 0 || blank >= C) {
    throw new RangeError(`${op}: blank must be a class in [0, ${C}) (C = ${C}), got ${blank}`);
  }
  if (targets.dtype !== "int32" || (targets.ndim !== 1 && targets.ndim !== 2)) {
    throw new RangeError(
      `${op}: targets must be int32, padded [N, S] or concatenated [sum of target lengths], got ${targets.dtype} of shape ${
        formatShape(targets.shape)
      }`,
    );
  }
  sameDevice(op, { logProbs, targets });
  const padded = targets.ndim === 2;
  if (padded && targets.shape[0] !== N) {
    throw new RangeError(
      `${op}: padded targets of shape ${
        formatShape(targets.shape)
      } need one row per sample (N = ${N}, logProbs of shape ${formatShape(logProbs.shape)})`,
    );
  }
  const il = lengthsOf(op, "inputLengths", inputLengths, N, lp);
  const tl = lengthsOf(op, "targetLengths", targetLengths, N, lp);
  const inputBad = (lo: number, hi: number) =>
    hi > T
      ? `${op}: input length ${hi} exceeds the ${T} time steps of logProbs (shape ${
        formatShape(logProbs.shape)
      })`
      : lo < 0
      ? `${op}: input length ${lo} is negative`
      : null;
  const targetBad = (lo: number, hi: number) =>
    padded && hi > targets.shape[1]
      ? `${op}: target length ${hi} exceeds the ${targets.shape[1]} columns of the padded targets`
      : lo < 0
      ? `${op}: target length ${lo} is negative`
      : null;
  for (const [range, bad] of [[il.range, inputBad], [tl.range, targetBad]] as const) {
    const message = range && bad(range[0], range[1]);
    if (message) throw new RangeError(message);
  }
  const concatBad = (total: number) =>
    !padded && total !== targets.shape[0]
      ? `${op}: concatenated targets of shape ${
        formatShape(targets.shape)
      } must hold the sum of the target lengths, ${total}`
      : null;
  if (tl.host) {
    const message = concatBad(tl.host.reduce((a, b) => a + b, 0));
    if (message) throw new RangeError(message);
  }
  if (N > 0 && (!il.host || !tl.host)) {
    const lengths = noGrad(() =>
      stack([il.device.min(), il.device.max(), tl.device.min(), tl.device.max(), tl.device.sum()])
    );
    checkLater(
      lengths,
      ([ilo, ihi, tlo, thi, total]) =>
        inputBad(ilo, ihi) ?? targetBad(tlo, thi) ?? concatBad(total),
    );
  }

  if (T === 0) {
    throw new RangeError(
      `${op}: logProbs of shape ${formatShape(logProbs.shape)} has no time steps`,
    );
  }

  // Labels [N, S]: S is the padded width, or the longest target where that is known.
  const S = padded
    ? targets.shape[1]
    : Math.min(targets.shape[0], tl.range ? Math.max(tl.range[1], 0) : targets.shape[0]);
  const Sx = 2 * S + 1;
  // The alphas are kept padded, [N, P]: column j holds state j - 1 of the extended target and
  // column 0 a dead state (always -inf) that stands in for a missing predecessor, so that a time
  // step is one gather of the three predecessors and one log-sum-exp over them.
  const P = Sx + 1;
  const device = lp.device;
  const dtype = lp.dtype;
  const ilCol = il.device.reshape([N, 1]);
  // Steps past the longest input are never read.
  const steps = il.range ? Math.max(il.range[1], 1) : T;
  const { extP, sources, startAdd, endAdd, reading } = noGrad(() => {
    const tlCol = tl.device.reshape([N, 1]);
    const blankCol = full([N, 1], blank, { dtype: "int32", device });
    let ext = blankCol;
    if (S > 0) {
      const cols = arangeOn(S, device).reshape([1, S]);
      const inTarget = cols.lt(tlCol);
      let labels = targets;
      if (!padded) {
        // Row n of the concatenation starts at the sum of the lengths before it.
        const starts = tl.device.cumsum(0).sub(tl.device).reshape([N, 1]);
        const index = where(inTarget, starts.add(cols), 0).clamp(0, targets.shape[0] - 1);
        labels = gatherInRange(targets.reshape([1, -1]).expand([N, targets.shape[0]]), 1, index);
      }
      // Past a target's end the label is the blank: those states never reach the end ones.
      labels = where(inTarget, labels.narrow(1, 0, S), blank).to("int32");
      checkClassRange(op, labels, C, " in targets");
      const pairs = stack([full([N, S], blank, { dtype: "int32", device }), labels], 2);
      ext = cat([pairs.reshape([N, 2 * S]), blankCol], 1);
    }
    const cols = arangeOn(P, device).reshape([1, P]);
    // A 0-d zero of the input's dtype: two numbers would make the default dtype (float64 fails
    // on webgpu).
    const zero = full([], 0, { dtype, device });
    const additive = (keep: Tensor) => where(keep, zero, -Infinity);
    // A label may follow the one two states back (skipping a blank) unless they are equal.
    const skip = Sx > 2
      ? cat([
        full([N, 3], 0, { dtype: "int32", device }),
        ext.narrow(1, 2, Sx - 2).ne(ext.narrow(1, 0, Sx - 2)).to("int32"),
      ], 1)
      : full([N, P], 0, { dtype: "int32", device });
    // The predecessors of column j: itself, j - 1 and j - 2 where allowed, else the dead column.
    const sources = stack([
      cols.expand([N, P]),
      where(cols.ge(2), cols.sub(1), 0).to("int32").expand([N, P]),
      where(skip, cols.sub(2), 0).to("int32"),
    ], 1).reshape([N, 3 * P]);
    const twice = tlCol.mul(2);
    const frames = arangeOn(T, device).reshape([T, 1, 1]);
    return {
      extP: cat([blankCol, ext], 1),
      sources,
      startAdd: additive(cols.eq(1).add(cols.eq(2))),
      endAdd: additive(cols.eq(twice).add(cols.eq(twice.add(1)))),
      // Rows past an input's end (padding, perhaps NaN) and of the dead column read as 0.
      reading: frames.lt(ilCol.reshape([1, N, 1])).mul(cols.gt(0).reshape([1, 1, P])),
    };
  });
  const rows = where(
    reading,
    gatherInRange(lp, 2, extP.reshape([1, N, P]).expand([T, N, P])),
    0,
  );
  // The alphas of every frame, [steps, N, P], or the composition's list of them.
  let alphas: Tensor | Tensor[];
  let alpha: Tensor;
  if (hasKernel(device, "ctcAlpha") && hasKernel(device, "ctcAlphaBackward")) {
    alphas = kernelAlphas(steps < T ? rows.narrow(0, 0, steps) : rows, startAdd, sources);
    alpha = alphas.select(0, steps - 1);
  } else {
    alphas = composedAlphas(rows.unbind(0), startAdd, sources, steps);
    alpha = alphas[steps - 1];
  }
  // Each sample's alphas at its last input frame.
  if (!(il.range && il.range[0] === steps)) {
    const last = noGrad(() => il.device.sub(1).clamp(0).reshape([1, N, 1]).expand([1, N, P]));
    const all = Array.isArray(alphas) ? stack(alphas) : alphas;
    alpha = gatherInRange(all, 0, last).reshape([N, P]);
  }
  let nll = logSumExpOver(alpha.add(endAdd), 1).neg();
  // No input at all: only the empty target has an alignment.
  if (!(il.range && il.range[0] > 0)) {
    const none = noGrad(() => il.device.eq(0));
    const zero = full([], 0, { dtype, device });
    nll = where(none, noGrad(() => where(tl.device.eq(0), zero, Infinity)), nll);
  }
  const impossible = noGrad(() => nll.eq(Infinity));
  if (zeroInfinity) nll = where(impossible, 0, nll);
  if (lp.requiresGrad) nll = nll.add(pytorchTerm(lp, ilCol, impossible, zeroInfinity));
  if (reduction === "none") return batched ? nll : nll.reshape([]);
  if (reduction === "sum") return nll.sum();
  return nll.div(noGrad(() => tl.device.clamp(1).to(dtype))).mean();
}

/**
 * The alphas of frames 0 to `steps - 1` from `rows` (each [N, P]): the
 * first plus `startAdd`, then each the log-sum-exp of its three predecessors
 * (`sources`, [N, 3P]) in the frame before, plus its row.
 */
function composedAlphas(
  rows: readonly Tensor[],
  startAdd: Tensor,
  sources: Tensor,
  steps: number,
): Tensor[] {
  const [N, P] = rows[0].shape;
  let alpha = rows[0].add(startAdd);
  const alphas = [alpha];
  for (let t = 1; t < steps; t++) {
    alpha = logSumExpOver(gatherInRange(alpha, 1, sources).reshape([N, 3, P]), 1).add(rows[t]);
    alphas.push(alpha);
  }
  return alphas;
}

/**
 * {@link composedAlphas} of `rows` [steps, N, P] in one launch of the backend's `ctcAlpha`,
 * [steps, N, P], and its gradient in one of `ctcAlphaBackward`; under createGraph the
 * composition is re-run and differentiated instead, so second derivatives stay exact.
 */
function kernelAlphas(rows: Tensor, startAdd: Tensor, sources: Tensor): Tensor {
  const [steps, batch, states] = rows.shape;
  const device = rows.device;
  const shape = { steps, batch, states, dtype: rows.dtype };
  const sourcesBuffer = sources.storage.buffer("ctcAlpha");
  const out = empty(rows.shape, rows.dtype, device);
  launch(device, "ctcAlpha", {
    x: rows.storage.buffer("ctcAlpha"),
    // The same start for every sample, [1, P], as the kernel's [N, P].
    start: noGrad(() => startAdd.expand([batch, states])).storage.buffer("ctcAlpha"),
    sources: sourcesBuffer,
    out: out.storage.buffer(),
    ...shape,
  });
  return record("ctcLoss", [rows], out, ([g]) => {
    if (recording()) {
      const again = () => stack(composedAlphas(rows.unbind(0), startAdd, sources, steps));
      return recomputedBackward([rows], again, g!);
    }
    const gx = empty(rows.shape, rows.dtype, device);
    launch(device, "ctcAlphaBackward", {
      alpha: out.storage.buffer("ctcAlphaBackward"),
      sources: sourcesBuffer,
      g: g!.storage.buffer("ctcAlphaBackward"),
      out: gx.storage.buffer(),
      ...shape,
    });
    return [gx];
  });
}

/**
 * Zeros [N] whose gradient is the term PyTorch's CTC gradient has beyond the
 * loss's own: `exp(lp) · g` at t < the input length (NaN for an impossible
 * alignment, 0 with `zeroInfinity`), which makes it the logits' gradient
 * when `lp` is their `logSoftmax`.
 */
function pytorchTerm(lp: Tensor, ilCol: Tensor, impossible: Tensor, zeroInfinity: boolean): Tensor {
  const [T, N] = lp.shape;
  const zeros = full([N], 0, { dtype: lp.dtype, device: lp.device });
  // Recorded ops of lp and g: under createGraph the term is differentiable too (PyTorch 1.13
  // has no double backward for ctc_loss).
  return record("ctcLoss", [lp], zeros, ([g]) => {
    const reading = arangeOn(T, lp.device).reshape([T, 1, 1]).lt(ilCol.reshape([1, N, 1]));
    const bad = impossible.reshape([1, N, 1]);
    let coef = g!.reshape([1, N, 1]);
    if (zeroInfinity) coef = where(bad, 0, coef);
    let grad = lp.exp().mul(coef);
    if (!zeroInfinity) grad = where(bad, NaN, grad);
    return [where(reading, grad, 0)];
  });
}
