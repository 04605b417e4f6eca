/**
 * Seed 002: the tutorial of seed 001 on 4 devices and on one, with batches of
 * 30 and of 25: [8, 8, 8, 6] for 30, [3, 3, 3, 1] for the last 10,
 * [7, 7, 7, 4] for 25.
 *
 *   deno run -A examples/seed002_four_devices.ts [--backend cpu]
 * @module
 */

import { parseArgs } from "node:util";
import { main as tutorial } from "./seed001_tutorial.ts";

/** Runs the four runs of the seed. */
export async function main(
  options: { backend?: string } = {},
  log: (line: string) => void = console.log,
): Promise<void> {
  for (const batchSize of [30, 25]) {
    for (const devices of [1, 4]) {
      log(`== ${devices === 1 ? "one device" : `${devices} devices`}, batch size ${batchSize}`);
      await tutorial({ devices, batchSize, backend: options.backend }, log);
    }
  }
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { backend: { type: "string" } } });
  await main({ backend: values.backend });
}
