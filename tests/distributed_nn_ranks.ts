/**
 * What the ranks of tests/distributed_nn_test.ts run (spawned as Workers):
 * each `distributed.nn.functional` collective on inputs every process can
 * rebuild ({@link part}), a loss weighted by {@link weight}, its backward;
 * float64 central differences of the loss summed over the ranks; bad input.
 * @module
 */

import {
  autograd,
  cat,
  type Device,
  distributed,
  type DType,
  noGrad,
  requestDevices,
  seededRandom,
  type Tensor,
  tensor,
} from "../mod.ts";
import { runAsLaunchedRank } from "./rank_main.ts";

const F = distributed.nn.functional;

/** Every function under test. */
export const FUNCTIONS = [
  "broadcast",
  "gather",
  "scatter",
  "reduce",
  "reduceScatter",
  "allGather",
  "allToAll",
  "allToAllSingle",
  "allReduce",
  "allReduceAvg",
  "allReduceMax",
] as const;

/** One of {@link FUNCTIONS}. */
export type Fn = typeof FUNCTIONS[number];

/** Elements of a part: every input and output is made of parts of this size. */
export const P = 2;

function values(seed: number): number[] {
  const random = seededRandom(seed);
  return Array.from({ length: P }, () => Math.round((random() * 2 - 1) * 64) / 64);
}

/** Part `k` of rank `rank`'s input to `fn` (the same numbers in every process). */
export function part(fn: Fn, rank: number, k: number): number[] {
  return values(1000 * FUNCTIONS.indexOf(fn) + 100 * rank + k + 1);
}

/** The weight of output part `k` on rank `rank` in the loss: the gradient that part gets. */
export function weight(fn: Fn, rank: number, k: number): number[] {
  return values(50_000 + 1000 * FUNCTIONS.indexOf(fn) + 100 * rank + k);
}

/** How many input parts each rank passes to `fn` (one tensor each, but one tensor of n parts for allToAllSingle). */
export function inputParts(fn: Fn, n: number): number {
  return ["scatter", "reduceScatter", "allToAll", "allToAllSingle"].includes(fn) ? n : 1;
}

/** The root of the rooted functions: not rank 0, except scatter's default. */
export function root(fn: Fn, n: number): number {
  return fn === "scatter" ? 0 : n - 1;
}

/** Within a sub-group: the group, and the whole group's rank of each of its ranks. */
interface InGroup {
  group: distributed.DistributedGroup;
  members: number[];
}

/** `fn` on this rank's `inputs` (one tensor per part; allToAllSingle's concatenated). */
function apply(fn: Fn, inputs: Tensor[], n: number, sub?: InGroup): Tensor[] {
  const like = () => inputs[0].zerosLike();
  const group = sub?.group;
  // src and dst are ranks of the whole group, as PyTorch's.
  const top = sub ? sub.members[root(fn, n)] : root(fn, n);
  switch (fn) {
    case "broadcast":
      return [F.broadcast(inputs[0], top, { group })];
    case "gather":
      return F.gather(inputs[0], top, { group });
    case "scatter":
      // The default src: 0.
      return [sub ? F.scatter(inputs, top, { group }) : F.scatter(inputs)];
    case "reduce":
      return [F.reduce(inputs[0], top, { group })];
    case "reduceScatter":
      return [F.reduceScatter(like(), inputs, { group })];
    case "allGather":
      return F.allGather(inputs[0], { group });
    case "allToAll":
      return F.allToAll(inputs.map(() => like()), inputs, { group });
    case "allToAllSingle": {
      const x = inputs[0];
      const splits = Array.from({ length: n }, () => P);
      const options = { inputSplitSizes: splits, outputSplitSizes: splits, group };
      return [F.allToAllSingle(x.zerosLike(), x, options)];
    }
    case "allReduce":
      return [F.allReduce(inputs[0], { group })];
    case "allReduceAvg":
      return [F.allReduce(inputs[0], { op: "avg", group })];
    case "allReduceMax":
      return [F.allReduce(inputs[0], { op: distributed.ReduceOp.MAX, group })];
  }
}

/** How many output parts `fn` gives each rank (its loss weights). */
export function outputParts(fn: Fn, n: number): number {
  return ["gather", "allGather", "allToAll", "allToAllSingle"].includes(fn) ? n : 1;
}

/** This rank's input leaves of `fn` from its parts, perturbed by `h` at flat element `at` when given. */
function leaves(
  fn: Fn,
  parts: number[][],
  dtype: DType,
  device: Device,
  at = -1,
  h = 0,
): Tensor[] {
  const flat = parts.flat();
  if (at >= 0) flat[at] += h;
  const chunks = fn === "allToAllSingle"
    ? [flat]
    : parts.map((_, k) => flat.slice(k * P, (k + 1) * P));
  return chunks.map((v) => tensor(v, { dtype, device, requiresGrad: true }));
}

/** Σ w ⊙ f(outputs), flattened and concatenated: f the identity, or sin (output gradients that depend on the outputs). */
function loss(outputs: Tensor[], w: number[][], nonlinear: boolean): Tensor {
  const flat = cat(outputs.map((o) => o.reshape([-1])));
  const { dtype, device } = flat;
  return (nonlinear ? flat.sin() : flat).mul(tensor(w.flat(), { dtype, device })).sum();
}

async function partsOf(t: Tensor): Promise<number[][]> {
  const flat = [...(await t.data())];
  return Array.from({ length: flat.length / P }, (_, k) => flat.slice(k * P, (k + 1) * P));
}

/** What a rank returns for one function: its outputs, input gradients and inputs afterwards, as parts. */
export interface Outcome {
  out: number[][];
  grad: number[][];
  after: number[][];
  /** The device the rank ran on. */
  device: string;
}

/** One rank's input parts and loss weights for `fn` (from {@link part} and {@link weight}). */
export function rankData(fn: Fn, rank: number, n: number): { x: number[][]; w: number[][] } {
  return {
    x: Array.from({ length: inputParts(fn, n) }, (_, k) => part(fn, rank, k)),
    w: Array.from({ length: outputParts(fn, n) }, (_, k) => weight(fn, rank, k)),
  };
}

async function gradients(
  fn: Fn,
  n: number,
  backend: string,
  data: { x: number[][]; w: number[][] },
  sub?: InGroup,
): Promise<Outcome> {
  const [device] = await requestDevices({ backend });
  const inputs = leaves(fn, data.x, "float32", device);
  const outputs = apply(fn, inputs, n, sub);
  loss(outputs, data.w, false).backward();
  const out = (await Promise.all(outputs.map(partsOf))).flat();
  const grad = (await Promise.all(inputs.map((t) => partsOf(t.grad!)))).flat();
  const after = (await Promise.all(inputs.map(partsOf))).flat();
  return { out, grad, after, device: String(device) };
}

/**
 * The largest difference, over this rank's input elements, between the
 * backward's gradient of Σ_ranks sin-weighted loss and its float64 central
 * difference (every rank runs each perturbed forward; one rank is perturbed).
 * reduce's non-destination ranks weigh their outputs by 0: 1.13's backward
 * leaves out their own use of them, so only then is it the derivative.
 */
async function finiteDifferences(fn: Fn, rank: number, n: number): Promise<number> {
  const [device] = await requestDevices({ backend: "cpu" });
  const { x, w } = rankData(fn, rank, n);
  // reduce's non-destination ranks weigh their outputs by 0 (see above).
  if (fn === "reduce" && rank !== root(fn, n)) w.forEach((p) => p.fill(0));
  const inputs = leaves(fn, x, "float64", device);
  loss(apply(fn, inputs, n), w, true).backward();
  const grads = (await Promise.all(inputs.map(async (t) => [...(await t.grad!.data())]))).flat();
  const h = 1e-6;
  const total = async (at: number, step: number) => {
    const l = noGrad(() => loss(apply(fn, leaves(fn, x, "float64", device, at, step), n), w, true));
    const all = l.reshape([1]);
    distributed.allReduce(all);
    return (await all.data())[0];
  };
  let worst = 0;
  const count = inputParts(fn, n) * P;
  for (let q = 0; q < n; q++) {
    for (let i = 0; i < count; i++) {
      const at = rank === q ? i : -1;
      const fd = ((await total(at, h)) - (await total(at, -h))) / (2 * h);
      // Rank q's gradient of element i: the others compute the same fd but compare nothing.
      if (rank === q) worst = Math.max(worst, Math.abs(fd - grads[i]));
    }
  }
  return worst;
}

/**
 * The largest difference, over this rank's input elements, between the double backward's
 * Hessian-vector product and the float64 central difference of `S = Σ_ranks v·∂L/∂x`, with L
 * the sin-weighted loss of {@link finiteDifferences} (its backward runs through the collective's
 * backward, whose own backward is the collective again) and v a fixed direction per rank.
 */
async function secondOrder(fn: Fn, rank: number, n: number): Promise<number> {
  const [device] = await requestDevices({ backend: "cpu" });
  const { x, w } = rankData(fn, rank, n);
  if (fn === "reduce" && rank !== root(fn, n)) w.forEach((p) => p.fill(0));
  const v = x.map((_, k) => part(fn, rank + 7, k)).flat();
  // S on this rank for inputs perturbed at `at` by `h`: v · the gradient, with its graph if asked.
  const directional = (at: number, h: number, createGraph: boolean) => {
    const inputs = leaves(fn, x, "float64", device, at, h);
    const grads = autograd.grad(loss(apply(fn, inputs, n), w, true), inputs, {
      createGraph,
      allowUnused: true,
    });
    const flat = cat(grads.map((g, k) => (g ?? inputs[k].zerosLike()).reshape([-1])));
    return { inputs, s: flat.mul(tensor(v, { dtype: "float64", device })).sum() };
  };
  const { inputs, s } = directional(-1, 0, true);
  const hv = autograd.grad(s, inputs, { allowUnused: true });
  const analytic = (await Promise.all(
    hv.map(async (g, k) => [...(await (g ?? inputs[k].zerosLike()).data())]),
  )).flat();
  const total = async (at: number, step: number) => {
    const all = directional(at, step, false).s.detach().reshape([1]);
    distributed.allReduce(all);
    return (await all.data())[0];
  };
  const h = 1e-5;
  let worst = 0;
  for (let q = 0; q < n; q++) {
    for (let i = 0; i < analytic.length; i++) {
      const at = rank === q ? i : -1;
      const fd = ((await total(at, h)) - (await total(at, -h))) / (2 * h);
      if (rank === q) worst = Math.max(worst, Math.abs(fd - analytic[i]));
    }
  }
  return worst;
}

/** Runs `fn`, returning its error's message (and ranks) instead of throwing. */
async function caught(fn: () => unknown): Promise<{ message: string; ranks?: number[] }> {
  try {
    const got = fn();
    const list = Array.isArray(got) ? got : [got];
    await Promise.all(list.map((t) => (t as Tensor).data()));
  } catch (error) {
    const ranks = error instanceof distributed.DistributedError ? [...error.ranks] : undefined;
    return { message: (error as Error).message, ranks };
  }
  return { message: "no error" };
}

/** Bad input, the same on every rank (each a local error), then shapes that differ across ranks. */
async function badInput(rank: number, n: number, kind: string) {
  const [device] = await requestDevices({ backend: "cpu" });
  const t = (v: number[]) => tensor(v, { device, requiresGrad: true });
  const out: Record<string, { message: string; ranks?: number[] }> = {};
  out.srcRange = await caught(() => F.broadcast(t([1, 2]), n));
  out.dstRange = await caught(() => F.gather(t([1, 2]), -1));
  out.reduceDst = await caught(() => F.reduce(t([1, 2]), 1.5));
  out.scatterLength = await caught(() =>
    F.scatter([t([1]), t([2]), t([3]), t([4])].slice(0, n + 1))
  );
  out.scatterShapes = await caught(() =>
    F.scatter(Array.from({ length: n }, (_, q) => t(q === 1 ? [1, 2] : [1])))
  );
  out.reduceScatterLength = await caught(() => F.reduceScatter(t([0]), [t([1])]));
  out.reduceScatterShape = await caught(() =>
    F.reduceScatter(t([0]), Array.from({ length: n }, () => t([1, 2])))
  );
  out.allToAllLength = await caught(() => F.allToAll([t([0])], [t([1])]));
  out.uneven = await caught(() => {
    const x = t(Array.from({ length: 2 * n }, (_, i) => i));
    const sizes = Array.from({ length: n }, (_, q) => (q === 0 ? n + 2 : 1));
    return F.allToAllSingle(x.zerosLike(), x, { inputSplitSizes: sizes });
  });
  out.op = await caught(() => F.allReduce(t([1]), { op: "mean" as distributed.ReduceOp }));
  out.notTensor = await caught(() => F.allGather([1, 2] as unknown as Tensor));
  // Every rank is still in step: one collective that works.
  const ok = F.allReduce(t([rank]));
  out.ok = { message: String((await ok.data())[0]) };
  // Last, as it breaks the group: shapes that differ across ranks, in forward.
  if (kind === "allGather") {
    out.mismatch = await caught(() => F.allGather(t(rank === 0 ? [1] : [1, 2])));
  } else {
    out.mismatch = await caught(() =>
      F.reduceScatter(
        t(rank === 0 ? [0] : [0, 0]),
        Array.from({ length: n }, () => t(rank === 0 ? [1] : [1, 2])),
      )
    );
  }
  return out;
}

/** Rows (of 2 elements) rank `from` sends rank `to` in the uneven all-to-alls: 0 to 4, some 0. */
export function unevenRows(from: number, to: number): number {
  return (from + 2 * to + from * to) % 5;
}

/** Element k of rank `rank`'s uneven input, and its loss weight for output element k. */
export const unevenValue = (rank: number, k: number): number => 100 * rank + k;
/** The loss weight of output element k on `rank`. */
export const unevenWeight = (rank: number, k: number): number => 1000 * (rank + 1) + k;

/** What a rank returns from the uneven scenario. */
export interface UnevenOutcome {
  single: { out: number[]; grad: number[] };
  list: { out: number[][]; outShapes: number[][]; grad: number[][] };
  /** The plain allToAllSingle with counts that disagree across ranks (last: it breaks the group). */
  mismatch: { message: string; ranks?: number[] };
}

/**
 * Uneven splits: the functional allToAllSingle (split sizes) and allToAll (one shape per part)
 * with a weighted loss's backward, then the plain allToAllSingle with counts that disagree.
 */
async function uneven(rank: number, n: number, backend: string): Promise<UnevenOutcome> {
  const [device] = await requestDevices({ backend });
  const range = (count: number) => Array.from({ length: count }, (_, q) => q);
  const send = range(n).map((q) => unevenRows(rank, q));
  const receive = range(n).map((q) => unevenRows(q, rank));
  const total = (rows: number[]) => rows.reduce((a, b) => a + b, 0);
  const values = (count: number, f: (k: number) => number) => range(count).map(f);
  const weightsOf = (count: number) =>
    tensor(values(count, (k) => unevenWeight(rank, k)), { device });

  const x = tensor(values(2 * total(send), (k) => unevenValue(rank, k)), {
    shape: [total(send), 2],
    device,
    requiresGrad: true,
  });
  const single = F.allToAllSingle(tensor(0, { device }).expand([total(receive), 2]), x, {
    inputSplitSizes: send,
    outputSplitSizes: receive,
  });
  single.reshape([-1]).mul(weightsOf(2 * total(receive))).sum().backward();

  // The list form: part q of the input as [rows, 2], the output part from q flat.
  let at = 0;
  const inputs = send.map((rows) => {
    const v = values(2 * rows, (k) => unevenValue(rank, at + k));
    at += 2 * rows;
    return tensor(v, { shape: [rows, 2], device, requiresGrad: true });
  });
  const outputs = F.allToAll(
    receive.map((rows) => tensor(0, { device }).expand([2 * rows])),
    inputs,
  );
  const flat = cat(outputs.map((o) => o.reshape([-1])));
  flat.mul(weightsOf(flat.numel())).sum().backward();

  const data = async (t: Tensor) => [...(await t.data())];
  const result = {
    single: { out: await data(single), grad: await data(x.grad!) },
    list: {
      out: await Promise.all(outputs.map(data)),
      outShapes: outputs.map((o) => [...o.shape]),
      grad: await Promise.all(inputs.map((t) => data(t.grad!))),
    },
  };
  // Rank 0 expects one row more from the last rank than it sends.
  const wrong = receive.map((rows, q) => (rank === 0 && q === n - 1 ? rows + 1 : rows));
  const mismatch = await caught(() => {
    const out = tensor(0, { device }).expand([total(wrong), 2]).clone();
    distributed.allToAllSingle(out, x.detach(), { inputSplitSizes: send, outputSplitSizes: wrong });
    return out;
  });
  return { ...result, mismatch };
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  worldSize: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<unknown> {
  switch (scenario) {
    case "gradients": {
      const results: Partial<Record<Fn, Outcome>> = {};
      for (const fn of FUNCTIONS) {
        results[fn] = await gradients(
          fn,
          worldSize,
          options.backend as string,
          rankData(fn, rank, worldSize),
        );
      }
      return results;
    }
    case "group": {
      // The functions among the ranks `members` of a sub-group; the others return null.
      const members = options.members as number[];
      const group = await distributed.newGroup(members);
      if (group.rank < 0) return null;
      const results: Partial<Record<Fn, Outcome>> = {};
      for (const fn of FUNCTIONS) {
        const data = rankData(fn, group.rank, members.length);
        results[fn] = await gradients(fn, members.length, "cpu", data, { group, members });
      }
      return results;
    }
    case "torch": {
      // PyTorch 1.13's inputs and weights for this rank (tests/fixtures/torch_distributed_nn.json).
      const ranks = options.ranks as Record<string, { x: number[][]; w: number[][] }[]>[];
      const cases = ranks[rank];
      const results: Record<string, Outcome[]> = {};
      for (const [fn, list] of Object.entries(cases)) {
        results[fn] = [];
        for (const data of list) {
          results[fn].push(await gradients(fn as Fn, worldSize, "cpu", data));
        }
      }
      return results;
    }
    case "secondOrder":
    case "finiteDifferences": {
      const check = scenario === "secondOrder" ? secondOrder : finiteDifferences;
      const results: Partial<Record<Fn, number>> = {};
      for (const fn of FUNCTIONS) {
        if (fn === "allReduceMax") continue; // 1.13's backward is not its derivative
        results[fn] = await check(fn, rank, worldSize);
      }
      return results;
    }
    case "oneRankBad": {
      // Only rank 1 passes a list of the wrong length: its own error at once, the others' in bounded time.
      const [device] = await requestDevices({ backend: "cpu" });
      const list = Array.from(
        { length: rank === 1 ? worldSize + 1 : worldSize },
        () => tensor([1, 2], { device, requiresGrad: true }),
      );
      const error = await caught(() => F.scatter(list));
      if (rank === 1) await new Promise((resolve) => setTimeout(resolve, 200));
      return error;
    }
    case "skipBackward": {
      // Rank 1 leaves after the forward: rank 0's backward all-reduce fails naming it.
      const [device] = await requestDevices({ backend: "cpu" });
      const x = tensor([1, 2], { device, requiresGrad: true });
      const y = F.allReduce(x);
      await y.data();
      if (rank === 1) return { message: "left" };
      y.sum().backward();
      return await caught(() => x.grad!);
    }
    case "mpi": {
      // Under mpiexec: every function's gradients, then the uneven all-to-alls (last: they
      // end with a mismatch, which breaks the group).
      const byFn: Partial<Record<Fn, Outcome>> = {};
      for (const fn of FUNCTIONS) {
        byFn[fn] = await gradients(fn, worldSize, "cpu", rankData(fn, rank, worldSize));
      }
      return { gradients: byFn, uneven: await uneven(rank, worldSize, "cpu") };
    }
    case "badInput":
      return await badInput(rank, worldSize, options.kind as string);
    case "uneven":
      return await uneven(rank, worldSize, options.backend as string);
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under mpiexec (tests/mpiexec.ts).
if (import.meta.main) await runAsLaunchedRank(main);
