/**
 * The demo (examples/demo.ts): a short training run on cpu devices through
 * the exported function (checkpoint, plot, resume, interrupt, accuracy
 * improving, memory flat), and the CLI as a subprocess for its user errors.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, full, load, requestDevices, save, type Tensor } from "../mod.ts";
import { checkDeviceCount, parseDemoArgs, parseDevices } from "../examples/demo.ts";
import { makeSpirals, splitTrainTest } from "../examples/demo/data.ts";
import { CheckpointError, DemoError, runDemo } from "../examples/demo/train.ts";
import { linearTicks, logTicks, renderPlot } from "../examples/demo/plot.ts";
import { formatProgress } from "../examples/demo/progress.ts";

const DEMO = new URL("../examples/demo.ts", import.meta.url).pathname;
const devices: Device[] = await requestDevices({ backend: "cpu", count: 2 });

/** A tiny, fast configuration: 240 train rows (half-turn spirals), 8 steps per epoch. */
const TINY = {
  pointsPerClass: 100,
  turns: 0.5,
  batchSize: 30,
  lr: 0.03,
  hidden: 32,
  seed: 3,
} as const;

function quiet(): { lines: string[]; log: (line: string) => void } {
  const lines: string[] = [];
  return { lines, log: (line) => lines.push(line) };
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test("demo data: spirals are seeded, balanced and split", () => {
  const a = makeSpirals({ pointsPerClass: 50, seed: 7 });
  const b = makeSpirals({ pointsPerClass: 50, seed: 7 });
  const c = makeSpirals({ pointsPerClass: 50, seed: 8 });
  assert.deepEqual(a.x, b.x);
  assert.notDeepEqual(a.x, c.x);
  assert.equal(a.length, 150);
  assert.deepEqual([0, 1, 2].map((k) => a.y.filter((y) => y === k).length), [50, 50, 50]);
  const { train, test } = splitTrainTest(a, 0.2, 1);
  assert.equal(train.length + test.length, 150);
  assert.equal(test.length, 30);
});

Deno.test("demo plot and progress helpers", () => {
  assert.deepEqual(linearTicks(0, 10, 5), [0, 2, 4, 6, 8, 10]);
  assert.deepEqual(logTicks(0.01, 1).filter((t) => t.label).map((t) => t.value), [0.01, 0.1, 1]);
  const svg = renderPlot({
    stepsPerEpoch: 2,
    stepLoss: [1.1, 0.9, 0.5, 0.3],
    epochs: [
      { epoch: 0, trainLoss: NaN, trainAccuracy: 0.3, testAccuracy: 0.33, seconds: 0 },
      { epoch: 1, trainLoss: 1, trainAccuracy: 0.6, testAccuracy: 0.5, seconds: 1 },
      { epoch: 2, trainLoss: 0.4, trainAccuracy: 0.9, testAccuracy: 0.85, seconds: 1 },
    ],
  }, { subtitle: "a < b & c" });
  assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  assert.match(svg, /<\/svg>\n$/);
  for (
    const label of ["Train loss", "Accuracy", "epoch", "test accuracy (85.0%)", "a &#60; b &#38; c"]
  ) {
    assert.ok(svg.includes(label), `the plot has "${label}"`);
  }
  assert.ok(!svg.includes("NaN"), "no NaN coordinates");
  const line = formatProgress({
    epoch: 3,
    epochs: 40,
    step: 5,
    steps: 10,
    loss: 0.4312,
    samplesPerSecond: 12345,
  }, 10);
  assert.equal(line, "epoch  3/40  |█████     |   5/10  loss 0.4312  12,345 samples/s");
});

Deno.test("demo flags: parsing and mistakes", () => {
  assert.deepEqual(parseDevices("cpu:2"), [{ backend: "cpu", count: 2 }]);
  assert.deepEqual(parseDevices("webgpu:2,cpu"), [
    { backend: "webgpu", count: 2 },
    { backend: "cpu", count: 1 },
  ]);
  assert.throws(() => parseDevices("tpu:2"), /unknown backend "tpu" \(available: webgpu, cpu\)/);
  assert.throws(() => parseDevices("cpu:x"), DemoError);
  assert.throws(() => parseDevices("cpu:1,cpu:2"), /listed twice/);
  const args = parseDemoArgs(["--epochs", "5", "--batch-size=64", "--lr", "0.1", "--resume"]);
  assert.equal(args.epochs, 5);
  assert.equal(args.batchSize, 64);
  assert.equal(args.lr, 0.1);
  assert.equal(args.resume, true);
  assert.equal(args.out, "out/demo");
  assert.throws(() => parseDemoArgs(["--epochs", "0"]), /--epochs must be an integer >= 1/);
  assert.throws(() => parseDemoArgs(["--lr", "fast"]), /--lr must be a positive number/);
  assert.throws(() => parseDemoArgs(["--bogus"]), DemoError);
});

Deno.test({
  name: "demo: trains on cpu:0 and cpu:1, checkpoints, plots and resumes",
  ...opts,
  async fn() {
    const out = await Deno.makeTempDir({ prefix: "multigrad_demo_" });
    try {
      const first = quiet();
      const r1 = await runDemo({ devices, epochs: 2, out, ...TINY, log: first.log });
      assert.equal(r1.startEpoch, 0);
      assert.equal(r1.epoch, 2);
      assert.equal(r1.interrupted, false);
      assert.ok(await exists(r1.checkpointPath), "checkpoint written");
      assert.ok(await exists(r1.plotPath), "plot written");
      assert.match(await Deno.readTextFile(r1.plotPath), /<svg[\s\S]*<\/svg>/);
      // The report: devices split the batch, the seed-style trace.
      assert.ok(first.lines.includes("\tIn Model: input size [15, 2] output size [15, 3]"));
      assert.equal(first.lines.filter((l) => l.startsWith("\tIn Model")).length, 2);
      assert.ok(first.lines.includes("Outside: input size [30, 2] output_size [30, 3]"));
      // It learns: accuracy well above the untrained model's, loss going down.
      const [e0, e1, e2] = r1.history.epochs;
      assert.deepEqual(r1.history.epochs.map((e) => e.epoch), [0, 1, 2]);
      assert.ok(
        e2.testAccuracy > e0.testAccuracy + 0.1,
        `test accuracy ${e0.testAccuracy} -> ${e2.testAccuracy}`,
      );
      assert.ok(e2.trainLoss < e1.trainLoss, `loss ${e1.trainLoss} -> ${e2.trainLoss}`);
      assert.equal(r1.history.stepLoss.length, 2 * r1.history.stepsPerEpoch);
      // tidy keeps device memory flat from epoch to epoch.
      assert.equal(r1.memory.length, 2);
      assert.equal(r1.memory[1], r1.memory[0], `bytes in use per epoch: ${r1.memory}`);

      const second = quiet();
      const r2 = await runDemo({ devices, epochs: 3, out, ...TINY, resume: true, log: second.log });
      assert.equal(r2.startEpoch, 2);
      assert.equal(r2.epoch, 3);
      assert.deepEqual(r2.history.epochs.map((e) => e.epoch), [0, 1, 2, 3]);
      assert.equal(r2.history.stepLoss.length, 3 * r2.history.stepsPerEpoch);
      assert.deepEqual(
        r2.history.stepLoss.slice(0, r1.history.stepLoss.length),
        r1.history.stepLoss.map(Math.fround),
      );
      assert.ok(
        second.lines.some((l) => l.startsWith(`Resumed from ${r1.checkpointPath} at epoch 2`)),
      );
      // The resumed epoch is the one an uninterrupted run trains, bit for bit.
      const straightOut = await Deno.makeTempDir({ prefix: "multigrad_demo_straight_" });
      try {
        const straight = await runDemo({
          devices,
          epochs: 3,
          out: straightOut,
          ...TINY,
          log: quiet().log,
        });
        assert.deepEqual(r2.history.stepLoss, straight.history.stepLoss.map(Math.fround));
        assert.equal(r2.testAccuracy, straight.testAccuracy);
      } finally {
        await Deno.remove(straightOut, { recursive: true });
      }

      // Resuming what is already done is a user error, not a crash.
      await assert.rejects(
        runDemo({ devices, epochs: 3, out, ...TINY, resume: true, log: quiet().log }),
        /already has 3 epochs; pass --epochs larger than 3/,
      );

      // Interrupted mid-epoch: the run stops after that step, the checkpoint keeps epoch 3.
      let steps = 0;
      const r3 = await runDemo({
        devices,
        epochs: 10,
        out,
        ...TINY,
        resume: true,
        log: quiet().log,
        shouldStop: () => ++steps >= 3,
      });
      assert.equal(r3.interrupted, true);
      assert.equal(r3.epoch, 3);
      assert.equal(steps, 3);
      const r4 = await runDemo({
        devices,
        epochs: 4,
        out,
        ...TINY,
        resume: true,
        log: quiet().log,
      });
      assert.equal(r4.startEpoch, 3);
      assert.equal(r4.epoch, 4);
    } finally {
      await Deno.remove(out, { recursive: true });
    }
  },
});

Deno.test({
  name: "demo: a missing or corrupt checkpoint is a clear CheckpointError",
  ...opts,
  async fn() {
    const out = await Deno.makeTempDir({ prefix: "multigrad_demo_" });
    try {
      await assert.rejects(
        runDemo({ devices, epochs: 1, out, ...TINY, resume: true, log: quiet().log }),
        (e: unknown) =>
          e instanceof CheckpointError &&
          /no checkpoint at .*checkpoint\.safetensors/.test(e.message),
      );
      await Deno.writeFile(
        `${out}/checkpoint.safetensors`,
        new TextEncoder().encode("not a checkpoint"),
      );
      await assert.rejects(
        runDemo({ devices, epochs: 1, out, ...TINY, resume: true, log: quiet().log }),
        (e: unknown) =>
          e instanceof CheckpointError && /is not a valid demo checkpoint/.test(e.message),
      );
    } finally {
      await Deno.remove(out, { recursive: true });
    }
  },
});

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", DEMO, ...args],
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
    env: { NO_COLOR: "1" },
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: output.code, stdout: decode(output.stdout), stderr: decode(output.stderr) };
}

function assertOneLineError(result: { code: number; stderr: string }, pattern: RegExp): void {
  assert.equal(result.code, 1, `exit code (stderr: ${result.stderr})`);
  const lines = result.stderr.trim().split("\n");
  assert.equal(lines.length, 1, `one line of stderr, got:\n${result.stderr}`);
  assert.match(lines[0], /^error: /);
  assert.match(lines[0], pattern);
  assert.doesNotMatch(result.stderr, /\n\s+at /, "no stack trace");
}

Deno.test({
  name: "demo CLI: --help, a bad flag, an unknown device, --resume without a checkpoint",
  ...opts,
  async fn() {
    const out = await Deno.makeTempDir({ prefix: "multigrad_demo_" });
    try {
      const [help, bad, device, resume] = await Promise.all([
        cli(["--help"]),
        cli(["--epochz", "3"]),
        cli(["--devices", "tpu:2"]),
        cli(["--resume", "--devices", "cpu:1", "--out", out]),
      ]);
      assert.equal(help.code, 0, help.stderr);
      assert.match(help.stdout, /^Usage: deno task demo/);
      assert.match(help.stdout, /--devices LIST/);
      assertOneLineError(bad, /--epochz/);
      assertOneLineError(device, /unknown backend "tpu"/);
      assertOneLineError(resume, /cannot resume: no checkpoint at/);
    } finally {
      await Deno.remove(out, { recursive: true });
    }
  },
});

Deno.test({
  name: "demo CLI: Ctrl-C (SIGINT) stops after the current step and keeps the last checkpoint",
  ignore: Deno.build.os === "windows",
  ...opts,
  async fn() {
    const out = await Deno.makeTempDir({ prefix: "multigrad_demo_" });
    try {
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", DEMO, "--devices", "cpu:1", "--epochs", "1000", "--out", out],
        stdout: "piped",
        stderr: "piped",
        stdin: "null",
        env: { NO_COLOR: "1" },
      }).spawn();
      const stderr = new Response(child.stderr).text();
      let stdout = "";
      let signalled = false;
      for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
        stdout += chunk;
        if (!signalled && /^epoch\s+1\/1000 /m.test(stdout)) {
          child.kill("SIGINT");
          signalled = true;
        }
      }
      const status = await child.status;
      const errors = await stderr;
      assert.ok(signalled, `the run printed no epoch line:\n${stdout}\n${errors}`);
      assert.equal(status.code, 130, `exit code; stderr:\n${errors}`);
      assert.match(errors, /Ctrl-C: stopping after the current step/);
      assert.doesNotMatch(errors, /\n\s+at /);
      const stopped = /holds epoch (\d+)/.exec(stdout);
      assert.ok(stopped, stdout);
      // The checkpoint is whole and resumable.
      const resumed = await runDemo({
        devices,
        epochs: Number(stopped[1]) + 1,
        out,
        resume: true,
        log: quiet().log,
      });
      assert.equal(resumed.startEpoch, Number(stopped[1]));
    } finally {
      await Deno.remove(out, { recursive: true });
    }
  },
});

// Issue 10: negative values, device counts the data cannot feed, NaN checkpoints.

Deno.test("demo: negative numbers get the real message, not 'argument is ambiguous'", () => {
  const rejects = (args: string[], message: string) =>
    assert.throws(() => parseDemoArgs(args), (e: Error) => {
      assert.ok(e instanceof DemoError);
      assert.ok(e.message.includes(message), e.message);
      return true;
    });
  rejects(["--epochs", "-3"], "--epochs must be an integer >= 1, got -3");
  rejects(["--batch-size", "-128"], "--batch-size must be an integer >= 1, got -128");
  rejects(["--lr", "-0.5"], `--lr must be a positive number, got "-0.5"`);
  rejects(["--lr", "-.5"], `--lr must be a positive number, got "-.5"`);
  rejects(["--seed", "-1"], "--seed must be an integer >= 0, got -1");
  // A flag after a valued one is still a flag.
  assert.equal(parseDemoArgs(["--out", "x", "--resume"]).resume, true);
  rejects(["--epochs", "--resume"], "--epochs");
});

Deno.test("demo: more devices than the data can feed are refused before any starts", async () => {
  assert.throws(
    () => checkDeviceCount(parseDemoArgs(["--devices", "cpu:100000"])),
    /--devices asks for 100000 devices, but a batch of 128 rows \(of 3600 training rows\) can be split over at most 128/,
  );
  assert.throws(
    () =>
      checkDeviceCount(
        parseDemoArgs(["--devices", "cpu:3000,webgpu:1000", "--batch-size", "8000"]),
      ),
    /asks for 4000 devices.*at most 3600/,
  );
  checkDeviceCount(parseDemoArgs(["--devices", "cpu:128"]));
  const run = await cli(["--devices", "cpu:100000"]);
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stderr.trim(), /^error: --devices asks for 100000 devices/);
  assert.doesNotMatch(run.stdout, /Devices \(/, "no device was started");
});

Deno.test("demo: --resume from a checkpoint whose weights hold NaN refuses and leaves it as it is", async () => {
  const out = await Deno.makeTempDir({ prefix: "multigrad_faults_" });
  try {
    const devices = await requestDevices({ backend: "cpu", count: 2 });
    const tiny = { pointsPerClass: 100, turns: 0.5, batchSize: 30, lr: 0.03, hidden: 16, seed: 3 };
    await runDemo({ devices, epochs: 1, out, ...tiny, log: () => {} });
    const path = `${out}/checkpoint.safetensors`;
    const saved = await load<{ model: Record<string, Tensor> }>(path);
    const [key] = Object.keys(saved.model);
    saved.model[key] = full([...saved.model[key].shape], NaN);
    await save(saved, path);
    const poisoned = await Deno.readFile(path);

    await assert.rejects(
      () => runDemo({ devices, epochs: 3, out, ...tiny, resume: true, log: () => {} }),
      (e: Error) => {
        assert.ok(e instanceof CheckpointError);
        assert.match(e.message, new RegExp(`weights in .* hold NaN or infinity \\(${key}\\)`));
        return true;
      },
    );
    const run = await cli(["--resume", "--devices", "cpu:1", "--epochs", "3", "--out", out]);
    assert.equal(run.code, 1, run.stderr);
    assert.match(
      run.stderr.trim(),
      /^error: cannot resume: the weights in .* hold NaN or infinity/,
    );
    assert.deepEqual(await Deno.readFile(path), poisoned, "the checkpoint is not overwritten");
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});
