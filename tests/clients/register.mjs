// `node --import ./register.mjs …`: lets Node load the package entry of @cloudflare/sandbox,
// and gives Node a global WebSocket where it has none (Node 18, and Node 20 without
// --experimental-websocket) from the `ws` package, for the clients' WebSocket transport.
import { register } from 'node:module';
import { WebSocket } from 'ws';
register('./loader.mjs', import.meta.url);
globalThis.WebSocket ??= WebSocket;
