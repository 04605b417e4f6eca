/**
 * What the ranks of tests/tcp_overlap_test.ts run, as processes of the
 * `"tcp"` process group: large all-reduces interleaved with the other
 * collectives and the blocking all-gather, a sub-group's beside the whole
 * group's, and a mismatch.
 * `deno run -A this.ts PREFIX SCENARIO JSON`; each rank writes its result
 * as JSON to `PREFIX.<rank>.json`.
 * @module
 */

import {
  distributed,
  manualSeed,
  nn,
  optim,
  requestDevices,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";
import { DistributedError, type ReduceOp } from "../src/distributed/backend.ts";
import { currentGroup } from "../src/distributed/state.ts";
import { gatherSync, wordsOf } from "./distributed_tcp_sync_ranks.ts";

/** Elements of the large all-reduces: 1 MiB of float32, past the ring's threshold (RING_BYTES, 256 KiB). */
export const BIG = 262_147;

/** Rank `rank`'s value at `k` in the large all-reduce number `i` (small integers: exact sums). */
export function valueOf(rank: number, i: number, k: number): number {
  return ((k * 7 + i * 3) % 11) - 5 + rank * (i + 1) + (k % 3 === 0 ? rank : 0);
}

/** The ops of the int32 all-reduces, in call order. */
export const INT_OPS: readonly ReduceOp[] = ["max", "min", "product", "band", "bor", "bxor"];

/** What the `order` scenario returns: for each check, the indices that differ (or a count). */
export interface Order {
  /** Per float32 sum i: elements that differ from the expected sum. */
  sums: number[];
  /** Per int32 op: elements that differ. */
  ints: number[];
  /** float64 avg: elements that differ. */
  avg: number;
  /** Per broadcast: its values. */
  broadcasts: number[][];
  /** Per blocking all-gather: whether every rank's words came back. */
  gathers: boolean[];
  /** A float32 sum of fractions: elements whose bits differ from the ring's order of adding (tcp_ring.ts). */
  bits: number;
  /** The sub-group's all-reduce (3 ranks, ranks 1 and 2): elements that differ (-1: not a member). */
  sub: number;
}

function ints(rank: number, i: number): Int32Array {
  return Int32Array.from({ length: BIG }, (_, k) => valueOf(rank, i, k) * 977 + k);
}

/** The elementwise `op` of `a` and `b`, as int32. */
function combine(op: ReduceOp, a: number, b: number): number {
  switch (op) {
    case "max":
      return Math.max(a, b);
    case "min":
      return Math.min(a, b);
    case "product":
      return Math.imul(a, b);
    case "band":
      return a & b;
    case "bor":
      return a | b;
    default:
      return a ^ b;
  }
}

async function differ(t: Tensor, expected: (k: number) => number): Promise<number> {
  const got = await t.data();
  let bad = 0;
  for (let k = 0; k < got.length; k++) if (got[k] !== expected(k)) bad++;
  return bad + Math.abs(got.length - BIG);
}

/** The error `work` fails with, as plain values (or "no error"). */
async function caught(
  work: () => Promise<unknown>,
): Promise<{ message: string; ranks: number[]; ms: number } | string> {
  const started = performance.now();
  try {
    await work();
    return "no error";
  } catch (error) {
    return {
      message: (error as Error).message,
      ranks: error instanceof DistributedError ? [...error.ranks] : [],
      ms: performance.now() - started,
    };
  }
}

/** What the `ddpBig` scenario returns. */
export interface BigDdp {
  /** A hash (FNV-1a) of every parameter's float32 bits after the steps (the ranks' must be equal). */
  bits: number;
  /** The largest difference from one process training on every rank's rows. */
  maxDiff: number;
  /** The parameters' element count (past RING_BYTES / 4: the buckets take the large path). */
  numel: number;
}

/** The `ddpKill` scenario's model in DDP (`options.layers` of 263 KiB), its SGD and a step's rows. */
function bigDdp(options: Record<string, number>) {
  const ddp = new distributed.DistributedDataParallel(bigModel(options.layers ?? 2));
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.1 });
  return { ddp, opt, ...bigRows(0, 0, 1) };
}

function bigModel(layers: number): nn.Sequential {
  manualSeed(21);
  const mods: nn.Module[] = [];
  for (let i = 0; i < layers; i++) mods.push(new nn.Linear(256, 256), new nn.Tanh());
  return new nn.Sequential(...mods);
}

/** Rows of step `step` for rank `rank` of `n` (n = 1: every rank's rows). */
function bigRows(step: number, rank: number, n: number, all = 2) {
  const rows = (4 * all) / n;
  const at = step * 4 * all + rank * rows;
  const x = tensor(
    Float32Array.from({ length: rows * 256 }, (_, k) => Math.sin((at * 256 + k) * 0.37)),
    { shape: [rows, 256] },
  );
  const y = tensor(
    Float32Array.from({ length: rows * 256 }, (_, k) => Math.cos((at * 256 + k) * 0.11)),
    { shape: [rows, 256] },
  );
  return { x, y };
}

/** DDP steps on large buckets against one process on all rows: the values and the bits. */
async function ddpBig(rank: number, n: number, options: Record<string, number>): Promise<BigDdp> {
  const layers = options.layers ?? 2;
  // The reference stays on cpu; with `webgpu`, DDP's ranks train there (a device write
  // refuses the area's shared memory: DDP copies the result out first).
  const [device] = await requestDevices({ backend: options.webgpu ? "webgpu" : "cpu" });
  const model = bigModel(layers).to(device);
  const ddp = new distributed.DistributedDataParallel(model, {
    bucketCapMB: options.bucketCapMB,
  });
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.1 });
  const reference = bigModel(layers);
  const refOpt = new optim.SGD(reference.parameters(), { lr: 0.1 });
  const loss = new nn.MSELoss();
  for (let step = 0; step < 3; step++) {
    const rows = bigRows(step, rank, n, n);
    const mine = { x: rows.x.to(device), y: rows.y.to(device) };
    const every = bigRows(step, 0, 1, n);
    tidy(() => {
      opt.zeroGrad();
      loss.forward(ddp.forward(mine.x) as Tensor, mine.y).backward();
      opt.step();
      refOpt.zeroGrad();
      loss.forward(reference.forward(every.x) as Tensor, every.y).backward();
      refOpt.step();
    });
  }
  let maxDiff = 0;
  let bits = 0x811c9dc5;
  let numel = 0;
  const refParams = reference.parameters();
  for (const [i, p] of model.parameters().entries()) {
    const got = await p.data() as Float32Array;
    const want = await refParams[i].data();
    numel += got.length;
    for (let k = 0; k < got.length; k++) maxDiff = Math.max(maxDiff, Math.abs(got[k] - want[k]));
    for (const word of new Uint32Array(got.buffer, got.byteOffset, got.length)) {
      bits = Math.imul(bits ^ word, 0x01000193) >>> 0;
    }
  }
  return { bits, maxDiff, numel };
}

async function run(scenario: string, options: Record<string, number>): Promise<unknown> {
  const group = currentGroup()!;
  const rank = group.rank;
  const n = group.worldSize;
  const ranks = Array.from({ length: n }, (_, q) => q);
  switch (scenario) {
    case "order": {
      // Made before any work is queued (newGroup is itself a collective).
      const handle = n === 3 ? await distributed.newGroup([1, 2]) : null;
      const sums: Tensor[] = [];
      const intTensors: Tensor[] = [];
      const bs: Tensor[] = [];
      const gathers: boolean[] = [];
      let subTensor: Tensor | null = null;
      const works = [];
      for (let i = 0; i < 6; i++) {
        // A DDP-like stream: buckets queued one after another, none awaited.
        const t = tensor(Float32Array.from({ length: BIG }, (_, k) => valueOf(rank, i, k)));
        sums.push(t);
        works.push(distributed.allReduce(t));
        const b = tensor([rank * 10 + i, -rank]);
        bs.push(b);
        works.push(distributed.broadcast(b, { src: i % n }));
        const it = tensor(ints(rank, i));
        intTensors.push(it);
        works.push(distributed.allReduce(it, { op: INT_OPS[i] }));
        if (i === 2 && handle && rank > 0) {
          subTensor = tensor(Float32Array.from({ length: BIG }, (_, k) => valueOf(rank, 9, k)));
          works.push(distributed.allReduce(subTensor, { group: handle }));
        }
        if (i % 2 === 1) {
          const got = gatherSync(group, wordsOf(rank, i, 5));
          gathers.push(got.every((w, q) => w.join(",") === wordsOf(q, i, 5).join(",")));
        }
      }
      const fraction = (q: number, k: number) =>
        Math.fround(Math.sin(k * 12.9898 + q * 78.233) * 437.5);
      const frac = tensor(Float32Array.from({ length: BIG }, (_, k) => fraction(rank, k)));
      works.push(distributed.allReduce(frac));
      const f64 = tensor(Float64Array.from({ length: BIG }, (_, k) => valueOf(rank, 7, k) / 4), {
        dtype: "float64",
      });
      works.push(distributed.allReduce(f64, { op: "avg" }));
      for (const w of works) await w.wait();
      const sumOf = (i: number, k: number, among = ranks) =>
        among.reduce((s, q) => s + valueOf(q, i, k), 0);
      return {
        sums: await Promise.all(sums.map((t, i) => differ(t, (k) => sumOf(i, k)))),
        ints: await Promise.all(intTensors.map((t, i) => {
          // Every rank's array made once (per element, it took O(BIG²) and looked like a hang).
          const all = ranks.map((q) => ints(q, i));
          return differ(
            t,
            (k) => all.slice(1).reduce((a, b) => combine(INT_OPS[i], a, b[k]), all[0][k]),
          );
        })),
        avg: await differ(f64, (k) => sumOf(7, k) / 4 / n),
        broadcasts: await Promise.all(bs.map(async (b) => [...await b.data()])),
        gathers,
        bits: await differ(frac, (k) => {
          // Chunk c of the ring starts at rank c and adds rank c + 1's, c + 2's ... on its way
          // (two ranks: rank 0's plus rank 1's, the same either way round).
          const c = ranks.find((j) => k < Math.floor((BIG * (j + 1)) / n))!;
          let acc = fraction(c, k);
          for (let j = 1; j < n; j++) acc = Math.fround(fraction((c + j) % n, k) + acc);
          return acc;
        }),
        sub: subTensor ? await differ(subTensor, (k) => sumOf(9, k, [1, 2])) : -1,
      } satisfies Order;
    }
    case "mismatch": {
      // Rank 1 asks for another op, or a longer array (or, with `crossing`, rank 0 one of
      // exactly RING_BYTES and rank 1 one element less: the large path against the small one).
      const length = options.crossing
        ? 65_536 - rank
        : options.longer && rank === 1
        ? BIG + 1
        : BIG;
      const op: ReduceOp = !options.longer && rank === 1 ? "max" : "sum";
      const t = tensor(new Float32Array(length));
      return await caught(() => distributed.allReduce(t, { op }).wait());
    }
    case "subOnly": {
      // A sub-group's large all-reduce while the whole group's is in flight.
      const handle = await distributed.newGroup([0, 2]);
      const world = tensor(Float32Array.from({ length: BIG }, (_, k) => valueOf(rank, 1, k)));
      const worldWork = distributed.allReduce(world, { op: "max" });
      let sub = -1;
      if (rank !== 1) {
        const s = tensor(Float32Array.from({ length: BIG }, (_, k) => valueOf(rank, 2, k)));
        await distributed.allReduce(s, { group: handle }).wait();
        sub = await differ(s, (k) => valueOf(0, 2, k) + valueOf(2, 2, k));
      }
      await worldWork.wait();
      const worldBad = await differ(world, (k) => Math.max(...ranks.map((q) => valueOf(q, 1, k))));
      return { sub, world: worldBad };
    }
    case "kill": {
      // Rank `victim` dies (no goodbye, no failure message) while its all-reduce is under way.
      const t = tensor(new Float32Array(options.elements ?? 4 * BIG).fill(rank + 1));
      const work = distributed.allReduce(t);
      if (rank === options.victim) {
        await new Promise((resolve) => setTimeout(resolve, options.delayMs ?? 0));
        Deno.kill(Deno.pid, "SIGKILL");
      }
      return await caught(() => work.wait());
    }
    case "ddpBig":
      return await ddpBig(rank, n, options);
    case "ddpKill": {
      // Rank `victim` dies once its backward has queued the gradients' all-reduce.
      const { ddp, opt, x, y } = bigDdp(options);
      return await caught(async () => {
        opt.zeroGrad();
        new nn.MSELoss().forward(ddp.forward(x) as Tensor, y).backward();
        if (rank === options.victim) {
          await new Promise((resolve) => setTimeout(resolve, options.delayMs ?? 0));
          Deno.kill(Deno.pid, "SIGKILL");
        }
        await ddp.parameters()[0].grad!.data();
      });
    }
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

if (import.meta.main) {
  const [out, scenario, json] = Deno.args;
  const options = JSON.parse(json ?? "{}");
  await distributed.initProcessGroup({ timeoutMs: options.timeoutMs ?? 60_000 });
  const rank = distributed.getRank();
  const result = await run(scenario, options);
  await Deno.writeTextFile(`${out}.${rank}.json`, JSON.stringify(result));
  if (options.victim !== undefined) {
    // The survivors stay until each has its error: one that left sooner would be a second lost
    // peer to a survivor that had not yet seen the victim's loss.
    const survivors = Array.from({ length: distributed.getWorldSize() }, (_, q) => q)
      .filter((q) => q !== options.victim);
    for (const q of survivors) {
      while (!(await Deno.stat(`${out}.${q}.json`).then(() => true, () => false))) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  }
  if (distributed.isInitialized()) await distributed.destroyProcessGroup();
}
