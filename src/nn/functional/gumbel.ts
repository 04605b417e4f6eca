/**
 * `gumbelSoftmax`, as `torch.nn.functional.gumbel_softmax` of PyTorch 1.13.
 * The noise comes from the seeded `rand` stream on the logits' device
 * (`manualSeed` repeats it); PyTorch's generator is a different one, so the
 * samples follow the same distribution, not PyTorch's values.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { arangeOn, rand } from "../../ops/factory.ts";
import { normalizeDim } from "../../shape.ts";
import { forwardScope, tidy } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFloatInput } from "../util.ts";

/** Options of {@link gumbelSoftmax}. */
export interface GumbelSoftmaxOptions {
  /** Temperature, positive (default 1): lower is closer to one-hot. */
  tau?: number;
  /**
   * True: the output is the one-hot of the sample's argmax, with the
   * gradient of the soft sample (straight-through); default false.
   */
  hard?: boolean;
  /** The dim the categories run along (default -1). */
  dim?: number;
}

/**
 * A sample from the Gumbel-softmax (concrete) distribution over the
 * categories along `dim`, as `torch.nn.functional.gumbel_softmax`:
 * softmax((logits + g) / tau) with g = -log(-log(u)), u uniform; with
 * `hard`, one-hot at its argmax (the first on ties) in the forward and the
 * soft sample's gradient in the backward.
 */
export function gumbelSoftmax(logits: Tensor, options: GumbelSoftmaxOptions = {}): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => gumbelSoftmaxUnscoped(logits, options));
}

function gumbelSoftmaxUnscoped(logits: Tensor, options: GumbelSoftmaxOptions): Tensor {
  const op = "gumbelSoftmax";
  checkFloatInput(op, logits, "logits");
  const tau = options.tau ?? 1;
  // PyTorch divides by any tau; 0 or a negative one gives NaN or a reversed
  // distribution, which is never what a caller means.
  if (typeof tau !== "number" || !(tau > 0) || !Number.isFinite(tau)) {
    throw new RangeError(`${op}: tau must be a positive finite number, got ${tau}`);
  }
  const dim = normalizeDim(options.dim ?? -1, logits.ndim, op);
  // Exponential(1) noise as -log(u), u in [0, 1): never 0 (whose log is an
  // infinite Gumbel and a NaN softmax), as -log(1 - u) is when 1 - u rounds
  // to 1 (u below 2^-25 in float32, about one element in 10^7).
  const gumbels = noGrad(() =>
    tidy(() =>
      rand([...logits.shape], { dtype: logits.dtype, device: logits.device })
        .log().neg().log().neg()
    )
  );
  const soft = logits.add(gumbels).div(tau).softmax(dim);
  if (!options.hard) return soft;
  const hard = noGrad(() =>
    tidy(() => {
      const size = logits.ndim === 0 ? 1 : logits.shape[dim];
      const at = logits.ndim === 0 ? [] : logits.shape.map((_, i) => (i === dim ? size : 1));
      const index = soft.argmax(dim, true);
      return index.eq(arangeOn(size, logits.device).reshape(at)).to(logits.dtype);
    })
  );
  // Straight-through: the one-hot's value, the soft sample's gradient.
  return hard.sub(soft.detach()).add(soft);
}
