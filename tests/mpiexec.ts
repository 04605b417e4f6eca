/**
 * Whether the tests under `mpiexec` can run here: they need MPICH's launcher
 * (Hydra), since the "mpi" backend loads MPICH's `libmpich.so.12`. Another
 * MPI's `mpiexec` (Open MPI's, which refuses to run as root) counts as absent.
 * @module
 */

function findMpichMpiexec(): boolean {
  try {
    const out = new Deno.Command("mpiexec", {
      args: ["--version"],
      stdout: "piped",
      stderr: "null",
    })
      .outputSync();
    return out.success && /HYDRA/i.test(new TextDecoder().decode(out.stdout));
  } catch {
    return false;
  }
}

/** True where `mpiexec` is MPICH's. */
export const MPICH_MPIEXEC: boolean = findMpichMpiexec();
