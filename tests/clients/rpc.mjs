// Drives a running fsd's `/rpc` with capnweb 0.8.0 (the RPC library the official Sandbox
// object uses, pinned by @cloudflare/sandbox in this folder), calling the SandboxAPI as the
// object does, and prints one JSON line per call: {"method", "ok", "detail"}. As the object,
// it runs an `RpcSession` over a transport of its own with a main object the daemon calls
// back (`onTunnelExit`), and after every call family it checks the session is idle again
// (at most one import and one export: what lets the object close the socket and sleep).
//
// node --import ./register.mjs rpc.mjs BASE_URL WORKSPACE
const { RpcSession, RpcTarget } = await import('capnweb');
const { SocketTransport } = await import('./transport.mjs');

const [baseUrl, workspace] = process.argv.slice(2);
const dir = `${workspace}/rpc`;
const sid = 'rpc-session';

function report(method, ok, detail) {
  console.log(JSON.stringify({ method, ok, detail: String(detail ?? '') }));
}

async function check(method, body) {
  try {
    const detail = await body();
    // Everything the call family handed out was released, both ways.
    let stats = session.getStats();
    for (let i = 0; i < 100 && (stats.imports > 1 || stats.exports > 1); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      stats = session.getStats();
    }
    expect(stats.imports <= 1 && stats.exports <= 1, `not idle after the call: ${JSON.stringify(stats)}`);
    report(method, true, detail);
  } catch (error) {
    report(method, false, error?.stack ?? JSON.stringify(error));
  }
}

function expect(condition, what) {
  if (!condition) throw new Error(what);
}

async function rejects(body, code) {
  try {
    await body();
  } catch (error) {
    expect(!code || error?.code === code, `expected ${code}, got ${error?.code}: ${error?.message}`);
    return `rejected: ${error?.code} ${error?.message}`;
  }
  throw new Error('expected a rejection');
}

async function text(stream) {
  const chunks = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(typeof value === 'string' ? Buffer.from(value) : Buffer.from(value));
  }
  return Buffer.concat(chunks).toString('utf8');
}

function events(sse) {
  return sse
    .split('\n\n')
    .filter((frame) => frame.includes('data: '))
    .map((frame) => {
      const kind = frame.match(/^event: (.*)$/m)?.[1];
      const data = JSON.parse(frame.match(/^data: (.*)$/m)[1]);
      return { kind, data };
    });
}

/** The object's main, which the daemon calls when a tunnel's cloudflared exits. */
const exits = [];
class Main extends RpcTarget {
  onTunnelExit(...args) {
    exits.push(args);
  }
}

const socket = new WebSocket(`${baseUrl.replace(/^http/, 'ws')}/rpc`);
await new Promise((resolve, reject) => {
  socket.addEventListener('open', resolve);
  socket.addEventListener('error', reject);
});
const session = new RpcSession(new SocketTransport(socket), new Main());
const api = session.getRemoteMain();

await check('utils.ping', async () => {
  const answer = await api.utils.ping();
  expect(answer === 'healthy', `ping: ${answer}`);
  return answer;
});
await check('utils.getVersion', async () => {
  const version = await api.utils.getVersion();
  expect(typeof version === 'string' && version.length > 0, `version: ${version}`);
  return version;
});
await check('utils.getCommands', async () => {
  const commands = await api.utils.getCommands();
  expect(Array.isArray(commands), `commands: ${commands}`);
  return JSON.stringify(commands);
});
await check('utils.createSession', async () => {
  const created = await api.utils.createSession({ id: sid, env: { RPC_VAR: 'yes' }, cwd: workspace });
  expect(created.success && created.id === sid, JSON.stringify(created));
  const again = await rejects(() => api.utils.createSession({ id: sid }), 'SESSION_ALREADY_EXISTS');
  return `${created.message}; ${again}`;
});
await check('utils.listSessions', async () => {
  const { sessions } = await api.utils.listSessions();
  expect(sessions.includes(sid), JSON.stringify(sessions));
  return sessions.join(',');
});
await check('commands.execute', async () => {
  const result = await api.commands.execute('echo $RPC_VAR; echo oops >&2; (exit 3)', sid, undefined);
  expect(result.exitCode === 3 && result.stdout === 'yes\n' && result.stderr === 'oops\n', JSON.stringify(result));
  expect(result.duration === undefined && result.sessionId === undefined, 'RPC has no duration or sessionId');
  const timedOut = await rejects(
    () => api.commands.execute('sleep 5', sid, { timeoutMs: 300 }),
    'COMMAND_EXECUTION_ERROR',
  );
  return `exit ${result.exitCode}; ${timedOut}`;
});
await check('commands.executeStream', async () => {
  const stream = await api.commands.executeStream('echo one; echo two >&2', sid, undefined);
  const seen = events(await text(stream));
  const kinds = seen.map((event) => event.kind);
  expect(kinds[0] === 'start' && kinds.at(-1) === 'complete', kinds.join(','));
  expect(seen.every((event) => event.kind === event.data.type), 'event: lines name each type');
  expect(seen.at(-1).data.exitCode === 0, JSON.stringify(seen.at(-1)));
  const out = seen.filter((event) => event.kind === 'stdout').map((event) => event.data.data).join('');
  expect(out === 'one\n', `stdout: ${out}`);
  return kinds.join(',');
});
await check('files.mkdir', async () => {
  const made = await api.files.mkdir(`${dir}/deep/er`, sid, { recursive: true });
  expect(made.success && made.recursive === true, JSON.stringify(made));
  return made.path;
});
await check('files.writeFile', async () => {
  const written = await api.files.writeFile(`${dir}/a.txt`, 'hello rpc\n', sid, undefined);
  expect(written.bytesWritten === 10, JSON.stringify(written));
  const encoded = await api.files.writeFile(`${dir}/b.bin`, Buffer.from([0, 1, 2, 255]).toString('base64'), sid, { encoding: 'base64' });
  expect(encoded.success, JSON.stringify(encoded));
  return written.path;
});
await check('files.readFile', async () => {
  const read = await api.files.readFile(`${dir}/a.txt`, sid, undefined);
  expect(read.content === 'hello rpc\n' && read.encoding === 'utf-8', JSON.stringify(read));
  const binary = await api.files.readFile(`${dir}/b.bin`, sid, { encoding: 'base64' });
  expect(Buffer.from(binary.content, 'base64').equals(Buffer.from([0, 1, 2, 255])), JSON.stringify(binary));
  const missing = await rejects(() => api.files.readFile(`${dir}/nope`, sid, undefined), 'FILE_NOT_FOUND');
  return missing;
});
await check('files.writeFileStream', async () => {
  const size = 40 * 1024 * 1024; // past the 32 MiB cap of encoded reads
  const chunk = Buffer.alloc(1024 * 1024, 7);
  let sent = 0;
  const stream = new ReadableStream({
    pull(controller) {
      if (sent >= size) return controller.close();
      controller.enqueue(new Uint8Array(chunk));
      sent += chunk.length;
    },
  });
  const written = await api.files.writeFileStream(`${dir}/big.bin`, stream, sid);
  expect(written.success && written.bytesWritten === size, JSON.stringify(written));
  return `${written.bytesWritten} bytes`;
});
await check('files.readFile none', async () => {
  const read = await api.files.readFile(`${dir}/big.bin`, sid, { encoding: 'none' });
  expect(read.size === 40 * 1024 * 1024, JSON.stringify({ ...read, content: undefined }));
  const reader = read.content.getReader();
  let total = 0;
  let sevens = true;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    sevens &&= value.every((byte) => byte === 7);
  }
  expect(total === read.size && sevens, `read ${total} bytes`);
  return `${total} bytes, ${read.mimeType}`;
});
await check('files.readFileStream', async () => {
  const seen = events(await text(await api.files.readFileStream(`${dir}/a.txt`, sid)));
  const kinds = seen.map((event) => event.data.type);
  expect(kinds[0] === 'metadata' && kinds.at(-1) === 'complete', kinds.join(','));
  return kinds.join(',');
});
await check('files.exists', async () => {
  const yes = await api.files.exists(`${dir}/a.txt`, sid);
  const no = await api.files.exists(`${dir}/none`, sid);
  expect(yes.exists === true && no.exists === false, JSON.stringify([yes, no]));
  return 'yes, no';
});
await check('files.listFiles', async () => {
  const listed = await api.files.listFiles(dir, sid, { recursive: true });
  expect(Array.isArray(listed.files) && listed.count === listed.files.length && listed.count >= 4, JSON.stringify(listed));
  return listed.files.map((file) => file.name).sort().join(',');
});
await check('files.renameFile', async () => {
  const renamed = await api.files.renameFile(`${dir}/a.txt`, `${dir}/c.txt`, sid);
  expect(renamed.oldPath === `${dir}/a.txt` && renamed.newPath === `${dir}/c.txt`, JSON.stringify(renamed));
  return renamed.newPath;
});
await check('files.moveFile', async () => {
  const moved = await api.files.moveFile(`${dir}/c.txt`, `${dir}/deep/c.txt`, sid);
  expect(moved.success, JSON.stringify(moved));
  return moved.newPath;
});
await check('files.deleteFile', async () => {
  const deleted = await api.files.deleteFile(`${dir}/deep/c.txt`, sid);
  expect(deleted.success, JSON.stringify(deleted));
  return deleted.path;
});
await check('processes.startProcess', async () => {
  const started = await api.processes.startProcess('echo started; sleep 30', sid, { processId: 'rpc-proc' });
  expect(started.processId === 'rpc-proc' && started.pid > 0, JSON.stringify(started));
  return `pid ${started.pid}`;
});
await check('processes.listProcesses', async () => {
  const { processes } = await api.processes.listProcesses();
  expect(processes.some((p) => p.id === 'rpc-proc'), JSON.stringify(processes));
  return processes.length;
});
await check('processes.getProcess', async () => {
  const { process } = await api.processes.getProcess('rpc-proc');
  expect(process.id === 'rpc-proc', JSON.stringify(process));
  const missing = await rejects(() => api.processes.getProcess('nope'), 'PROCESS_NOT_FOUND');
  return `${process.status}; ${missing}`;
});
await check('processes.getProcessLogs', async () => {
  for (let i = 0; i < 100; i++) {
    const logs = await api.processes.getProcessLogs('rpc-proc');
    if (logs.stdout === 'started\n') return 'started';
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('no output');
});
await check('processes.killProcess', async () => {
  const killed = await api.processes.killProcess('rpc-proc');
  expect(killed.success, JSON.stringify(killed));
  return killed.processId;
});
await check('processes.streamProcessLogs', async () => {
  const seen = events(await text(await api.processes.streamProcessLogs('rpc-proc')));
  const kinds = seen.map((event) => event.data.type);
  expect(!kinds.includes('process_info') && kinds.at(-1) === 'exit', kinds.join(','));
  return kinds.join(',');
});
await check('processes.killAllProcesses', async () => {
  await api.processes.startProcess('sleep 31', sid, undefined);
  const killed = await api.processes.killAllProcesses();
  expect(killed.success && killed.cleanedCount >= 1, JSON.stringify(killed));
  return killed.cleanedCount;
});
await check('ports.watchPort', async () => {
  // A port free now: a fixed one (38517, inside the kernel's ephemeral range) was at times
  // some connection's, and the server exited before the watch began.
  const { createServer } = await import('node:net');
  const probe = createServer();
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = probe.address().port;
  await new Promise((resolve) => probe.close(resolve));
  await api.processes.startProcess(`exec python3 -m http.server ${port} --bind 127.0.0.1`, sid, { processId: 'rpc-web' });
  const seen = events(await text(await api.ports.watchPort({ port, mode: 'http', path: '/', processId: 'rpc-web' })));
  const kinds = seen.map((event) => event.data.type);
  await api.processes.killProcess('rpc-web');
  expect(kinds.at(-1) === 'ready', kinds.join(','));
  return kinds.join(',');
});
await check('watch.watch and checkChanges', async () => {
  const first = await api.watch.checkChanges({ path: dir });
  expect(first.success !== false && typeof first.version === 'string', JSON.stringify(first));
  await api.files.writeFile(`${dir}/watched.txt`, 'w', sid, undefined);
  const second = await api.watch.checkChanges({ path: dir, since: first.version });
  expect(second.status === 'changed', JSON.stringify(second));
  const stream = await api.watch.watch({ path: dir });
  const reader = stream.getReader();
  const { value } = await reader.read();
  await reader.cancel();
  expect(Buffer.from(value).toString().includes('watching'), 'the stream starts with watching');
  return second.status;
});
await check('git.checkout', async () => {
  const repo = `${dir}/origin`;
  await api.commands.execute(
    `git init -q ${repo} && cd ${repo} && echo hi > f && git add f && git -c user.email=a@b -c user.name=n commit -qm one`,
    sid,
    undefined,
  );
  const cloned = await api.git.checkout(`file://${repo}`, sid, { targetDir: `${dir}/clone` });
  expect(cloned.success && cloned.targetDir === `${dir}/clone`, JSON.stringify(cloned));
  const bad = await rejects(() => api.git.checkout('not a url', sid, undefined));
  return `${cloned.branch}; ${bad}`;
});
await check('interpreter', async () => {
  const context = await api.interpreter.createCodeContext({ language: 'python' });
  expect(typeof context.id === 'string' && context.createdAt instanceof Date, JSON.stringify(context));
  const listed = await api.interpreter.listCodeContexts();
  expect(listed.some((c) => c.id === context.id), JSON.stringify(listed));
  const streamed = events(await text(await api.interpreter.streamCode(context.id, 'print(6*7)', undefined)));
  // Output may come in more than one event.
  const printed = streamed.filter((e) => e.data.type === 'stdout').map((e) => e.data.text).join('');
  expect(printed === '42\n', JSON.stringify(streamed));
  const seen = [];
  const callbacks = {
    onStdout: (out) => { seen.push(['stdout', out.text]); },
    onStderr: (err) => { seen.push(['stderr', err.text]); },
    onResult: (result) => { seen.push(['result', result.text]); },
    onError: (error) => { seen.push(['error', error.name]); },
  };
  await api.interpreter.runCodeStream(context.id, 'print(1)\n2+3', undefined, callbacks);
  // Output (in as many pieces as it came), then the result: a result follows what was
  // printed before it.
  const kinds = seen.map(([kind]) => kind).filter((kind, i, all) => kind !== all[i - 1]);
  const out = seen.filter(([kind]) => kind === 'stdout').map(([, text]) => text).join('');
  const results = seen.filter(([kind]) => kind === 'result').map(([, text]) => text);
  expect(
    JSON.stringify(kinds) === '["stdout","result"]' && out === '1\n' && JSON.stringify(results) === '["5"]',
    JSON.stringify(seen),
  );
  // The context's dates are its own: made once, used at each call.
  const used = (await api.interpreter.listCodeContexts()).find((c) => c.id === context.id);
  expect(
    used.createdAt.getTime() === context.createdAt.getTime() && used.lastUsed > used.createdAt,
    JSON.stringify([context, used]),
  );
  await api.interpreter.runCodeStream(context.id, 'raise ValueError("x")', undefined, callbacks);
  expect(seen.at(-1)[0] === 'error' && seen.at(-1)[1] === 'ValueError', JSON.stringify(seen));
  await api.interpreter.deleteCodeContext(context.id);
  const gone = await rejects(
    () => api.interpreter.runCodeStream(context.id, '1', undefined, callbacks),
    'CONTEXT_NOT_FOUND',
  );
  return gone;
});
await check('backup', async () => {
  const archive = `/var/backups/fsd-rpc-${process.pid}.sqsh`;
  const created = await api.backup.createArchive(`${dir}/deep`, archive, sid, undefined);
  expect(created.success && created.sizeBytes > 0, JSON.stringify(created));
  const restored = await api.backup.restoreArchive(`${dir}/restored`, archive, sid);
  expect(restored.success, JSON.stringify(restored));
  return created.sizeBytes;
});
await check('tunnels', async () => {
  const ensured = await api.tunnels.ensureTunnelRun({ tunnelId: 't1', runId: 'run-1', mode: 'quick', port: 8080 });
  expect(ensured.started === true && ensured.run.url.endsWith('.trycloudflare.com'), JSON.stringify(ensured));
  const quick = await api.tunnels.runQuickTunnel('legacy', 8081);
  expect(quick.id === 'legacy' && quick.port === 8081 && quick.url.endsWith('.trycloudflare.com'), JSON.stringify(quick));
  const again = await rejects(() => api.tunnels.runQuickTunnel('legacy', 8081), 'TUNNEL_ALREADY_RUNNING');
  const named = await api.tunnels.runNamedTunnel('named-1', 'eyJsecret-token', 8082);
  expect(named.url === '' && named.hostname === '', JSON.stringify(named));
  const listed = await api.tunnels.listTunnels();
  expect(['t1', 'legacy', 'named-1'].every((id) => listed.some((t) => t.id === id)), JSON.stringify(listed));
  expect(!JSON.stringify(listed).includes('secret'), 'no token in the list');
  const destroyed = await api.tunnels.destroyTunnel('legacy');
  expect(destroyed.success && destroyed.id === 'legacy', JSON.stringify(destroyed));
  const missing = await rejects(() => api.tunnels.destroyTunnel('legacy'), 'TUNNEL_NOT_FOUND');
  const stopped = await api.tunnels.stopTunnelRun({ tunnelId: 't1', runId: 'run-1' });
  expect(stopped.stopped === true, JSON.stringify(stopped));
  await api.tunnels.destroyTunnel('named-1');
  for (let i = 0; i < 100 && exits.length < 3; i++) await new Promise((resolve) => setTimeout(resolve, 50));
  const legacyExit = exits.find((args) => args[0] === 'legacy');
  const runExit = exits.find((args) => args[0] === 't1');
  expect(legacyExit?.length === 3 && legacyExit[1] === 8081, `legacy exit: ${JSON.stringify(exits)}`);
  expect(runExit?.length === 4 && runExit[3] === 'run-1', `run exit: ${JSON.stringify(exits)}`);
  return `${again}; ${missing}; exits ${JSON.stringify(exits)}`;
});
await check('unknown method', async () => rejects(() => api.commands.nope()));
await check('utils.deleteSession', async () => {
  const deleted = await api.utils.deleteSession(sid);
  expect(deleted.success, JSON.stringify(deleted));
  return deleted.sessionId;
});
api[Symbol.dispose]?.();
socket.close();
process.exit(0);
