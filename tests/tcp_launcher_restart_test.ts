/**
 * multigrad's launcher (`src/distributed/run.ts`) restarts a failed group as
 * torchrun's `--max-restarts` (PyTorch 1.13's LocalElasticAgent): the whole
 * group is stopped and started again with `TORCHELASTIC_RESTART_COUNT` one
 * higher, until the restarts are spent.
 * @module
 */

import assert from "node:assert/strict";
import { parseRunArgs } from "../src/distributed/run.ts";
import { freePort, LAUNCHER } from "./tcprun.ts";

const MOD = new URL("../mod.ts", import.meta.url).href;

/**
 * Every rank records its environment in `DIR/env.<restart>.<rank>`, then:
 * "once": rank 0 joins a real "tcp" group; once its store holds the port,
 * rank 1 fails with code 3 on the first attempt only (a marker file,
 * as a checkpoint a resumed run loads); in later attempts both all-reduce.
 * "always": rank 1 exits with 5 at once, every attempt; rank 0 sleeps.
 * "hang": rank 1 fails on attempt 0, where rank 0 takes 1.5 s to stop after SIGTERM; every
 * later attempt sleeps and records a SIGTERM in `DIR/got.<restart>.<rank>` (each rank's pid is
 * in `DIR/pid.<restart>.<rank>`).
 */
const RANK_SCRIPT = `
import { distributed, tensor } from "${MOD}";
const [dir, mode] = Deno.args;
const env = Deno.env.toObject();
const rank = env.RANK;
const restart = env.TORCHELASTIC_RESTART_COUNT;
if (mode === "hang" && restart !== "0") {
  // Set before the pid is written: the test sends its signal once it sees a pid.
  Deno.addSignalListener("SIGTERM", () => {
    Deno.writeTextFileSync(dir + "/got." + restart + "." + rank, "SIGTERM");
    Deno.exit(0);
  });
}
Deno.writeTextFileSync(dir + "/env." + restart + "." + rank, JSON.stringify(env));
Deno.writeTextFileSync(dir + "/pid." + restart + "." + rank, String(Deno.pid));
const marker = dir + "/failed_once";
if (mode === "hang" && rank === "0" && restart === "0") {
  // Slow to stop, as a rank saving a checkpoint: the launcher waits in its restart.
  Deno.addSignalListener("SIGTERM", () => {
    Deno.writeTextFileSync(dir + "/stopping", "");
    setTimeout(() => Deno.exit(0), 1500);
  });
}
// Rank 1 fails only once rank 0 is set up: the test then knows what rank 0 wrote.
const ready = dir + "/ready." + restart;
if (rank === "0" && mode !== "once") Deno.writeTextFileSync(ready, "");
const rank0Ready = async () => {
  while (!(await Deno.stat(ready).then(() => true, () => false))) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};
if (mode === "once") {
  if (rank === "1" && !(await Deno.stat(marker).then(() => true, () => false))) {
    await rank0Ready();
    Deno.writeTextFileSync(marker, restart);
    Deno.exit(3);
  }
  const joined = distributed.initProcessGroup({ timeoutMs: 60_000 });
  if (rank === "0") {
    // Ready once rank 0's store holds MASTER_PORT (the restarted group must get it back).
    const held = () => {
      try {
        Deno.listen({ hostname: "127.0.0.1", port: Number(env.MASTER_PORT) }).close();
        return false;
      } catch {
        return true;
      }
    };
    while (!held()) await new Promise((resolve) => setTimeout(resolve, 10));
    Deno.writeTextFileSync(ready, "");
  }
  await joined;
  const t = tensor([Number(rank) + 1]);
  distributed.allReduce(t);
  Deno.writeTextFileSync(dir + "/sum." + restart + "." + rank, String((await t.toArray())[0]));
  await distributed.destroyProcessGroup();
} else if (mode === "always") {
  if (rank === "1") {
    await rank0Ready();
    Deno.exit(5);
  }
  await new Promise((resolve) => setTimeout(resolve, 60_000));
} else {
  if (rank === "1" && restart === "0") {
    await rank0Ready();
    Deno.exit(4);
  }
  await new Promise((resolve) => setTimeout(resolve, 60_000));
}
`;

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

function alive(pid: number): boolean {
  try {
    Deno.kill(pid, "SIGCONT");
    return true;
  } catch {
    return false;
  }
}

/** Runs the launcher on RANK_SCRIPT in a fresh folder; `f` gets the folder and the launcher. */
async function withLauncher<T>(
  flags: readonly string[],
  mode: string,
  f: (dir: string, launcher: Deno.ChildProcess) => Promise<T>,
): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_restart_" });
  try {
    await Deno.writeTextFile(`${dir}/job.ts`, RANK_SCRIPT);
    const launcher = new Deno.Command(Deno.execPath(), {
      args: [
        ...["run", "-A", LAUNCHER.pathname, "--nproc-per-node", "2", "--monitor-interval", "0.2"],
        ...flags,
        ...[`${dir}/job.ts`, dir, mode],
      ],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    return await f(dir, launcher);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function finish(launcher: Deno.ChildProcess): Promise<{ code: number; text: string }> {
  const out = await launcher.output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { code: out.code, text };
}

async function readEnv(
  dir: string,
  restart: number,
  rank: number,
): Promise<Record<string, string>> {
  return JSON.parse(await Deno.readTextFile(`${dir}/env.${restart}.${rank}`));
}

Deno.test("run.ts: --max-restarts 1 restarts the group after rank 1 fails once; the same port serves again", async () => {
  const port = freePort();
  await withLauncher(
    ["--max-restarts", "1", "--master-port", String(port), "--rdzv-id", "job7"],
    "once",
    async (dir, launcher) => {
      const { code, text } = await finish(launcher);
      assert.equal(code, 0, text);
      assert.match(
        text,
        /run: rank 1 \(local rank 1, pid \d+\) exited with code 3; restarting the group \(restart 1 of 1\)/,
      );
      for (const restart of [0, 1]) {
        for (const rank of [0, 1]) {
          const env = await readEnv(dir, restart, rank);
          assert.equal(env.TORCHELASTIC_RESTART_COUNT, String(restart));
          assert.equal(env.TORCHELASTIC_MAX_RESTARTS, "1");
          assert.equal(env.TORCHELASTIC_RUN_ID, "job7");
          assert.equal(env.TORCHELASTIC_USE_AGENT_STORE, "False");
          assert.equal(env.MASTER_PORT, String(port));
          assert.equal(env.RANK, String(rank));
          assert.equal(env.GROUP_WORLD_SIZE, "1");
        }
      }
      assert.equal(await exists(`${dir}/env.2.0`), false, "a third attempt ran");
      // The checkpoint-like marker was written on attempt 0 and seen on attempt 1.
      assert.equal(await Deno.readTextFile(`${dir}/failed_once`), "0");
      // The restarted group met at the same port and all-reduced (1 + 2).
      assert.deepEqual(
        await Promise.all([0, 1].map((r) => Deno.readTextFile(`${dir}/sum.1.${r}`))),
        ["3", "3"],
      );
    },
  );
});

Deno.test("run.ts: --standalone restarts meet at a new free port, as torchrun's rendezvous picks one", async () => {
  await withLauncher(["--standalone", "--max-restarts", "1"], "once", async (dir, launcher) => {
    const { code, text } = await finish(launcher);
    assert.equal(code, 0, text);
    const first = await readEnv(dir, 0, 1);
    const second = await readEnv(dir, 1, 0);
    assert.notEqual(first.MASTER_PORT, second.MASTER_PORT);
    assert.equal((await readEnv(dir, 1, 1)).MASTER_PORT, second.MASTER_PORT);
    // --standalone names the run with a random id, the same for every attempt.
    assert.match(first.TORCHELASTIC_RUN_ID, /^[0-9a-f-]{36}$/);
    assert.equal(second.TORCHELASTIC_RUN_ID, first.TORCHELASTIC_RUN_ID);
    assert.deepEqual(
      await Promise.all([0, 1].map((r) => Deno.readTextFile(`${dir}/sum.1.${r}`))),
      ["3", "3"],
    );
  });
});

Deno.test("run.ts: --max-restarts 0 (torchrun's default) fails naming the rank and its exit code", async () => {
  await withLauncher(["--master-port", String(freePort())], "once", async (dir, launcher) => {
    const { code, text } = await finish(launcher);
    assert.equal(code, 1, text);
    assert.match(
      text,
      /run: rank 1 \(local rank 1, pid \d+\) exited with code 3; the other ranks were stopped \(rank 1 failed first; its output above says why\); no restarts left \(0 of --max-restarts 0 done\)/,
    );
    assert.doesNotMatch(text, /restarting the group/);
    assert.equal((await readEnv(dir, 0, 1)).TORCHELASTIC_RESTART_COUNT, "0");
    assert.equal((await readEnv(dir, 0, 1)).TORCHELASTIC_RUN_ID, "none");
    assert.equal(await exists(`${dir}/env.1.0`), false, "restarted without --max-restarts");
  });
});

Deno.test("run.ts: a rank that always fails spends the restarts and the report counts them", async () => {
  await withLauncher(
    ["--max-restarts", "2", "--master-port", String(freePort())],
    "always",
    async (dir, launcher) => {
      const { code, text } = await finish(launcher);
      assert.equal(code, 1, text);
      assert.match(text, /exited with code 5; restarting the group \(restart 1 of 2\)/);
      assert.match(text, /exited with code 5; restarting the group \(restart 2 of 2\)/);
      assert.match(
        text,
        /run: rank 1 \(local rank 1, pid \d+\) exited with code 5; the other ranks were stopped \(rank 1 failed first; its output above says why\); no restarts left \(2 of --max-restarts 2 done\)/,
      );
      for (const restart of [0, 1, 2]) {
        assert.equal((await readEnv(dir, restart, 1)).TORCHELASTIC_RESTART_COUNT, String(restart));
      }
      assert.equal(await exists(`${dir}/env.3.1`), false, "a fourth attempt ran");
      // Every rank 0 (each slept a minute) was stopped.
      for (const restart of [0, 1, 2]) {
        const pid = Number(await Deno.readTextFile(`${dir}/pid.${restart}.0`));
        assert.equal(alive(pid), false, `rank 0 of attempt ${restart} (pid ${pid}) still runs`);
      }
    },
  );
});

for (const phase of ["stopping the failed group", "starting the new group"]) {
  Deno.test(`run.ts: SIGTERM to the launcher while ${phase} leaves no rank running`, async () => {
    await withLauncher(
      ["--max-restarts", "3", "--master-port", String(freePort())],
      "hang",
      async (dir, launcher) => {
        const started = performance.now();
        const ready = phase === "stopping the failed group"
          ? () => exists(`${dir}/stopping`)
          : async () => (await exists(`${dir}/pid.1.0`)) || (await exists(`${dir}/pid.1.1`));
        while (!(await ready())) {
          assert.ok(performance.now() - started < 60_000, `not ${phase} in 60 s`);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        launcher.kill("SIGTERM");
        const { code, text } = await finish(launcher);
        const pids: number[] = [];
        for await (const entry of Deno.readDir(dir)) {
          if (entry.name.startsWith("pid.")) {
            pids.push(Number(await Deno.readTextFile(`${dir}/${entry.name}`)));
          }
        }
        const running = pids.filter(alive);
        for (const pid of running) Deno.kill(pid, "SIGKILL");
        assert.deepEqual(running, [], "ranks left running");
        assert.equal(code, 1, text);
        assert.match(text, /interrupted \(SIGTERM\)/);
        assert.equal(await exists(`${dir}/env.2.0`), false, "restarted after SIGTERM");
        // The new group's ranks that had started were sent the launcher's SIGTERM.
        for (const rank of [0, 1]) {
          if (await exists(`${dir}/pid.1.${rank}`)) {
            assert.equal(await Deno.readTextFile(`${dir}/got.1.${rank}`), "SIGTERM");
          }
        }
        if (phase === "stopping the failed group") {
          assert.equal(await exists(`${dir}/env.1.0`), false, "a new group started after SIGTERM");
        }
      },
    );
  });
}

Deno.test("run.ts: --max-restarts, --monitor-interval and --rdzv-id are parsed as torchrun's", () => {
  const o = parseRunArgs(["--max_restarts=2", "--monitor-interval", "0.5", "x.ts"]);
  assert.deepEqual([o.maxRestarts, o.monitorInterval, o.runId], [2, 0.5, "none"]);
  const d = parseRunArgs(["x.ts"]);
  assert.deepEqual([d.maxRestarts, d.monitorInterval], [0, 0.1]);
  assert.equal(parseRunArgs(["--rdzv-id", "abc", "x.ts"]).runId, "abc");
  assert.throws(
    () => parseRunArgs(["--max-restarts", "-1", "x.ts"]),
    /--max-restarts must be an integer >= 0, got "-1"/,
  );
  assert.throws(
    () => parseRunArgs(["--max-restarts", "1", "--nnodes", "2", "x.ts"]),
    /--max-restarts 1 needs --nnodes 1 \(got --nnodes 2\)/,
  );
  assert.equal(parseRunArgs(["--nnodes", "2", "x.ts"]).maxRestarts, 0);
  assert.throws(
    () => parseRunArgs(["--monitor-interval", "soon", "x.ts"]),
    /--monitor-interval must be a number of seconds >= 0, got "soon"/,
  );
});
