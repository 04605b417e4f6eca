/**
 * Seed 003: DistributedDataParallel's forward reuses scatter and gather, and
 * with a single device it only moves the inputs there; host-to-device copies
 * run in the background while compute goes on (PyTorch's side streams).
 * Here: a one-device DataParallel only moves its input, and `to(device)`
 * returns before the copy has landed, with later work ordered after it.
 *
 *   deno run -A examples/seed003_streams.ts [--backend cpu]
 * @module
 */

import { parseArgs } from "node:util";
import { nn, randn, type Tensor } from "../mod.ts";
import { pickDevices, size } from "./_devices.ts";

/** Runs the demonstration; returns the output shape. */
export async function main(
  options: { backend?: string } = {},
  log: (line: string) => void = console.log,
): Promise<readonly number[]> {
  const [device] = await pickDevices(1, options.backend);
  const model = new nn.DataParallel(new nn.Linear(64, 8).to(device), { devices: [device] });
  const host = randn([256, 64], { device: "cpu" });
  const started = performance.now();
  const input = host.to(device);
  const queued = performance.now() - started;
  const output = model.forward(input) as Tensor;
  log(
    `single device ${device}: input ${
      size(host.shape)
    } moved from ${host.device}, module called directly`,
  );
  log(
    `copy queued in ${queued.toFixed(2)} ms (no wait); output ${
      size(output.shape)
    } on ${output.device}`,
  );
  await output.data();
  log(`values read after ${(performance.now() - started).toFixed(1)} ms (the only await)`);
  return output.shape;
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { backend: { type: "string" } } });
  await main({ backend: values.backend });
}
