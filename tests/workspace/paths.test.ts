import { mkdir, symlink, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ToolError } from "../../src/util/errors.js";
import {
  expandPath,
  isInside,
  realPathLoose,
  resolveToolPath,
} from "../../src/workspace/paths.js";
import { TempDirs } from "../agent/tools/helpers.js";

describe("workspace paths", () => {
  const temps = new TempDirs();
  let root: string;
  let ws: string;
  let outside: string;

  beforeEach(async () => {
    root = await temps.make();
    ws = join(root, "ws");
    outside = join(root, "outside");
    await mkdir(join(ws, "sub"), { recursive: true });
    await mkdir(outside);
    await writeFile(join(outside, "secret.txt"), "secret");
  });
  afterEach(() => temps.cleanup());

  it("resolves relative paths against the workspace and expands ~", async () => {
    expect(await resolveToolPath("sub/a.txt", { workspace: ws, restrict: true })).toBe(join(ws, "sub/a.txt"));
    expect(expandPath("~", ws)).toBe(homedir());
    expect(expandPath("~/x/y", ws)).toBe(join(homedir(), "x/y"));
    expect(expandPath("/abs/../abs/z", ws)).toBe("/abs/z");
  });

  it("allows paths inside the workspace, including ones that do not exist yet", async () => {
    const policy = { workspace: ws, restrict: true };
    expect(await resolveToolPath(".", policy)).toBe(ws);
    expect(await resolveToolPath("new/deep/file.txt", policy)).toBe(join(ws, "new/deep/file.txt"));
    expect(await resolveToolPath("sub/../sub/x", policy)).toBe(join(ws, "sub/x"));
    expect(await resolveToolPath(join(ws, "sub"), policy)).toBe(join(ws, "sub"));
  });

  it("refuses .. traversal and absolute paths outside the workspace when restricted", async () => {
    const policy = { workspace: ws, restrict: true };
    await expect(resolveToolPath("../outside/secret.txt", policy)).rejects.toThrow(/outside the workspace/);
    await expect(resolveToolPath("/etc/passwd", policy)).rejects.toBeInstanceOf(ToolError);
    await expect(resolveToolPath("sub/../../x", policy)).rejects.toThrow(/outside the workspace/);
    // A sibling whose name merely starts with the workspace's is outside too.
    await mkdir(`${ws}2`);
    await expect(resolveToolPath(`${ws}2/f`, policy)).rejects.toThrow(/outside the workspace/);
  });

  it("refuses symlink escapes, also through dangling links and for files that do not exist yet", async () => {
    const policy = { workspace: ws, restrict: true };
    await symlink(outside, join(ws, "link"));
    await symlink(join(outside, "not-yet.txt"), join(ws, "dangling"));
    await expect(resolveToolPath("link/secret.txt", policy)).rejects.toThrow(/resolves to .*outside/);
    await expect(resolveToolPath("link/new/file.txt", policy)).rejects.toThrow(/outside the workspace/);
    await expect(resolveToolPath("dangling", policy)).rejects.toThrow(/outside the workspace/);
  });

  it("allows everything when not restricted", async () => {
    const policy = { workspace: ws, restrict: false };
    expect(await resolveToolPath("../outside/secret.txt", policy)).toBe(join(outside, "secret.txt"));
    expect(await resolveToolPath("/etc/passwd", policy)).toBe("/etc/passwd");
  });

  it("allows a symlink that stays inside the workspace", async () => {
    await symlink(join(ws, "sub"), join(ws, "inner"));
    expect(await resolveToolPath("inner/x", { workspace: ws, restrict: true })).toBe(join(ws, "inner/x"));
  });

  it("realPathLoose follows links and keeps the missing rest", async () => {
    await symlink(outside, join(ws, "link"));
    expect(await realPathLoose(join(ws, "link/a/b"))).toBe(join(outside, "a/b"));
    expect(await realPathLoose(join(ws, "x/y"))).toBe(join(ws, "x/y"));
  });

  it("isInside compares whole path components", () => {
    expect(isInside("/a/b", "/a")).toBe(true);
    expect(isInside("/a", "/a")).toBe(true);
    expect(isInside("/ab", "/a")).toBe(false);
    expect(isInside("/x", "/")).toBe(true);
  });

  it("rejects empty paths", async () => {
    await expect(resolveToolPath("  ", { workspace: ws, restrict: false })).rejects.toThrow(/empty/);
  });
});
