// A sidecar for fsd's extension tests (`next.mjs` packs this directory with capnweb's Bun
// build as `@fsd-test/echo-sidecar`): capnweb over the unix socket `EXT_SOCKET`, each
// message a 4-byte big-endian length and UTF-8 JSON, as the SDK's sidecars speak it.
import net from 'node:net';
import { RpcSession, RpcTarget } from './capnweb.js';

let disposed = 0;

class Counter extends RpcTarget {
  n = 0;
  inc() {
    return ++this.n;
  }
  [Symbol.dispose]() {
    disposed++;
  }
}

class Main extends RpcTarget {
  __ping__() {
    return 'pong';
  }
  echo(value) {
    return value;
  }
  async callBack(fn, times) {
    let sum = 0;
    for (let i = 0; i < times; i++) sum += await fn(i);
    return sum;
  }
  counter() {
    return new Counter();
  }
  disposed() {
    return disposed;
  }
  env() {
    return { keys: Object.keys(process.env).sort(), cwd: process.cwd(), dir: process.env.EXT_DIR };
  }
  fail() {
    throw new Error('boom');
  }
}

/** capnweb's transport over one framed stream socket. */
class Framed {
  constructor(socket) {
    this.socket = socket;
    this.buffer = Buffer.alloc(0);
    this.queue = [];
    this.waiters = [];
    socket.on('data', (chunk) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      while (this.buffer.length >= 4) {
        const length = this.buffer.readUInt32BE(0);
        if (this.buffer.length < 4 + length) break;
        const text = this.buffer.subarray(4, 4 + length).toString('utf8');
        this.buffer = this.buffer.subarray(4 + length);
        const waiter = this.waiters.shift();
        if (waiter) waiter.resolve(text);
        else this.queue.push(text);
      }
    });
    socket.on('close', () => {
      this.closed = new Error('closed');
      for (const waiter of this.waiters.splice(0)) waiter.reject(this.closed);
    });
  }
  async send(message) {
    const body = Buffer.from(message, 'utf8');
    const head = Buffer.alloc(4);
    head.writeUInt32BE(body.length);
    this.socket.write(Buffer.concat([head, body]));
  }
  async receive() {
    if (this.queue.length) return this.queue.shift();
    if (this.closed) throw this.closed;
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }
  abort() {
    this.socket.destroy();
  }
}

net.createServer((socket) => new RpcSession(new Framed(socket), new Main())).listen(process.env.EXT_SOCKET);
