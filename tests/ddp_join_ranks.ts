/**
 * What the ranks of tests/ddp_join_test.ts run: spawned as Workers (its
 * `main`) or under `mpiexec` (run as a script, writing each rank's result as
 * JSON to a file). Each scenario returns plain values.
 * @module
 */

import { distributed, nn, optim, requestDevices, type Tensor, tensor } from "../mod.ts";
import { runAsLaunchedRank } from "./rank_main.ts";

/** A batch as stored in tests/fixtures/torch_ddp_join.json (x [2, 4], y [2, 2], flat). */
export interface Batch {
  x: number[];
  y: number[];
}

/** Options of the training scenario. */
export interface JoinTrainOptions {
  /** Initial state dict, flat arrays by key (the fixture's). */
  init: Record<string, number[]>;
  /** Shapes by key. */
  shapes: Record<string, number[]>;
  /** Every rank's batches; rank r trains on `data[r]`. */
  data: Batch[][];
  /** `ddp.join`'s option; undefined: its default. */
  divideByInitialWorldSize?: boolean;
  /** `ddp.join`'s option; undefined: its default. */
  enable?: boolean;
  /** `ddp.join`'s option. */
  throwOnEarlyTermination?: boolean;
  /** "join": `ddp.join(...).run`; "none": no join at all; "zero": Join.run([ddp, ZeRO(SGD)]). */
  mode?: "join" | "none" | "zero";
  /** Await the loss every step (default true); false: a loop that never awaits. */
  awaitLoss?: boolean;
  /** The ranks' backend (default "cpu"). */
  backend?: string;
  /** Add a BatchNorm1d(3) after the first Linear (buffers to broadcast). */
  batchNorm?: boolean;
}

/** What a training rank returns. */
export interface JoinTrained {
  /** Final state dict values by key. */
  state: Record<string, number[]>;
  /** The error message, where the join raised. */
  error?: string;
  /** Steps this rank ran. */
  steps: number;
}

/** Linear(4, 3) -> Tanh -> Linear(3, 2) (optionally with BatchNorm1d(3)), loaded from `init`. */
function model(o: JoinTrainOptions): nn.Sequential {
  const layers: nn.Module[] = [new nn.Linear(4, 3)];
  if (o.batchNorm) layers.push(new nn.BatchNorm1d(3));
  layers.push(new nn.Tanh(), new nn.Linear(3, 2));
  const m = new nn.Sequential(...layers);
  if (!o.batchNorm) {
    const sd: Record<string, Tensor> = {};
    for (const [k, v] of Object.entries(o.init)) {
      sd[k] = tensor(Float32Array.from(v), { shape: o.shapes[k] });
    }
    m.loadStateDict(sd);
  }
  return m;
}

async function train(rank: number, o: JoinTrainOptions): Promise<JoinTrained> {
  const [device] = await requestDevices({ backend: o.backend ?? "cpu" });
  const ddp = new distributed.DistributedDataParallel(model(o).to(device));
  const mode = o.mode ?? "join";
  const opt = mode === "zero"
    ? new distributed.optim.ZeroRedundancyOptimizer(ddp.parameters(), {
      optimizerClass: optim.SGD,
      lr: 0.1,
      momentum: 0.9,
    })
    : new optim.SGD(ddp.parameters(), { lr: 0.1, momentum: 0.9 });
  const lossFn = new nn.MSELoss();
  let steps = 0;
  const loop = async () => {
    for (const b of o.data[rank]) {
      opt.zeroGrad();
      const x = tensor(Float32Array.from(b.x), { shape: [2, 4] });
      const y = tensor(Float32Array.from(b.y), { shape: [2, 2] }).to(device);
      const loss = lossFn.forward(ddp.forward(x), y);
      loss.backward();
      opt.step();
      steps++;
      if (o.awaitLoss !== false) await loss.item();
    }
  };
  let error: string | undefined;
  try {
    if (mode === "none") await loop();
    else if (mode === "zero") {
      await distributed.algorithms.Join.run([ddp, opt as distributed.algorithms.Joinable], loop, {
        divideByInitialWorldSize: o.divideByInitialWorldSize,
        enable: o.enable,
        throwOnEarlyTermination: o.throwOnEarlyTermination,
      });
    } else {
      await ddp.join({
        divideByInitialWorldSize: o.divideByInitialWorldSize,
        enable: o.enable,
        throwOnEarlyTermination: o.throwOnEarlyTermination,
      }).run(loop);
    }
  } catch (e) {
    error = (e as Error).message;
  }
  const state: Record<string, number[]> = {};
  for (const [k, v] of Object.entries(ddp.stateDict())) state[k] = [...(await v.data())];
  return { state, error, steps };
}

/** The messages of the errors a join refuses with. */
async function errors(): Promise<string[]> {
  await requestDevices({ backend: "cpu" });
  const out: string[] = [];
  const attempt = (f: () => unknown) => {
    try {
      f();
      out.push("no error");
    } catch (e) {
      out.push((e as Error).message);
    }
  };
  const unused = new distributed.DistributedDataParallel(new nn.Linear(2, 2), {
    findUnusedParameters: true,
  });
  attempt(() => unused.join());
  attempt(() => new distributed.algorithms.Join([]));
  const ddp = new distributed.DistributedDataParallel(new nn.Linear(2, 2));
  const join = ddp.join();
  let inner = "no error";
  await join.run(async () => {
    try {
      await ddp.join().run(() => {});
    } catch (e) {
      inner = (e as Error).message;
    }
  });
  out.push(inner);
  return out;
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  _worldSize: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<unknown> {
  switch (scenario) {
    case "train":
      return await train(rank, options as unknown as JoinTrainOptions);
    case "errors":
      return await errors();
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under mpiexec: `deno run -A tests/ddp_join_ranks.ts OUT_PREFIX SCENARIO JSON_OPTIONS`.
if (import.meta.main) await runAsLaunchedRank(main);
