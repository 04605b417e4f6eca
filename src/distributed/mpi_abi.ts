/**
 * MPICH's ABI as the `"mpi"` process group calls it through Deno's FFI: the
 * handles and constants of `mpi.h` (MPICH 3.x/4.x, Intel MPI, Cray MPICH;
 * plain integers) and the symbols with their FFI signatures. Internal to the
 * distributed layer.
 * @module
 */

// MPICH's handles and constants (mpi.h of MPICH 3.x/4.x; the ABI is stable).
export const MPI_COMM_WORLD = 0x44000000;
export const MPI_BYTE = 0x4c00010d;
export const MPI_INT = 0x4c000405;
export const MPI_FLOAT = 0x4c00040a;
export const MPI_DOUBLE = 0x4c00080b;
export const MPI_SUM = 0x58000003;
export const MPI_PROD = 0x58000004;
export const MPI_INFO_NULL = 0x1c000000;
export const MPI_COMM_TYPE_SHARED = 1;
export const MPI_MODE_NOCHECK = 1024;
export const MPI_REQUEST_NULL = 0x2c000000;
export const MPI_ERRORS_RETURN = 0x54000001;
export const MPI_ERR_IN_STATUS = 17;
/** A request neither done nor failed, in a status of a multi-request call that returned MPI_ERR_IN_STATUS. */
export const MPI_ERR_PENDING = 18;
export const MPI_ERR_TRUNCATE = 14;
/** Int32 words of MPICH's `MPI_Status` (count_lo, count_hi_and_cancelled, source, tag, error). */
export const STATUS_WORDS = 5;
export const STATUS_ERROR = 4;
export const MPI_THREAD_SERIALIZED = 2;
export const MPI_THREAD_MULTIPLE = 3;
export const MPI_ANY_SOURCE = -2;
export const MPI_UNDEFINED = -32766;
/** `(void *) -1`. */
export const MPI_IN_PLACE = 0xffffffffffffffffn;

/** The symbols multigrad calls; those that can wait are `nonblocking` (a helper thread). */
export const SYMBOLS = {
  MPI_Initialized: { parameters: ["buffer"], result: "i32" },
  MPI_Finalized: { parameters: ["buffer"], result: "i32" },
  // Waits for every rank's launch data: a rank that never starts holds it.
  MPI_Init_thread: {
    parameters: ["pointer", "pointer", "i32", "buffer"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Finalize: { parameters: [], result: "i32" },
  MPI_Abort: { parameters: ["i32", "i32"], result: "i32" },
  MPI_Ibarrier: { parameters: ["i32", "buffer"], result: "i32" },
  MPI_Comm_dup: { parameters: ["i32", "buffer"], result: "i32" },
  MPI_Comm_set_errhandler: { parameters: ["i32", "i32"], result: "i32" },
  MPI_Comm_split: {
    parameters: ["i32", "i32", "i32", "buffer"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Comm_free: { parameters: ["buffer"], result: "i32" },
  MPI_Comm_rank: { parameters: ["i32", "buffer"], result: "i32" },
  MPI_Comm_size: { parameters: ["i32", "buffer"], result: "i32" },
  MPI_Send: { parameters: ["buffer", "i32", "i32", "i32", "i32", "i32"], result: "i32" },
  MPI_Isend: {
    parameters: ["buffer", "i32", "i32", "i32", "i32", "i32", "buffer"],
    result: "i32",
  },
  MPI_Irecv: {
    parameters: ["buffer", "i32", "i32", "i32", "i32", "i32", "buffer"],
    result: "i32",
  },
  MPI_Allreduce: {
    // The send buffer is always MPI_IN_PLACE: the result replaces `data`.
    parameters: ["pointer", "buffer", "i32", "i32", "i32", "i32"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Bcast: {
    parameters: ["buffer", "i32", "i32", "i32", "i32"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Reduce_scatter_block: {
    parameters: ["buffer", "buffer", "i32", "i32", "i32", "i32"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Allgather: {
    parameters: ["buffer", "i32", "i32", "buffer", "i32", "i32", "i32"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Alltoall: {
    parameters: ["buffer", "i32", "i32", "buffer", "i32", "i32", "i32"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Gather: {
    parameters: ["buffer", "i32", "i32", "buffer", "i32", "i32", "i32", "i32"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Scatter: {
    parameters: ["buffer", "i32", "i32", "buffer", "i32", "i32", "i32", "i32"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Reduce: {
    parameters: ["buffer", "buffer", "i32", "i32", "i32", "i32", "i32"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Waitsome: {
    parameters: ["i32", "buffer", "buffer", "buffer", "pointer"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Waitall: {
    parameters: ["i32", "buffer", "buffer"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Test: { parameters: ["buffer", "buffer", "pointer"], result: "i32" },
  MPI_Testall: { parameters: ["i32", "buffer", "buffer", "buffer"], result: "i32" },
  MPI_Cancel: { parameters: ["buffer"], result: "i32" },
  MPI_Request_free: { parameters: ["buffer"], result: "i32" },
  MPI_Wait: { parameters: ["buffer", "pointer"], result: "i32" },
  // Shared memory of the ranks on one machine (MPI-3 shared windows).
  MPI_Comm_split_type: { parameters: ["i32", "i32", "i32", "i32", "buffer"], result: "i32" },
  MPI_Win_allocate_shared: {
    parameters: ["i64", "i32", "i32", "i32", "buffer", "buffer"],
    result: "i32",
    nonblocking: true,
  },
  MPI_Win_shared_query: {
    parameters: ["i32", "i32", "buffer", "buffer", "buffer"],
    result: "i32",
  },
  MPI_Win_lock_all: { parameters: ["i32", "i32"], result: "i32" },
  MPI_Win_unlock_all: { parameters: ["i32"], result: "i32" },
  MPI_Win_sync: { parameters: ["i32"], result: "i32" },
  MPI_Win_free: { parameters: ["buffer"], result: "i32", nonblocking: true },
  MPI_Reduce_local: {
    parameters: ["pointer", "pointer", "i32", "i32", "i32"],
    result: "i32",
  },
} as const;

/** The opened MPI library. */
export type MpiLibrary = Deno.DynamicLibrary<typeof SYMBOLS>;

/** Throws unless `code` is MPI_SUCCESS. */
export function check(what: string, code: number): void {
  if (code !== 0) throw new Error(`mpi: ${what} failed with MPI error code ${code}`);
}
