/**
 * A sequence task learned by an LSTM: recall the first token. Each sequence
 * holds `seqLen` random tokens out of `vocab`; the label is its FIRST token,
 * so the model must carry it through every later step to the last hidden
 * state (an Embedding, an LSTM, a Linear on the final state). Chance is
 * 1 / vocab; prints the loss and accuracy per epoch.
 *
 *   deno run -A examples/lstm.ts [--epochs 8] [--seq-len 10] [--backend cpu]
 * @module
 */

import { parseArgs } from "node:util";
import { data, type Device, manualSeed, nn, noGrad, optim, rand, type Tensor } from "../mod.ts";
import { pickDevices } from "./_devices.ts";

/** Embedding → LSTM → Linear on the last layer's final hidden state. */
export class RecallModel extends nn.Module {
  /** Token vectors. */
  embed: nn.Embedding;
  /** The recurrence (batch first). */
  lstm: nn.LSTM;
  /** Final hidden state to class scores. */
  head: nn.Linear;

  /** A model over `vocab` tokens with `hidden` LSTM units. */
  constructor(vocab: number, hidden: number, device: Device) {
    super();
    this.embed = new nn.Embedding(vocab, 16, { device });
    this.lstm = new nn.LSTM(16, hidden, { batchFirst: true, numLayers: 1, device });
    this.head = new nn.Linear(hidden, vocab, { device });
  }

  /** Class scores [batch, vocab] for int32 tokens [batch, seq]. */
  override forward(tokens: Tensor): Tensor {
    const [, [h]] = this.lstm.forward(this.embed.forward(tokens));
    return this.head.forward(h.select(0, -1));
  }
}

/** `count` sequences of `seqLen` tokens and their labels (the first token), on `device`. */
export function recallData(
  count: number,
  seqLen: number,
  vocab: number,
  device: Device,
): { tokens: Tensor; labels: Tensor } {
  // Uniform integers from the seeded stream (the same numbers on every backend).
  const tokens = noGrad(() => rand([count, seqLen], { device }).mul(vocab).floor().to("int32"));
  return { tokens, labels: tokens.select(1, 0) };
}

/** Options of {@link main}. */
export interface LstmExampleOptions {
  /** Passes over the training set (default 8). */
  epochs?: number;
  /** Tokens per sequence (default 10). */
  seqLen?: number;
  /** Distinct tokens, and classes (default 8). */
  vocab?: number;
  /** LSTM units (default 64). */
  hidden?: number;
  /** Training sequences (default 2048). */
  trainSize?: number;
  /** Sequences per step (default 64). */
  batchSize?: number;
  /** Seeds data, initialisation and shuffling (default 0). */
  seed?: number;
  /** Force a backend. */
  backend?: string;
}

/** What {@link main} measured. */
export interface LstmExampleResult {
  /** Mean training loss of each epoch. */
  losses: number[];
  /** Accuracy on held-out sequences after each epoch. */
  accuracies: number[];
}

/** Trains the model; logs and returns the loss and held-out accuracy per epoch. */
export async function main(
  options: LstmExampleOptions = {},
  log: (line: string) => void = console.log,
): Promise<LstmExampleResult> {
  const epochs = options.epochs ?? 8;
  const seqLen = options.seqLen ?? 10;
  const vocab = options.vocab ?? 8;
  const hidden = options.hidden ?? 64;
  const seed = options.seed ?? 0;
  const [device] = await pickDevices(1, options.backend);
  manualSeed(seed);
  const train = recallData(options.trainSize ?? 2048, seqLen, vocab, device);
  const test = recallData(512, seqLen, vocab, device);
  const model = new RecallModel(vocab, hidden, device);
  const opt = new optim.Adam(model.parameters(), { lr: 0.01 });
  const lossFn = new nn.CrossEntropyLoss();
  const loader = new data.DataLoader(new data.TensorDataset(train.tokens, train.labels), {
    batchSize: options.batchSize ?? 64,
    shuffle: true,
    seed,
  });
  log(`recall the first of ${seqLen} tokens (${vocab} classes, chance ${1 / vocab}) on ${device}`);
  const losses: number[] = [];
  const accuracies: number[] = [];
  for (let epoch = 1; epoch <= epochs; epoch++) {
    model.train();
    let total = 0;
    let batches = 0;
    for (const [tokens, labels] of loader) {
      opt.zeroGrad();
      const loss = lossFn.forward(model.forward(tokens), labels);
      loss.backward();
      opt.step();
      total += await loss.item();
      batches++;
    }
    model.eval();
    const correct = noGrad(() =>
      model.forward(test.tokens).argmax(1).eq(test.labels).to("float32").mean()
    );
    losses.push(total / batches);
    accuracies.push(await correct.item());
    log(
      `epoch ${epoch}: loss ${losses.at(-1)!.toFixed(4)}, held-out accuracy ${
        (100 * accuracies.at(-1)!).toFixed(1)
      }%`,
    );
  }
  return { losses, accuracies };
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      epochs: { type: "string" },
      "seq-len": { type: "string" },
      backend: { type: "string" },
    },
  });
  await main({
    epochs: values.epochs ? Number(values.epochs) : undefined,
    seqLen: values["seq-len"] ? Number(values["seq-len"]) : undefined,
    backend: values.backend,
  });
}
