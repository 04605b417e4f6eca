/**
 * Whether a launcher (multigrad's `run.ts`, torchrun, Slurm scripts)
 * started this process as a rank of a TCP rendezvous.
 * @module
 */

function envVar(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    // No --allow-env: as if unset.
    return undefined;
  }
}

/**
 * Whether this process's environment names a TCP rendezvous
 * (`MASTER_ADDR`, `MASTER_PORT`, `RANK` and `WORLD_SIZE`, as torchrun and
 * multigrad's `run.ts` set them): `initProcessGroup()` then picks the
 * `"tcp"` backend with `env://`.
 */
export function launchedWithEnv(): boolean {
  return ["MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"].every((v) => envVar(v) !== undefined);
}
