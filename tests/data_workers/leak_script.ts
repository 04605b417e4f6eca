/**
 * Run by `tests/data_review_r4_test.ts` as its own `deno run
 * --v8-flags=--expose-gc`, counting live Workers (made and not yet
 * terminated) through a wrapped `Worker`. `epochs`: 20 epochs of a loader
 * with two non-persistent workers, every other one left by `break` after
 * its first batch; prints the most Workers ever alive and those alive after
 * each epoch. `pending`: an iterator whose only reference is the promise of
 * its pending `next()` is collected (as far as collection goes) while the
 * workers load that batch; the batch must still come, with its Workers
 * alive, and the program must end by itself after.
 * @module
 */

import { data } from "../../mod.ts";
import { Late, Numbers } from "./rest_datasets.ts";

let live = 0;
let most = 0;
const Base = globalThis.Worker;
globalThis.Worker = class extends Base {
  #ended = false;
  constructor(url: string | URL, options?: WorkerOptions) {
    super(url, options);
    most = Math.max(most, ++live);
  }
  override terminate(): void {
    if (!this.#ended) live--;
    this.#ended = true;
    super.terminate();
  }
};

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with --v8-flags=--expose-gc");

const mode = Deno.args[0];
if (mode === "epochs") {
  const loader = new data.DataLoader(new Numbers(8), { batchSize: 2, numWorkers: 2 });
  const after: number[] = [];
  let batches = 0;
  for (let e = 0; e < 20; e++) {
    for await (const _ of loader) {
      batches++;
      if (e % 2 === 1) break;
    }
    after.push(live);
  }
  console.log(JSON.stringify({ most, after, batches }));
} else if (mode === "pending") {
  const loader = new data.DataLoader(new Late(4, 400), { batchSize: 2, numWorkers: 2 });
  // Only the promise is kept: the iterator itself is unreachable from here on.
  const pending = loader[Symbol.asyncIterator]().next();
  let settled = false;
  pending.finally(() => settled = true);
  // Collections all the while the workers start and load the batch.
  while (!settled) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const step = await pending;
  const alive = live;
  const batch = await (step.value as unknown as { toArray(): Promise<number[]> }).toArray();
  console.log(JSON.stringify({ most, alive, batch, done: step.done }));
  // Now the iterator is garbage: its finalizer ends the Workers, so the program ends.
  for (let k = 0; k < 5; k++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
} else throw new Error(`unknown mode ${mode}`);
