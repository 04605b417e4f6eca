/**
 * `Pipe`, GPipe pipeline parallelism over the devices a Sequential's layers
 * are placed on, as PyTorch 1.13's `torch.distributed.pipeline.sync.Pipe`.
 * @module
 */

import { isGradEnabled } from "../autograd.ts";
import type { Device } from "../device.ts";
import { ModuleList, Sequential } from "../nn/layers.ts";
import { Module } from "../nn/module.ts";
import { cat } from "../ops/view.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { DeferredBatchNorm } from "./deferred_batch_norm.ts";
import { checkpointed, clockCycles } from "./pipe_schedule.ts";
import { PipeSequential } from "./pipe_sequential.ts";
import { NoChunk, WithDevice } from "./pipe_wrappers.ts";

// `export *` so that `deno doc` lists them under parallel and distributed.pipeline.sync.
export * from "./pipe_wrappers.ts";

/** When {@link Pipe} checkpoints a micro-batch's activations (PyTorch's `checkpoint`). */
export type PipeCheckpoint = "always" | "except_last" | "never";

/** Options of the {@link Pipe} constructor (PyTorch's keyword arguments). */
export interface PipeOptions {
  /**
   * Micro-batches each mini-batch is split into along dim 0 (default 1), by
   * `torch.chunk`'s rule: ceil(batch / chunks) rows each, the last one
   * smaller, so a small batch makes fewer micro-batches (batch 5 with
   * chunks 4 gives rows [2, 2, 1]).
   */
  chunks?: number;
  /**
   * Which micro-batches keep no activations in forward and recompute them in
   * backward: all, all but the last (default), or none. Only in training
   * mode with gradients enabled, as in PyTorch. The last is the last
   * micro-batch the batch really made: PyTorch 1.13 stops at `chunks - 1`,
   * so after a batch smaller than `chunks` it checkpoints the last one too.
   */
  checkpoint?: PipeCheckpoint;
  /**
   * Replace each BatchNorm that tracks running statistics by a
   * {@link DeferredBatchNorm}, whose running statistics are those of the
   * whole mini-batch (default false).
   */
  deferredBatchNorm?: boolean;
}

const CHECKPOINT_MODES: readonly PipeCheckpoint[] = ["always", "except_last", "never"];

/** The one device of `m`'s parameters and buffers, null if it has none; an error if several. */
function deviceOf(m: Module, index: number): Device | null {
  let found: Device | null = null;
  let first = "";
  for (const [name, t] of [...m.namedParameters(), ...m.namedBuffers()]) {
    if (found === null) [found, first] = [t.device, name];
    else if (t.device !== found) {
      throw new Error(
        `Pipe: layer ${index} (${m.constructor.name}) should have all its parameters and buffers on a single device, but ${first} is on ${found} and ${name} on ${t.device}; use .to() to place it on one device`,
      );
    }
  }
  return found;
}

/** PyTorch's `verify_module`: no layer or parameter may appear twice. */
function verifyLayers(layers: readonly Module[]): void {
  const seen = new Map<Module, number>();
  const owner = new Map<Tensor, number>();
  layers.forEach((m, i) => {
    const before = seen.get(m);
    if (before !== undefined) {
      throw new Error(
        `Pipe: layers ${before} and ${i} are the same module; a module with duplicate children is not supported`,
      );
    }
    seen.set(m, i);
    for (const p of m.parameters()) {
      const other = owner.get(p);
      if (other !== undefined && other !== i) {
        throw new Error(
          `Pipe: layers ${other} and ${i} share a parameter; a module with duplicate parameters on distinct children is not supported`,
        );
      }
      owner.set(p, i);
    }
  });
}

/**
 * GPipe over the devices a Sequential's children are already on (PyTorch
 * 1.13's `Pipe`): consecutive children on one device form a partition; each
 * forward splits the batch along dim 0 into `chunks` micro-batches (the
 * `torch.chunk` rule: fewer when the batch is small, batch 2 with chunks 4
 * gives two micro-batches of one row), runs them through the partitions on
 * the GPipe schedule (clock cycle k runs micro-batch i on partition j where
 * i + j = k), copies activations between devices with `.to()` (stream order, no
 * waiting), and concatenates the outputs on the last partition's device.
 * Backward gives the gradients of running the Sequential on one device.
 *
 * Tuples, as PyTorch's: `forward(x, y, ...)` with several inputs, and a layer
 * that returns an array (JS's tuple), pass a tuple on; the next layer (in the
 * same partition or the next one) gets its items as separate arguments
 * (PyTorch's `PipeSequential`). Every tensor of the input tuple is split
 * along dim 0; other items (numbers, strings, ...) and the tensor of a
 * {@link NoChunk} go unchanged to every micro-batch. A tuple output comes
 * back as an array: its tensors concatenated along dim 0, and each other
 * item as the array of the micro-batches' values (PyTorch's `gather`).
 * Between partitions each tensor of a tuple moves to the next device.
 *
 * Deliberate differences from PyTorch 1.13: `forward` returns the output
 * itself, not an `RRef` to it, and needs no RPC framework; the input
 * tensors of a tuple must have the same batch size (PyTorch only asks that
 * they split into as many micro-batches, pairing rows that do not belong
 * together); a {@link DeferredBatchNorm} commits its running statistics at
 * the end of every mini-batch, however many micro-batches it made (PyTorch
 * 1.13's waits for `chunks` of them, so after a small batch its statistics
 * mix two mini-batches); every array is a tuple (PyTorch passes a list on as
 * one argument); a child without parameters or buffers (ReLU) joins the
 * partition before it (or the first partition), where PyTorch puts it in a
 * CPU partition of its own ({@link WithDevice} names its device, as in
 * PyTorch); a {@link NoChunk} tensor must be on the first partition's device
 * (PyTorch does not check it); the partitions are not reordered in
 * backward by phony dependencies, since the engine here runs on one thread
 * and the gradients are the same.
 *
 * @example
 * ```ts
 * const [d0, d1] = await requestDevices({ backend: "cpu", count: 2 });
 * const model = new nn.Sequential(
 *   new nn.Linear(16, 32).to(d0), new nn.ReLU(), new nn.Linear(32, 4).to(d1),
 * );
 * const pipe = new parallel.Pipe(model, { chunks: 4 });
 * const out = pipe.forward(randn([32, 16], { device: d0 })); // [32, 4] on d1
 * ```
 */
export class Pipe extends Module {
  /**
   * The partitions, each a Sequential of consecutive layers on one device
   * (PyTorch's `PipeSequential`: hooks on it fire once per micro-batch).
   */
  readonly partitions: ModuleList;
  /** The device of each partition. */
  readonly devices: readonly Device[];
  /** Micro-batches per mini-batch. */
  readonly chunks: number;
  /** Which micro-batches are checkpointed. */
  readonly checkpoint: PipeCheckpoint;
  #deferred: DeferredBatchNorm[];

  /** Partitions `module` (an nn.Sequential whose layers are on their devices). */
  constructor(module: Sequential, options: PipeOptions = {}) {
    super();
    if (!(module instanceof Sequential)) {
      throw new TypeError(
        `Pipe: module must be nn.Sequential to be partitioned, got ${
          module === null || typeof module !== "object"
            ? String(module)
            : (module as object).constructor.name
        }`,
      );
    }
    const chunks = options.chunks ?? 1;
    if (!Number.isInteger(chunks) || chunks <= 0) {
      throw new RangeError(`Pipe: number of chunks must be a positive integer, got ${chunks}`);
    }
    const checkpoint = options.checkpoint ?? "except_last";
    if (!CHECKPOINT_MODES.includes(checkpoint)) {
      throw new RangeError(
        `Pipe: checkpoint is not one of 'always', 'except_last', or 'never', got ${
          JSON.stringify(checkpoint)
        }`,
      );
    }
    if (options.deferredBatchNorm) DeferredBatchNorm.convertDeferredBatchNorm(module, chunks);
    const layers = [...module];
    if (layers.length === 0) throw new RangeError("Pipe: the Sequential has no layers");
    // As PyTorch's _split_module: a WithDevice's module moves to its device and is partitioned bare.
    verifyLayers(layers.map((m) => m instanceof WithDevice ? m.module : m));
    const groups: { device: Device | null; layers: Module[] }[] = [];
    layers.forEach((layer, i) => {
      const m = layer instanceof WithDevice ? layer.module.to(layer.device) : layer;
      const device = layer instanceof WithDevice ? layer.device : deviceOf(m, i);
      const last = groups.at(-1);
      if (last && (device === null || last.device === null || last.device === device)) {
        last.device ??= device;
        last.layers.push(m);
      } else groups.push({ device, layers: [m] });
    });
    if (groups[0].device === null) {
      throw new Error(
        "Pipe: no layer has parameters or buffers, so no partition has a device; place at least one layer on a device",
      );
    }
    // As PyTorch's _assemble_partition: a nested Sequential's layers join the partition directly.
    const flatten = (ms: Module[]) => ms.flatMap((m) => m instanceof Sequential ? [...m] : [m]);
    this.partitions = new ModuleList(
      groups.map((g) => new PipeSequential(...flatten(g.layers))),
    );
    this.devices = groups.map((g) => g.device as Device);
    this.chunks = chunks;
    this.checkpoint = checkpoint;
    this.training = module.training;
    this.#deferred = this.partitions.modules().filter((m): m is DeferredBatchNorm =>
      m instanceof DeferredBatchNorm
    );
  }

  /** Number of layers over all partitions (PyTorch's `len(pipe)`). */
  get length(): number {
    return [...this].length;
  }

  /** The layer at `index` over all partitions (negative counts from the end). */
  at(index: number): Module {
    const layers = [...this];
    const i = index < 0 ? index + layers.length : index;
    if (!Number.isInteger(i) || i < 0 || i >= layers.length) {
      throw new RangeError(`Pipe.at: index ${index} is out of range for ${layers.length} layers`);
    }
    return layers[i];
  }

  /** The layers of every partition, in order. */
  *[Symbol.iterator](): IterableIterator<Module> {
    for (const partition of this.partitions) yield* partition as Sequential;
  }

  /**
   * Runs the mini-batch `inputs` (one tensor, or a tuple's items as separate
   * arguments; every tensor on the first partition's device with the same
   * batch size, any size) through the pipeline: the output on
   * the last partition's device, the micro-batches' outputs concatenated in
   * order. `R` names what the last layer returns (a Tensor unless told, say
   * `forward<[Tensor, Tensor]>(x, y)` for a tuple); it is not checked.
   */
  override forward<R extends Tensor | unknown[] = Tensor>(...inputs: unknown[]): R {
    const batches = this.#scatter(inputs);
    try {
      return this.#schedule(batches) as R;
    } catch (error) {
      // A mini-batch that failed midway must not leave its micro-batches' statistics behind.
      for (const bn of this.#deferred) bn.discard();
      throw error;
    }
  }

  /** PyTorch's `microbatch.check` and `scatter`: the inputs' micro-batches, each a tuple. */
  #scatter(inputs: unknown[]): Tuple[] {
    const tensors = inputs.filter((x): x is Tensor => x instanceof Tensor);
    if (tensors.length === 0) {
      const whole = inputs.some((x) => x instanceof NoChunk);
      throw new TypeError(
        `Pipe.forward: the inputs hold no Tensor${whole ? " to split" : ""} (got ${
          describe(inputs)
        }); ${
          inputs.length === 1 && Array.isArray(inputs[0])
            ? "pass a tuple's items as separate arguments, forward(x, y)"
            : whole
            ? "a NoChunk tensor is not split, so pass at least one other"
            : "pass at least one"
        }`,
      );
    }
    const first = this.devices[0];
    inputs.forEach((x, k) => {
      const t = x instanceof NoChunk ? x.tensor : x;
      if (t instanceof Tensor && t.device !== first) {
        throw new Error(
          `Pipe.forward: the ${x instanceof NoChunk ? "NoChunk " : ""}input${
            inputs.length > 1 ? ` ${k}` : ""
          } is on device ${t.device} but the first partition is on ${first}; move the input there with .to()`,
        );
      }
    });
    const shape = (t: Tensor) => `[${t.shape.join(", ")}]`;
    const at = (t: Tensor) =>
      `${inputs.length > 1 ? `input ${inputs.indexOf(t)}` : "the input"} of shape ${shape(t)}`;
    // Any batch size splits as torch.chunk does (so a small batch makes fewer micro-batches); a
    // 0-dim tensor has nothing to split, as PyTorch's chunk says.
    const scalar = tensors.find((t) => t.ndim === 0);
    if (scalar) {
      throw new RangeError(
        `Pipe.forward: ${
          at(scalar)
        } has no batch dim (dim 0) to split into micro-batches; give it one, or wrap it in NoChunk`,
      );
    }
    const other = tensors.find((t) => t.shape[0] !== tensors[0].shape[0]);
    if (other) {
      throw new RangeError(
        `Pipe.forward: the input tensors' batch sizes (dim 0) differ, ${at(tensors[0])} and ${
          at(other)
        }; micro-batches split every tensor along dim 0, so they must agree`,
      );
    }
    const split = inputs.map((x) => x instanceof Tensor ? x.chunk(this.chunks, 0) : null);
    const m = split.find((c) => c !== null)!.length;
    const whole = inputs.map((x) => x instanceof NoChunk ? x.tensor : x);
    return Array.from({ length: m }, (_, i) => inputs.map((_, k) => split[k]?.[i] ?? whole[k]));
  }

  #schedule(inputs: Tuple[]): Tensor | unknown[] {
    return forwardScope(() => {
      // A micro-batch between partitions: a tensor, or a tuple (an array).
      const batches: (Tensor | Tuple)[] = inputs;
      const m = batches.length;
      for (const bn of this.#deferred) bn.chunks = m;
      const checkpointing = this.training && isGradEnabled();
      const stop = !checkpointing
        ? 0
        : { always: m, except_last: m - 1, never: 0 }[this.checkpoint];
      const partitions = [...this.partitions] as PipeSequential[];
      const params = partitions.map((p) => p.parameters());
      const modules = partitions.map((p) => p.modules());
      for (const cycle of clockCycles(m, partitions.length)) {
        for (const [i, j] of cycle) {
          const device = this.devices[j];
          const to = (x: unknown) => x instanceof Tensor && x.device !== device ? x.to(device) : x;
          const b = batches[i];
          // The first partition gets the input tuple's items as arguments, as PyTorch's.
          const args = b instanceof Tensor ? [to(b)] : b.map(to);
          // One module call per micro-batch, so the partition's hooks fire (PyTorch's partition(*inputs)).
          const run = (...xs: unknown[]) => checkOutput(j, device, partitions[j].forward(...xs));
          batches[i] = i < stop
            ? checkpointedTuple(run, args, params[j], modules[j])
            : run(...args);
        }
      }
      return gather(batches);
    });
  }
}

/** A micro-batch's tuple: its tensors, and the items that pass unchanged. */
type Tuple = unknown[];

/** What `xs` holds, for an error. */
function describe(xs: unknown[]): string {
  return `[${
    xs.map((x) =>
      Array.isArray(x)
        ? `an array of ${x.length}`
        : x === null
        ? "null"
        : x instanceof NoChunk
        ? "NoChunk"
        : typeof x
    ).join(", ")
  }]`;
}

/** A partition's output must be a Tensor or a tuple holding one (PyTorch's `Batch`). */
function checkOutput(j: number, device: Device, y: unknown): Tensor | Tuple {
  // Tensors in a nested array would be neither split, moved nor kept by a checkpoint's scope.
  const nested = Array.isArray(y)
    ? y.findIndex((x) => Array.isArray(x) && x.some((t) => t instanceof Tensor))
    : -1;
  if (nested >= 0) {
    throw new TypeError(
      `Pipe: partition ${j} (on ${device}) returned a tuple whose item ${nested} is an array holding tensors; return them as items of the tuple itself`,
    );
  }
  if (y instanceof Tensor || (Array.isArray(y) && y.some((x) => x instanceof Tensor))) return y;
  throw new TypeError(
    `Pipe: partition ${j} (on ${device}) returned ${
      Array.isArray(y) ? `an array with no Tensor, ${describe(y)}` : typeof y
    }, not a Tensor or an array holding one`,
  );
}

/**
 * {@link checkpointed} for a partition that may return a tuple: the
 * checkpoint sees its tensors only, and the other items come back in place
 * from the forward run (the recomputation's are dropped).
 */
function checkpointedTuple(
  run: (...args: unknown[]) => Tensor | Tuple,
  args: Tuple,
  params: readonly Tensor[],
  modules: readonly Module[],
): Tensor | Tuple {
  let template: Tuple | null = null;
  const tensorsOf = (...xs: unknown[]) => {
    const y = run(...xs);
    if (y instanceof Tensor) return y;
    template ??= y;
    return y.filter((x): x is Tensor => x instanceof Tensor);
  };
  const out = checkpointed(tensorsOf, args, params, modules);
  if (out instanceof Tensor) return out;
  let k = 0;
  return template!.map((x) => x instanceof Tensor ? out[k++] : x);
}

/** PyTorch's `microbatch.gather`: tensors concatenated along dim 0, other items listed. */
function gather(batches: (Tensor | Tuple)[]): Tensor | unknown[] {
  const [head] = batches;
  if (batches.every((b) => b instanceof Tensor)) {
    return batches.length === 1 ? head as Tensor : cat(batches as Tensor[], 0);
  }
  const kind = (x: unknown) =>
    x instanceof Tensor ? "Tensor" : Array.isArray(x) ? "array" : typeof x;
  const tuples = batches.map((b, i) => {
    if (!Array.isArray(b) || b.length !== (head as Tuple).length) {
      throw new TypeError(
        `Pipe: micro-batch ${i}'s output (${
          Array.isArray(b) ? `an array of ${b.length}` : kind(b)
        }) does not match micro-batch 0's (${
          Array.isArray(head) ? `an array of ${head.length}` : kind(head)
        })`,
      );
    }
    return b;
  });
  return (head as Tuple).map((x, k) => {
    const items = tuples.map((t, i) => {
      if ((t[k] instanceof Tensor) !== (x instanceof Tensor)) {
        throw new TypeError(
          `Pipe: item ${k} of micro-batch ${i}'s output is ${kind(t[k])}, of micro-batch 0's ${
            kind(x)
          }; their types must match`,
        );
      }
      return t[k];
    });
    if (!(x instanceof Tensor)) return items;
    return items.length === 1 ? x : cat(items as Tensor[], 0);
  });
}
