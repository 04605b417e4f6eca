/**
 * A rank of the `collectives` bench suite: times all-reduce, all-gather
 * into a tensor and reduce-scatter of the same bytes on cpu tensors,
 * interleaved (every round runs each collective K times, the order
 * rotating), then the blocking all-gather of 32 int32 words
 * (`allGatherSync`, what DDP's `findUnusedParameters` calls once per
 * backward), and hands rank 0 the slower rank's milliseconds per round.
 * As a spawned Worker it returns them; under `mpiexec`, or as processes of
 * the `"tcp"` group (`MASTER_ADDR` set), rank 0 prints them:
 *
 *   mpiexec -n 2 deno run -A bench/suites/collectives_rank.ts '{"sizes":[400000],"rounds":9,"reps":10}'
 *   deno run -A src/distributed/run.ts --nproc-per-node 2 --standalone bench/suites/collectives_rank.ts '{...}'
 * @module
 */

import {
  cpuBackend,
  distributed,
  registerBackend,
  requestDevices,
  type Tensor,
  tensor,
  zeros,
} from "../../mod.ts";
import { currentGroup } from "../../src/distributed/state.ts";

/** What every rank runs. */
export interface CollectivesConfig {
  /** Float32 elements of the whole array (the all-reduce's; the gather's output, the scatter's input). */
  readonly sizes: readonly number[];
  /** Interleaved rounds. */
  readonly rounds: number;
  /** Calls of each collective per round. */
  readonly reps: number;
}

/** The collectives timed, in the order of the results. */
export const COLLECTIVES = ["allReduce", "allGatherIntoTensor", "reduceScatterTensor"] as const;

/** Milliseconds per call, the slower rank's. */
export interface CollectivesTimes {
  /** `arrays[size][collective][round]`. */
  readonly arrays: number[][][];
  /** Per round: one `allGatherSync` of {@link SYNC_WORDS_TIMED} words. */
  readonly sync: number[];
}

/** The blocking all-gather's words (one bit per parameter of a 1024-parameter model). */
export const SYNC_WORDS_TIMED = 32;

/** The slower rank's milliseconds per call of `reps` blocking all-gathers, per round. */
async function measureSync(config: CollectivesConfig): Promise<number[]> {
  const group = currentGroup()!;
  const backend = group.backend;
  const words = new Int32Array(SYNC_WORDS_TIMED).fill(group.rank);
  const once = () => {
    const call = group.call({ kind: "allGather", dtype: "int32", shapes: [[words.length]] });
    group.runSync(call, () => backend.allGatherSync!(call, words));
  };
  const [host] = await requestDevices({ backend: "cpu" });
  const ms: number[] = [];
  for (let i = 0; i < 10; i++) once();
  for (let round = 0; round < config.rounds; round++) {
    await distributed.barrier();
    const t0 = performance.now();
    // More calls than the arrays' (each is short), for a steadier median.
    for (let i = 0; i < config.reps * 10; i++) once();
    const took = tensor([(performance.now() - t0) / (config.reps * 10)], {
      dtype: "float64",
      device: host,
    });
    distributed.allReduce(took, { op: "max" });
    ms.push((await took.data())[0] as number);
    took.dispose();
  }
  return ms;
}

async function measure(config: CollectivesConfig): Promise<CollectivesTimes> {
  const [host] = await requestDevices({ backend: "cpu" });
  const n = distributed.getWorldSize();
  const rank = distributed.getRank();
  const out: number[][][] = [];
  for (const size of config.sizes) {
    const part = Math.floor(size / n);
    const whole = part * n;
    const reduced = zeros([whole], { device: host }).add(rank + 1);
    const shard = zeros([part], { device: host }).add(rank + 1);
    const gathered = zeros([whole], { device: host });
    const input = zeros([whole], { device: host }).add(rank + 1);
    const scattered = zeros([part], { device: host });
    const calls: [() => PromiseLike<void>, Tensor][] = [
      [() => distributed.allReduce(reduced, { op: "avg" }), reduced],
      [() => distributed.allGatherIntoTensor(gathered, shard), gathered],
      [() => distributed.reduceScatterTensor(scattered, input, { op: "avg" }), scattered],
    ];
    const ms: number[][] = calls.map(() => []);
    // Warm-up: pools, scratch arrays and shared windows are made here.
    for (const [call, t] of calls) {
      for (let i = 0; i < 2; i++) await call();
      await t.data();
    }
    for (let round = 0; round < config.rounds; round++) {
      for (let j = 0; j < calls.length; j++) {
        const c = (round + j) % calls.length;
        const [call, t] = calls[c];
        await distributed.barrier();
        const t0 = performance.now();
        for (let i = 0; i < config.reps; i++) await call();
        // The last result's write-back to the tensor is part of the cost.
        await t.data();
        const took = tensor([(performance.now() - t0) / config.reps], {
          dtype: "float64",
          device: host,
        });
        distributed.allReduce(took, { op: "max" });
        ms[c].push((await took.data())[0] as number);
        took.dispose();
      }
    }
    out.push(ms);
    for (const t of [reduced, shard, gathered, input, scattered]) t.dispose();
  }
  return { arrays: out, sync: await measureSync(config) };
}

/** A spawned rank: rank 0's result is the group's. */
export function main(
  _rank: number,
  _worldSize: number,
  config: CollectivesConfig,
): Promise<CollectivesTimes> {
  return measure(config);
}

// Under mpiexec or the tcp launcher: rank 0 prints `RESULT <json>`.
if (import.meta.main) {
  const config = JSON.parse(Deno.args[0]) as CollectivesConfig;
  // One core per rank, as in a Worker rank.
  registerBackend("cpu", () => cpuBackend({ threads: 1 }), { priority: 1 });
  await distributed.initProcessGroup({ backend: Deno.env.get("MASTER_ADDR") ? "tcp" : "mpi" });
  const times = await measure(config);
  if (distributed.getRank() === 0) console.log(`RESULT ${JSON.stringify(times)}`);
  await distributed.destroyProcessGroup();
}
