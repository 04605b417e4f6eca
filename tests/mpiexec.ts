/**
 * Whether the tests under `mpiexec` can run here: they need MPICH's launcher
 * (Hydra), since the "mpi" backend loads MPICH's `libmpich.so.12`; another
 * MPI's `mpiexec` counts as absent (the bench's ddp suite decides alike).
 * @module
 */

import { mpiUnavailable } from "../bench/suites/ddp.ts";

/** True where `mpiexec` is MPICH's. */
export const MPICH_MPIEXEC: boolean = (await mpiUnavailable()) === null;
