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

/** When {@link Pipe} checkpoints a micro-batch's activations (PyTorch's `checkpoint`). */
export type PipeCheckpoint = "always" | "except_last" | "never";

/** Options of the {@link Pipe} constructor (PyTorch's keyword arguments). */
export interface PipeOptions {
  /** Micro-batches each mini-batch is split into along dim 0 (default 1). */
  chunks?: number;
  /**
   * Which micro-batches keep no activations in forward and recompute them in
   * backward: all, all but the last (default), or none. Only in training
   * mode with gradients enabled, as in PyTorch.
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
 * `torch.chunk` rule), runs them through the partitions on the GPipe
 * schedule (clock cycle k runs micro-batch i on partition j where i + j =
 * k), copies activations between devices with `.to()` (stream order, no
 * waiting), and concatenates the outputs on the last partition's device.
 * Backward gives the gradients of running the Sequential on one device.
 *
 * Deliberate differences from PyTorch 1.13: `forward` returns the output
 * tensor itself, not an `RRef` to it, and needs no RPC framework; the input
 * is one tensor (not a tuple); a child without parameters or buffers (ReLU)
 * joins the partition before it (or the first partition), where PyTorch puts
 * it in a CPU partition of its own; the partitions are not reordered in
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
  /** The partitions, each a Sequential of consecutive layers on one device. */
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
    verifyLayers(layers);
    const groups: { device: Device | null; layers: Module[] }[] = [];
    layers.forEach((m, i) => {
      const device = deviceOf(m, i);
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
    this.partitions = new ModuleList(groups.map((g) => new Sequential(...flatten(g.layers))));
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
   * Runs the mini-batch `input` (on the first partition's device, at least
   * `chunks` rows) through the pipeline: the output on the last partition's
   * device, the micro-batches' outputs concatenated in order.
   */
  override forward(input: Tensor): Tensor {
    if (!(input instanceof Tensor)) {
      throw new TypeError(`Pipe.forward: expected a Tensor, got ${typeof input}`);
    }
    if (input.device !== this.devices[0]) {
      throw new Error(
        `Pipe.forward: the input is on device ${input.device} but the first partition is on ${
          this.devices[0]
        }; move the input there with .to()`,
      );
    }
    if (input.ndim === 0 || input.shape[0] < this.chunks) {
      throw new RangeError(
        `Pipe.forward: the batch (dim 0) of an input of shape [${
          input.shape.join(", ")
        }] is smaller than chunks = ${this.chunks}`,
      );
    }
    try {
      return this.#schedule(input);
    } catch (error) {
      // A mini-batch that failed midway must not leave its micro-batches' statistics behind.
      for (const bn of this.#deferred) bn.discard();
      throw error;
    }
  }

  #schedule(input: Tensor): Tensor {
    return forwardScope(() => {
      const batches = input.chunk(this.chunks, 0);
      const m = batches.length;
      for (const bn of this.#deferred) bn.chunks = m;
      const checkpointing = this.training && isGradEnabled();
      const stop = !checkpointing
        ? 0
        : { always: m, except_last: m - 1, never: 0 }[this.checkpoint];
      const partitions = [...this.partitions] as Sequential[];
      const params = partitions.map((p) => p.parameters());
      const modules = partitions.map((p) => p.modules());
      for (const cycle of clockCycles(m, partitions.length)) {
        for (const [i, j] of cycle) {
          const device = this.devices[j];
          const x = batches[i].device === device ? batches[i] : batches[i].to(device);
          const run = (t: Tensor) => {
            const y: unknown = partitions[j].forward(t);
            if (!(y instanceof Tensor)) {
              throw new TypeError(
                `Pipe: partition ${j} (on ${device}) returned ${typeof y}, not a Tensor`,
              );
            }
            return y;
          };
          batches[i] = i < stop ? checkpointed(run, x, params[j], modules[j]) : run(x);
        }
      }
      return m === 1 ? batches[0] : cat(batches, 0);
    });
  }
}
