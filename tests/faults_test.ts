/**
 * Faults (issue 10, section 4): a save killed mid-way, and the demo's bad
 * arguments and bad checkpoints. Device loss is in `device_loss_test.ts`.
 * @module
 */

import assert from "node:assert/strict";
import { full, load, requestDevices, save, type Tensor, tensor } from "../mod.ts";
import { checkDeviceCount, parseDemoArgs } from "../examples/demo.ts";
import { CheckpointError, DemoError, runDemo } from "../examples/demo/train.ts";

async function listDir(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) names.push(entry.name);
  return names.sort();
}

/** Starts a save that stalls before its rename; resolves once its temporary is written. */
async function stalledSave(path: string, megabytes: number): Promise<Deno.ChildProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("./stalled_save.ts", import.meta.url).pathname,
      path,
      `${megabytes}`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("stalled")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stalled save ended early: ${out}`);
    out += value;
  }
  reader.releaseLock();
  return child;
}

Deno.test("save: a killed save's temporary file is removed by the next save of that file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/model.safetensors`;
    await save({ w: tensor([1, 2]) }, path);
    const killed = await stalledSave(path, 32);
    killed.kill("SIGKILL");
    await killed.status;
    const left = (await listDir(dir)).filter((n) => n.endsWith(".tmp"));
    assert.equal(left.length, 1, `the killed save left its temporary: ${left}`);
    assert.ok((await Deno.stat(`${dir}/${left[0]}`)).size >= 32 * 2 ** 20);
    // Another target's temporaries are not touched.
    const other = `${dir}/.other.safetensors.1-0123456789ab.tmp`;
    await Deno.writeFile(other, Uint8Array.of(1));

    await save({ w: tensor([3, 4]) }, path);
    assert.deepEqual(await listDir(dir), [
      ".other.safetensors.1-0123456789ab.tmp",
      "model.safetensors",
    ]);
    const back = await load<{ w: ReturnType<typeof tensor> }>(path);
    assert.deepEqual([...await back.w.data()], [3, 4]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("save: the temporary of a save still running in another process is left alone", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/model.safetensors`;
    const running = await stalledSave(path, 1);
    try {
      await save({ w: tensor([5]) }, path);
      assert.equal((await listDir(dir)).filter((n) => n.endsWith(".tmp")).length, 1);
    } finally {
      running.kill("SIGKILL");
      await running.status;
    }
    // Once its writer is gone, it is stale.
    await save({ w: tensor([6]) }, path);
    assert.deepEqual(await listDir(dir), ["model.safetensors"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("save: a failing save leaves no temporary file and names the path", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // The target is a directory: the rename over it fails after the write.
    const path = `${dir}/taken.safetensors`;
    await Deno.mkdir(path);
    await assert.rejects(
      () => save({ w: tensor([1]) }, path),
      /could not write ".*taken\.safetensors"/,
    );
    assert.deepEqual(await listDir(dir), ["taken.safetensors"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ---- the demo ----

const DEMO = new URL("../examples/demo.ts", import.meta.url).pathname;

async function demoCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
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
  const cli = await demoCli(["--devices", "cpu:100000"]);
  assert.equal(cli.code, 1, cli.stderr);
  assert.match(cli.stderr.trim(), /^error: --devices asks for 100000 devices/);
  assert.doesNotMatch(cli.stdout, /Devices \(/, "no device was started");
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
    const cli = await demoCli(["--resume", "--devices", "cpu:1", "--epochs", "3", "--out", out]);
    assert.equal(cli.code, 1, cli.stderr);
    assert.match(
      cli.stderr.trim(),
      /^error: cannot resume: the weights in .* hold NaN or infinity/,
    );
    assert.deepEqual(await Deno.readFile(path), poisoned, "the checkpoint is not overwritten");
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});
