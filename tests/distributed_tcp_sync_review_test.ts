/**
 * Review cases of the `"tcp"` group's blocking all-gather: the Worker's
 * hand-copied shared-memory constants (it runs from its source text, so it
 * cannot import them) agree with `tcp_sync_layout.ts`, and a peer's long
 * non-ASCII error still reaches the blocked rank as a DistributedError
 * naming it (its JSON was cut mid-string: a SyntaxError).
 * @module
 */

import assert from "node:assert/strict";
import { HEADER_WORDS } from "../src/distributed/backend.ts";
import { SyncCtl, syncSlot, SyncStatus, syncWords } from "../src/distributed/tcp_sync_layout.ts";
import { syncWorker } from "../src/distributed/tcp_sync_worker.ts";
import { freePort } from "./tcprun.ts";

const RANKS = new URL("./distributed_tcp_sync_ranks.ts", import.meta.url);

/** The worker's `const NAME = <number expression>;` constants, evaluated in order. */
function workerConstants(): Record<string, number> {
  const found: Record<string, number> = {};
  for (const [, name, expr] of syncWorker.toString().matchAll(/const ([A-Z_]+) = ([^;]+);/g)) {
    const names = Object.keys(found);
    found[name] = new Function(...names, `return (${expr});`)(...names.map((n) => found[n]));
  }
  return found;
}

Deno.test("tcp allGatherSync: the sync Worker's shared-memory constants match tcp_sync_layout.ts", () => {
  const c = workerConstants();
  assert.equal(c.DONE, SyncCtl.Done);
  assert.equal(c.STATUS, SyncCtl.Status);
  assert.equal(c.TEXT_BYTES, SyncCtl.TextBytes);
  assert.equal(c.OK, SyncStatus.Done);
  assert.equal(c.FAILED, SyncStatus.Failed);
  assert.equal(c.HEADER_WORDS, HEADER_WORDS);
  assert.equal(c.HEADER_BYTES, HEADER_WORDS * 4);
  for (const [q, length] of [[0, 0], [1, 0], [2, 5], [3, 4096]]) {
    assert.equal(c.SLOTS + q * (c.HEADER_WORDS + 1 + length), syncSlot(q, length));
  }
  // The failure text's room fits in the smallest memory the main thread makes.
  assert.equal(c.SLOTS + c.TEXT_ROOM / 4, syncWords(1, 0));
  for (const [n, length] of [[2, 0], [3, 32], [8, 4096]]) {
    assert.ok(syncWords(n, length) >= c.SLOTS + c.TEXT_ROOM / 4);
    assert.ok(syncWords(n, length) >= syncSlot(n, length));
  }
});

Deno.test({
  name: "tcp allGatherSync: a peer's long non-ASCII error is a DistributedError naming it",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "multigrad_tcp_sync_review_" });
    try {
      const port = String(freePort());
      const outputs = await Promise.all([0, 1].map((rank) =>
        new Deno.Command(Deno.execPath(), {
          // Only the permissions the tcp group promises to need (and write for the result).
          args: [
            ...["run", "--allow-net", "--allow-env", `--allow-write=${dir}`],
            ...[RANKS.pathname, `${dir}/r`, "throwLong", '{"timeoutMs":30000}'],
          ],
          env: { MASTER_ADDR: "127.0.0.1", MASTER_PORT: port, RANK: `${rank}`, WORLD_SIZE: "2" },
          stdout: "piped",
          stderr: "piped",
          signal: AbortSignal.timeout(40_000),
        }).output()
      ));
      const output = outputs.map((o) => new TextDecoder().decode(o.stderr)).join("\n");
      assert.deepEqual(outputs.map((o) => o.code), [0, 1], output);
      const zero = JSON.parse(await Deno.readTextFile(`${dir}/r.0.json`));
      assert.match(
        zero.message,
        /^allGather #0 of int32 \[4\] on rank 0: rank 1 failed: Error: (形状不匹配)+/,
      );
      assert.deepEqual(zero.ranks, [1]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
