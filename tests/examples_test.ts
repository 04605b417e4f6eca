/**
 * The seeds' programs, ported in examples/, print the shapes the seeds print.
 * Run on the best backend (webgpu here) and on logical cpu devices.
 */

import assert from "node:assert/strict";
import { main as seed000 } from "../examples/seed000_data_parallel.ts";
import { main as seed001 } from "../examples/seed001_tutorial.ts";
import { main as seed002 } from "../examples/seed002_four_devices.ts";
import { main as seed003 } from "../examples/seed003_streams.ts";
import { main as lstmExample } from "../examples/lstm.ts";
import { main as cnn } from "../examples/cnn.ts";
import { BACKENDS } from "./harness.ts";

function capture(): { log: (line: string) => void; lines: string[] } {
  const lines: string[] = [];
  return { log: (line) => lines.push(line), lines };
}

for (const backend of BACKENDS.keys()) {
  const opts = { sanitizeOps: false, sanitizeResources: false };

  Deno.test({
    ...opts,
    name: `seed 000: replicas, inputs [8, 10] x2, outputs [8, 20] x2, result [16, 20] [${backend}]`,
    fn: async () => {
      const { log, lines } = capture();
      assert.deepEqual([...await seed000({ backend }, log)], [16, 20]);
      assert.match(
        lines[0],
        /^replicas:\[DataParallelModel\(\n {2}\(block1\): Linear\(in_features=10, out_features=20, bias=True\)\n\), DataParallelModel/,
      );
      assert.deepEqual(lines.slice(1), [
        "inputs:Array",
        "input 0:[8, 10]",
        "input 1:[8, 10]",
        "outputs:Array",
        "output 0:[8, 20]",
        "output 1:[8, 20]",
        "result:[16, 20]",
      ]);
      const odd = capture();
      await seed000({ backend, rows: 15 }, odd.log);
      assert.deepEqual(odd.lines.filter((l) => l.startsWith("input ")), [
        "input 0:[8, 10]",
        "input 1:[7, 10]",
      ]);
    },
  });

  Deno.test({
    ...opts,
    name: `seed 001: 2 devices split 30 into [15, 15] and 10 into [5, 5] [${backend}]`,
    fn: async () => {
      const { log, lines } = capture();
      const outside = await seed001({ devices: 2, batchSize: 30, backend }, log);
      assert.deepEqual(outside, [[30, 5], [30, 5], [30, 5], [10, 5]]);
      const inModel = lines.filter((l) => l.startsWith("\tIn Model"));
      assert.deepEqual(inModel, [
        ...Array(6).fill("\tIn Model: input size [15, 5] output size [15, 2]"),
        ...Array(2).fill("\tIn Model: input size [5, 5] output size [5, 2]"),
      ]);
      assert.deepEqual(lines.filter((l) => l.startsWith("Outside")), [
        ...Array(3).fill("Outside: input size [30, 5] output_size [30, 2]"),
        "Outside: input size [10, 5] output_size [10, 2]",
      ]);
    },
  });

  Deno.test({
    ...opts,
    name:
      `seed 002: 4 devices give [8, 8, 8, 6], [3, 3, 3, 1], [7, 7, 7, 4]; one device whole batches [${backend}]`,
    fn: async () => {
      const { log, lines } = capture();
      await seed002({ backend }, log);
      const runs: string[][] = [];
      for (const line of lines) {
        if (line.startsWith("==")) runs.push([]);
        else if (line.startsWith("\tIn Model")) {
          runs.at(-1)!.push(/input size \[(\d+)/.exec(line)![1]);
        }
      }
      assert.deepEqual(runs.map((r) => r.join(" ")), [
        "30 30 30 10",
        "8 8 8 6 8 8 8 6 8 8 8 6 3 3 3 1",
        "25 25 25 25",
        "7 7 7 4 7 7 7 4 7 7 7 4 7 7 7 4",
      ]);
    },
  });

  Deno.test({
    ...opts,
    name: `seed 003: a single device only moves the inputs [${backend}]`,
    fn: async () => {
      const { log, lines } = capture();
      assert.deepEqual([...await seed003({ backend }, log)], [256, 8]);
      assert.match(lines[0], /input \[256, 64\] moved from cpu:0, module called directly/);
    },
  });

  Deno.test({
    ...opts,
    name: `lstm example: an LSTM learns to recall the first token (short run) [${backend}]`,
    fn: async () => {
      const { log, lines } = capture();
      const { losses, accuracies } = await lstmExample(
        { backend, seqLen: 5, trainSize: 512, epochs: 3 },
        log,
      );
      assert.equal(lines.length, 4);
      assert.match(lines[0], /^recall the first of 5 tokens \(8 classes, chance 0.125\) on /);
      assert.match(lines[3], /^epoch 3: loss \d\.\d{4}, held-out accuracy \d+\.\d%$/);
      assert.ok(losses[2] < losses[0] * 0.6, `loss falls: ${losses}`);
      assert.ok(accuracies[2] > 0.8, `held-out accuracy ${accuracies[2]} after 3 epochs`);
    },
  });
}

for (const backend of BACKENDS.keys()) {
  Deno.test({
    sanitizeOps: false,
    sanitizeResources: false,
    name:
      `cnn example: a short DataParallel run over 2 devices learns (loss falls, accuracy > chance) [${backend}]`,
    fn: async () => {
      const { log, lines } = capture();
      const reports = await cnn({
        backend,
        devices: 2,
        epochs: 2,
        train: 256,
        test: 128,
        batchSize: 32,
      }, log);
      assert.equal(reports.length, 2);
      assert.match(lines[0], /DataParallel/);
      assert.ok(reports[1].loss < reports[0].loss, `loss ${reports[0].loss} -> ${reports[1].loss}`);
      assert.ok(reports[1].accuracy > 0.3, `test accuracy ${reports[1].accuracy}`);
      assert.match(lines[2], /^epoch 2: loss [\d.]+, test accuracy [\d.]+%, [\d.]+ s/);
    },
  });
}
