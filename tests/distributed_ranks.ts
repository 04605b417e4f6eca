/**
 * What the ranks of tests/distributed_test.ts run: spawned as Workers (its
 * `main`) or under `mpiexec` (run as a script, writing each rank's result
 * as JSON to a file). Each scenario returns plain values for the test to
 * compare.
 * @module
 */

import {
  distributed,
  manualSeed,
  nn,
  noGrad,
  optim,
  requestDevices,
  seededRandom,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";

/** The model every training scenario uses (and the single-process reference). */
export function makeModel(seed: number): nn.Sequential {
  manualSeed(seed);
  return new nn.Sequential(new nn.Linear(6, 16), new nn.ReLU(), new nn.Linear(16, 3));
}

/**
 * `model` on every rank, `extra` only where its forward is asked to,
 * `never` never (when present): unused parameters, through DDP's forward.
 * Its forward returns a loss (a sum).
 */
class Branches extends nn.Module {
  model = makeModel(1);
  extra = new nn.Linear(2, 2);
  never: nn.Linear | null;
  constructor(withNever: boolean) {
    super();
    this.never = withNever ? new nn.Linear(2, 2) : null;
  }
  override forward(x: Tensor, useExtra: boolean): Tensor {
    const loss = (this.model.forward(x) as Tensor).sum();
    if (!useExtra) return loss;
    return loss.add(this.extra.forward(tensor([[1, 1]], { device: x.device })).sum());
  }
}

/** The whole data set: `rows` inputs [rows, 6] and int32 labels, the same on every rank. */
export function makeData(rows: number): { x: number[][]; y: number[] } {
  const random = seededRandom(42);
  const x = Array.from({ length: rows }, () => Array.from({ length: 6 }, () => random() * 2 - 1));
  const y = x.map((row) => (row[0] + row[1] > 0 ? 0 : row[2] > 0 ? 1 : 2));
  return { x, y };
}

/** Options of the training scenario. */
export interface TrainOptions {
  /** Backend of each rank's device. */
  backend: string;
  /** Optimizer steps. */
  steps: number;
  /** Rows per rank per step. */
  batch: number;
  /** Split each rank's batch into two micro-batches, the first under noSync. */
  accumulate?: boolean;
  /** Buckets small enough that the model spans several. */
  bucketCapMB?: number;
  /**
   * DDP among these ranks only (`processGroup` from `newGroup`); the others
   * return null. Data is split by rank in the group.
   */
  group?: number[];
}

/** Flattened parameter values, in `parameters()` order. */
export async function parameterValues(model: nn.Module): Promise<number[][]> {
  return await Promise.all(model.parameters().map(async (p) => [...(await p.data())]));
}

async function train(globalRank: number, globalSize: number, o: TrainOptions) {
  const [device] = await requestDevices({ backend: o.backend });
  const processGroup = o.group ? await distributed.newGroup(o.group) : undefined;
  if (processGroup && processGroup.rank < 0) return null;
  const rank = processGroup?.rank ?? globalRank;
  const worldSize = processGroup?.size ?? globalSize;
  // Each rank starts from different weights: DDP must broadcast the first rank's.
  const model = makeModel(1 + globalRank * 100).to(device);
  const ddp = new distributed.DistributedDataParallel(model, {
    bucketCapMB: o.bucketCapMB,
    processGroup,
  });
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.5 });
  const lossFn = new nn.CrossEntropyLoss();
  const all = makeData(o.steps * worldSize * o.batch);
  const losses: number[] = [];
  const memory: number[] = [];
  for (let s = 0; s < o.steps; s++) {
    const from = (s * worldSize + rank) * o.batch;
    const x = tensor(all.x.slice(from, from + o.batch), { device });
    const y = tensor(all.y.slice(from, from + o.batch), { dtype: "int32", device });
    const loss = tidy(() => {
      opt.zeroGrad();
      if (!o.accumulate) {
        const loss = lossFn.forward(ddp.forward(x) as Tensor, y);
        loss.backward();
        opt.step();
        return loss;
      }
      const half = o.batch / 2;
      ddp.noSync(() => {
        lossFn.forward(ddp.forward(x.narrow(0, 0, half)) as Tensor, y.narrow(0, 0, half))
          .mul(0.5).backward();
      });
      const loss = lossFn.forward(
        ddp.forward(x.narrow(0, half, half)) as Tensor,
        y.narrow(0, half, half),
      ).mul(0.5);
      loss.backward();
      opt.step();
      return loss;
    });
    losses.push(await loss.item());
    loss.dispose();
    x.dispose();
    y.dispose();
    memory.push(device.memory().bytesInUse);
  }
  return {
    params: await parameterValues(model),
    losses,
    state: Object.keys(ddp.stateDict()),
    memory,
  };
}

async function collectives(rank: number, worldSize: number, backend: string) {
  const [device] = await requestDevices({ backend });
  const values = (t: Tensor) => t.toArray();
  const sum = tensor([1, 2, 3].map((v) => v * (rank + 1)), { device });
  const work = distributed.allReduce(sum);
  const avg = tensor([rank, 2 * rank], { device });
  distributed.allReduce(avg, { op: "avg" });
  const max = tensor([rank, 5 - rank, rank === 0 ? NaN : 1], { device });
  distributed.allReduce(max, { op: "max" });
  const min = tensor([rank, 5 - rank], { device });
  distributed.allReduce(min, { op: "min" });
  const ints = tensor([rank + 1, 7], { dtype: "int32", device });
  distributed.allReduce(ints);
  const b = tensor([[rank, rank], [rank, rank]], { device });
  distributed.broadcast(b, { src: worldSize - 1 });
  const gathered = distributed.allGather(tensor([rank, rank * 10], { device }));
  // reduceScatter: input [worldSize * 2, 3] (concatenated) holds (i + 1) * (rank + 1) at flat
  // index i; rank r's output [2, 3] is its part of the combination.
  const partsOf = (f: (i: number) => number, dtype: "float32" | "int32" = "float32") =>
    tensor(Array.from({ length: worldSize * 6 }, (_, i) => f(i)), { dtype, device })
      .reshape([worldSize * 2, 3]);
  const scattered: Record<string, Tensor> = {};
  for (const op of ["sum", "avg", "max", "min"] as const) {
    scattered[op] = tensor([[0, 0, 0], [0, 0, 0]], { device });
    distributed.reduceScatter(scattered[op], partsOf((i) => (i + 1) * (rank + 1)), { op });
  }
  // Stacked input [worldSize, 2], int32; NaN wins for max.
  scattered.ints = tensor([0, 0], { dtype: "int32", device });
  distributed.reduceScatter(
    scattered.ints,
    partsOf((i) => i + rank, "int32").reshape([-1]).narrow(0, 0, worldSize * 2)
      .reshape([worldSize, 2]),
  );
  scattered.nan = tensor([0], { device });
  distributed.reduceScatter(
    scattered.nan,
    tensor(Array.from({ length: worldSize }, (_, q) => q === rank ? NaN : q), { device }),
    { op: "max" },
  );
  // Larger than one shared-memory slot: chunked.
  const bigPart = 700_000;
  const bigOut = tensor(new Float32Array(bigPart), { device });
  distributed.reduceScatter(
    bigOut,
    tensor(Array.from({ length: worldSize * bigPart }, (_, i) => (i % 7) * (rank + 1)), { device }),
  );
  // Larger than one shared-memory slot: goes through in chunks.
  const n = 1_500_000;
  const big = tensor(Array.from({ length: n }, (_, i) => (i % 5) * (rank + 1)), { device });
  distributed.allReduce(big);
  const bigValues = await big.data();
  let bigErrors = 0;
  const scale = (worldSize * (worldSize + 1)) / 2;
  for (let i = 0; i < n; i++) if (bigValues[i] !== (i % 5) * scale) bigErrors++;
  await work;
  const completed = work.isCompleted();
  // A later op on the tensor sees the reduced values without an await.
  const doubled = sum.mul(2);
  await distributed.barrier();
  return {
    sum: await values(sum),
    doubled: await values(doubled),
    avg: await values(avg),
    max: await values(max),
    min: await values(min),
    ints: await values(ints),
    broadcast: await values(b),
    gathered: await Promise.all(gathered.map(values)),
    scattered: Object.fromEntries(
      await Promise.all(Object.entries(scattered).map(async ([k, t]) => [k, await values(t)])),
    ),
    scatteredBigErrors:
      Array.from(await bigOut.data()).filter((v, j) =>
        v !== ((rank * bigPart + j) % 7) * (worldSize * (worldSize + 1)) / 2
      ).length,
    bigErrors,
    completed,
    rank: distributed.getRank(),
    worldSize: distributed.getWorldSize(),
    backend: distributed.getBackend(),
  };
}

/** Values rank `from` sends rank `to` in the uneven allToAllSingle of {@link rooted}: 0 to 2. */
export function unevenRows(from: number, to: number): number {
  return (from + 2 * to) % 3;
}

/**
 * reduce, gather, scatter, allToAll and allToAllSingle, each with values a
 * test can compute (see checkRooted in distributed_test.ts); the large ones
 * go through in several shared-memory rounds.
 */
async function rooted(rank: number, n: number, backend: string) {
  const [device] = await requestDevices({ backend });
  const last = n - 1;
  const values = (t: Tensor) => t.toArray();
  const reduced = tensor([rank + 1, 10 * (rank + 1)], { device });
  distributed.reduce(reduced, { dst: last });
  const averaged = tensor([rank], { device });
  distributed.reduce(averaged, { dst: 0, op: "avg" });
  const maxed = tensor([rank, rank === 1 ? NaN : 0], { device });
  distributed.reduce(maxed, { dst: 0, op: "max" });
  const ints = tensor([rank + 1], { dtype: "int32", device });
  distributed.reduce(ints, { dst: 0, op: "min" });
  const gatherList = rank === 1
    ? Array.from({ length: n }, () => tensor([0, 0], { device }))
    : undefined;
  const gatherWork = distributed.gather(tensor([rank, rank * rank], { device }), gatherList, {
    dst: 1,
  });
  const scattered = tensor([0, 0], { device });
  distributed.scatter(
    scattered,
    rank === 0
      ? Array.from({ length: n }, (_, q) => tensor([10 * q, 10 * q + 1], { device }))
      : null,
  );
  const inputs = Array.from(
    { length: n },
    (_, q) => tensor([10 * rank + q + 1, -(10 * rank + q + 1)], { device }),
  );
  const outputs = Array.from({ length: n }, () => tensor([0, 0], { device }));
  distributed.allToAll(outputs, inputs);
  const single = tensor(Array.from({ length: 2 * n }, (_, i) => 100 * rank + i), { device })
    .reshape([n, 2]);
  const singleOut = tensor(new Float32Array(2 * n), { device }).reshape([n, 2]);
  distributed.allToAllSingle(singleOut, single);
  // Uneven parts (some empty): rank r sends unevenRows(r, q) values to rank q.
  const send = Array.from({ length: n }, (_, q) => unevenRows(rank, q));
  const receive = Array.from({ length: n }, (_, q) => unevenRows(q, rank));
  const sum = (rows: number[]) => rows.reduce((a, b) => a + b, 0);
  const unevenIn = tensor(Array.from({ length: sum(send) }, (_, i) => 1000 * rank + i), { device });
  const unevenOut = tensor(new Float32Array(sum(receive)), { device });
  distributed.allToAllSingle(unevenOut, unevenIn, {
    inputSplitSizes: send,
    outputSplitSizes: receive,
  });
  // Larger than one shared-memory slot: several rounds.
  const big = 700_000;
  const bigIn = tensor(Array.from({ length: n * big }, (_, i) => (i % 9) + rank), { device });
  const bigOut = tensor(new Float32Array(n * big), { device });
  distributed.allToAllSingle(bigOut, bigIn);
  const bigScattered = tensor(new Float32Array(big), { device });
  distributed.scatter(
    bigScattered,
    rank === last
      ? Array.from(
        { length: n },
        (_, q) => tensor(Array.from({ length: big }, (_, i) => (i % 7) * (q + 1)), { device }),
      )
      : null,
    { src: last },
  );
  const bigGathered = rank === 0
    ? Array.from({ length: n }, () => tensor(new Float32Array(big), { device }))
    : null;
  distributed.gather(
    tensor(Array.from({ length: big }, (_, i) => (i % 5) + rank), { device }),
    bigGathered,
  );
  let bigErrors = 0;
  const bigValues = await bigOut.data();
  for (let q = 0; q < n; q++) {
    for (let i = 0; i < big; i++) {
      if (bigValues[q * big + i] !== ((rank * big + i) % 9) + q) bigErrors++;
    }
  }
  const scatteredValues = await bigScattered.data();
  for (let i = 0; i < big; i++) if (scatteredValues[i] !== (i % 7) * (rank + 1)) bigErrors++;
  for (const [q, t] of (bigGathered ?? []).entries()) {
    const got = await t.data();
    for (let i = 0; i < big; i++) if (got[i] !== (i % 5) + q) bigErrors++;
  }
  await gatherWork;
  return {
    rank,
    reduced: await values(reduced),
    averaged: await values(averaged),
    maxed: await values(maxed),
    ints: await values(ints),
    gathered: gatherList ? await Promise.all(gatherList.map(values)) : null,
    scattered: await values(scattered),
    allToAll: await Promise.all(outputs.map(values)),
    allToAllSingle: await values(singleOut),
    uneven: await values(unevenOut),
    bigErrors,
  };
}

/**
 * Point-to-point: a ring (send first), tags matched out of order, several
 * messages on one tag in order, int32, batchIsendIrecv with the receive
 * listed first, a sub-group's tag 0 apart from the whole group's, a large
 * message (see checkP2P in distributed_test.ts).
 */
async function p2p(rank: number, n: number, backend: string) {
  const [device] = await requestDevices({ backend });
  const last = n - 1;
  const next = (rank + 1) % n;
  const prev = (rank + n - 1) % n;
  const values = (t: Tensor) => t.toArray();
  const out: Record<string, unknown> = {};
  distributed.send(tensor([rank, 10 * rank], { device }), next);
  const ring = tensor([0, 0], { device });
  const ringWork = distributed.recv(ring, prev);
  // Later ops see the received values without an await.
  const doubled = ring.mul(2);
  const batchIn = tensor([0], { dtype: "int32", device });
  distributed.batchIsendIrecv([
    { op: "irecv", tensor: batchIn, peer: prev, options: { tag: 3 } },
    {
      op: distributed.isend,
      tensor: tensor([rank + 100], { dtype: "int32", device }),
      peer: next,
      options: { tag: 3 },
    },
  ]);
  const pair = await distributed.newGroup([0, last]);
  const big = 1_200_000;
  if (rank === 0) {
    distributed.isend(tensor([5], { device }), last, { tag: 5 });
    distributed.isend(tensor([7, 7], { device }), last, { tag: 7 });
    for (const v of [1, 2, 3]) distributed.send(tensor([v], { device }), last);
    distributed.send(tensor([-1], { device }), last, { group: pair });
    distributed.send(tensor(Array.from({ length: big }, (_, i) => i % 11), { device }), last, {
      tag: 9,
    });
  }
  if (rank === last) {
    const seven = tensor([0, 0], { device });
    const five = tensor([0], { device });
    distributed.irecv(seven, 0, { tag: 7 });
    distributed.irecv(five, 0, { tag: 5 });
    const inOrder = [0, 1, 2].map(() => tensor([0], { device }));
    const fromGroup = tensor([0], { device });
    distributed.recv(fromGroup, 0, { group: pair });
    for (const t of inOrder) distributed.recv(t, 0);
    const large = tensor(new Float32Array(big), { device });
    distributed.recv(large, 0, { tag: 9 });
    out.seven = await values(seven);
    out.five = await values(five);
    out.inOrder = await Promise.all(inOrder.map(values));
    out.fromGroup = await values(fromGroup);
    const got = await large.data();
    out.largeErrors = got.filter((v, i) => v !== i % 11).length;
  }
  await ringWork;
  out.ringCompleted = ringWork.isCompleted();
  out.ring = await values(ring);
  out.doubled = await values(doubled);
  out.batch = await values(batchIn);
  out.tag = await caught(() =>
    Promise.resolve().then(() => distributed.send(ring, next, { tag: -1 }))
  );
  await distributed.barrier();
  return out;
}

/** Runs `fn`, returning its error's message (and ranks) instead of throwing. */
async function caught(fn: () => Promise<unknown>): Promise<{ message: string; ranks?: number[] }> {
  try {
    await fn();
  } catch (error) {
    const ranks = error instanceof distributed.DistributedError ? [...error.ranks] : undefined;
    return { message: (error as Error).message, ranks };
  }
  return { message: "no error" };
}

async function failures(rank: number, kind: string): Promise<unknown> {
  const [device] = await requestDevices({ backend: "cpu" });
  switch (kind) {
    case "shape":
      return await caught(() =>
        distributed.allReduce(tensor(rank === 0 ? [1, 2, 3] : [1, 2, 3, 4], { device })).wait()
      );
    case "groups": {
      const n = distributed.getWorldSize();
      const last = n - 1;
      const pair = await distributed.newGroup([last, 0]);
      const solo = await distributed.newGroup([1]);
      const out: Record<string, unknown> = {
        pairRanks: pair.ranks,
        pairRank: pair.rank,
        soloRank: solo.rank,
      };
      if (pair.rank >= 0) {
        const t = tensor([rank + 1, 10], { device });
        distributed.allReduce(t, { group: pair });
        out.pairSum = await t.toArray();
        const b = tensor([rank], { device });
        distributed.broadcast(b, { src: last, group: pair });
        out.pairBroadcast = await b.toArray();
        const gathered = distributed.allGather(tensor([rank], { device }), { group: pair });
        out.pairGathered = await Promise.all(gathered.map((g) => g.toArray()));
        const part = tensor([0], { device });
        distributed.reduceScatter(part, tensor([1, 2], { device }).mul(rank + 1), { group: pair });
        out.pairScatter = await part.toArray();
        await distributed.barrier({ group: pair });
      }
      if (solo.rank >= 0) {
        const t = tensor([5], { device });
        distributed.allReduce(t, { group: solo });
        out.soloValue = await t.toArray();
      } else {
        // The call throws synchronously; the promise wraps it as caught() expects.
        out.nonMember = await caught(() =>
          Promise.resolve().then(() =>
            distributed.allReduce(tensor([1], { device }), { group: solo })
          )
        );
      }
      // The whole group goes on as before.
      const all = tensor([1], { device });
      distributed.allReduce(all);
      out.world = await all.toArray();
      out.mismatch = await caught(() => distributed.newGroup(rank === 0 ? [0] : [1]));
      if (pair.rank >= 0) {
        // A mismatch inside the group names the whole group's ranks (last: a failed
        // collective's error also reaches the device's next read).
        out.pairMismatch = await caught(() =>
          distributed.allReduce(tensor(rank === 0 ? [1] : [1, 2], { device }), { group: pair })
            .wait()
        );
      }
      return out;
    }
    case "gatherShape":
      return await caught(() =>
        distributed.gather(
          tensor(rank === 0 ? [1, 2, 3] : [1, 2, 3, 4], { device }),
          rank === 0 ? [0, 1].map(() => tensor([0, 0, 0], { device })) : null,
        ).wait()
      );
    case "reduceDst":
      return await caught(() => distributed.reduce(tensor([1], { device }), { dst: rank }).wait());
    case "allToAllShape":
      return await caught(() => {
        // Shapes may differ (rank 1 sends [2, 1]); counts may not: rank 1 expects 3 from rank 0.
        const shape = rank === 0 ? [2] : [2, 1];
        const inputs = [0, 1].map(() => tensor([0, 0], { device }).reshape(shape));
        const outputs = [0, 1].map((q) =>
          tensor(rank === 1 && q === 0 ? [0, 0, 0] : [0, 0], { device })
        );
        return distributed.allToAll(outputs, inputs).wait();
      });
    case "manyGroups": {
      // More sub-groups than the 4 the local backend once made up front.
      const lists = [[0, 1], [1, 2], [0, 2], [0, 1, 2]];
      const sums: number[] = [];
      for (let i = 0; i < 12; i++) {
        const group = await distributed.newGroup(lists[i % 4]);
        if (group.rank < 0) continue;
        const t = tensor([rank + 10 * i], { device });
        distributed.allReduce(t, { group });
        sums.push((await t.data())[0]);
      }
      return sums;
    }
    case "p2pShape":
      return await caught(() =>
        rank === 0
          ? distributed.send(tensor([1, 2, 3], { device }), 1).wait()
          : distributed.recv(tensor([0, 0, 0, 0], { device }), 0).wait()
      );
    case "p2pTag": {
      // Nothing matches: both give up at the timeout, the receiver naming what waits.
      await distributed.barrier();
      const error = await caught(() =>
        rank === 0
          ? distributed.send(tensor([1], { device }), 1, { tag: 1 }).wait()
          : distributed.recv(tensor([0], { device }), 0, { tag: 2 }).wait()
      );
      // The sender stays a while, so that the receiver times out rather than sees it leave.
      if (rank === 0) await new Promise((resolve) => setTimeout(resolve, 3000));
      return error;
    }
    case "p2pHang":
      if (rank === 1) return await new Promise((resolve) => setTimeout(resolve, 30_000));
      await distributed.recv(tensor([0], { device }), 1);
      return "unreachable";
    case "p2pLeave":
      if (rank === 1) return "left";
      return await caught(() => distributed.recv(tensor([0], { device }), 1).wait());
    case "reduceScatterShape":
      return await caught(() =>
        distributed.reduceScatter(
          tensor(rank === 0 ? [0] : [0, 0], { device }),
          tensor(rank === 0 ? [1, 2] : [1, 2, 3, 4], { device }),
        ).wait()
      );
    case "kind":
      return await caught(() =>
        rank === 0 ? distributed.allReduce(tensor([1], { device })).wait() : distributed.barrier()
      );
    case "after": {
      // A mismatch breaks the group: the next collective fails at once, naming why.
      await caught(() =>
        distributed.allReduce(tensor(rank === 0 ? [1] : [1, 2], { device })).wait()
      );
      return await caught(() => distributed.barrier());
    }
    case "stream": {
      // The collective's error reaches the tensor's next read.
      const t = tensor(rank === 0 ? [1, 2] : [[1, 2]], { device });
      distributed.allReduce(t);
      return await caught(() => t.data());
    }
    case "throw":
      if (rank === 1) throw new Error("boom from rank 1");
      await distributed.allReduce(tensor([1], { device }));
      return "unreachable";
    case "hang":
      // Longer than the collective timeout (but not forever: under mpiexec
      // a process with nothing left to do would exit at once).
      if (rank === 1) return await new Promise((resolve) => setTimeout(resolve, 30_000));
      await distributed.allReduce(tensor([1], { device }));
      return "unreachable";
    case "leave":
      if (rank === 1) return "left";
      return await caught(() => distributed.allReduce(tensor([1], { device })).wait());
    case "exit":
      if (rank === 1) Deno.exit(3);
      await distributed.allReduce(tensor([1], { device }));
      return "unreachable";
    case "close":
      if (rank === 1) (globalThis as unknown as { close(): void }).close();
      await distributed.allReduce(tensor([1], { device }));
      return "unreachable";
    case "unused": {
      const ddp = new distributed.DistributedDataParallel(new Branches(false).to(device));
      return await caught(async () => {
        ddp.forward(tensor([[1, 2, 3, 4, 5, 6]], { device }), false).backward();
        await ddp.parameters()[0].grad!.data();
      });
    }
    case "unusedAllowed": {
      const branches = new Branches(true).to(device);
      const { extra } = branches;
      const never = branches.never!;
      const ddp = new distributed.DistributedDataParallel(branches, { findUnusedParameters: true });
      // Weight decay changes every parameter that has a gradient, even a zero one.
      const opt = new optim.SGD(ddp.parameters(), { lr: 0.1, momentum: 0.9, weightDecay: 0.5 });
      const neverBefore = await never.weight.toArray();
      const extraBefore = await extra.weight.toArray();
      // Rank 1 uses `extra` too: its gradient is averaged with rank 0's zeros.
      // No rank uses `never`: its gradients stay null, as in PyTorch.
      ddp.forward(tensor([[1, 2, 3, 4, 5, 6]], { device }), rank === 1).backward();
      const neverGradAfterBackward = [never.weight.grad, never.bias!.grad];
      const extraHadGrad = extra.weight.grad !== null;
      opt.step();
      const [, , , modelBias, extraWeight] = ddp.parameters();
      return {
        extraWeightGrad: await extraWeight.grad!.toArray(),
        modelBiasGrad: await modelBias.grad!.toArray(),
        neverGradAfterBackward,
        extraHadGrad,
        neverAfterStep: await never.weight.toArray(),
        neverBefore,
        extraMoved: JSON.stringify(await extra.weight.toArray()) !== JSON.stringify(extraBefore),
        extraAfterStep: await extra.weight.toArray(),
      };
    }
    case "p2pOrder": {
      // The first send's values come from a GPU (a read that takes a round
      // trip), the second's from the cpu at once: they must still arrive in
      // program order, not swapped.
      const [gpu] = await requestDevices({ backend: "webgpu" });
      if (rank === 0) {
        const works = [
          distributed.send(tensor([1, 2, 3], { device: gpu }), 1),
          distributed.send(tensor([4, 5, 6], { device }), 1),
        ];
        await Promise.all(works.map((w) => w.wait()));
        return null;
      }
      const first = tensor([0, 0, 0], { device });
      const second = tensor([0, 0, 0], { device });
      distributed.recv(first, 0);
      distributed.recv(second, 0);
      return [await first.toArray(), await second.toArray()];
    }
    case "reinit": {
      // A second group in a spawned rank would start its rounds over on the
      // first one's shared words: refused, not silently wrong sums.
      await distributed.allReduce(tensor([rank + 1], { device })).wait();
      await distributed.destroyProcessGroup();
      return await caught(() => distributed.initProcessGroup());
    }
    case "mismatchLate": {
      // Rank 1 sends data the others do not expect (their receives from it
      // fail at once) while rank 2 is still to come: every rank waits for
      // rank 2 and names the mismatch, not a half-received header.
      return await caught(async () => {
        if (rank === 1) {
          await distributed.broadcast(tensor([1, 2, 3, 4], { device }), { src: 1 }).wait();
          return;
        }
        if (rank === 2) await new Promise((resolve) => setTimeout(resolve, 300));
        await distributed.barrier();
      });
    }
    case "localBackward": {
      // After a DDP step, rank 0 alone runs a backward through the plain
      // module (a saliency map, say): local, as in PyTorch, and the next DDP
      // step still meets. A second wrapper of the same module trains; the
      // first one's hooks stay quiet.
      const x = tensor([[1, 2, 3, 4, 5, 6]], { device });
      const first = new distributed.DistributedDataParallel(makeModel(1).to(device));
      (first.forward(x.mul(rank + 1)) as Tensor).sum().backward();
      const synced = await first.parameters()[0].grad!.toArray();
      let local: unknown = null;
      if (rank === 0) {
        first.zeroGrad();
        (first.module.forward(x) as Tensor).sum().backward();
        local = await first.parameters()[0].grad!.toArray();
      }
      const plain = makeModel(1).to(device);
      (plain.forward(x) as Tensor).sum().backward();
      const want = await plain.parameters()[0].grad!.toArray();
      first.zeroGrad();
      const second = new distributed.DistributedDataParallel(first.module, {
        findUnusedParameters: true,
      });
      (second.forward(x.mul(rank + 1)) as Tensor).sum().backward();
      const again = await second.parameters()[0].grad!.toArray();
      return { synced, local, want, again };
    }
    case "unusedAsymmetric": {
      // findUnusedParameters blocks in backward; rank 1 never lets its event
      // loop run while rank 0 awaits its loss: the error says why.
      const ddp = new distributed.DistributedDataParallel(makeModel(1).to(device), {
        findUnusedParameters: true,
      });
      const opt = new optim.SGD(ddp.parameters(), { lr: 0.1 });
      await distributed.barrier();
      const x = tensor([[1, 2, 3, 4, 5, 6]], { device });
      return await caught(async () => {
        for (let i = 0; i < 3; i++) {
          opt.zeroGrad();
          const loss = (ddp.forward(x) as Tensor).sum();
          loss.backward();
          opt.step();
          if (rank === 0) await loss.item();
        }
        await ddp.parameters()[0].data();
      });
    }
    case "unusedLeave":
    case "unusedHang": {
      // The exchange of which parameters were used blocks in backward(): a
      // rank that leaves or never arrives is named there too.
      const ddp = new distributed.DistributedDataParallel(makeModel(1).to(device), {
        findUnusedParameters: true,
      });
      await distributed.barrier();
      if (rank === 1) {
        if (kind === "unusedHang") await new Promise((resolve) => setTimeout(resolve, 30_000));
        return "left";
      }
      const backward = () =>
        (ddp.forward(tensor([[1, 2, 3, 4, 5, 6]], { device })) as Tensor).sum().backward();
      if (kind === "unusedHang") backward();
      // backward throws synchronously; the promise wraps it as caught() expects.
      return await caught(() => Promise.resolve().then(backward));
    }
    case "buffers": {
      // Rank 0's running statistics reach every rank before each forward.
      const stats = async (broadcastBuffers: boolean) => {
        manualSeed(3);
        const bn = new nn.BatchNorm1d(2).to(device);
        const ddp = new distributed.DistributedDataParallel(bn, { broadcastBuffers });
        ddp.forward(tensor([[rank, 2 * rank], [rank + 1, 0]], { device }));
        ddp.forward(tensor([[1, 2], [3, 4]], { device }));
        return await bn.buffers()[0].toArray();
      };
      return { on: await stats(true), off: await stats(false) };
    }
    case "evalBetweenSteps": {
      // PyTorch's usual loop: train steps (BatchNorm buffers broadcast by every forward,
      // findUnusedParameters' blocking exchange in backward), an evaluation read between them.
      manualSeed(rank);
      const model = new nn.Sequential(
        new nn.Linear(4, 8),
        new nn.BatchNorm1d(8),
        new nn.Linear(8, 2),
      );
      const ddp = new distributed.DistributedDataParallel(model.to(device), {
        findUnusedParameters: true,
      });
      const opt = new optim.SGD(ddp.parameters(), { lr: 0.1 });
      const seen: number[] = [];
      for (let step = 0; step < 3; step++) {
        ddp.train();
        tidy(() => {
          opt.zeroGrad();
          const x = tensor([[1 + rank, 2, 3, 4], [0, 1, 0, 1 - rank], [2, 2, 1, 0]], { device });
          (ddp.forward(x) as Tensor).square().mean().backward();
          opt.step();
        });
        ddp.eval();
        const probe = noGrad(() =>
          (ddp.forward(tensor([[1, 1, 1, 1]], { device })) as Tensor).sum()
        );
        seen.push(await probe.item());
      }
      return seen;
    }
    case "unevenEval": {
      // Ranks evaluate different numbers of batches under noGrad (PyTorch broadcasts buffers
      // only before the first forward after a training one), then meet in an allReduce.
      manualSeed(rank);
      const model = new nn.Sequential(new nn.Linear(2, 3), new nn.BatchNorm1d(3));
      const ddp = new distributed.DistributedDataParallel(model.to(device));
      const train = () =>
        tidy(() => {
          ddp.train();
          (ddp.forward(tensor([[rank, 1], [2, -rank], [0, 3]], { device })) as Tensor).sum()
            .backward();
        });
      train();
      ddp.eval();
      const total = tensor([0], { device });
      for (let batch = 0; batch < 3 - rank; batch++) {
        noGrad(() => total.add_((ddp.forward(tensor([[batch, 1]], { device })) as Tensor).sum()));
      }
      distributed.allReduce(total);
      const evaluated = await total.item();
      // A training forward changes each rank's running statistics its own way; the next forward
      // broadcasts rank 0's (evaluation leaves them as they are).
      train();
      ddp.eval();
      noGrad(() => ddp.forward(tensor([[0, 1]], { device })));
      const stats = await (model.at(1) as nn.BatchNorm1d).runningMean!.toArray();
      return { evaluated, stats };
    }
    case "models": {
      // Different models on the ranks: the construction broadcast names both.
      const model = rank === 0 ? makeModel(1) : new nn.Linear(6, 3);
      const ddp = new distributed.DistributedDataParallel(model.to(device));
      return await caught(() => ddp.parameters()[0].data().then(() => distributed.barrier()));
    }
    default:
      throw new Error(`unknown failure scenario ${kind}`);
  }
}

/** What the float32 sums scenario reports. */
export interface Sums {
  /** Elements that differ in their bits from the rank-order reference, over every call. */
  mismatches: number;
  /** Elements further from it than float32 rounding in another order explains (1e-5 relative). */
  far: number;
  /** A hash (FNV-1a) of every result's bits, to compare between ranks. */
  bits: number;
  /** Collectives run. */
  calls: number;
}

/**
 * Float32 all-reduces (sum and avg) of many lengths, back to back: shorter
 * than the ranks, odd, large, and more lengths than a backend keeps
 * exchange memory for, each twice, with IEEE edge values among them; rank
 * 0 arrives late at some. Every
 * result must have the bits of the rank-order sum ((p0 + p1) + p2 ...,
 * rounded to float32 at each step, divided once for avg).
 */
async function floatSums(rank: number, worldSize: number, backend: string): Promise<Sums> {
  const [device] = await requestDevices({ backend });
  // Every 89th element an edge value: signed zeros, subnormals, overflow to
  // infinity, infinities of both signs, NaN.
  const edges = [-0, 1e-40, -3e-45, 3e38, Infinity, -Infinity, NaN, 0];
  const value = (q: number, i: number, length: number) =>
    i % 89 === 88
      ? Math.fround(edges[(Math.floor(i / 89) + 3 * q) % edges.length])
      : Math.fround(((i * 0.37 + q * 1.13 + length * 0.01) % 3.1) - 1.5);
  // 1,500,007 values span two chunks of the local group's 4 MiB slots and two segments of tcp's.
  const lengths = [1, 3, 5, 1000, 100_003, 7, 4096, 65_537, 2, 1_500_007];
  let mismatches = 0;
  let far = 0;
  let bits = 0x811c9dc5;
  let calls = 0;
  for (let round = 0; round < 2; round++) {
    for (const length of lengths) {
      for (const op of ["sum", "avg"] as const) {
        if (rank === 0 && (length + round) % 3 === 0) {
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        const t = tensor(Float32Array.from({ length }, (_, i) => value(rank, i, length)), {
          device,
        });
        distributed.allReduce(t, { op });
        const got = (await t.data()) as Float32Array;
        calls++;
        for (let i = 0; i < length; i++) {
          let want = value(0, i, length);
          for (let q = 1; q < worldSize; q++) want = Math.fround(want + value(q, i, length));
          if (op === "avg") want = Math.fround(want / worldSize);
          if (!Object.is(got[i], want)) mismatches++;
          const close = Number.isFinite(want)
            ? Math.abs(got[i] - want) <= 1e-5 * Math.max(1, Math.abs(want))
            : Object.is(got[i], want);
          if (!close) far++;
        }
        for (const word of new Uint32Array(got.buffer, got.byteOffset, got.length)) {
          bits = Math.imul(bits ^ word, 0x01000193) >>> 0;
        }
        t.dispose();
      }
    }
  }
  return { mismatches, far, bits, calls };
}

/** What the in-place all-reduce scenario reports: wrong elements of each part. */
export interface InPlace {
  /** Of the coalesced sums (three tensors, one across the edge of two chunks). */
  coalesced: number;
  /** Of a product recorded before the call (must see this rank's own values). */
  before: number;
  /** Of a sum recorded after the call (must see the all-reduced values). */
  after: number;
  /** Of a storage passed twice (a tensor and its reshaped view): summed once, as PyTorch. */
  aliased: number;
}

/**
 * `allReduceCoalesced` of 6.4 MB (two chunks of the local group's 4 MiB
 * slots, two of tcp's segments; the third tensor straddles the edge), with
 * work recorded just before and just after it, and a storage passed twice.
 * Small integers, so every order of the sums gives the same values.
 */
async function inPlace(rank: number, worldSize: number, backend: string): Promise<InPlace> {
  const [device] = await requestDevices({ backend });
  const value = (q: number, part: number, i: number) => ((i * 7 + part * 13 + q * 3) % 17) - 8;
  const summed = (part: number, i: number) => {
    let s = 0;
    for (let q = 0; q < worldSize; q++) s += value(q, part, i);
    return s;
  };
  const make = (part: number, n: number) =>
    tensor(Float32Array.from({ length: n }, (_, i) => value(rank, part, i)), { device });
  const wrong = (got: ArrayLike<number>, want: (i: number) => number) => {
    let count = 0;
    for (let i = 0; i < got.length; i++) if (got[i] !== want(i)) count++;
    return count;
  };
  const sizes = [700_001, 5, 900_000];
  const parts = sizes.map((n, part) => make(part, n));
  const before = parts[0].mul(2);
  distributed.allReduceCoalesced(parts);
  const after = parts[2].add(1);
  let coalesced = 0;
  for (const [part, t] of parts.entries()) {
    coalesced += wrong(await t.data(), (i) => summed(part, i));
  }
  const a = make(3, 1_200_000);
  distributed.allReduceCoalesced([a, a.reshape([1200, 1000])]);
  return {
    coalesced,
    before: wrong(await before.data(), (i) => 2 * value(rank, 0, i)),
    after: wrong(await after.data(), (i) => summed(2, i) + 1),
    aliased: wrong(await a.data(), (i) => summed(3, i)),
  };
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  worldSize: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<unknown> {
  switch (scenario) {
    case "collectives":
      return await collectives(rank, worldSize, options.backend as string);
    case "p2p":
      return await p2p(rank, worldSize, options.backend as string);
    case "rooted":
      return await rooted(rank, worldSize, options.backend as string);
    case "train":
      return await train(rank, worldSize, options as unknown as TrainOptions);
    case "failure":
      return await failures(rank, options.kind as string);
    case "sums":
      return await floatSums(rank, worldSize, options.backend as string);
    case "inPlace":
      return await inPlace(rank, worldSize, options.backend as string);
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under mpiexec: `deno run -A tests/distributed_ranks.ts OUT_PREFIX SCENARIO JSON_OPTIONS`.
if (import.meta.main) {
  const [out, scenario, json] = Deno.args;
  const options = JSON.parse(json ?? "{}");
  // The library's 60 s default: under the parallel suite two MPI ranks with a few collectives took
  // 9-24 s here (MPICH's waits spin, and the ranks share 2 cores with other tests), so a 20 s
  // timeout failed a healthy job. The failure scenarios pass their own short timeouts.
  // A rank that comes late to initProcessGroup (MPICH's Hydra names each rank in PMI_RANK).
  // (multigrad's run.ts, for the "tcp" backend, in RANK).
  if (options.lateInitMs && (Deno.env.get("PMI_RANK") ?? Deno.env.get("RANK")) === "1") {
    await new Promise((resolve) => setTimeout(resolve, options.lateInitMs));
  }
  await distributed.initProcessGroup({ timeoutMs: options.timeoutMs ?? 60_000 });
  const rank = distributed.getRank();
  const result = await main(rank, distributed.getWorldSize(), scenario, options);
  await Deno.writeTextFile(`${out}.${rank}.json`, JSON.stringify(result));
  await distributed.destroyProcessGroup();
}
