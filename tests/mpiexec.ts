/**
 * Whether the tests under `mpiexec` can run here: they need MPICH's launcher
 * (Hydra), since the "mpi" backend loads MPICH's `libmpich.so.12`; another
 * MPI's `mpiexec` counts as absent (the bench's ddp suite decides alike).
 * @module
 */

import { mpiUnavailable } from "../bench/suites/ddp.ts";

/** True where `mpiexec` is MPICH's. */
export const MPICH_MPIEXEC: boolean = (await mpiUnavailable()) === null;

/** What {@link mpiRun} gives back: the job's exit code and output, and each rank's result. */
export interface MpiRun<T> {
  readonly code: number;
  readonly output: string;
  /** Each rank's JSON result, undefined where the rank wrote none. */
  readonly results: (T | undefined)[];
}

/**
 * Runs `script` under `mpiexec -n ranks` as `deno run -A script PREFIX SCENARIO JSON`; every rank
 * writes its result as JSON to `PREFIX.<rank>.json` (the convention of the tests' ranks modules).
 */
export async function mpiRun<T>(
  script: URL,
  ranks: number,
  scenario: string,
  options: Record<string, unknown>,
  env: Record<string, string> = {},
): Promise<MpiRun<T>> {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_mpi_" });
  try {
    const prefix = `${dir}/result`;
    const out = await new Deno.Command("mpiexec", {
      args: [
        ...["-n", String(ranks), Deno.execPath(), "run", "-A", script.pathname],
        ...[prefix, scenario, JSON.stringify(options)],
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
