/**
 * Review of FSDP's everyday API: `clipGradNorm_` counts and clips the
 * gradients of `ignoredModules` as PyTorch 1.13 (which clips
 * `self.parameters()`, the ignored ones included), against the
 * one-process computation; the optimizer state dict of a model whose
 * first parameter is 0-d round-trips (its 0-d `expAvg` was taken for a
 * step count); SHARDED dicts of 0-d, 1-row and uneven parameters at 2
 * and 3 ranks.
 * @module
 */

import assert from "node:assert/strict";
import { distributed, nn, requestDevices, type Tensor, tensor } from "../mod.ts";
import { makeData } from "./distributed_ranks.ts";
import { makeNet } from "./fsdp_ranks.ts";
import { BACKENDS } from "./harness.ts";
import type { ClipResult, OddResult } from "./fsdp_api_review_ranks.ts";

const RANKS = new URL("./fsdp_api_review_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

/** The plain net's gradients (flattened, in `parameters()` order) of the mean loss over `rows`. */
async function plainGrads(from: number, rows: number): Promise<number[][]> {
  const [device] = await requestDevices({ backend: "cpu" });
  const net = makeNet(7).to(device);
  const all = makeData(8);
  const x = tensor(all.x.slice(from, from + rows), { device });
  const y = tensor(all.y.slice(from, from + rows), { dtype: "int32", device });
  new nn.CrossEntropyLoss().forward(net.forward(x) as Tensor, y).backward();
  return await Promise.all(net.parameters().map(async (p) => [...(await p.grad!.data())]));
}

const CLIP_CASES: (readonly [string, boolean])[] = [
  ["cpu", false],
  ...(BACKENDS.has("webgpu") ? [["webgpu", true] as const] : []),
];
for (const [backend, offload] of CLIP_CASES) {
  Deno.test({
    name: `FSDP clipGradNorm_ with ignoredModules on ${backend}${
      offload ? " (CPUOffload)" : ""
    }: their local gradients count in the global norm (summed over ranks) and are clipped, 2-norm and inf`,
    ...opts,
    fn: async () => {
      const [ranks, full, ...local] = await Promise.all([
        distributed.spawn<ClipResult>(RANKS, { nprocs: 2, args: ["clip", backend, offload] }),
        plainGrads(0, 8),
        plainGrads(0, 4),
        plainGrads(4, 4),
      ]);
      // Sharded parameters: the batch's average gradient; the ignored last layer (6, 7): each rank's own.
      const sharded = full.slice(0, 6).flat();
      const ignored = local.map((g) => g.slice(6).flat());
      const pNorm = Math.sqrt(
        [...sharded, ...ignored.flat()].reduce((s, v) => s + v * v, 0),
      );
      const infNorm = Math.max(...[...sharded, ...ignored.flat()].map(Math.abs));
      for (const [r, got] of ranks.entries()) {
        for (const [i, want] of [pNorm, infNorm].entries()) {
          assert.ok(
            Math.abs(got.norms[i] - want) <= 1e-5 * want,
            `rank ${r}, pass ${i}: total norm ${got.norms[i]}, want ${want}`,
          );
          const coefficient = Math.min(1, 0.05 / (want + 1e-6));
          assert.ok(coefficient < 1, "the case must clip");
          const off = Math.max(
            ...ignored[r].map((g, k) => Math.abs(g * coefficient - got.clipped[i][k])),
          );
          assert.ok(off <= 1e-6, `rank ${r}, pass ${i}: ignored gradient off by ${off}`);
        }
      }
    },
  });
}

for (const nprocs of [2, 3]) {
  Deno.test({
    name:
      `FSDP at ${nprocs} ranks, a 0-d first parameter, 1-row and uneven ones: optimizer state round trip, SHARDED chunks and round trip`,
    ...opts,
    fn: async () => {
      const ranks = await distributed.spawn<OddResult>(RANKS, { nprocs, args: ["odd"] });
      for (const [r, got] of ranks.entries()) {
        assert.deepEqual(
          got.reloaded,
          got.state,
          `rank ${r}: optimizer state after the round trip`,
        );
        const meta = (shape: number[]) =>
          distributed.fsdp.shardedTensorMetadata(shape, r, nprocs).shape;
        assert.deepEqual(got.shardedShapes, {
          s: r === 0 ? [] : [0],
          w: meta([1, 6]),
          b: meta([5]),
          "lin.weight": meta([5, 6]),
          "lin.bias": meta([5]),
          [`_fsdpShard.rank${r}.of${nprocs}`]: [2],
        });
        assert.equal(got.shardedWorst, 0, `rank ${r}: SHARDED round trip`);
      }
    },
  });
}
