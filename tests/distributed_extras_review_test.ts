/**
 * Review of the stores of tests/distributed_extras_test.ts: what the first
 * tests missed (a closed TCPStore server left its waits' timers running,
 * big values, counters past 2^53, error prefixes).
 * @module
 */

import assert from "node:assert/strict";
import { distributed } from "../mod.ts";

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/**
 * Runs `fn` counting the timers it starts that are neither fired nor
 * cleared when it ends (Deno's op sanitizer does not see timers); returns
 * their delays.
 */
async function pendingTimersOf(fn: () => Promise<void>): Promise<number[]> {
  const [set, clear] = [globalThis.setTimeout, globalThis.clearTimeout];
  const pending = new Map<unknown, number>();
  // deno-lint-ignore no-explicit-any
  (globalThis as any).setTimeout = (cb: () => void, ms?: number) => {
    const id: unknown = set(() => {
      pending.delete(id);
      cb();
    }, ms);
    pending.set(id, ms ?? 0);
    return id;
  };
  // deno-lint-ignore no-explicit-any
  (globalThis as any).clearTimeout = (id: number) => {
    pending.delete(id);
    clear(id);
  };
  try {
    await fn();
  } finally {
    globalThis.setTimeout = set;
    globalThis.clearTimeout = clear;
  }
  for (const id of pending.keys()) clear(id as number);
  return [...pending.values()];
}

Deno.test("TCPStore: closing the master cancels the server's pending waits (no timer outlives it)", async () => {
  const messages: string[] = [];
  const left = await pendingTimersOf(async () => {
    const master = await distributed.TCPStore.create("127.0.0.1", 0, {
      isMaster: true,
      timeoutMs: 60_000,
    });
    const client = await distributed.TCPStore.create("127.0.0.1", master.port, {
      timeoutMs: 60_000,
    });
    const waiting = [
      client.get("never").then(() => "resolved", (e: Error) => e.message),
      client.wait(["never", "nor this"]).then(() => "resolved", (e: Error) => e.message),
      master.get("never").then(() => "resolved", (e: Error) => e.message),
    ];
    // The requests before these reached the server.
    await client.set("sync", "");
    await master.get("sync");
    await client.close();
    await master.close();
    messages.push(...await Promise.all(waiting));
  });
  for (const m of messages) assert.match(m, /TCPStore\.(get|wait): .*closed/);
  assert.deepEqual(left, [], "timers still pending after both stores closed");
});

Deno.test("TCPStore: a 16 MiB value round-trips (reading and writing frames is linear; sending is not the answer's timeout)", async () => {
  const master = await distributed.TCPStore.create("127.0.0.1", 0, {
    isMaster: true,
    timeoutMs: 60_000,
  });
  const client = await distributed.TCPStore.create("127.0.0.1", master.port, {
    timeoutMs: 60_000,
  });
  try {
    const big = new Uint8Array(16 << 20);
    for (let i = 0; i < big.length; i += 4093) big[i] = (i / 4093) & 255;
    await client.set("big", big);
    const got = await master.get("big");
    assert.equal(got.length, big.length);
    assert.ok(got.every((b, i) => b === big[i]), "the bytes differ");
  } finally {
    await client.close();
    await master.close();
  }
});

Deno.test("stores: add past 2^53 - 1 is an error naming the key (never an inexact count); one op prefix", async () => {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_store_review_" });
  const master = await distributed.TCPStore.create("127.0.0.1", 0, { isMaster: true });
  const file = new distributed.FileStore(`${dir}/store`);
  try {
    const stores: [string, distributed.Store][] = [
      ["HashStore", new distributed.HashStore()],
      ["FileStore", file],
      ["TCPStore", master],
    ];
    for (const [name, s] of stores) {
      const max = Number.MAX_SAFE_INTEGER;
      assert.equal(await s.add("n", max - 1), max - 1, name);
      assert.equal(await s.add("n", 1), max, name);
      // max + 2 would round to max + 3 (2^53 + 2).
      await assert.rejects(
        s.add("n", 2),
        new RegExp(`^RangeError: ${name}.add: key "n" would hold ${max} \\+ 2, past the exact`),
        name,
      );
      assert.equal(text(await s.get("n")), String(max), `${name}: unchanged`);
      await s.set("w", "word");
      await assert.rejects(s.add("w", 1), (e: Error) => {
        assert.match(e.message, new RegExp(`^${name}.add: key "w" holds "word", not an integer`));
        return true;
      });
    }
  } finally {
    file.close();
    await master.close();
    await Deno.remove(dir, { recursive: true });
  }
});
