// `node --import ./register.mjs …`: lets Node load the package entry of @cloudflare/sandbox.
import { register } from 'node:module';
register('./loader.mjs', import.meta.url);
