/**
 * Review of the launcher's restarts (`src/distributed/run.ts`,
 * torchrun's `--max-restarts`): a rank that succeeds while another fails,
 * a rank killed by a signal (torchrun reports `exitcode: -9`), a script
 * that does not exist (no group is started, so no restarts are spent), and
 * the flags' bad values.
 * @module
 */

import assert from "node:assert/strict";
import { parseRunArgs } from "../src/distributed/run.ts";
import { freePort, LAUNCHER } from "./tcprun.ts";

/**
 * Every rank records `DIR/env.<restart>.<rank>`, then:
 * "early0": rank 0 exits with 0 at once, rank 1 exits with 7 once rank 0 is gone, every attempt.
 * "sigkill": on attempt 0 rank 1 kills itself with SIGKILL; later attempts exit with 0.
 */
const RANK_SCRIPT = `
const [dir, mode] = Deno.args;
const rank = Deno.env.get("RANK");
const restart = Deno.env.get("TORCHELASTIC_RESTART_COUNT");
Deno.writeTextFileSync(dir + "/env." + restart + "." + rank, JSON.stringify(Deno.env.toObject()));
if (mode === "early0") {
  const pidFile = dir + "/pid." + restart;
  if (rank === "0") {
    Deno.writeTextFileSync(pidFile, String(Deno.pid));
    Deno.exit(0);
  }
  // Fails only once rank 0 is gone (exited with 0): one rank's success does not end the group.
  const gone = () => {
    let pid;
    try {
      pid = Number(Deno.readTextFileSync(pidFile));
    } catch {
      return false;
    }
    try {
      Deno.kill(pid, "SIGCONT");
      return false;
    } catch {
      return true;
    }
  };
  while (!gone()) await new Promise((resolve) => setTimeout(resolve, 10));
  Deno.exit(7);
} else if (mode === "sigkill" && rank === "1" && restart === "0") {
  Deno.kill(Deno.pid, "SIGKILL");
}
`;

/** Runs the launcher with `flags` then `script ...args`; its exit code and output. */
async function runLauncher(
  flags: readonly string[],
  script: string,
  args: readonly string[],
): Promise<{ code: number; text: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", LAUNCHER.pathname, "--monitor-interval", "0.05", ...flags, script, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { code: out.code, text };
}

async function withDir<T>(f: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_restart_review_" });
  try {
    await Deno.writeTextFile(`${dir}/job.ts`, RANK_SCRIPT);
    return await f(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const exists = (path: string) => Deno.stat(path).then(() => true, () => false);

Deno.test("run.ts review: a rank that exits with 0 before another fails does not save the group; every rank restarts", async () => {
  await withDir(async (dir) => {
    const { code, text } = await runLauncher(
      ["--nproc-per-node", "2", "--max-restarts", "1", "--master-port", String(freePort())],
      `${dir}/job.ts`,
      [dir, "early0"],
    );
    assert.equal(code, 1, text);
    assert.match(text, /rank 1 \(local rank 1, pid \d+\) exited with code 7; restarting the group/);
    assert.match(text, /no restarts left \(1 of --max-restarts 1 done\)/);
    // torchrun's agent restarts the whole group: rank 0, which had succeeded, ran again.
    for (const rank of [0, 1]) assert.ok(await exists(`${dir}/env.1.${rank}`), `rank ${rank}`);
    assert.equal(await exists(`${dir}/env.2.0`), false, "a third attempt ran");
  });
});

Deno.test("run.ts review: a rank killed by a signal is named with torchrun's exit code (-9) and the group restarts", async () => {
  await withDir(async (dir) => {
    const { code, text } = await runLauncher(
      ["--nproc-per-node", "2", "--max-restarts", "1", "--master-port", String(freePort())],
      `${dir}/job.ts`,
      [dir, "sigkill"],
    );
    assert.equal(code, 0, text);
    assert.match(
      text,
      /rank 1 \(local rank 1, pid \d+\) was killed by SIGKILL \(exit code -9, as torchrun reports it\); restarting the group \(restart 1 of 1\)/,
    );
    assert.equal(
      JSON.parse(await Deno.readTextFile(`${dir}/env.1.1`)).TORCHELASTIC_RESTART_COUNT,
      "1",
    );
  });
});

Deno.test("run.ts review: a script that does not exist starts no rank and spends no restart", async () => {
  await withDir(async (dir) => {
    const missing = `${dir}/no_such_train.ts`;
    const { code, text } = await runLauncher(
      ["--nproc-per-node", "2", "--max-restarts", "3"],
      missing,
      [],
    );
    assert.equal(code, 2, text);
    assert.match(text, new RegExp(`run: the script ${missing} does not exist`));
    assert.doesNotMatch(text, /restarting the group|Module not found/);
  });
});

Deno.test("run.ts review: --max-restarts and --monitor-interval refuse what torchrun's int and float refuse", () => {
  for (const bad of ["1.5", "", "-1", "two", "0x2"]) {
    assert.throws(
      () => parseRunArgs([`--max-restarts=${bad}`, "x.ts"]),
      new RegExp(`--max-restarts must be an integer >= 0, got "${bad}"`),
      bad,
    );
  }
  for (const bad of ["-0.5", "", "five", "1s"]) {
    assert.throws(
      () => parseRunArgs([`--monitor-interval=${bad}`, "x.ts"]),
      new RegExp(`--monitor-interval must be a number of seconds >= 0, got "${bad}"`),
      bad,
    );
  }
  // Deno's timers overflow to 1 ms past 2^31 - 1 ms: a longer interval would poll, not wait.
  assert.throws(
    () => parseRunArgs(["--monitor-interval", "3000000", "x.ts"]),
    /--monitor-interval must be at most 2147483 seconds \(a timer's limit\), got "3000000"/,
  );
  assert.equal(parseRunArgs(["--monitor-interval", "2147483", "x.ts"]).monitorInterval, 2147483);
  assert.equal(parseRunArgs(["--monitor-interval", "5.", "x.ts"]).monitorInterval, 5);
  assert.equal(parseRunArgs(["--monitor-interval", ".25", "x.ts"]).monitorInterval, 0.25);
});
