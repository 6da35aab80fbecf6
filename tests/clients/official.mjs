// Drives a running fsd with the official @cloudflare/sandbox route clients and prints one
// JSON line per client method: {"method", "ok", "detail"}. Methods the reference serves
// only over RPC are expected to throw, as they do against the reference. The transport is
// HTTP, or the WebSocket transport (`/ws`) with FSD_CLIENT_TRANSPORT=websocket, over the
// global WebSocket (register.mjs supplies one from `ws` where Node has none).
//
// node --import ./register.mjs official.mjs BASE_URL WORKSPACE ARCHIVE_DIR
import http from 'node:http';

const { SandboxClient, parseSSEStream, collectFile } = await import('@cloudflare/sandbox');

const [baseUrl, workspace, archiveDir] = process.argv.slice(2);
const transportMode = process.env.FSD_CLIENT_TRANSPORT ?? 'http';
const wsUrl = `${baseUrl.replace(/^http/, 'ws')}/ws`;
const client = new SandboxClient({ baseUrl, retryTimeoutMs: 0, transportMode, wsUrl });
const sid = 'official';
const dir = `${workspace}/official`;

function report(method, ok, detail) {
  console.log(JSON.stringify({ method, ok, detail: String(detail ?? '') }));
}

async function check(method, body) {
  try {
    const detail = await body();
    report(method, true, detail);
  } catch (error) {
    report(method, false, error?.stack ?? error);
  }
}

function expect(condition, what) {
  if (!condition) throw new Error(what);
}

/// Reads SSE events from a stream until `done(event)` says so (or the stream ends); fails
/// with what it saw if that takes longer than `limit` ms, so a stream that never ends is
/// one failed call, not a script that hangs.
async function eventsUntil(stream, done, limit = 10000) {
  return readUntil(parseSSEStream(stream), done, limit);
}

async function readUntil(events, done, limit = 10000) {
  const seen = [];
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no end within ${limit} ms; saw ${JSON.stringify(seen)}`)),
      limit,
    );
  });
  const read = (async () => {
    for await (const event of events) {
      seen.push(event);
      if (done(event)) break;
    }
    return seen;
  })();
  try {
    return await Promise.race([read, late]);
  } finally {
    clearTimeout(timer);
    events.return?.().catch?.(() => {});
  }
}

async function rejects(body, code) {
  try {
    await body();
  } catch (error) {
    if (code && error?.code !== code && error?.errorResponse?.code !== code) {
      throw new Error(`expected ${code}, got ${error?.code}: ${error?.message}`);
    }
    return `rejected: ${error?.code ?? error?.message}`;
  }
  throw new Error('expected an error');
}

// ---- utils
await check('utils.ping', async () => {
  const message = await client.utils.ping();
  expect(message === 'healthy', `ping answered ${message}`);
  const used = client.utils.transport?.constructor?.name ?? client.transport?.constructor?.name;
  const wanted = transportMode === 'websocket' ? 'WebSocketTransport' : 'HttpTransport';
  expect(used === wanted, `the client used ${used}, not ${wanted}`);
  return message;
});
await check('utils.getVersion', async () => {
  const version = await client.utils.getVersion();
  expect(typeof version === 'string' && version !== 'unknown', `version ${version}`);
  return version;
});
await check('utils.createSession', async () => {
  const created = await client.utils.createSession({ id: sid, env: { FROM_SESSION: 'yes' }, cwd: workspace });
  expect(created.success === true, JSON.stringify(created));
  return created.id;
});
await check('utils.getCommands', () => rejects(() => client.utils.getCommands()));
await check('utils.listSessions', () => rejects(() => client.utils.listSessions()));

// ---- files
await check('files.mkdir', async () => {
  const made = await client.files.mkdir(`${dir}/nested/deeper`, sid, { recursive: true });
  expect(made.success && made.recursive === true, JSON.stringify(made));
});
await check('files.writeFile', async () => {
  const written = await client.files.writeFile(`${dir}/hello.txt`, 'hello\n', sid);
  expect(written.success, JSON.stringify(written));
  const binary = Buffer.from([0, 1, 2, 250, 255]).toString('base64');
  await client.files.writeFile(`${dir}/bytes.bin`, binary, sid, { encoding: 'base64' });
});
await check('files.readFile', async () => {
  const text = await client.files.readFile(`${dir}/hello.txt`, sid);
  expect(text.content === 'hello\n' && text.encoding === 'utf-8' && text.mimeType === 'text/plain', JSON.stringify(text));
  const binary = await client.files.readFile(`${dir}/bytes.bin`, sid, { encoding: 'base64' });
  expect(Buffer.from(binary.content, 'base64').equals(Buffer.from([0, 1, 2, 250, 255])), JSON.stringify(binary));
  await rejects(() => client.files.readFile(`${dir}/missing.txt`, sid), 'FILE_NOT_FOUND');
});
await check('files.readFileStream', async () => {
  const stream = await client.files.readFileStream(`${dir}/hello.txt`, sid);
  const { content, metadata } = await collectFile(stream);
  expect(content === 'hello\n' && metadata.mimeType === 'text/plain', JSON.stringify({ content, metadata }));
});
await check('files.exists', async () => {
  const yes = await client.files.exists(`${dir}/hello.txt`, sid);
  const no = await client.files.exists(`${dir}/nope`, sid);
  expect(yes.exists === true && no.exists === false, JSON.stringify({ yes, no }));
});
await check('files.renameFile', async () => {
  const renamed = await client.files.renameFile(`${dir}/hello.txt`, `${dir}/renamed.txt`, sid);
  expect(renamed.success, JSON.stringify(renamed));
});
await check('files.moveFile', async () => {
  const moved = await client.files.moveFile(`${dir}/renamed.txt`, `${dir}/nested/moved.txt`, sid);
  expect(moved.success, JSON.stringify(moved));
});
await check('files.listFiles', async () => {
  const listed = await client.files.listFiles(dir, sid, { recursive: true });
  const names = listed.files.map((f) => f.relativePath).sort();
  expect(JSON.stringify(names) === JSON.stringify(['bytes.bin', 'nested', 'nested/deeper', 'nested/moved.txt']), names);
  return names.join(' ');
});
await check('files.deleteFile', async () => {
  await client.files.deleteFile(`${dir}/bytes.bin`, sid);
  await rejects(() => client.files.deleteFile(`${dir}/nested`, sid), 'IS_DIRECTORY');
});
await check('files.writeFileStream', () =>
  rejects(() => client.files.writeFileStream(`${dir}/s.txt`, new Blob(['x']).stream(), sid)),
);

// ---- commands
await check('commands.execute', async () => {
  const result = await client.commands.execute('cd nested && echo $FROM_SESSION; pwd', sid, { cwd: dir });
  expect(result.exitCode === 0 && result.stdout === `yes\n${dir}/nested\n`, JSON.stringify(result));
  const timedOut = await rejects(() => client.commands.execute('sleep 5', sid, { timeoutMs: 200 }));
  const again = await client.commands.execute('echo still here', sid);
  expect(again.stdout === 'still here\n', JSON.stringify(again));
  return timedOut;
});
await check('commands.executeStream', async () => {
  const stream = await client.commands.executeStream('echo one; echo two >&2; exit 3', sid);
  const events = await eventsUntil(stream, (e) => e.type === 'complete');
  const types = events.map((e) => e.type);
  expect(types[0] === 'start' && types.at(-1) === 'complete' && events.at(-1).exitCode === 3, JSON.stringify(events));
  const out = events.filter((e) => e.type === 'stdout').map((e) => e.data).join('');
  expect(out === 'one\n', out);
});

// ---- processes
let pid;
await check('processes.startProcess', async () => {
  const started = await client.processes.startProcess('echo started; sleep 30', sid, { processId: 'official-proc' });
  expect(started.processId === 'official-proc' && typeof started.pid === 'number', JSON.stringify(started));
  pid = started.pid;
  // A pid from the API is valid in every other command.
  const seen = await client.commands.execute(`kill -0 ${pid} && echo visible`, '__DISABLE_SESSION__');
  expect(seen.stdout === 'visible\n', JSON.stringify(seen));
  return pid;
});
await check('processes.listProcesses', async () => {
  const listed = await client.processes.listProcesses();
  expect(listed.processes.some((p) => p.id === 'official-proc' && p.status === 'running'), JSON.stringify(listed));
});
await check('processes.getProcess', async () => {
  const got = await client.processes.getProcess('official-proc');
  expect(got.process.pid === pid, JSON.stringify(got));
  await rejects(() => client.processes.getProcess('no-such-process'), 'PROCESS_NOT_FOUND');
});
await check('processes.getProcessLogs', async () => {
  for (let i = 0; i < 100; i++) {
    const logs = await client.processes.getProcessLogs('official-proc');
    if (logs.stdout === 'started\n') return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('no output');
});
await check('processes.streamProcessLogs', async () => {
  const stream = await client.processes.streamProcessLogs('official-proc');
  const events = await eventsUntil(stream, (e) => e.type === 'stdout');
  expect(events[0].type === 'process_info' && events.at(-1).data === 'started\n', JSON.stringify(events));
});
await check('processes.killProcess', async () => {
  await client.processes.killProcess('official-proc');
  const got = await client.processes.getProcess('official-proc');
  expect(got.process.status === 'killed' && got.process.exitCode === 143, JSON.stringify(got));
  const gone = await client.commands.execute(`kill -0 ${pid} 2>/dev/null || echo gone`, sid);
  expect(gone.stdout === 'gone\n', JSON.stringify(gone));
});
await check('processes.killAllProcesses', async () => {
  await client.processes.startProcess('sleep 31', sid, { processId: 'official-a' });
  await client.processes.startProcess('sleep 32', sid, { processId: 'official-b' });
  const killed = await client.processes.killAllProcesses();
  expect(killed.cleanedCount === 2, JSON.stringify(killed));
});

// ---- ports
await check('ports.watchPort', async () => {
  const server = http.createServer((_, res) => res.end('ok'));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = server.address().port;
  try {
    const stream = await client.ports.watchPort({ port, mode: 'http', path: '/', interval: 100 });
    const events = await eventsUntil(stream, (e) => e.type !== 'watching');
    expect(events.at(-1).type === 'ready' && events.at(-1).statusCode === 200, JSON.stringify(events));
  } finally {
    server.close();
  }
});

// ---- watch
await check('watch.watch', async () => {
  const stream = await client.watch.watch({ path: dir, recursive: true });
  const reader = parseSSEStream(stream);
  const first = await reader.next();
  expect(first.value?.type === 'watching', JSON.stringify(first.value));
  await client.files.writeFile(`${dir}/watched.txt`, 'w', sid);
  const seen = await readUntil(reader, (event) => {
    expect(!String(event.path ?? '').includes('.fsd-'), `a temp file in the stream: ${JSON.stringify(event)}`);
    return event.eventType === 'create' && event.path === `${dir}/watched.txt`;
  });
  return seen.map((e) => `${e.eventType} ${e.path}`).join(', ');
});
await check('watch.checkChanges', async () => {
  const base = await client.watch.checkChanges({ path: dir });
  expect(base.status === 'unchanged', JSON.stringify(base));
  await client.files.writeFile(`${dir}/checked.txt`, 'c', sid);
  let changed;
  for (let i = 0; i < 50; i++) {
    changed = await client.watch.checkChanges({ path: dir, since: base.version });
    if (changed.status === 'changed') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(changed.status === 'changed' && changed.version !== base.version, JSON.stringify(changed));
  const same = await client.watch.checkChanges({ path: dir, since: changed.version });
  expect(same.status === 'unchanged' && same.version === changed.version, JSON.stringify(same));
});

// ---- backup
const archive = `${archiveDir}/official-${process.pid}.sqsh`;
await check('backup.createArchive', async () => {
  const created = await client.backup.createArchive(`${dir}/nested`, archive, sid, { excludes: [] });
  expect(created.success && created.sizeBytes > 0, JSON.stringify(created));
  return created.sizeBytes;
});
await check('backup.restoreArchive', async () => {
  await client.files.writeFile(`${dir}/nested/moved.txt`, 'changed after the backup', sid);
  const restored = await client.backup.restoreArchive(`${dir}/nested`, archive, sid);
  expect(restored.success, JSON.stringify(restored));
  const back = await client.files.readFile(`${dir}/nested/moved.txt`, sid);
  expect(back.content === 'hello\n', JSON.stringify(back));
  await fetch(`${baseUrl}/api/backup/unmount`, { method: 'POST', body: JSON.stringify({ dir: `${dir}/nested` }) });
});
await check('backup.uploadParts', async () => {
  const received = new Map();
  const server = http.createServer((req, res) => {
    let size = 0;
    req.on('data', (chunk) => (size += chunk.length));
    req.on('end', () => {
      received.set(req.url, size);
      res.setHeader('ETag', `"etag${req.url.slice(1)}"`);
      res.end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  try {
    const info = await client.files.listFiles(archiveDir, sid);
    const size = info.files.find((f) => f.absolutePath === archive).size;
    const half = Math.ceil(size / 2);
    const uploaded = await client.backup.uploadParts({
      archivePath: archive,
      parts: [
        { partNumber: 1, url: `${base}/1`, offset: 0, size: half },
        { partNumber: 2, url: `${base}/2`, offset: half, size: size - half },
      ],
    }, sid);
    expect(uploaded.success && uploaded.parts.length === 2 && uploaded.parts[0].etag === '"etag1"', JSON.stringify(uploaded));
    expect(received.get('/1') + received.get('/2') === size, JSON.stringify([...received]));
  } finally {
    server.close();
  }
});

// ---- interpreter
let pythonContext;
await check('interpreter.createCodeContext', async () => {
  pythonContext = await client.interpreter.createCodeContext({ language: 'python', cwd: workspace, envVars: { FROM_CONTEXT: 'ctx' } });
  expect(pythonContext.id && pythonContext.language === 'python' && pythonContext.cwd === workspace, JSON.stringify(pythonContext));
  return pythonContext.id;
});
await check('interpreter.runCodeStream', async () => {
  const out = [];
  const results = [];
  const errors = [];
  const callbacks = {
    onStdout: (o) => out.push(o.text),
    onResult: (r) => results.push(r),
    onError: (e) => errors.push(e),
  };
  await client.interpreter.runCodeStream(pythonContext.id, "import os\nprint(os.environ['FROM_CONTEXT'])\nx = 20\nx + 1", 'python', callbacks);
  expect(out.join('') === 'ctx\n' && results.length === 1 && results[0].text === '21', JSON.stringify({ out, results }));
  await client.interpreter.runCodeStream(pythonContext.id, "{'kept': x * 2}", 'python', callbacks);
  expect(results[1].json?.kept === 40, JSON.stringify(results[1]));
  await client.interpreter.runCodeStream(pythonContext.id, 'raise ValueError("bad")', 'python', callbacks);
  expect(errors.length === 1 && errors[0].name === 'ValueError' && errors[0].message === 'bad', JSON.stringify(errors));
  return results.length;
});
await check('interpreter.streamCode', async () => {
  const js = await client.interpreter.createCodeContext({ language: 'javascript', cwd: workspace });
  const stream = await client.interpreter.streamCode(js.id, 'const n = 6; n * 7', 'javascript');
  const events = await eventsUntil(stream, (e) => e.type === 'execution_complete' || e.type === 'error');
  const result = events.find((e) => e.type === 'result');
  expect(result?.text === '42', JSON.stringify(events));
  await client.interpreter.deleteCodeContext(js.id);
});
await check('interpreter.listCodeContexts', async () => {
  const listed = await client.interpreter.listCodeContexts();
  expect(listed.length === 1 && listed[0].id === pythonContext.id, JSON.stringify(listed));
  return listed.length;
});
await check('interpreter.deleteCodeContext', async () => {
  await client.interpreter.deleteCodeContext(pythonContext.id);
  return await rejects(() => client.interpreter.deleteCodeContext(pythonContext.id), 'CONTEXT_NOT_FOUND');
});

// ---- git
await check('git.checkout', async () => {
  const repo = `${workspace}/official-repo`;
  const made = await client.commands.execute(
    `git init -q -b main ${repo} && cd ${repo} && echo hi > f.txt && git add . && git -c user.name=a -c user.email=a@b commit -qm one && git branch dev && echo ok`,
    '__DISABLE_SESSION__',
  );
  expect(made.stdout === 'ok\n', JSON.stringify(made));
  const cloned = await client.git.checkout(`file://${repo}`, sid, { branch: 'dev', targetDir: `${dir}/clone`, depth: 1 });
  expect(cloned.success && cloned.branch === 'dev' && cloned.targetDir === `${dir}/clone`, JSON.stringify(cloned));
  const missing = await rejects(() => client.git.checkout(`file://${repo}-missing`, sid, { targetDir: `${dir}/none` }), 'GIT_REPOSITORY_NOT_FOUND');
  return missing;
});

await check('utils.deleteSession', async () => {
  const deleted = await client.utils.deleteSession(sid);
  expect(deleted.success, JSON.stringify(deleted));
});
