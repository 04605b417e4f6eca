/**
 * Communication hooks for {@link DistributedDataParallel.registerCommHook}
 * (`torch.distributed.algorithms.ddp_comm_hooks`): {@link allreduceHook}
 * (DDP's own averaging) and PowerSGD gradient compression
 * ({@link PowerSGDState}, {@link powerSGDHook}).
 * @module
 */

import { getRngState, manualSeed, randn, setRngState, zeros } from "../ops/factory.ts";
import { cat } from "../ops/view.ts";
import { qr } from "../linalg/qr.ts";
import { keep } from "../storage.ts";
import type { DType } from "../dtype.ts";
import { formatShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { seededRandom } from "../util.ts";
import type { DistributedGroup } from "./backend.ts";
import { allReduce } from "./collectives.ts";
import type { GradBucket } from "./grad_bucket.ts";
import { activeGroup } from "./state.ts";

/**
 * Averages `t` over the ranks of `group` in place, dividing first as
 * PyTorch's `_allreduce_fut` does (no overflow in half precision).
 */
function allreduceAverage(t: Tensor, group: DistributedGroup | null | undefined, op: string) {
  const size = activeGroup(op, group ?? undefined).worldSize;
  const divided = t.div(size);
  allReduce(divided, { group: group ?? undefined });
  return divided;
}

/**
 * DDP's default reduction as a hook (PyTorch's `default_hooks.allreduce_hook`):
 * the bucket's flat gradient divided by the group's size, then summed over
 * its ranks. `processGroup` is the group (null or undefined: every rank).
 * Dividing first is PyTorch's order; with a power-of-two number of ranks the
 * result is bit-identical to DDP without a hook, otherwise it can differ
 * from it in the last bit.
 *
 * @example
 * ```ts
 * ddp.registerCommHook(null, distributed.algorithms.ddpCommHooks.allreduceHook);
 * ```
 */
export function allreduceHook(
  processGroup: DistributedGroup | null | undefined,
  bucket: GradBucket,
): Tensor {
  return allreduceAverage(bucket.buffer(), processGroup, "allreduceHook");
}

/** Options of {@link PowerSGDState} (PyTorch's keyword arguments, camelCase). */
export interface PowerSGDOptions {
  /** The group to average over (null or omitted: every rank). */
  processGroup?: DistributedGroup | null;
  /** The rank r of the approximation M ≈ P Qᵀ (default 1). */
  matrixApproximationRank?: number;
  /** Iterations of plain averaging before compression starts (default 1000; > 1 with error feedback or warm start). */
  startPowerSGDIter?: number;
  /** A tensor is compressed only where (rows + cols) · r · minCompressionRate < rows · cols (default 2). */
  minCompressionRate?: number;
  /** Adds what compression lost in the last iteration to the next one's gradient (default true). */
  useErrorFeedback?: boolean;
  /** Starts each iteration's power iteration from the last one's Q (default true). */
  warmStart?: boolean;
  /**
   * Added to each column's norm in the Gram-Schmidt orthogonalisation (r <= 2),
   * to survive all-zero columns (default 0); QR (r > 2) ignores it, as PyTorch's.
   */
  orthogonalizationEpsilon?: number;
  /** Seed of the random initial Qs (default 0). */
  randomSeed?: number;
  /**
   * Draws one initial Q of `shape` [cols, r] (before orthogonalisation),
   * instead of `randn` (see {@link PowerSGDState}): to reproduce another
   * run's numbers (PyTorch's, say) or to test. Called in the same order on
   * every rank, and must return the same values on every rank.
   */
  randomQ?: (shape: [number, number], dtype: DType) => Tensor;
}

/**
 * The hyperparameters and the state of {@link powerSGDHook} (PyTorch's
 * `PowerSGDState`): error feedback per bucket (`errorDict`), the last
 * P and Q per bucket (`pMemoryDict`, `qMemoryDict`), the iteration count.
 * Pass the same options on every rank.
 *
 * The random initial Q cannot be PyTorch's numbers; it is deterministic:
 * whenever a bucket's memory is new (its first iteration of compression
 * with `warmStart`, every one without), one seed s = ⌊u · 10⁹⌋
 * is drawn, u from `seededRandom(randomSeed)` (also where nothing in the
 * bucket is compressed, as PyTorch draws), and each compressed tensor's Q
 * is `randn([cols, r], { dtype })` on cpu after `manualSeed(s)`, in the
 * order of {@link powerSGDHook}; the global generator is restored after
 * (PyTorch's `fork_rng`). `randomQ` replaces the `randn` draws (with
 * PyTorch's own, say: the tests replay PyTorch 1.13's numbers so).
 */
export class PowerSGDState {
  /** The group to average over (null: every rank). */
  readonly processGroup: DistributedGroup | null;
  /** The rank r of the approximation. */
  readonly matrixApproximationRank: number;
  /** The iteration from which compression runs. */
  readonly startPowerSGDIter: number;
  /** See {@link PowerSGDOptions.minCompressionRate}. */
  readonly minCompressionRate: number;
  /** See {@link PowerSGDOptions.useErrorFeedback}. */
  readonly useErrorFeedback: boolean;
  /** See {@link PowerSGDOptions.warmStart}. */
  readonly warmStart: boolean;
  /** See {@link PowerSGDOptions.orthogonalizationEpsilon}. */
  readonly orthogonalizationEpsilon: number;
  /** Draws the seeds of the initial Qs. */
  readonly rng: () => number;
  /** See {@link PowerSGDOptions.randomQ} (null: `randn`). */
  readonly randomQ: ((shape: [number, number], dtype: DType) => Tensor) | null;
  /** Per bucket index: what compression lost last iteration (local input minus result). */
  readonly errorDict: Map<number, Tensor> = new Map();
  /** Per bucket index: the all-reduced, orthogonalised Ps of the last iteration, flat. */
  readonly pMemoryDict: Map<number, Tensor> = new Map();
  /** Per bucket index: the averaged Qs of the last iteration, flat (the next warm start). */
  readonly qMemoryDict: Map<number, Tensor> = new Map();
  /** Iterations done (counted at each pass's last bucket). */
  iter = 0;
  /** Elements of the gradients the compressing iterations saw. */
  totalNumelBeforeCompression = 0;
  /** Elements they sent instead. */
  totalNumelAfterCompression = 0;

  /** Checks and keeps the options (PyTorch's defaults). */
  constructor(options: PowerSGDOptions = {}) {
    const rank = options.matrixApproximationRank ?? 1;
    if (!Number.isInteger(rank) || rank < 1) {
      throw new RangeError(
        `PowerSGDState: matrixApproximationRank must be a positive integer, got ${rank}`,
      );
    }
    const start = options.startPowerSGDIter ?? 1000;
    if (!Number.isInteger(start) || start < 0) {
      throw new RangeError(
        `PowerSGDState: startPowerSGDIter must be a non-negative integer, got ${start}`,
      );
    }
    const useErrorFeedback = options.useErrorFeedback ?? true;
    const warmStart = options.warmStart ?? true;
    if ((useErrorFeedback || warmStart) && start <= 1) {
      throw new RangeError(
        `PowerSGDState: expected startPowerSGDIter > 1 if useErrorFeedback or warmStart is enabled, because PowerSGD can only be applied after the first two iterations in DDP; got ${start}`,
      );
    }
    const rate = options.minCompressionRate ?? 2;
    const eps = options.orthogonalizationEpsilon ?? 0;
    for (const [name, v] of [["minCompressionRate", rate], ["orthogonalizationEpsilon", eps]]) {
      if (typeof v !== "number" || !(v >= 0) || !Number.isFinite(v)) {
        throw new RangeError(`PowerSGDState: ${name} must be a finite number >= 0, got ${v}`);
      }
    }
    const seed = options.randomSeed ?? 0;
    if (!Number.isInteger(seed)) {
      throw new RangeError(`PowerSGDState: randomSeed must be an integer, got ${seed}`);
    }
    this.processGroup = options.processGroup ?? null;
    this.matrixApproximationRank = rank;
    this.startPowerSGDIter = start;
    this.minCompressionRate = rate;
    this.useErrorFeedback = useErrorFeedback;
    this.warmStart = warmStart;
    this.orthogonalizationEpsilon = eps;
    this.rng = seededRandom(seed);
    if (options.randomQ !== undefined && typeof options.randomQ !== "function") {
      throw new TypeError(
        `PowerSGDState: randomQ must be a function, got ${typeof options.randomQ}`,
      );
    }
    this.randomQ = options.randomQ ?? null;
  }

  /** Counts an iteration at the last bucket of a pass (PyTorch's `maybe_increase_iter`). */
  maybeIncreaseIter(bucket: GradBucket): void {
    if (bucket.isLast()) this.iter++;
  }

  /**
   * [rate, elements before, elements after] of the compressing iterations so
   * far (PyTorch's `compression_stats`; rate 0 before any).
   */
  compressionStats(): [number, number, number] {
    const before = this.totalNumelBeforeCompression;
    const after = this.totalNumelAfterCompression;
    return [after > 0 ? before / after : 0, before, after];
  }
}

/**
 * Orthonormal columns for `m` [n, r] (PyTorch's `_orthogonalize`): Gram-Schmidt
 * for r <= 2 (with `epsilon` added to each column's norm; with epsilon 0 an
 * all-zero column gives NaN, as PyTorch's), else the Q of a QR factorisation
 * (`linalg.qr`, PyTorch's signs), which ignores `epsilon` as PyTorch's does.
 */
function orthogonalize(m: Tensor, epsilon: number): Tensor {
  if (m.shape[1] > 2) return qr(m)[0];
  const cols = m.shape[1] === 1 ? [m] : m.split(1, 1);
  for (let i = 0; i < cols.length; i++) {
    const norm = cols[i].norm(2, 0, true);
    const col = cols[i].div(epsilon === 0 ? norm : norm.add(epsilon));
    cols[i] = col;
    for (let j = i + 1; j < cols.length; j++) {
      cols[j] = cols[j].sub(col.mul(cols[j]).sum(0, true).mul(col));
    }
  }
  return cols.length === 1 ? cols[0] : cat(cols, 1);
}

/** One initial Q [m, r] on cpu: the state's `randomQ`, checked, or `randn`. */
function drawQ(state: PowerSGDState, m: number, r: number, dtype: DType): Tensor {
  if (!state.randomQ) return randn([m, r], { dtype, device: "cpu" });
  const q = state.randomQ([m, r], dtype);
  if (
    !(q instanceof Tensor) || q.dtype !== dtype || q.ndim !== 2 || q.shape[0] !== m ||
    q.shape[1] !== r
  ) {
    throw new TypeError(
      `powerSGDHook: randomQ must return a Tensor of [${m}, ${r}] ${dtype}, got ${
        q instanceof Tensor ? `${formatShape(q.shape)} ${q.dtype}` : typeof q
      }`,
    );
  }
  return q;
}

/** `dict[key] = value`, into the kept tensor there when its shape allows (no new memory per step). */
function remember(dict: Map<number, Tensor>, key: number, value: Tensor): void {
  const old = dict.get(key);
  if (old && old.shape.length === value.shape.length && old.shape[0] === value.shape[0]) {
    old.copy_(value);
  } else {
    old?.dispose();
    dict.set(key, keep(value.clone()));
  }
}

/**
 * PowerSGD gradient compression (PyTorch 1.13's `powerSGD_hook`, Vogels et
 * al. 2019). Before `state.startPowerSGDIter` it is {@link allreduceHook}.
 * Then, per bucket: the last iteration's error is added (error feedback);
 * each gradient is viewed as a matrix M [shape[0], rest]; those where
 * compression pays (see {@link PowerSGDOptions.minCompressionRate}) are
 * compressed, the rest (biases, as a rule) are averaged as they are. For
 * each compressed M with r = min(rows, cols, rank): P = M Q (Q random and
 * orthogonalised, or the last Q with `warmStart`), P summed over the ranks
 * and orthogonalised, Q = Mᵀ P averaged over the ranks, M ≈ P Qᵀ. Three
 * all-reduces per bucket: the uncompressed tensors, the Ps, the Qs (each
 * skipped where empty). Tensors are taken grouped by shape (first
 * appearance order), as PyTorch lays out its P and Q memory.
 *
 * @example
 * ```ts
 * const { PowerSGDState, powerSGDHook } = distributed.algorithms.ddpCommHooks;
 * ddp.registerCommHook(new PowerSGDState({ startPowerSGDIter: 10 }), powerSGDHook);
 * ```
 */
export function powerSGDHook(state: PowerSGDState, bucket: GradBucket): Tensor {
  if (!(state instanceof PowerSGDState)) {
    throw new TypeError("powerSGDHook: the state must be a PowerSGDState");
  }
  const op = "powerSGDHook";
  const group = state.processGroup ?? undefined;
  let input = bucket.buffer();
  if (state.iter < state.startPowerSGDIter) {
    state.maybeIncreaseIter(bucket);
    return allreduceAverage(input, group, op);
  }
  const worldSize = activeGroup(op, group).worldSize;
  const index = bucket.index();
  const { device, dtype } = input;
  if (state.useErrorFeedback) {
    const error = state.errorDict.get(index);
    if (error) input = input.add(error);
  }
  const shapes = bucket.parameters().map((p) => p.shape);
  const sizes = shapes.map((s) => s.reduce((a, b) => a * b, 1));
  const pieces = shapes.length === 1 ? [input] : input.split(sizes);
  // Per tensor: its matrix and rank when compressed, null when not.
  const plan = pieces.map((piece, i) => {
    const n = shapes[i].length === 0 ? 1 : shapes[i][0];
    const m = sizes[i] / Math.max(n, 1);
    const r = Math.min(n, m, state.matrixApproximationRank);
    const compress = (n + m) * r * state.minCompressionRate < n * m;
    state.totalNumelBeforeCompression += n * m;
    state.totalNumelAfterCompression += compress ? (n + m) * r : n * m;
    return compress ? { matrix: piece.reshape([n, m]), n, m, r, shape: `${n},${m}` } : null;
  });
  const uncompressed = pieces.filter((_, i) => plan[i] === null);
  // PyTorch groups the compressed tensors by shape for its P and Q memory.
  const shapeOrder = [...new Set(plan.flatMap((c) => (c ? [c.shape] : [])))];
  const compressed = shapeOrder.flatMap((s) => plan.filter((c) => c?.shape === s)).map((c) => c!);
  const qSize = compressed.reduce((a, c) => a + c.m * c.r, 0);
  const remembered = state.qMemoryDict.get(index);
  let qs: Tensor[];
  if (compressed.length === 0) {
    qs = [];
    // PyTorch draws a seed whenever a bucket's memory is new, used or not.
    if (!state.warmStart || !remembered) state.rng();
  } else if (state.warmStart && remembered && remembered.shape[0] === qSize) {
    const flat = compressed.length === 1 ? [remembered] : remembered.split(
      compressed.map((c) => c.m * c.r),
    );
    qs = flat.map((q, i) =>
      orthogonalize(q.reshape([compressed[i].m, compressed[i].r]), state.orthogonalizationEpsilon)
    );
  } else {
    const saved = getRngState();
    manualSeed(Math.floor(state.rng() * 1_000_000_000));
    try {
      qs = compressed.map((c) =>
        orthogonalize(
          drawQ(state, c.m, c.r, dtype).to(device),
          state.orthogonalizationEpsilon,
        )
      );
    } finally {
      setRngState(saved);
    }
  }
  let average: Tensor[] = [];
  if (uncompressed.length > 0) {
    const memory = cat(uncompressed.map((t) => t.reshape([-1])));
    allReduce(memory, { group });
    const averaged = memory.div(worldSize);
    average = uncompressed.length === 1
      ? [averaged]
      : averaged.split(uncompressed.map((t) => t.numel()));
  }
  let approximations: Tensor[] = [];
  if (compressed.length > 0) {
    const pFlat = cat(compressed.map((c, i) => c.matrix.matmul(qs[i]).reshape([-1])));
    allReduce(pFlat, { group });
    const ps = (compressed.length === 1 ? [pFlat] : pFlat.split(compressed.map((c) => c.n * c.r)))
      .map((p, i) =>
        orthogonalize(p.reshape([compressed[i].n, compressed[i].r]), state.orthogonalizationEpsilon)
      );
    const qFlat = cat(compressed.map((c, i) => c.matrix.t().matmul(ps[i]).reshape([-1])));
    allReduce(qFlat, { group });
    const qAverage = qFlat.div(worldSize);
    const qsNew = compressed.length === 1 ? [qAverage] : qAverage.split(
      compressed.map((c) => c.m * c.r),
    );
    approximations = compressed.map((c, i) =>
      ps[i].matmul(qsNew[i].reshape([c.m, c.r]).t()).reshape([-1])
    );
    if (state.warmStart) {
      remember(state.pMemoryDict, index, cat(ps.map((p) => p.reshape([-1]))));
      remember(state.qMemoryDict, index, qAverage);
    }
  }
  if (state.warmStart && compressed.length === 0 && !remembered) {
    state.pMemoryDict.set(index, keep(zeros([0], { dtype, device })));
    state.qMemoryDict.set(index, keep(zeros([0], { dtype, device })));
  }
  // The output in the bucket's order.
  let u = 0;
  const outputs = plan.map((c) =>
    c === null ? average[u++].reshape([-1]) : approximations[compressed.indexOf(c)]
  );
  const output = outputs.length === 1 ? outputs[0].clone() : cat(outputs);
  if (state.useErrorFeedback) remember(state.errorDict, index, input.sub(output));
  if (!state.warmStart) {
    for (const t of state.pMemoryDict.values()) t.dispose();
    for (const t of state.qMemoryDict.values()) t.dispose();
    state.pMemoryDict.clear();
    state.qMemoryDict.clear();
  }
  state.maybeIncreaseIter(bucket);
  return output;
}
