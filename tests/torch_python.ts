/**
 * The Python with PyTorch that some tests hand multigrad's output to (Debian's python3-torch, where
 * a machine has it; CI has none, and those tests skip there).
 * @module
 */

/** The Python that has PyTorch where a machine has it (Debian's python3-torch); CI has none. */
export const PYTHON = "/usr/bin/python3";

/** Whether {@link PYTHON} imports torch: the tests that hand files to PyTorch skip without it. */
export async function pythonHasTorch(): Promise<boolean> {
  try {
    const { success } = await new Deno.Command(PYTHON, {
      args: ["-c", "import torch"],
      stdout: "null",
      stderr: "null",
    }).output();
    return success;
  } catch {
    return false;
  }
}
