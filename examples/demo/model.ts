/**
 * The demo's model: a small MLP classifier that can report the shapes it
 * sees, as PyTorch's DataParallel tutorial does, so the split of a batch
 * over the replicas shows.
 * @module
 */

import { nn, type Tensor } from "../../mod.ts";
import { size } from "../_devices.ts";

/** Options of {@link SpiralClassifier}. */
export interface ClassifierOptions {
  /** Input features (default 2). */
  inputs?: number;
  /** Width of the hidden layers (default 64). */
  hidden?: number;
  /** Hidden layers (default 2). */
  depth?: number;
  /** Output classes (default 3). */
  classes?: number;
  /** The non-linearity (default "gelu"). */
  activation?: "relu" | "gelu" | "tanh";
}

/**
 * `Linear(2, 64) → GELU → Linear(64, 64) → GELU → Linear(64, 3)` (sizes
 * configurable), producing logits. While {@link trace} is set, each forward
 * calls it with `In Model: input size [..] output size [..]`; under
 * DataParallel every replica does, with its share of the batch.
 */
export class SpiralClassifier extends nn.Module {
  /** The layers, as a Sequential (state dict keys `net.0.weight`, ...). */
  net: nn.Sequential;
  /**
   * Called with the shape line on each forward while set. An ordinary field
   * (not `#private`) so that DataParallel's replicas share it.
   */
  trace: ((line: string) => void) | null = null;

  /** Builds the layers; parameters start on the default device. */
  constructor(options: ClassifierOptions = {}) {
    super();
    const inputs = options.inputs ?? 2;
    const hidden = options.hidden ?? 64;
    const depth = options.depth ?? 2;
    const classes = options.classes ?? 3;
    const activation = (): nn.Module => {
      switch (options.activation ?? "gelu") {
        case "relu":
          return new nn.ReLU();
        case "tanh":
          return new nn.Tanh();
        default:
          return new nn.GELU();
      }
    };
    const layers: nn.Module[] = [];
    let width = inputs;
    for (let i = 0; i < depth; i++) {
      layers.push(new nn.Linear(width, hidden), activation());
      width = hidden;
    }
    layers.push(new nn.Linear(width, classes));
    this.net = new nn.Sequential(...layers);
  }

  /** Logits `[rows, classes]` for points `[rows, inputs]`. */
  override forward(input: Tensor): Tensor {
    const output = this.net.forward(input) as Tensor;
    this.trace?.(`\tIn Model: input size ${size(input.shape)} output size ${size(output.shape)}`);
    return output;
  }
}
