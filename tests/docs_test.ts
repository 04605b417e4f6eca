/**
 * The published docs show every runtime member of every namespace: `deno doc`
 * lists a namespace's members only when its module re-exports them with
 * `export *` (named re-exports are invisible to it), so a member added the
 * wrong way disappears from the docs while still working. This test compares
 * what `deno doc --json mod.ts` documents with what the namespaces export.
 */

import assert from "node:assert/strict";
import * as multigrad from "../mod.ts";

interface DocDeclaration {
  kind: string;
  def?: { elements?: DocSymbol[] };
}
interface DocSymbol {
  name: string;
  declarations: DocDeclaration[];
}

async function documentedNamespaces(): Promise<Map<string, Set<string>>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--json", new URL("../mod.ts", import.meta.url).pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const json = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    nodes: Record<string, { symbols: DocSymbol[] }>;
  };
  const namespaces = new Map<string, Set<string>>();
  const visit = (symbol: DocSymbol, prefix: string) => {
    for (const decl of symbol.declarations) {
      if (decl.kind !== "namespace") continue;
      const path = prefix + symbol.name;
      const members = namespaces.get(path) ?? new Set<string>();
      namespaces.set(path, members);
      for (const element of decl.def?.elements ?? []) {
        members.add(element.name);
        visit(element, `${path}.`);
      }
    }
  };
  for (const node of Object.values(json.nodes)) for (const s of node.symbols) visit(s, "");
  return namespaces;
}

Deno.test("deno doc documents every runtime member of every namespace", async () => {
  const documented = await documentedNamespaces();
  const runtime: Record<string, object> = {
    nn: multigrad.nn,
    "nn.functional": multigrad.nn.functional,
    "nn.init": multigrad.nn.init,
    "nn.utils": multigrad.nn.utils,
    optim: multigrad.optim,
    "optim.lrScheduler": multigrad.optim.lrScheduler,
    data: multigrad.data,
    parallel: multigrad.parallel,
    "parallel.comm": multigrad.parallel.comm,
    distributed: multigrad.distributed,
  };
  for (const [path, namespace] of Object.entries(runtime)) {
    const members = documented.get(path);
    assert.ok(members, `deno doc shows no namespace ${path}`);
    const missing = Object.keys(namespace).filter((name) => !members.has(name));
    assert.deepEqual(missing, [], `${path}: exported but not in deno doc: ${missing.join(", ")}`);
  }
  // Every class of the contract's namespaces is there, and nothing internal leaked.
  for (const name of ["Module", "Linear", "Sequential", "DataParallel", "BatchNorm1d"]) {
    assert.ok(documented.get("nn")!.has(name), `nn.${name}`);
  }
  for (const name of ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad"]) {
    assert.ok(documented.get("optim")!.has(name), `optim.${name}`);
  }
  for (const name of ["initProcessGroup", "spawn", "allReduce", "DistributedDataParallel"]) {
    assert.ok(documented.get("distributed")!.has(name), `distributed.${name}`);
  }
  for (
    const name of [
      "Dataset",
      "TensorDataset",
      "DataLoader",
      "DistributedSampler",
      "Subset",
      "randomSplit",
    ]
  ) {
    assert.ok(documented.get("data")!.has(name), `data.${name}`);
  }
  for (
    const internal of [
      "pyFloat",
      "pyBool",
      "zeroGrads",
      "checkNumber",
      "checkModuleOn",
      "activeGroup",
      "readFlat",
      "setLocalLaunch",
    ]
  ) {
    for (const path of Object.keys(runtime)) {
      assert.ok(!(internal in runtime[path]), `${path}.${internal} is internal`);
    }
  }
});
