/**
 * Run by `tests/data_workers_test.ts` as its own `deno run`: a loader with
 * two workers ends (`end`), is left early (`break`), fails (`error`), or
 * keeps persistent workers until `shutdown()` (`persistent`); then the
 * program must end by itself, with no Worker keeping it alive.
 * @module
 */

import { data } from "../../mod.ts";
import { Squares } from "./datasets.ts";

const mode = Deno.args[0];
const loader = new data.DataLoader(
  new Squares({ n: 12, at: mode === "error" ? 5 : undefined }, "faulty"),
  {
    batchSize: 2,
    numWorkers: 2,
    persistentWorkers: mode === "persistent",
  },
);
let seen = 0;
try {
  for (let epoch = 0; epoch < (mode === "persistent" ? 2 : 1); epoch++) {
    for await (const _ of loader) {
      seen++;
      if (mode === "break" && seen === 2) break;
    }
  }
} catch (error) {
  console.log(`caught: ${(error as Error).message.split("\n")[0]}`);
}
if (mode === "persistent") loader.shutdown();
console.log(`batches: ${seen}`);
