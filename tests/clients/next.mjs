// Drives a running fsd's `/rpc` as the SDK's next line (0.13.0-next) does, with capnweb
// 0.8.0's own client: the handshake and its gate, then every next-line method fsd serves,
// the subscription protocol (`stream()`, `cancel()`, release) included. Prints one JSON line
// per check: {"method", "ok", "detail"}. After every family it checks the session is idle
// again (nothing of ours or the daemon's still exported or pending).
//
// node --import ./register.mjs next.mjs BASE_URL WORKSPACE
const { RpcSession, RpcTarget } = await import('capnweb');
const { SocketTransport } = await import('./transport.mjs');

const [baseUrl, workspace] = process.argv.slice(2);
const dir = `${workspace}/next`;

function report(method, ok, detail) {
  console.log(JSON.stringify({ method, ok, detail: String(detail ?? '') }));
}

function expect(condition, what) {
  if (!condition) throw new Error(what);
}

async function idle(session) {
  let stats = session.getStats();
  for (let i = 0; i < 100 && (stats.imports > 1 || stats.exports > 1); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    stats = session.getStats();
  }
  expect(stats.imports <= 1 && stats.exports <= 1, `not idle after the call: ${JSON.stringify(stats)}`);
}

/** The control socket, once open; checks before it run on the probe socket. */
let control;

async function check(method, body, session = control) {
  try {
    const detail = await body();
    await idle(session);
    report(method, true, detail);
  } catch (error) {
    report(method, false, error?.stack ?? JSON.stringify(error));
  }
}

async function rejects(body, code, message) {
  try {
    await body();
  } catch (error) {
    expect(!code || error?.code === code, `expected ${code}, got ${error?.code}: ${error?.message}`);
    expect(!message || String(error?.message).includes(message), `expected "${message}", got ${error?.message}`);
    return `rejected: ${error?.code ?? ''} ${error?.message}`;
  }
  throw new Error('expected a rejection');
}

/** The object's control callback. */
const tunnelExits = [];
class Callback extends RpcTarget {
  onTunnelRunExit(exit) {
    tunnelExits.push(exit);
  }
}

async function connect(main) {
  const socket = new WebSocket(`${baseUrl.replace(/^http/, 'ws')}/rpc`);
  await new Promise((resolve, reject) => {
    socket.addEventListener('open', resolve);
    socket.addEventListener('error', reject);
  });
  const session = new RpcSession(new SocketTransport(socket), main);
  return { socket, session, api: session.getRemoteMain() };
}

/** Every event of a subscription, as the object reads one: stream, read to the end, cancel, release. */
async function drain(subscription, { stopAt } = {}) {
  const stream = await subscription.stream();
  const reader = stream.getReader();
  const events = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    events.push(value);
    if (stopAt?.(value)) {
      await reader.cancel();
      break;
    }
  }
  await subscription.cancel();
  subscription[Symbol.dispose]();
  return events;
}

const text = (events, type) =>
  events
    .filter((event) => event.type === type)
    .map((event) => Buffer.from(event.data).toString('utf8'))
    .join('');

// The probe socket: metadata, then gone, as the object opens one before every waking call.
let incarnation;
{
  const probe = await connect(undefined);
  await check('utils.getRuntimeMetadata', async () => {
    const metadata = await probe.api.utils.getRuntimeMetadata();
    expect(typeof metadata.runtimeIncarnationID === 'string' && metadata.runtimeIncarnationID.length > 0, JSON.stringify(metadata));
    expect(metadata.controlProtocolVersion === 1, JSON.stringify(metadata));
    expect(typeof metadata.sandboxVersion === 'string' && metadata.sandboxVersion.length > 0, JSON.stringify(metadata));
    incarnation = metadata.runtimeIncarnationID;
    return JSON.stringify(metadata);
  }, probe.session);
  probe.socket.close(3000, 'Container control connection was disconnected');
}

const opened = await connect(new Callback());
const api = opened.api;
control = opened.session;

await check('gate', async () => {
  const before = await rejects(() => api.utils.activateControlSession('another-runtime'), 'CONTROL_PROTOCOL_INCOMPATIBLE', 'Runtime incarnation does not match');
  const gated = await rejects(() => api.processes.list(), 'CONTROL_PROTOCOL_INCOMPATIBLE', 'Control session is not activated');
  const metadata = await api.utils.activateControlSession(incarnation);
  expect(metadata.runtimeIncarnationID === incarnation, JSON.stringify(metadata));
  return `${before}; ${gated}`;
});

await check('files', async () => {
  const made = await api.files.mkdir('next', { recursive: true });
  expect(made.success && made.path === 'next', JSON.stringify(made));
  const written = await api.files.writeFile('next/a.txt', 'héllo\n', { encoding: 'utf-8' });
  expect(written.success && written.bytesWritten === 7, JSON.stringify(written));
  const read = await api.files.readFile('next/a.txt', { encoding: undefined });
  expect(read.content === 'héllo\n' && read.encoding === 'utf-8' && read.size === 7 && !read.isBinary, JSON.stringify(read));
  await api.files.writeFile('next/b.bin', Buffer.from([0, 1, 2, 255]).toString('base64'), { encoding: 'base64' });
  const binary = await api.files.readFile('next/b.bin', {});
  expect(binary.encoding === 'base64' && Buffer.from(binary.content, 'base64').equals(Buffer.from([0, 1, 2, 255])), JSON.stringify(binary));
  // Uncapped reads and writes as streams.
  const big = Buffer.alloc(3 * 1024 * 1024 + 5, 7);
  const upload = new ReadableStream({
    start(controller) {
      for (let at = 0; at < big.length; at += 1 << 20) controller.enqueue(new Uint8Array(big.subarray(at, at + (1 << 20))));
      controller.close();
    },
  });
  const streamed = await api.files.writeFileStream('next/big.bin', upload);
  expect(streamed.success && streamed.bytesWritten === big.length, JSON.stringify(streamed));
  const raw = await api.files.readFile('next/big.bin', { encoding: 'none' });
  expect(raw.size === big.length && raw.mimeType === 'application/octet-stream', JSON.stringify({ ...raw, content: undefined }));
  const chunks = [];
  for await (const chunk of raw.content) chunks.push(Buffer.from(chunk));
  expect(Buffer.concat(chunks).equals(big), 'the streamed read is the file');
  const sse = await api.files.readFileStream('next/a.txt');
  let frames = '';
  for await (const chunk of sse) frames += Buffer.from(chunk).toString('utf8');
  expect(frames.includes('"type":"metadata"') && frames.includes('"type":"complete"'), frames);
  const renamed = await api.files.renameFile('next/a.txt', 'next/c.txt');
  expect(renamed.path === 'next/a.txt' && renamed.oldPath === 'next/a.txt' && renamed.newPath === 'next/c.txt', JSON.stringify(renamed));
  const moved = await api.files.moveFile('next/c.txt', 'next/d.txt');
  expect(moved.path === 'next/c.txt' && moved.newPath === 'next/d.txt', JSON.stringify(moved));
  const listed = await api.files.listFiles('next', {});
  expect(listed.success && listed.files.map((f) => f.name).sort().join(',') === 'b.bin,big.bin,d.txt', JSON.stringify(listed.files.map((f) => f.name)));
  await api.files.deleteFile('next/big.bin');
  const exists = await api.files.exists('next/big.bin');
  expect(exists.exists === false, JSON.stringify(exists));
  const missing = await rejects(() => api.files.readFile('next/nothing.txt', {}), 'FILE_NOT_FOUND');
  return `${listed.count} entries; ${missing}`;
});

await check('processes.start and its exit', async () => {
  const started = await api.processes.start(['sh', '-c', 'echo out; echo err >&2; exit 3'], {});
  expect(started.state === 'running' && typeof started.id === 'string' && started.pid > 0, JSON.stringify(started));
  expect(started.cwd === workspace && started.command.join(' ') === 'sh -c echo out; echo err >&2; exit 3', JSON.stringify(started));
  const events = await drain(await api.processes.openLogs(started.id, { replay: true, follow: true }));
  expect(text(events, 'stdout') === 'out\n' && text(events, 'stderr') === 'err\n', JSON.stringify(events));
  const last = events.at(-1);
  expect(last.type === 'terminal' && last.state === 'exited' && last.exit.code === 3 && last.exit.timedOut === false, JSON.stringify(last));
  expect(last.exit.signal === undefined, JSON.stringify(last));
  const seqs = events.map((event) => Buffer.from(event.cursor, 'base64url').toString().split('.')[2]);
  expect(seqs.join(',') === '1,2,3', `sequences ${seqs}`);
  const got = await api.processes.get(started.id);
  expect(got.state === 'exited' && got.exit.code === 3 && typeof got.endedAt === 'string' && got.pid === started.pid, JSON.stringify(got));
  return JSON.stringify(got.exit);
});

await check('processes env, cwd and the base environment', async () => {
  await api.files.mkdir('next/sub', { recursive: true });
  const started = await api.processes.start(['sh', '-c', 'echo "$NEXT_VAR:$(pwd):${PATH:+path}"'], { cwd: 'next/sub', env: { NEXT_VAR: 'yes' } });
  const events = await drain(await api.processes.openLogs(started.id, { follow: true }));
  expect(text(events, 'stdout') === `yes:${dir}/sub:path\n`, JSON.stringify(text(events, 'stdout')));
  return text(events, 'stdout').trim();
});

await check('processes.openLogs since, replay and follow', async () => {
  const started = await api.processes.start(['sh', '-c', 'echo one; sleep 0.3; echo two; sleep 0.3; echo three'], {});
  // Live from the start: every line, then the end.
  const live = await drain(await api.processes.openLogs(started.id, { follow: true }));
  expect(text(live, 'stdout') === 'one\ntwo\nthree\n', JSON.stringify(live));
  const first = live.find((event) => event.type === 'stdout');
  // After the first event's cursor: the rest.
  const rest = await drain(await api.processes.openLogs(started.id, { since: first.cursor }));
  expect(text(rest, 'stdout') === 'two\nthree\n', JSON.stringify(rest));
  // No replay of an ended process: nothing.
  const none = await drain(await api.processes.openLogs(started.id, { replay: false }));
  expect(none.length === 0, JSON.stringify(none));
  // Cursors refused: malformed, another process's, far ahead.
  const other = await api.processes.start(['true'], {});
  const otherEvents = await drain(await api.processes.openLogs(other.id, { follow: true }));
  const malformed = await rejects(() => api.processes.openLogs(started.id, { since: 'not-a-cursor' }), 'INVALID_PROCESS_CURSOR', 'cursor is invalid');
  const foreign = await rejects(() => api.processes.openLogs(started.id, { since: otherEvents[0].cursor }), 'INVALID_PROCESS_CURSOR');
  const ahead = Buffer.from(`v1.${Buffer.from(started.id).toString('base64url')}.99`).toString('base64url');
  const future = await rejects(() => api.processes.openLogs(started.id, { since: ahead }), 'INVALID_PROCESS_CURSOR');
  const empty = await rejects(() => api.processes.openLogs(started.id, { since: '' }), 'INVALID_PROCESS_CURSOR');
  const unknown = await rejects(() => api.processes.openLogs('no-such-process', {}), 'PROCESS_NOT_FOUND');
  return [malformed, foreign, future, empty, unknown].join('; ');
});

await check('processes.openLogs truncated at the kept limit', async () => {
  // The daemon runs at the reference's limit (1 MiB kept a process, `--process-log-bytes`):
  // a cursor from before 2 MB of output reads a `truncated` event, then the output kept.
  const noisy = await api.processes.start(['bash', '-c', 'printf start; sleep 0.5; yes truncate-me | head -c 2000000'], {});
  const head = await drain(await api.processes.openLogs(noisy.id, { follow: true }), { stopAt: (event) => event.type === 'stdout' });
  const cursor = head.find((event) => event.type === 'stdout')?.cursor;
  expect(cursor, JSON.stringify(head));
  await drain(await api.processes.openLogs(noisy.id, { follow: true, replay: false }));
  const after = await drain(await api.processes.openLogs(noisy.id, { since: cursor }));
  const truncated = after.findIndex((event) => event.type === 'truncated');
  expect(truncated === 0, JSON.stringify(after.slice(0, 2).map((event) => event.type)));
  const kept = after.filter((event) => event.type === 'stdout').reduce((sum, event) => sum + event.data.length, 0);
  expect(kept > 0 && kept < 2000000, `kept ${kept} bytes after the truncation`);
  expect(after.at(-1).type === 'terminal' && after.at(-1).exit.code === 0, JSON.stringify(after.at(-1)));
  return `truncated, then ${kept} bytes kept`;
});

await check('processes.kill, timeout and the whole tree', async () => {
  const sleeper = await api.processes.start(['sleep', '30'], {});
  expect(await api.processes.hasActive(), 'hasActive while sleep runs');
  await api.processes.kill(sleeper.id);
  const killed = (await drain(await api.processes.openLogs(sleeper.id, { follow: true }))).at(-1);
  expect(killed.exit.code === 143 && killed.exit.signal === 15 && !killed.exit.timedOut, JSON.stringify(killed));
  const hard = await api.processes.start(['sleep', '30'], {});
  await api.processes.kill(hard.id, 9);
  const nine = (await drain(await api.processes.openLogs(hard.id, { follow: true }))).at(-1);
  expect(nine.exit.code === 137 && nine.exit.signal === 9, JSON.stringify(nine));
  // An orphan keeps the process running until the lifetime ends it; the root's code stays.
  const orphan = await api.processes.start(['bash', '-c', 'sleep 30 & echo started'], { timeout: 300 });
  const timed = await drain(await api.processes.openLogs(orphan.id, { follow: true }));
  const end = timed.at(-1);
  expect(end.exit.code === 0 && end.exit.timedOut === true, JSON.stringify(end));
  const bad = await rejects(() => api.processes.kill(orphan.id, 65), 'PROCESS_ERROR', 'signal must be an integer');
  await api.processes.kill(orphan.id); // exited: a no-op
  const gone = await rejects(() => api.processes.kill('no-such-process'), 'PROCESS_NOT_FOUND');
  expect(!(await api.processes.hasActive()), 'hasActive after everything ended');
  return `${JSON.stringify(end.exit)}; ${bad}; ${gone}`;
});

await check('processes refusals', async () => {
  const results = [
    await rejects(() => api.processes.start([], {}), 'INVALID_COMMAND'),
    await rejects(() => api.processes.start([''], {}), 'INVALID_COMMAND'),
    await rejects(() => api.processes.start(['echo', 'a\0b'], {}), 'INVALID_COMMAND'),
    await rejects(() => api.processes.start(['true'], { timeout: -1 }), 'INVALID_COMMAND'),
    await rejects(() => api.processes.start(['true'], { env: { 'A=B': 'x' } }), 'INVALID_PROCESS_ENVIRONMENT'),
    await rejects(() => api.processes.start(['true'], { env: { A: 1 } }), 'INVALID_PROCESS_ENVIRONMENT'),
    await rejects(() => api.processes.start(['true'], { cwd: 'no/such/dir' }), 'INVALID_PROCESS_CWD'),
    await rejects(() => api.processes.start(['no-such-program-anywhere'], {}), 'PROCESS_SPAWN_FAILED'),
  ];
  expect((await api.processes.get('no-such-process')) === null, 'get of an unknown id is null');
  const listed = await api.processes.list();
  expect(Array.isArray(listed) && listed.every((status) => status.state !== 'running'), JSON.stringify(listed));
  return results.join('; ');
});

await check('subscription protocol', async () => {
  const started = await api.processes.start(['sh', '-c', 'echo a'], {});
  const subscription = await api.processes.openLogs(started.id, { follow: true });
  const first = await subscription.stream();
  const twice = await rejects(() => subscription.stream(), undefined, 'Subscription stream already opened');
  const reader = first.getReader();
  while (!(await reader.read()).done);
  await subscription.cancel();
  await subscription.cancel();
  subscription[Symbol.dispose]();
  // Released without stream(): its source stops (nothing stays exported).
  const unread = await api.processes.openLogs(started.id, { follow: true });
  unread[Symbol.dispose]();
  // Cancelled before stream(): a stream that is closed at once.
  const cancelled = await api.processes.openLogs(started.id, { follow: true });
  await cancelled.cancel();
  const closed = await drain(cancelled);
  expect(closed.length === 0, JSON.stringify(closed));
  return twice;
});

await check('ports.openWatch', async () => {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const server = await api.processes.start(['python3', '-c', `import http.server as h; h.HTTPServer(("127.0.0.1", ${port}), h.SimpleHTTPRequestHandler).serve_forever()`], {});
  const tcp = await drain(await api.ports.openWatch(port, { interval: 100 }));
  expect(tcp[0].type === 'watching' && tcp[0].port === port, JSON.stringify(tcp));
  expect(tcp.at(-1).type === 'ready' && 'statusCode' in tcp.at(-1) && tcp.at(-1).statusCode === undefined, JSON.stringify(tcp));
  const http = await drain(await api.ports.openWatch(port, { mode: 'http', path: '/', status: { min: 200, max: 299 }, interval: 100 }));
  expect(http.at(-1).type === 'ready' && http.at(-1).statusCode === 200, JSON.stringify(http));
  // A port nothing answers on: watching, then nothing until the object cancels.
  const quiet = await api.ports.openWatch(port + 1, { interval: 100 });
  const stream = await quiet.stream();
  const reader = stream.getReader();
  const watching = await reader.read();
  expect(watching.value.type === 'watching', JSON.stringify(watching));
  await quiet.cancel();
  quiet[Symbol.dispose]();
  await api.processes.kill(server.id);
  await drain(await api.processes.openLogs(server.id, { follow: true }));
  const bad = await rejects(() => api.ports.openWatch(0, {}), 'VALIDATION_FAILED');
  return `${JSON.stringify(http.at(-1))}; ${bad}`;
});

await check('watch.watch and checkChanges', async () => {
  const subscription = await api.watch.watch({ path: 'next', recursive: true });
  const stream = await subscription.stream();
  const reader = stream.getReader();
  let sse = '';
  const read = async (until) => {
    while (!until(sse)) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`the watch ended: ${sse}`);
      sse += Buffer.from(value).toString('utf8');
    }
  };
  await read((seen) => seen.includes('"watching"'));
  const started = await api.processes.start(['sh', '-c', `echo x > ${dir}/watched.txt`], {});
  await drain(await api.processes.openLogs(started.id, { follow: true }));
  await read((seen) => seen.includes('watched.txt'));
  // As the object stops one: its reader first, then cancel() and the release.
  await reader.cancel();
  await subscription.cancel();
  subscription[Symbol.dispose]();
  const unchanged = await api.watch.checkChanges({ path: 'next' });
  expect(unchanged.success && unchanged.status === 'unchanged', JSON.stringify(unchanged));
  const missing = await rejects(() => api.watch.watch({ path: 'no/such/dir' }), 'FILE_NOT_FOUND');
  return missing;
});

await check('terminals', async () => {
  expect((await api.terminals.hasActive()) === false, 'no terminal yet');
  const created = await api.terminals.create({ command: ['bash', '--norc', '--noprofile'], cwd: 'next', env: { TERM_VAR: 'yes' }, cols: 100, rows: 30 });
  expect(created.status === 'running' && created.pid > 0 && created.cwd === dir && created.command[0] === 'bash', JSON.stringify(created));
  expect(await api.terminals.hasActive(), 'hasActive while it runs');
  const subscription = await api.terminals.output(created.id, { follow: true });
  const reader = (await subscription.stream()).getReader();
  let shown = '';
  const events = [];
  const until = async (text) => {
    while (!shown.includes(text)) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`the output ended: ${shown}`);
      events.push(value);
      if (value.type === 'data') shown += Buffer.from(value.data).toString('utf8');
    }
  };
  const type = (line) => api.terminals.write(created.id, new TextEncoder().encode(line));
  await type('echo "$TERM_VAR:$TERM:$(stty size)"\n');
  await until('yes:xterm-256color:30 100');
  await api.terminals.resize(created.id, 120, 40);
  await type('stty size\n');
  await until('40 120');
  // Ctrl-C reaches what runs on the terminal; the shell carries on.
  await type('sleep 30\n');
  await new Promise((resolve) => setTimeout(resolve, 200));
  await api.terminals.interrupt(created.id);
  await type('echo after-$((40+2))\n');
  await until('after-42');
  expect(events.every((event) => event.terminalId === created.id && typeof event.cursor === 'string'), JSON.stringify(events[0]));
  await reader.cancel();
  await subscription.cancel();
  subscription[Symbol.dispose]();
  // From a cursor: what came after it.
  const later = await drain(await api.terminals.output(created.id, { since: events[0].cursor }));
  expect(later.length === events.length - 1 || later.length >= events.length - 1, `${later.length} after the first of ${events.length}`);
  await api.terminals.terminate(created.id);
  const ended = await api.terminals.get(created.id);
  expect(ended.status === 'exited' && ended.exit && typeof ended.exit.code === 'number', JSON.stringify(ended));
  const replay = await drain(await api.terminals.output(created.id, {}));
  const last = replay.at(-1);
  expect(last.type === 'terminal' && last.state === 'exited' && last.terminalId === created.id, JSON.stringify(last));
  // A program that ends on its own, with its code.
  const short = await api.terminals.create({ command: ['sh', '-c', 'echo done; exit 5'] });
  const shortEvents = await drain(await api.terminals.output(short.id, { follow: true }));
  expect(shortEvents.at(-1).exit.code === 5, JSON.stringify(shortEvents.at(-1)));
  const listed = await api.terminals.list();
  expect([created.id, short.id].every((id) => listed.some((t) => t.id === id)), JSON.stringify(listed));
  expect((await api.terminals.get('no-such-terminal')) === null, 'get of an unknown id is null');
  const refusals = [
    await rejects(() => type('echo no\n'), 'TERMINAL_CONTROL_ERROR', 'PTY is closed'),
    await rejects(() => api.terminals.write('no-such-terminal', new Uint8Array([1])), 'TERMINAL_NOT_FOUND'),
    await rejects(() => api.terminals.create({ command: ['bash'], cwd: 'no/such/dir' }), 'INVALID_TERMINAL_CWD'),
    await rejects(() => api.terminals.create({ command: ['bash'], cols: 0 }), 'TERMINAL_CONTROL_ERROR', 'Invalid dimensions'),
    await rejects(() => api.terminals.create({ command: [] }), 'INVALID_COMMAND'),
    await rejects(() => api.terminals.output(created.id, { since: 'nope' }), 'INVALID_TERMINAL_CURSOR'),
  ];
  expect((await api.terminals.hasActive()) === false, 'hasActive once both ended');
  return refusals.join('; ');
});

await check('/ws/terminal', async () => {
  const created = await api.terminals.create({ command: ['bash', '--norc', '--noprofile'] });
  const query = `terminalId=${created.id}&runtimeIncarnationID=${incarnation}&cols=90&rows=20`;
  const socket = new WebSocket(`${baseUrl.replace(/^http/, 'ws')}/ws/terminal?${query}`);
  socket.binaryType = 'arraybuffer';
  const messages = [];
  let shown = '';
  let pending = null;
  let bad = null;
  const closed = new Promise((resolve) => socket.addEventListener('close', (event) => resolve(event)));
  socket.addEventListener('message', (event) => {
    if (typeof event.data === 'string') {
      const message = JSON.parse(event.data);
      messages.push(message);
      if (message.type === 'chunk') pending = message;
      return;
    }
    const bytes = Buffer.from(event.data);
    if (!pending || pending.byteLength !== bytes.length) bad = `binary of ${bytes.length} after ${JSON.stringify(pending)}`;
    pending = null;
    shown += bytes.toString('utf8');
  });
  const until = async (what) => {
    for (let i = 0; i < 200 && !what(); i++) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(what(), `not seen: ${shown} ${JSON.stringify(messages.slice(-3))}`);
  };
  await new Promise((resolve, reject) => {
    socket.addEventListener('open', resolve);
    socket.addEventListener('error', reject);
  });
  await until(() => messages.some((m) => m.type === 'ready'));
  socket.send(new TextEncoder().encode('stty size; echo ws-$((1+1))\n'));
  await until(() => shown.includes('ws-2') && shown.includes('20 90'));
  socket.send(JSON.stringify({ type: 'bogus' }));
  await until(() => messages.some((m) => m.type === 'error' && m.message === 'Invalid control message'));
  socket.send(JSON.stringify({ type: 'terminate' }));
  const close = await closed;
  const exit = messages.find((m) => m.type === 'exit');
  expect(exit && typeof exit.cursor === 'string' && typeof exit.exit.code === 'number', JSON.stringify(messages.slice(-3)));
  expect(close.code === 1000 && close.reason === 'Terminal exited', `${close.code} ${close.reason}`);
  expect(bad === null, bad);
  return `${messages.filter((m) => m.type === 'chunk').length} chunks; exit ${JSON.stringify(exit.exit)}`;
});

await check('tunnels', async () => {
  const ensured = await api.tunnels.ensureTunnelRun({ tunnelId: 't1', runId: 'run-1', mode: 'quick', port: 8080 });
  expect(ensured.started === true && ensured.run.url.endsWith('.trycloudflare.com') && ensured.run.hostname && ensured.run.startedAt, JSON.stringify(ensured));
  const again = await api.tunnels.ensureTunnelRun({ tunnelId: 't1', runId: 'run-1', mode: 'quick', port: 8080 });
  expect(again.started === false && again.run.url === ensured.run.url, JSON.stringify(again));
  const conflict = await rejects(() => api.tunnels.ensureTunnelRun({ tunnelId: 't2', runId: 'run-2', mode: 'quick', port: 8080 }), 'TUNNEL_RUN_CONFLICT');
  // The timeouts are part of a run's identity: the defaults named are the same run, others conflict.
  const defaults = await api.tunnels.ensureTunnelRun({ tunnelId: 't1', runId: 'run-1', mode: 'quick', port: 8080, readyTimeoutMs: 90000, stopGraceMs: 3000 });
  expect(defaults.started === false && defaults.run.url === ensured.run.url, JSON.stringify(defaults));
  await rejects(() => api.tunnels.ensureTunnelRun({ tunnelId: 't1', runId: 'run-1', mode: 'quick', port: 8080, readyTimeoutMs: 5000 }), 'TUNNEL_RUN_CONFLICT');
  await rejects(() => api.tunnels.ensureTunnelRun({ tunnelId: 't1', runId: 'run-1', mode: 'quick', port: 8080, stopGraceMs: 1000 }), 'TUNNEL_RUN_CONFLICT');
  await rejects(() => api.tunnels.ensureTunnelRun({ tunnelId: 't3', runId: 'run-3', mode: 'quick', port: 8083, readyTimeoutMs: -1 }), 'VALIDATION_FAILED', 'readyTimeoutMs');
  await rejects(() => api.tunnels.ensureTunnelRun({ tunnelId: 't3', runId: 'run-3', mode: 'quick', port: 8083, stopGraceMs: 1.5 }), 'VALIDATION_FAILED', 'stopGraceMs');
  const named = await api.tunnels.ensureTunnelRun({ tunnelId: 'n1', runId: 'run-n', mode: 'named', port: 8082, cloudflaredToken: 'eyJsecret-token' });
  expect(named.run.mode === 'named' && !('url' in named.run) && !JSON.stringify(named).includes('secret'), JSON.stringify(named));
  const stopped = await api.tunnels.stopTunnelRun({ tunnelId: 't1', runId: 'run-1' });
  expect(stopped.stopped === true, JSON.stringify(stopped));
  await api.tunnels.stopTunnelRun({ tunnelId: 'n1', runId: 'run-n' });
  for (let i = 0; i < 100 && tunnelExits.length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 50));
  const exit = tunnelExits.find((event) => event.runId === 'run-1');
  expect(exit?.tunnelId === 't1' && exit.mode === 'quick' && exit.port === 8080 && 'exitCode' in exit, JSON.stringify(tunnelExits));
  return `${conflict}; exits ${JSON.stringify(tunnelExits)}`;
});

await check('workspace archives', async () => {
  await api.files.mkdir('next/ws/keep', { recursive: true });
  await api.files.mkdir('next/ws/node_modules/pkg', { recursive: true });
  await api.files.writeFile('next/ws/keep/a.txt', 'kept');
  await api.files.writeFile('next/ws/node_modules/pkg/index.js', 'left out');
  const start = await api.processes.start(['sh', '-c', `chmod 0750 ${dir}/ws/keep/a.txt; ln -s keep/a.txt ${dir}/ws/link`], {});
  await drain(await api.processes.openLogs(start.id, { follow: true }));
  const { archivePath } = await api.workspace.createArchive({ root: workspace, excludes: ['next/ws/node_modules', 'processes-none'] });
  expect(/^\/tmp\/sandbox-workspace-[0-9a-f-]+\.tar$/.test(archivePath), archivePath);
  // Back into another root: contents, modes and links as they were, excludes left out.
  const target = `${dir}/restored`;
  await api.workspace.extractArchive({ root: target, archivePath });
  const listed = await api.processes.start(['sh', '-c', `cd ${target}/next/ws && stat -c '%n %a' keep/a.txt && readlink link && cat keep/a.txt && ls node_modules 2>&1 | head -1`], {});
  const out = text(await drain(await api.processes.openLogs(listed.id, { follow: true })), 'stdout');
  expect(out.startsWith('keep/a.txt 750\nkeep/a.txt\nkept') && out.includes('No such file'), JSON.stringify(out));
  // The archive went with the extraction; cleanup of it again is fine, of anything else refused.
  await api.workspace.cleanupArchive(archivePath);
  const elsewhere = await rejects(() => api.workspace.cleanupArchive('/etc/passwd'), undefined, 'Invalid workspace archive path');
  const root = await rejects(() => api.workspace.createArchive({ root: '/', excludes: [] }), undefined, 'root must be');
  const escape = await rejects(() => api.workspace.createArchive({ root: workspace, excludes: ['../x'] }), undefined, 'Invalid workspace archive exclude');
  return [elsewhere, root, escape].join('; ');
});

await check('backup', async () => {
  await api.files.mkdir('next/bk/sub', { recursive: true });
  await api.files.writeFile('next/bk/sub/a.txt', 'backed up');
  const archive = `/var/backups/fsd-next-${process.pid}.sqsh`;
  const fetched = `/var/backups/fsd-next-${process.pid}-fetched.sqsh`;
  const created = await api.backup.createArchive(`${dir}/bk`, archive, { excludes: [] });
  expect(created.success && created.sizeBytes > 0 && created.archivePath === archive, JSON.stringify(created));
  const size = created.sizeBytes;
  // One PUT to a presigned-style URL (the daemon's own raw route on loopback), then a
  // ranged parallel download of it back from two parts.
  const stored = `${dir}/stored.sqsh`;
  const raw = `${baseUrl}/api/files/raw?path=${encodeURIComponent(stored)}`;
  expect((await api.backup.uploadArchive({ archivePath: archive, url: raw, timeoutMs: 60000 })) === undefined, 'uploadArchive answers undefined');
  const uploaded = await api.files.readFile(stored, { encoding: 'none' });
  for await (const _ of uploaded.content);
  expect(uploaded.size === size, `uploaded ${uploaded.size} of ${size}`);
  const fresh = await api.backup.prepareRestore({ dir: `${dir}/restored-bk`, backupId: 'bk-1', archivePath: fetched });
  expect(fresh.existingSize === 0, JSON.stringify(fresh));
  const half = Math.floor(size / 2);
  await api.backup.downloadArchive({
    archivePath: fetched,
    expectedSize: size,
    parts: [
      { url: raw, offset: 0, range: `bytes=0-${half - 1}` },
      { url: raw, offset: half, range: `bytes=${half}-${size - 1}` },
    ],
    timeoutMs: 60000,
  });
  const cached = await api.backup.prepareRestore({ dir: `${dir}/restored-bk`, backupId: 'bk-1', archivePath: fetched });
  expect(cached.existingSize === size, JSON.stringify(cached));
  // Written out as a plain tree, no mount.
  await api.backup.extractArchive(`${dir}/plain`, fetched);
  const plain = await api.files.readFile('next/plain/sub/a.txt', {});
  expect(plain.content === 'backed up', JSON.stringify(plain));
  let mounted = 'not root: no restore mount';
  if (process.getuid?.() === 0) {
    const restored = await api.backup.restoreArchive(`${dir}/restored-bk`, fetched);
    expect(restored.success && restored.dir === `${dir}/restored-bk`, JSON.stringify(restored));
    const seen = await api.files.readFile('next/restored-bk/sub/a.txt', {});
    expect(seen.content === 'backed up', JSON.stringify(seen));
    // A new preparation releases the restore.
    await api.backup.prepareRestore({ dir: `${dir}/restored-bk`, backupId: 'bk-1', archivePath: fetched });
    mounted = 'restored and released';
  }
  const refusals = [
    await rejects(() => api.backup.uploadArchive({ archivePath: '/etc/passwd', url: raw, timeoutMs: 1000 }), 'INVALID_BACKUP_CONFIG'),
    await rejects(() => api.backup.prepareRestore({ dir: `${dir}/x`, backupId: '-bad', archivePath: fetched }), 'INVALID_BACKUP_CONFIG'),
    await rejects(() => api.backup.downloadArchive({ archivePath: fetched, expectedSize: size, parts: [{ url: raw, offset: 0, range: 'bytes=0-1' }], timeoutMs: 1000 }), 'INVALID_BACKUP_CONFIG'),
    await rejects(() => api.backup.extractArchive(`${dir}/plain`, '/var/backups/none-such.sqsh'), 'BACKUP_NOT_FOUND'),
  ];
  await api.backup.cleanupArchive(archive);
  await api.backup.cleanupArchive(fetched);
  expect(!(await api.files.exists(archive)).exists && !(await api.files.exists(fetched)).exists, 'archives removed');
  return `${size} bytes; ${mounted}; ${refusals.join('; ')}`;
});

await check('mounts', async () => {
  const base = `${dir}/mnt`;
  expect((await api.mounts.pathExists(base)) === false, 'pathExists before');
  await api.mounts.ensureDirectory(base);
  expect((await api.mounts.pathExists(base)) === true, 'pathExists after ensureDirectory');
  expect((await api.mounts.isMountpoint(base)) === false && (await api.mounts.isMountpoint('/')) === true, 'isMountpoint');
  const removed = await api.mounts.removeMountDirectory({ path: base, onlyIfNotMountpoint: true });
  expect(removed.success && removed.exitCode === 0 && !(await api.mounts.pathExists(base)), JSON.stringify(removed));
  const refused = await rejects(() => api.mounts.pathExists(''), undefined, 'path must be');
  const badOption = await rejects(() => api.mounts.mountS3FS({ source: 'b', mountPath: base, options: { ro: false } }), undefined, 'option ro');
  const [url, key, secret, bucket] = [process.env.NEXT_S3_URL, process.env.NEXT_S3_KEY, process.env.NEXT_S3_SECRET, process.env.NEXT_S3_BUCKET];
  if (!url) return `${refused}; ${badOption}; no FUSE here: the bucket mount is not tried`;
  // The object's own sequence: a passwd file written and made owner-only, s3fs options,
  // mount and verify, use, unmount, the directory and the passwd file removed.
  const passwd = `/tmp/.passwd-s3fs-next-${process.pid}`;
  await api.files.writeFile(passwd, `${bucket}:${key}:${secret}`);
  await api.mounts.chmodOwnerOnly(passwd);
  await api.mounts.ensureDirectory(`${base}/bucket`);
  const mounted = await api.mounts.mountS3FSAndVerify({
    source: `${bucket}:/next/`,
    mountPath: `${base}/bucket`,
    options: { logfile: `/tmp/.s3fs-log-next-${process.pid}`, passwd_file: passwd, url, use_path_request_style: true, nomixupload: true },
  });
  expect(mounted.success && mounted.exitCode === 0, JSON.stringify(mounted));
  expect(await api.mounts.isMountpoint(`${base}/bucket`), 'mounted');
  await api.files.writeFile(`${base}/bucket/object.txt`, 'in the bucket');
  const back = await api.files.readFile(`${base}/bucket/object.txt`, {});
  expect(back.content === 'in the bucket', JSON.stringify(back));
  const spared = await api.mounts.removeMountDirectory({ path: `${base}/bucket`, onlyIfNotMountpoint: true });
  expect(spared.exitCode === 0 && (await api.mounts.isMountpoint(`${base}/bucket`)), 'a mount point is spared');
  const unmounted = await api.mounts.unmountFuse(`${base}/bucket`);
  expect(unmounted.exitCode === 0 && !(await api.mounts.isMountpoint(`${base}/bucket`)), JSON.stringify(unmounted));
  await api.mounts.unmountFuseIfMounted(`${base}/bucket`);
  const again = await api.mounts.unmountFuse(`${base}/bucket`);
  expect(again.exitCode !== 0, JSON.stringify(again));
  const gone = await api.mounts.removeMountDirectory({ path: `${base}/bucket`, onlyIfNotMountpoint: false });
  expect(gone.exitCode === 0, JSON.stringify(gone));
  await api.mounts.deleteFile(passwd);
  expect(!(await api.files.exists(passwd)).exists, 'passwd file removed');
  return `${refused}; ${badOption}; mounted, written, unmounted`;
});

await check('extensions: the interpreter', async () => {
  const hash = '8f88475725e425f72f73a98698b92da764c8d63ec3a535ae2e0cff2ac86263c0';
  // As the object: the hash alone first.
  const sidecar = await api.extensions.connect({ packageHash: hash, bin: undefined, readinessTimeoutMs: undefined, allowInstallScripts: undefined });
  expect((await sidecar.__ping__()) === 'pong', 'ping');
  const context = await sidecar.createContext({ language: 'python', cwd: undefined });
  expect(typeof context.id === 'string' && context.language === 'python' && context.cwd === workspace, JSON.stringify(context));
  const events = [];
  const answer = await sidecar.runCode(context.id, 'print(1 + 1)\n3 * 7', undefined, (event) => {
    events.push(event);
  });
  expect(answer === undefined, `runCode answered ${answer}`);
  const stdout = events.filter((e) => e.type === 'stdout').map((e) => e.text).join('');
  expect(stdout === '2\n', JSON.stringify(events));
  expect(events.some((e) => e.type === 'result' && e.text === '21'), JSON.stringify(events));
  expect(events.some((e) => e.type === 'execution_complete'), JSON.stringify(events));
  const errors = [];
  await sidecar.runCode(context.id, 'raise ValueError("no")', 'python', (event) => errors.push(event));
  expect(errors.some((e) => e.type === 'error' && e.ename === 'ValueError'), JSON.stringify(errors));
  const listed = await sidecar.listContexts();
  expect(listed.some((c) => c.id === context.id), JSON.stringify(listed));
  await sidecar.interruptContext(context.id);
  await sidecar.deleteContext(context.id);
  const gone = await rejects(() => sidecar.deleteContext(context.id), undefined, 'not found');
  sidecar[Symbol.dispose]();
  const health = await api.extensions.health(hash);
  expect(health.provisioned && health.responsive && health.packageHash === hash, JSON.stringify(health));
  const other = '0'.repeat(64);
  const unknown = await api.extensions.health(other);
  expect(!unknown.provisioned && unknown.id === '' && unknown.pid === null, JSON.stringify(unknown));
  const refused = await rejects(() => api.extensions.connect({ packageHash: other }), undefined, `Extension package '${other}' is not provisioned`);
  await api.extensions.stop(hash);
  return `${gone}; ${refused}`;
});

await check('extensions: any package, run as a sidecar', async () => {
  // The package: the sidecar above with capnweb's Bun build beside it, packed as npm does.
  const { mkdirSync, copyFileSync, writeFileSync, readFileSync } = await import('node:fs');
  const { execFileSync } = await import('node:child_process');
  const { createHash } = await import('node:crypto');
  const root = `${workspace}/next-extension`;
  mkdirSync(`${root}/package`, { recursive: true });
  const here = new URL('.', import.meta.url).pathname;
  copyFileSync(`${here}extension/server.mjs`, `${root}/package/server.mjs`);
  copyFileSync(`${here}node_modules/capnweb/dist/index-bun.js`, `${root}/package/capnweb.js`);
  const manifest = { name: '@fsd-test/echo-sidecar', version: '1.2.3', type: 'module', bin: { 'echo-sidecar': 'server.mjs' }, sandboxExtension: { readinessTimeoutMs: 20000 } };
  writeFileSync(`${root}/package/package.json`, JSON.stringify(manifest));
  execFileSync('tar', ['czf', `${root}/extension.tgz`, '-C', root, 'package']);
  const tarball = new Uint8Array(readFileSync(`${root}/extension.tgz`));
  const hash = createHash('sha256').update(tarball).digest('hex');

  // As the object: the hash alone, refused by message, then again with the tarball.
  const first = { packageHash: hash, bin: undefined, readinessTimeoutMs: undefined, allowInstallScripts: undefined };
  const refused = await rejects(() => api.extensions.connect(first), undefined, `Extension package '${hash}' is not provisioned; resend connect() with tarball bytes`);
  const before = await api.extensions.health(hash);
  expect(!before.provisioned && !before.running && before.pid === null, JSON.stringify(before));
  const mismatch = await rejects(() => api.extensions.connect({ packageHash: 'a'.repeat(64), tarball }), undefined, 'Extension tarball hash mismatch (declared aaaaaaaaaaaa');
  const ext = await api.extensions.connect({ ...first, tarball });
  expect((await ext.__ping__()) === 'pong', 'ping');
  // Values cross both sessions as they are: bytes, dates, nesting, undefined.
  const value = { list: [1, 'two', { three: 3 }], bytes: new Uint8Array([0, 1, 255]), at: new Date(5), none: null };
  const echoed = await ext.echo(value);
  expect(JSON.stringify([...echoed.bytes]) === '[0,1,255]' && echoed.at.getTime() === 5 && echoed.list[2].three === 3 && echoed.none === null, JSON.stringify(echoed));
  // A callback of ours, called by the sidecar through the daemon, each answer awaited.
  const seen = [];
  const sum = await ext.callBack((i) => {
    seen.push(i);
    return i * 10;
  }, 4);
  expect(sum === 60 && seen.join() === '0,1,2,3', `${sum} ${seen}`);
  const thrown = await rejects(() => ext.callBack(() => {
    throw new Error('from the callback');
  }, 1), undefined, 'from the callback');
  // An object the sidecar returns: its methods called through the daemon, and our release
  // of it passed on (the sidecar disposes it).
  const counter = await ext.counter();
  await counter.inc();
  expect((await counter.inc()) === 2, 'the counter counts');
  counter[Symbol.dispose]();
  let disposed = 0;
  for (let i = 0; i < 100 && disposed === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    disposed = await ext.disposed();
  }
  expect(disposed === 1, `the sidecar disposed ${disposed} counters`);
  const failed = await rejects(() => ext.fail(), undefined, 'boom');
  // The sidecar sees none of the daemon's environment, and runs in its package's directory.
  const env = await ext.env();
  expect(env.keys.includes('EXT_SOCKET') && env.keys.includes('EXT_DIR') && !env.keys.includes('FSD_STAND_IN'), JSON.stringify(env));
  expect(env.cwd === env.dir && env.dir.endsWith(hash), JSON.stringify(env));
  // Connecting again (the object does before every use) is the same sidecar.
  const again = await api.extensions.connect(first);
  expect((await again.echo('x')) === 'x', 'a second connect');
  const health = await api.extensions.health(hash);
  expect(health.provisioned && health.running && health.responsive && typeof health.pid === 'number', JSON.stringify(health));
  expect(health.id === 'fsd-test-echo-sidecar' && health.version === '1.2.3', JSON.stringify(health));
  // Stopped, it starts again on the next connect with the hash alone (provisioned).
  await api.extensions.stop(hash);
  const stopped = await api.extensions.health(hash);
  expect(stopped.provisioned && !stopped.running && stopped.pid === null, JSON.stringify(stopped));
  const restarted = await api.extensions.connect(first);
  expect((await restarted.__ping__()) === 'pong', 'ping after a restart');
  const ended = await rejects(() => ext.__ping__(), undefined, 'connection ended');
  for (const stub of [ext, again, restarted]) stub[Symbol.dispose]();
  await api.extensions.stop(hash);
  return `${refused}; ${mismatch}; ${thrown}; ${failed}; ${ended}`;
});

await check('extensions: refusals', async () => {
  const { mkdirSync, writeFileSync, readFileSync, rmSync } = await import('node:fs');
  const { execFileSync } = await import('node:child_process');
  const { createHash } = await import('node:crypto');
  // A package of `files` (name → text) packed as npm does, and its hash.
  let made = 0;
  const pack = (files) => {
    const root = `${workspace}/next-refused-${made++}`;
    rmSync(root, { recursive: true, force: true });
    mkdirSync(`${root}/package`, { recursive: true });
    for (const [name, text] of Object.entries(files)) writeFileSync(`${root}/package/${name}`, text);
    execFileSync('tar', ['czf', `${root}/extension.tgz`, '-C', root, 'package']);
    const tarball = new Uint8Array(readFileSync(`${root}/extension.tgz`));
    return { packageHash: createHash('sha256').update(tarball).digest('hex'), tarball };
  };
  const json = (manifest) => JSON.stringify({ name: 'refused', version: '0.0.1', ...manifest });
  const notGzip = new TextEncoder().encode('not a tarball');
  const results = [
    await rejects(() => api.extensions.connect({ packageHash: createHash('sha256').update(notGzip).digest('hex'), tarball: notGzip }), undefined, 'not a gzip tarball'),
    await rejects(() => api.extensions.connect(pack({ 'x.mjs': '' })), undefined, 'no package/package.json'),
    await rejects(() => api.extensions.connect(pack({ 'package.json': json({ bin: { x: '../../../../../etc/passwd' } }) })), undefined, 'is not a file inside the package'),
    await rejects(() => api.extensions.connect(pack({ 'package.json': json({ bin: { a: 'a.mjs', b: 'b.mjs' } }), 'a.mjs': '', 'b.mjs': '' })), undefined, 'no bin to run'),
    await rejects(() => api.extensions.connect(pack({ 'package.json': json({ bin: 'x.mjs' }), 'x.mjs': 'process.exit(3)' })), undefined, "Extension 'refused' sidecar exited before readiness (code 3)"),
    await rejects(() => api.extensions.connect({ ...pack({ 'package.json': json({ bin: 'x.mjs' }), 'x.mjs': 'setInterval(() => {}, 1000)' }), readinessTimeoutMs: 300 }), undefined, "Extension 'refused' sidecar was not ready within 300 ms"),
    await rejects(() => api.extensions.connect({ packageHash: '../../etc' }), undefined, 'packageHash must be the 64 lowercase hex digits'),
  ];
  return results.join('; ');
});

await check('processes retention', async () => {
  // More ended processes than are kept: the oldest go, with their logs.
  const ids = [];
  for (let i = 0; i < 80; i++) {
    const started = await api.processes.start(['true'], {});
    ids.push(started.id);
  }
  await drain(await api.processes.openLogs(ids.at(-1), { follow: true }));
  for (let i = 0; i < 100 && (await api.processes.hasActive()); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const listed = await api.processes.list();
  expect(listed.length === 64, `kept ${listed.length}`);
  expect((await api.processes.get(ids[0])) === null, 'the oldest is dropped');
  expect((await api.processes.get(ids.at(-1))).state === 'exited', 'the newest is kept');
  const dropped = await rejects(() => api.processes.openLogs(ids[0], {}), 'PROCESS_NOT_FOUND');
  return `${listed.length} kept; ${dropped}`;
});
api[Symbol.dispose]?.();
opened.socket.close(3000, 'Container control connection was disconnected');
process.exit(0);
