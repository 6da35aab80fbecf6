// What both drop-in Workers (official/ for 0.12.10, next/ for the next line) answer a drive
// with: each call's method, whether it succeeded, how long it took, and what it returned that
// the test checks (or the error).

/** A report and the `check(method, body)` that runs one call into it. */
export function recorder() {
  const report = [];
  const check = async (method, body) => {
    const started = Date.now();
    try {
      const detail = await body();
      report.push({ method, ok: true, ms: Date.now() - started, detail: detail ?? null });
    } catch (error) {
      report.push({ method, ok: false, ms: Date.now() - started, detail: String(error?.stack ?? error) });
    }
  };
  return { report, check };
}
