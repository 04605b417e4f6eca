/**
 * What the ranks of tests/fsdp_join_rest_test.ts run: spawned as Workers
 * (its `main`) or under multigrad's tcp launcher (run as a script, writing
 * each rank's result as JSON to a file). `clip`: FSDP's `clipGradNorm_`
 * with a NaN or infinite total norm, and on a nested unit; `buffers`: where
 * a DDP join's BatchNorm buffers come from, in the join and after it.
 * @module
 */

import { distributed, nn, noGrad, optim, requestDevices, type Tensor, tensor } from "../mod.ts";
import { makeData } from "./distributed_ranks.ts";
import { Block, makeNet } from "./fsdp_ranks.ts";
import { runAsLaunchedRank } from "./rank_main.ts";

const { FullyShardedDataParallel: FSDP } = distributed.fsdp;

/** Options of the `clip` scenario. */
export interface ClipRestOptions {
  /** What rank `bad` writes into the first element of the root's shard gradient. */
  kind: "nan" | "inf";
  normType: number | "inf";
  /** The rank whose gradient gets the non-finite value. */
  bad: number;
  backend?: string;
}

/** What the `clip` scenario returns; numbers as strings (JSON has no NaN, Infinity or -0). */
export interface ClipRestResult {
  /** The total norm clipGradNorm_ returned. */
  norm: string;
  /** Every shard gradient of this rank (units in order, flattened), before and after the clip. */
  before: string[];
  after: string[];
  /** clipGradNorm_ on the auto-wrapped nested unit "module.2", then on a hand-wrapped one; noSync on "module.2". */
  nested: string[];
  /** The root's total norm of a later, finite pass (the ranks went on together). */
  later: string;
}

/** A number as a string that keeps NaN, ±Infinity and -0. */
function str(v: number): string {
  return Object.is(v, -0) ? "-0" : String(v);
}

async function gradsOf(model: nn.Module): Promise<string[]> {
  const out: string[] = [];
  for (const p of model.parameters()) {
    if (p.grad) out.push(...[...(await p.grad.data())].map(str));
  }
  return out;
}

function message(f: () => unknown): string {
  try {
    f();
    return "ok";
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * FSDP over the net (Blocks auto-wrapped): a backward on this rank's 4 rows,
 * rank `bad` puts NaN or Infinity into its root shard's gradient, then the
 * root clips with max norm 0.05.
 */
async function clip(rank: number, o: ClipRestOptions): Promise<ClipRestResult> {
  const [device] = await requestDevices({ backend: o.backend ?? "cpu" });
  const fsdp = new FSDP(makeNet(7).to(device), {
    autoWrapPolicy: distributed.fsdp.ModuleWrapPolicy(new Set([Block])),
  });
  const all = makeData(8);
  const x = tensor(all.x.slice(4 * rank, 4 * rank + 4), { device });
  const y = tensor(all.y.slice(4 * rank, 4 * rank + 4), { dtype: "int32", device });
  const lossFn = new nn.CrossEntropyLoss();
  lossFn.forward(fsdp.forward(x) as Tensor, y).backward();
  const root = fsdp.parameters()[0];
  const values = Float32Array.from(await root.grad!.data());
  if (rank === o.bad) values[0] = o.kind === "nan" ? NaN : Infinity;
  root.grad = tensor(values, { device: root.grad!.device });
  const before = await gradsOf(fsdp);
  const norm = str(await fsdp.clipGradNorm_(0.05, o.normType).item());
  const after = await gradsOf(fsdp);

  const nestedUnit = fsdp.namedModules().find(([n]) => n === "module.2")![1] as InstanceType<
    typeof FSDP
  >;
  const net = makeNet(7).to(device);
  const fields = net as unknown as Record<string, nn.Module>;
  const inner = new FSDP(fields["3"]);
  fields["3"] = inner;
  const outer = new FSDP(net);
  const nested = [
    message(() => nestedUnit.clipGradNorm_(0.05, o.normType)),
    message(() => inner.clipGradNorm_(0.05)),
    message(() => nestedUnit.noSync(() => lossFn.forward(fsdp.forward(x) as Tensor, y).backward())),
  ];
  fsdp.zeroGrad();
  lossFn.forward(fsdp.forward(x) as Tensor, y).backward();
  const later = str(await fsdp.clipGradNorm_(0.05, o.normType).item());
  lossFn.forward(outer.forward(x) as Tensor, y).backward();
  await outer.clipGradNorm_(0.05).item();
  return { norm, before, after, nested, later };
}

/** Options of the `buffers` scenario (a case of tests/fixtures/torch_ddp_join_rest.json). */
export interface BuffersOptions {
  /** Steps per rank inside the join. */
  counts: number[];
  /** Steps of every rank after the join, outside it. */
  after: number;
  broadcastBuffers: boolean;
}

/** The state dict at the join's end and after the steps outside it. */
export interface BuffersResult {
  joined: Record<string, number[]>;
  final: Record<string, number[]>;
}

/** A deterministic stream of numbers in [-0.5, 0.5) (the fixture's LCG). */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
}

/** Linear(4, 3) -> BatchNorm1d(3) -> Tanh -> Linear(3, 2), parameters from the LCG seeded 7. */
function bnModel(): nn.Sequential {
  const m = new nn.Sequential(
    new nn.Linear(4, 3),
    new nn.BatchNorm1d(3),
    new nn.Tanh(),
    new nn.Linear(3, 2),
  );
  const r = lcg(7);
  noGrad(() => {
    for (const p of m.parameters()) {
      p.copy_(tensor(Float32Array.from({ length: p.numel() }, r), { shape: [...p.shape] }));
    }
  });
  return m;
}

async function plain(m: nn.Module): Promise<Record<string, number[]>> {
  const out: Record<string, number[]> = {};
  for (const [k, v] of Object.entries(m.stateDict())) out[k] = [...(await v.data())];
  return out;
}

/**
 * DDP (SGD, momentum) over {@link bnModel}: `counts[rank]` steps in a
 * join on this rank's own data (the running statistics differ by rank),
 * then `after` steps outside it.
 */
async function buffers(rank: number, o: BuffersOptions): Promise<BuffersResult> {
  await requestDevices({ backend: "cpu" });
  const m = bnModel();
  const ddp = new distributed.DistributedDataParallel(m, { broadcastBuffers: o.broadcastBuffers });
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.1, momentum: 0.9 });
  const lossFn = new nn.MSELoss();
  const r = lcg(100 + rank);
  const step = async () => {
    const x = tensor(Float32Array.from({ length: 8 }, r), { shape: [2, 4] });
    const y = tensor(Float32Array.from({ length: 4 }, r), { shape: [2, 2] });
    opt.zeroGrad();
    const loss = lossFn.forward(ddp.forward(x), y);
    loss.backward();
    opt.step();
    await loss.item();
  };
  await ddp.join().run(async () => {
    for (let i = 0; i < o.counts[rank]; i++) await step();
  });
  const joined = await plain(m);
  for (let i = 0; i < o.after; i++) await step();
  return { joined, final: await plain(m) };
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  _worldSize: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<unknown> {
  switch (scenario) {
    case "clip":
      return await clip(rank, options as unknown as ClipRestOptions);
    case "buffers":
      return await buffers(rank, options as unknown as BuffersOptions);
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under the tcp launcher: `deno run -A tests/fsdp_join_rest_ranks.ts OUT_PREFIX SCENARIO JSON`.
if (import.meta.main) await runAsLaunchedRank(main);
