/** One line of `palaver doctor`: what was checked, how it went, and what to do about it. */
export type CheckStatus = "ok" | "warn" | "fail";

export interface CheckResult {
  name: string;
  status: CheckStatus;
  /** What was found, in words. */
  detail: string;
  /** What to do, in words; absent when nothing needs doing. */
  fix?: string;
}

export const ok = (name: string, detail: string): CheckResult => ({ name, status: "ok", detail });
export const warn = (name: string, detail: string, fix: string): CheckResult => ({
  name,
  status: "warn",
  detail,
  fix,
});
export const fail = (name: string, detail: string, fix: string): CheckResult => ({
  name,
  status: "fail",
  detail,
  fix,
});
