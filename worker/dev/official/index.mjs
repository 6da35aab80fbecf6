// The official @cloudflare/sandbox Worker and Durable Object, unchanged, in front of fsd's
// image: what a user of the SDK runs after changing only the image. Run it with
// `scripts/dev-cloudflare official --port N`.
//
// Besides preview URLs (proxyToSandbox), it serves what the drop-in test drives:
//   POST /drive?id=ID&transport=http|websocket|rpc&hostname=H  runs the SDK's calls, one after
//        another, against sandbox ID and answers [{method, ok, detail}] (detail: what the
//        call returned that the test checks, or the error)
//   GET  /terminal?id=ID&transport=T                        sandbox.terminal(request)
//   POST /destroy?id=ID                                     sandbox.destroy()
import { getSandbox, proxyToSandbox } from '@cloudflare/sandbox';
import { FILE_SERVER, backupRoundTrip, recorder } from '../report.mjs';

export { Sandbox } from '@cloudflare/sandbox';

export default {
  async fetch(request, env) {
    const preview = await proxyToSandbox(request, env);
    if (preview) return preview;
    const url = new URL(request.url);
    const id = url.searchParams.get('id') ?? 'official';
    const transport = url.searchParams.get('transport') ?? 'http';
    const sandbox = getSandbox(env.Sandbox, id, { transport });
    switch (url.pathname) {
      case '/drive':
        return Response.json(await drive(sandbox, url.searchParams.get('hostname') ?? ''));
      case '/terminal':
        return sandbox.terminal(request);
      case '/destroy':
        await sandbox.destroy();
        return Response.json({ success: true });
      default:
        return new Response('not found', { status: 404 });
    }
  },
};

/** Reads an SSE stream to its end and returns its events' data, parsed. */
async function events(stream) {
  const text = await new Response(stream).text();
  return text
    .split('\n\n')
    .map((block) => block.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trim()).join(''))
    .filter((data) => data.length > 0)
    .map((data) => JSON.parse(data));
}

async function drive(sandbox, hostname) {
  const { report, check } = recorder();
  const dir = '/workspace/official';

  await check('exec', async () => {
    // `exit` in the command itself would end the session's shell (the reference's rule).
    const result = await sandbox.exec("printf 'a\\nb\\n'; echo err >&2; sh -c 'exit 3'");
    return { stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode };
  });
  await check('execStream', async () => {
    const stream = await sandbox.execStream('echo one; echo two');
    const seen = await events(stream);
    return {
      stdout: seen.filter((e) => e.type === 'stdout').map((e) => e.data).join(''),
      exitCode: seen.find((e) => e.type === 'complete')?.exitCode,
    };
  });
  await check('mkdir', async () => (await sandbox.mkdir(`${dir}/sub`, { recursive: true })).success);
  await check('writeFile', async () => (await sandbox.writeFile(`${dir}/sub/hello.txt`, 'hello\n')).success);
  await check('readFile', async () => (await sandbox.readFile(`${dir}/sub/hello.txt`)).content);
  await check('exists', async () => (await sandbox.exists(`${dir}/sub/hello.txt`)).exists);
  await check('listFiles', async () =>
    (await sandbox.listFiles(dir, { recursive: true })).files.map((f) => f.relativePath).sort(),
  );
  await check('startProcess', async () => {
    const process = await sandbox.startProcess(`bun -e "${FILE_SERVER}"`, { processId: 'web', cwd: dir });
    await process.waitForPort(8080, { timeout: 30000 });
    return process.id;
  });
  await check('getProcessLogs', async () => {
    const logs = await sandbox.getProcessLogs('web');
    return typeof logs.stdout === 'string' && typeof logs.stderr === 'string';
  });
  await check('exposePort', async () => (await sandbox.exposePort(8080, { hostname })).url);
  await check('killProcess', async () => {
    const sleeper = await sandbox.startProcess('sleep 600', { processId: 'sleeper' });
    await sandbox.killProcess(sleeper.id);
    const deadline = Date.now() + 10000;
    while (Date.now() < deadline) {
      const status = (await sandbox.getProcess(sleeper.id))?.status;
      if (status && status !== 'running' && status !== 'starting') return status;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('the killed process is still running');
  });
  await check('watch', async () => {
    const stream = await sandbox.watch(dir, { recursive: true });
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const seen = (needle) => text.includes(needle);
    const read = async (until) => {
      const deadline = Date.now() + 10000;
      while (!until() && Date.now() < deadline) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    };
    await read(() => seen('"type":"watching"'));
    await sandbox.writeFile(`${dir}/watched.txt`, 'x');
    await read(() => seen('watched.txt'));
    await reader.cancel();
    return seen('watched.txt');
  });
  await check('createSession', async () => {
    const session = await sandbox.createSession({ id: 'custom', env: { GREETING: 'hi' }, cwd: dir });
    const result = await session.exec('echo "$GREETING $(pwd)"');
    return result.stdout;
  });
  await check('runCode', async () => {
    const context = await sandbox.createCodeContext({ language: 'python' });
    const result = await sandbox.runCode('1 + 41', { context });
    return result.results.map((r) => r.text);
  });
  await check('gitCheckout', async () => {
    await sandbox.exec(
      `rm -rf /tmp/origin && git init -q -b main /tmp/origin && cd /tmp/origin && ` +
        `echo readme > README && git add README && ` +
        `git -c user.name=t -c user.email=t@t commit -q -m init`,
    );
    const result = await sandbox.gitCheckout('file:///tmp/origin', { targetDir: `${dir}/clone` });
    const read = await sandbox.readFile(`${dir}/clone/README`);
    return { success: result.success, readme: read.content };
  });
  await check('createBackup', () => backupRoundTrip(sandbox));
  return report;
}
