// fsd's JavaScript and TypeScript executor: one process per code context, for its whole life.
//
// Requests come as JSON lines on fd 3 and frames go out as JSON lines on fd 4, so nothing
// user code writes to stdout or stderr (even from a timer that fires after its call
// returned) can corrupt the protocol; fd 1 and 2 are the call's output, which fsd streams
// as it arrives. Before each call's `done` frame the executor writes the call's sentinel to
// fd 1 and fd 2, so fsd knows it has read all of the call's output; before each result it
// writes a mark (the sentinel with `-r<n>` before its last byte) to fd 1, so fsd sends the
// result after what was printed before it.
//
// Code runs as a script in one vm context per process: top-level `let`, `const` and
// `class` declarations stay for the next call, and the value of the last expression is the
// result (objects as JSON, anything else as text). Code with a top-level `await` runs as an
// async function with REPL semantics, as Node's REPL and the reference run it: its
// top-level declarations are hoisted into the context (so they stay for the next call) and
// the value of its last statement is the result (for a last declaration, the value
// assigned). The cell is parsed with the `typescript` package's parser, which also
// transpiles TypeScript (both found through NODE_PATH); without it, with the transform
// Node's own REPL uses, and TypeScript with Node's own type stripping (22.13 and later). SIGINT interrupts the running call
// and leaves the context usable.
'use strict';

const fs = require('fs');
const path = require('path');
const util = require('util');
const vm = require('vm');
const { createRequire } = require('module');

const FRAMES = 4;

function send(frame) {
  const data = Buffer.from(JSON.stringify(frame) + '\n');
  let offset = 0;
  while (offset < data.length) {
    offset += fs.writeSync(FRAMES, data, offset);
  }
}

function contextRequire(cwd) {
  return createRequire(path.join(cwd, '__fsd_context__.js'));
}

const sandbox = {
  console,
  process,
  Buffer,
  URL,
  URLSearchParams,
  TextEncoder,
  TextDecoder,
  AbortController,
  setTimeout,
  setInterval,
  setImmediate,
  clearTimeout,
  clearInterval,
  clearImmediate,
  queueMicrotask,
  structuredClone,
  fetch: globalThis.fetch,
  exports: {},
  require: contextRequire(process.cwd()),
  __dirname: process.cwd(),
  __filename: path.join(process.cwd(), '__fsd_context__.js'),
};
sandbox.module = { exports: sandbox.exports };
sandbox.global = sandbox;
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox);

let typescript = null;
// Whether the typescript package is found, once looked for.
let typescriptFound = null;
function loadTypescript() {
  if (typescript === null) {
    typescript = require('typescript');
  }
  return typescript;
}

function transpile(code) {
  if (!hasTypescript()) {
    // Node's own type stripping (22.13 and later), with enums and namespaces transformed.
    const { stripTypeScriptTypes } = require('module');
    if (typeof stripTypeScriptTypes === 'function') {
      return stripTypeScriptTypes(code, { mode: 'transform' });
    }
    const error = new Error(
      `TypeScript cells need Node 22.13 or later (it strips types itself; this is Node ${process.version}) ` +
        'or the typescript package where FSD_NODE_PATH points',
    );
    error.name = 'TranspileError';
    throw error;
  }
  loadTypescript();
  const out = typescript.transpileModule(code, {
    reportDiagnostics: true,
    compilerOptions: {
      target: typescript.ScriptTarget.ES2022,
      module: typescript.ModuleKind.CommonJS,
      isolatedModules: true,
      esModuleInterop: true,
    },
  });
  const errors = (out.diagnostics || []).filter(
    (d) => d.category === typescript.DiagnosticCategory.Error,
  );
  if (errors.length > 0) {
    const error = new Error(
      errors.map((d) => typescript.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n'),
    );
    error.name = 'TranspileError';
    throw error;
  }
  return out.outputText;
}

// A cell with a top-level `await`, as an async function whose top-level declarations are
// hoisted into the context: `const x = await f()` becomes `x = await f()` inside, with `x`
// declared in the context first (a `let`, or a `var` for `var`; a name the context already
// has is left as it is), functions and classes are assigned to names declared the same way
// (functions first, so they can be called before their text), and the last statement's
// value is returned. Returns the async function's text.
function asyncCell(code) {
  const ts = loadTypescript();
  const file = ts.createSourceFile('cell.js', code, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  const text = (node) => code.slice(node.getStart(file), node.end);
  const hoisted = [];
  const hoist = (name, kind) => hoisted.push({ name, kind });
  const names = (binding, into) => {
    if (ts.isIdentifier(binding)) {
      into.push(binding.text);
    } else {
      for (const element of binding.elements) {
        if (!ts.isOmittedExpression(element)) {
          names(element.name, into);
        }
      }
    }
    return into;
  };
  const functions = [];
  const body = [];
  const statements = file.statements;
  let last = null;
  statements.forEach((statement, index) => {
    const isLast = index === statements.length - 1;
    if (ts.isVariableStatement(statement)) {
      const flags = statement.declarationList.flags;
      const kind = flags & (ts.NodeFlags.Let | ts.NodeFlags.Const) ? 'let' : 'var';
      const parts = [];
      let lastName = null;
      for (const declaration of statement.declarationList.declarations) {
        const declared = names(declaration.name, []);
        declared.forEach((name) => hoist(name, kind));
        lastName = declared[declared.length - 1] || lastName;
        if (declaration.initializer) {
          parts.push(`void (${text(declaration.name)} = ${text(declaration.initializer)});`);
        }
      }
      body.push(parts.join(' '));
      if (isLast && lastName) {
        last = lastName;
      }
    } else if (ts.isFunctionDeclaration(statement) && statement.name) {
      hoist(statement.name.text, 'var');
      functions.push(`${statement.name.text} = ${text(statement)};`);
    } else if (ts.isClassDeclaration(statement) && statement.name) {
      hoist(statement.name.text, 'let');
      body.push(`${statement.name.text} = ${text(statement)};`);
    } else if (isLast && ts.isExpressionStatement(statement)) {
      body.push(`return (${text(statement.expression)});`);
    } else {
      body.push(text(statement));
    }
  });
  if (last !== null) {
    body.push(`return ${last};`);
  }
  for (const { name, kind } of hoisted) {
    try {
      vm.runInContext(`${kind} ${name};`, context);
    } catch (error) {
      // Declared by an earlier call: the cell assigns to that binding.
      if (!(error instanceof SyntaxError)) {
        throw error;
      }
    }
  }
  return `(async () => {\n${functions.concat(body).join('\n')}\n})()`;
}

// Without the typescript package: the transform Node's own REPL runs a top-level await
// with (`internal/repl/await`, reachable because fsd starts Node with --expose-internals),
// with the same semantics: declarations hoisted into the context (each declared on its
// own, so a name an earlier cell declared is assigned), the last statement's value
// returned. Null when the code has no top-level await.
function replCell(code) {
  const { processTopLevelAwait } = require('internal/repl/await');
  const wrapped = processTopLevelAwait(code);
  if (wrapped === null) {
    return null;
  }
  const start = wrapped.indexOf('(async () => {');
  for (const declaration of wrapped.slice(0, start).split(';')) {
    if (declaration.trim()) {
      try {
        vm.runInContext(`${declaration};`, context);
      } catch (error) {
        if (!(error instanceof SyntaxError)) {
          throw error;
        }
      }
    }
  }
  return `${wrapped.slice(start)}.then((returned) => returned && returned.value)`;
}

let interruptCurrent = null;
process.on('SIGINT', () => {
  // Outside synchronous code (vm's breakOnSigint covers that): a pending await.
  if (interruptCurrent) {
    interruptCurrent(new Error('Script execution interrupted.'));
  }
});

// The mark goes to fd 1 after what was printed (pipes are written synchronously on
// Linux), so the daemon puts the result there.
function result(format, data) {
  results += 1;
  if (sentinel) {
    try {
      fs.writeSync(1, `${sentinel.slice(0, -1)}-r${results}\u0001`);
    } catch (_) {
      // a closed stream: the result goes out at the end of the call
    }
  }
  send({ type: 'result', id: current, format, data });
}

function show(value) {
  if (value === undefined) {
    return;
  }
  if (value !== null && typeof value === 'object' && typeof value.then !== 'function') {
    try {
      const text = JSON.stringify(value);
      if (text !== undefined) {
        result('json', JSON.parse(text));
        return;
      }
    } catch (_) {
      // cycles, BigInt: shown as text below
    }
  }
  result('text', util.inspect(value));
}

function describe(error) {
  const isObject = error !== null && typeof error === 'object';
  const stack = isObject && typeof error.stack === 'string' ? error.stack : String(error);
  return {
    ename: (isObject && error.name) || 'Error',
    evalue: (isObject && error.message) || String(error),
    // The executor's own frames and Node's internals are not the user's code.
    traceback: stack
      .split('\n')
      .filter((line) => !/node_executor\.js|\(node:|at node:/.test(line)),
  };
}

let current = 0;
let sentinel = '';
let results = 0;

async function run(request) {
  let code = request.code;
  if (request.language === 'typescript') {
    code = transpile(code);
  }
  const filename = `cell-${request.id}.${request.language === 'typescript' ? 'ts' : 'js'}`;
  let script;
  try {
    script = new vm.Script(code, { filename });
  } catch (error) {
    if (!(error instanceof SyntaxError) || !/await/.test(error.message)) {
      throw error;
    }
    if (hasTypescript()) {
      script = new vm.Script(asyncCell(code), { filename, lineOffset: -1 });
    } else {
      // A cell Node's REPL would refuse (a top-level `return`) runs as an async function.
      const cell = replCell(code);
      script =
        cell === null
          ? new vm.Script(`(async () => {\n${code}\n})()`, { filename, lineOffset: -1 })
          : new vm.Script(cell, { filename });
    }
  }
  let value = script.runInContext(context, { breakOnSigint: true });
  if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
    value = await new Promise((resolve, reject) => {
      interruptCurrent = reject;
      value.then(resolve, reject);
    }).finally(() => {
      interruptCurrent = null;
    });
  }
  show(value);
}

function finish(request, ok, outside = false) {
  const sentinel = request.sentinel || '';
  for (const fd of [1, 2]) {
    try {
      fs.writeSync(fd, sentinel);
    } catch (_) {
      // a closed stream: nothing to mark
    }
  }
  send({ type: 'done', id: request.id, ok, ...(outside ? { outside } : {}) });
}

// The --confine roots the context's directory must lie beneath (from its init), and the
// directory's name as last noted (`remember`).
let roots = [];
let where = null;

// Notes the context's directory by name: after a cell, as code may have moved it. A
// directory a release took away (a lazy unmount) has no name to note.
function remember() {
  try {
    const here = process.cwd();
    if (here.startsWith('/')) {
      where = here;
    }
  } catch {
    // None to note.
  }
}

function beneath(here) {
  return roots.some((root) => here === root || here.startsWith(root.replace(/\/$/, '') + '/'));
}

// Back into this context's directory by name when the name has come to lead elsewhere (a
// restore mounted on it or above it, its release, a directory put in its place): code run
// in the directory the mount hides would read the files the restore replaced and write
// where nothing shows them. Under --confine, not out of the roots.
function reenter() {
  const name = where;
  if (name === null) {
    return;
  }
  try {
    const named = fs.statSync(name);
    const here = fs.statSync('.');
    if (named.dev === here.dev && named.ino === here.ino) {
      return;
    }
    if (roots.length && !beneath(fs.realpathSync(name))) {
      return;
    }
    process.chdir(name);
  } catch {
    // A name that leads nowhere: the context stays where it is.
  }
}

async function handle(request) {
  current = request.id;
  sentinel = request.sentinel || '';
  results = 0;
  if (request.op === 'init') {
    roots = request.within || [];
    if (request.cwd) {
      const before = process.cwd();
      try {
        process.chdir(request.cwd);
      } catch {
        finish(request, false);
        return;
      }
      // Confined: where the kernel says this process now is (getcwd), not the path it was
      // given, must lie beneath a root; a link swapped in on the way is caught.
      if (roots.length && !beneath(process.cwd())) {
        process.chdir(before);
        finish(request, false, true);
        return;
      }
      sandbox.require = contextRequire(request.cwd);
      sandbox.__dirname = request.cwd;
      sandbox.__filename = path.join(request.cwd, '__fsd_context__.js');
    }
    Object.assign(process.env, request.env || {});
    remember();
    finish(request, true);
    return;
  }
  reenter();
  let ok = true;
  try {
    await run(request);
  } catch (error) {
    ok = false;
    send({ type: 'error', id: request.id, ...describe(error) });
  }
  remember();
  finish(request, ok);
}

// Requests, one at a time in arrival order.
let pending = Promise.resolve();
let buffered = '';
const requests = fs.createReadStream(null, { fd: 3 });
requests.setEncoding('utf8');
requests.on('data', (chunk) => {
  buffered += chunk;
  let newline;
  while ((newline = buffered.indexOf('\n')) >= 0) {
    const line = buffered.slice(0, newline);
    buffered = buffered.slice(newline + 1);
    if (line.trim() === '') {
      continue;
    }
    const request = JSON.parse(line);
    pending = pending.then(() => handle(request));
  }
});
requests.on('end', () => process.exit(0));

send({ type: 'ready', node: process.version, typescript: hasTypescript() });

function hasTypescript() {
  if (typescriptFound === null) {
    typescriptFound = findTypescript();
  }
  return typescriptFound;
}

function findTypescript() {
  try {
    require.resolve('typescript');
    return true;
  } catch (_) {
    return false;
  }
}
