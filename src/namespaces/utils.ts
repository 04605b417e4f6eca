/**
 * `torch.utils`: {@link checkpoint} (`torch.utils.checkpoint`: activation
 * checkpointing, `checkpoint` and `checkpointSequential`) and
 * {@link tensorboard} (`torch.utils.tensorboard.SummaryWriter`).
 * @module
 */

export * as checkpoint from "../autograd/checkpoint.ts";
export * as tensorboard from "../utils/tensorboard/mod.ts";
