// What both drop-in Workers (official/ for 0.12.10, next/ for the next line) share: the
// report a drive answers (each call's method, whether it succeeded, how long it took, and
// what it returned that the test checks, or the error) and the calls both lines make alike.

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

/**
 * A Bun server on port 8080 (as the SDK's own workflows start one; the image has Bun): `/`
 * answers `ok`, any other path the file of that name below its working directory.
 */
export const FILE_SERVER =
  "Bun.serve({ port: 8080, fetch: (r) => { const p = new URL(r.url).pathname; " +
  "return p === '/' ? new Response('ok') : new Response(Bun.file('.' + p)); } })";

/** A local-bucket backup of a directory restored over an edit: answers the file kept. */
export async function backupRoundTrip(sandbox) {
  await sandbox.writeFile('/workspace/backed/keep.txt', 'kept\n');
  const backup = await sandbox.createBackup({ dir: '/workspace/backed', localBucket: true });
  await sandbox.writeFile('/workspace/backed/keep.txt', 'changed\n');
  await sandbox.restoreBackup(backup);
  return (await sandbox.readFile('/workspace/backed/keep.txt')).content;
}
