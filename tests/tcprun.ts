/**
 * Runs the tests' ranks modules as processes of the `"tcp"` process group,
 * started by multigrad's launcher (`src/distributed/run.ts`, torchrun-style)
 * on a free port of the loopback interface.
 * @module
 */

import type { MpiRun } from "./mpiexec.ts";

/** The launcher. */
export const LAUNCHER: URL = new URL("../src/distributed/run.ts", import.meta.url);

/** A port no one listens on now (the system's pick, released at once). */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/**
 * Runs `script` as `ranks` processes under the launcher, as `deno run -A script PREFIX SCENARIO
 * JSON`; every rank writes its result as JSON to `PREFIX.<rank>.json` (as under mpiexec).
 */
export async function tcpRun<T>(
  script: URL,
  ranks: number,
  scenario: string,
  options: Record<string, unknown>,
  env: Record<string, string> = {},
): Promise<MpiRun<T>> {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_tcp_" });
  try {
    const prefix = `${dir}/result`;
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        ...["run", "-A", LAUNCHER.pathname, "--nproc-per-node", String(ranks)],
        ...["--master-addr", "127.0.0.1", "--master-port", String(freePort())],
        ...[script.pathname, prefix, scenario, JSON.stringify(options)],
      ],
      stdout: "piped",
      stderr: "piped",
      env,
    }).output();
    const output = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    const results = await Promise.all(
      Array.from(
        { length: ranks },
        (_, r) =>
          Deno.readTextFile(`${prefix}.${r}.json`).then((t) => JSON.parse(t) as T, () => undefined),
      ),
    );
    return { code: out.code, output, results };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
