/** Time as the model reads it. Pure. */

const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/** "2026-11-22 10:00 (Sunday) UTC+00:00" in the process's local zone. */
export function formatLocalTime(d: Date): string {
  const p = (n: number): string => String(n).padStart(2, "0");
  const offset = -d.getTimezoneOffset();
  const sign = offset >= 0 ? "+" : "-";
  const abs = Math.abs(offset);
  return (
    `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())} ` +
    `(${WEEKDAYS[d.getDay()]}) UTC${sign}${p(Math.floor(abs / 60))}:${p(abs % 60)}`
  );
}
