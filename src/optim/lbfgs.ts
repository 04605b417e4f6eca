/**
 * L-BFGS, as `torch.optim.LBFGS`.
 * @module
 */

import { enableGrad, noGrad } from "../autograd.ts";
import { full } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import { cat } from "../ops/view.ts";
import { formatShape, sameShape } from "../shape.ts";
import { tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import {
  Optimizer,
  type OptimizerStateDict,
  type ParamGroup,
  type ParamGroupInput,
} from "./optimizer.ts";
import { checkNumber } from "./util.ts";

/** Options of {@link LBFGS}. */
export interface LBFGSOptions {
  /** Learning rate: the step length tried first, after the first iteration (default 1). */
  lr?: number;
  /** Most iterations per `step` (default 20). */
  maxIter?: number;
  /** Most evaluations of the closure per `step` (default `⌊maxIter·5/4⌋`). */
  maxEval?: number;
  /** Stop when the largest gradient element is at most this (default 1e-7, PyTorch 1.13's). */
  toleranceGrad?: number;
  /** Stop when the loss or the parameters change by less than this (default 1e-9). */
  toleranceChange?: number;
  /** How many curvature pairs are kept (default 100). */
  historySize?: number;
  /** `"strong_wolfe"` for a line search, or null for the fixed step `lr` (default null). */
  lineSearchFn?: "strong_wolfe" | null;
}

/** The options of the L-BFGS parameter group, all set. */
export type LBFGSGroupOptions = Required<LBFGSOptions>;

/**
 * L-BFGS's history, as PyTorch keeps it under its first parameter (`state[0]`
 * of the state dict, PyTorch's keys): vectors over every parameter
 * flattened and concatenated, and numbers for PyTorch's 0-d tensors.
 * `d` ... `prev_loss` are absent until an iteration has run; `al` from the
 * second iteration on.
 */
export interface LBFGSState {
  /** Closure evaluations over every step. */
  func_evals: number;
  /** Iterations over every step. */
  n_iter: number;
  /** The two-loop recursion's coefficients (`historySize` slots, null until used). */
  al?: (number | null)[];
  /** The last search direction. */
  d?: Tensor | null;
  /** The last step length. */
  t?: number | null;
  /** Gradient differences `y` of the kept curvature pairs, oldest first. */
  old_dirs?: Tensor[];
  /** Steps `s` of the kept curvature pairs, oldest first. */
  old_stps?: Tensor[];
  /** `1 / (y·s)` of each kept pair. */
  ro?: number[];
  /** The initial inverse Hessian's scale, `y·s / y·y` of the newest pair (1 before any). */
  H_diag?: number;
  /** The gradient at the start of the last iteration. */
  prev_flat_grad?: Tensor | null;
  /** The loss at the start of the last iteration. */
  prev_loss?: number | null;
}

/** What {@link LBFGS.stateDict} returns: the base form, its one state entry an {@link LBFGSState}. */
export interface LBFGSStateDict {
  /** The history under index 0 (absent before the first step). */
  state: Record<number, LBFGSState>;
  /** The one parameter group's hyperparameters and the indices of its parameters. */
  param_groups: OptimizerStateDict["param_groups"];
}

/** PyTorch's names of the state keys, by multigrad's own (which are not just snake_case). */
const TORCH_STATE_KEYS: Readonly<Record<string, string>> = {
  funcEvals: "func_evals",
  nIter: "n_iter",
  al: "al",
  d: "d",
  t: "t",
  oldDirs: "old_dirs",
  oldStps: "old_stps",
  ro: "ro",
  hDiag: "H_diag",
  prevFlatGrad: "prev_flat_grad",
  prevLoss: "prev_loss",
};
const OWN_STATE_KEYS: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries(TORCH_STATE_KEYS).map(([own, torch]) => [torch, own]),
);
/** The keys an iteration writes, all or none. */
const ITERATION_KEYS = [
  "d",
  "t",
  "oldDirs",
  "oldStps",
  "ro",
  "hDiag",
  "prevFlatGrad",
  "prevLoss",
] as const;

/** The history as multigrad keeps it; keys are set in PyTorch's order, which its state dict shows. */
interface History {
  funcEvals?: number;
  nIter?: number;
  al?: (number | null)[];
  d?: Tensor | null;
  t?: number | null;
  oldDirs?: Tensor[];
  oldStps?: Tensor[];
  ro?: number[];
  hDiag?: number;
  prevFlatGrad?: Tensor | null;
  prevLoss?: number | null;
}

/** A tensor that survives tidy scopes until the history lets it go. */
function held(t: Tensor): Tensor {
  t.storage.persistent = true;
  return t;
}

/** The minimizer of the cubic through two points with their slopes, within bounds (PyTorch's `_cubic_interpolate`). */
function cubicInterpolate(
  x1: number,
  f1: number,
  g1: number,
  x2: number,
  f2: number,
  g2: number,
  bounds?: [number, number],
): number {
  const [lo, hi] = bounds ?? (x1 <= x2 ? [x1, x2] : [x2, x1]);
  const d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const d2Square = d1 ** 2 - g1 * g2;
  if (d2Square >= 0) {
    const d2 = Math.sqrt(d2Square);
    const minPos = x1 <= x2
      ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
      : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
    return pyMin(pyMax(minPos, lo), hi);
  }
  return (lo + hi) / 2;
}

/** Python's `max(a, b)`: `a` unless `b` is larger (so NaN in `a` stays). */
function pyMax(a: number, b: number): number {
  return b > a ? b : a;
}

/** Python's `min(a, b)`: `a` unless `b` is smaller. */
function pyMin(a: number, b: number): number {
  return b < a ? b : a;
}

/**
 * One evaluation along the search direction: the loss, the flat gradient (owned by the caller)
 * and the directional derivative.
 */
type Evaluate = (t: number) => Promise<[number, Tensor, number]>;

/**
 * L-BFGS with PyTorch 1.13's algorithm (after minFunc): each `step` runs up
 * to `maxIter` iterations of the two-loop recursion over the last
 * `historySize` curvature pairs, with the fixed step `lr` (the first
 * iteration ever scales it by `min(1, 1/‖g‖₁)`) or a strong-Wolfe line
 * search, and stops early on `toleranceGrad`, `toleranceChange` or
 * `maxEval`. PyTorch allows one parameter group only, and so does this.
 *
 * **`step` is async** and needs a closure: `const loss = await
 * opt.step(closure)`. The closure (zero the gradients, compute the loss,
 * `backward()`, return the loss) is called several times per step, and
 * L-BFGS decides from the loss values and from dot products of gradients
 * what to do next, which it must read back from the device (as PyTorch
 * does with `float(...)` and comparisons of 0-d tensors). Each read waits
 * for the device, so an iteration batches them: one read before it moves
 * (the directional derivative, with the two-loop recursion's coefficients,
 * which stay on the device) and one per evaluation of the closure (the
 * loss with what the stop tests and the next curvature pair need). The
 * promise resolves to the closure's first loss, as PyTorch returns
 * `orig_loss`; the parameters are updated in place. The other optimizers'
 * `step` never waits. Do not start a step before the previous one has
 * finished.
 *
 * The scalar arithmetic (step lengths, the line search's interpolation,
 * `ro`, `H_diag`) runs in float64 on the host; PyTorch keeps some of it in
 * 0-d tensors of the parameters' dtype, so with float32 parameters the
 * numbers may differ in their last float32 digit, and the line search's
 * cubic interpolation, ill-conditioned for small steps, can amplify that
 * into another trial step (as it would between PyTorch's own CPU and GPU
 * kernels). Every parameter must be
 * on one device with one dtype (PyTorch's vectors are concatenations of all
 * of them). The history lives in {@link stateDict} (PyTorch's keys, under
 * parameter index 0; see {@link LBFGSState}), not in `state`.
 *
 * @example
 * ```ts
 * import { nn, optim, tensor } from "@multigrad/core";
 * const model = new nn.Linear(2, 1);
 * const x = tensor([[1, 2], [3, 4]]);
 * const y = tensor([[1], [2]]);
 * const opt = new optim.LBFGS(model.parameters(), { lineSearchFn: "strong_wolfe" });
 * const loss = await opt.step(() => {
 *   opt.zeroGrad();
 *   const l = new nn.MSELoss().forward(model.forward(x), y);
 *   l.backward();
 *   return l;
 * });
 * console.log(await loss.item());
 * ```
 */
export class LBFGS extends Optimizer<LBFGSGroupOptions, Promise<Tensor>, LBFGSStateDict> {
  #history: History = {};
  #running = false;

  /** An optimizer over `params` (tensors, or a single parameter group). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<LBFGSGroupOptions>>,
    options: LBFGSOptions = {},
  ) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("LBFGS: options must be an object");
    }
    const maxIter = options.maxIter ?? 20;
    // In PyTorch's order, which its state dicts show.
    super(params, {
      lr: options.lr ?? 1,
      maxIter,
      maxEval: options.maxEval ?? (typeof maxIter === "number" ? Math.floor(maxIter * 5 / 4) : NaN),
      toleranceGrad: options.toleranceGrad ?? 1e-7,
      toleranceChange: options.toleranceChange ?? 1e-9,
      historySize: options.historySize ?? 100,
      lineSearchFn: options.lineSearchFn ?? null,
    }, options);
  }

  /** Adds the parameter group; L-BFGS has exactly one, as PyTorch's. */
  override addParamGroup(group: ParamGroupInput<LBFGSGroupOptions>): void {
    if (this.paramGroups.length > 0) {
      throw new Error(
        "LBFGS doesn't support per-parameter options (parameter groups): it has one group already",
      );
    }
    super.addParamGroup(group);
  }

  /** Checks the group's options. */
  protected override validateOptions(o: LBFGSGroupOptions): void {
    checkNumber("LBFGS", "learning rate", o.lr);
    for (const key of ["maxIter", "maxEval", "historySize"] as const) {
      const v = o[key];
      if (typeof v !== "number" || !Number.isInteger(v) || v < 1) {
        throw new RangeError(`LBFGS: ${key} must be an integer >= 1, got ${String(v)}`);
      }
    }
    checkNumber("LBFGS", "toleranceGrad", o.toleranceGrad);
    checkNumber("LBFGS", "toleranceChange", o.toleranceChange);
    if (o.lineSearchFn !== null && o.lineSearchFn !== "strong_wolfe") {
      throw new RangeError(
        `LBFGS: only 'strong_wolfe' is supported as lineSearchFn (or null), got ${
          JSON.stringify(o.lineSearchFn)
        }`,
      );
    }
  }

  /** Never called: {@link step} is L-BFGS's own. */
  protected override updateGroup(): void {
    throw new Error("LBFGS: updateGroup is not used; step runs the iterations");
  }

  /**
   * Runs up to `maxIter` L-BFGS iterations, calling `closure` (with grad
   * enabled) to re-evaluate the loss and its gradients. Async: resolves to
   * the closure's first loss once the parameters are updated (see the class
   * notes). Throws at once without a closure.
   */
  override step(closure: () => Tensor): Promise<Tensor> {
    if (typeof closure !== "function") {
      throw new TypeError(
        `LBFGS.step: needs a closure that zeroes the gradients, computes the loss, calls backward() and returns the loss (L-BFGS evaluates the function several times per step); got ${
          closure === null ? "null" : typeof closure
        }`,
      );
    }
    if (this.#running) {
      throw new Error("LBFGS.step: the previous step has not finished; await it first");
    }
    const group = this.paramGroups[0];
    this.validateOptions(group);
    this.#checkParams(group.params);
    this.#running = true;
    return this.#run(group, closure).finally(() => this.#running = false);
  }

  /** Every parameter usable, on one device with one dtype (the flat vectors mix them all). */
  #checkParams(params: Tensor[]): void {
    const [first] = params;
    params.forEach((p, i) => {
      if (p.storage.disposed) {
        throw new Error(`LBFGS.step: parameter ${i} (shape ${formatShape(p.shape)}) was disposed`);
      }
      if (p.device !== first.device || p.dtype !== first.dtype) {
        throw new Error(
          `LBFGS.step: every parameter must be on one device with one dtype: parameter ${i} is ${p.dtype} on ${p.device}, parameter 0 ${first.dtype} on ${first.device}`,
        );
      }
    });
  }

  async #run(group: ParamGroup<LBFGSGroupOptions>, closure: () => Tensor): Promise<Tensor> {
    const { lr, maxIter, maxEval, toleranceGrad, toleranceChange, historySize, lineSearchFn } =
      group;
    const params = group.params;
    const [first] = params;
    const scalar = (v: number) => full([], v, { dtype: first.dtype, device: first.device });
    const run = <T>(fn: () => T): T => tidy(() => noGrad(fn));
    /**
     * The values of 0-d results, which are then released: in one read, as each read waits for
     * the device (a round trip of milliseconds on a GPU), so an iteration reads what it needs
     * at once.
     */
    const readAll = async (values: Tensor[], borrowed?: Tensor): Promise<number[]> => {
      try {
        const [v0] = values;
        // A loss of another dtype or device than the parameters' is read on its own.
        if (values.some((v) => v.dtype !== v0.dtype || v.device !== v0.device)) {
          return await Promise.all(values.map((v) => v.item()));
        }
        const all = run(() => cat(values.map((v) => v.reshape([1]))));
        try {
          return Array.from(await all.data());
        } finally {
          all.dispose();
        }
      } finally {
        for (const v of values) if (v !== borrowed) v.dispose();
      }
    };
    const dot = (a: Tensor, b: Tensor) => run(() => a.mul(b).sum());
    const absMax = (a: Tensor) => run(() => a.abs().max());
    const evaluate = (): Tensor => {
      const loss = tidy(() => enableGrad(closure));
      if (!(loss instanceof Tensor)) {
        throw new TypeError(
          `LBFGS.step: the closure must return the loss as a Tensor, got ${
            loss === null ? "null" : typeof loss
          }`,
        );
      }
      if (loss.numel() !== 1) {
        throw new RangeError(
          `LBFGS.step: the closure's loss must have one element, got shape ${
            formatShape(loss.shape)
          }`,
        );
      }
      return loss;
    };
    /** The loss (for {@link readAll}, which releases it) and the flat gradient of one more evaluation. */
    const evaluateAgain = (): [Tensor, Tensor] => {
      const loss = evaluate();
      return [loss, gatherFlatGrad()];
    };
    const gatherFlatGrad = () =>
      run(() =>
        cat(params.map((p) => {
          const g = p.grad;
          return g ? g.reshape([p.numel()]) : full([p.numel()], 0, {
            dtype: p.dtype,
            device: p.device,
          });
        }))
      );
    const addGrad = (t: number, d: Tensor) =>
      run(() => {
        const step = scalar(t);
        let offset = 0;
        for (const p of params) {
          p._assign(p.add(d.narrow(0, offset, p.numel()).reshape(p.shape).mul(step)));
          offset += p.numel();
        }
      });

    const s = this.#history;
    s.funcEvals ??= 0;
    s.nIter ??= 0;

    let d = s.d ?? null;
    let t = s.t ?? null;
    let oldDirs = s.oldDirs ?? [];
    let oldStps = s.oldStps ?? [];
    let ro = s.ro ?? [];
    let hDiag = s.hDiag ?? 1;
    let prevFlatGrad = s.prevFlatGrad ?? null;
    let prevLoss = s.prevLoss ?? null;
    // Tensors of the history this step replaced: released once it is saved.
    const dropped: Tensor[] = [];
    /**
     * The next curvature pair `y = g − prev_flat_grad`, `s = d·t` with `y·s` and `y·y`: made and
     * read with the values that end an iteration, for the next one (released if there is none).
     */
    let pair: { y: Tensor; sv: Tensor; ys: number; yy: number } | null = null;
    const nextPair = (g: Tensor): [Tensor, Tensor, Tensor, Tensor] | [] => {
      if (!d || t === null || !prevFlatGrad) return [];
      const [dNow, tNow, pfg] = [d, t, prevFlatGrad];
      const y = held(run(() => g.sub(pfg)));
      const sv = held(run(() => dNow.mul(scalar(tNow))));
      return [y, sv, dot(y, sv), dot(y, y)];
    };
    const takePair = ([y, sv]: Tensor[], [ys, yy]: number[]) => {
      if (y) pair = { y, sv, ys, yy };
    };

    const origLoss = evaluate();
    try {
      let currentEvals = 1;
      s.funcEvals += 1;
      let flatGrad = gatherFlatGrad();
      let loss: number;
      let gradMax: number;
      {
        const made = s.nIter > 0 ? nextPair(flatGrad) : [];
        try {
          const values = await readAll([origLoss, absMax(flatGrad), ...made.slice(2)], origLoss);
          [loss, gradMax] = values;
          takePair(made, values.slice(2));
        } catch (error) {
          flatGrad.dispose();
          for (const x of made.slice(0, 2)) x.dispose();
          throw error;
        }
      }
      if (gradMax <= toleranceGrad) {
        flatGrad.dispose();
        const unused = pair as { y: Tensor; sv: Tensor } | null;
        unused?.y.dispose();
        unused?.sv.dispose();
        return origLoss;
      }
      let nIter = 0;
      try {
        while (nIter < maxIter) {
          nIter += 1;
          s.nIter += 1;
          let al: Tensor[] = [];
          if (s.nIter === 1) {
            if (d) dropped.push(d);
            d = held(run(() => flatGrad.neg()));
            dropped.push(...oldDirs, ...oldStps);
            oldDirs = [];
            oldStps = [];
            ro = [];
            hDiag = 1;
          } else {
            if (!d || !pair) {
              throw new Error("LBFGS.step: the history lacks d, t or prev_flat_grad");
            }
            const { y, sv, ys, yy } = pair as { y: Tensor; sv: Tensor; ys: number; yy: number };
            pair = null;
            if (ys > 1e-10) {
              if (oldDirs.length === historySize) {
                dropped.push(oldDirs.shift()!, oldStps.shift()!);
                ro.shift();
              }
              oldDirs.push(y);
              oldStps.push(sv);
              ro.push(1 / ys);
              hDiag = ys / yy;
            } else {
              y.dispose();
              sv.dispose();
            }
            const numOld = oldDirs.length;
            // The two-loop recursion stays on the device (its coefficients as 0-d tensors, as
            // PyTorch's): the coefficients `al` are read with the directional derivative below.
            const h = hDiag;
            s.al ??= new Array(historySize).fill(null);
            dropped.push(d);
            [d, al] = run(() => {
              const coefficients: Tensor[] = new Array(numOld);
              let q = flatGrad.neg();
              for (let i = numOld - 1; i >= 0; i--) {
                coefficients[i] = oldStps[i].mul(q).sum().mul(scalar(ro[i]));
                q = q.sub(oldDirs[i].mul(coefficients[i]));
              }
              let r = q.mul(scalar(h));
              for (let i = 0; i < numOld; i++) {
                const be = oldDirs[i].mul(r).sum().mul(scalar(ro[i]));
                r = r.add(oldStps[i].mul(coefficients[i].sub(be)));
              }
              return [held(r), coefficients];
            });
          }
          const direction: Tensor = d;
          if (prevFlatGrad) dropped.push(prevFlatGrad);
          prevFlatGrad = held(run(() => flatGrad.clone()));
          prevLoss = loss;
          const firstIter = s.nIter === 1;
          const values = await readAll([
            dot(flatGrad, direction),
            ...(firstIter ? [run(() => flatGrad.abs().sum())] : []),
            ...(lineSearchFn !== null ? [absMax(direction)] : []),
            ...al,
          ]);
          const gtd = values[0];
          const saved = s.al;
          if (saved) values.slice(values.length - al.length).forEach((a, i) => saved[i] = a);
          t = firstIter ? pyMin(1, 1 / values[1]) * lr : lr;
          if (gtd > -toleranceChange) break;

          let lsFuncEvals = 0;
          let optCond = false;
          let stepMax = Infinity;
          if (lineSearchFn !== null) {
            const xInit = run(() => params.map((p) => held(p.clone())));
            const pfg: Tensor = prevFlatGrad;
            // What the iteration reads after the search, for the point the search picks, read
            // with each evaluation: the gradient's largest element, the step's (d·t), and the
            // next pair's y·s and y·y.
            const after = new Map<Tensor, number[]>();
            const along: Evaluate = async (step) => {
              addGrad(step, direction);
              const [value, grad] = evaluateAgain();
              run(() => params.forEach((p, i) => p._assign(xInit[i])));
              try {
                const [f, gtdNew, ...rest] = await readAll([
                  value,
                  ...run(() => {
                    const y = grad.sub(pfg);
                    const sv = direction.mul(scalar(step));
                    return [
                      grad.mul(direction).sum(),
                      grad.abs().max(),
                      sv.abs().max(),
                      y.mul(sv).sum(),
                      y.mul(y).sum(),
                    ];
                  }),
                ]);
                after.set(grad, rest);
                return [f, grad, gtdNew];
              } catch (error) {
                grad.dispose();
                throw error;
              }
            };
            let found: [number, Tensor, number, number];
            try {
              found = await strongWolfe(along, t, values[firstIter ? 2 : 1], loss, flatGrad, gtd, {
                toleranceChange,
              });
            } finally {
              for (const x of xInit) x.dispose();
            }
            const [fNew, gNew, tNew, evals] = found;
            if (gNew !== flatGrad) flatGrad.dispose();
            loss = fNew;
            flatGrad = gNew;
            t = tNew;
            lsFuncEvals = evals;
            addGrad(t, direction);
            const tNow = t;
            const read = after.get(flatGrad);
            if (read) {
              // The same operations as nextPair's, whose dot products the evaluation read.
              const g: Tensor = flatGrad;
              const y = held(run(() => g.sub(pfg)));
              const sv = held(run(() => direction.mul(scalar(tNow))));
              [gradMax, stepMax] = read;
              pair = { y, sv, ys: read[2], yy: read[3] };
            } else {
              // The search kept its starting point: read them now.
              const made = nextPair(flatGrad);
              const ends = await readAll([
                absMax(flatGrad),
                run(() => direction.mul(scalar(tNow)).abs().max()),
                ...made.slice(2),
              ]);
              [gradMax, stepMax] = ends;
              takePair(made, ends.slice(2));
            }
            optCond = gradMax <= toleranceGrad;
          } else {
            addGrad(t, direction);
            if (nIter !== maxIter) {
              const [value, grad] = evaluateAgain();
              flatGrad.dispose();
              flatGrad = grad;
              const tNow = t;
              const made = nextPair(flatGrad);
              const ends = await readAll([
                value,
                absMax(flatGrad),
                run(() => direction.mul(scalar(tNow)).abs().max()),
                ...made.slice(2),
              ]);
              [loss, gradMax, stepMax] = ends;
              takePair(made, ends.slice(3));
              optCond = gradMax <= toleranceGrad;
              lsFuncEvals = 1;
            }
          }
          currentEvals += lsFuncEvals;
          s.funcEvals += lsFuncEvals;

          if (nIter === maxIter) break;
          if (currentEvals >= maxEval) break;
          if (optCond) break;
          if (stepMax <= toleranceChange) break;
          if (Math.abs(loss - prevLoss) < toleranceChange) break;
        }
      } finally {
        flatGrad.dispose();
        const unused = pair as { y: Tensor; sv: Tensor } | null;
        if (unused) dropped.push(unused.y, unused.sv);
        // Saved even after an error in the closure, so the history never refers to released tensors.
        s.d = d;
        s.t = t;
        s.oldDirs = oldDirs;
        s.oldStps = oldStps;
        s.ro = ro;
        s.hDiag = hDiag;
        s.prevFlatGrad = prevFlatGrad;
        s.prevLoss = prevLoss;
        const kept = new Set<Tensor>([...oldDirs, ...oldStps]);
        if (d) kept.add(d);
        if (prevFlatGrad) kept.add(prevFlatGrad);
        for (const x of dropped) if (!kept.has(x)) x.dispose();
      }
      return origLoss;
    } catch (error) {
      // The first loss goes to the caller only when the step succeeds.
      origLoss.dispose();
      throw error;
    }
  }

  /**
   * A snapshot: the group's hyperparameters and, once a step ran, the
   * history under parameter index 0 with PyTorch's keys (see
   * {@link LBFGSState}; its tensors are copies).
   */
  override stateDict(): LBFGSStateDict {
    // The groups; the base's per-parameter state is empty (the history is kept apart).
    const out = super.stateDict();
    const entries = Object.entries(this.#history);
    if (entries.length === 0) return out;
    const copy = (v: Tensor | null) => v && noGrad(() => v.clone());
    const entry: Record<string, unknown> = {};
    for (const [key, value] of entries) {
      entry[TORCH_STATE_KEYS[key]] = Array.isArray(value)
        ? value.map((v) => v instanceof Tensor ? copy(v) : v)
        : value instanceof Tensor
        ? copy(value)
        : value;
    }
    out.state[0] = entry as unknown as LBFGSState;
    return out;
  }

  /**
   * Restores a {@link stateDict} (PyTorch's, with its 0-d tensors as
   * numbers, loads as is): the group's hyperparameters and the history,
   * copied onto the parameters' device. Everything is checked first; on
   * error the optimizer is unchanged.
   */
  override loadStateDict(stateDict: OptimizerStateDict | LBFGSStateDict): void {
    const name = "LBFGS.loadStateDict";
    const state = (stateDict as { state?: unknown } | null)?.state ?? {};
    if (state === null || typeof state !== "object") {
      throw new TypeError(`${name}: state must be an object`);
    }
    const keys = Object.keys(state);
    const extra = keys.filter((k) => k !== "0");
    if (extra.length > 0) {
      throw new Error(
        `${name}: state for parameter index ${
          extra[0]
        }: L-BFGS keeps its history under index 0 only`,
      );
    }
    const entry = (state as Record<string, unknown>)["0"];
    const own = entry === undefined ? {} : this.#checkHistory(name, entry);
    super.loadStateDict({ ...(stateDict as OptimizerStateDict), state: {} });
    // Checked: now replace.
    this.#release(this.#history);
    this.#history = this.#copyHistory(own);
  }

  /** A loaded state entry under multigrad's keys, after checking every value. */
  #checkHistory(name: string, entry: unknown): Record<string, unknown> {
    if (entry === null || typeof entry !== "object" || Array.isArray(entry)) {
      throw new TypeError(`${name}: state 0 must be an object`);
    }
    const own: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(entry)) {
      const k = OWN_STATE_KEYS[key] ?? (key in TORCH_STATE_KEYS ? key : undefined);
      if (k === undefined) {
        throw new Error(
          `${name}: state 0 has "${key}", which L-BFGS does not keep (it keeps ${
            Object.values(TORCH_STATE_KEYS).join(", ")
          }): is it another optimizer's?`,
        );
      }
      own[k] = value;
    }
    const params = this.paramGroups[0].params;
    const numel = params.reduce((n, p) => n + p.numel(), 0);
    const number = (key: string, nullable = false) => {
      const v = own[key];
      if (typeof v !== "number" && !(nullable && v === null)) {
        throw new TypeError(
          `${name}: state "${TORCH_STATE_KEYS[key]}" must be a number${
            nullable ? " or null" : ""
          }, got ${
            v instanceof Tensor ? `a tensor of shape ${formatShape(v.shape)}` : typeof v
          } (PyTorch keeps it as a 0-d tensor: give await t.item())`,
        );
      }
    };
    const vector = (v: unknown, what: string, nullable = false) => {
      if (nullable && v === null) return;
      if (!(v instanceof Tensor)) {
        throw new TypeError(`${name}: ${what} must be a Tensor, got ${typeof v}`);
      }
      if (!sameShape(v.shape, [numel])) {
        throw new RangeError(
          `${name}: ${what} has shape ${
            formatShape(v.shape)
          }, expected [${numel}] (every parameter's elements)`,
        );
      }
      if (v.storage.disposed) throw new Error(`${name}: ${what} was disposed`);
    };
    const list = (key: string) => {
      const v = own[key];
      if (!Array.isArray(v)) {
        throw new TypeError(`${name}: state "${TORCH_STATE_KEYS[key]}" must be an array`);
      }
      return v as unknown[];
    };
    for (const key of ["funcEvals", "nIter"]) {
      if (!(key in own)) throw new Error(`${name}: state 0 lacks "${TORCH_STATE_KEYS[key]}"`);
      number(key);
    }
    const present = ITERATION_KEYS.filter((k) => k in own);
    if (present.length > 0 && present.length < ITERATION_KEYS.length) {
      const missing = ITERATION_KEYS.filter((k) => !(k in own));
      throw new Error(
        `${name}: state 0 lacks ${missing.map((k) => `"${TORCH_STATE_KEYS[k]}"`).join(", ")}`,
      );
    }
    if (present.length > 0) {
      vector(own.d, 'state "d"', true);
      number("t", true);
      number("hDiag");
      number("prevLoss", true);
      vector(own.prevFlatGrad, 'state "prev_flat_grad"', true);
      const dirs = list("oldDirs");
      const stps = list("oldStps");
      const ro = list("ro");
      if (dirs.length !== stps.length || dirs.length !== ro.length) {
        throw new RangeError(
          `${name}: old_dirs, old_stps and ro must have one entry per curvature pair, got ${dirs.length}, ${stps.length} and ${ro.length}`,
        );
      }
      dirs.forEach((v, i) => vector(v, `old_dirs[${i}]`));
      stps.forEach((v, i) => vector(v, `old_stps[${i}]`));
      ro.forEach((v, i) => {
        if (typeof v !== "number") throw new TypeError(`${name}: ro[${i}] must be a number`);
      });
    }
    if ("al" in own) {
      list("al").forEach((v, i) => {
        if (typeof v !== "number" && v !== null) {
          throw new TypeError(`${name}: al[${i}] must be a number or null`);
        }
      });
    }
    return own;
  }

  /** `own` (checked) as the history, its tensors copied onto the parameters' device and dtype. */
  #copyHistory(own: Record<string, unknown>): History {
    const [first] = this.paramGroups[0].params;
    const copy = (v: unknown) => {
      if (!(v instanceof Tensor)) return v;
      const out = held(empty(v.shape, first.dtype, first.device));
      noGrad(() => tidy(() => out._assign(v.dtype === first.dtype ? v : v.to(first.dtype))));
      return out;
    };
    // Copied in the entry's order, so that the dict saves back the same.
    const history: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(own)) {
      history[key] = Array.isArray(value) ? value.map(copy) : copy(value);
    }
    return history as History;
  }

  /** Releases the tensors of `history`. */
  #release(history: History): void {
    for (const value of Object.values(history)) {
      const all = Array.isArray(value) ? value : [value];
      for (const v of all) if (v instanceof Tensor) v.dispose();
    }
  }
}

/**
 * PyTorch's `_strong_wolfe` line search from `t` (`dNorm`: the direction's largest element): brackets a step
 * meeting the strong Wolfe conditions, then zooms by cubic interpolation.
 * Returns the loss, the flat gradient (a new tensor, or `g` itself), the
 * step and the number of evaluations.
 */
async function strongWolfe(
  evaluate: Evaluate,
  t: number,
  dNorm: number,
  f: number,
  g: Tensor,
  gtd: number,
  { c1 = 1e-4, c2 = 0.9, toleranceChange = 1e-9, maxLs = 25 } = {},
): Promise<[number, Tensor, number, number]> {
  // Every gradient the search made; all but the one returned are released at the end, and all
  // of them when an evaluation throws (the closure's error).
  const made: Tensor[] = [];
  const at = async (step: number): Promise<[number, Tensor, number]> => {
    const result = await evaluate(step);
    made.push(result[1]);
    return result;
  };
  try {
    return await search(at, t, dNorm, f, g, gtd, made, { c1, c2, toleranceChange, maxLs });
  } catch (error) {
    for (const x of made) x.dispose();
    throw error;
  }
}

/** {@link strongWolfe}'s search, evaluating with `at`, whose gradients `made` holds. */
async function search(
  at: (step: number) => Promise<[number, Tensor, number]>,
  t: number,
  dNorm: number,
  f: number,
  g: Tensor,
  gtd: number,
  made: Tensor[],
  { c1, c2, toleranceChange, maxLs }: {
    c1: number;
    c2: number;
    toleranceChange: number;
    maxLs: number;
  },
): Promise<[number, Tensor, number, number]> {
  let [fNew, gNew, gtdNew] = await at(t);
  let lsFuncEvals = 1;
  let [tPrev, fPrev, gPrev, gtdPrev] = [0, f, g, gtd];
  let done = false;
  let lsIter = 0;
  let bracket: number[] = [];
  let bracketF: number[] = [];
  let bracketG: Tensor[] = [];
  let bracketGtd: number[] = [];
  while (lsIter < maxLs) {
    if (fNew > f + c1 * t * gtd || (lsIter > 1 && fNew >= fPrev)) {
      [bracket, bracketF, bracketG, bracketGtd] = [
        [tPrev, t],
        [fPrev, fNew],
        [gPrev, gNew],
        [gtdPrev, gtdNew],
      ];
      break;
    }
    if (Math.abs(gtdNew) <= -c2 * gtd) {
      [bracket, bracketF, bracketG] = [[t], [fNew], [gNew]];
      done = true;
      break;
    }
    if (gtdNew >= 0) {
      [bracket, bracketF, bracketG, bracketGtd] = [
        [tPrev, t],
        [fPrev, fNew],
        [gPrev, gNew],
        [gtdPrev, gtdNew],
      ];
      break;
    }
    const minStep = t + 0.01 * (t - tPrev);
    const maxStep = t * 10;
    const tmp = t;
    t = cubicInterpolate(tPrev, fPrev, gtdPrev, t, fNew, gtdNew, [minStep, maxStep]);
    [tPrev, fPrev, gPrev, gtdPrev] = [tmp, fNew, gNew, gtdNew];
    [fNew, gNew, gtdNew] = await at(t);
    lsFuncEvals += 1;
    lsIter += 1;
  }
  if (lsIter === maxLs) [bracket, bracketF, bracketG] = [[0, t], [f, fNew], [g, gNew]];

  let insufProgress = false;
  let [lowPos, highPos] = bracketF[0] <= bracketF[bracketF.length - 1] ? [0, 1] : [1, 0];
  while (!done && lsIter < maxLs) {
    if (Math.abs(bracket[1] - bracket[0]) * dNorm < toleranceChange) break;
    t = cubicInterpolate(
      bracket[0],
      bracketF[0],
      bracketGtd[0],
      bracket[1],
      bracketF[1],
      bracketGtd[1],
    );
    const hi = pyMax(bracket[0], bracket[1]);
    const lo = pyMin(bracket[0], bracket[1]);
    const eps = 0.1 * (hi - lo);
    if (pyMin(hi - t, t - lo) < eps) {
      if (insufProgress || t >= hi || t <= lo) {
        t = Math.abs(t - hi) < Math.abs(t - lo) ? hi - eps : lo + eps;
        insufProgress = false;
      } else insufProgress = true;
    } else insufProgress = false;
    [fNew, gNew, gtdNew] = await at(t);
    lsFuncEvals += 1;
    lsIter += 1;
    if (fNew > f + c1 * t * gtd || fNew >= bracketF[lowPos]) {
      bracket[highPos] = t;
      bracketF[highPos] = fNew;
      bracketG[highPos] = gNew;
      bracketGtd[highPos] = gtdNew;
      [lowPos, highPos] = bracketF[0] <= bracketF[1] ? [0, 1] : [1, 0];
    } else {
      if (Math.abs(gtdNew) <= -c2 * gtd) done = true;
      else if (gtdNew * (bracket[highPos] - bracket[lowPos]) >= 0) {
        bracket[highPos] = bracket[lowPos];
        bracketF[highPos] = bracketF[lowPos];
        bracketG[highPos] = bracketG[lowPos];
        bracketGtd[highPos] = bracketGtd[lowPos];
      }
      bracket[lowPos] = t;
      bracketF[lowPos] = fNew;
      bracketG[lowPos] = gNew;
      bracketGtd[lowPos] = gtdNew;
    }
  }
  const result = bracketG[lowPos];
  for (const x of made) if (x !== result) x.dispose();
  return [bracketF[lowPos], result, bracket[lowPos], lsFuncEvals];
}
