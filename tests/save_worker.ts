/**
 * A Worker for `tests/faults_test.ts`: saves a 4 MB tensor to the path it is sent, `times` times,
 * and posts how many saves failed and the first error.
 * @module
 */

import { randn, save } from "../mod.ts";

// A Worker's global scope (deno check types this file as a window).
const scope = self as unknown as {
  onmessage: ((event: MessageEvent<{ path: string; times: number }>) => void) | null;
  postMessage(message: unknown): void;
};

scope.onmessage = async (event: MessageEvent<{ path: string; times: number }>) => {
  const { path, times } = event.data;
  const w = randn([1000, 1000]);
  let failed = 0;
  let first = "";
  for (let i = 0; i < times; i++) {
    try {
      await save({ w }, path);
    } catch (e) {
      failed += 1;
      first ||= (e as Error).message;
    }
  }
  scope.postMessage({ failed, first });
};
