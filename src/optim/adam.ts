/**
 * Adam and AdamW, as `torch.optim.Adam` / `torch.optim.AdamW`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { Optimizer, type ParamGroup, type ParamGroupInput, type ScalarFn } from "./optimizer.ts";
import { checkNumber, checkOptionNames } from "./util.ts";
import { hasKernel, launch } from "../ops/util.ts";

/** Options of {@link Adam} and {@link AdamW}. */
export interface AdamOptions {
  /** Learning rate (default 1e-3). */
  lr?: number;
  /** Decay rates of the first and second moment estimates (default [0.9, 0.999]). */
  betas?: readonly [number, number];
  /** Added to the denominator (default 1e-8). */
  eps?: number;
  /** Adam: L2 penalty added to the gradient (default 0). AdamW: decoupled decay (default 0.01). */
  weightDecay?: number;
  /** Use the maximum of past second moments (default false). */
  amsgrad?: boolean;
  /** Maximize the objective instead (default false). */
  maximize?: boolean;
}

/** The options of an Adam parameter group, all set. */
export type AdamGroupOptions = Required<AdamOptions>;

function resolve(options: AdamOptions, weightDecay: number): AdamGroupOptions {
  if (options === null || typeof options !== "object") {
    throw new TypeError("Adam: options must be an object");
  }
  return {
    lr: options.lr ?? 1e-3,
    betas: options.betas ? [options.betas[0], options.betas[1]] : [0.9, 0.999],
    eps: options.eps ?? 1e-8,
    weightDecay: options.weightDecay ?? weightDecay,
    amsgrad: options.amsgrad ?? false,
    maximize: options.maximize ?? false,
  };
}

/** AdamW's options resolved, after checking the names the caller gave. */
function checkedAdamW(options: AdamOptions): AdamGroupOptions {
  const resolved = resolve(options, 0.01);
  checkOptionNames("AdamW", options, resolved);
  return resolved;
}

/**
 * Adam with PyTorch's update (bias-corrected moments; `weightDecay` adds
 * `weightDecay·p` to the gradient). State per parameter: `step` (a number),
 * `expAvg`, `expAvgSq` and, with `amsgrad`, `maxExpAvgSq`.
 */
export class Adam extends Optimizer<AdamGroupOptions> {
  /** Whether weight decay is decoupled (AdamW) rather than an L2 term. */
  protected readonly decoupled: boolean = false;

  /** An optimizer over `params` (tensors or parameter groups). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<AdamGroupOptions>>,
    options: AdamOptions = {},
  ) {
    super(params, resolve(options, 0), options);
  }

  /** Checks one group's options. */
  protected override validateOptions(o: AdamGroupOptions): void {
    const name = this.constructor.name;
    checkNumber(name, "learning rate", o.lr);
    checkNumber(name, "epsilon value", o.eps);
    if (!Array.isArray(o.betas) || o.betas.length !== 2) {
      throw new TypeError(`${name}: betas must be two numbers, got ${JSON.stringify(o.betas)}`);
    }
    checkNumber(name, "beta parameter at index 0", o.betas[0], 0, 1);
    checkNumber(name, "beta parameter at index 1", o.betas[1], 0, 1);
    checkNumber(name, "weight_decay value", o.weightDecay);
    if (typeof o.amsgrad !== "boolean" || typeof o.maximize !== "boolean") {
      throw new TypeError(`${name}: amsgrad and maximize must be booleans`);
    }
  }

  /**
   * PyTorch's (single-tensor) Adam/AdamW update of one group: the backend's
   * fused `adam` kernel where it has one (not for amsgrad), else composed
   * from elementwise ops.
   */
  protected override updateGroup(group: ParamGroup<AdamGroupOptions>, scalar: ScalarFn): void {
    const { lr, eps, weightDecay, amsgrad, maximize } = group;
    const [beta1, beta2] = group.betas;
    for (const p of group.params) {
      const grad = p.grad;
      if (!grad) continue;
      const state = this.stateOf(p);
      if (typeof state.step !== "number") {
        state.step = 0;
        state.expAvg = this.zerosState(p);
        state.expAvgSq = this.zerosState(p);
        if (amsgrad) state.maxExpAvgSq = this.zerosState(p);
      } else if (amsgrad && !state.maxExpAvgSq) state.maxExpAvgSq = this.zerosState(p);
      const step = state.step + 1;
      state.step = step;
      const expAvg = state.expAvg as Tensor;
      const expAvgSq = state.expAvgSq as Tensor;
      // Bias corrections in float64 on the host, as PyTorch computes them in Python.
      const stepSize = lr / (1 - beta1 ** step);
      const correction2Sqrt = Math.sqrt(1 - beta2 ** step);
      const fused = !amsgrad && hasKernel(p.device, "adam") &&
        [grad, expAvg, expAvgSq].every((t) => t.device === p.device && t.dtype === p.dtype);
      if (fused) {
        // One kernel instead of ~16 per parameter, the same numbers.
        launch(p.device, "adam", {
          param: p.storage.buffer("Adam.step"),
          grad: grad.storage.buffer("Adam.step"),
          expAvg: expAvg.storage.buffer("Adam.step"),
          expAvgSq: expAvgSq.storage.buffer("Adam.step"),
          numel: p.numel(),
          lr,
          beta1,
          beta2,
          eps,
          weightDecay,
          decoupled: this.decoupled,
          maximize,
          stepSize,
          correction2Sqrt,
          dtype: p.dtype,
        });
        for (const t of [p, expAvg, expAvgSq]) t.storage.markModified();
        continue;
      }
      let g = maximize ? grad.neg() : grad;
      if (this.decoupled) {
        if (weightDecay !== 0) p._assign(p.mul(scalar(1 - lr * weightDecay, p)));
      } else if (weightDecay !== 0) g = g.add(p.mul(scalar(weightDecay, p)));
      expAvg._assign(expAvg.mul(scalar(beta1, p)).add(g.mul(scalar(1 - beta1, p))));
      // addcmul_(g, g, value=1-β2) computes value·g·g in that order.
      expAvgSq._assign(expAvgSq.mul(scalar(beta2, p)).add(g.mul(scalar(1 - beta2, p)).mul(g)));
      let second = expAvgSq;
      if (amsgrad) {
        const max = state.maxExpAvgSq as Tensor;
        max._assign(max.maximum(expAvgSq));
        second = max;
      }
      const denom = second.sqrt().div(scalar(correction2Sqrt, p)).add(scalar(eps, p));
      // addcdiv_(m, denom, value=-stepSize) computes (value·m)/denom.
      p._assign(p.add(expAvg.mul(scalar(-stepSize, p)).div(denom)));
    }
  }
}

/**
 * AdamW: Adam with decoupled weight decay (`p = p·(1 − lr·weightDecay)`
 * before the Adam update), default `weightDecay` 0.01, as `torch.optim.AdamW`.
 */
export class AdamW extends Adam {
  /** AdamW decays decoupled from the gradient. */
  protected override readonly decoupled: boolean = true;

  /** An optimizer over `params` (tensors or parameter groups). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<AdamGroupOptions>>,
    options: AdamOptions = {},
  ) {
    // Adam's constructor sees the resolved options: the caller's names are checked here.
    super(params, checkedAdamW(options));
  }
}
