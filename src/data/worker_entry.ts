/**
 * The bootstrap of a `DataLoader` worker (a Deno Worker, `type: "module"`):
 * loads the package, seeds the generator, rebuilds its copy of the dataset,
 * runs the user's init function, then answers the loader's requests one at
 * a time, in the order they come: a batch of indices (map-style), or the
 * next batch of its own stream (iterable-style).
 * @module
 */

import { noGrad } from "../autograd.ts";
// The Tensor methods a TensorDataset's batches use (mod.ts installs these and more).
import "../ops/install.ts";
import "../ops_composite/install.ts";
import { BUILTIN_BACKENDS } from "../backends/builtin.ts";
import { backendNames, registerBackend } from "../device.ts";
import { setDefaultFloat } from "../dtype.ts";
import { manualSeed } from "../ops/factory.ts";
import type { Tensor } from "../tensor.ts";
import { DataLoader, defaultCollate } from "./dataloader.ts";
import { defaultConvert } from "./convert.ts";
import { keep, madeInScope, tidy } from "../storage.ts";
import { TensorDataset } from "./dataset.ts";
import { IterableDataset } from "./iterable.ts";
import { Subset } from "./subset.ts";
import { setCurrentWorker } from "./worker_state.ts";
import {
  buildDataset,
  callModuleRef,
  type DatasetRecipe,
  describeError,
  encodeValue,
  type FromWorker,
  importModule,
  type ModuleRef,
  tensorsIn,
  type ToWorker,
  userFunction,
} from "./worker_protocol.ts";

interface WorkerScope {
  onmessage: ((event: MessageEvent<ToWorker>) => void) | null;
  postMessage(message: FromWorker, transfer?: Transferable[]): void;
  close(): void;
}

const scope = globalThis as unknown as WorkerScope;

// A Worker that closes itself (or calls Deno.exit) just stops answering, with no event in the
// main thread: say so first, so the loader reports it instead of waiting forever.
const close = scope.close.bind(scope);
scope.close = () => {
  scope.postMessage({ kind: "exit", reason: "it called close()" });
  close();
};
const exit = Deno.exit;
Deno.exit = ((code?: number) => {
  scope.postMessage({ kind: "exit", reason: `it called Deno.exit(${code ?? ""})` });
  return exit(code);
}) as typeof Deno.exit;

// The backends, as mod.ts registers them, without loading all of mod.ts (most of a Worker's
// start-up): a dataset module that imports mod.ts registers them again, which is harmless as long
// as no tensor exists yet, so every user module is imported before the dataset is built.
if (backendNames().length === 0) {
  for (const { name, factory, priority } of BUILTIN_BACKENDS) {
    registerBackend(name, factory, { priority });
  }
}

type Init = Extract<ToWorker, { kind: "init" }>;
interface MapDataset {
  readonly length: number;
  get(i: number): unknown;
}

let init: Init | null = null;
let dataset: unknown = null;
let failed = false;
let stream: Iterator<unknown> | null = null;
/** The user's collate (or convert) export, when given as a module reference. */
let userCollate: ((input: unknown) => unknown) | null = null;
/** For a TensorDataset (or Subsets of one) with the default collate: the loader's gather path. */
let gather: { loader: Iterable<unknown>; indices: { current: readonly number[] } } | null = null;

async function start(message: Init): Promise<void> {
  init = message;
  setDefaultFloat(message.defaultDtype);
  for (const ref of modulesOf(message.dataset)) await importModule(ref, "workerSource");
  if (message.initFn) await importModule(message.initFn, "workerInitFn");
  const ref = message.collateRef;
  if (ref) {
    const module = await importModule(ref, message.unbatched ? "convert" : "collate");
    const fn = module[ref.export];
    if (typeof fn !== "function") {
      throw new TypeError(
        `${
          message.unbatched ? "convert" : "collate"
        }: ${ref.module} has no exported function "${ref.export}" (exports: ${
          Object.keys(module).join(", ") || "none"
        })`,
      );
    }
    userCollate = userFunction(ref, fn, message.unbatched ? "convert" : "collate");
  }
  manualSeed(message.seed);
  dataset = await buildDataset(message.dataset);
  setCurrentWorker({
    id: message.id,
    numWorkers: message.numWorkers,
    seed: message.seed,
    dataset,
  });
  if (message.initFn) {
    await callModuleRef(message.initFn, "workerInitFn", [message.id, message.initFn.args]);
  }
  if (
    message.collate && !ref && !message.unbatched && !(dataset instanceof IterableDataset) &&
    tensorRows(dataset)
  ) {
    const indices = { current: [] as readonly number[] };
    const batchSampler = {
      *[Symbol.iterator]() {
        yield indices.current;
      },
    };
    gather = {
      loader: new DataLoader(dataset as MapDataset as never, { batchSampler }),
      indices,
    };
  }
}

/** Every module a recipe names (imported before any tensor exists, see above). */
function modulesOf(recipe: DatasetRecipe): ModuleRef[] {
  switch (recipe.kind) {
    case "source":
      return [recipe.source];
    case "tensors":
      return [];
    case "subset":
      return modulesOf(recipe.dataset);
    case "concat":
      return recipe.datasets.flatMap(modulesOf);
  }
}

/** Whether `d` is a TensorDataset, or Subsets of one, whose rows the loader gathers itself. */
function tensorRows(d: unknown): boolean {
  while (Object.getPrototypeOf(d) === Subset.prototype) {
    d = (d as { dataset: unknown }).dataset;
  }
  return Object.getPrototypeOf(d) === TensorDataset.prototype;
}

/** Samples `indices`, awaiting any that `get` gives as a Promise (a Worker may wait). */
async function samplesAt(indices: Int32Array): Promise<unknown[]> {
  const d = dataset as MapDataset;
  const samples: unknown[] = [];
  for (const i of indices) {
    try {
      const s = d.get(i);
      samples.push(s instanceof Promise ? await s : s);
    } catch (error) {
      throw { sample: i, error };
    }
  }
  return samples;
}

/** The next `batchSize` samples of this worker's stream, or null at its end. */
async function nextSamples(): Promise<unknown[] | null> {
  const { batchSize, dropLast } = init!;
  if (stream === null) return null;
  const samples: unknown[] = [];
  while (samples.length < batchSize) {
    const step = stream.next();
    if (step.done) {
      stream = null;
      break;
    }
    samples.push(step.value instanceof Promise ? await step.value : step.value);
  }
  if (samples.length === 0 || (dropLast && samples.length < batchSize)) return null;
  return samples;
}

async function answer(message: Exclude<ToWorker, Init>): Promise<void> {
  if (message.kind === "reset") {
    try {
      stream?.return?.();
      stream = (dataset as Iterable<unknown>)[Symbol.iterator]();
    } catch (error) {
      // Reported as the failure of this worker's first batch, where the loader waits.
      stream = {
        next() {
          throw error;
        },
      };
    }
    return;
  }
  const task = message.task;
  try {
    let value: unknown;
    const made: Tensor[] = [];
    if (message.kind === "batch" && gather) {
      gather.indices.current = Array.from(message.indices);
      for (const b of gather.loader) value = b;
      made.push(...tensorsIn(value));
    } else {
      const samples = message.kind === "batch"
        ? await samplesAt(message.indices)
        : await nextSamples();
      if (samples === null) {
        scope.postMessage({ kind: "end", task });
        return;
      }
      const input = init!.unbatched ? samples[0] : samples;
      if (init!.collate) {
        const make = userCollate ??
          (init!.unbatched ? defaultConvert : (s: unknown) => defaultCollate(s as unknown[]));
        // Only the tensors made here are the worker's own to release (after they are sent): a
        // sample's, or one a user's collate returns from elsewhere, may be the dataset's.
        value = noGrad(() =>
          tidy(() => {
            const out = make(input);
            for (const t of tensorsIn(out)) {
              if (!madeInScope(t.storage)) continue;
              // tidy keeps what it finds in arrays and plain objects, not in a Map or Set.
              keep(t);
              made.push(t);
            }
            return out;
          })
        );
      } else value = input;
    }
    const transfer: ArrayBuffer[] = [];
    const encoded = await encodeValue(value, transfer);
    for (const t of made) t.dispose();
    scope.postMessage({ kind: "batch", task, value: encoded }, transfer);
  } catch (thrown) {
    const tagged = thrown !== null && typeof thrown === "object" && "sample" in thrown
      ? thrown as { sample: number; error: unknown }
      : { sample: null, error: thrown };
    scope.postMessage({
      kind: "error",
      task,
      error: describeError(tagged.error),
      sample: tagged.sample,
    });
  }
}

// One request at a time, in arrival order: batches come back in the order they were asked for.
let queue: Promise<void> = Promise.resolve();
scope.onmessage = (event) => {
  const message = event.data;
  queue = queue.then(async () => {
    if (failed) return;
    if (message.kind === "init") {
      try {
        await start(message);
      } catch (error) {
        failed = true;
        scope.postMessage({ kind: "init-error", error: describeError(error) });
      }
      return;
    }
    await answer(message);
  });
};
