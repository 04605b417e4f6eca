/**
 * What a `DataLoader` and its Workers say to each other: the messages, the
 * structured-clone form of tensors, and the recipe a Worker rebuilds its
 * copy of the dataset from. Used by `worker_pool.ts` (main thread) and
 * `worker_entry.ts` (inside each Worker); not public API.
 * @module
 */

import type { DType, TypedArray } from "../dtype.ts";
import { tensor } from "../ops/factory.ts";
import { Tensor } from "../tensor.ts";
import { isPlainObject } from "../util.ts";
import { ConcatDataset } from "./concat.ts";
import { TensorDataset } from "./dataset.ts";
import { Subset } from "./subset.ts";
import type { WorkerSource } from "./worker_source.ts";

/** The key that marks an encoded tensor (no user object has it by accident). */
const MARK = "__multigradTensor__";

/** A tensor as structured-clone data. */
export interface EncodedTensor {
  readonly [MARK]: true;
  readonly data: TypedArray;
  readonly shape: readonly number[];
  readonly dtype: DType;
}

/** A module export by URL, checked and resolved to a string. */
export interface ModuleRef {
  readonly module: string;
  readonly export: string;
  readonly args: unknown;
}

/** How a Worker rebuilds the dataset. */
export type DatasetRecipe =
  | { readonly kind: "source"; readonly source: ModuleRef }
  | { readonly kind: "tensors"; readonly tensors: readonly EncodedTensor[] }
  | {
    readonly kind: "subset";
    readonly dataset: DatasetRecipe;
    readonly indices: readonly number[];
  }
  | { readonly kind: "concat"; readonly datasets: readonly DatasetRecipe[] };

/** An error as structured-clone data. */
export interface ErrorRecord {
  readonly name: string;
  readonly message: string;
  readonly stack?: string;
}

/** Main thread to Worker. */
export type ToWorker =
  | {
    readonly kind: "init";
    readonly id: number;
    readonly numWorkers: number;
    readonly seed: number;
    /** The main thread's `getDefaultDtype()`: a worker makes its floats as the loop would. */
    readonly defaultDtype: DType;
    readonly dataset: DatasetRecipe;
    readonly initFn: ModuleRef | null;
    /** Whether the Worker makes the batch (default collate or convert, or `collateRef`) or sends the samples. */
    readonly collate: boolean;
    /** A collate (or, unbatched, convert) export `(input, args) => batch` the Worker runs. */
    readonly collateRef: ModuleRef | null;
    /** `batchSize: null`: each request is one sample (batchSize 1), converted, not collated. */
    readonly unbatched: boolean;
    readonly batchSize: number;
    readonly dropLast: boolean;
  }
  | {
    readonly kind: "batch";
    readonly task: number;
    readonly batch: number;
    readonly indices: Int32Array;
  }
  | { readonly kind: "next"; readonly task: number; readonly batch: number }
  | { readonly kind: "reset" };

/** Worker to main thread. */
export type FromWorker =
  | { readonly kind: "batch"; readonly task: number; readonly value: unknown }
  | { readonly kind: "end"; readonly task: number }
  | {
    readonly kind: "error";
    readonly task: number;
    readonly error: ErrorRecord;
    /** The dataset index whose `get` threw, when it was one. */
    readonly sample: number | null;
  }
  | { readonly kind: "init-error"; readonly error: ErrorRecord }
  | { readonly kind: "exit"; readonly reason: string };

/** `error` as structured-clone data. */
export function describeError(error: unknown): ErrorRecord {
  if (error instanceof Error) {
    return { name: error.name, message: error.message, stack: error.stack };
  }
  return { name: "Error", message: String(error) };
}

const KINDS: Record<string, ErrorConstructor> = {
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
};

/**
 * An error raised in the main thread for one a Worker reported, as
 * PyTorch's `ExceptionWrapper.reraise`: the same kind (TypeError,
 * RangeError, ...), a message saying where it happened, the worker's stack
 * in the message (the main thread's own stack says nothing about it) and
 * the original as `cause`.
 */
export function reviveError(record: ErrorRecord, where: string): Error {
  const original = new (KINDS[record.name] ?? Error)(record.message);
  original.name = record.name;
  if (record.stack !== undefined) original.stack = record.stack;
  const stack = record.stack ?? `${record.name}: ${record.message}`;
  const error = new (KINDS[record.name] ?? Error)(
    `Caught ${record.name} in ${where}: ${record.message}\nOriginal stack in the worker:\n${stack}`,
    { cause: original },
  );
  return error;
}

/**
 * `value` with its tensors replaced by their encoded form (read from their
 * device), arrays and plain objects walked, anything else left to
 * structured clone. The read copies are added to `transfer`, so they move
 * rather than copy again.
 */
export async function encodeValue(value: unknown, transfer: ArrayBuffer[]): Promise<unknown> {
  const reads: Promise<void>[] = [];
  const encoded = mapNested(value, (v) => {
    if (!(v instanceof Tensor)) return undefined;
    const out = {
      [MARK]: true,
      data: null as unknown as TypedArray,
      shape: v.shape,
      dtype: v.dtype,
    };
    reads.push(
      v.data().then((data) => {
        // A read is a fresh copy on every backend, so its buffer can move; a view of a larger
        // buffer is copied first so that only its own bytes travel.
        const own = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength
          ? data
          : data.slice();
        out.data = own;
        if (own.buffer instanceof ArrayBuffer) transfer.push(own.buffer);
      }),
    );
    return out;
  });
  await Promise.all(reads);
  return encoded;
}

/** `value` with its encoded tensors rebuilt on the cpu. */
export function decodeValue(value: unknown): unknown {
  return mapNested(value, (v) => {
    if (!isPlainObject(v) || v[MARK] !== true) return undefined;
    const t = v as unknown as EncodedTensor;
    return tensor(t.data, { shape: [...t.shape], dtype: t.dtype, device: "cpu" });
  });
}

/**
 * `value` rebuilt with `leaf`'s answer wherever it gives one (not
 * undefined), walking arrays, plain objects, and the keys and values of
 * Maps and Sets (structured clone keeps those, so a collate may return
 * them: PyTorch's collate walks any Mapping); anything else is left as is.
 */
export function mapNested(value: unknown, leaf: (v: unknown) => unknown): unknown {
  const walk = (v: unknown): unknown => {
    const replaced = leaf(v);
    if (replaced !== undefined) return replaced;
    if (Array.isArray(v)) return v.map(walk);
    if (v instanceof Map) return new Map([...v].map(([k, x]) => [walk(k), walk(x)]));
    if (v instanceof Set) return new Set([...v].map(walk));
    if (isPlainObject(v)) {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[k] = walk(x);
      return out;
    }
    return v;
  };
  return walk(value);
}

/**
 * A collate (or convert) export `fn` of `ref` as the loader calls it:
 * with `ref.args`, and refusing a Promise (batches are made synchronously,
 * in the main thread as in a worker, so one would be handed out as the
 * batch).
 */
export function userFunction(
  ref: ModuleRef,
  fn: unknown,
  what: string,
): (input: unknown) => unknown {
  const call = fn as (input: unknown, args: unknown) => unknown;
  return (input) => {
    const out = call(input, ref.args);
    if (out instanceof Promise) {
      // Nobody will await it: mark it handled, the error below says what went wrong.
      out.catch(() => {});
      throw new TypeError(
        `${what}: ${ref.export} of ${ref.module} returned a Promise; a ${what} must return the batch itself (load asynchronously in the dataset's get, which a worker awaits)`,
      );
    }
    return out;
  };
}

/** The tensors in `value`, where {@link mapNested} finds them. */
export function tensorsIn(value: unknown): Tensor[] {
  const found: Tensor[] = [];
  mapNested(value, (v) => {
    if (!(v instanceof Tensor)) return undefined;
    found.push(v);
    return v;
  });
  return found;
}

/**
 * `ref` checked and with its module as an absolute URL string; `what`
 * names it in errors.
 */
export function checkModuleRef(ref: unknown, what: string): ModuleRef {
  const r = ref as Partial<WorkerSource> | null;
  if (r === null || typeof r !== "object" || typeof r.export !== "string" || r.export === "") {
    throw new TypeError(
      `DataLoader: ${what} must be { module, export, args? } naming an exported function of a module (got ${
        r === null ? "null" : typeof r
      })`,
    );
  }
  const module = r.module instanceof URL ? r.module.href : r.module;
  if (typeof module !== "string" || !URL.canParse(module)) {
    throw new TypeError(
      `DataLoader: ${what}.module must be an absolute URL, e.g. new URL("./my_data.ts", import.meta.url); got ${
        JSON.stringify(module)
      } (a Worker resolves relative paths against multigrad's own files, not yours)`,
    );
  }
  return { module, export: r.export, args: r.args };
}

/**
 * How a Worker gets its copy of `dataset`: the dataset's own
 * `workerSource()`, else by value for the built-in datasets whose rows are
 * tensors (a `TensorDataset`, and `Subset`s and `ConcatDataset`s of
 * them); anything else is refused, naming what to do. `numWorkers` and
 * `path` only word the error.
 */
export async function recipeOf(
  dataset: unknown,
  numWorkers: number,
  path = "the dataset",
): Promise<DatasetRecipe> {
  const d = dataset as { workerSource?: unknown; constructor?: { name?: string } };
  if (typeof d.workerSource === "function") {
    const source = (d.workerSource as () => unknown)();
    return { kind: "source", source: checkModuleRef(source, `${path}.workerSource()`) };
  }
  // Exact classes only: a subclass may compute its rows in ways a copy would not.
  const proto = Object.getPrototypeOf(dataset);
  if (proto === TensorDataset.prototype) {
    const transfer: ArrayBuffer[] = [];
    const tensors = await encodeValue([...(dataset as TensorDataset).tensors], transfer);
    return { kind: "tensors", tensors: tensors as EncodedTensor[] };
  }
  if (proto === Subset.prototype) {
    const s = dataset as Subset<unknown>;
    return {
      kind: "subset",
      dataset: await recipeOf(s.dataset, numWorkers, `${path}.dataset`),
      indices: s.indices,
    };
  }
  if (proto === ConcatDataset.prototype) {
    const c = dataset as ConcatDataset<unknown>;
    const parts: DatasetRecipe[] = [];
    for (const [i, part] of c.datasets.entries()) {
      parts.push(await recipeOf(part, numWorkers, `${path}.datasets[${i}]`));
    }
    return { kind: "concat", datasets: parts };
  }
  const name = d.constructor?.name ?? "object";
  throw new TypeError(
    `DataLoader: numWorkers=${numWorkers} needs a copy of the dataset in each Worker, but ${path} (${name}) cannot be sent to one. ` +
      `A TensorDataset, and a Subset or ConcatDataset of them, are copied automatically; any other dataset needs a ` +
      `workerSource() method returning { module, export, args } that names an exported function (args) => dataset ` +
      `building it inside the Worker (see data.WorkerSource). Add workerSource() to ${name}, or use numWorkers: 0.`,
  );
}

/** Rebuilds a dataset from its recipe (inside a Worker). */
export async function buildDataset(recipe: DatasetRecipe): Promise<unknown> {
  switch (recipe.kind) {
    case "source":
      return await callModuleRef(recipe.source, "workerSource", [recipe.source.args]);
    case "tensors":
      return new TensorDataset(...(decodeValue(recipe.tensors) as Tensor[]));
    case "subset":
      return new Subset(await buildDataset(recipe.dataset) as TensorDataset, recipe.indices);
    case "concat": {
      const parts: TensorDataset[] = [];
      for (const r of recipe.datasets) parts.push(await buildDataset(r) as TensorDataset);
      return new ConcatDataset(parts);
    }
  }
}

/** The module `ref` names, imported (inside a Worker). */
export async function importModule(
  ref: ModuleRef,
  what?: string,
): Promise<Record<string, unknown>> {
  if (what === undefined) return await import(ref.module);
  try {
    return await import(ref.module);
  } catch (error) {
    // The bare "Module not found" does not say which option named the module.
    const kind = error instanceof Error && error.name in KINDS ? KINDS[error.name] : Error;
    throw new kind(
      `${what}: could not import ${ref.module}: ${
        error instanceof Error ? error.message : String(error)
      }`,
      { cause: error },
    );
  }
}

/** Imports `ref.module` and calls its export with `args` (inside a Worker). */
export async function callModuleRef(
  ref: ModuleRef,
  what: string,
  args: unknown[],
): Promise<unknown> {
  const module = await importModule(ref, what);
  const fn = module[ref.export] as ((...a: unknown[]) => unknown) | undefined;
  if (typeof fn !== "function") {
    throw new TypeError(
      `${what}: ${ref.module} has no exported function "${ref.export}" (exports: ${
        Object.keys(module).join(", ") || "none"
      })`,
    );
  }
  return await fn(...args);
}
