// Node loader hook: the route clients never touch `cloudflare:workers`, but the package entry
// imports it (and @cloudflare/containers, which imports its own files without extensions).
const source = `
export class DurableObject { constructor(ctx, env) { this.ctx = ctx; this.env = env; } }
export class RpcTarget {}
export class WorkerEntrypoint {}
export const env = {};
export const tracing = { enterSpan: (_name, fn, ...args) => fn({ setAttribute() {} }, ...args) };
`;
export async function resolve(specifier, context, next) {
  if (specifier === 'cloudflare:workers') {
    return { url: 'data:text/javascript,' + encodeURIComponent(source), shortCircuit: true };
  }
  try {
    return await next(specifier, context);
  } catch (error) {
    // @cloudflare/containers imports its own files without extensions, as bundlers allow.
    if (error?.code === 'ERR_MODULE_NOT_FOUND' && specifier.startsWith('.')) {
      return next(specifier + '.js', context);
    }
    throw error;
  }
}
