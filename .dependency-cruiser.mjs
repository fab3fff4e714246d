/**
 * Import rules checked by `npm run lint` (dependency-cruiser): no module cycles
 * and no folder cycles (agent → mcp → agent). A folder's subfolders count as
 * the folder: channels/registry.ts may list channels/telegram/, which uses
 * channels/inbound.ts. Type-only imports do not count (they vanish at run time).
 */
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
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsConfig: { fileName: "tsconfig.json" },
    exclude: { path: "^(node_modules|dist)/" },
  },
};
