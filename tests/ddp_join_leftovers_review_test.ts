/**
 * Review of the Join and launcher leftovers: staticGraph's added check
 * changes no numbers of a run that never misbehaves (with noSync and a
 * comm hook), the noSync + ZeroRedundancyOptimizer refusal does not fire
 * outside an enabled join or on a noGrad forward, `launch()` still runs a
 * valid call with every option, and `tensor()` of a BigInt64Array into a
 * float dtype keeps values beyond int32 (as PyTorch's int64 -> float).
 * @module
 */

import assert from "node:assert/strict";
import { distributed, tensor } from "../mod.ts";
import { launch } from "../src/distributed/run.ts";

const RANKS = new URL("./ddp_join_leftovers_review_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

function ranks(scenario: string): Promise<string[][]> {
  return distributed.spawn<string[]>(RANKS, { nprocs: 2, args: [scenario], timeoutMs: 30_000 });
}

Deno.test({
  name:
    "DDP staticGraph with parameters learnt as unused trains exactly as findUnusedParameters (noSync, comm hook)",
  ...opts,
  fn: async () => {
    const [zero, one] = await ranks("staticClean");
    for (const [q, out] of [zero, one].entries()) {
      assert.equal(out[1], out[0], `rank ${q}: staticGraph vs findUnusedParameters`);
      assert.equal(out[3], out[2], `rank ${q}: the same with allreduceHook`);
    }
    assert.deepEqual(zero, one, "the ranks end equal");
    assert.notEqual(zero[0], zero[2].replace(/./, "x"));
  },
});

Deno.test({
  name:
    "ZeroRedundancyOptimizer with noSync: trains outside a join, in a disabled join, and with a noGrad forward in a join",
  ...opts,
  fn: async () => {
    for (const [q, out] of (await ranks("zeroAllowed")).entries()) {
      assert.deepEqual(out, ["ok", "ok", "ok"], `rank ${q}`);
    }
  },
});

Deno.test({
  name:
    "Join.run([ddp, zero]) on uneven inputs with noGrad validation forwards trains as without them (a joined rank's ZeRO does not step for them)",
  ...opts,
  fn: async () => {
    const [zero, one] = await ranks("validate");
    for (const [q, out] of [zero, one].entries()) {
      assert.deepEqual([out[0], out[2]], ["ok", "ok"], `rank ${q}`);
      assert.equal(out[1], out[3], `rank ${q}: with and without validation`);
    }
    assert.equal(zero[1], one[1], "the ranks end equal");
  },
});

Deno.test("launch: a valid call with every option runs the script", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const script = `${dir}/rank.ts`;
    await Deno.writeTextFile(
      script,
      `await Deno.writeTextFile(${
        JSON.stringify(dir)
      } + "/out." + Deno.env.get("RANK"), Deno.args.join(" ") + " " + Deno.env.get("TORCHELASTIC_RUN_ID"));`,
    );
    const code = await launch({
      nprocPerNode: 2,
      nnodes: 1,
      nodeRank: 0,
      masterAddr: "127.0.0.1",
      masterPort: 29517,
      denoFlags: ["--no-check"],
      script,
      args: ["a", "b"],
      maxRestarts: 0,
      monitorInterval: 0.05,
      runId: "review",
      standalone: false,
    });
    assert.equal(code, 0);
    for (const q of [0, 1]) {
      assert.equal(await Deno.readTextFile(`${dir}/out.${q}`), "a b review");
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("tensor(BigInt64Array) into a float dtype: values beyond int32 as PyTorch's int64 -> float", async () => {
  const t = tensor(new BigInt64Array([2n ** 40n, -3n, -(2n ** 31n) - 1n]), { dtype: "float64" });
  assert.equal(t.dtype, "float64");
  assert.deepEqual(await t.toArray(), [2 ** 40, -3, -(2 ** 31) - 1]);
  const f = tensor(new BigUint64Array([2n ** 63n, 5n]), { dtype: "float32" });
  assert.deepEqual(await f.toArray(), [2 ** 63, 5]);
  const e = tensor(new BigInt64Array([]), { dtype: "float32" });
  assert.deepEqual([e.dtype, e.shape], ["float32", [0]]);
  assert.throws(
    () => tensor(new BigInt64Array([-(2n ** 31n) - 1n]), { dtype: "int32" }),
    /tensor: -2147483649 cannot be stored as int32/,
  );
});
