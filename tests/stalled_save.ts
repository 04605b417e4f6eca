/**
 * A save that stalls before it can rename its temporary file (its flush to
 * disk never returns), for `faults_test.ts` to kill: what a save killed
 * mid-way leaves behind. Prints "stalled" once the temporary file is written.
 *
 * Usage: `deno run -A tests/stalled_save.ts <path> <megabytes>`
 * @module
 */

import { save, tensor } from "../mod.ts";

const [path, megabytes] = Deno.args;
const proto = Deno.FsFile.prototype as { sync: () => Promise<void> };
proto.sync = () => {
  console.log("stalled");
  // A timer keeps the process alive while it waits to be killed.
  setInterval(() => {}, 60_000);
  return new Promise(() => {});
};
const values = new Float32Array(Number(megabytes) * 2 ** 18).fill(1.5);
await save({ weights: tensor(values) }, path);
