/**
 * `torch.distributed.pipeline`: `sync.Pipe` (with its `PipeOptions` and
 * `PipeCheckpoint`) is `parallel.Pipe` itself, the same class, so
 * `new distributed.pipeline.sync.Pipe(seq, { chunks: 4 })` is
 * `new parallel.Pipe(seq, { chunks: 4 })`.
 * @module
 */

export * as sync from "../parallel/pipe.ts";
