/**
 * multigrad's launcher (`src/distributed/run.ts`) as torchrun: the signals
 * it is sent reach the ranks, and `--standalone`.
 * @module
 */

import assert from "node:assert/strict";
import { parseRunArgs } from "../src/distributed/run.ts";
import { freePort, LAUNCHER } from "./tcprun.ts";

/** Every rank says it started, then records the signal it got and exits with 0. */
const RANK_SCRIPT = `
const dir = Deno.args[0];
for (const signal of ["SIGTERM", "SIGHUP", "SIGINT"]) {
  Deno.addSignalListener(signal, () => {
    Deno.writeTextFileSync(dir + "/got." + Deno.env.get("LOCAL_RANK"), signal);
    Deno.exit(0);
  });
}
Deno.writeTextFileSync(dir + "/started." + Deno.env.get("LOCAL_RANK"), String(Deno.pid));
await new Promise((resolve) => setTimeout(resolve, 20_000));
`;

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

for (const signal of ["SIGTERM", "SIGHUP"] as const) {
  Deno.test(`run.ts: ${signal} to the launcher reaches every rank (as torchrun's)`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "multigrad_run_" });
    try {
      await Deno.writeTextFile(`${dir}/job.ts`, RANK_SCRIPT);
      const launcher = new Deno.Command(Deno.execPath(), {
        args: [
          ...["run", "-A", LAUNCHER.pathname, "--nproc-per-node", "2"],
          ...["--master-port", String(freePort()), `${dir}/job.ts`, dir],
        ],
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const started = performance.now();
      while (!(await exists(`${dir}/started.0`)) || !(await exists(`${dir}/started.1`))) {
        assert.ok(performance.now() - started < 30_000, "the ranks did not start in 30 s");
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      launcher.kill(signal);
      const out = await launcher.output();
      const got = await Promise.all(
        [0, 1].map((r) => Deno.readTextFile(`${dir}/got.${r}`).catch(() => "nothing")),
      );
      // Rank processes left running would be orphans: stop them before asserting.
      for (const r of [0, 1]) {
        const pid = Number(await Deno.readTextFile(`${dir}/started.${r}`));
        if (got[r] === "nothing") {
          try {
            Deno.kill(pid, "SIGKILL");
          } catch {
            // Already gone.
          }
        }
      }
      assert.deepEqual(got, [signal, signal]);
      assert.equal(out.code, 1);
      assert.match(new TextDecoder().decode(out.stderr), new RegExp(`interrupted \\(${signal}\\)`));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("run.ts: --standalone picks a free port on this machine, as torchrun's", () => {
  const o = parseRunArgs(["--standalone", "--nproc-per-node", "2", "train.ts", "--lr", "1"]);
  assert.deepEqual([o.nnodes, o.nodeRank, o.masterAddr], [1, 0, "127.0.0.1"]);
  assert.ok(o.masterPort > 0 && o.masterPort !== 29500, `port ${o.masterPort}`);
  // The port is free: it can be listened on.
  Deno.listen({ hostname: "127.0.0.1", port: o.masterPort }).close();
  assert.deepEqual([o.script, ...o.args], ["train.ts", "--lr", "1"]);
  assert.throws(
    () => parseRunArgs(["--standalone", "--nnodes", "2", "x.ts"]),
    /--standalone runs one machine: --nnodes 2/,
  );
  assert.throws(
    () => parseRunArgs(["--standalone", "--master-port", "1234", "x.ts"]),
    /--standalone picks the master's address and port: not --master-port/,
  );
});
