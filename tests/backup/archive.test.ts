/**
 * `palaver backup` on a populated folder, through the real CLI: secrets stay
 * out unless asked for, and verify / restore refuse a changed, missing or
 * extra file and unsafe paths, naming the file.
 */
import { mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tar from "tar";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../helpers/cli.js";

const API_KEY = "sk-very-secret-key-1234";
const BOT_TOKEN = "123:telegram-secret-token";
const ENV_SECRET = "env-secret-value-5678";
const WEB_TOKEN = "web-token-secret-9012";

let dir: string;
let home: string;
let configPath: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-backup-archive-"));
  home = join(dir, "home");
  configPath = join(home, "config.json");
  await mkdir(join(home, "workspace", "sessions"), { recursive: true });
  await mkdir(join(home, "workspace", "memory"), { recursive: true });
  await mkdir(join(home, "web"), { recursive: true });
  await mkdir(join(home, "memory"), { recursive: true });
  await mkdir(join(home, "cron"), { recursive: true });
  await writeFile(join(home, "cron", "jobs.json"), '{"version":1,"jobs":[]}\n');
  const config = {
    agents: { defaults: { workspace: join(home, "workspace"), provider: "custom", model: "m" } },
    providers: { custom: { apiKey: API_KEY, apiBase: "http://127.0.0.1:9/v1" } },
    channels: { telegram: { enabled: false, token: BOT_TOKEN } },
  };
  await writeFile(configPath, JSON.stringify(config));
  await writeFile(join(home, ".env"), `PALAVER_X=${ENV_SECRET}\n`);
  await writeFile(join(home, "web", "token"), WEB_TOKEN);
  await writeFile(join(home, "memory", "index.sqlite"), "an index");
  await writeFile(join(home, "gateway.lock"), '{"pid":1}');
  await writeFile(join(home, "workspace", "sessions", "gateway.lock"), '{"pid":1}');
  await writeFile(join(home, "workspace", "memory", "MEMORY.md"), "# Memory\n");
  // A line still being appended (no newline yet) is not part of the backup.
  await writeFile(join(home, "workspace", "sessions", "telegram_1.jsonl"), '{"role":"user"}\n{"role":"assi');
});
afterEach(() => rm(dir, { recursive: true, force: true }));

function palaver(args: string[]) {
  return runCli(args, { cwd: dir, env: { HOME: dir }, timeoutMs: 60_000 });
}

async function create(out: string, ...extra: string[]): Promise<void> {
  const result = await palaver(["backup", "create", "--config", configPath, "--out", out, ...extra]);
  expect(result.code, result.stderr).toBe(0);
}

/** Every entry of an archive: path → content. */
async function entries(file: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  await tar.list({
    file,
    onReadEntry: (entry) => {
      const chunks: Buffer[] = [];
      entry.on("data", (c: Buffer) => chunks.push(c));
      entry.on("end", () => out.set(entry.path, Buffer.concat(chunks).toString("utf8")));
    },
  });
  return out;
}

/** Extracts `file`, lets `edit` change the tree, and packs it again as `out`. */
async function repack(file: string, out: string, edit: (root: string) => Promise<void>): Promise<void> {
  const root = await mkdtemp(join(dir, "repack-"));
  await tar.extract({ file, cwd: root });
  await edit(root);
  await tar.create({ gzip: true, file: out, cwd: root, preservePaths: true }, [
    "manifest.json",
    "config",
    "workspace",
    "state",
  ]);
}

describe("backup create", { timeout: 60_000 }, () => {
  it("leaves secrets, .env and the web token out unless --include-secrets, and lists them", async () => {
    const plain = join(dir, "plain.tar.gz");
    await create(plain);
    const files = await entries(plain);
    const all = [...files.values()].join("\n");
    for (const secret of [API_KEY, BOT_TOKEN, ENV_SECRET, WEB_TOKEN]) expect(all).not.toContain(secret);
    expect(files.has("config/.env")).toBe(false);
    expect(files.has("state/web/token")).toBe(false);
    const manifest = JSON.parse(files.get("manifest.json")!) as { secretsRemoved: string[] };
    expect(manifest.secretsRemoved).toEqual(
      expect.arrayContaining(["providers.custom.apiKey", "channels.telegram.token"]),
    );
    // Never archived: the lock, the rebuilt memory index; a half-written JSONL line.
    expect(files.has("state/gateway.lock")).toBe(false);
    expect(files.has("workspace/sessions/gateway.lock")).toBe(false);
    expect(files.has("state/memory/index.sqlite")).toBe(false);
    expect(files.get("workspace/sessions/telegram_1.jsonl")).toBe('{"role":"user"}\n');
    // The workspace inside the state folder is archived once, as workspace/.
    expect([...files.keys()].some((p) => p.startsWith("state/workspace"))).toBe(false);

    const full = join(dir, "full.tar.gz");
    await create(full, "--include-secrets");
    const withSecrets = await entries(full);
    expect(withSecrets.get("config/config.json")).toContain(API_KEY);
    expect(withSecrets.get("config/.env")).toContain(ENV_SECRET);
    expect(withSecrets.get("state/web/token")).toBe(WEB_TOKEN);
  });
});

describe("backup verify", { timeout: 60_000 }, () => {
  let good: string;
  beforeEach(async () => {
    good = join(dir, "good.tar.gz");
    await create(good);
    expect((await palaver(["backup", "verify", good])).code).toBe(0);
  });

  it("fails with exit 1 naming a changed file", async () => {
    const bad = join(dir, "changed.tar.gz");
    await repack(good, bad, (root) =>
      writeFile(join(root, "workspace", "memory", "MEMORY.md"), "# Memorx\n"),
    );
    const result = await palaver(["backup", "verify", bad]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("workspace/memory/MEMORY.md: checksum differs");
  });

  it("fails naming a missing file and an extra one", async () => {
    const bad = join(dir, "missing.tar.gz");
    await repack(good, bad, async (root) => {
      await rm(join(root, "workspace", "memory", "MEMORY.md"));
      await writeFile(join(root, "state", "planted.json"), "{}");
    });
    const result = await palaver(["backup", "verify", bad]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("workspace/memory/MEMORY.md: missing from the archive");
    expect(result.stderr).toContain("state/planted.json: in the archive but not in the manifest");
  });

  it("fails on a changed byte of the archive itself", async () => {
    const bytes = await readFile(good);
    bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
    const bad = join(dir, "flipped.tar.gz");
    await writeFile(bad, bytes);
    const result = await palaver(["backup", "verify", bad]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("failed verification");
  });

  it("refuses an entry with a .. path, and restore writes nothing", async () => {
    // Rewrite the entry's path to climb out of the folder it is restored into.
    const evil = join(dir, "evil.tar.gz");
    const root = await mkdtemp(join(dir, "evil-"));
    await tar.extract({ file: good, cwd: root });
    await mkdir(join(root, "sub"));
    await writeFile(join(root, "escaped"), "planted");
    await tar.create({ gzip: true, file: evil, cwd: join(root, "sub"), preservePaths: true }, [
      "../manifest.json",
      "../escaped",
    ]);
    const verified = await palaver(["backup", "verify", evil]);
    expect(verified.code).toBe(1);
    expect(verified.stderr).toContain("../escaped: unsafe path");
    const to = join(dir, "target", "inner");
    const restored = await palaver(["backup", "restore", evil, "--to", to]);
    expect(restored.code).toBe(1);
    await expect(readFile(join(dir, "target", "escaped"))).rejects.toThrow();
  });
});

describe("backup restore over the current install", { timeout: 60_000 }, () => {
  it("lists what it replaces, needs --yes without a terminal, then puts the backed-up files back", async () => {
    const archive = join(dir, "now.tar.gz");
    await create(archive, "--include-secrets");
    const memory = join(home, "workspace", "memory", "MEMORY.md");
    await writeFile(memory, "# Memory\n- changed after the backup\n");
    // The fixture's lock names pid 1, a live process: the restore takes it for a running gateway.
    const locked = await palaver(["backup", "restore", archive, "--config", configPath, "--yes"]);
    expect(locked.code).toBe(1);
    expect(locked.stderr).toContain("a gateway (pid 1) runs on");
    await rm(join(home, "gateway.lock"));

    const unconfirmed = await palaver(["backup", "restore", archive, "--config", configPath]);
    expect(unconfirmed.code).toBe(1);
    expect(unconfirmed.stdout).toContain(memory);
    expect(unconfirmed.stderr).toContain("add --yes");
    expect(await readFile(memory, "utf8")).toContain("changed after the backup");

    const confirmed = await palaver(["backup", "restore", archive, "--config", configPath, "--yes"]);
    expect(confirmed.code, confirmed.stderr).toBe(0);
    expect(await readFile(memory, "utf8")).toBe("# Memory\n");
    expect(await readFile(configPath, "utf8")).toContain(API_KEY);
    // The memory index is rebuilt from the restored workspace, not kept from before.
    await expect(readFile(join(home, "memory", "index.sqlite"))).rejects.toThrow();
  });
});
