/**
 * `DistributedDataParallel` (DDP): one replica of a module per rank for the
 * whole run, each on its own batch; the only communication per step is an
 * averaging all-reduce of the gradients, bucketed and started while
 * backward still runs.
 * @module
 */

import {
  isGradEnabled,
  noGrad,
  queueBackwardCallback,
  registerPostAccumulateGradHook,
} from "../autograd.ts";
import { type Device, device as resolveDevice } from "../device.ts";
import { type DType, dtypeSize, type TypedArray } from "../dtype.ts";
import { Module, type Parameter } from "../nn/module.ts";
import { refuseLazy } from "../nn/lazy_state.ts";
import { formatShape } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { cat } from "../ops/view.ts";
import { checkBucketTensor, type CommHook, GradBucket } from "./grad_bucket.ts";
import { mapTensors } from "../nested.ts";
import {
  borrowHost,
  broadcastFlat,
  giveBackHost,
  readFlat,
  readFlatInto,
  runOnHost,
  writeFlat,
} from "./host.ts";
import {
  allReduceViaHost,
  type CollectiveCall,
  DistributedError,
  type DistributedGroup,
} from "./backend.ts";
import { activeGroup, type ProcessGroup } from "./state.ts";
import { Join, type Joinable, JoinHook, type JoinHookOptions } from "./join.ts";
import { enableOfAskingJoin, type JoinState, joinStateOf, setJoinableKind } from "./join_state.ts";

/** Options of {@link DistributedDataParallel.join} (PyTorch's keyword arguments). */
export interface DistributedDataParallelJoinOptions {
  /**
   * Divide the gradients by the world size the run started with (true, the
   * default: every sample weighs the same, a joined rank counting zeros) or
   * by the number of ranks that still have data (false).
   */
  divideByInitialWorldSize?: boolean;
  /** Detect uneven inputs (default true); false: the loop runs as without a join. */
  enable?: boolean;
  /**
   * Raise on every rank once one rank is out of data (default false); see
   * `Join`'s `throwOnEarlyTermination`. `divideByInitialWorldSize`
   * does not matter then.
   */
  throwOnEarlyTermination?: boolean;
}

/**
 * Whether a running join divides the gradients by the initial world size
 * (PyTorch's `_divide_by_initial_world_size`; default true), read from the
 * join itself: PyTorch keeps it on the DDP when a join is built, so a join
 * built later changes an earlier one's.
 */
function divideByInitialWorldSize(state: JoinState): boolean {
  return state.options.divideByInitialWorldSize !== false;
}

/** A {@link JoinHook} whose entry points are a DDP's own. */
class DDPJoinHook extends JoinHook {
  constructor(
    readonly main: () => Promise<void>,
    readonly post: (isLastJoiner: boolean) => Promise<void>,
  ) {
    super();
  }

  override mainHook(): Promise<void> {
    return this.main();
  }

  override postHook(isLastJoiner: boolean): Promise<void> {
    return this.post(isLastJoiner);
  }
}

/** Options of {@link DistributedDataParallel}. */
export interface DistributedDataParallelOptions {
  /** This rank's device (default: where the module's parameters are). Inputs are moved there. */
  device?: Device | string;
  /** Size of a gradient bucket in MiB after the first (about 1 MiB); default 25. */
  bucketCapMB?: number;
  /**
   * Broadcast rank 0's buffers (BatchNorm statistics; with `processGroup`,
   * the group's first rank's) before a forward; default true. As in
   * PyTorch, only before the first forward after one that ran with
   * gradients on and outside `noSync` (buffers change only in training
   * forwards), so ranks may run different numbers of evaluation forwards
   * under `noGrad`. In and after a join, the highest rank's (see
   * {@link DistributedDataParallel.join}).
   */
  broadcastBuffers?: boolean;
  /**
   * Parameters may get no gradient in a backward pass (default false: an
   * error naming them). As in PyTorch, one no rank used keeps its `.grad`
   * untouched (null stays null, so optimizers skip it); one that other
   * ranks used gets their average, this rank counting zeros. Learning
   * which is which costs a small exchange at the end of backward that
   * blocks this thread until every rank has reached the end of the same
   * backward pass (PyTorch's backward waits for it too). While it blocks,
   * this rank's earlier collectives (the last step's averages) cannot run:
   * every rank must let its event loop run at the same points of the loop
   * (all await the loss, or none), or a rank that awaits waits for one that
   * blocks until `timeoutMs` (the error then says so).
   */
  findUnusedParameters?: boolean;
  /**
   * Data parallelism among the ranks of this group only (from `newGroup`;
   * PyTorch's `process_group`): the group's first rank broadcasts its
   * parameters and buffers, and gradients are averaged over the group's
   * size. Every member wraps its replica with the same group; a rank not in
   * it gets an error naming it and the group. Default: every rank.
   */
  processGroup?: DistributedGroup;
  /**
   * PyTorch's `static_graph`: every iteration uses the same parameters.
   * Reentrant `utils.checkpoint` needs no such promise here (its leaves'
   * gradients arrive in the enclosing backward pass, which synchronises
   * once at its end, however often a parameter is reached), so the only
   * effect is PyTorch's other one: parameters that get no gradient are
   * allowed without `findUnusedParameters`, learnt in the first
   * synchronised backward (one blocking exchange, with the caveat given
   * there) and treated as unused in every later one, without exchanging
   * again. A later pass that gives one of them a gradient is an error
   * (the graph is not static) on every rank, naming the parameter and the
   * rank that gave it one: when some parameters were learnt as unused, each
   * later synchronised backward queues one all-reduce of an int32 per rank
   * to tell the ranks (PyTorch fails on that rank only). Default false.
   */
  staticGraph?: boolean;
}

const MIB = 1 << 20;
/** PyTorch's `dist._DEFAULT_FIRST_BUCKET_BYTES`: a small first bucket starts communication early. */
const FIRST_BUCKET_BYTES = MIB;

interface Bucket {
  /** Parameters in bucket order (reverse registration order). */
  readonly params: readonly Parameter[];
  readonly dtype: DType;
}

/**
 * Where the buckets of one dtype go in a step's host array: all buckets of a
 * dtype are exchanged together, in one collective per step.
 */
interface Layout {
  readonly dtype: DType;
  /** Indices of the dtype's buckets, in bucket order. */
  readonly buckets: readonly number[];
  /** Elements of all its buckets. */
  readonly numel: number;
}

/** What one backward pass has done so far. */
interface Pass {
  /** Parameters whose gradient is in. */
  readonly ready: Set<Parameter>;
  /** Whether the pass synchronises (it began outside `noSync`). */
  readonly syncing: boolean;
}

/**
 * Buckets as PyTorch's `compute_bucket_assignment_by_size`: parameters in
 * reverse order (backward produces the last layers' gradients first), one
 * run per dtype, a bucket closing once it holds `cap` bytes (the first
 * `FIRST_BUCKET_BYTES`, the rest `capBytes`).
 */
function assignBuckets(params: readonly Parameter[], capBytes: number): Bucket[] {
  const open = new Map<DType, { params: Parameter[]; bytes: number; closed: number }>();
  const buckets: Bucket[] = [];
  for (const p of [...params].reverse()) {
    const entry = open.get(p.dtype) ?? { params: [], bytes: 0, closed: 0 };
    open.set(p.dtype, entry);
    entry.params.push(p);
    entry.bytes += p.numel() * dtypeSize(p.dtype);
    const cap = entry.closed === 0 ? FIRST_BUCKET_BYTES : capBytes;
    if (entry.bytes >= cap) {
      buckets.push({ params: entry.params, dtype: p.dtype });
      open.set(p.dtype, { params: [], bytes: 0, closed: entry.closed + 1 });
    }
  }
  for (const [dtype, entry] of open) {
    if (entry.params.length > 0) buckets.push({ params: entry.params, dtype });
  }
  return buckets;
}

/**
 * Broadcasts `tensors` (one device) from rank `src`, one collective per
 * dtype; every rank must pass tensors of the same shapes.
 */
function broadcastTensors(group: ProcessGroup, tensors: readonly Tensor[], src: number): void {
  const byDType = new Map<DType, Tensor[]>();
  for (const t of tensors) byDType.set(t.dtype, [...(byDType.get(t.dtype) ?? []), t]);
  for (const list of byDType.values()) broadcastFlat(group, list, src, "DistributedDataParallel");
}

/**
 * Data parallelism over ranks (processes or Workers), as
 * `torch.nn.parallel.DistributedDataParallel`. Every rank wraps its own
 * replica (on its own device); at construction rank 0's parameters and
 * buffers are broadcast so all start identical. `forward` runs the local
 * module on the local batch. The gradients are put into buckets in reverse
 * parameter order (about 1 MiB first, then up to `bucketCapMB`); at the end
 * of `loss.backward()` all buckets of a dtype are read in one host crossing
 * (no device temporary larger than a bucket) and averaged by ONE collective
 * per dtype. (PyTorch starts each bucket's all-reduce during backward; here
 * that costs more than it hides: cpu ranks compute backward synchronously,
 * a rank meeting costs more than the bytes on a busy machine, and Deno's
 * WebGPU map blocks the thread until the device drains, which split
 * backward's recording: measured in bench/NOTES.md.) When `backward()` returns every
 * rank's `.grad` holds the average over the ranks (in stream order: no
 * await is needed before `optimizer.step()`), so N ranks with batch b train
 * exactly like one process with batch N·b, and all ranks stay bit-identical.
 *
 * Only a backward that follows this wrapper's `forward` (with gradients
 * on) synchronises, once: one through `module` directly (on some ranks
 * only, say), or a second backward of a retained graph, accumulates
 * locally, as in PyTorch. `noSync` is decided when backward runs.
 *
 * `stateDict()` has the wrapped module's own keys (no `module.` prefix), so
 * a checkpoint saved from rank 0 loads into the plain module.
 *
 * @example
 * ```ts
 * export async function main(rank: number, worldSize: number) {
 *   const [device] = await requestDevices();
 *   const model = new distributed.DistributedDataParallel(makeModel().to(device));
 *   const opt = new optim.SGD(model.parameters(), { lr: 0.1 });
 *   const sampler = new data.DistributedSampler(dataset);
 *   for (const [x, y] of new data.DataLoader(dataset, { sampler, batchSize: 64 })) {
 *     opt.zeroGrad();
 *     lossFn.forward(model.forward(x), y).backward(); // gradients averaged over ranks
 *     opt.step();
 *   }
 * }
 * ```
 */
export class DistributedDataParallel<M extends Module = Module> extends Module implements Joinable {
  /** The wrapped module (this rank's replica). */
  readonly module: M;
  /** This rank's device. */
  readonly device: Device;
  /** Bucket size after the first, in MiB. */
  readonly bucketCapMB: number;
  /** Whether buffers are broadcast from rank 0 before forwards (see {@link DistributedDataParallelOptions.broadcastBuffers}). */
  readonly broadcastBuffers: boolean;
  /** Whether parameters may get no gradient (see {@link DistributedDataParallelOptions.findUnusedParameters}). */
  readonly findUnusedParameters: boolean;
  /** Whether the set of used parameters is learnt once (see {@link DistributedDataParallelOptions.staticGraph}). */
  get staticGraph(): boolean {
    return this.#staticGraph;
  }
  #staticGraph: boolean;
  /** With `staticGraph`: the parameters some rank used in the first synchronised backward. */
  #staticUsed: Set<Parameter> | null = null;
  readonly #group: ProcessGroup;
  readonly #buckets: readonly Bucket[];
  readonly #layouts: readonly Layout[];
  readonly #names: Map<Parameter, string>;
  #syncing = true;
  /**
   * Whether the next forward broadcasts the buffers: the last forward ran
   * with gradients on and outside `noSync` (PyTorch's
   * `require_forward_param_sync`).
   */
  #buffersStale = true;
  /**
   * Whether the next backward is this wrapper's: set by a forward with
   * gradients on, cleared when a backward pass ends (PyTorch's
   * `expect_autograd_hooks_`).
   */
  #armed = false;
  #pass: Pass | null = null;
  /** Parameters that got a gradient since the last synchronised backward (noSync passes too). */
  readonly #usedSinceSync = new Set<Parameter>();
  /** The communication hook and its state, once registered. */
  #hook: { state: unknown; hook: CommHook<unknown> } | null = null;
  /** Whether a backward pass through this wrapper has ended (a hook comes too late then). */
  #trained = false;
  /** The `processGroup` handle given (undefined: every rank). */
  readonly #processGroup: DistributedGroup | undefined;
  /**
   * In a join, on a rank still in its loop: whether the coming backward
   * synchronises, as announced to the joined ranks at forward, and how many
   * ranks are active (null: divide by the world size).
   */
  #joinPass: { syncing: boolean; active: Promise<number> | null } | null = null;
  /**
   * Whether the last join built over this wrapper detects uneven inputs
   * (PyTorch's `_join_config.enable`, which a join leaves set): forwards
   * outside a join then take the buffers from the highest rank, not rank 0.
   */
  #joinEnabled = false;

  /** Wraps `module` (already on this rank's device) and makes every rank start from rank 0's state. */
  constructor(module: M, options: DistributedDataParallelOptions = {}) {
    super();
    setJoinableKind(this, "DistributedDataParallel");
    if (!(module instanceof Module)) {
      throw new TypeError("DistributedDataParallel: the first argument must be an nn.Module");
    }
    const group = activeGroup("DistributedDataParallel", options.processGroup);
    const capMB = options.bucketCapMB ?? 25;
    if (!(capMB > 0) || !Number.isFinite(capMB)) {
      throw new RangeError(
        `DistributedDataParallel: bucketCapMB must be a positive number, got ${capMB}`,
      );
    }
    const named = module.namedParameters();
    refuseLazy(named.map(([, p]) => p), "DistributedDataParallel");
    const seen = new Set<Parameter>();
    const params: Parameter[] = [];
    const names = new Map<Parameter, string>();
    for (const [name, p] of named) {
      if (seen.has(p) || !p.requiresGrad) continue;
      seen.add(p);
      params.push(p);
      names.set(p, name);
    }
    const target = options.device !== undefined
      ? resolveDevice(options.device)
      : (named[0]?.[1].device ?? null);
    const tensors = [...named.map(([n, p]) => [n, p] as const), ...module.namedBuffers()];
    const elsewhere = tensors.filter(([, t]) => target !== null && t.device !== target);
    if (elsewhere.length > 0) {
      throw new Error(
        `DistributedDataParallel: the module must be on this rank's device ${target} before wrapping, but ${
          elsewhere.map(([n, t]) => `${n} is on ${t.device}`).join(", ")
        }; call module.to(device) first`,
      );
    }
    if (target === null) {
      throw new Error(
        "DistributedDataParallel: the module has no parameters; pass { device } to say where inputs go",
      );
    }
    this.module = module;
    this.device = target;
    this.bucketCapMB = capMB;
    this.broadcastBuffers = options.broadcastBuffers ?? true;
    this.findUnusedParameters = options.findUnusedParameters ?? false;
    this.#staticGraph = options.staticGraph ?? false;
    this.#group = group;
    this.#processGroup = options.processGroup;
    this.#names = names;
    this.#buckets = assignBuckets(params, capMB * MIB);
    const layouts = new Map<DType, { dtype: DType; buckets: number[]; numel: number }>();
    this.#buckets.forEach((bucket, i) => {
      const layout = layouts.get(bucket.dtype) ?? { dtype: bucket.dtype, buckets: [], numel: 0 };
      layouts.set(bucket.dtype, layout);
      layout.buckets.push(i);
      layout.numel += bucket.params.reduce((n, p) => n + p.numel(), 0);
    });
    this.#layouts = [...layouts.values()];
    if (group.worldSize > 1) {
      const all = [...named.map(([, p]) => p as Tensor), ...module.buffers()];
      broadcastTensors(group, [...new Set(all)], 0);
    }
    for (const p of params) {
      registerPostAccumulateGradHook(p, (leaf) => this.#onGrad(leaf as Parameter));
    }
  }

  /**
   * Runs the wrapped module on this rank's batch (inputs are moved to this
   * rank's device), broadcasting rank 0's buffers first when
   * `broadcastBuffers` and a training forward ran since the last broadcast.
   */
  override forward(...args: Parameters<M["forward"]>): ReturnType<M["forward"]> {
    const join = joinStateOf(this);
    const joining = join?.enable === true;
    // Tells joined ranks that an iteration is coming (first joinable only).
    const active = joining ? Join.notifyJoinContext(this) : null;
    const buffers = this.module.buffers();
    if (
      this.broadcastBuffers && this.#buffersStale && this.#group.worldSize > 1 &&
      buffers.length > 0
    ) {
      // In a join rank 0 may have joined with stale buffers: the highest
      // active rank's go, as PyTorch's `_find_common_rank`.
      if (joining) this.#broadcastFromCommonRank(buffers, this.#group.rank);
      else {
        // Outside a join every rank is a candidate: PyTorch's `_find_common_rank` gives the highest.
        broadcastTensors(this.#group, buffers, this.#joinEnabled ? this.#group.worldSize - 1 : 0);
      }
    }
    // A backward pass that failed half-way leaves nothing behind.
    this.#pass = null;
    this.#armed = isGradEnabled();
    this.#buffersStale = this.#armed && this.#syncing;
    this.#joinPass = null;
    if (join?.enable) {
      // Joined ranks learn whether to shadow a gradient all-reduce (and a
      // ZeroRedundancyOptimizer's step: not after a noSync or noGrad forward).
      void this.#allReduceInt(this.#buffersStale ? 1 : 0, "sum");
      join.stepless = !this.#buffersStale; // a ZeroRedundancyOptimizer's step after it is refused
      this.#joinPass = {
        syncing: this.#buffersStale,
        active: divideByInitialWorldSize(join) ? null : active,
      };
    }
    const moved = mapTensors(args, (t) => t.to(this.device)) as Parameters<M["forward"]>;
    return this.module.forward(...moved) as ReturnType<M["forward"]>;
  }

  /**
   * Runs `fn` with gradient synchronisation off: backward passes inside it
   * only accumulate gradients locally, and the next backward outside it
   * all-reduces the accumulated sum (gradient accumulation, PyTorch's
   * `no_sync`). `fn` may be async; synchronisation resumes when it settles.
   */
  noSync<T>(fn: () => T): T {
    const previous = this.#syncing;
    this.#syncing = false;
    let result: T;
    try {
      result = fn();
    } catch (error) {
      this.#syncing = previous;
      throw error;
    }
    if (result instanceof Promise) {
      return result.finally(() => (this.#syncing = previous)) as T;
    }
    this.#syncing = previous;
    return result;
  }

  /**
   * Replaces the averaging all-reduce of the gradients with `hook` (PyTorch's
   * `register_comm_hook`): at the end of every backward pass that
   * synchronises (not inside {@link noSync}), `hook(state, bucket)` is called
   * for each bucket in bucket order (bucket 0 holds the last parameters) and
   * returns the bucket's reduced flat gradient (same shape, dtype and
   * device as `bucket.buffer()`), which is written into the parameters'
   * `.grad`. The hook runs collectives itself (`allReduce` on the buffer,
   * say), the same ones in the same order on every rank; they are
   * stream-ordered, so it returns the tensor without awaiting (PyTorch's
   * Future). Ready-made hooks: `distributed.algorithms.ddpCommHooks`. One
   * hook per wrapper (a second is PyTorch's error), registered before the
   * first backward through this wrapper (an error here: PyTorch 1.13 takes
   * a late hook silently, after its buckets were built without it).
   *
   * With `findUnusedParameters`, a parameter without a gradient on this
   * rank counts as zeros in the buffer, and one no rank used keeps its
   * `.grad` untouched, as without a hook.
   */
  registerCommHook<S>(state: S, hook: CommHook<S>): void {
    if (typeof hook !== "function") {
      throw new TypeError(
        `DistributedDataParallel.registerCommHook: communication hook must be callable, got ${
          hook === null ? "null" : typeof hook
        }`,
      );
    }
    if (this.#hook) {
      throw new Error(
        "DistributedDataParallel.registerCommHook: register_comm_hook or register_builtin_comm_hook can only be called once",
      );
    }
    if (this.#trained) {
      throw new Error(
        "DistributedDataParallel.registerCommHook: a backward pass already ran through this wrapper; register the communication hook before training starts",
      );
    }
    this.#hook = { state, hook: hook as CommHook<unknown> };
  }

  /**
   * Turns on {@link DistributedDataParallelOptions.staticGraph} (PyTorch's
   * `_set_static_graph()`); only before the first backward pass through
   * this wrapper, as PyTorch requires.
   */
  setStaticGraph(): void {
    if (joinStateOf(this)?.enable) {
      throw new Error(
        "DistributedDataParallel.setStaticGraph: not inside a running join: staticGraph is not supported in a join (its blocking exchange at the end of backward would wait for joined ranks)",
      );
    }
    if (this.#trained) {
      throw new Error(
        "DistributedDataParallel.setStaticGraph: a backward pass already ran through this wrapper; call it before training starts (or pass { staticGraph: true })",
      );
    }
    this.#staticGraph = true;
  }

  /** The wrapped module's state dict (its own keys, no `module.` prefix; options passed on). */
  override stateDict(...args: Parameters<Module["stateDict"]>): Record<string, Tensor> {
    return this.module.stateDict(...args);
  }

  /** Loads into the wrapped module (keys without a `module.` prefix). */
  override loadStateDict(
    ...args: Parameters<Module["loadStateDict"]>
  ): ReturnType<Module["loadStateDict"]> {
    return this.module.loadStateDict(...args);
  }

  #onGrad(p: Parameter): void {
    // A backward that does not follow this wrapper's forward (through
    // `module` directly, a second backward of a retained graph, another
    // wrapper's) is local, as in PyTorch: only some ranks may run it.
    if (!this.#armed) return;
    this.#usedSinceSync.add(p);
    let pass = this.#pass;
    if (!pass) {
      pass = this.#pass = {
        ready: new Set(),
        // In a join the forward announced it (PyTorch decides at forward).
        syncing: this.#joinPass?.syncing ?? this.#syncing,
      };
      queueBackwardCallback(() => this.#finishPass());
    }
    pass.ready.add(p);
  }

  /**
   * Reads the gradients of `params` (one dtype, in bucket order) into one
   * host array, zeros for those without one: one read per run of
   * parameters with a gradient, a run ending where the next parameter
   * would take it past `bucketCapMB` (on a device whose memory is not the
   * host's, a run is joined on the device first, so no temporary is larger
   * than a bucket; the reads start together and cross in one round trip).
   */
  #read(params: readonly Parameter[], dtype: DType, numel: number): Promise<TypedArray> {
    const host = borrowHost(dtype, numel);
    const cap = (this.bucketCapMB * MIB) / dtypeSize(dtype);
    const reads: Promise<void>[] = [];
    let at = 0;
    let run: Tensor[] = [];
    let runAt = 0;
    const flush = () => {
      if (run.length > 0) reads.push(readFlatInto(run, host, runAt, "DistributedDataParallel"));
      run = [];
    };
    for (const p of params) {
      if (run.length > 0 && at + p.numel() - runAt > cap) flush();
      if (p.grad) {
        if (run.length === 0) runAt = at;
        run.push(p.grad);
      } else {
        flush();
        host.fill(0, at, at + p.numel());
      }
      at += p.numel();
    }
    flush();
    return Promise.all(reads).then(() => host);
  }

  /**
   * The step's all-reduce of one dtype, through the backend's own exchange
   * memory where it has `allReduceVia`: on a device whose memory is host
   * memory (cpu) the gradients are copied straight in once the stream has
   * reached the end of backward; on another (webgpu) they cross to the host
   * at the end of backward, in one round trip, and are copied in from there.
   * The averages go straight from the exchange memory into the gradients,
   * while the stream holds every later kernel until they are in. Only the
   * gradients of parameters `written` are written.
   */
  #allReduceGradients(
    call: CollectiveCall,
    params: readonly Parameter[],
    written: (p: Parameter) => boolean,
    divisor: Promise<number> | null = null,
  ): void {
    const device = this.device;
    const backend = device.backendDevice;
    const group = this.#group;
    const dtype = call.dtype!;
    const op = "DistributedDataParallel";
    const at: number[] = [];
    let numel = 0;
    for (const p of params) {
      at.push(numel);
      numel += p.numel();
    }
    // Zeros are sent for a parameter without a gradient here.
    const hostMemory = backend.readSync !== undefined && backend.readInto !== undefined;
    const sources = params.map((p) => (hostMemory && p.grad?.storage.buffer(op)) || null);
    let host: TypedArray | null = null;
    // Resolves once every kernel of backward has run (host memory: at once,
    // in stream order; a read's own promise settles a few microtasks later,
    // after a training loop awaiting its loss read has recorded its next
    // step), or once the gradients have crossed to the host.
    const reached = hostMemory
      ? new Promise<void>((resolve, reject) => {
        device.stream.read(() => Promise.resolve(resolve())).catch(reject);
      })
      : this.#read(params, dtype, numel).then((values) => void (host = values));
    reached.catch(() => {}); // raised by the collective, which waits for it
    const targets = params.map((p) => (written(p) ? (p.grad ??= p.zerosLike()) : null));
    const sinks = targets.map((t) => t?.storage.buffer(op) ?? null);
    for (const t of targets) t?.storage.markModified();
    /** Calls `f(i, lo, hi)` for every parameter i overlapping elements [start, end), in its own indices. */
    const overlap = (
      start: number,
      end: number,
      f: (i: number, lo: number, hi: number) => void,
    ) => {
      for (let i = 0; i < params.length; i++) {
        const lo = Math.max(start, at[i]);
        const hi = Math.min(end, at[i] + params[i].numel());
        if (lo < hi) f(i, lo - at[i], hi - at[i]);
      }
    };
    const fill = (into: TypedArray, start: number) => {
      if (host) {
        into.set(host.subarray(start, start + into.length));
        return Promise.resolve();
      }
      const reads: Promise<void>[] = [];
      overlap(start, start + into.length, (i, lo, hi) => {
        const piece = into.subarray(at[i] + lo - start, at[i] + hi - start);
        const source = sources[i];
        if (source) reads.push(backend.readInto!(source, lo, hi - lo, dtype, piece));
        else piece.fill(0);
      });
      return Promise.all(reads).then(() => {});
    };
    let divideBy = 1;
    const take = (result: TypedArray, start: number) => {
      // A device write may refuse shared memory (WebGPU's writeBuffer does).
      let from = host ? host.subarray(start, start + result.length) : result;
      if (host && result !== from) from.set(result);
      if (divideBy !== 1) {
        // The exchange memory may be the other ranks' too: divide a copy.
        if (from === result) from = result.slice();
        for (let i = 0; i < from.length; i++) from[i] /= divideBy;
      }
      overlap(start, start + from.length, (i, lo, hi) => {
        const sink = sinks[i];
        if (sink) backend.write(sink, lo, from.subarray(at[i] + lo - start, at[i] + hi - start));
      });
    };
    const done = group.run(call, async () => {
      await reached;
      if (divisor) divideBy = await divisor;
      const collectives = group.backend;
      await (collectives.allReduceVia
        ? collectives.allReduceVia(call, numel, fill, take)
        : allReduceViaHost(collectives, call, numel, fill, take));
    }).finally(() => host && giveBackHost(host));
    device.stream.waitFor(done.then(() => () => {}));
  }

  /**
   * Which parameters some rank used since the last synchronised backward
   * (PyTorch's global "used map"), learnt in a blocking exchange of one bit
   * per parameter, so that `backward()` can leave the gradients of those no
   * rank used untouched before it returns. A backend without
   * `allGatherSync` (a plugin) counts every parameter as used.
   */
  #usedAnywhere(pass: Pass): Set<Parameter> {
    const params = [...this.#names.keys()];
    const used = (p: Parameter) => pass.ready.has(p) || this.#usedSinceSync.has(p);
    const group = this.#group;
    const backend = group.backend;
    if (group.worldSize === 1) return new Set(params.filter(used));
    if (!backend.allGatherSync) return new Set(params);
    const bits = new Int32Array(Math.ceil(params.length / 32));
    params.forEach((p, i) => {
      if (used(p)) bits[i >> 5] |= 1 << (i & 31);
    });
    const call = group.call({ kind: "allGather", dtype: "int32", shapes: [[bits.length]] });
    const queued = group.queued;
    let parts: Int32Array[];
    try {
      parts = group.runSync(call, () => backend.allGatherSync!(call, bits));
    } catch (error) {
      if (queued === 0 || !(error instanceof DistributedError)) throw error;
      throw new DistributedError(
        `${error.message}. DistributedDataParallel (${
          this.#staticGraph ? "staticGraph" : "findUnusedParameters"
        }) blocked rank ${group.rank} here with ${queued} earlier collective${
          queued === 1 ? "" : "s"
        } of its own still queued, which run only when its event loop does: a rank waiting for one of them never arrives. Let every rank await at the same points of its loop (all read the loss, or none)`,
        error.ranks,
        { cause: error },
      );
    }
    return new Set(params.filter((_, i) => parts.some((b) => (b[i >> 5] >>> (i & 31)) & 1)));
  }

  /**
   * Hands every bucket's flat gradient to the communication hook, in bucket
   * order, and writes what it returns into the gradients of the parameters
   * `written`. Everything stays in stream order: the hook's collectives and
   * these writes run once backward's kernels have.
   */
  #runHook(
    state: unknown,
    hook: CommHook<unknown>,
    written: (p: Parameter) => boolean,
  ): void {
    const last = this.#buckets.length - 1;
    this.#buckets.forEach(({ params }, index) => {
      const flat = cat(params.map((p) => (p.grad ?? p.zerosLike()).reshape([-1])));
      const bucket = new GradBucket(index, flat, params, index === last);
      const result = hook(state, bucket);
      checkBucketTensor(result, bucket, "DistributedDataParallel: the communication hook's result");
      let at = 0;
      for (const p of params) {
        const n = p.numel();
        if (written(p)) {
          (p.grad ??= p.zerosLike()).copy_(result.narrow(0, at, n).reshape(p.shape));
        }
        at += n;
      }
    });
  }

  #finishPass(): void {
    const pass = this.#pass;
    const joinPass = this.#joinPass;
    this.#pass = null;
    this.#joinPass = null;
    this.#armed = false;
    if (pass) this.#trained = true;
    if (!pass?.syncing) return;
    const unused = [...this.#names.keys()].filter((p) => !pass.ready.has(p));
    if (this.#staticUsed && this.#staticUsed.size < this.#names.size) {
      const changed = [...new Set([...pass.ready, ...this.#usedSinceSync])].filter((p) =>
        !this.#staticUsed!.has(p)
      );
      this.#checkStatic(changed);
      if (changed.length > 0) {
        this.#usedSinceSync.clear();
        throw new Error(
          `DistributedDataParallel (rank ${this.#group.rank}, staticGraph): ${
            changed.map((p) => this.#names.get(p)).join(", ")
          } got a gradient, but no rank used it in the first backward pass, so the graph is not static; drop staticGraph and pass { findUnusedParameters: true }`,
        );
      }
    }
    if (unused.length > 0 && !this.findUnusedParameters && !this.#staticGraph) {
      this.#usedSinceSync.clear();
      throw new Error(
        `DistributedDataParallel (rank ${this.#group.rank}): ${
          unused.map((p) => `${this.#names.get(p)} ${formatShape(p.shape)}`).join(", ")
        } got no gradient in this backward pass, so the ranks' gradient buckets cannot be all-reduced; pass { findUnusedParameters: true } to treat them as unused (zeros where another rank used them; untouched where no rank did), or leave them out of the module`,
      );
    }
    const usedAnywhere = this.#staticGraph
      ? (this.#staticUsed ??= this.#usedAnywhere(pass))
      : this.findUnusedParameters
      ? this.#usedAnywhere(pass)
      : null;
    this.#usedSinceSync.clear();
    this.#reduceGradients(usedAnywhere, joinPass?.active ?? null);
  }

  /**
   * With `staticGraph` and parameters learnt as unused, every synchronised
   * backward queues one small all-reduce in which each rank names the
   * first such parameter that got a gradient on it (its index + 1; 0:
   * none), before the gradient reduction. When a rank names one, the
   * all-reduce fails on every rank with an error naming the parameter and
   * the ranks, and so does every collective queued after it (the
   * gradients' on the ranks whose backward returned): they do not wait for
   * the failing rank until the timeout. PyTorch has no such check.
   */
  #checkStatic(changed: readonly Parameter[]): void {
    const group = this.#group;
    if (group.worldSize === 1) return;
    const params = [...this.#names.keys()];
    const flags = new Int32Array(group.worldSize);
    flags[group.rank] = changed.length > 0 ? params.indexOf(changed[0]) + 1 : 0;
    const call = group.call({
      kind: "allReduce",
      dtype: "int32",
      shapes: [[flags.length]],
      op: "sum",
    });
    const done = group.run(call, async () => {
      await group.backend.allReduce(call, flags);
      const ranks = [...flags.keys()].filter((q) => flags[q] !== 0);
      if (ranks.length === 0) return;
      const whole = (q: number) => group.members?.[q] ?? q;
      throw new DistributedError(
        `DistributedDataParallel (staticGraph): ${
          ranks.map((q) =>
            `${this.#names.get(params[flags[q] - 1])} got a gradient on rank ${whole(q)}`
          )
            .join(", ")
        }, but no rank used it in the first backward pass, so the graph is not static; drop staticGraph and pass { findUnusedParameters: true }`,
        ranks.map(whole),
      );
    });
    done.catch(() => {}); // raised by the gradient reduction queued after it, which fails with it
  }

  /**
   * The step's gradient reduction: the communication hook's, or one
   * averaging all-reduce per dtype (by the ranks `divisor` resolves with
   * when given: a join with `divideByInitialWorldSize` false).
   */
  #reduceGradients(usedAnywhere: Set<Parameter> | null, divisor: Promise<number> | null): void {
    if (this.#hook) {
      const { state, hook } = this.#hook;
      noGrad(() => this.#runHook(state, hook, (p) => !usedAnywhere || usedAnywhere.has(p)));
      return;
    }
    // One collective per dtype and step, whatever the number of buckets:
    // every exchange is a meeting of the ranks, and on a busy machine the
    // meeting, not the bytes, is what costs. The averages land in stream
    // order: `backward()` returns now, and the optimizer step queued after
    // it runs once they are in.
    for (const layout of this.#layouts) {
      const params = layout.buckets.flatMap((b) => this.#buckets[b].params);
      const call = this.#group.call({
        kind: "allReduce",
        dtype: layout.dtype,
        shapes: params.map((p) => p.shape),
        op: divisor ? "sum" : "avg",
      });
      // A parameter no rank used keeps its gradient as it was (PyTorch's
      // rule: Adam or momentum then skip it); one another rank used gets
      // the average, into a new gradient if it had none here.
      this.#allReduceGradients(
        call,
        params,
        (p) => !usedAnywhere || usedAnywhere.has(p),
        divisor,
      );
    }
  }

  /** A queued all-reduce of one int32 (join mode's small collectives). */
  #allReduceInt(value: number, op: "sum" | "max"): Promise<number> {
    const group = this.#group;
    const data = Int32Array.of(value);
    const call = group.call({ kind: "allReduce", dtype: "int32", shapes: [[1]], op });
    const done = group.run(call, async () => {
      await group.backend.allReduce(call, data);
      return data[0];
    });
    done.catch(() => {}); // raised by the collectives after it, which fail with it
    return done;
  }

  /**
   * Makes every rank's `tensors` those of the highest rank that offers
   * itself (`candidate`; -1 offers nothing), PyTorch's `_find_common_rank`
   * then a broadcast. The source is not known when the collectives are
   * queued, so each dtype goes by a sum all-reduce to which only it
   * contributes; the others add -0, as x + -0 is x for every x (+0 would
   * turn -0 into +0).
   */
  #broadcastFromCommonRank(tensors: readonly Tensor[], candidate: number): void {
    const group = this.#group;
    const common = this.#allReduceInt(candidate, "max");
    const byDType = new Map<DType, Tensor[]>();
    for (const t of tensors) byDType.set(t.dtype, [...(byDType.get(t.dtype) ?? []), t]);
    for (const [dtype, list] of byDType) {
      const call = group.call({
        kind: "allReduce",
        dtype,
        shapes: list.map((t) => t.shape),
        op: "sum",
      });
      const values = readFlat(list, "DistributedDataParallel.join");
      const received = runOnHost(group, call, values, async (host) => {
        if ((await common) !== group.rank) host.fill(-0);
        await group.backend.allReduce(call, host);
        return host;
      });
      writeFlat(list, received);
    }
  }

  /**
   * PyTorch's `_DDPJoinHook.main_hook`, on a rank out of data: the other
   * ranks' buffer broadcast, then, when their backward synchronises, their
   * gradient reduction with zeros from this rank. Unlike PyTorch, the
   * result is written into this rank's gradients (as on a rank whose batch
   * gave zero gradients), so a ZeroRedundancyOptimizer shard owned here
   * steps with the true average.
   */
  async #shadowIteration(): Promise<void> {
    const group = this.#group;
    const buffers = this.module.buffers();
    if (this.broadcastBuffers && this.#buffersStale && group.worldSize > 1 && buffers.length > 0) {
      this.#broadcastFromCommonRank(buffers, -1);
    }
    const syncing = (await this.#allReduceInt(0, "sum")) > 0;
    this.#buffersStale = syncing;
    const state = joinStateOf(this);
    if (state) state.stepless = !syncing;
    if (!syncing) return;
    const divisor = !state || divideByInitialWorldSize(state) || !state.isFirstJoinable
      ? null
      : Promise.resolve(state.active);
    for (const p of this.#names.keys()) p.grad = null;
    this.#reduceGradients(null, divisor);
  }

  /**
   * PyTorch's `_DDPJoinHook.post_hook`: every rank takes the parameters and
   * buffers of the last joiner (the highest-numbered one on a tie).
   */
  async #syncFinalModel(isLastJoiner: boolean): Promise<void> {
    const group = this.#group;
    const src = await this.#allReduceInt(isLastJoiner ? group.rank : -1, "max");
    if (src < 0) {
      throw new Error(
        "DistributedDataParallel.join: no rank reported being a last joiner (a bug in multigrad)",
      );
    }
    const all = [...this.module.parameters(), ...this.module.buffers()] as Tensor[];
    if (group.worldSize > 1 && all.length > 0) broadcastTensors(group, [...new Set(all)], src);
  }

  /**
   * Training with uneven inputs (PyTorch's `DistributedDataParallel.join`):
   * a {@link Join} over this wrapper alone; run the training loop in it:
   * `await ddp.join(options).run(async () => { ... })`. A rank out of
   * batches then takes part in the other ranks' gradient all-reduces with
   * zeros and in their buffer broadcasts; once every rank has joined, all
   * get the parameters and buffers of the rank that joined last (the
   * highest such rank), whatever `broadcastBuffers`. In the join the
   * buffers broadcast before a forward come from the highest rank still
   * training; after it (PyTorch 1.13 keeps the join's configuration),
   * forwards outside a join take them from the highest rank, not rank 0.
   * {@link Join.run} with `[ddp, zeroOptimizer]` shadows a
   * ZeroRedundancyOptimizer's broadcasts too.
   *
   * In a join, whether a backward synchronises is decided by its forward
   * (inside `noSync` or not), as in PyTorch. Unlike PyTorch 1.13, a forward
   * under `noGrad` (an evaluation) tells the joined ranks that no backward
   * follows, so ranks may evaluate while others have joined (PyTorch's
   * joined ranks shadow a gradient all-reduce that never comes: its gloo
   * run aborts). `findUnusedParameters` and `staticGraph` are refused in a
   * join: their blocking exchange at the end of backward would meet the
   * joined ranks before this rank's queued join notification had run.
   *
   * With other joinables, list this wrapper before a
   * `ZeroRedundancyOptimizer` (`Join.run([ddp, zero], ...)`; the other
   * order is refused): its forward runs an iteration's first collectives.
   * With a `ZeroRedundancyOptimizer` in the join, a joined rank's optimizer
   * steps only for the iterations whose backward synchronises: gradient
   * accumulation ({@link noSync} forwards, no step) and `noGrad` forwards
   * (validation) train as without ZeRO. PyTorch 1.13's joined optimizer
   * steps at every iteration of the others, so its run hangs there once a
   * rank has joined; the ranks still training must step exactly after the
   * synchronised backwards (a step after a noSync or noGrad forward while
   * a rank has joined fails every rank, naming the ranks that stepped and
   * those that joined).
   */
  join(options: DistributedDataParallelJoinOptions = {}): Join {
    const { divideByInitialWorldSize = true, enable = true, throwOnEarlyTermination = false } =
      options;
    return new Join([this], { divideByInitialWorldSize, enable, throwOnEarlyTermination });
  }

  /**
   * This wrapper's join hook (PyTorch's `join_hook`), which a {@link Join}
   * asks for; it reads `divideByInitialWorldSize` (default true).
   */
  joinHook(options: JoinHookOptions = {}): JoinHook {
    if ((this.findUnusedParameters || this.staticGraph) && options.enable !== false) {
      throw new Error(
        `DistributedDataParallel.join: ${
          this.findUnusedParameters ? "findUnusedParameters" : "staticGraph"
        } is not supported in a join: its blocking exchange at the end of backward would wait for joined ranks that wait for this rank's queued join notification`,
      );
    }
    // A Join asks for the hook when it is built, where PyTorch's sets `_join_config`;
    // a user's own call (PyTorch's `join_hook()`), whatever its options, sets nothing.
    const enable = enableOfAskingJoin(this);
    if (enable !== undefined) this.#joinEnabled = enable;
    return new DDPJoinHook(
      () => this.#shadowIteration(),
      (isLastJoiner) => this.#syncFinalModel(isLastJoiner),
    );
  }

  /** The device of the join's own collectives: this rank's. */
  get joinDevice(): Device {
    return this.device;
  }

  /** The group a join runs in: this wrapper's `processGroup`. */
  get joinProcessGroup(): DistributedGroup | undefined {
    return this.#processGroup;
  }
}
