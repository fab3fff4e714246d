/**
 * Import rules checked by `npm run lint:imports` (dependency-cruiser). Type-only
 * imports count (`tsPreCompilationDeps`): a type that points up the layers ties
 * the code together as much as a value does, even if it vanishes at run time.
 * Root files count too: src/log.ts is a layer of its own (util/ never imports it).
 *
 * - no module cycles and no folder cycles (agent → mcp → agent). A folder's
 *   subfolders count as the folder: channels/registry.ts may list
 *   channels/telegram/, which uses channels/inbound.ts.
 * - the layers (docs/architecture.md, "Rules of the house") import only their
 *   own layer and the ones below (so agent/ never imports channels/ or daemon/:
 *   they implement the agent's interfaces); approvals/ uses agent/tools/ only
 *   through its contract (types.ts). Above the layers: the root files that
 *   assemble the parts (create-*.ts, gateway.ts), cli/ and main.ts.
 */

/** The bottom layers, lowest first; each may import its own and those below. */
const LAYERS = [
  ["util"],
  ["log.ts"],
  ["bus", "config", "workspace"],
  ["db"],
  ["llm"],
  ["sessions"],
  ["recall"],
  ["usage", "cron", "heartbeat"],
  ["agent"],
  ["mcp", "daemon", "cluster"],
  ["channels"],
  ["approvals", "pairing"],
  ["backup", "doctor"],
];

const modulesOf = (names) => `^src/(${names.map((n) => n.replace(".", "\\.")).join("|")})(/|$)`;
const allNames = (layers) => layers.flat();

/** Anything in src/ that is not in this layer or below it. */
const layerRules = LAYERS.map((layer, i) => ({
  name: `layer-${layer.join("-").replace(".ts", "")}`,
  severity: "error",
  comment: `${layer.join(", ")} may import only ${allNames(LAYERS.slice(0, i + 1)).join(", ")} (the layers in docs/architecture.md): move the shared part down.`,
  from: { path: modulesOf(layer) },
  to: { path: "^src/", pathNot: modulesOf(allNames(LAYERS.slice(0, i + 1))) },
}));

export default {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment:
        "Modules or folders that import each other cannot be read, tested or loaded lazily on their own: move the shared part down a layer.",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "no-folder-cycles",
      severity: "error",
      comment:
        "A top folder of src/ that imports one that imports it back: the layers have lost their order.",
      scope: "folder",
      from: { path: "^src/([^/]+)" },
      to: { circular: true, pathNot: "^src/$1(/|$)" },
    },
    ...layerRules,
    {
      name: "approvals-not-tool-internals",
      severity: "error",
      comment:
        "approvals/ sees the tools only through their contract (agent/tools/types.ts); what both need lives in workspace/ or util/.",
      from: { path: "^src/approvals/" },
      to: { path: "^src/agent/tools/", pathNot: "^src/agent/tools/types\\.ts$" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsConfig: { fileName: "tsconfig.json" },
    tsPreCompilationDeps: true,
    exclude: { path: "^(node_modules|dist)/" },
  },
};
