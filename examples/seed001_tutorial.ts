/**
 * Seeds 001 and 002: PyTorch's DataParallel tutorial. A Linear(5, 2) wrapped
 * in DataParallel over a random data set of 100 rows; the model prints the
 * size of the chunk it sees, the loop prints the whole batch.
 *
 *   deno run -A examples/seed001_tutorial.ts [--devices 2] [--batch-size 30] [--backend cpu]
 * @module
 */

import { parseArgs } from "node:util";
import { data, type Device, nn, randn, type Tensor } from "../mod.ts";
import { pickDevices, size } from "./_devices.ts";

/** The tutorial's random data set: `length` rows of `size` features. */
export class RandomDataset extends data.Dataset<Tensor> {
  readonly #data: Tensor;
  /** `length` rows of `features` standard-normal values. */
  constructor(features: number, readonly length: number) {
    super();
    this.#data = randn([length, features]);
  }
  /** Row `index`. */
  get(index: number): Tensor {
    return this.#data.narrow(0, index, 1).reshape([-1]);
  }
}

/** The tutorial's model, which reports the size of the input it sees. */
export class Model extends nn.Module {
  /** The linear layer. */
  fc: nn.Linear;
  /**
   * Where the "In Model" lines go. An ordinary field, not `#log`: replicas
   * are copies of the module's own fields, and JavaScript cannot copy
   * `#private` ones.
   */
  readonly log: (line: string) => void;
  /** A Linear(inputSize, outputSize) that logs its shapes. */
  constructor(inputSize: number, outputSize: number, log: (line: string) => void) {
    super();
    this.fc = new nn.Linear(inputSize, outputSize);
    this.log = log;
  }
  /** fc(input), logging both shapes. */
  override forward(input: Tensor): Tensor {
    const output = this.fc.forward(input);
    this.log(`\tIn Model: input size ${size(input.shape)} output size ${size(output.shape)}`);
    return output;
  }
}

/** Options of {@link main}. */
export interface TutorialOptions {
  /** How many devices (1 runs the model directly, as on a single GPU). */
  devices?: number;
  /** Rows per batch (the seeds use 30 and 25). */
  batchSize?: number;
  /** Force a backend. */
  backend?: string;
}

/** Runs the tutorial; returns the outside batch shapes. */
export async function main(
  options: TutorialOptions = {},
  log: (line: string) => void = console.log,
): Promise<number[][]> {
  const inputSize = 5;
  const outputSize = 2;
  const dataSize = 100;
  const count = options.devices ?? 2;
  const devices: Device[] = await pickDevices(count, options.backend);
  const loader = new data.DataLoader(new RandomDataset(inputSize, dataSize), {
    batchSize: options.batchSize ?? 30,
    shuffle: true,
  });
  let model: nn.Module = new Model(inputSize, outputSize, log);
  if (devices.length > 1) {
    log(`Let's use ${devices.length} devices! (${devices.join(", ")})`);
    model = new nn.DataParallel(model.to(devices[0]), { devices });
  } else model.to(devices[0]);
  const shapes: number[][] = [];
  for (const batch of loader) {
    const input = (batch as Tensor).to(devices[0]);
    const output = model.forward(input) as Tensor;
    log(`Outside: input size ${size(input.shape)} output_size ${size(output.shape)}`);
    shapes.push([...input.shape]);
    await output.data();
  }
  return shapes;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      devices: { type: "string", default: "2" },
      "batch-size": { type: "string", default: "30" },
      backend: { type: "string" },
    },
  });
  await main({
    devices: Number(values.devices),
    batchSize: Number(values["batch-size"]),
    backend: values.backend,
  });
}
