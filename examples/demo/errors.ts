/**
 * The demo's user-facing errors: the CLI prints their message as one line
 * and exits with code 1, without a stack trace.
 * @module
 */

/** A mistake of the caller (a bad option, an unknown device): shown as one line. */
export class DemoError extends Error {
  /** An error whose message is meant for the user as it is. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "DemoError";
  }
}

/** A checkpoint that is missing, unreadable, corrupt or does not fit the model. */
export class CheckpointError extends DemoError {
  /** An error naming the checkpoint and what is wrong with it. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CheckpointError";
  }
}
