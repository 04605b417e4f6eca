/**
 * Error classes shared by the core and the backends.
 * @module
 */

/** Raised by every operation on a device after that device was lost. */
export class DeviceLostError extends Error {
  /** Creates the error; `device` is the device's name, e.g. `webgpu:1`. */
  constructor(device: string, reason: string) {
    super(
      `device ${device} was lost (${reason}); start a new one with requestDevices()`,
    );
    this.name = "DeviceLostError";
  }
}
