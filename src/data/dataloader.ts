/**
 * `DataLoader`: batches of a dataset, shuffled with its own seeded generator,
 * optionally copied to a device one batch ahead, as
 * `torch.utils.data.DataLoader`, in the main thread or (`numWorkers`) in
 * Web Workers.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { type Device, device as resolveDevice } from "../device.ts";
import { nextSeed, tensor } from "../ops/factory.ts";
import { stack } from "../ops/view.ts";
import { formatShape, sameShape } from "../shape.ts";
import { adopt, keep, tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { type Dataset, TensorDataset } from "./dataset.ts";
import { defaultConvert } from "./convert.ts";
import { Subset } from "./subset.ts";
import { IterableDataset } from "./iterable.ts";
import { isPlainObject, seededRandom } from "../util.ts";
import { mapTensors } from "../nested.ts";
import type { WorkerSource } from "./worker_source.ts";
import {
  checkModuleRef,
  decodeValue,
  importModule,
  mapNested,
  type ModuleRef,
  recipeOf,
  tensorsIn,
  userFunction,
} from "./worker_protocol.ts";
import { WorkerPool } from "./worker_pool.ts";
// Aliased: `Generator` is also the type of this file's generator functions.
import { Generator as TorchGenerator } from "../random/generator.ts";

/**
 * The batch {@link defaultCollate} makes from samples of type `T`: tensors
 * are stacked, numbers and booleans become a tensor, arrays and plain
 * objects are collated element-wise, anything else is listed.
 */
export type Collated<T> = T extends Tensor ? Tensor
  : T extends number | boolean ? Tensor
  : T extends string | null | undefined ? T[]
  : T extends readonly unknown[] ? { -readonly [K in keyof T]: Collated<T[K]> }
  : T extends object ? { [K in keyof T]: Collated<T[K]> }
  : T[];

function describe(v: unknown): string {
  if (v === null) return "null";
  if (v instanceof Tensor) return `Tensor of shape ${formatShape(v.shape)}`;
  if (Array.isArray(v)) return `array of length ${v.length}`;
  if (typeof v === "object") return (v as object).constructor?.name ?? "object";
  return typeof v;
}

function collateAt(samples: unknown[], path: string): unknown {
  const first = samples[0];
  const where = path ? ` at ${path}` : "";
  if (first instanceof Tensor) {
    samples.forEach((s, i) => {
      if (!(s instanceof Tensor)) {
        throw new TypeError(
          `defaultCollate: sample 0${where} is a Tensor but sample ${i} is ${describe(s)}`,
        );
      }
      if (!sameShape(s.shape, first.shape)) {
        throw new RangeError(
          `defaultCollate: sample 0${where} has shape ${
            formatShape(first.shape)
          } but sample ${i} has shape ${
            formatShape(s.shape)
          }; samples must have equal shapes to be stacked (pass a collate function)`,
        );
      }
    });
    return stack(samples as Tensor[], 0);
  }
  if (typeof first === "number" || typeof first === "boolean") {
    samples.forEach((s, i) => {
      if (typeof s !== typeof first) {
        throw new TypeError(
          `defaultCollate: sample 0${where} is a ${typeof first} but sample ${i} is ${describe(s)}`,
        );
      }
    });
    const values = samples as (number | boolean)[];
    const ints = values.every((v) => typeof v === "boolean" || Number.isInteger(v));
    return tensor(values, { dtype: ints ? "int32" : "float32" });
  }
  if (typeof first === "string" || first === null || first === undefined) return samples;
  if (Array.isArray(first)) {
    samples.forEach((s, i) => {
      if (!Array.isArray(s) || s.length !== first.length) {
        throw new RangeError(
          `defaultCollate: sample 0${where} is an array of length ${first.length} but sample ${i} is ${
            describe(s)
          }; each sample must have the same structure`,
        );
      }
    });
    return first.map((_, j) => collateAt(samples.map((s) => (s as unknown[])[j]), `${path}[${j}]`));
  }
  if (isPlainObject(first)) {
    const keys = Object.keys(first);
    samples.forEach((s, i) => {
      if (
        !isPlainObject(s) || Object.keys(s).length !== keys.length ||
        !keys.every((k) => Object.hasOwn(s, k))
      ) {
        throw new RangeError(
          `defaultCollate: sample ${i}${where} does not have the keys of sample 0 (${
            keys.join(", ")
          })`,
        );
      }
    });
    const out: Record<string, unknown> = {};
    for (const k of keys) {
      out[k] = collateAt(samples.map((s) => (s as Record<string, unknown>)[k]), `${path}.${k}`);
    }
    return out;
  }
  throw new TypeError(
    `defaultCollate: samples must hold tensors, numbers, booleans, strings, arrays or plain objects; got ${
      describe(first)
    }${where} (pass a collate function)`,
  );
}

/**
 * Collates samples into a batch, as PyTorch's `default_collate`: tensors are
 * stacked along a new dim 0 (shapes must match), numbers and booleans become
 * a 1-dimensional tensor on the default device (int32 when all are integers,
 * else float32; PyTorch uses int64/float64), arrays and plain objects are
 * collated element-wise keeping their structure, and strings, null and
 * undefined are listed.
 */
export function defaultCollate<T>(samples: readonly T[]): Collated<T> {
  if (!Array.isArray(samples) || samples.length === 0) {
    throw new RangeError("defaultCollate: expected a non-empty array of samples");
  }
  return collateAt([...samples], "") as Collated<T>;
}

/** Options of {@link DataLoader}. */
export interface DataLoaderOptions<T, B> {
  /**
   * Samples per batch (default 1). `null` turns batching off, as PyTorch's
   * `batch_size=None`: each sample is handed out alone, through `convert`
   * (default {@link defaultConvert}) rather than a collate; `dropLast` is
   * then an error, as in PyTorch. The batch type `B` stays the loader's
   * second type parameter: give it (e.g. `Converted<T>`) when it matters.
   * Deliberately unlike PyTorch, which calls `collate_fn` with each sample
   * here, `collate` is then refused with an error naming `convert`: a
   * function written for a list of samples, handed one sample that is
   * itself an array (or a tensor), would run without error on the wrong
   * structure; the separate option keeps both functions' types honest.
   */
  batchSize?: number | null;
  /** A new random order every epoch (default false). */
  shuffle?: boolean;
  /**
   * The indices to visit, in order, each epoch (a `Sampler` such as
   * `DistributedSampler`, or any iterable of indices); replaces `shuffle`.
   * Without workers it is read as the batches are asked for (as PyTorch's
   * `BatchSampler` reads it), so a sampler drawing from a `Generator`
   * and draws from it inside the loop interleave as in PyTorch; an index
   * outside the dataset is an error when its batch is asked for. With
   * `numWorkers > 0` it is read as batches are queued for the workers
   * (`prefetchFactor` per worker ahead, as PyTorch's), so an endless
   * sampler works with workers too.
   */
  sampler?: Iterable<number>;
  /**
   * The batches of indices to visit, in order, each epoch (a
   * `BatchSampler`, or any iterable of index arrays); excludes `batchSize`,
   * `shuffle`, `sampler` and `dropLast`, as PyTorch's `batch_sampler`.
   */
  batchSampler?: Iterable<readonly number[]>;
  /** Drop the last batch when it is smaller than `batchSize` (default false). */
  dropLast?: boolean;
  /**
   * Seed of the loader's own shuffling generator: the same seed gives the
   * same sequence of epochs. Without it each epoch draws its seed from the
   * global stream (`manualSeed`).
   */
  seed?: number;
  /**
   * Turns an array of samples into a batch (default {@link defaultCollate}),
   * as PyTorch's `collate_fn`. A function runs in the main thread, also with
   * `numWorkers > 0` (the workers send the samples; a function cannot be
   * sent to a Worker). A module reference `{ module, export, args? }` (a
   * {@link WorkerSource} naming an export `(samples, args) => batch`) runs
   * in each worker, as PyTorch's `collate_fn` does, so only the batch
   * crosses back; without workers it is imported in the main thread, which
   * needs `for await` (an import is asynchronous). Not with
   * `batchSize: null`: give `convert` (PyTorch passes `collate_fn` one sample
   * at a time there; a separate option keeps each function's type honest).
   */
  collate?: ((samples: T[]) => B) | WorkerSource;
  /**
   * With `batchSize: null`, turns each sample into what is handed out
   * (default {@link defaultConvert}), as PyTorch's `collate_fn` without
   * automatic batching: a function (main thread) or a module reference
   * `(sample, args) => value` run in the workers, as `collate`.
   */
  convert?: ((sample: T) => B) | WorkerSource;
  /**
   * A generator of floats in [0, 1) that the shuffle, and the workers' base
   * seed, draw from (PyTorch's `generator=`); share one with samplers to
   * share a stream. Excludes `seed`. As PyTorch's iterator, each epoch
   * (with persistent workers, only the first) draws the base seed from it
   * first, with or without workers, then the shuffle draws: the orders do
   * not depend on `numWorkers`. A `sampler` you give draws from its own
   * generator, as in PyTorch. A `Generator` makes the whole
   * sequence PyTorch's: each epoch draws the base seed (a 64-bit draw, as
   * `random_()` of an int64) and then, shuffled, the permutations
   * PyTorch's `RandomSampler` draws (its epoch's at the start, the unused
   * trailing one when the batches run out, none in a loop left early), so
   * draws from the same generator inside the loop interleave as in
   * PyTorch. Workers see `getWorkerInfo().seed` = the low 32 bits of
   * PyTorch's 63-bit base seed + worker id (PyTorch's `seed % 2**32`, up
   * to the carry).
   */
  generator?: TorchGenerator | (() => number);
  /**
   * Accepted for PyTorch code that passes `pin_memory=True`; it does nothing
   * here: no backend has page-locked host memory to copy from, and the
   * overlap pinning buys in PyTorch is what `device` gives (the next batch's
   * copy is queued before the current one is handed out).
   */
  pinMemory?: boolean;
  /**
   * Copy every batch's tensors here; the next batch's copy is queued before
   * the current batch is handed out, so transfers overlap with compute.
   */
  device?: Device | string;
  /**
   * Load batches in this many Web Workers (default 0: in the main thread),
   * as PyTorch's `num_workers`; iterate with `for await`. Each worker gets
   * its own copy of the dataset (see {@link DataLoader}).
   */
  numWorkers?: number;
  /** Batches requested ahead per worker (default 2; only with `numWorkers > 0`). */
  prefetchFactor?: number;
  /**
   * Keep the workers (and their dataset copies) from one epoch to the next
   * (default false; only with `numWorkers > 0`). They then live until
   * `loader.shutdown()`: a live Worker keeps a Deno program running.
   */
  persistentWorkers?: boolean;
  /**
   * Run in each worker, after it is seeded and its dataset built, as
   * PyTorch's `worker_init_fn`: a module export `(workerId, args)`, since a
   * function cannot be sent to a Worker.
   */
  workerInitFn?: WorkerSource;
  /**
   * Milliseconds to wait for a batch from the workers before failing
   * (default 0: forever), as PyTorch's `timeout` (in seconds there). The
   * first batch's wait includes the workers' start-up.
   */
  timeout?: number;
}

function forEachTensor(value: unknown, fn: (t: Tensor) => void): void {
  mapTensors(value, (t) => {
    fn(t);
    return t;
  });
}

/**
 * The `TensorDataset` under `dataset` (itself, or through `Subset`s) and
 * the rows of it that `indices` name, or null when there is none.
 */
function tensorRows(
  dataset: Dataset<unknown>,
  indices: Int32Array,
): { dataset: TensorDataset; indices: Int32Array } | null {
  let rows = indices;
  // The shortcut reads the tensors directly: only where `get` is the class's own (a subclass
  // that transforms its rows must be asked for each one, as PyTorch's __getitem__).
  while (dataset instanceof Subset && dataset.get === Subset.prototype.get) {
    const map = dataset.indices;
    const n = dataset.dataset.length;
    rows = rows.map((i) => (map[i] < 0 ? map[i] + n : map[i]));
    dataset = dataset.dataset;
  }
  return dataset instanceof TensorDataset && dataset.get === TensorDataset.prototype.get
    ? { dataset, indices: rows }
    : null;
}

/** The length of a sampler (or batch sampler), counting it when it is re-iterable. */
function countOf(sampler: Iterable<unknown>, name: string): number {
  const length = (sampler as { length?: unknown }).length;
  if (typeof length === "number") return length;
  // A generator is its own iterator: counting it would use up the epoch.
  if (sampler[Symbol.iterator]() === (sampler as unknown)) {
    throw new TypeError(
      `DataLoader: the ${name} is a one-shot iterator without a length, so the loader has no length (PyTorch raises here too); give an array, or an iterable with a length`,
    );
  }
  return [...sampler].length;
}

/** Throws unless `index`, which `from` gave at position `at` (`where`), names one of the dataset's `n` samples. */
function checkIndex(index: number, n: number, from: string, at: number, where = ""): void {
  if (!Number.isInteger(index) || index < 0 || index >= n) {
    throw new RangeError(
      `DataLoader: ${from} gave index ${index} (position ${at}${where}), outside the dataset's ${n} samples`,
    );
  }
}

/**
 * Iterates over a dataset in batches, as `torch.utils.data.DataLoader`.
 * Without workers, iterating is synchronous (`for ... of`): operations never
 * await. Each iteration is one epoch; with `shuffle`, every epoch visits each
 * sample once in a new order drawn from the loader's seeded generator. A
 * `sampler` or `batchSampler` decides the order instead. An
 * `IterableDataset` is batched in the order it gives its samples (no
 * `shuffle`, `sampler` or `batchSampler`, as PyTorch), read one batch per
 * step (one ahead with `device`); a loop that leaves early closes its
 * iterator, so the stream's `finally` runs.
 *
 * A `TensorDataset` (or a `Subset` of one) with the default collate is
 * batched with one `indexSelect` per tensor (a `narrow` when not shuffled) rather than by
 * stacking rows. Batches are made without recording gradients.
 *
 * Batches are ordinary tensors, owned by the caller: they belong to the
 * `tidy` scope active when they are handed out (even a prefetched one), or
 * call `dispose()` on them when done.
 *
 * **Workers** (`numWorkers > 0`, PyTorch's `num_workers`): batches are
 * loaded in that many Deno Web Workers and the loader is iterated with
 * `for await`. Each worker needs its own copy of the dataset, as PyTorch's
 * forked processes have one: a `TensorDataset` (and `Subset`s and
 * `ConcatDataset`s of them) is copied to each worker by structured clone;
 * any other dataset must say how to rebuild it, with a method
 * `workerSource(): WorkerSource` naming a module's exported function
 * `(args) => dataset` (see {@link WorkerSource}); anything else is refused
 * with an error saying so. Requests go round-robin, `prefetchFactor` per
 * worker ahead, and batches come back in the sampler's order (PyTorch's
 * in-order default). The default collate runs in the worker (measured
 * faster: one stacked tensor per field crosses, not one per sample; see
 * bench/NOTES.md); so does a `collate` given as a module reference (as
 * PyTorch runs `collate_fn` in its workers), while a `collate` function
 * runs in the main thread on the samples the workers send (a function
 * cannot be sent to a Worker: the one difference from PyTorch). With
 * `batchSize: null` each request is one sample, converted in the worker the
 * same way. Tensors cross as typed arrays and come
 * back on the cpu (then `device` copies them, as without workers); other
 * values cross by structured clone, so class instances arrive as plain
 * objects. Each epoch draws a base seed, after the epoch's order (so the
 * order is the one without workers): from `seed`'s own stream when given,
 * else from the shuffle's generator when shuffled (the global stream then
 * advances as without workers), else from the global stream (one draw more
 * than without workers, where PyTorch draws it in both cases). Worker i runs `manualSeed(base + i)`
 * before building its dataset, so `rand`/`randn` augmentations differ per
 * worker and repeat run to run; `Math.random` is not seeded (PyTorch does
 * not seed NumPy either). {@link getWorkerInfo} tells a worker who it is.
 * An `IterableDataset` is read in full by every worker (each batches its
 * own copy, `dropLast` per worker): shard it with `getWorkerInfo()`, or
 * each sample comes `numWorkers` times, as in PyTorch. A worker's `get`
 * may return a Promise (awaited there; the main thread refuses one).
 *
 * An error in a worker's `get` is raised in the main thread when its batch
 * is due, naming the worker, the batch and the sample index, with the
 * original message, stack and kind; a worker that dies, closes itself, or
 * (with `timeout`) takes too long is an error naming it. The end of an
 * epoch, leaving the loop early and any error terminate every worker, so
 * nothing keeps the program alive (an iterator dropped unclosed ends its
 * workers when it is garbage-collected, see `[Symbol.asyncIterator]`); `persistentWorkers` keeps them (and
 * their datasets' state) across epochs, and early exits, until an error or
 * {@link DataLoader.shutdown} (where PyTorch ends them when the loader is
 * collected, a live Deno Worker keeps the program running: call it).
 * Startup costs a worker a few hundred milliseconds (more when its
 * dataset's module imports all of `mod.ts`), paid each epoch unless
 * persistent.
 *
 * @example
 * ```ts
 * const loader = new data.DataLoader(new data.TensorDataset(x, y), { batchSize: 30, shuffle: true, seed: 1 });
 * for (const [xb, yb] of loader) {
 *   tidy(() => { opt.zeroGrad(); lossFn.forward(model.forward(xb), yb).backward(); opt.step(); });
 * }
 * // Two workers, each with its own copy of the dataset:
 * const parallel = new data.DataLoader(new data.TensorDataset(x, y), { batchSize: 30, numWorkers: 2 });
 * for await (const [xb, yb] of parallel) console.log(xb.shape, yb.shape);
 * ```
 */
export class DataLoader<T, B = Collated<T>> implements Iterable<B>, AsyncIterable<B> {
  /** The dataset batched. */
  readonly dataset: Dataset<T> | IterableDataset<T>;
  /** Samples per batch, or null when batching is off (`batchSize: null`). */
  readonly batchSize: number | null;
  /** Whether each epoch is shuffled. */
  readonly shuffle: boolean;
  /** Whether a last, smaller batch is dropped. */
  readonly dropLast: boolean;
  /** Where batches are copied, or null. */
  readonly device: Device | null;
  /** The indices visited each epoch, when given. */
  readonly sampler: Iterable<number> | null;
  /** The batches of indices visited each epoch, when given. */
  readonly batchSampler: Iterable<readonly number[]> | null;
  /** Web Workers that load the batches (0: the main thread does). */
  readonly numWorkers: number;
  /** Batches requested ahead per worker. */
  readonly prefetchFactor: number;
  /** Whether the workers outlive an epoch. */
  readonly persistentWorkers: boolean;
  /** Milliseconds to wait for a worker's batch (0: forever). */
  readonly timeout: number;
  /** The `pinMemory` option as given; it has no effect (see {@link DataLoaderOptions.pinMemory}). */
  readonly pinMemory: boolean;
  /** The main thread's collate (or, unbatched, convert) function, when one was given. */
  readonly #collate: ((input: never) => B) | null;
  /** A collate (or convert) given as a module reference: run in the workers. */
  readonly #collateRef: ModuleRef | null;
  /** {@link #collateRef} imported in the main thread (for an epoch without workers). */
  #resolved: ((input: unknown) => unknown) | null = null;
  readonly #random: (() => number) | null;
  readonly #iterable: boolean;
  readonly #initFn: ModuleRef | null;
  /** Draws each worker epoch's base seed, apart from the shuffle's draws (so the order is the same as without workers). */
  readonly #seeds: (() => number) | null;
  /**
   * The `generator` option: every new epoch (and persistent workers' first)
   * draws its base seed from it before the shuffle does, with or without
   * workers, as PyTorch's iterator, so the orders never depend on
   * `numWorkers`.
   */
  readonly #generator: (() => number) | null;
  /** The `generator` option when it is a `Generator`: the shuffle is PyTorch's. */
  readonly #torch: TorchGenerator | null;
  /** The unused permutation PyTorch's `RandomSampler` draws at the end of an epoch, by order. */
  readonly #trailing = new WeakMap<Int32Array, () => void>();
  /** The persistent workers, when started. */
  #pool: WorkerPool | null = null;
  /** Every pool with live Workers (for shutdown). */
  readonly #pools = new Set<WorkerPool>();

  /** A loader over `dataset`. */
  constructor(dataset: Dataset<T> | IterableDataset<T>, options: DataLoaderOptions<T, B> = {}) {
    const iterable = (dataset as unknown) instanceof IterableDataset;
    if (
      !iterable && (
        dataset === null || typeof dataset !== "object" ||
        typeof (dataset as Dataset<T>).get !== "function"
      )
    ) {
      throw new TypeError(
        "DataLoader: dataset must have a length and a get(index) method, or be an IterableDataset",
      );
    }
    if (!iterable) {
      const n = (dataset as Dataset<T>).length;
      if (!Number.isInteger(n) || n < 0) {
        throw new RangeError(`DataLoader: dataset length must be a non-negative integer, got ${n}`);
      }
    }
    if (iterable && typeof (dataset as IterableDataset<T>)[Symbol.iterator] !== "function") {
      throw new TypeError(
        `DataLoader: the IterableDataset ${dataset.constructor.name} has no [Symbol.iterator]() (an async iterable?); the loader reads samples synchronously`,
      );
    }
    const given = (v: unknown) => v !== undefined && v !== null;
    if (iterable) {
      // PyTorch's checks, in its order: a stream has no indices to choose or shuffle.
      for (const name of ["shuffle", "sampler", "batchSampler"] as const) {
        const value = options[name];
        if (name === "shuffle" ? given(value) && value !== false : given(value)) {
          throw new RangeError(
            `DataLoader with IterableDataset: expected unspecified ${name} option, but got ${name}=${
              typeof value === "object" ? (value as object).constructor?.name ?? "object" : value
            }`,
          );
        }
      }
    }
    const batchSampler = options.batchSampler ?? null;
    if (batchSampler !== null) {
      if (typeof (batchSampler as Iterable<unknown>)[Symbol.iterator] !== "function") {
        throw new TypeError("DataLoader: batchSampler must be an iterable of arrays of indices");
      }
      const clash = [
        options.batchSize !== undefined && options.batchSize !== 1 &&
        `batchSize=${options.batchSize}`,
        options.shuffle && "shuffle=true",
        given(options.sampler) && "a sampler",
        options.dropLast && "dropLast=true",
      ].filter((c) => c);
      if (clash.length > 0) {
        throw new RangeError(
          `DataLoader: batchSampler option is mutually exclusive with batchSize, shuffle, sampler, and dropLast (got ${
            clash.join(", ")
          })`,
        );
      }
    }
    const batchSize = options.batchSize === undefined ? 1 : options.batchSize;
    if (batchSize !== null && (!Number.isInteger(batchSize) || batchSize <= 0)) {
      throw new RangeError(
        `DataLoader: batchSize must be a positive integer, got ${batchSize} (or null: no batching)`,
      );
    }
    if (batchSize === null && options.dropLast) {
      throw new RangeError(
        "DataLoader: batchSize=null option disables auto-batching and is mutually exclusive with dropLast",
      );
    }
    const fnName = batchSize === null ? "convert" : "collate";
    const other = batchSize === null ? "collate" : "convert";
    if (options[other] !== undefined) {
      throw new TypeError(
        batchSize === null
          ? "DataLoader: with batchSize=null each sample goes through convert, not collate (PyTorch calls collate_fn with one sample there): pass it as convert"
          : `DataLoader: convert only applies with batchSize=null (no batching); with batchSize=${batchSize} pass collate`,
      );
    }
    const userFn = options[fnName];
    let collate: ((input: never) => B) | null = null;
    let collateRef: ModuleRef | null = null;
    if (typeof userFn === "function") collate = userFn as (input: never) => B;
    else if (userFn !== undefined) {
      if (userFn === null || typeof userFn !== "object") {
        throw new TypeError(
          `DataLoader: ${fnName} must be a function or a module reference { module, export, args? }, got ${
            userFn === null ? "null" : typeof userFn
          }`,
        );
      }
      collateRef = checkModuleRef(userFn, fnName);
    }
    if (options.seed !== undefined && !Number.isFinite(options.seed)) {
      throw new RangeError(`DataLoader: seed must be a finite number, got ${options.seed}`);
    }
    const torch = options.generator instanceof TorchGenerator ? options.generator : null;
    // The base seed: torch.empty((), dtype=torch.int64).random_(generator=g), two 32-bit draws.
    const generator = torch
      ? () => Number(BigInt.asUintN(32, torch.random64())) / 4294967296
      : options.generator;
    if (generator !== undefined) {
      if (typeof generator !== "function") {
        throw new TypeError(
          `DataLoader: generator must be a function giving floats in [0, 1), got ${typeof generator} (or a Generator)`,
        );
      }
      if (options.seed !== undefined) {
        throw new TypeError("DataLoader: pass seed or generator, not both");
      }
    }
    if (options.pinMemory !== undefined && typeof options.pinMemory !== "boolean") {
      throw new TypeError(
        `DataLoader: pinMemory must be a boolean, got ${typeof options.pinMemory}`,
      );
    }
    const sampler = options.sampler ?? null;
    if (sampler !== null) {
      if (typeof (sampler as Iterable<number>)[Symbol.iterator] !== "function") {
        throw new TypeError("DataLoader: sampler must be an iterable of dataset indices");
      }
      if (options.shuffle) {
        throw new RangeError(
          "DataLoader: sampler and shuffle are mutually exclusive (the sampler decides the order; DistributedSampler shuffles itself)",
        );
      }
    }
    this.sampler = sampler;
    this.batchSampler = batchSampler;
    this.#iterable = iterable;
    this.dataset = dataset;
    this.batchSize = batchSize;
    this.shuffle = options.shuffle ?? false;
    this.dropLast = options.dropLast ?? false;
    this.device = options.device === undefined ? null : resolveDevice(options.device);
    this.#collate = collate;
    this.#collateRef = collateRef;
    this.pinMemory = options.pinMemory ?? false;
    // A given generator is PyTorch's `generator`: the shuffle and the workers' base seed draw from it.
    this.#random = generator ??
      (options.seed === undefined ? null : seededRandom(Math.trunc(options.seed)));
    this.#generator = generator ?? null;
    this.#torch = torch;
    this.#seeds = generator ??
      (options.seed === undefined
        ? null
        : seededRandom((Math.trunc(options.seed) ^ 0x5bd1e995) >>> 0));
    const workers = checkWorkerOptions(options);
    this.numWorkers = workers.numWorkers;
    this.prefetchFactor = workers.prefetchFactor;
    this.persistentWorkers = workers.persistentWorkers;
    this.timeout = workers.timeout;
    this.#initFn = workers.initFn;
    // Persistent workers end with a loader collected unshut, as PyTorch's (see `shutdown`).
    if (this.persistentWorkers) abandoned.register(this, { pools: this.#pools });
  }

  /** Number of batches per epoch. */
  get length(): number {
    if (this.batchSampler !== null) return countOf(this.batchSampler, "batchSampler");
    const n = this.#iterable ? this.#streamLength() : this.#samples();
    if (this.batchSize === null) return n;
    return this.dropLast ? Math.floor(n / this.batchSize) : Math.ceil(n / this.batchSize);
  }

  /** Samples per epoch: the sampler's length, or the dataset's. */
  #samples(): number {
    const sampler = this.sampler;
    if (sampler === null) return (this.dataset as Dataset<T>).length;
    return countOf(sampler, "sampler");
  }

  /** Samples per epoch of an `IterableDataset`: its `length`, when it has one. */
  #streamLength(): number {
    const n = (this.dataset as { length?: unknown }).length;
    if (typeof n !== "number") {
      throw new TypeError(
        `DataLoader: the IterableDataset ${this.dataset.constructor.name} has no length, so the loader has none (PyTorch raises here too)`,
      );
    }
    return n;
  }

  /** This epoch's sample order; a shuffle draws from `random` when given. */
  #order(random?: () => number): Int32Array {
    if (this.sampler !== null) return this.#sampled();
    const n = (this.dataset as Dataset<T>).length;
    const order = new Int32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    if (!this.shuffle) return order;
    if (this.#torch) {
      // RandomSampler(generator=g): randperm(n) now, and randperm(n)[:0] when the batches run
      // out (#indexBatches), as PyTorch's sampler draws it then: not at all in a loop left early.
      const torch = this.#torch;
      const drawn = torch.permutation(n);
      this.#trailing.set(drawn, () => torch.permutation(n));
      return drawn;
    }
    random ??= this.#random ?? seededRandom(nextSeed());
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      const t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    return order;
  }

  /** The sampler's indices for this epoch, checked against the dataset. */
  #sampled(): Int32Array {
    return this.#checked([...this.sampler!], "the sampler", "");
  }

  /**
   * The sampler's indices in batches, read from it only as each batch is
   * asked for, as PyTorch's `BatchSampler` reads a sampler: draws a
   * sampler makes from a `Generator` then interleave with draws from it
   * inside the loop as in PyTorch (a loader with `device` reads one batch
   * ahead, as its prefetch).
   */
  *#sampledBatches(batchSize: number): Generator<{ indices: Int32Array; contiguous: boolean }> {
    const n = (this.dataset as Dataset<T>).length;
    let batch: number[] = [];
    let at = 0;
    for (const index of this.sampler!) {
      checkIndex(index, n, "the sampler", at);
      at++;
      batch.push(index);
      if (batch.length === batchSize) {
        yield { indices: Int32Array.from(batch), contiguous: false };
        batch = [];
      }
    }
    if (batch.length > 0 && !this.dropLast) {
      yield { indices: Int32Array.from(batch), contiguous: false };
    }
  }

  /** `indices` as an Int32Array, each checked against the dataset. */
  #checked(indices: readonly number[], from: string, where: string): Int32Array {
    const n = (this.dataset as Dataset<T>).length;
    if (!Array.isArray(indices) && !ArrayBuffer.isView(indices)) {
      throw new TypeError(
        `DataLoader: ${from} gave ${typeof indices}${where}; expected an array of indices`,
      );
    }
    indices.forEach((index, at) => checkIndex(index, n, from, at, where));
    return Int32Array.from(indices);
  }

  /**
   * This epoch's batches, each as a function that makes it: the batch
   * sampler's, the stream's (read as the batches are asked for), or runs of
   * the sample order.
   */
  *#jobs(): Generator<() => { batch: B; owned: Tensor[] }> {
    const batchSize = this.batchSize ?? 1;
    if (this.#iterable) {
      let samples: T[] = [];
      for (const sample of this.dataset as IterableDataset<T>) {
        samples.push(sample);
        if (samples.length === batchSize) {
          const got = samples;
          yield () => this.#make(null, false, got);
          samples = [];
        }
      }
      if (samples.length > 0 && !this.dropLast) yield () => this.#make(null, false, samples);
      return;
    }
    for (const { indices, contiguous } of this.#indexBatches()) {
      yield () => this.#make(indices, contiguous);
    }
  }

  /**
   * This epoch's batches of dataset indices (map-style), and whether each
   * is a contiguous run; `order`, when given, is this epoch's sample order
   * already drawn.
   */
  *#indexBatches(order?: Int32Array): Generator<{ indices: Int32Array; contiguous: boolean }> {
    const batchSize = this.batchSize ?? 1;
    if (this.batchSampler !== null) {
      let b = 0;
      for (const batch of this.batchSampler) {
        const indices = this.#checked(batch, "the batchSampler", ` of batch ${b}`);
        // The gather path would make an empty batch where PyTorch's default_collate raises.
        if (indices.length === 0 && this.#collate === null && this.#collateRef === null) {
          throw new RangeError(
            `DataLoader: the batchSampler gave an empty batch (batch ${b}); the default collate needs at least one sample`,
          );
        }
        b++;
        yield { indices, contiguous: false };
      }
      return;
    }
    if (order === undefined && this.sampler !== null) {
      yield* this.#sampledBatches(batchSize);
      return;
    }
    order ??= this.#order();
    let trailing = this.#trailing.get(order);
    const n = order.length;
    const count = this.dropLast ? Math.floor(n / batchSize) : Math.ceil(n / batchSize);
    const contiguous = !this.shuffle && this.sampler === null && this.batchSize !== null;
    for (let b = 0; b < count; b++) {
      const end = (b + 1) * batchSize;
      // A short last batch is made after the sampler ran out (its trailing draw); a full one before.
      if (end > n && trailing) {
        trailing();
        trailing = undefined;
      }
      const indices = order.subarray(b * batchSize, Math.min(n, end));
      yield { indices, contiguous };
    }
    trailing?.();
  }

  /**
   * The batch of samples `indices`, on `device` when set, and the tensors of
   * it that the loader made itself (all of them with the default collate;
   * with a custom one only its copies to `device`, since the collate may
   * return tensors someone else owns).
   */
  #make(
    indices: Int32Array | null,
    contiguous: boolean,
    streamed?: T[],
  ): { batch: B; owned: Tensor[] } {
    const custom = this.#userFn();
    const unbatched = this.batchSize === null;
    const dataset = this.dataset as Dataset<T>;
    // Subsets (randomSplit's) of a TensorDataset batch as fast as the dataset itself.
    const rows = custom || unbatched || indices === null ? null : tensorRows(dataset, indices);
    const build = (): { batch: B; owned: Tensor[] } => {
      let batch: unknown;
      if (rows) {
        const start = indices![0];
        const count = indices!.length;
        const byDevice = new Map<Device, Tensor>();
        batch = rows.dataset.tensors.map((t) => {
          if (contiguous && rows.dataset === (dataset as Dataset<unknown>)) {
            return t.narrow(0, start, count);
          }
          let idx = byDevice.get(t.device);
          if (!idx) byDevice.set(t.device, idx = tensor(rows.indices, { device: t.device }));
          return t.indexSelect(0, idx);
        });
      } else {
        const samples = streamed ?? Array.from(indices!, (i) => dataset.get(i));
        if (samples[0] instanceof Promise) {
          throw new TypeError(
            `DataLoader: ${dataset.constructor.name}.${
              streamed ? "[Symbol.iterator]() yielded" : `get(${indices![0]}) returned`
            } a Promise; ` +
              `the loader reads samples synchronously (load the data first, e.g. into a TensorDataset)`,
          );
        }
        const input = unbatched ? samples[0] : samples;
        batch = custom
          ? custom(input)
          : unbatched
          ? defaultConvert(input)
          : defaultCollate(samples);
      }
      const owned: Tensor[] = [];
      const target = this.device;
      if (target) {
        batch = mapNested(batch, (t) => {
          if (!(t instanceof Tensor)) return undefined;
          if (t.device === target) return t;
          const copy = t.to(target);
          owned.push(copy);
          return copy;
        });
      }
      if (!custom && !unbatched) forEachTensor(batch, (t) => owned.push(t));
      return { batch: batch as B, owned };
    };
    // A custom collate may return objects tidy cannot see into, and a converted sample may hold
    // the dataset's own tensors: leave those alone.
    return noGrad(() => (custom || unbatched ? build() : tidy(build)));
  }

  /**
   * The collate (or, unbatched, convert) function the main thread runs, or
   * null for the default; a module reference must have been imported.
   */
  #userFn(): ((input: unknown) => unknown) | null {
    if (this.#collate !== null) return this.#collate as (input: unknown) => unknown;
    if (this.#collateRef === null) return null;
    if (this.#resolved === null) {
      throw new TypeError(
        `DataLoader: a ${
          this.batchSize === null ? "convert" : "collate"
        } given as a module reference is imported asynchronously: iterate with for await (const batch of loader), or give a function`,
      );
    }
    return this.#resolved;
  }

  /**
   * One epoch of batches. With `device`, batch i + 1 is made and its copy
   * queued before batch i is handed out (an error making it is raised when
   * it is asked for); a prefetched batch that is never handed out (the loop
   * ended early) is released.
   */
  [Symbol.iterator](): Iterator<B> {
    if (this.numWorkers > 0) {
      throw new TypeError(
        `DataLoader: with numWorkers=${this.numWorkers} batches come from Web Workers, which answer asynchronously: iterate with for await (const batch of loader), not for ... of`,
      );
    }
    // Checked before the first batch is asked for (a later `for await` imports it).
    if (this.#collateRef !== null) this.#userFn();
    return this.#epoch();
  }

  /** One epoch in the main thread (see {@link [Symbol.iterator]}). */
  *#epoch(): Generator<B, void, undefined> {
    // PyTorch draws the base seed without workers too: the generator's stream is the same.
    this.#generator?.();
    const jobs = this.#jobs();
    const prefetch = this.device !== null;
    let ahead: { batch: B; owned: Tensor[] } | null = null;
    try {
      // `job` is the batch handed out next; `ahead`, when set, is it already made.
      for (let job = jobs.next(); !job.done;) {
        let current: B;
        if (ahead !== null) {
          current = ahead.batch;
          // Made during an earlier call: it belongs to the scope it is handed out in.
          for (const t of ahead.owned) adopt(t);
          ahead = null;
        } else current = job.value().batch;
        // Only a prefetching loader asks for the next batch before handing this one out: a
        // stream (or batch sampler) is read one batch per step, as PyTorch reads it.
        let failed: { error: unknown } | null = null;
        if (prefetch) {
          try {
            job = jobs.next();
            if (!job.done) {
              ahead = job.value();
              // Out of every scope until handed out, so an enclosing tidy cannot release it early.
              for (const t of ahead.owned) keep(t);
            }
          } catch (error) {
            // Raised where the batch is asked for, as without prefetch: this one is still handed out.
            failed = { error };
          }
        }
        yield current;
        if (failed !== null) throw failed.error;
        if (!prefetch) job = jobs.next();
      }
    } finally {
      // A prefetched batch nobody received (the loop ended early).
      if (ahead !== null) { for (const t of ahead.owned) t.dispose(); }
      // Closes the stream's (or batch sampler's) iterator, so its `finally` runs, as Python's
      // generators close when the loop drops them.
      jobs.return(undefined);
    }
  }

  /**
   * One epoch, asynchronously: `for await (const batch of loader)`. Without
   * workers it hands out the batches of the synchronous iterator; with
   * `numWorkers > 0` the workers load them (see {@link DataLoader}). A loop
   * that leaves early (`break` calls the iterator's `return()`), an error,
   * or the end of the epoch ends the workers, unless `persistentWorkers`
   * (then only an error or {@link shutdown} does). The iterator is
   * `AsyncDisposable`: `await using it = loader[Symbol.asyncIterator]()`
   * ends its workers when the block is left. An iterator dropped without
   * either (a `next()` or two, then forgotten) ends its workers when it is
   * garbage-collected, as PyTorch's iterator's `__del__`, but collection may
   * come late or never, and until then the Workers keep the program alive:
   * close iterators you leave.
   */
  [Symbol.asyncIterator](): AsyncGenerator<B, void, undefined> {
    const held: { pool: WorkerPool | null } = { pool: null };
    const iterator = this.#epochAsync(held);
    // The last resort for an iterator dropped unclosed; `held` must not reach the iterator.
    if (this.numWorkers > 0 && !this.persistentWorkers) abandoned.register(iterator, held, held);
    return iterator;
  }

  async *#epochAsync(held: { pool: WorkerPool | null }): AsyncGenerator<B, void, undefined> {
    if (this.#collateRef !== null && this.#resolved === null && this.numWorkers === 0) {
      const ref = this.#collateRef;
      const module = await importModule(ref, this.batchSize === null ? "convert" : "collate");
      const fn = module[ref.export];
      if (typeof fn !== "function") {
        throw new TypeError(
          `DataLoader: ${
            this.batchSize === null ? "convert" : "collate"
          }: ${ref.module} has no exported function "${ref.export}" (exports: ${
            Object.keys(module).join(", ") || "none"
          })`,
        );
      }
      this.#resolved = userFunction(ref, fn, this.batchSize === null ? "convert" : "collate");
    }
    if (this.numWorkers === 0) {
      yield* this.#epoch();
      return;
    }
    // Persistent workers serve every epoch (a new epoch supersedes one left running, as
    // PyTorch's reset of its one iterator); otherwise each epoch has its own, as each of
    // PyTorch's iterators has, so two epochs may run side by side.
    // PyTorch's iterator draws the workers' base seed with or without workers, ours only with
    // them: a shuffle from the global generator (no `seed`) draws the base seed from the
    // shuffle's own generator after the order, so the global stream (and every epoch's order)
    // is the one without workers. Otherwise the base seed is drawn after the order.
    let random: (() => number) | undefined;
    if (this.shuffle && this.sampler === null && this.#random === null) {
      random = seededRandom(nextSeed());
    }
    let pool = this.persistentWorkers ? this.#pool : null;
    const fresh = pool === null || pool.closed;
    // PyTorch's order: the iterator's base seed, then the sampler's draws.
    const drawn = fresh && this.#generator ? Math.floor(this.#generator() * 4294967296) : null;
    // A sampler is read as the workers' batches are queued (#indexBatches), not here.
    const order = this.#iterable || this.batchSampler !== null || this.sampler !== null
      ? undefined
      : this.#order(random);
    if (pool === null || pool.closed) {
      const recipe = await recipeOf(this.dataset, this.numWorkers);
      const base = drawn !== null
        ? drawn
        : this.#seeds
        ? Math.floor(this.#seeds() * 4294967296)
        : random
        ? Math.floor(random() * 4294967296)
        : nextSeed();
      pool = WorkerPool.start(recipe, {
        numWorkers: this.numWorkers,
        prefetchFactor: this.prefetchFactor,
        timeout: this.timeout,
        initFn: this.#initFn,
        baseSeed: base,
        collate: this.#collate === null,
        collateRef: this.#collateRef,
        unbatched: this.batchSize === null,
        iterable: this.#iterable,
        batchSize: this.batchSize ?? 1,
        dropLast: this.dropLast,
      });
      if (this.persistentWorkers) this.#pool = pool;
    }
    held.pool = pool;
    this.#pools.add(pool);
    const jobs = this.#iterable ? null : this.#indexBatches(order);
    const indices = jobs && (function* () {
      for (const job of jobs) yield job.indices;
    })();
    try {
      for await (const payload of pool.epoch(indices, this.persistentWorkers)) {
        yield this.#fromWorker(payload);
      }
    } finally {
      indices?.return(undefined);
      if (pool.closed) this.#pools.delete(pool);
      abandoned.unregister(held);
    }
  }

  /**
   * A worker's reply as the batch handed out: its tensors rebuilt on the
   * cpu (then copied to `device`); with a collate (or convert) function,
   * the samples rebuilt and given to it here.
   */
  #fromWorker(payload: unknown): B {
    const custom = this.#collate as ((input: unknown) => B) | null;
    if (custom) return noGrad(() => this.#place(custom(decodeValue(payload)))) as B;
    return noGrad(() => {
      const decoded = decodeValue(payload);
      const placed = this.#place(decoded);
      // The cpu copies that `device` replaced (not a tidy: it cannot see into a Map or Set).
      if (placed !== decoded) {
        for (const t of tensorsIn(decoded)) if (t.device !== this.device) t.dispose();
      }
      return placed as B;
    });
  }

  /** `batch` with its tensors (in Maps and Sets too) copied to `device`, when set. */
  #place(batch: unknown): unknown {
    const target = this.device;
    if (target === null) return batch;
    return mapNested(
      batch,
      (v) => v instanceof Tensor ? (v.device === target ? v : v.to(target)) : undefined,
    );
  }

  /**
   * Ends the workers now, as PyTorch does when a loader is collected: for
   * `persistentWorkers`, which otherwise live (and keep the program
   * running) after the last epoch. A later epoch starts new ones. A
   * loader garbage-collected unshut ends its workers then, but collection
   * may come late or never: call it.
   */
  shutdown(): void {
    for (const pool of this.#pools) pool.shutdown();
    this.#pools.clear();
    this.#pool = null;
  }
}

/**
 * Ends the Workers of an epoch whose iterator was dropped without being
 * closed (PyTorch's `_MultiProcessingDataLoaderIter.__del__`), or the
 * persistent workers of a loader dropped without `shutdown()`.
 */
const abandoned = new FinalizationRegistry<
  { pool: WorkerPool | null } | { pools: Set<WorkerPool> }
>((held) => {
  if ("pools" in held) { for (const pool of held.pools) pool.shutdown(); }
  else held.pool?.shutdown();
});

/** The worker options checked, with PyTorch's messages. */
function checkWorkerOptions(
  options: Pick<
    DataLoaderOptions<unknown, unknown>,
    "numWorkers" | "prefetchFactor" | "persistentWorkers" | "timeout" | "workerInitFn"
  >,
): {
  numWorkers: number;
  prefetchFactor: number;
  persistentWorkers: boolean;
  timeout: number;
  initFn: ModuleRef | null;
} {
  const numWorkers = options.numWorkers ?? 0;
  if (!Number.isInteger(numWorkers) || numWorkers < 0) {
    throw new RangeError(
      `DataLoader: numWorkers option should be a non-negative integer, got ${numWorkers}; use numWorkers: 0 to load in the main thread`,
    );
  }
  const prefetchFactor = options.prefetchFactor ?? 2;
  if (options.prefetchFactor !== undefined && numWorkers === 0) {
    throw new RangeError(
      "DataLoader: prefetchFactor option could only be specified with numWorkers > 0 (it counts batches loaded ahead per worker)",
    );
  }
  if (!Number.isInteger(prefetchFactor) || prefetchFactor < 1) {
    throw new RangeError(
      `DataLoader: prefetchFactor must be a positive integer, got ${prefetchFactor}`,
    );
  }
  const persistentWorkers = options.persistentWorkers ?? false;
  if (persistentWorkers && numWorkers === 0) {
    throw new RangeError("DataLoader: persistentWorkers option needs numWorkers > 0");
  }
  const timeout = options.timeout ?? 0;
  if (typeof timeout !== "number" || !(timeout >= 0) || !Number.isFinite(timeout)) {
    throw new RangeError(
      `DataLoader: timeout option should be non-negative milliseconds, got ${timeout}`,
    );
  }
  let initFn: ModuleRef | null = null;
  if (options.workerInitFn !== undefined) {
    if (typeof options.workerInitFn === "function") {
      throw new TypeError(
        "DataLoader: workerInitFn runs inside each Worker, and a function cannot be sent to one: give { module, export, args? } naming an exported function (workerId, args) => void",
      );
    }
    initFn = checkModuleRef(options.workerInitFn, "workerInitFn");
    if (numWorkers === 0) {
      throw new RangeError(
        "DataLoader: workerInitFn needs numWorkers > 0 (it runs in each worker)",
      );
    }
  }
  return { numWorkers, prefetchFactor, persistentWorkers, timeout, initFn };
}
