/**
 * Seed 000: data_parallel by hand (replicate, scatter, parallelApply,
 * gather) of a Linear(10, 20) over 2 devices, printing every step's shapes.
 *
 *   deno run -A examples/seed000_data_parallel.ts [--rows 16] [--backend cpu]
 * @module
 */

import { parseArgs } from "node:util";
import { type Device, nn, parallel, rand, type Tensor } from "../mod.ts";
import { pickDevices, size } from "./_devices.ts";

/** The seed's model: one Linear block. */
export class DataParallelModel extends nn.Module {
  /** The only layer. */
  block1: nn.Linear = new nn.Linear(10, 20);

  /** block1(x). */
  override forward(x: Tensor): Tensor {
    return this.block1.forward(x);
  }
}

/** The seed's hand-written data_parallel, printing as it goes. */
export function dataParallel(
  module: nn.Module,
  input: Tensor,
  devices: Device[],
  log: (line: string) => void,
  outputDevice?: Device,
): Tensor {
  if (devices.length === 0) return module.forward(input) as Tensor;
  const output = outputDevice ?? devices[0];
  let replicas = parallel.replicate(module, devices);
  log(`replicas:[${replicas.map(String).join(", ")}]`);
  const inputs = parallel.scatter(input, devices) as Tensor[];
  log(`inputs:${Array.isArray(inputs) ? "Array" : typeof inputs}`);
  inputs.forEach((x, i) => log(`input ${i}:${size(x.shape)}`));
  replicas = replicas.slice(0, inputs.length);
  const outputs = parallel.parallelApply(replicas, inputs) as Tensor[];
  log(`outputs:${Array.isArray(outputs) ? "Array" : typeof outputs}`);
  outputs.forEach((y, i) => log(`output ${i}:${size(y.shape)}`));
  return parallel.gather(outputs, output) as Tensor;
}

/** Runs the seed with `rows` input rows; returns the result's shape. */
export async function main(
  options: { rows?: number; backend?: string } = {},
  log: (line: string) => void = console.log,
): Promise<readonly number[]> {
  const devices = await pickDevices(2, options.backend);
  const model = new DataParallelModel().to(devices[0]);
  const x = rand([options.rows ?? 16, 10], { device: devices[0] });
  const result = dataParallel(model, x, devices, log);
  log(`result:${size(result.shape)}`);
  await result.data();
  return result.shape;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: { rows: { type: "string", default: "16" }, backend: { type: "string" } },
  });
  await main({ rows: Number(values.rows), backend: values.backend });
}
