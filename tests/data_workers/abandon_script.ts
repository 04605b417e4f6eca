/**
 * Run by `tests/data_rest_test.ts` as its own `deno run`: an epoch of a
 * loader with two workers is left after two batches in one of the ways
 * PyTorch's iterator is dropped, then the program must end by itself, with
 * no Worker keeping it alive: `break` (unbatched), `return` (an explicit
 * `return()`), `dispose` (`await using`), `drop` (the iterator forgotten,
 * then collected: run with `--v8-flags=--expose-gc`), `persistent-drop`
 * (a persistent loader forgotten without `shutdown()`, then collected).
 * @module
 */

import { data } from "../../mod.ts";
import { Numbers } from "./rest_datasets.ts";

const mode = Deno.args[0];
let loader: data.DataLoader<number, unknown> | null = new data.DataLoader(new Numbers(40), {
  batchSize: mode === "break" ? null : 2,
  numWorkers: 2,
  persistentWorkers: mode === "persistent-drop",
});
let seen = 0;
if (mode === "break") {
  for await (const _ of loader!) if (++seen === 2) break;
} else if (mode === "return") {
  const it = loader![Symbol.asyncIterator]();
  while (seen < 2 && !(await it.next()).done) seen++;
  await it.return();
} else if (mode === "dispose") {
  await using it = loader![Symbol.asyncIterator]();
  while (seen < 2 && !(await it.next()).done) seen++;
} else if (mode === "drop" || mode === "persistent-drop") {
  await (async () => {
    const it = loader![Symbol.asyncIterator]();
    while (seen < 2 && !(await it.next()).done) seen++;
    if (mode === "persistent-drop") await it.return();
  })();
  loader = null;
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("run with --v8-flags=--expose-gc");
  // Finalizers run in later tasks, after a collection has found the iterator unreachable.
  for (let k = 0; k < 5; k++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
} else throw new Error(`unknown mode ${mode}`);
console.log(`batches: ${seen}`);
