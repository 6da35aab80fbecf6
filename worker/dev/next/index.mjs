// The SDK's next line (@cloudflare/sandbox 0.13.0-next, pinned in ../package.json as
// @cloudflare/sandbox-next), its own Worker and Durable Object, unchanged, in front of fsd's
// image: the same image the 0.12.10 drop-in (../official) runs. The object is subclassed
// only to attach the interpreter extension, the way the package's extensions are attached.
// Run it with `scripts/dev-cloudflare run next --port N` after `scripts/dev-cloudflare build`.
//
// Besides preview URLs (proxyToSandbox), it serves what the next-line test drives:
//   POST /drive?id=ID&hostname=H   runs the SDK's calls, one after another, against sandbox ID
//        and answers [{method, ok, ms, detail}] (detail: what the call returned that the test
//        checks, or the error)
//   GET  /terminal?id=ID           a terminal made through the object, connected through
//        terminal.connect(request) (/ws/terminal in the container)
//   POST /start?id=ID&sleepAfter=S&seconds=N  a process of N seconds in a sandbox that sleeps
//        after S of inactivity (processes.hasActive keeps it awake meanwhile)
//   GET  /exec?id=ID               one exec of `true` to its exit, timed inside the Worker
//   GET  /ping?id=ID               a call the object answers itself (its configuration)
import { getSandbox, proxyToSandbox, Sandbox as NextSandbox } from '@cloudflare/sandbox-next';
import { withInterpreter } from '@cloudflare/sandbox-next/interpreter';
import { FILE_SERVER, backupRoundTrip, recorder } from '../report.mjs';

export class Sandbox extends NextSandbox {
  interpreter = withInterpreter(this);
}

export default {
  async fetch(request, env) {
    const preview = await proxyToSandbox(request, env);
    if (preview) return preview;
    const url = new URL(request.url);
    const id = url.searchParams.get('id') ?? 'next';
    const sleepAfter = url.searchParams.get('sleepAfter') ?? undefined;
    const sandbox = getSandbox(env.Sandbox, id, sleepAfter ? { sleepAfter } : undefined);
    switch (url.pathname) {
      case '/drive':
        return Response.json(await drive(sandbox, url.searchParams.get('hostname') ?? ''));
      case '/terminal': {
        const terminal = await sandbox.createTerminal({ command: ['/bin/sh'], cols: 80, rows: 24 });
        return terminal.connect(request);
      }
      case '/start': {
        const seconds = url.searchParams.get('seconds') ?? '8';
        const process = await sandbox.exec(['sleep', seconds]);
        // The object's id names its container (workerd-…-Sandbox-<id>).
        const object = env.Sandbox.idFromName(id).toString();
        return Response.json({ id: process.id, pid: process.pid, object });
      }
      case '/exec': {
        const started = performance.now();
        const process = await sandbox.exec(['true']);
        const exit = await process.waitForExit();
        return Response.json({ exit, ms: performance.now() - started });
      }
      case '/ping': {
        const started = performance.now();
        await sandbox.setSleepAfter('10m');
        return Response.json({ ms: performance.now() - started });
      }
      default:
        return new Response('not found', { status: 404 });
    }
  },
};

const text = (bytes) => new TextDecoder().decode(bytes);
const fromBase64Url = (value) => atob(value.replace(/-/g, '+').replace(/_/g, '/'));

/** Reads a stream of event objects until `stop(event)` or its end. */
async function readEvents(stream, stop = () => false) {
  const reader = stream.getReader();
  const seen = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      seen.push(value);
      if (stop(value)) break;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return seen;
}

/** What a process's log events say: its output as text by stream, and how it ended. */
function summarize(events) {
  const out = { stdout: '', stderr: '', exit: null };
  for (const event of events) {
    if (event.type === 'stdout' || event.type === 'stderr') out[event.type] += text(event.data);
    if (event.type === 'terminal') out.exit = event.exit ?? event.error;
  }
  return out;
}

async function drive(sandbox, hostname) {
  const { report, check } = recorder();
  const dir = '/workspace/next';

  await check('exec', async () => {
    const process = await sandbox.exec(['sh', '-c', "printf 'a\\nb\\n'; echo err >&2; exit 3"]);
    const output = await process.output({ encoding: 'utf8' });
    return { stdout: output.stdout, stderr: output.stderr, exitCode: output.exitCode, timedOut: output.timedOut };
  });
  await check('execEnvCwd', async () => {
    await sandbox.mkdir(dir, { recursive: true });
    const process = await sandbox.exec(['sh', '-c', 'echo "$GREETING $(pwd)"'], { cwd: dir, env: { GREETING: 'hi' } });
    return (await process.output({ encoding: 'utf8' })).stdout;
  });
  await check('logs', async () => {
    const process = await sandbox.exec(['sh', '-c', 'echo one; sleep 0.3; echo two >&2; sleep 0.3; exit 4']);
    const all = await readEvents(await process.logs({ replay: true, follow: true }), (e) => e.type === 'terminal');
    const first = all.find((e) => e.type === 'stdout');
    // From the first line's cursor, the rest only.
    const rest = await readEvents(await process.logs({ since: first.cursor, replay: true, follow: false }));
    // A cursor is base64url of `v1.<base64url of the process id>.<sequence>`.
    const [version, id, seq] = fromBase64Url(first.cursor).split('.');
    const cursor = version === 'v1' && fromBase64Url(id) === process.id && /^\d+$/.test(seq);
    return { all: summarize(all), rest: summarize(rest), cursor };
  });
  await check('waitForLog', async () => {
    const process = await sandbox.exec(['sh', '-c', 'sleep 0.2; echo ready-42; sleep 60']);
    const found = await process.waitForLog(/ready-(\d+)/, { timeout: 20000 });
    await process.kill(15);
    const exit = await process.waitForExit({ timeout: 20000 });
    return { line: found.text.trim(), stream: found.stream, exit };
  });
  await check('kill', async () => {
    const process = await sandbox.exec(['sleep', '600']);
    await process.kill(9);
    const exit = await process.waitForExit({ timeout: 20000 });
    const status = await process.status();
    return { exit, state: status.state };
  });
  await check('timeout', async () => {
    const process = await sandbox.exec(['sleep', '30'], { timeout: 500 });
    return await process.waitForExit({ timeout: 20000 });
  });
  await check('spawnFailed', async () => {
    try {
      await sandbox.exec(['/no/such/program']);
      return 'started';
    } catch (error) {
      return error?.name ?? String(error);
    }
  });
  await check('listProcesses', async () => {
    const listed = await sandbox.listProcesses();
    return listed.length > 0 && listed.every((p) => typeof p.id === 'string' && typeof p.state === 'string');
  });
  await check('files', async () => {
    await sandbox.mkdir(`${dir}/sub`, { recursive: true });
    await sandbox.writeFile(`${dir}/sub/hello.txt`, 'hello\n');
    const read = (await sandbox.readFile(`${dir}/sub/hello.txt`)).content;
    const exists = (await sandbox.exists(`${dir}/sub/hello.txt`)).exists;
    await sandbox.renameFile(`${dir}/sub/hello.txt`, `${dir}/sub/renamed.txt`);
    await sandbox.writeFile(`${dir}/sub/gone.txt`, 'x');
    await sandbox.deleteFile(`${dir}/sub/gone.txt`);
    const listed = (await sandbox.listFiles(dir, { recursive: true })).files.map((f) => f.relativePath).sort();
    return { read, exists, listed };
  });
  await check('waitForPort', async () => {
    const process = await sandbox.exec(['bun', '-e', FILE_SERVER], { cwd: dir });
    await process.waitForPort(8080, { mode: 'http', path: '/', timeout: 30000 });
    return process.id.length > 0;
  });
  await check('exposePort', async () => (await sandbox.exposePort(8080, { hostname })).url);
  await check('tunnel', async () => {
    // A quick tunnel to the server above: cloudflared in the container (the stand-in on
    // these machines), its URL told back through ensureTunnelRun.
    const tunnel = await sandbox.tunnels.get(8080);
    const again = await sandbox.tunnels.get(8080);
    const listed = (await sandbox.tunnels.list()).map((t) => t.port);
    await sandbox.tunnels.destroy(8080);
    const after = (await sandbox.tunnels.list()).length;
    return {
      url: /^https:\/\/[a-z0-9-]+\.trycloudflare\.com\/?$/.test(tunnel.url),
      same: again.url === tunnel.url,
      listed,
      after,
    };
  });
  await check('watch', async () => {
    const stream = await sandbox.watch(dir, { recursive: true });
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    let seen = '';
    const read = async (needle) => {
      const deadline = Date.now() + 15000;
      while (!seen.includes(needle) && Date.now() < deadline) {
        const { value, done } = await reader.read();
        if (done) break;
        seen += typeof value === 'string' ? value : decoder.decode(value, { stream: true });
      }
    };
    await read('"type":"watching"');
    await sandbox.writeFile(`${dir}/watched.txt`, 'x');
    await read('watched.txt');
    await reader.cancel();
    return seen.includes('watched.txt');
  });
  await check('checkChanges', async () => {
    const first = await sandbox.checkChanges(dir, { recursive: true });
    await sandbox.writeFile(`${dir}/changed.txt`, 'x');
    const second = await sandbox.checkChanges(dir, { recursive: true, since: first.version });
    return { first: first.status, second: second.status };
  });
  await check('terminal', async () => {
    const terminal = await sandbox.createTerminal({ command: ['/bin/sh'], cols: 100, rows: 30 });
    await terminal.write(new TextEncoder().encode('stty size; echo t-$((40+2)); exit 7\n'));
    const exit = await terminal.waitForExit({ timeout: 20000 });
    const events = await readEvents(await terminal.output({ replay: true, follow: false }));
    const screen = events.filter((e) => e.type === 'data').map((e) => text(e.data)).join('');
    return { exit, size: screen.includes('30 100'), echoed: screen.includes('t-42') };
  });
  await check('runCode', async () => {
    const result = await sandbox.interpreter.runCode('1 + 41', { language: 'python' });
    return result.results.map((r) => r.text);
  });
  await check('workspaceArchive', async () => {
    await sandbox.writeFile('/workspace/archived/keep.txt', 'kept\n');
    await sandbox.writeFile('/workspace/archived/skip.log', 'skipped\n');
    const archivePath = await sandbox.createWorkspaceArchive({ root: '/workspace', excludes: ['archived/skip.log'] });
    await sandbox.extractWorkspaceArchive({ archivePath, root: '/tmp/next-restored' });
    await sandbox.cleanupWorkspaceArchive(archivePath);
    const kept = (await sandbox.readFile('/tmp/next-restored/archived/keep.txt')).content;
    const skipped = (await sandbox.exists('/tmp/next-restored/archived/skip.log')).exists;
    const archiveLeft = (await sandbox.exists(archivePath)).exists;
    return { kept, skipped, archiveLeft };
  });
  await check('createBackup', () => backupRoundTrip(sandbox));
  return report;
}
