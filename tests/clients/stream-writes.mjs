// Writes large files through the next line's `files.writeFileStream` with capnweb's own
// client and its flow control (a window of bytes in flight, not of writes), while other
// calls go on over the same socket. Each 16 MiB of a file starts with a burst of 600 writes
// of 128 B (600 writes in flight fit the window's first 256 KiB), then 64 KiB writes.
// Prints one JSON line per file written: {"method", "ok", "detail"}, the detail ending in
// the SHA-256 of what was sent.
//
// node --import ./register.mjs stream-writes.mjs BASE_URL WORKSPACE ROUNDS SIZES_MIB
// (SIZES_MIB comma-separated: each round writes each size once, to streamed/SIZE.bin.)
const { createHash } = await import('node:crypto');
const { RpcSession } = await import('capnweb');
const { SocketTransport } = await import('./transport.mjs');

const [baseUrl, , rounds, sizes] = process.argv.slice(2);
const SEGMENT = 16 * 1024 * 1024;
const BURST = 600;
const SMALL = 128;
const LARGE = 64 * 1024;

function report(method, ok, detail) {
  console.log(JSON.stringify({ method, ok, detail: String(detail ?? '') }));
}

async function connect() {
  const socket = new WebSocket(`${baseUrl.replace(/^http/, 'ws')}/rpc`);
  await new Promise((resolve, reject) => {
    socket.addEventListener('open', resolve);
    socket.addEventListener('error', reject);
  });
  const session = new RpcSession(new SocketTransport(socket), undefined);
  return { socket, api: session.getRemoteMain() };
}

// Write i holds the byte i % 251; `hash` takes every byte sent, in order.
function upload(bytes, hash) {
  let at = 0;
  let index = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes) {
        controller.close();
        return;
      }
      const small = at % SEGMENT < BURST * SMALL;
      const length = Math.min(small ? SMALL : LARGE, bytes - at, small ? Infinity : SEGMENT - (at % SEGMENT));
      const chunk = new Uint8Array(length).fill(index % 251);
      hash.update(chunk);
      controller.enqueue(chunk);
      at += length;
      index += 1;
    },
  });
}

const { api } = await connect();
const metadata = await api.utils.getRuntimeMetadata();
await api.utils.activateControlSession(metadata.runtimeIncarnationID);
await api.files.mkdir('streamed', { recursive: true });
for (let round = 0; round < Number(rounds); round++) {
  for (const mib of sizes.split(',').map(Number)) {
    const method = `writeFileStream ${mib} MiB, round ${round + 1}`;
    const hash = createHash('sha256');
    const bytes = mib * 1024 * 1024;
    const started = Date.now();
    // Other calls on the same socket while the stream goes.
    let calls = 0;
    let writing = true;
    const beside = (async () => {
      while (writing) {
        const exists = await api.files.exists('streamed');
        if (!exists.exists) throw new Error(`exists said ${JSON.stringify(exists)}`);
        calls += 1;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    try {
      const written = await api.files.writeFileStream(`streamed/${mib}.bin`, upload(bytes, hash));
      writing = false;
      await beside;
      if (!written.success || written.bytesWritten !== bytes) throw new Error(JSON.stringify(written));
      const seconds = (Date.now() - started) / 1000;
      report(method, calls > 0, `${(mib / seconds).toFixed(1)} MiB/s, ${calls} calls beside it, sha256 ${hash.digest('hex')}`);
    } catch (error) {
      writing = false;
      await beside.catch(() => {});
      report(method, false, error?.stack ?? JSON.stringify(error));
    }
  }
}
process.exit(0);
