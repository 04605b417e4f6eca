/**
 * `scripts/test_dawn.ts` (the dawn runner CI uses) on a file whose process aborts at exit after
 * every test passed: once is run again and counted as passed, twice is a failure.
 * @module
 */

import assert from "node:assert/strict";

async function runRunner(env: Record<string, string>): Promise<{ code: number; out: string }> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../scripts/test_dawn.ts", import.meta.url).pathname],
    env: {
      MULTIGRAD_DAWN_FILES: new URL("./fixtures/abort_at_exit.ts", import.meta.url).pathname,
      ...env,
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  // deno-lint-ignore no-control-regex -- Deno's colour codes start with ESC
  const out = new TextDecoder().decode(stdout).replace(/\x1b\[[0-9;]*m/g, "") +
    new TextDecoder().decode(stderr);
  return { code, out };
}

const linux = Deno.build.os === "linux";

Deno.test({
  name: "test_dawn: a file that aborts at exit once after its tests passed runs again and passes",
  ignore: !linux,
  async fn() {
    const marker = await Deno.makeTempFile();
    await Deno.remove(marker);
    try {
      const { code, out } = await runRunner({ ABORT_AT_EXIT_MARKER: marker });
      assert.match(out, /all tests passed, then the process exited with 134: once more/);
      assert.match(out, /^ok \| 1 passed \| 0 failed$/m, out);
      assert.equal(code, 0, out);
    } finally {
      await Deno.remove(marker).catch(() => {});
    }
  },
});

Deno.test({
  name: "test_dawn: a file that aborts at exit twice after its tests passed is a failure",
  ignore: !linux,
  async fn() {
    const { code, out } = await runRunner({ ABORT_AT_EXIT_ALWAYS: "1" });
    assert.match(out, /exited with 134, twice/);
    assert.match(out, /^FAILED \| 1 passed \| 1 failed$/m, out);
    assert.equal(code, 1, out);
  },
});
