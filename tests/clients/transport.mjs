// The transport both capnweb clients (`rpc.mjs`, `next.mjs`) run their sessions over.

/** capnweb's transport interface over one WebSocket, as the object's own. */
export class SocketTransport {
  constructor(socket) {
    this.socket = socket;
    this.queue = [];
    this.waiters = [];
    socket.addEventListener('message', (event) => {
      const data = typeof event.data === 'string' ? event.data : Buffer.from(event.data).toString();
      const waiter = this.waiters.shift();
      if (waiter) waiter.resolve(data);
      else this.queue.push(data);
    });
    socket.addEventListener('close', (event) => {
      this.closed = new Error(`closed ${event.code} ${event.reason}`);
      for (const waiter of this.waiters.splice(0)) waiter.reject(this.closed);
    });
  }
  async send(message) {
    this.socket.send(message);
  }
  async receive() {
    if (this.queue.length) return this.queue.shift();
    if (this.closed) throw this.closed;
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }
  abort(reason) {
    this.socket.close(3000, String(reason).slice(0, 120));
  }
}
