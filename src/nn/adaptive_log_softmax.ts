/**
 * `AdaptiveLogSoftmaxWithLoss`, as `torch.nn`'s: the efficient softmax
 * approximation of Grave et al. (a shortlist of frequent classes in the
 * head, the rest in clusters behind low-rank projections).
 * @module
 */

import { where } from "../ops/indexing.ts";
import { cat, checkIndexRange } from "../ops/view.ts";
import { formatShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { type FactoryOptions, Linear, ModuleList, Sequential } from "./layers.ts";
import { Module } from "./module.ts";
import { checkCount, checkFloatInput, checkTensor, sameDevice } from "./util.ts";

/**
 * Python's float `a // b` for positive operands: `(a - a % b) / b` rounded,
 * which can be one below `Math.floor(a / b)` (`11 // 1.1` is 9, `11 / 1.1`
 * is 10), so that the projection widths are PyTorch's.
 */
function pyFloorDiv(a: number, b: number): number {
  const div = (a - (a % b)) / b;
  const floor = Math.floor(div);
  return div - floor > 0.5 ? floor + 1 : floor;
}

/** Options of {@link AdaptiveLogSoftmaxWithLoss}. */
export interface AdaptiveLogSoftmaxWithLossOptions extends FactoryOptions {
  /** Each cluster's projection is `inFeatures // divValue^(i+1)` wide, Python's floor division (default 4). */
  divValue?: number;
  /** Give the head a bias (default false). */
  headBias?: boolean;
}

/** What {@link AdaptiveLogSoftmaxWithLoss.forward} returns, as PyTorch's `_ASMoutput`. */
export interface ASMOutput {
  /** The target's log-probability per sample, [N] (or [] unbatched). */
  output: Tensor;
  /** The mean negative log-likelihood, []. */
  loss: Tensor;
}

/**
 * Adaptive softmax, as `torch.nn.AdaptiveLogSoftmaxWithLoss`: classes
 * [0, cutoffs[0]) are scored by the `head` together with one logit per
 * cluster; cluster i (classes [cutoffs[i], cutoffs[i+1])) by
 * `tail[i]` = Linear(inFeatures, hsz) → Linear(hsz, size). `forward(input,
 * target)` gives `{ output, loss }`; `logProb(input)` the full [N, nClasses]
 * log-probabilities; `predict(input)` the most likely class (int32).
 * Every cluster runs on every row (no host read picks the rows), the rows
 * that do not belong to it masked out, so values and gradients equal
 * PyTorch's. A target outside [0, nClasses) makes the next read on the
 * device reject with an error naming it.
 */
export class AdaptiveLogSoftmaxWithLoss extends Module {
  /** Input features. */
  readonly inFeatures: number;
  /** Number of classes. */
  readonly nClasses: number;
  /** The cutoffs as given, then `nClasses`. */
  readonly cutoffs: readonly number[];
  /** The projection width divisor. */
  readonly divValue: number;
  /** Whether the head has a bias. */
  readonly headBias: boolean;
  /** Classes scored directly by the head: `cutoffs[0]`. */
  readonly shortlistSize: number;
  /** Number of tail clusters. */
  readonly nClusters: number;
  /** Head outputs: the shortlist and one per cluster. */
  readonly headSize: number;
  /** Linear(inFeatures, headSize). */
  head: Linear;
  /** One Sequential(Linear, Linear) per cluster, both without bias. */
  tail: ModuleList;

  /** An adaptive softmax over `nClasses` split at the increasing `cutoffs`. */
  constructor(
    inFeatures: number,
    nClasses: number,
    cutoffs: readonly number[],
    options: AdaptiveLogSoftmaxWithLossOptions = {},
  ) {
    super();
    const op = "AdaptiveLogSoftmaxWithLoss";
    this.inFeatures = checkCount(`${op}: inFeatures`, inFeatures, false);
    this.nClasses = checkCount(`${op}: nClasses`, nClasses, false);
    const list = [...cutoffs];
    if (
      list.length === 0 ||
      list.some((c, i) =>
        !Number.isInteger(c) || c <= 0 || c > nClasses - 1 || (i > 0 && c <= list[i - 1])
      )
    ) {
      throw new RangeError(
        `${op}: cutoffs should be a sequence of unique, positive integers sorted in an increasing order, where each value is between 1 and nClasses-1 (${
          nClasses - 1
        }), got ${JSON.stringify(cutoffs)}`,
      );
    }
    const divValue = options.divValue ?? 4;
    if (typeof divValue !== "number" || !(divValue > 0) || !Number.isFinite(divValue)) {
      throw new RangeError(`${op}: divValue must be a positive number, got ${divValue}`);
    }
    this.divValue = divValue;
    this.headBias = options.headBias ?? false;
    this.cutoffs = [...list, nClasses];
    this.shortlistSize = this.cutoffs[0];
    this.nClusters = this.cutoffs.length - 1;
    this.headSize = this.shortlistSize + this.nClusters;
    const factory = { device: options.device, dtype: options.dtype };
    this.head = new Linear(inFeatures, this.headSize, { ...factory, bias: this.headBias });
    const tails: Module[] = [];
    for (let i = 0; i < this.nClusters; i++) {
      const hsz = pyFloorDiv(inFeatures, divValue ** (i + 1));
      const osz = this.cutoffs[i + 1] - this.cutoffs[i];
      tails.push(
        new Sequential(
          new Linear(inFeatures, hsz, { ...factory, bias: false }),
          new Linear(hsz, osz, { ...factory, bias: false }),
        ),
      );
    }
    this.tail = new ModuleList(tails);
  }

  /** Cluster `i`'s projection. */
  private cluster(i: number): Sequential {
    return this.tail.at(i) as Sequential;
  }

  /** `input` checked and batched ([N, inFeatures]). */
  private checkInput(op: string, input: Tensor): Tensor {
    checkFloatInput(op, input);
    if (input.ndim !== 1 && input.ndim !== 2) {
      throw new RangeError(
        `${op}: expected a 1-D [inFeatures] or 2-D [N, inFeatures] input, got shape ${
          formatShape(input.shape)
        }`,
      );
    }
    if (input.shape[input.ndim - 1] !== this.inFeatures) {
      throw new RangeError(
        `${op}: input of shape ${
          formatShape(input.shape)
        } does not end in inFeatures ${this.inFeatures}`,
      );
    }
    return input.ndim === 1 ? input.unsqueeze(0) : input;
  }

  /** The [N, nClasses] log-probabilities from `input` [N, in] and its head output. */
  private fullLogProb(input: Tensor, headOutput: Tensor): Tensor {
    const head = headOutput.logSoftmax(1);
    const parts = [head.narrow(1, 0, this.shortlistSize)];
    for (let i = 0; i < this.nClusters; i++) {
      const logits = this.cluster(i).forward(input) as Tensor;
      parts.push(logits.logSoftmax(1).add(head.narrow(1, this.shortlistSize + i, 1)));
    }
    return cat(parts, 1);
  }

  /**
   * `{ output, loss }` for `input` [N, inFeatures] and int32 `target` [N]
   * (or [inFeatures] and []): each sample's log-probability of its target
   * and the mean negative of them.
   */
  override forward(input: Tensor, target: Tensor): ASMOutput {
    const op = "AdaptiveLogSoftmaxWithLoss.forward";
    checkTensor(op, "target", target);
    if (target.dtype !== "int32") {
      throw new TypeError(`${op}: target must hold int32 class indices, got ${target.dtype}`);
    }
    if (target.ndim > 1) {
      throw new RangeError(
        `${op}: 0D or 1D target tensor expected, multi-target not supported (target of shape ${
          formatShape(target.shape)
        })`,
      );
    }
    if (target.ndim === 1 && (input.ndim !== 2 || input.shape[0] !== target.shape[0])) {
      throw new RangeError(
        `${op}: a 1D target of shape ${
          formatShape(target.shape)
        } expects a 2D input with as many rows, got input of shape ${formatShape(input.shape)}`,
      );
    }
    if (target.ndim === 0 && input.ndim !== 1) {
      throw new RangeError(
        `${op}: a 0D target expects a 1D input, got input of shape ${formatShape(input.shape)}`,
      );
    }
    const x = this.checkInput(op, input);
    sameDevice(op, { input, target });
    checkIndexRange(
      target,
      this.nClasses,
      (bad) => `${op}: target value ${bad} is outside [0, ${this.nClasses - 1}]`,
    );
    return forwardScope(() => {
      const t = target.reshape([-1, 1]);
      const head = (this.head.forward(x) as Tensor).logSoftmax(1);
      // The head's column: the class itself in the shortlist, else its cluster's.
      let column = t;
      let output: Tensor | null = null;
      // 0 in the shortlist, i + 1 in cluster i.
      let clusterOf = t.ge(this.cutoffs[0]).to("int32");
      for (let i = 1; i < this.nClusters; i++) {
        clusterOf = clusterOf.add(t.ge(this.cutoffs[i]).to("int32"));
      }
      for (let i = 0; i < this.nClusters; i++) {
        const inCluster = clusterOf.eq(i + 1);
        column = where(inCluster, this.shortlistSize + i, column);
        // Other rows enter as zeros: PyTorch runs a cluster on its own rows
        // only, so a non-finite row must not reach this cluster's gradients.
        const rows = where(inCluster, x, 0);
        const logp = (this.cluster(i).forward(rows) as Tensor).logSoftmax(1);
        const local = where(inCluster, t.sub(this.cutoffs[i]), 0);
        output = where(inCluster, logp.gather(1, local), output ?? 0);
      }
      const picked = output!.add(head.gather(1, column)).reshape([-1]);
      const loss = picked.neg().mean();
      return { output: target.ndim === 0 ? picked.squeeze(0) : picked, loss };
    });
  }

  /** The log-probabilities of every class, [N, nClasses] (or [nClasses]), as `log_prob`. */
  logProb(input: Tensor): Tensor {
    const x = this.checkInput("AdaptiveLogSoftmaxWithLoss.logProb", input);
    return forwardScope(() => {
      const out = this.fullLogProb(x, this.head.forward(x) as Tensor);
      return input.ndim === 1 ? out.squeeze(0) : out;
    });
  }

  /**
   * The most likely class of each row, [N] int32 (or [] unbatched), as
   * `predict`: the head's choice when it is in the shortlist, otherwise
   * that of the full distribution.
   */
  predict(input: Tensor): Tensor {
    const x = this.checkInput("AdaptiveLogSoftmaxWithLoss.predict", input);
    return forwardScope(() => {
      const headOutput = this.head.forward(x) as Tensor;
      const first = headOutput.argmax(1);
      const full = this.fullLogProb(x, headOutput).argmax(1);
      const out = where(first.lt(this.shortlistSize), first, full).to("int32");
      return input.ndim === 1 ? out.squeeze(0) : out;
    });
  }
}
