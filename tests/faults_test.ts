/**
 * Faults (issue 10, section 4): a save killed mid-way. Device loss is in
 * `device_loss_test.ts`, the demo's bad arguments and checkpoints in
 * `demo_test.ts`.
 * @module
 */

import assert from "node:assert/strict";
import { load, save, tensor } from "../mod.ts";

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

Deno.test("save: two Workers of one process saving the same file both succeed (last one wins)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "multigrad-workers-save-" });
  try {
    const path = `${dir}/shared.safetensors`;
    const results = await Promise.all([0, 1].map((rank) => {
      const worker = new Worker(new URL("./save_worker.ts", import.meta.url), {
        type: "module",
        name: `rank${rank}`,
      });
      return new Promise<{ failed: number; first: string }>((resolve, reject) => {
        worker.onmessage = (event) => {
          worker.terminate();
          resolve(event.data);
        };
        worker.onerror = (event) => {
          worker.terminate();
          reject(new Error(event.message));
        };
        worker.postMessage({ path, times: 10 });
      });
    }));
    for (const [rank, { failed, first }] of results.entries()) {
      assert.equal(failed, 0, `rank ${rank}: ${failed} of 10 saves failed: ${first}`);
    }
    assert.deepEqual(await listDir(dir), ["shared.safetensors"], "no temporary is left");
    assert.deepEqual([...(await load<{ w: { shape: number[] } }>(path)).w.shape], [1000, 1000]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
