/**
 * `torch.utils`: {@link checkpoint} (`torch.utils.checkpoint`: activation
 * checkpointing, `checkpoint` and `checkpointSequential`).
 * @module
 */

export * as checkpoint from "../autograd/checkpoint.ts";
