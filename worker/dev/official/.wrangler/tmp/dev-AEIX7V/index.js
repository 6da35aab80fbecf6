var __defProp = Object.defineProperty;
var __name = (target, value) => __defProp(target, "name", { value, configurable: true });

// ../node_modules/@cloudflare/sandbox/dist/dist-B_eXrP83.js
function getEnvString(env, key) {
  const value = env?.[key];
  return typeof value === "string" ? value : void 0;
}
__name(getEnvString, "getEnvString");
function filterEnvVars(envVars) {
  const filtered = {};
  for (const [key, value] of Object.entries(envVars)) if (value != null && typeof value === "string") filtered[key] = value;
  return filtered;
}
__name(filterEnvVars, "filterEnvVars");
function partitionEnvVars(envVars) {
  const toSet = {};
  const toUnset = [];
  for (const [key, value] of Object.entries(envVars)) if (value != null && typeof value === "string") toSet[key] = value;
  else toUnset.push(key);
  return {
    toSet,
    toUnset
  };
}
__name(partitionEnvVars, "partitionEnvVars");
var SENSITIVE_PARAMS = /([?&])(X-Amz-Credential|X-Amz-Signature|X-Amz-Security-Token|token|secret|password)=[^&\s"'`<>]*/gi;
function redactCredentials(text) {
  let result = text;
  let pos = 0;
  while (pos < result.length) {
    const httpPos = result.indexOf("http://", pos);
    const httpsPos = result.indexOf("https://", pos);
    let protocolPos = -1;
    let protocolLen = 0;
    if (httpPos === -1 && httpsPos === -1) break;
    if (httpPos !== -1 && (httpsPos === -1 || httpPos < httpsPos)) {
      protocolPos = httpPos;
      protocolLen = 7;
    } else {
      protocolPos = httpsPos;
      protocolLen = 8;
    }
    const searchStart = protocolPos + protocolLen;
    const atPos = result.indexOf("@", searchStart);
    let urlEnd = searchStart;
    while (urlEnd < result.length) {
      const char = result[urlEnd];
      if (/[\s"'`<>,;{}[\]]/.test(char)) break;
      urlEnd++;
    }
    if (atPos !== -1 && atPos < urlEnd) {
      result = `${result.substring(0, searchStart)}******${result.substring(atPos)}`;
      pos = searchStart + 6;
    } else pos = protocolPos + protocolLen;
  }
  return result;
}
__name(redactCredentials, "redactCredentials");
function redactSensitiveParams(input) {
  if (!input.includes("?") || !input.includes("=")) return input;
  return input.replace(SENSITIVE_PARAMS, "$1$2=REDACTED");
}
__name(redactSensitiveParams, "redactSensitiveParams");
function redactCommand(command) {
  return redactSensitiveParams(redactCredentials(command));
}
__name(redactCommand, "redactCommand");
function truncateForLog(value, maxLen = 120) {
  if (value.length <= maxLen) return {
    value,
    truncated: false
  };
  const cutoff = Math.max(0, maxLen - 3);
  return {
    value: `${value.substring(0, cutoff)}...`,
    truncated: true
  };
}
__name(truncateForLog, "truncateForLog");
var FALLBACK_REPO_NAME = "repository";
var DEFAULT_GIT_CLONE_TIMEOUT_MS = 6e5;
function extractRepoName(repoUrl) {
  try {
    const pathParts = new URL(repoUrl).pathname.split("/");
    const lastPart = pathParts[pathParts.length - 1];
    if (lastPart) return lastPart.replace(/\.git$/, "");
  } catch {
  }
  if (repoUrl.includes(":") || repoUrl.includes("/")) {
    const segments = repoUrl.split(/[:/]/).filter(Boolean);
    const lastSegment = segments[segments.length - 1];
    if (lastSegment) return lastSegment.replace(/\.git$/, "");
  }
  return FALLBACK_REPO_NAME;
}
__name(extractRepoName, "extractRepoName");
function sanitizeGitData(data) {
  if (typeof data === "string") return redactCommand(data);
  if (data === null || data === void 0) return data;
  if (Array.isArray(data)) return data.map((item) => sanitizeGitData(item));
  if (typeof data === "object") {
    const result = {};
    for (const [key, value] of Object.entries(data)) result[key] = sanitizeGitData(value);
    return result;
  }
  return data;
}
__name(sanitizeGitData, "sanitizeGitData");
var GitLogger = class GitLogger2 {
  static {
    __name(this, "GitLogger");
  }
  baseLogger;
  constructor(baseLogger) {
    this.baseLogger = baseLogger;
  }
  sanitizeContext(context) {
    return context ? sanitizeGitData(context) : context;
  }
  sanitizeError(error) {
    if (!error) return error;
    const sanitized = new Error(redactCommand(error.message));
    sanitized.name = error.name;
    if (error.stack) sanitized.stack = redactCommand(error.stack);
    const sanitizedRecord = sanitized;
    const errorRecord = error;
    for (const key of Object.keys(error)) if (key !== "message" && key !== "stack" && key !== "name") sanitizedRecord[key] = sanitizeGitData(errorRecord[key]);
    return sanitized;
  }
  debug(message, context) {
    this.baseLogger.debug(message, this.sanitizeContext(context));
  }
  info(message, context) {
    this.baseLogger.info(message, this.sanitizeContext(context));
  }
  warn(message, context) {
    this.baseLogger.warn(message, this.sanitizeContext(context));
  }
  error(message, error, context) {
    this.baseLogger.error(message, this.sanitizeError(error), this.sanitizeContext(context));
  }
  child(context) {
    const sanitized = sanitizeGitData(context);
    return new GitLogger2(this.baseLogger.child(sanitized));
  }
};
var Execution = class {
  static {
    __name(this, "Execution");
  }
  code;
  context;
  /**
  * All results from the execution
  */
  results = [];
  /**
  * Accumulated stdout and stderr
  */
  logs = {
    stdout: [],
    stderr: []
  };
  /**
  * Execution error if any
  */
  error;
  /**
  * Execution count (for interpreter)
  */
  executionCount;
  constructor(code, context) {
    this.code = code;
    this.context = context;
  }
  /**
  * Convert to a plain object for serialization
  */
  toJSON() {
    return {
      code: this.code,
      logs: this.logs,
      error: this.error,
      executionCount: this.executionCount,
      results: this.results.map((result) => ({
        text: result.text,
        html: result.html,
        png: result.png,
        jpeg: result.jpeg,
        svg: result.svg,
        latex: result.latex,
        markdown: result.markdown,
        javascript: result.javascript,
        json: result.json,
        chart: result.chart,
        data: result.data
      }))
    };
  }
};
var ResultImpl = class {
  static {
    __name(this, "ResultImpl");
  }
  text;
  html;
  png;
  jpeg;
  svg;
  latex;
  markdown;
  javascript;
  json;
  chart;
  data;
  constructor(raw) {
    this.text = raw.text || raw.data?.["text/plain"];
    this.html = raw.html || raw.data?.["text/html"];
    this.png = raw.png || raw.data?.["image/png"];
    this.jpeg = raw.jpeg || raw.data?.["image/jpeg"];
    this.svg = raw.svg || raw.data?.["image/svg+xml"];
    this.latex = raw.latex || raw.data?.["text/latex"];
    this.markdown = raw.markdown || raw.data?.["text/markdown"];
    this.javascript = raw.javascript || raw.data?.["application/javascript"];
    this.json = raw.json || raw.data?.["application/json"];
    this.chart = raw.chart;
    this.data = raw.data;
  }
  formats() {
    const fmts = [];
    if (this.text) fmts.push("text");
    if (this.html) fmts.push("html");
    if (this.png) fmts.push("png");
    if (this.jpeg) fmts.push("jpeg");
    if (this.svg) fmts.push("svg");
    if (this.latex) fmts.push("latex");
    if (this.markdown) fmts.push("markdown");
    if (this.javascript) fmts.push("javascript");
    if (this.json) fmts.push("json");
    if (this.chart) fmts.push("chart");
    return fmts;
  }
};
var DEBUG_ON_SUCCESS = /* @__PURE__ */ new Set([
  "session.create",
  "session.destroy",
  "file.read",
  "file.write",
  "file.delete",
  "file.mkdir"
]);
function resolveLogLevel(payload, options) {
  if (payload.outcome === "error") return "error";
  if (options?.successLevel) return options.successLevel;
  if (payload.origin === "internal") return "debug";
  if (DEBUG_ON_SUCCESS.has(payload.event)) return "debug";
  return "info";
}
__name(resolveLogLevel, "resolveLogLevel");
function sanitizeError(error) {
  if (!error) return void 0;
  const sanitized = new Error(redactCommand(error.message));
  sanitized.name = error.name;
  sanitized.stack = error.stack ? redactCommand(error.stack) : void 0;
  return sanitized;
}
__name(sanitizeError, "sanitizeError");
function sanitizePayload(payload) {
  if (payload.command === void 0) return { commandTruncated: false };
  const { value, truncated } = truncateForLog(redactCommand(payload.command));
  return {
    sanitizedCommand: value,
    commandTruncated: truncated
  };
}
__name(sanitizePayload, "sanitizePayload");
function buildMessage(payload, sanitizedCommand) {
  const { event } = payload;
  if (event === "version.check") {
    const parts$1 = ["version.check"];
    if (payload.sdkVersion) parts$1.push(`sdk=${payload.sdkVersion}`);
    if (payload.containerVersion) parts$1.push(`container=${payload.containerVersion}`);
    if (payload.versionOutcome && payload.versionOutcome !== "compatible") parts$1.push(`(${payload.versionOutcome})`);
    return parts$1.join(" ");
  }
  const parts = [event, payload.outcome];
  if (sanitizedCommand !== void 0) parts.push(sanitizedCommand);
  else if (payload.command !== void 0) {
    const { value } = truncateForLog(redactCommand(payload.command));
    parts.push(value);
  } else if (payload.path !== void 0) parts.push(payload.path);
  else if (event.includes("session") && payload.sessionId !== void 0) parts.push(payload.sessionId);
  else if (payload.port !== void 0) parts.push(String(payload.port));
  else if (payload.repoUrl !== void 0) {
    let gitContext = payload.repoUrl;
    if (payload.branch !== void 0) gitContext += ` ${payload.branch}`;
    parts.push(gitContext);
  } else if (payload.pid !== void 0) parts.push(String(payload.pid));
  else if (payload.backupId !== void 0) parts.push(payload.backupId);
  else if (payload.repoPath !== void 0) {
    let gitContext = payload.repoPath;
    if (payload.branch !== void 0) gitContext += ` branch=${payload.branch}`;
    parts.push(gitContext);
  } else if (payload.mountsProcessed !== void 0) {
    let destroyContext = `${payload.mountsProcessed} mounts`;
    if (payload.mountFailures) destroyContext += `, ${payload.mountFailures} failed`;
    parts.push(destroyContext);
  } else if (payload.mountPath !== void 0) parts.push(payload.mountPath);
  if (payload.outcome === "error") {
    if (payload.errorMessage !== void 0) parts.push(`\u2014 ${payload.errorMessage}`);
    else if (payload.exitCode !== void 0) parts.push(`\u2014 exitCode=${payload.exitCode}`);
  }
  const durationSuffix = payload.sizeBytes !== void 0 ? `(${payload.durationMs}ms, ${payload.sizeBytes}B)` : `(${payload.durationMs}ms)`;
  parts.push(durationSuffix);
  return parts.join(" ");
}
__name(buildMessage, "buildMessage");
function logCanonicalEvent(logger, payload, options) {
  const resolvedErrorMessage = payload.errorMessage ?? payload.error?.message;
  const sanitizedErrorMessage = resolvedErrorMessage ? redactCommand(resolvedErrorMessage) : void 0;
  const enrichedPayload = sanitizedErrorMessage !== void 0 ? {
    ...payload,
    errorMessage: sanitizedErrorMessage
  } : payload;
  const { sanitizedCommand, commandTruncated } = sanitizePayload(enrichedPayload);
  const message = buildMessage(enrichedPayload, sanitizedCommand);
  const context = {};
  for (const [key, value] of Object.entries(enrichedPayload)) {
    if (key === "error") continue;
    context[key] = value;
  }
  if (sanitizedCommand !== void 0) {
    context.command = sanitizedCommand;
    if (commandTruncated) context.commandTruncated = true;
  }
  const level = resolveLogLevel(enrichedPayload, options);
  if (level === "error") logger.error(message, sanitizeError(payload.error), context);
  else if (level === "warn") logger.warn(message, context);
  else if (level === "debug") logger.debug(message, context);
  else logger.info(message, context);
}
__name(logCanonicalEvent, "logCanonicalEvent");
var LogLevel;
(function(LogLevel$1) {
  LogLevel$1[LogLevel$1["DEBUG"] = 0] = "DEBUG";
  LogLevel$1[LogLevel$1["INFO"] = 1] = "INFO";
  LogLevel$1[LogLevel$1["WARN"] = 2] = "WARN";
  LogLevel$1[LogLevel$1["ERROR"] = 3] = "ERROR";
})(LogLevel || (LogLevel = {}));
var COLORS = {
  reset: "\x1B[0m",
  debug: "\x1B[36m",
  info: "\x1B[32m",
  warn: "\x1B[33m",
  error: "\x1B[31m",
  dim: "\x1B[2m"
};
var CloudflareLogger = class CloudflareLogger2 {
  static {
    __name(this, "CloudflareLogger");
  }
  baseContext;
  minLevel;
  outputMode;
  /**
  * Create a new CloudflareLogger
  *
  * @param baseContext Base context included in all log entries
  * @param minLevel Minimum log level to output (default: INFO)
  * @param outputMode How log entries are formatted and emitted (default: 'structured')
  */
  constructor(baseContext, minLevel = LogLevel.INFO, outputMode = "structured") {
    this.baseContext = baseContext;
    this.minLevel = minLevel;
    this.outputMode = outputMode;
  }
  /**
  * Log debug-level message
  */
  debug(message, context) {
    if (this.shouldLog(LogLevel.DEBUG)) {
      const logData = this.buildLogData("debug", message, context);
      this.output(console.log, logData);
    }
  }
  /**
  * Log info-level message
  */
  info(message, context) {
    if (this.shouldLog(LogLevel.INFO)) {
      const logData = this.buildLogData("info", message, context);
      this.output(console.log, logData);
    }
  }
  /**
  * Log warning-level message
  */
  warn(message, context) {
    if (this.shouldLog(LogLevel.WARN)) {
      const logData = this.buildLogData("warn", message, context);
      this.output(console.warn, logData);
    }
  }
  /**
  * Log error-level message
  */
  error(message, error, context) {
    if (this.shouldLog(LogLevel.ERROR)) {
      const logData = this.buildLogData("error", message, context, error);
      this.output(console.error, logData);
    }
  }
  /**
  * Create a child logger with additional context
  */
  child(context) {
    return new CloudflareLogger2({
      ...this.baseContext,
      ...context
    }, this.minLevel, this.outputMode);
  }
  /**
  * Check if a log level should be output
  */
  shouldLog(level) {
    return level >= this.minLevel;
  }
  /**
  * Build log data object
  */
  buildLogData(level, message, context, error) {
    const logData = {
      level,
      message,
      ...this.baseContext,
      ...context,
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    };
    if (error) logData.error = {
      message: error.message,
      stack: error.stack,
      name: error.name
    };
    return logData;
  }
  /**
  * Output log data using the configured output mode
  */
  output(consoleFn, data) {
    switch (this.outputMode) {
      case "pretty":
        this.outputPretty(consoleFn, data);
        break;
      case "json-line":
        this.outputJsonLine(consoleFn, data);
        break;
      case "structured":
        this.outputStructured(consoleFn, data);
        break;
    }
  }
  /**
  * Output as JSON string (container stdout — parsed by Containers pipeline)
  */
  outputJsonLine(consoleFn, data) {
    consoleFn(JSON.stringify(data));
  }
  /**
  * Output as raw object (Workers/DOs — Workers Logs auto-indexes fields)
  */
  outputStructured(consoleFn, data) {
    consoleFn(data);
  }
  /**
  * Output as pretty-printed, colored text (development)
  *
  * Each log event is a single consoleFn() call so it appears as one entry
  * in the Cloudflare dashboard. Context is rendered inline as compact key=value pairs.
  *
  * Format: LEVEL [component] message trace=tr_... key=value key=value
  */
  outputPretty(consoleFn, data) {
    const { level, message: msg, timestamp, traceId, component, sandboxId, sessionId, processId, commandId, durationMs, serviceVersion, instanceId, error, ...rest } = data;
    const levelStr = String(level || "INFO").toUpperCase();
    const levelColor = this.getLevelColor(levelStr);
    const componentBadge = component ? `[${component}]` : "";
    let logLine = `${timestamp ? `${COLORS.dim}${new Date(timestamp).toISOString().substring(11, 23)}${COLORS.reset} ` : ""}${levelColor}${levelStr.padEnd(5)}${COLORS.reset} ${componentBadge} ${msg}`;
    const pairs = [];
    if (traceId) pairs.push(`trace=${String(traceId).substring(0, 12)}`);
    if (commandId) pairs.push(`cmd=${String(commandId).substring(0, 12)}`);
    if (sandboxId) pairs.push(`sandbox=${sandboxId}`);
    if (sessionId) pairs.push(`session=${String(sessionId).substring(0, 12)}`);
    if (processId) pairs.push(`proc=${processId}`);
    if (durationMs !== void 0) pairs.push(`dur=${durationMs}ms`);
    for (const [key, value] of Object.entries(rest)) {
      if (value === void 0 || value === null) continue;
      const v = typeof value === "object" ? JSON.stringify(value) : this.sanitizePrettyValue(String(value));
      pairs.push(`${key}=${v}`);
    }
    if (error && typeof error === "object") {
      const errorObj = error;
      if (errorObj.name) pairs.push(`err.name=${this.sanitizePrettyValue(errorObj.name)}`);
      if (errorObj.message) pairs.push(`err.msg=${this.sanitizePrettyValue(errorObj.message)}`);
      if (errorObj.stack) pairs.push(`err.stack=${this.sanitizePrettyValue(errorObj.stack)}`);
    }
    if (pairs.length > 0) logLine += ` ${COLORS.dim}${pairs.join(" ")}${COLORS.reset}`;
    consoleFn(logLine);
  }
  /**
  * Collapse newlines so a single consoleFn() call stays on one line.
  * Cloudflare's log pipeline splits on literal newlines, which fragments
  * stack traces and multi-line error messages into separate entries.
  */
  sanitizePrettyValue(value) {
    return value.replace(/\r/g, "\\r").replace(/\n/g, "\\n");
  }
  /**
  * Get ANSI color code for log level
  */
  getLevelColor(level) {
    switch (level.toLowerCase()) {
      case "debug":
        return COLORS.debug;
      case "info":
        return COLORS.info;
      case "warn":
        return COLORS.warn;
      case "error":
        return COLORS.error;
      default:
        return COLORS.reset;
    }
  }
};
var TraceContext = class TraceContext2 {
  static {
    __name(this, "TraceContext");
  }
  /**
  * HTTP header name for trace ID propagation
  */
  static TRACE_HEADER = "X-Trace-Id";
  /**
  * Generate a new trace ID
  *
  * Format: "tr_" + 16 random hex characters
  * Example: "tr_7f3a9b2c4e5d6f1a"
  *
  * @returns Newly generated trace ID
  */
  static generate() {
    return `tr_${crypto.randomUUID().replace(/-/g, "").substring(0, 16)}`;
  }
  /**
  * Extract trace ID from HTTP request headers
  *
  * @param headers Request headers
  * @returns Trace ID if present, null otherwise
  */
  static fromHeaders(headers) {
    return headers.get(TraceContext2.TRACE_HEADER);
  }
  /**
  * Create headers object with trace ID for outgoing requests
  *
  * @param traceId Trace ID to include
  * @returns Headers object with X-Trace-Id set
  */
  static toHeaders(traceId) {
    return { [TraceContext2.TRACE_HEADER]: traceId };
  }
  /**
  * Get the header name used for trace ID propagation
  *
  * @returns Header name ("X-Trace-Id")
  */
  static getHeaderName() {
    return TraceContext2.TRACE_HEADER;
  }
};
function createNoOpLogger() {
  return {
    debug: /* @__PURE__ */ __name(() => {
    }, "debug"),
    info: /* @__PURE__ */ __name(() => {
    }, "info"),
    warn: /* @__PURE__ */ __name(() => {
    }, "warn"),
    error: /* @__PURE__ */ __name(() => {
    }, "error"),
    child: /* @__PURE__ */ __name(() => createNoOpLogger(), "child")
  };
}
__name(createNoOpLogger, "createNoOpLogger");
function createLogger(context) {
  const minLevel = getLogLevelFromEnv();
  const outputMode = getOutputMode(context.component);
  return new CloudflareLogger({
    ...context,
    traceId: context.traceId || TraceContext.generate(),
    component: context.component,
    serviceVersion: context.serviceVersion || getEnvVar("SANDBOX_VERSION") || void 0,
    instanceId: context.instanceId || getEnvVar("HOSTNAME") || getEnvVar("SANDBOX_INSTANCE_ID") || void 0
  }, minLevel, outputMode);
}
__name(createLogger, "createLogger");
function getLogLevelFromEnv() {
  switch ((getEnvVar("SANDBOX_LOG_LEVEL") || "info").toLowerCase()) {
    case "debug":
      return LogLevel.DEBUG;
    case "info":
      return LogLevel.INFO;
    case "warn":
      return LogLevel.WARN;
    case "error":
      return LogLevel.ERROR;
    default:
      return LogLevel.INFO;
  }
}
__name(getLogLevelFromEnv, "getLogLevelFromEnv");
function getOutputMode(component) {
  if (getEnvVar("SANDBOX_LOG_FORMAT")?.toLowerCase() === "pretty") return "pretty";
  if (component === "container" || component === "executor") return "json-line";
  return "structured";
}
__name(getOutputMode, "getOutputMode");
function getEnvVar(name) {
  if (typeof process !== "undefined" && process.env) return process.env[name];
  if (typeof Bun !== "undefined") {
    const bunEnv = Bun.env;
    if (bunEnv) return bunEnv[name];
  }
}
__name(getEnvVar, "getEnvVar");
function shellEscape(str) {
  return `'${str.replace(/'/g, "'\\''")}'`;
}
__name(shellEscape, "shellEscape");
function parseSSEFrames(buffer, currentEvent = { data: [] }) {
  const events2 = [];
  let i = 0;
  while (i < buffer.length) {
    const newlineIndex = buffer.indexOf("\n", i);
    if (newlineIndex === -1) break;
    const rawLine = buffer.substring(i, newlineIndex);
    const line = rawLine.endsWith("\r") ? rawLine.slice(0, -1) : rawLine;
    i = newlineIndex + 1;
    if (line === "" && currentEvent.data.length > 0) {
      events2.push({
        event: currentEvent.event,
        data: currentEvent.data.join("\n")
      });
      currentEvent = { data: [] };
      continue;
    }
    if (line.startsWith("event:")) {
      currentEvent.event = line.startsWith("event: ") ? line.substring(7) : line.substring(6);
      continue;
    }
    if (line.startsWith("data:")) {
      const value = line.startsWith("data: ") ? line.substring(6) : line.substring(5);
      currentEvent.data.push(value);
    }
  }
  return {
    events: events2,
    remaining: buffer.substring(i),
    currentEvent
  };
}
__name(parseSSEFrames, "parseSSEFrames");
function isWSResponse(msg) {
  return typeof msg === "object" && msg !== null && "type" in msg && msg.type === "response";
}
__name(isWSResponse, "isWSResponse");
function isWSStreamChunk(msg) {
  return typeof msg === "object" && msg !== null && "type" in msg && msg.type === "stream";
}
__name(isWSStreamChunk, "isWSStreamChunk");
function isWSError(msg) {
  return typeof msg === "object" && msg !== null && "type" in msg && msg.type === "error";
}
__name(isWSError, "isWSError");
function generateRequestId() {
  return `ws_${Date.now()}_${Math.random().toString(36).substring(2, 10)}`;
}
__name(generateRequestId, "generateRequestId");

// ../node_modules/@cloudflare/sandbox/dist/errors-CpkKPbWC.js
var ErrorCode = {
  FILE_NOT_FOUND: "FILE_NOT_FOUND",
  PERMISSION_DENIED: "PERMISSION_DENIED",
  FILE_EXISTS: "FILE_EXISTS",
  IS_DIRECTORY: "IS_DIRECTORY",
  NOT_DIRECTORY: "NOT_DIRECTORY",
  FILE_TOO_LARGE: "FILE_TOO_LARGE",
  NO_SPACE: "NO_SPACE",
  TOO_MANY_FILES: "TOO_MANY_FILES",
  RESOURCE_BUSY: "RESOURCE_BUSY",
  READ_ONLY: "READ_ONLY",
  NAME_TOO_LONG: "NAME_TOO_LONG",
  TOO_MANY_LINKS: "TOO_MANY_LINKS",
  FILESYSTEM_ERROR: "FILESYSTEM_ERROR",
  COMMAND_NOT_FOUND: "COMMAND_NOT_FOUND",
  COMMAND_PERMISSION_DENIED: "COMMAND_PERMISSION_DENIED",
  INVALID_COMMAND: "INVALID_COMMAND",
  COMMAND_EXECUTION_ERROR: "COMMAND_EXECUTION_ERROR",
  STREAM_START_ERROR: "STREAM_START_ERROR",
  PROCESS_NOT_FOUND: "PROCESS_NOT_FOUND",
  PROCESS_PERMISSION_DENIED: "PROCESS_PERMISSION_DENIED",
  PROCESS_ERROR: "PROCESS_ERROR",
  SESSION_ALREADY_EXISTS: "SESSION_ALREADY_EXISTS",
  SESSION_DESTROYED: "SESSION_DESTROYED",
  SESSION_TERMINATED: "SESSION_TERMINATED",
  PORT_ALREADY_EXPOSED: "PORT_ALREADY_EXPOSED",
  PORT_IN_USE: "PORT_IN_USE",
  PORT_NOT_EXPOSED: "PORT_NOT_EXPOSED",
  INVALID_PORT_NUMBER: "INVALID_PORT_NUMBER",
  INVALID_PORT: "INVALID_PORT",
  SERVICE_NOT_RESPONDING: "SERVICE_NOT_RESPONDING",
  PORT_OPERATION_ERROR: "PORT_OPERATION_ERROR",
  CUSTOM_DOMAIN_REQUIRED: "CUSTOM_DOMAIN_REQUIRED",
  GIT_REPOSITORY_NOT_FOUND: "GIT_REPOSITORY_NOT_FOUND",
  GIT_BRANCH_NOT_FOUND: "GIT_BRANCH_NOT_FOUND",
  GIT_AUTH_FAILED: "GIT_AUTH_FAILED",
  GIT_NETWORK_ERROR: "GIT_NETWORK_ERROR",
  INVALID_GIT_URL: "INVALID_GIT_URL",
  GIT_CLONE_FAILED: "GIT_CLONE_FAILED",
  GIT_CHECKOUT_FAILED: "GIT_CHECKOUT_FAILED",
  GIT_OPERATION_FAILED: "GIT_OPERATION_FAILED",
  BUCKET_MOUNT_ERROR: "BUCKET_MOUNT_ERROR",
  BUCKET_UNMOUNT_ERROR: "BUCKET_UNMOUNT_ERROR",
  S3FS_MOUNT_ERROR: "S3FS_MOUNT_ERROR",
  MISSING_CREDENTIALS: "MISSING_CREDENTIALS",
  INVALID_MOUNT_CONFIG: "INVALID_MOUNT_CONFIG",
  BACKUP_CREATE_FAILED: "BACKUP_CREATE_FAILED",
  BACKUP_RESTORE_FAILED: "BACKUP_RESTORE_FAILED",
  BACKUP_NOT_FOUND: "BACKUP_NOT_FOUND",
  BACKUP_EXPIRED: "BACKUP_EXPIRED",
  INVALID_BACKUP_CONFIG: "INVALID_BACKUP_CONFIG",
  INTERPRETER_NOT_READY: "INTERPRETER_NOT_READY",
  CONTEXT_NOT_FOUND: "CONTEXT_NOT_FOUND",
  CODE_EXECUTION_ERROR: "CODE_EXECUTION_ERROR",
  PYTHON_NOT_AVAILABLE: "PYTHON_NOT_AVAILABLE",
  JAVASCRIPT_NOT_AVAILABLE: "JAVASCRIPT_NOT_AVAILABLE",
  OPENCODE_STARTUP_FAILED: "OPENCODE_STARTUP_FAILED",
  PROCESS_READY_TIMEOUT: "PROCESS_READY_TIMEOUT",
  PROCESS_EXITED_BEFORE_READY: "PROCESS_EXITED_BEFORE_READY",
  WATCH_NOT_FOUND: "WATCH_NOT_FOUND",
  WATCH_START_ERROR: "WATCH_START_ERROR",
  WATCH_STOP_ERROR: "WATCH_STOP_ERROR",
  VALIDATION_FAILED: "VALIDATION_FAILED",
  INVALID_JSON_RESPONSE: "INVALID_JSON_RESPONSE",
  UNKNOWN_ERROR: "UNKNOWN_ERROR",
  INTERNAL_ERROR: "INTERNAL_ERROR",
  RPC_TRANSPORT_ERROR: "RPC_TRANSPORT_ERROR",
  CONTAINER_UNAVAILABLE: "CONTAINER_UNAVAILABLE",
  OPERATION_INTERRUPTED: "OPERATION_INTERRUPTED"
};
var ERROR_STATUS_MAP = {
  [ErrorCode.FILE_NOT_FOUND]: 404,
  [ErrorCode.COMMAND_NOT_FOUND]: 404,
  [ErrorCode.PROCESS_NOT_FOUND]: 404,
  [ErrorCode.PORT_NOT_EXPOSED]: 404,
  [ErrorCode.GIT_REPOSITORY_NOT_FOUND]: 404,
  [ErrorCode.GIT_BRANCH_NOT_FOUND]: 404,
  [ErrorCode.CONTEXT_NOT_FOUND]: 404,
  [ErrorCode.WATCH_NOT_FOUND]: 404,
  [ErrorCode.IS_DIRECTORY]: 400,
  [ErrorCode.NOT_DIRECTORY]: 400,
  [ErrorCode.INVALID_COMMAND]: 400,
  [ErrorCode.INVALID_PORT_NUMBER]: 400,
  [ErrorCode.INVALID_PORT]: 400,
  [ErrorCode.INVALID_GIT_URL]: 400,
  [ErrorCode.CUSTOM_DOMAIN_REQUIRED]: 400,
  [ErrorCode.INVALID_JSON_RESPONSE]: 400,
  [ErrorCode.NAME_TOO_LONG]: 400,
  [ErrorCode.VALIDATION_FAILED]: 400,
  [ErrorCode.MISSING_CREDENTIALS]: 400,
  [ErrorCode.INVALID_MOUNT_CONFIG]: 400,
  [ErrorCode.GIT_AUTH_FAILED]: 401,
  [ErrorCode.PERMISSION_DENIED]: 403,
  [ErrorCode.COMMAND_PERMISSION_DENIED]: 403,
  [ErrorCode.PROCESS_PERMISSION_DENIED]: 403,
  [ErrorCode.READ_ONLY]: 403,
  [ErrorCode.FILE_EXISTS]: 409,
  [ErrorCode.PORT_ALREADY_EXPOSED]: 409,
  [ErrorCode.PORT_IN_USE]: 409,
  [ErrorCode.RESOURCE_BUSY]: 409,
  [ErrorCode.SESSION_ALREADY_EXISTS]: 409,
  [ErrorCode.OPERATION_INTERRUPTED]: 409,
  [ErrorCode.SESSION_DESTROYED]: 410,
  [ErrorCode.SESSION_TERMINATED]: 410,
  [ErrorCode.FILE_TOO_LARGE]: 413,
  [ErrorCode.SERVICE_NOT_RESPONDING]: 502,
  [ErrorCode.GIT_NETWORK_ERROR]: 502,
  [ErrorCode.BACKUP_NOT_FOUND]: 404,
  [ErrorCode.BACKUP_EXPIRED]: 400,
  [ErrorCode.INVALID_BACKUP_CONFIG]: 400,
  [ErrorCode.BACKUP_CREATE_FAILED]: 500,
  [ErrorCode.BACKUP_RESTORE_FAILED]: 500,
  [ErrorCode.PYTHON_NOT_AVAILABLE]: 501,
  [ErrorCode.JAVASCRIPT_NOT_AVAILABLE]: 501,
  [ErrorCode.INTERPRETER_NOT_READY]: 503,
  [ErrorCode.OPENCODE_STARTUP_FAILED]: 503,
  [ErrorCode.RPC_TRANSPORT_ERROR]: 503,
  [ErrorCode.CONTAINER_UNAVAILABLE]: 503,
  [ErrorCode.PROCESS_READY_TIMEOUT]: 408,
  [ErrorCode.PROCESS_EXITED_BEFORE_READY]: 500,
  [ErrorCode.NO_SPACE]: 500,
  [ErrorCode.TOO_MANY_FILES]: 500,
  [ErrorCode.TOO_MANY_LINKS]: 500,
  [ErrorCode.FILESYSTEM_ERROR]: 500,
  [ErrorCode.COMMAND_EXECUTION_ERROR]: 500,
  [ErrorCode.STREAM_START_ERROR]: 500,
  [ErrorCode.PROCESS_ERROR]: 500,
  [ErrorCode.PORT_OPERATION_ERROR]: 500,
  [ErrorCode.GIT_CLONE_FAILED]: 500,
  [ErrorCode.GIT_CHECKOUT_FAILED]: 500,
  [ErrorCode.GIT_OPERATION_FAILED]: 500,
  [ErrorCode.CODE_EXECUTION_ERROR]: 500,
  [ErrorCode.BUCKET_MOUNT_ERROR]: 500,
  [ErrorCode.BUCKET_UNMOUNT_ERROR]: 500,
  [ErrorCode.S3FS_MOUNT_ERROR]: 500,
  [ErrorCode.WATCH_START_ERROR]: 500,
  [ErrorCode.WATCH_STOP_ERROR]: 500,
  [ErrorCode.UNKNOWN_ERROR]: 500,
  [ErrorCode.INTERNAL_ERROR]: 500
};
function getHttpStatus(code) {
  return ERROR_STATUS_MAP[code] || 500;
}
__name(getHttpStatus, "getHttpStatus");
function getSuggestion(code, context) {
  switch (code) {
    case ErrorCode.FILE_NOT_FOUND:
      return `Ensure the file exists at ${context.path} before attempting to access it`;
    case ErrorCode.FILE_EXISTS:
      return `File already exists at ${context.path}. Use a different path or delete the existing file first`;
    case ErrorCode.COMMAND_NOT_FOUND:
      return `Check that "${context.command}" is installed and available in the system PATH`;
    case ErrorCode.PROCESS_NOT_FOUND:
      return "Verify the process ID is correct and the process has not already exited";
    case ErrorCode.PORT_NOT_EXPOSED:
      return `Port ${context.port} is not currently available for this operation`;
    case ErrorCode.PORT_ALREADY_EXPOSED:
      return `Port ${context.port} already has preview URL authorization or activation state`;
    case ErrorCode.PORT_IN_USE:
      return `Port ${context.port} is already in use by another service. Choose a different port`;
    case ErrorCode.SESSION_ALREADY_EXISTS:
      return `Session "${context.sessionId}" already exists. Use a different session ID or reuse the existing session`;
    case ErrorCode.SESSION_DESTROYED:
      return `Session "${context.sessionId}" was destroyed. Create a new session to continue executing commands`;
    case ErrorCode.SESSION_TERMINATED:
      return `Session "${context.sessionId}" ended because its shell exited (exit code: ${context.exitCode ?? "unknown"}). Session-local state (env vars, cwd, shell functions) has been lost. Retry the call to start a fresh session, or call createSession() with the same id to recreate it explicitly`;
    case ErrorCode.INVALID_PORT:
      return `Port must be between 1 and 65535. Port ${context.port} is ${context.reason}`;
    case ErrorCode.GIT_REPOSITORY_NOT_FOUND:
      return "Verify the repository URL is correct and accessible";
    case ErrorCode.GIT_AUTH_FAILED:
      return "Check authentication credentials or use a public repository";
    case ErrorCode.GIT_BRANCH_NOT_FOUND:
      return `Branch "${context.branch}" does not exist in the repository. Check the branch name or use the default branch`;
    case ErrorCode.INTERPRETER_NOT_READY:
      return context.retryAfter ? `Code interpreter is starting up. Retry after ${context.retryAfter} seconds` : "Code interpreter is not ready. Please wait a moment and try again";
    case ErrorCode.CONTEXT_NOT_FOUND:
      return `Context "${context.contextId}" does not exist. Create a context first using createContext()`;
    case ErrorCode.VALIDATION_FAILED:
      return "Check the request parameters and ensure they match the required format";
    case ErrorCode.NO_SPACE:
      return "Not enough disk space available. Consider cleaning up temporary files or increasing storage";
    case ErrorCode.PERMISSION_DENIED:
      return "Operation not permitted. Check file/directory permissions";
    case ErrorCode.IS_DIRECTORY:
      return `Cannot perform this operation on a directory. Path ${context.path} is a directory`;
    case ErrorCode.NOT_DIRECTORY:
      return `Expected a directory but found a file at ${context.path}`;
    case ErrorCode.RESOURCE_BUSY:
      return "Resource is currently in use. Wait for the current operation to complete";
    case ErrorCode.READ_ONLY:
      return "Cannot modify a read-only resource";
    case ErrorCode.SERVICE_NOT_RESPONDING:
      return "Service is not responding. Check if the service is running and accessible";
    case ErrorCode.BACKUP_NOT_FOUND:
      return `Backup "${context.backupId}" does not exist. Verify the backup ID is correct`;
    case ErrorCode.BACKUP_EXPIRED:
      return `Backup "${context.backupId}" has expired. Create a new backup`;
    case ErrorCode.INVALID_BACKUP_CONFIG:
      return `Invalid backup configuration: ${context.reason}`;
    case ErrorCode.BACKUP_CREATE_FAILED:
      return "Backup creation failed. Check that the directory exists and you have sufficient disk space";
    case ErrorCode.BACKUP_RESTORE_FAILED:
      return "Backup restoration failed. The archive may be corrupted or the target directory may be in use";
    case ErrorCode.CONTAINER_UNAVAILABLE:
      return "The sandbox container is temporarily unavailable. Retry the same operation \u2014 it will succeed once the container is ready.";
    case ErrorCode.OPERATION_INTERRUPTED:
      return "The sandbox operation was interrupted by a runtime change. Retry only if the operation is idempotent, or verify sandbox state before retrying.";
    case ErrorCode.RPC_TRANSPORT_ERROR:
      switch (context.kind) {
        case "peer_closed":
          return "The container closed the WebSocket mid-call (likely a container restart, eviction, or crash). Retry the call \u2014 the SDK will open a fresh connection.";
        case "connection_failed":
          return "The WebSocket connection failed. Retry the call; if the failure persists, check container health and network connectivity.";
        case "upgrade_failed":
          return "The WebSocket upgrade was rejected by the container. Verify the container is running and reachable on the configured port.";
        case "invalid_frame":
          return "The container sent a frame the RPC transport cannot handle. This usually indicates a version mismatch between the SDK and the container image.";
        case "protocol_error":
          return "The peer sent a malformed RPC message (could not parse the wire format). This usually indicates a version mismatch between the SDK and the container image.";
        case "session_disposed":
          return "The RPC session was disposed while a call was in flight. Avoid reusing stubs after disconnect(); the next method call will reconnect automatically.";
        default:
          return "The RPC transport raised an error. Retry the call \u2014 the SDK will open a fresh connection.";
      }
    default:
      return;
  }
}
__name(getSuggestion, "getSuggestion");

// ../node_modules/@cloudflare/containers/dist/lib/helpers.js
function generateId(length = 9) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const bytes = new Uint8Array(length);
  crypto.getRandomValues(bytes);
  let result = "";
  for (let i = 0; i < length; i++) {
    result += alphabet[bytes[i] % alphabet.length];
  }
  return result;
}
__name(generateId, "generateId");
function parseTimeExpression(timeExpression) {
  if (typeof timeExpression === "number") {
    return timeExpression;
  }
  if (typeof timeExpression === "string") {
    const match = timeExpression.match(/^(\d+)([smh])$/);
    if (!match) {
      throw new Error(`invalid time expression ${timeExpression}`);
    }
    const value = parseInt(match[1]);
    const unit = match[2];
    switch (unit) {
      case "s":
        return value;
      case "m":
        return value * 60;
      case "h":
        return value * 60 * 60;
      default:
        throw new Error(`unknown time unit ${unit}`);
    }
  }
  throw new Error(`invalid type for a time expression: ${typeof timeExpression}`);
}
__name(parseTimeExpression, "parseTimeExpression");

// ../node_modules/@cloudflare/containers/dist/lib/container.js
import { DurableObject, WorkerEntrypoint } from "cloudflare:workers";
var NO_CONTAINER_INSTANCE_ERROR = "there is no container instance that can be provided to this durable object";
var RATE_LIMITED_ERROR = "you are requesting too many containers per second";
var RUNTIME_SIGNALLED_ERROR = "runtime signalled the container to exit:";
var UNEXPECTED_EXIT_ERROR = "container exited with unexpected exit code:";
var NOT_LISTENING_ERROR = "the container is not listening";
var CONTAINER_STATE_KEY = "__CF_CONTAINER_STATE";
var OUTBOUND_CONFIGURATION_KEY = "OUTBOUND_CONFIGURATION";
var MAX_ALARM_RETRIES = 3;
var PING_TIMEOUT_MS = 5e3;
var DEFAULT_SLEEP_AFTER = "10m";
var INSTANCE_POLL_INTERVAL_MS = 300;
var TIMEOUT_TO_GET_CONTAINER_MS = 8e3;
var TIMEOUT_TO_GET_PORTS_MS = 2e4;
var FALLBACK_PORT_TO_CHECK = 33;
var outboundHandlersRegistry = /* @__PURE__ */ new Map();
var defaultOutboundHandlerNameRegistry = /* @__PURE__ */ new Map();
var outboundByHostRegistry = /* @__PURE__ */ new Map();
var signalToNumbers = {
  SIGINT: 2,
  SIGTERM: 15,
  SIGKILL: 9
};
function isErrorOfType(e, matchingString) {
  const errorString = e instanceof Error ? e.message : String(e);
  return errorString.toLowerCase().includes(matchingString);
}
__name(isErrorOfType, "isErrorOfType");
var isNoInstanceError = /* @__PURE__ */ __name((error) => isErrorOfType(error, NO_CONTAINER_INSTANCE_ERROR), "isNoInstanceError");
var isRateLimitedError = /* @__PURE__ */ __name((error) => isErrorOfType(error, RATE_LIMITED_ERROR), "isRateLimitedError");
var isRuntimeSignalledError = /* @__PURE__ */ __name((error) => isErrorOfType(error, RUNTIME_SIGNALLED_ERROR), "isRuntimeSignalledError");
var isNotListeningError = /* @__PURE__ */ __name((error) => isErrorOfType(error, NOT_LISTENING_ERROR), "isNotListeningError");
var isContainerExitNonZeroError = /* @__PURE__ */ __name((error) => isErrorOfType(error, UNEXPECTED_EXIT_ERROR), "isContainerExitNonZeroError");
function getExitCodeFromError(error) {
  if (!(error instanceof Error)) {
    return null;
  }
  if (isRuntimeSignalledError(error)) {
    return +error.message.toLowerCase().slice(error.message.toLowerCase().indexOf(RUNTIME_SIGNALLED_ERROR) + RUNTIME_SIGNALLED_ERROR.length + 1);
  }
  if (isContainerExitNonZeroError(error)) {
    return +error.message.toLowerCase().slice(error.message.toLowerCase().indexOf(UNEXPECTED_EXIT_ERROR) + UNEXPECTED_EXIT_ERROR.length + 1);
  }
  return null;
}
__name(getExitCodeFromError, "getExitCodeFromError");
function addTimeoutSignal(existingSignal, timeoutMs) {
  const controller = new AbortController();
  if (existingSignal?.aborted) {
    controller.abort();
    return controller.signal;
  }
  existingSignal?.addEventListener("abort", () => controller.abort());
  const timeoutId = setTimeout(() => controller.abort(), timeoutMs);
  controller.signal.addEventListener("abort", () => clearTimeout(timeoutId));
  return controller.signal;
}
__name(addTimeoutSignal, "addTimeoutSignal");
var ContainerState = class {
  static {
    __name(this, "ContainerState");
  }
  storage;
  status;
  constructor(storage) {
    this.storage = storage;
  }
  async setRunning() {
    await this.setStatusAndupdate("running");
  }
  async setHealthy() {
    await this.setStatusAndupdate("healthy");
  }
  async setStopping() {
    await this.setStatusAndupdate("stopping");
  }
  async setStopped() {
    await this.setStatusAndupdate("stopped");
  }
  async setStoppedIfUnchanged(previousState) {
    if (this.status !== previousState) {
      return;
    }
    await this.setStopped();
  }
  async setStoppedWithCode(exitCode) {
    this.status = { status: "stopped_with_code", lastChange: Date.now(), exitCode };
    await this.update();
  }
  async getState() {
    if (!this.status) {
      const state = await this.storage.get(CONTAINER_STATE_KEY);
      if (!state) {
        this.status = {
          status: "stopped",
          lastChange: Date.now()
        };
        await this.update();
      } else {
        this.status = state;
      }
    }
    return this.status;
  }
  async setStatusAndupdate(status) {
    this.status = { status, lastChange: Date.now() };
    await this.update();
  }
  async update() {
    if (!this.status)
      throw new Error("status should be init");
    await this.storage.put(CONTAINER_STATE_KEY, this.status);
  }
};
var Container = class extends DurableObject {
  static {
    __name(this, "Container");
  }
  static get outboundByHost() {
    return outboundByHostRegistry.get(this.name);
  }
  static set outboundByHost(handlers) {
    outboundByHostRegistry.set(this.name, handlers);
  }
  static get outboundHandlers() {
    return outboundHandlersRegistry.get(this.name);
  }
  static set outboundHandlers(handlers) {
    const existing = outboundHandlersRegistry.get(this.name) ?? {};
    outboundHandlersRegistry.set(this.name, { ...existing, ...handlers });
  }
  static get outbound() {
    const handlerName = defaultOutboundHandlerNameRegistry.get(this.name);
    if (!handlerName)
      return void 0;
    return outboundHandlersRegistry.get(this.name)?.[handlerName];
  }
  static set outbound(handler) {
    const key = "__outbound__";
    const existing = outboundHandlersRegistry.get(this.name) ?? {};
    outboundHandlersRegistry.set(this.name, { ...existing, [key]: handler });
    defaultOutboundHandlerNameRegistry.set(this.name, key);
  }
  static get outboundProxies() {
    return this.outboundHandlers;
  }
  static set outboundProxies(handlers) {
    this.outboundHandlers = handlers;
  }
  static get outboundProxy() {
    return this.outbound;
  }
  static set outboundProxy(handler) {
    this.outbound = handler;
  }
  // =========================
  //     Public Attributes
  // =========================
  // Default port for the container (undefined means no default port)
  defaultPort;
  // Required ports that should be checked for availability during container startup
  // Override this in your subclass to specify ports that must be ready
  requiredPorts;
  // Timeout after which the container will sleep if no activity
  // The signal sent to the container by default is a SIGTERM.
  // The container won't get a SIGKILL if this threshold is triggered.
  sleepAfter = DEFAULT_SLEEP_AFTER;
  // Container configuration properties
  // Set these properties directly in your container instance
  envVars = {};
  entrypoint;
  enableInternet = true;
  labels = {};
  // When true, outbound HTTPS traffic from the container will be intercepted.
  // The container must trust /etc/cloudflare/certs/cloudflare-containers-ca.crt
  interceptHttps = false;
  // Hosts that are allowed to access the internet, even when enableInternet is false.
  // Useful for allowing specific domains on a per-host basis.
  allowedHosts;
  // Hosts that are denied internet access, even when enableInternet is true.
  // Also blocks hosts from being handled by the catch-all outbound handler.
  deniedHosts;
  // pingEndpoint is the host and path value that the class will use to send a request to the container and check if the
  // instance is ready.
  //
  // The user does not have to implement this route by any means,
  // but it's still useful if you want to control the path that
  // the Container class uses to send HTTP requests to.
  pingEndpoint = "ping";
  applyOutboundInterceptionPromise = Promise.resolve();
  usingInterception = false;
  // =========================
  //     PUBLIC INTERFACE
  // =========================
  constructor(ctx, env, options) {
    super(ctx, env);
    if (ctx.container === void 0) {
      throw new Error("Containers have not been enabled for this Durable Object class. Have you correctly setup your Wrangler config? More info: https://developers.cloudflare.com/containers/get-started/#configuration");
    }
    this.state = new ContainerState(this.ctx.storage);
    const persistedOutboundConfiguration = this.restoreOutboundConfiguration();
    this.ctx.blockConcurrencyWhile(async () => {
      await this.scheduleNextAlarm();
      this.renewActivityTimeout();
      const ctor = this.constructor;
      if (persistedOutboundConfiguration !== void 0 || ctor.outboundByHost !== void 0 || ctor.outbound !== void 0 || ctor.outboundHandlers !== void 0 || this.effectiveAllowedHosts !== void 0 || this.effectiveDeniedHosts !== void 0) {
        this.usingInterception = true;
      }
      if (this.container.running) {
        this.applyOutboundInterceptionPromise = this.applyOutboundInterception();
      }
    });
    this.container = ctx.container;
    if (options) {
      if (options.defaultPort !== void 0)
        this.defaultPort = options.defaultPort;
      if (options.sleepAfter !== void 0)
        this.sleepAfter = options.sleepAfter;
      if (options.envVars !== void 0)
        this.envVars = options.envVars;
      if (options.entrypoint !== void 0)
        this.entrypoint = options.entrypoint;
      if (options.enableInternet !== void 0)
        this.enableInternet = options.enableInternet;
    }
    this.sql`
      CREATE TABLE IF NOT EXISTS container_schedules (
        id TEXT PRIMARY KEY NOT NULL DEFAULT (randomblob(9)),
        callback TEXT NOT NULL,
        payload TEXT,
        type TEXT NOT NULL CHECK(type IN ('scheduled', 'delayed')),
        time INTEGER NOT NULL,
        delayInSeconds INTEGER,
        created_at INTEGER DEFAULT (unixepoch())
      )
    `;
    if (this.container.running) {
      this.monitor = this.container.monitor();
      this.setupMonitorCallbacks();
    }
  }
  /**
   * Gets the current state of the container
   * @returns Promise<State>
   */
  async getState() {
    return { ...await this.state.getState() };
  }
  // ====================================
  //     OUTBOUND INTERCEPTION CONFIG
  // ====================================
  /**
   * Set the catch-all outbound handler to a named method from `outboundHandlers`.
   * Overrides the default `outbound` at runtime via ContainerProxy props.
   *
   * @param methodName - Name of a method defined in `static outboundHandlers`
   * @param params - Optional params passed to the handler as `ctx.params`
   * @throws Error if the method name is not found in `outboundHandlers`
   */
  async setOutboundHandler(methodName, ...paramsArg) {
    this.validateOutboundHandlerMethodName(methodName);
    this.outboundHandlerOverride = paramsArg.length === 0 ? { method: methodName } : { method: methodName, params: paramsArg[0] };
    await this.refreshOutboundInterception();
  }
  /**
   * Add or override a hostname-specific outbound handler at runtime,
   * referencing a named method from `outboundHandlers`.
   * Overrides any matching entry in `static outboundByHost` for this hostname.
   *
   * @param hostname - The hostname or ip:port to intercept (e.g. `'google.com'`)
   * @param methodName - Name of a method defined in `static outboundHandlers`
   * @param params - Optional params passed to the handler as `ctx.params`
   * @throws Error if the method name is not found in `outboundHandlers`
   */
  async setOutboundByHost(hostname, methodName, ...paramsArg) {
    this.validateOutboundHandlerMethodName(methodName);
    this.outboundByHostOverrides[hostname] = paramsArg.length === 0 ? { method: methodName } : { method: methodName, params: paramsArg[0] };
    await this.refreshOutboundInterception();
  }
  /**
   * Remove a runtime hostname override added via `setOutboundByHost`.
   * The default handler from `static outboundByHost` (if any) will be used again.
   *
   * @param hostname - The hostname or ip:port to stop overriding
   */
  async removeOutboundByHost(hostname) {
    delete this.outboundByHostOverrides[hostname];
    await this.refreshOutboundInterception();
  }
  /**
   * Replace all runtime hostname overrides at once.
   * Each value may be either a method name or an object with `method` and `params`.
   *
   * @param handlers - Record mapping hostnames to handler configs in `outboundHandlers`
   * @throws Error if any method name is not found in `outboundHandlers`
   */
  async setOutboundByHosts(handlers) {
    for (const handler of Object.values(handlers)) {
      const methodName = typeof handler === "string" ? handler : handler.method;
      this.validateOutboundHandlerMethodName(methodName);
    }
    this.outboundByHostOverrides = Object.fromEntries(Object.entries(handlers).map(([hostname, handler]) => [
      hostname,
      typeof handler === "string" ? { method: handler } : handler
    ]));
    await this.refreshOutboundInterception();
  }
  // ====================================
  //     ALLOWED / DENIED HOSTS CONFIG
  // ====================================
  /**
   * Replace all allowed hosts at runtime.
   * Allowed hosts get internet access even when `enableInternet` is false.
   *
   * @param hosts - Array of hostnames to allow (e.g. `['api.stripe.com', 'example.com']`)
   */
  async setAllowedHosts(hosts) {
    this.allowedHostsOverride = [...hosts];
    this.usingInterception = true;
    await this.refreshOutboundInterception();
  }
  /**
   * Replace all denied hosts at runtime.
   * Denied hosts are blocked unconditionally, even when `enableInternet` is true
   * or a catch-all outbound handler is set.
   *
   * @param hosts - Array of hostnames to deny (e.g. `['evil.com', 'blocked.org']`)
   */
  async setDeniedHosts(hosts) {
    this.deniedHostsOverride = [...hosts];
    this.usingInterception = true;
    await this.refreshOutboundInterception();
  }
  /**
   * Add a single hostname to the allowed hosts list at runtime.
   *
   * @param hostname - The hostname to allow (e.g. `'api.stripe.com'`)
   */
  async allowHost(hostname) {
    const effective = this.effectiveAllowedHosts ?? [];
    if (!effective.includes(hostname)) {
      this.allowedHostsOverride = [...effective, hostname];
    }
    this.usingInterception = true;
    await this.refreshOutboundInterception();
  }
  /**
   * Add a single hostname to the denied hosts list at runtime.
   *
   * @param hostname - The hostname to deny (e.g. `'evil.com'`)
   */
  async denyHost(hostname) {
    const effective = this.effectiveDeniedHosts ?? [];
    if (!effective.includes(hostname)) {
      this.deniedHostsOverride = [...effective, hostname];
    }
    this.usingInterception = true;
    await this.refreshOutboundInterception();
  }
  /**
   * Remove a hostname from the allowed hosts list.
   *
   * @param hostname - The hostname to remove from the allow list
   */
  async removeAllowedHost(hostname) {
    this.allowedHostsOverride = (this.effectiveAllowedHosts ?? []).filter((h) => h !== hostname);
    await this.refreshOutboundInterception();
  }
  /**
   * Remove a hostname from the denied hosts list.
   *
   * @param hostname - The hostname to remove from the deny list
   */
  async removeDeniedHost(hostname) {
    this.deniedHostsOverride = (this.effectiveDeniedHosts ?? []).filter((h) => h !== hostname);
    await this.refreshOutboundInterception();
  }
  // ==========================
  //     CONTAINER STARTING
  // ==========================
  /**
   * Start the container if it's not running and set up monitoring and lifecycle hooks,
   * without waiting for ports to be ready.
   *
   * It will automatically retry if the container fails to start, using the specified waitOptions
   *
   *
   * @example
   * await this.start({
   *   envVars: { DEBUG: 'true', NODE_ENV: 'development' },
   *   entrypoint: ['npm', 'run', 'dev'],
   *   enableInternet: false,
   *   labels: { tenant: 'acme', env: 'prod' },
   * });
   *
   * @param startOptions - Override `envVars`, `entrypoint`, `enableInternet` and `labels` on a per-instance basis
   * @param waitOptions - Optional wait configuration with abort signal for cancellation. Default ~8s timeout.
   * @returns A promise that resolves when the container start command has been issued
   * @throws Error if no container context is available or if all start attempts fail
   */
  async start(startOptions, waitOptions) {
    const portToCheck = waitOptions?.portToCheck ?? this.defaultPort ?? (this.requiredPorts ? this.requiredPorts[0] : FALLBACK_PORT_TO_CHECK);
    const pollInterval = waitOptions?.waitInterval ?? INSTANCE_POLL_INTERVAL_MS;
    await this.startContainerIfNotRunning({
      signal: waitOptions?.signal,
      waitInterval: pollInterval,
      retries: waitOptions?.retries ?? Math.ceil(TIMEOUT_TO_GET_CONTAINER_MS / pollInterval),
      portToCheck
    }, startOptions);
    this.setupMonitorCallbacks();
    await this.ctx.blockConcurrencyWhile(async () => {
      await this.onStart();
    });
  }
  async startAndWaitForPorts(portsOrArgs, cancellationOptions, startOptions) {
    let ports;
    let resolvedCancellationOptions;
    let resolvedStartOptions;
    if (typeof portsOrArgs === "object" && portsOrArgs !== null && !Array.isArray(portsOrArgs)) {
      ports = portsOrArgs.ports;
      resolvedCancellationOptions = portsOrArgs.cancellationOptions;
      resolvedStartOptions = portsOrArgs.startOptions;
    } else {
      ports = portsOrArgs;
      resolvedCancellationOptions = cancellationOptions;
      resolvedStartOptions = startOptions;
    }
    const portsToCheck = await this.getPortsToCheck(ports);
    await this.syncPendingStoppedEvents();
    resolvedCancellationOptions ??= {};
    const containerGetTimeout = resolvedCancellationOptions.instanceGetTimeoutMS ?? TIMEOUT_TO_GET_CONTAINER_MS;
    const pollInterval = resolvedCancellationOptions.waitInterval ?? INSTANCE_POLL_INTERVAL_MS;
    const containerGetRetries = Math.ceil(containerGetTimeout / pollInterval);
    const waitOptions = {
      signal: resolvedCancellationOptions.abort,
      retries: containerGetRetries,
      waitInterval: pollInterval,
      portToCheck: portsToCheck[0]
    };
    const triesUsed = await this.startContainerIfNotRunning(waitOptions, resolvedStartOptions);
    const totalPortReadyTries = Math.ceil((resolvedCancellationOptions.portReadyTimeoutMS ?? TIMEOUT_TO_GET_PORTS_MS) / pollInterval);
    let triesLeft = totalPortReadyTries - triesUsed;
    for (const port of portsToCheck) {
      triesLeft = await this.waitForPort({
        signal: resolvedCancellationOptions.abort,
        waitInterval: pollInterval,
        retries: triesLeft,
        portToCheck: port
      });
    }
    this.setupMonitorCallbacks();
    await this.ctx.blockConcurrencyWhile(async () => {
      await this.state.setHealthy();
      await this.onStart();
    });
  }
  /**
   *
   * Waits for a specified port to be ready
   *
   * Returns the number of tries used to get the port, or throws if it couldn't get the port within the specified retry limits.
   *
   * @param waitOptions -
   * - `portToCheck`: The port number to check
   * - `abort`: Optional AbortSignal to cancel waiting
   * - `retries`: Number of retries before giving up (default: TRIES_TO_GET_PORTS)
   * - `waitInterval`: Interval between retries in milliseconds (default: INSTANCE_POLL_INTERVAL_MS)
   */
  async waitForPort(waitOptions) {
    const port = waitOptions.portToCheck;
    const tcpPort = this.container.getTcpPort(port);
    const abortedSignal = new Promise((res) => {
      waitOptions.signal?.addEventListener("abort", () => {
        res(true);
      });
    });
    const pollInterval = waitOptions.waitInterval ?? INSTANCE_POLL_INTERVAL_MS;
    const tries = waitOptions.retries ?? Math.ceil(TIMEOUT_TO_GET_PORTS_MS / pollInterval);
    for (let i = 0; i < tries; i++) {
      try {
        const combinedSignal = addTimeoutSignal(waitOptions.signal, PING_TIMEOUT_MS);
        await tcpPort.fetch(`http://${this.pingEndpoint}`, { signal: combinedSignal });
        break;
      } catch (e) {
        const errorMessage = e instanceof Error ? e.message : String(e);
        if (!this.container.running) {
          try {
            await this.onError(new Error(`Container crashed while checking for ports, did you start the container and setup the entrypoint correctly?`));
          } catch {
          }
          throw e;
        }
        if (i === tries - 1) {
          try {
            await this.onError(`Failed to verify port ${port} is available after ${(i + 1) * pollInterval}ms, last error: ${errorMessage}`);
          } catch {
          }
          throw e;
        }
        await Promise.any([
          new Promise((resolve) => setTimeout(resolve, pollInterval)),
          abortedSignal
        ]);
        if (waitOptions.signal?.aborted) {
          throw new Error("Container request aborted.", { cause: e });
        }
      }
    }
    return tries;
  }
  // =======================
  //     LIFECYCLE HOOKS
  // =======================
  /**
   * Send a signal to the container.
   * @param signal - The signal to send to the container (default: 15 for SIGTERM)
   */
  async stop(signal = "SIGTERM") {
    if (this.container.running) {
      this.container.signal(typeof signal === "string" ? signalToNumbers[signal] : signal);
    }
    await this.syncPendingStoppedEvents();
  }
  /**
   * Destroys the container with a SIGKILL. Triggers onStop.
   */
  async destroy() {
    await this.container.destroy();
  }
  /**
   * Lifecycle method called when container starts successfully
   * Override this method in subclasses to handle container start events
   */
  onStart() {
  }
  /**
   * Lifecycle method called when container shuts down
   * Override this method in subclasses to handle Container stopped events
   * @param params - Object containing exitCode and reason for the stop
   */
  onStop(params) {
    void params;
  }
  /**
   * Lifecycle method called when the container is running, and the activity timeout
   * expiration (set by `sleepAfter`) has been reached.
   *
   * If you want to shutdown the container, you should call this.stop() here
   *
   * By default, this method calls `this.stop()`
   */
  async onActivityExpired() {
    console.log("Activity expired, signalling container to stop");
    if (!this.container.running) {
      return;
    }
    await this.stop();
  }
  /**
   * Error handler for container errors
   * Override this method in subclasses to handle container errors
   * @param error - The error that occurred
   * @returns Can return any value or throw the error
   */
  onError(error) {
    console.error("Container error:", error);
    throw error;
  }
  /**
   * Renew the container's activity timeout
   *
   * Call this method whenever there is activity on the container
   */
  renewActivityTimeout() {
    const timeoutInMs = parseTimeExpression(this.sleepAfter) * 1e3;
    this.sleepAfterMs = Date.now() + timeoutInMs;
  }
  /**
   * Decrement the inflight request counter.
   * When the counter transitions to 0, renew the activity timeout so the
   * inactivity window starts fresh from the moment the last request completes.
   */
  decrementInflight() {
    this.inflightRequests = Math.max(0, this.inflightRequests - 1);
    if (this.inflightRequests === 0) {
      this.renewActivityTimeout();
    }
  }
  // ==================
  //     SCHEDULING
  // ==================
  /**
   * Schedule a task to be executed in the future.
   *
   * We strongly recommend using this instead of the `alarm` handler.
   *
   * @template T Type of the payload data
   * @param when When to execute the task (Date object or number of seconds delay)
   * @param callback Name of the method to call
   * @param payload Data to pass to the callback
   * @returns Schedule object representing the scheduled task
   */
  async schedule(when, callback, payload) {
    const id = generateId(9);
    if (typeof callback !== "string") {
      throw new Error("Callback must be a string (method name)");
    }
    if (typeof this[callback] !== "function") {
      throw new Error(`this.${callback} is not a function`);
    }
    if (when instanceof Date) {
      const timestamp = Math.floor(when.getTime() / 1e3);
      this.sql`
        INSERT OR REPLACE INTO container_schedules (id, callback, payload, type, time)
        VALUES (${id}, ${callback}, ${JSON.stringify(payload)}, 'scheduled', ${timestamp})
      `;
      await this.scheduleNextAlarm();
      return {
        taskId: id,
        callback,
        payload,
        time: timestamp,
        type: "scheduled"
      };
    }
    if (typeof when === "number") {
      const time = Math.floor(Date.now() / 1e3 + when);
      this.sql`
        INSERT OR REPLACE INTO container_schedules (id, callback, payload, type, delayInSeconds, time)
        VALUES (${id}, ${callback}, ${JSON.stringify(payload)}, 'delayed', ${when}, ${time})
      `;
      await this.scheduleNextAlarm();
      return {
        taskId: id,
        callback,
        payload,
        delayInSeconds: when,
        time,
        type: "delayed"
      };
    }
    throw new Error("Invalid schedule type. 'when' must be a Date or number of seconds");
  }
  // ============
  //     HTTP
  // ============
  /**
   * Send a request to the container (HTTP or WebSocket) using standard fetch API signature
   *
   * This method handles HTTP requests to the container.
   *
   * WebSocket requests done outside the DO won't work until https://github.com/cloudflare/workerd/issues/2319 is addressed.
   * Until then, please use `switchPort` + `fetch()`.
   *
   * Method supports multiple signatures to match standard fetch API:
   * - containerFetch(request: Request, port?: number)
   * - containerFetch(url: string | URL, init?: RequestInit, port?: number)
   *
   * Starts the container if not already running, and waits for the target port to be ready.
   *
   * @returns A Response from the container
   */
  async containerFetch(requestOrUrl, portOrInit, portParam) {
    const { request, port } = this.requestAndPortFromContainerFetchArgs(requestOrUrl, portOrInit, portParam);
    const state = await this.state.getState();
    if (!this.container.running || state.status !== "healthy") {
      try {
        await this.startAndWaitForPorts(port, { abort: request.signal });
      } catch (e) {
        if (isNoInstanceError(e)) {
          return new Response("There is no Container instance available at this time.\nThis is likely because you have reached your max concurrent instance count (set in wrangler config) or are you currently provisioning the Container.\nIf you are deploying your Container for the first time, check your dashboard to see provisioning status, this may take a few minutes.", { status: 503 });
        }
        if (isRateLimitedError(e)) {
          return new Response(e instanceof Error ? e.message : String(e), { status: 429 });
        }
        return new Response(`Failed to start container: ${e instanceof Error ? e.message : String(e)}`, {
          status: 500
        });
      }
    }
    const tcpPort = this.container.getTcpPort(port);
    const containerUrl = request.url.replace("https:", "http:");
    this.inflightRequests++;
    try {
      this.renewActivityTimeout();
      const res = await tcpPort.fetch(containerUrl, request);
      if (res.webSocket !== null) {
        const containerWs = res.webSocket;
        const [client, server] = Object.values(new WebSocketPair());
        let settled = false;
        const settleInflight = /* @__PURE__ */ __name(() => {
          if (!settled) {
            settled = true;
            this.decrementInflight();
          }
        }, "settleInflight");
        containerWs.accept();
        server.accept();
        server.addEventListener("message", async (event) => {
          this.renewActivityTimeout();
          try {
            const data = event.data instanceof Blob ? await event.data.arrayBuffer() : event.data;
            containerWs.send(data);
          } catch {
            server.close(1011, "Failed to forward message to container");
          }
        });
        containerWs.addEventListener("message", async (event) => {
          this.renewActivityTimeout();
          try {
            const data = event.data instanceof Blob ? await event.data.arrayBuffer() : event.data;
            server.send(data);
          } catch {
            containerWs.close(1011, "Failed to forward message to client");
          }
        });
        server.addEventListener("close", (event) => {
          settleInflight();
          const code = event.code === 1005 || event.code === 1006 ? 1e3 : event.code;
          containerWs.close(code, event.reason);
        });
        containerWs.addEventListener("close", (event) => {
          settleInflight();
          const code = event.code === 1005 || event.code === 1006 ? 1e3 : event.code;
          server.close(code, event.reason);
        });
        server.addEventListener("error", () => {
          settleInflight();
          containerWs.close(1011, "Client WebSocket error");
        });
        containerWs.addEventListener("error", () => {
          settleInflight();
          server.close(1011, "Container WebSocket error");
        });
        return new Response(null, { status: res.status, webSocket: client, headers: res.headers });
      }
      if (res.body !== null) {
        const { readable, writable } = new IdentityTransformStream();
        res.body?.pipeTo(writable).finally(() => {
          this.decrementInflight();
        });
        return new Response(readable, res);
      }
      this.decrementInflight();
      return res;
    } catch (e) {
      this.decrementInflight();
      if (!(e instanceof Error)) {
        throw e;
      }
      if (e.message.includes("Network connection lost.")) {
        return new Response("Container suddenly disconnected, try again", { status: 500 });
      }
      console.error(`Error proxying request to container ${this.ctx.id}:`, e);
      return new Response(`Error proxying request to container: ${e instanceof Error ? e.message : String(e)}`, { status: 500 });
    }
  }
  /**
   *
   * Fetch handler on the Container class.
   * By default this forwards all requests to the container by calling `containerFetch`.
   * Use `switchPort` to specify which port on the container to target, or this will use `defaultPort`.
   * @param request The request to handle
   */
  async fetch(request) {
    if (this.defaultPort === void 0 && !request.headers.has("cf-container-target-port")) {
      throw new Error("No port configured for this container. Set the `defaultPort` in your Container subclass, or specify a port with `container.fetch(switchPort(request, port))`.");
    }
    let portValue = this.defaultPort;
    if (request.headers.has("cf-container-target-port")) {
      const portFromHeaders = parseInt(request.headers.get("cf-container-target-port") ?? "");
      if (isNaN(portFromHeaders)) {
        throw new Error("port value from switchPort is not a number");
      } else {
        portValue = portFromHeaders;
      }
    }
    return await this.containerFetch(request, portValue);
  }
  // ===============================
  // ===============================
  //     PRIVATE METHODS & ATTRS
  // ===============================
  // ===============================
  // ==========================
  //     PRIVATE ATTRIBUTES
  // ==========================
  container;
  // onStopCalled will be true when we are in the middle of an onStop call
  onStopCalled = false;
  state;
  monitor;
  // Coalesces concurrent calls to startContainerIfNotRunning so we never
  // call `this.container.start()` twice. Without this guard, two requests
  // racing the readiness path can both pass the `if (this.container.running)`
  // early-return (each yielding the DO input gate at storage awaits) and
  // both reach the synchronous workerd `start()`, causing the second to
  // throw "start() cannot be called on a container that is already running."
  // See https://github.com/cloudflare/containers/issues/173.
  startInFlight;
  monitoredPromise;
  sleepAfterMs = 0;
  inflightRequests = 0;
  // Outbound interception runtime overrides (passed through ContainerProxy props)
  outboundByHostOverrides = {};
  outboundHandlerOverride;
  // Only set when the user calls setAllowedHosts/setDeniedHosts at runtime
  allowedHostsOverride;
  deniedHostsOverride;
  // The runtime does not expose a way to remove outbound interceptions yet, so
  // once we promote an instance to intercept-all we must keep using it.
  hasInterceptAllRegistration = false;
  // ==========================
  //     GENERAL HELPERS
  // ==========================
  /**
   * Validates that a method name exists in the outboundHandlers registry for this class.
   * @throws Error if the method name is not found
   */
  validateOutboundHandlerMethodName(methodName) {
    const handlers = outboundHandlersRegistry.get(this.constructor.name);
    if (!handlers || !(methodName in handlers)) {
      throw new Error(`Outbound handler method '${methodName}' not found in outboundHandlers for ${this.constructor.name}`);
    }
  }
  get effectiveAllowedHosts() {
    return this.allowedHostsOverride ?? this.allowedHosts;
  }
  get effectiveDeniedHosts() {
    return this.deniedHostsOverride ?? this.deniedHosts;
  }
  getOutboundConfiguration() {
    return {
      outboundByHostOverrides: Object.keys(this.outboundByHostOverrides).length > 0 ? this.outboundByHostOverrides : void 0,
      outboundHandlerOverride: this.outboundHandlerOverride,
      allowedHosts: this.effectiveAllowedHosts,
      deniedHosts: this.effectiveDeniedHosts,
      hasInterceptAllRegistration: this.hasInterceptAllRegistration || void 0
    };
  }
  persistOutboundConfiguration(configuration) {
    this.ctx.storage.kv.put(OUTBOUND_CONFIGURATION_KEY, {
      ...configuration,
      allowedHosts: this.allowedHostsOverride,
      deniedHosts: this.deniedHostsOverride
    });
  }
  restoreOutboundConfiguration() {
    const configuration = this.ctx.storage.kv.get(OUTBOUND_CONFIGURATION_KEY);
    if (!configuration) {
      return void 0;
    }
    this.outboundHandlerOverride = void 0;
    if (configuration.outboundHandlerOverride !== void 0) {
      try {
        this.validateOutboundHandlerMethodName(configuration.outboundHandlerOverride.method);
        this.outboundHandlerOverride = configuration.outboundHandlerOverride;
      } catch (error) {
        console.warn("Ignoring invalid persisted outbound handler override:", error);
      }
    }
    this.outboundByHostOverrides = {};
    for (const [hostname, override] of Object.entries(configuration.outboundByHostOverrides ?? {})) {
      try {
        this.validateOutboundHandlerMethodName(override.method);
        this.outboundByHostOverrides[hostname] = override;
      } catch (error) {
        console.warn(`Ignoring invalid persisted outbound override for ${hostname}:`, error);
      }
    }
    this.hasInterceptAllRegistration = configuration.hasInterceptAllRegistration === true;
    if (configuration.allowedHosts) {
      this.allowedHostsOverride = configuration.allowedHosts;
    }
    if (configuration.deniedHosts) {
      this.deniedHostsOverride = configuration.deniedHosts;
    }
    return this.getOutboundConfiguration();
  }
  /**
   * Returns true if a catch-all outbound HTTP interception is needed.
   * This is the case when a static `outbound` handler or a runtime
   * `outboundHandlerOverride` (catch-all) is configured.
   * When false, we only intercept specific hosts to avoid overhead.
   */
  needsCatchAllInterception() {
    const ctor = this.constructor;
    return ctor.outbound !== void 0 || this.outboundHandlerOverride !== void 0;
  }
  hasMutableOutboundConfiguration() {
    return Object.keys(this.outboundByHostOverrides).length > 0 || this.allowedHostsOverride !== void 0 || this.deniedHostsOverride !== void 0;
  }
  shouldInterceptAllOutbound() {
    return this.hasInterceptAllRegistration || this.needsCatchAllInterception() || this.effectiveAllowedHosts !== void 0 || this.effectiveDeniedHosts !== void 0 || this.hasMutableOutboundConfiguration();
  }
  getStaticOutboundByHostKeys() {
    const ctor = this.constructor;
    return ctor.outboundByHost ? Object.keys(ctor.outboundByHost) : [];
  }
  /**
   * Collects all hostnames that need per-host outbound interception.
   * This path is only used for the narrow optimized case where outbound
   * handling is static and host-specific.
   */
  getHostsToIntercept() {
    const hosts = /* @__PURE__ */ new Set();
    const ctor = this.constructor;
    if (ctor.outboundByHost) {
      for (const hostname of Object.keys(ctor.outboundByHost)) {
        hosts.add(hostname);
      }
    }
    for (const hostname of Object.keys(this.outboundByHostOverrides)) {
      hosts.add(hostname);
    }
    return [...hosts];
  }
  async refreshOutboundInterception() {
    if (!this.usingInterception) {
      return;
    }
    this.applyOutboundInterceptionPromise = this.applyOutboundInterception();
    await this.applyOutboundInterceptionPromise;
  }
  /**
   * Applies (or re-applies) outbound HTTP interception with the current
   * default registries + runtime overrides passed through ContainerProxy props.
   *
   * Uses per-host interception only for static host-specific outbound handlers.
   * As soon as the config needs to evaluate all hosts (catch-all outbound,
   * allow/deny lists, or runtime-mutated outbound config), we promote the
   * container to intercept-all and keep it there until the instance restarts.
   *
   * When `interceptHttps` is enabled, also applies HTTPS interception:
   * - Intercept-all mode: `interceptOutboundHttps('*', ...)` for all HTTPS traffic
   * - Per-host mode: `interceptOutboundHttps(host, ...)` for each known host
   */
  async applyOutboundInterception() {
    const ctx = this.ctx;
    if (ctx.exports === void 0) {
      throw new Error("ctx.exports is undefined, please try to update your compatibility date or export ContainerProxy from the containers package in your worker entrypoint");
    }
    if (ctx.exports.ContainerProxy === void 0) {
      throw new Error("ctx.exports.ContainerProxy is undefined, export ContainerProxy from the containers package in your worker entrypoint");
    }
    const interceptAll = this.shouldInterceptAllOutbound();
    if (interceptAll) {
      this.hasInterceptAllRegistration = interceptAll;
    }
    const outboundConfiguration = this.getOutboundConfiguration();
    this.persistOutboundConfiguration(outboundConfiguration);
    const hosts = this.getHostsToIntercept();
    const props = {
      enableInternet: this.enableInternet,
      containerId: this.ctx.id.toString(),
      className: this.constructor.name,
      outboundByHostOverrides: outboundConfiguration.outboundByHostOverrides,
      outboundHandlerOverride: outboundConfiguration.outboundHandlerOverride,
      allowedHosts: outboundConfiguration.allowedHosts,
      deniedHosts: outboundConfiguration.deniedHosts,
      interceptAll
    };
    const fetcher = ctx.exports.ContainerProxy({
      props
    });
    if (interceptAll) {
      for (const host of this.getStaticOutboundByHostKeys()) {
        await this.container.interceptOutboundHttp(host, fetcher);
        if (this.interceptHttps) {
          await this.container.interceptOutboundHttps(host, fetcher);
        }
      }
      if (this.interceptHttps) {
        await this.container.interceptOutboundHttps("*", fetcher);
      }
      await this.container.interceptAllOutboundHttp(fetcher);
    } else {
      for (const host of hosts) {
        await this.container.interceptOutboundHttp(host, fetcher);
        if (this.interceptHttps) {
          await this.container.interceptOutboundHttps(host, fetcher);
        }
      }
    }
  }
  /**
   * Execute SQL queries against the Container's database
   */
  sql(strings, ...values) {
    const query = strings.reduce((acc, str, i) => acc + str + (i < values.length ? "?" : ""), "");
    return [...this.ctx.storage.sql.exec(query, ...values)];
  }
  requestAndPortFromContainerFetchArgs(requestOrUrl, portOrInit, portParam) {
    let request;
    let port;
    if (requestOrUrl instanceof Request) {
      request = requestOrUrl;
      port = typeof portOrInit === "number" ? portOrInit : void 0;
    } else {
      const url = typeof requestOrUrl === "string" ? requestOrUrl : requestOrUrl.toString();
      const init = typeof portOrInit === "number" ? {} : portOrInit || {};
      port = typeof portOrInit === "number" ? portOrInit : typeof portParam === "number" ? portParam : void 0;
      request = new Request(url, init);
    }
    port ??= this.defaultPort;
    if (port === void 0) {
      throw new Error("No port specified for container fetch. Set defaultPort or specify a port parameter.");
    }
    return { request, port };
  }
  /**
   *
   * The method prioritizes port sources in this order:
   * 1. Ports specified directly in the method call
   * 2. `requiredPorts` class property (if set)
   * 3. `defaultPort` (if neither of the above is specified)
   * 4. Falls back to port 33 if none of the above are set
   */
  async getPortsToCheck(overridePorts) {
    if (overridePorts !== void 0) {
      return Array.isArray(overridePorts) ? overridePorts : [overridePorts];
    }
    if (this.requiredPorts && this.requiredPorts.length > 0) {
      return [...this.requiredPorts];
    }
    return [this.defaultPort ?? FALLBACK_PORT_TO_CHECK];
  }
  // ===========================================
  //     CONTAINER INTERACTION & MONITORING
  // ===========================================
  /**
   * Tries to start a container if it's not already running
   * Returns the number of tries used
   */
  async startContainerIfNotRunning(waitOptions, options) {
    if (this.startInFlight) {
      return this.startInFlight;
    }
    if (this.container.running) {
      if (!this.monitor) {
        this.monitor = this.container.monitor();
      }
      return 0;
    }
    const startPromise = this.doStartContainer(waitOptions, options);
    this.startInFlight = startPromise;
    try {
      return await startPromise;
    } finally {
      if (this.startInFlight === startPromise) {
        this.startInFlight = void 0;
      }
    }
  }
  async doStartContainer(waitOptions, options) {
    const abortedSignal = new Promise((res) => {
      waitOptions.signal?.addEventListener("abort", () => {
        res(true);
      });
    });
    const pollInterval = waitOptions.waitInterval ?? INSTANCE_POLL_INTERVAL_MS;
    const totalTries = waitOptions.retries ?? Math.ceil(TIMEOUT_TO_GET_CONTAINER_MS / pollInterval);
    for (let tries = 0; tries < totalTries; tries++) {
      const envVars = options?.envVars ?? this.envVars;
      const entrypoint = options?.entrypoint ?? this.entrypoint;
      const enableInternet = options?.enableInternet ?? this.enableInternet;
      const labels = options?.labels ?? this.labels;
      const startConfig = {
        enableInternet
      };
      if (envVars && Object.keys(envVars).length > 0)
        startConfig.env = envVars;
      if (entrypoint)
        startConfig.entrypoint = entrypoint;
      if (labels && Object.keys(labels).length > 0)
        startConfig.labels = labels;
      this.renewActivityTimeout();
      const handleError = /* @__PURE__ */ __name(async () => {
        const err = await this.monitor?.catch((err2) => err2);
        if (typeof err === "number") {
          const toThrow = new Error(`Container exited before we could determine the container health, exit code: ${err}`);
          await this.state.setStoppedWithCode(err);
          this.monitor = void 0;
          try {
            await this.onError(toThrow);
          } catch {
          }
          throw toThrow;
        } else if (!isNoInstanceError(err)) {
          await this.state.setStopped();
          this.monitor = void 0;
          try {
            await this.onError(err);
          } catch {
          }
          throw err;
        }
      }, "handleError");
      if (tries > 0 && !this.container.running) {
        await handleError();
      }
      await this.scheduleNextAlarm();
      if (!this.container.running) {
        await this.refreshOutboundInterception();
        this.container.start(startConfig);
        this.monitor = this.container.monitor();
        await this.state.setRunning();
      } else {
        await this.scheduleNextAlarm();
      }
      this.renewActivityTimeout();
      const port = this.container.getTcpPort(waitOptions.portToCheck);
      try {
        const combinedSignal = addTimeoutSignal(waitOptions.signal, PING_TIMEOUT_MS);
        await port.fetch("http://containerstarthealthcheck", { signal: combinedSignal });
        return tries;
      } catch (error) {
        if (isNotListeningError(error) && this.container.running) {
          return tries;
        }
        if (!this.container.running && isNotListeningError(error)) {
          await handleError();
        }
        await Promise.any([
          new Promise((res) => setTimeout(res, waitOptions.waitInterval)),
          abortedSignal
        ]);
        if (waitOptions.signal?.aborted) {
          throw new Error("Aborted waiting for container to start as we received a cancellation signal", { cause: error });
        }
        if (totalTries === tries + 1) {
          if (error instanceof Error && error.message.includes("Network connection lost")) {
            this.ctx.abort();
          }
          await handleError();
          await this.state.setStopped();
          this.monitor = void 0;
          throw new Error(NO_CONTAINER_INSTANCE_ERROR, { cause: error });
        }
        continue;
      }
    }
    throw new Error(`Container did not start after ${totalTries * pollInterval}ms`);
  }
  setupMonitorCallbacks() {
    const monitor = this.monitor;
    if (!monitor || this.monitoredPromise === monitor) {
      return;
    }
    this.monitoredPromise = monitor;
    monitor.then(async () => {
      await this.ctx.blockConcurrencyWhile(async () => {
        if (this.monitor === monitor) {
          await this.state.setStoppedWithCode(0);
        }
      });
    }).catch(async (error) => {
      if (this.monitor !== monitor) {
        return;
      }
      if (isNoInstanceError(error)) {
        await this.ctx.blockConcurrencyWhile(async () => {
          if (this.monitor === monitor) {
            await this.state.setStopped();
          }
        });
        return;
      }
      const exitCode = getExitCodeFromError(error);
      if (exitCode !== null) {
        await this.ctx.blockConcurrencyWhile(async () => {
          if (this.monitor === monitor) {
            await this.state.setStoppedWithCode(exitCode);
          }
        });
        return;
      }
      await this.ctx.blockConcurrencyWhile(async () => {
        if (this.monitor === monitor) {
          await this.state.setStopped();
        }
      });
      if (this.monitor !== monitor) {
        return;
      }
      try {
        await this.onError(error);
      } catch {
      }
    }).finally(() => {
      if (this.monitor !== monitor) {
        return;
      }
      this.monitoredPromise = void 0;
      this.monitor = void 0;
      if (this.timeout) {
        if (this.resolve)
          this.resolve();
        clearTimeout(this.timeout);
      }
    });
  }
  deleteSchedules(name) {
    this.sql`DELETE FROM container_schedules WHERE callback = ${name}`;
  }
  // ============================
  //     ALARMS AND SCHEDULES
  // ============================
  /**
   * Method called when an alarm fires
   * Executes any scheduled tasks that are due
   */
  async alarm(alarmProps) {
    if (alarmProps !== void 0 && alarmProps.isRetry && alarmProps.retryCount > MAX_ALARM_RETRIES) {
      const scheduleCount = Number(this.sql`SELECT COUNT(*) as count FROM container_schedules`[0]?.count) || 0;
      const hasScheduledTasks = scheduleCount > 0;
      if (hasScheduledTasks || this.container.running) {
        await this.scheduleNextAlarm();
      }
      return;
    }
    const prevAlarm = Date.now();
    await this.ctx.storage.setAlarm(prevAlarm);
    await this.ctx.storage.sync();
    const result = this.sql`
         SELECT * FROM container_schedules;
       `;
    let minTime = Date.now() + 3 * 60 * 1e3;
    const now = Date.now() / 1e3;
    for (const row of result) {
      if (row.time > now) {
        continue;
      }
      const callback = this[row.callback];
      if (!callback || typeof callback !== "function") {
        console.error(`Callback ${row.callback} not found or is not a function`);
        continue;
      }
      const schedule = this.getSchedule(row.id);
      try {
        const payload = row.payload ? JSON.parse(row.payload) : void 0;
        await callback.call(this, payload, await schedule);
      } catch (e) {
        console.error(`Error executing scheduled callback "${row.callback}":`, e);
      }
      this.sql`DELETE FROM container_schedules WHERE id = ${row.id}`;
    }
    const resultForMinTime = this.sql`
         SELECT * FROM container_schedules;
       `;
    const minTimeFromSchedules = Math.min(...resultForMinTime.map((r) => r.time * 1e3));
    if (!this.container.running) {
      await this.syncPendingStoppedEvents();
      if (resultForMinTime.length == 0) {
        await this.ctx.storage.deleteAlarm();
      } else {
        await this.ctx.storage.setAlarm(minTimeFromSchedules);
      }
      return;
    }
    if (this.isActivityExpired()) {
      await this.onActivityExpired();
      this.renewActivityTimeout();
      return;
    }
    minTime = Math.min(minTimeFromSchedules, minTime, this.sleepAfterMs);
    const timeout = Math.max(0, minTime - Date.now());
    await new Promise((resolve) => {
      this.resolve = resolve;
      if (!this.container.running) {
        resolve();
        return;
      }
      this.timeout = setTimeout(() => {
        resolve();
      }, timeout);
    });
    await this.ctx.storage.setAlarm(Date.now());
  }
  timeout;
  resolve;
  // synchronises container state with the container source of truth to process events
  async syncPendingStoppedEvents() {
    const state = await this.state.getState();
    if (!this.container.running && (state.status === "healthy" || state.status === "running")) {
      await this.callOnStop({ exitCode: 0, reason: "exit" }, state);
      return;
    }
    if (!this.container.running && state.status === "stopped_with_code") {
      await this.callOnStop({ exitCode: state.exitCode ?? 0, reason: "exit" }, state);
      return;
    }
  }
  async callOnStop(onStopParams, stateBeforeOnStop) {
    if (this.onStopCalled) {
      return;
    }
    this.onStopCalled = true;
    const promise = this.onStop(onStopParams);
    if (promise instanceof Promise) {
      await promise.finally(() => {
        this.onStopCalled = false;
      });
    } else {
      this.onStopCalled = false;
    }
    await this.state.setStoppedIfUnchanged(stateBeforeOnStop);
  }
  /**
   * Schedule the next alarm based on upcoming tasks
   */
  async scheduleNextAlarm(ms = 1e3) {
    const nextTime = ms + Date.now();
    if (this.timeout) {
      if (this.resolve)
        this.resolve();
      clearTimeout(this.timeout);
    }
    await this.ctx.storage.setAlarm(nextTime);
    await this.ctx.storage.sync();
  }
  async listSchedules(name) {
    const result = this.sql`
      SELECT * FROM container_schedules WHERE callback = ${name} LIMIT 1
    `;
    if (!result || result.length === 0) {
      return [];
    }
    return result.map(this.toSchedule);
  }
  toSchedule(schedule) {
    let payload;
    try {
      payload = JSON.parse(schedule.payload);
    } catch (e) {
      console.error(`Error parsing payload for schedule ${schedule.id}:`, e);
      payload = void 0;
    }
    if (schedule.type === "delayed") {
      return {
        taskId: schedule.id,
        callback: schedule.callback,
        payload,
        type: "delayed",
        time: schedule.time,
        delayInSeconds: schedule.delayInSeconds
      };
    }
    return {
      taskId: schedule.id,
      callback: schedule.callback,
      payload,
      type: "scheduled",
      time: schedule.time
    };
  }
  /**
   * Get a scheduled task by ID
   * @template T Type of the payload data
   * @param id ID of the scheduled task
   * @returns The Schedule object or undefined if not found
   */
  async getSchedule(id) {
    const result = this.sql`
      SELECT * FROM container_schedules WHERE id = ${id} LIMIT 1
    `;
    if (!result || result.length === 0) {
      return void 0;
    }
    const schedule = result[0];
    return this.toSchedule(schedule);
  }
  isActivityExpired() {
    if (this.inflightRequests > 0) {
      this.renewActivityTimeout();
      return false;
    }
    return this.sleepAfterMs <= Date.now();
  }
};

// ../node_modules/@cloudflare/containers/dist/lib/utils.js
var singletonContainerId = "cf-singleton-container";
function getContainer(binding, name = singletonContainerId) {
  const objectId = binding.idFromName(name);
  return binding.get(objectId);
}
__name(getContainer, "getContainer");
function switchPort(request, port) {
  const headers = new Headers(request.headers);
  headers.set("cf-container-target-port", port.toString());
  return new Request(request, { headers });
}
__name(switchPort, "switchPort");

// ../node_modules/aws4fetch/dist/aws4fetch.esm.mjs
var encoder = new TextEncoder();
var HOST_SERVICES = {
  appstream2: "appstream",
  cloudhsmv2: "cloudhsm",
  email: "ses",
  marketplace: "aws-marketplace",
  mobile: "AWSMobileHubService",
  pinpoint: "mobiletargeting",
  queue: "sqs",
  "git-codecommit": "codecommit",
  "mturk-requester-sandbox": "mturk-requester",
  "personalize-runtime": "personalize"
};
var UNSIGNABLE_HEADERS = /* @__PURE__ */ new Set([
  "authorization",
  "content-type",
  "content-length",
  "user-agent",
  "presigned-expires",
  "expect",
  "x-amzn-trace-id",
  "range",
  "connection"
]);
var AwsClient = class {
  static {
    __name(this, "AwsClient");
  }
  constructor({ accessKeyId, secretAccessKey, sessionToken, service, region, cache, retries, initRetryMs }) {
    if (accessKeyId == null) throw new TypeError("accessKeyId is a required option");
    if (secretAccessKey == null) throw new TypeError("secretAccessKey is a required option");
    this.accessKeyId = accessKeyId;
    this.secretAccessKey = secretAccessKey;
    this.sessionToken = sessionToken;
    this.service = service;
    this.region = region;
    this.cache = cache || /* @__PURE__ */ new Map();
    this.retries = retries != null ? retries : 10;
    this.initRetryMs = initRetryMs || 50;
  }
  async sign(input, init) {
    if (input instanceof Request) {
      const { method, url, headers, body } = input;
      init = Object.assign({ method, url, headers }, init);
      if (init.body == null && headers.has("Content-Type")) {
        init.body = body != null && headers.has("X-Amz-Content-Sha256") ? body : await input.clone().arrayBuffer();
      }
      input = url;
    }
    const signer = new AwsV4Signer(Object.assign({ url: input.toString() }, init, this, init && init.aws));
    const signed = Object.assign({}, init, await signer.sign());
    delete signed.aws;
    try {
      return new Request(signed.url.toString(), signed);
    } catch (e) {
      if (e instanceof TypeError) {
        return new Request(signed.url.toString(), Object.assign({ duplex: "half" }, signed));
      }
      throw e;
    }
  }
  async fetch(input, init) {
    for (let i = 0; i <= this.retries; i++) {
      const fetched = fetch(await this.sign(input, init));
      if (i === this.retries) {
        return fetched;
      }
      const res = await fetched;
      if (res.status < 500 && res.status !== 429) {
        return res;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.random() * this.initRetryMs * Math.pow(2, i)));
    }
    throw new Error("An unknown error occurred, ensure retries is not negative");
  }
};
var AwsV4Signer = class {
  static {
    __name(this, "AwsV4Signer");
  }
  constructor({ method, url, headers, body, accessKeyId, secretAccessKey, sessionToken, service, region, cache, datetime, signQuery, appendSessionToken, allHeaders, singleEncode }) {
    if (url == null) throw new TypeError("url is a required option");
    if (accessKeyId == null) throw new TypeError("accessKeyId is a required option");
    if (secretAccessKey == null) throw new TypeError("secretAccessKey is a required option");
    this.method = method || (body ? "POST" : "GET");
    this.url = new URL(url);
    this.headers = new Headers(headers || {});
    this.body = body;
    this.accessKeyId = accessKeyId;
    this.secretAccessKey = secretAccessKey;
    this.sessionToken = sessionToken;
    let guessedService, guessedRegion;
    if (!service || !region) {
      [guessedService, guessedRegion] = guessServiceRegion(this.url, this.headers);
    }
    this.service = service || guessedService || "";
    this.region = region || guessedRegion || "us-east-1";
    this.cache = cache || /* @__PURE__ */ new Map();
    this.datetime = datetime || (/* @__PURE__ */ new Date()).toISOString().replace(/[:-]|\.\d{3}/g, "");
    this.signQuery = signQuery;
    this.appendSessionToken = appendSessionToken || this.service === "iotdevicegateway";
    this.headers.delete("Host");
    if (this.service === "s3" && !this.signQuery && !this.headers.has("X-Amz-Content-Sha256")) {
      this.headers.set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD");
    }
    const params = this.signQuery ? this.url.searchParams : this.headers;
    params.set("X-Amz-Date", this.datetime);
    if (this.sessionToken && !this.appendSessionToken) {
      params.set("X-Amz-Security-Token", this.sessionToken);
    }
    this.signableHeaders = ["host", ...this.headers.keys()].filter((header) => allHeaders || !UNSIGNABLE_HEADERS.has(header)).sort();
    this.signedHeaders = this.signableHeaders.join(";");
    this.canonicalHeaders = this.signableHeaders.map((header) => header + ":" + (header === "host" ? this.url.host : (this.headers.get(header) || "").replace(/\s+/g, " "))).join("\n");
    this.credentialString = [this.datetime.slice(0, 8), this.region, this.service, "aws4_request"].join("/");
    if (this.signQuery) {
      if (this.service === "s3" && !params.has("X-Amz-Expires")) {
        params.set("X-Amz-Expires", "86400");
      }
      params.set("X-Amz-Algorithm", "AWS4-HMAC-SHA256");
      params.set("X-Amz-Credential", this.accessKeyId + "/" + this.credentialString);
      params.set("X-Amz-SignedHeaders", this.signedHeaders);
    }
    if (this.service === "s3") {
      try {
        this.encodedPath = decodeURIComponent(this.url.pathname.replace(/\+/g, " "));
      } catch (e) {
        this.encodedPath = this.url.pathname;
      }
    } else {
      this.encodedPath = this.url.pathname.replace(/\/+/g, "/");
    }
    if (!singleEncode) {
      this.encodedPath = encodeURIComponent(this.encodedPath).replace(/%2F/g, "/");
    }
    this.encodedPath = encodeRfc3986(this.encodedPath);
    const seenKeys = /* @__PURE__ */ new Set();
    this.encodedSearch = [...this.url.searchParams].filter(([k]) => {
      if (!k) return false;
      if (this.service === "s3") {
        if (seenKeys.has(k)) return false;
        seenKeys.add(k);
      }
      return true;
    }).map((pair) => pair.map((p) => encodeRfc3986(encodeURIComponent(p)))).sort(([k1, v1], [k2, v2]) => k1 < k2 ? -1 : k1 > k2 ? 1 : v1 < v2 ? -1 : v1 > v2 ? 1 : 0).map((pair) => pair.join("=")).join("&");
  }
  async sign() {
    if (this.signQuery) {
      this.url.searchParams.set("X-Amz-Signature", await this.signature());
      if (this.sessionToken && this.appendSessionToken) {
        this.url.searchParams.set("X-Amz-Security-Token", this.sessionToken);
      }
    } else {
      this.headers.set("Authorization", await this.authHeader());
    }
    return {
      method: this.method,
      url: this.url,
      headers: this.headers,
      body: this.body
    };
  }
  async authHeader() {
    return [
      "AWS4-HMAC-SHA256 Credential=" + this.accessKeyId + "/" + this.credentialString,
      "SignedHeaders=" + this.signedHeaders,
      "Signature=" + await this.signature()
    ].join(", ");
  }
  async signature() {
    const date = this.datetime.slice(0, 8);
    const cacheKey = [this.secretAccessKey, date, this.region, this.service].join();
    let kCredentials = this.cache.get(cacheKey);
    if (!kCredentials) {
      const kDate = await hmac("AWS4" + this.secretAccessKey, date);
      const kRegion = await hmac(kDate, this.region);
      const kService = await hmac(kRegion, this.service);
      kCredentials = await hmac(kService, "aws4_request");
      this.cache.set(cacheKey, kCredentials);
    }
    return buf2hex(await hmac(kCredentials, await this.stringToSign()));
  }
  async stringToSign() {
    return [
      "AWS4-HMAC-SHA256",
      this.datetime,
      this.credentialString,
      buf2hex(await hash(await this.canonicalString()))
    ].join("\n");
  }
  async canonicalString() {
    return [
      this.method.toUpperCase(),
      this.encodedPath,
      this.encodedSearch,
      this.canonicalHeaders + "\n",
      this.signedHeaders,
      await this.hexBodyHash()
    ].join("\n");
  }
  async hexBodyHash() {
    let hashHeader = this.headers.get("X-Amz-Content-Sha256") || (this.service === "s3" && this.signQuery ? "UNSIGNED-PAYLOAD" : null);
    if (hashHeader == null) {
      if (this.body && typeof this.body !== "string" && !("byteLength" in this.body)) {
        throw new Error("body must be a string, ArrayBuffer or ArrayBufferView, unless you include the X-Amz-Content-Sha256 header");
      }
      hashHeader = buf2hex(await hash(this.body || ""));
    }
    return hashHeader;
  }
};
async function hmac(key, string) {
  const cryptoKey = await crypto.subtle.importKey(
    "raw",
    typeof key === "string" ? encoder.encode(key) : key,
    { name: "HMAC", hash: { name: "SHA-256" } },
    false,
    ["sign"]
  );
  return crypto.subtle.sign("HMAC", cryptoKey, encoder.encode(string));
}
__name(hmac, "hmac");
async function hash(content) {
  return crypto.subtle.digest("SHA-256", typeof content === "string" ? encoder.encode(content) : content);
}
__name(hash, "hash");
var HEX_CHARS = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f"];
function buf2hex(arrayBuffer) {
  const buffer = new Uint8Array(arrayBuffer);
  let out = "";
  for (let idx = 0; idx < buffer.length; idx++) {
    const n = buffer[idx];
    out += HEX_CHARS[n >>> 4 & 15];
    out += HEX_CHARS[n & 15];
  }
  return out;
}
__name(buf2hex, "buf2hex");
function encodeRfc3986(urlEncodedStr) {
  return urlEncodedStr.replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}
__name(encodeRfc3986, "encodeRfc3986");
function guessServiceRegion(url, headers) {
  const { hostname, pathname } = url;
  if (hostname.endsWith(".on.aws")) {
    const match2 = hostname.match(/^[^.]{1,63}\.lambda-url\.([^.]{1,63})\.on\.aws$/);
    return match2 != null ? ["lambda", match2[1] || ""] : ["", ""];
  }
  if (hostname.endsWith(".r2.cloudflarestorage.com")) {
    return ["s3", "auto"];
  }
  if (hostname.endsWith(".backblazeb2.com")) {
    const match2 = hostname.match(/^(?:[^.]{1,63}\.)?s3\.([^.]{1,63})\.backblazeb2\.com$/);
    return match2 != null ? ["s3", match2[1] || ""] : ["", ""];
  }
  const match = hostname.replace("dualstack.", "").match(/([^.]{1,63})\.(?:([^.]{0,63})\.)?amazonaws\.com(?:\.cn)?$/);
  let service = match && match[1] || "";
  let region = match && match[2];
  if (region === "us-gov") {
    region = "us-gov-west-1";
  } else if (region === "s3" || region === "s3-accelerate") {
    region = "us-east-1";
    service = "s3";
  } else if (service === "iot") {
    if (hostname.startsWith("iot.")) {
      service = "execute-api";
    } else if (hostname.startsWith("data.jobs.iot.")) {
      service = "iot-jobs-data";
    } else {
      service = pathname === "/mqtt" ? "iotdevicegateway" : "iotdata";
    }
  } else if (service === "autoscaling") {
    const targetPrefix = (headers.get("X-Amz-Target") || "").split(".")[0];
    if (targetPrefix === "AnyScaleFrontendService") {
      service = "application-autoscaling";
    } else if (targetPrefix === "AnyScaleScalingPlannerFrontendService") {
      service = "autoscaling-plans";
    }
  } else if (region == null && service.startsWith("s3-")) {
    region = service.slice(3).replace(/^fips-|^external-1/, "");
    service = "s3";
  } else if (service.endsWith("-fips")) {
    service = service.slice(0, -5);
  } else if (region && /-\d$/.test(service) && !/-\d$/.test(region)) {
    [service, region] = [region, service];
  }
  return [HOST_SERVICES[service] || service, region || ""];
}
__name(guessServiceRegion, "guessServiceRegion");

// ../node_modules/capnweb/dist/index-workers.js
import * as cfw from "cloudflare:workers";
var WORKERS_MODULE_SYMBOL = /* @__PURE__ */ Symbol("workers-module");
globalThis[WORKERS_MODULE_SYMBOL] = cfw;
if (!Symbol.dispose) {
  Symbol.dispose = /* @__PURE__ */ Symbol.for("dispose");
}
if (!Symbol.asyncDispose) {
  Symbol.asyncDispose = /* @__PURE__ */ Symbol.for("asyncDispose");
}
if (!Promise.withResolvers) {
  Promise.withResolvers = function() {
    let resolve;
    let reject;
    const promise = new Promise((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}
var workersModule = globalThis[WORKERS_MODULE_SYMBOL];
var RpcTarget = workersModule ? workersModule.RpcTarget : class {
};
var AsyncFunction = (async function() {
}).constructor;
var BUFFER_PROTOTYPE = typeof Buffer !== "undefined" ? Buffer.prototype : void 0;
function typeForRpc(value) {
  switch (typeof value) {
    case "boolean":
    case "number":
    case "string":
      return "primitive";
    case "undefined":
      return "undefined";
    case "object":
    case "function":
      break;
    case "bigint":
      return "bigint";
    default:
      return "unsupported";
  }
  if (value === null) {
    return "primitive";
  }
  let prototype = Object.getPrototypeOf(value);
  switch (prototype) {
    case Object.prototype:
      return "object";
    case Function.prototype:
    case AsyncFunction.prototype:
      return "function";
    case Array.prototype:
      return "array";
    case Date.prototype:
      return "date";
    case Uint8Array.prototype:
    case BUFFER_PROTOTYPE:
      return "bytes";
    case WritableStream.prototype:
      return "writable";
    case ReadableStream.prototype:
      return "readable";
    case Headers.prototype:
      return "headers";
    case Request.prototype:
      return "request";
    case Response.prototype:
      return "response";
    case Blob.prototype:
      return "blob";
    // TODO: All other structured clone types.
    case RpcStub.prototype:
      return "stub";
    case RpcPromise.prototype:
      return "rpc-promise";
    // TODO: Promise<T> or thenable
    default:
      if (workersModule) {
        if (prototype == workersModule.RpcStub.prototype || value instanceof workersModule.ServiceStub) {
          return "rpc-target";
        } else if (prototype == workersModule.RpcPromise.prototype || prototype == workersModule.RpcProperty.prototype) {
          return "rpc-thenable";
        }
      }
      if (value instanceof RpcTarget) {
        return "rpc-target";
      }
      if (value instanceof Error) {
        return "error";
      }
      return "unsupported";
  }
}
__name(typeForRpc, "typeForRpc");
function mapNotLoaded() {
  throw new Error("RPC map() implementation was not loaded.");
}
__name(mapNotLoaded, "mapNotLoaded");
var mapImpl = { applyMap: mapNotLoaded, sendMap: mapNotLoaded };
function streamNotLoaded() {
  throw new Error("Stream implementation was not loaded.");
}
__name(streamNotLoaded, "streamNotLoaded");
var streamImpl = {
  createWritableStreamHook: streamNotLoaded,
  createWritableStreamFromHook: streamNotLoaded,
  createReadableStreamHook: streamNotLoaded
};
var StubHook = class {
  static {
    __name(this, "StubHook");
  }
  // Like call(), but designed for streaming calls (e.g. WritableStream writes). Returns:
  // - promise: A Promise<void> for the completion of the call.
  // - size: If the call was remote, the byte size of the serialized message. For local calls,
  //   undefined is returned, indicating the caller should await the promise to serialize writes
  //   (no overlapping).
  stream(path2, args) {
    let hook = this.call(path2, args);
    let pulled = hook.pull();
    let promise;
    if (pulled instanceof Promise) {
      promise = pulled.then((p) => {
        p.dispose();
      });
    } else {
      pulled.dispose();
      promise = Promise.resolve();
    }
    return { promise };
  }
};
var ErrorStubHook = class extends StubHook {
  static {
    __name(this, "ErrorStubHook");
  }
  constructor(error) {
    super();
    this.error = error;
  }
  call(path2, args) {
    return this;
  }
  map(path2, captures, instructions) {
    return this;
  }
  get(path2) {
    return this;
  }
  dup() {
    return this;
  }
  pull() {
    return Promise.reject(this.error);
  }
  ignoreUnhandledRejections() {
  }
  dispose() {
  }
  onBroken(callback) {
    try {
      callback(this.error);
    } catch (err) {
      Promise.resolve(err);
    }
  }
};
var DISPOSED_HOOK = new ErrorStubHook(
  new Error("Attempted to use RPC stub after it has been disposed.")
);
var doCall = /* @__PURE__ */ __name((hook, path2, params) => {
  return hook.call(path2, params);
}, "doCall");
function withCallInterceptor(interceptor, callback) {
  let oldValue = doCall;
  doCall = interceptor;
  try {
    return callback();
  } finally {
    doCall = oldValue;
  }
}
__name(withCallInterceptor, "withCallInterceptor");
var RAW_STUB = /* @__PURE__ */ Symbol("realStub");
var PROXY_HANDLERS = {
  apply(target, thisArg, argumentsList) {
    let stub = target.raw;
    return new RpcPromise(doCall(
      stub.hook,
      stub.pathIfPromise || [],
      RpcPayload.fromAppParams(argumentsList)
    ), []);
  },
  get(target, prop, receiver) {
    let stub = target.raw;
    if (prop === RAW_STUB) {
      return stub;
    } else if (prop in RpcPromise.prototype) {
      return stub[prop];
    } else if (typeof prop === "string") {
      return new RpcPromise(
        stub.hook,
        stub.pathIfPromise ? [...stub.pathIfPromise, prop] : [prop]
      );
    } else if (prop === Symbol.dispose && (!stub.pathIfPromise || stub.pathIfPromise.length == 0)) {
      return () => {
        stub.hook.dispose();
        stub.hook = DISPOSED_HOOK;
      };
    } else {
      return void 0;
    }
  },
  has(target, prop) {
    let stub = target.raw;
    if (prop === RAW_STUB) {
      return true;
    } else if (prop in RpcPromise.prototype) {
      return prop in stub;
    } else if (typeof prop === "string") {
      return true;
    } else if (prop === Symbol.dispose && (!stub.pathIfPromise || stub.pathIfPromise.length == 0)) {
      return true;
    } else {
      return false;
    }
  },
  construct(target, args) {
    throw new Error("An RPC stub cannot be used as a constructor.");
  },
  defineProperty(target, property, attributes) {
    throw new Error("Can't define properties on RPC stubs.");
  },
  deleteProperty(target, p) {
    throw new Error("Can't delete properties on RPC stubs.");
  },
  getOwnPropertyDescriptor(target, p) {
    return void 0;
  },
  getPrototypeOf(target) {
    return Object.getPrototypeOf(target.raw);
  },
  isExtensible(target) {
    return false;
  },
  ownKeys(target) {
    return [];
  },
  preventExtensions(target) {
    return true;
  },
  set(target, p, newValue, receiver) {
    throw new Error("Can't assign properties on RPC stubs.");
  },
  setPrototypeOf(target, v) {
    throw new Error("Can't override prototype of RPC stubs.");
  }
};
var RpcStub = class _RpcStub extends RpcTarget {
  static {
    __name(this, "_RpcStub");
  }
  // Although `hook` and `path` are declared `public` here, they are effectively hidden by the
  // proxy.
  constructor(hook, pathIfPromise) {
    super();
    if (!(hook instanceof StubHook)) {
      let value = hook;
      if (value instanceof RpcTarget || value instanceof Function) {
        hook = TargetStubHook.create(value, void 0);
      } else {
        hook = new PayloadStubHook(RpcPayload.fromAppReturn(value));
      }
      if (pathIfPromise) {
        throw new TypeError("RpcStub constructor expected one argument, received two.");
      }
    }
    this.hook = hook;
    this.pathIfPromise = pathIfPromise;
    let func = /* @__PURE__ */ __name(() => {
    }, "func");
    func.raw = this;
    return new Proxy(func, PROXY_HANDLERS);
  }
  hook;
  pathIfPromise;
  dup() {
    let target = this[RAW_STUB];
    if (target.pathIfPromise) {
      return new _RpcStub(target.hook.get(target.pathIfPromise));
    } else {
      return new _RpcStub(target.hook.dup());
    }
  }
  onRpcBroken(callback) {
    this[RAW_STUB].hook.onBroken(callback);
  }
  map(func) {
    let { hook, pathIfPromise } = this[RAW_STUB];
    return mapImpl.sendMap(hook, pathIfPromise || [], func);
  }
  toString() {
    return "[object RpcStub]";
  }
};
var RpcPromise = class extends RpcStub {
  static {
    __name(this, "RpcPromise");
  }
  // TODO: Support passing target value or promise to constructor.
  constructor(hook, pathIfPromise) {
    super(hook, pathIfPromise);
  }
  then(onfulfilled, onrejected) {
    return pullPromise(this).then(...arguments);
  }
  catch(onrejected) {
    return pullPromise(this).catch(...arguments);
  }
  finally(onfinally) {
    return pullPromise(this).finally(...arguments);
  }
  toString() {
    return "[object RpcPromise]";
  }
};
function unwrapStubTakingOwnership(stub) {
  let { hook, pathIfPromise } = stub[RAW_STUB];
  if (pathIfPromise && pathIfPromise.length > 0) {
    return hook.get(pathIfPromise);
  } else {
    return hook;
  }
}
__name(unwrapStubTakingOwnership, "unwrapStubTakingOwnership");
function unwrapStubAndDup(stub) {
  let { hook, pathIfPromise } = stub[RAW_STUB];
  if (pathIfPromise) {
    return hook.get(pathIfPromise);
  } else {
    return hook.dup();
  }
}
__name(unwrapStubAndDup, "unwrapStubAndDup");
function unwrapStubNoProperties(stub) {
  let { hook, pathIfPromise } = stub[RAW_STUB];
  if (pathIfPromise && pathIfPromise.length > 0) {
    return void 0;
  }
  return hook;
}
__name(unwrapStubNoProperties, "unwrapStubNoProperties");
function unwrapStubOrParent(stub) {
  return stub[RAW_STUB].hook;
}
__name(unwrapStubOrParent, "unwrapStubOrParent");
function unwrapStubAndPath(stub) {
  return stub[RAW_STUB];
}
__name(unwrapStubAndPath, "unwrapStubAndPath");
async function pullPromise(promise) {
  let { hook, pathIfPromise } = promise[RAW_STUB];
  if (pathIfPromise.length > 0) {
    hook = hook.get(pathIfPromise);
  }
  let payload = await hook.pull();
  return payload.deliverResolve();
}
__name(pullPromise, "pullPromise");
var RpcPayload = class _RpcPayload {
  static {
    __name(this, "_RpcPayload");
  }
  // Private constructor; use factory functions above to construct.
  constructor(value, source, hooks, promises) {
    this.value = value;
    this.source = source;
    this.hooks = hooks;
    this.promises = promises;
  }
  // Create a payload from a value passed as params to an RPC from the app.
  //
  // The payload does NOT take ownership of any stubs in `value`, and but promises not to modify
  // `value`. If the payload is delivered locally, `value` will be deep-copied first, so as not
  // to have the sender and recipient end up sharing the same mutable object. `value` will not be
  // touched again after the call returns synchronously (returns a promise) -- by that point,
  // the value has either been copied or serialized to the wire.
  static fromAppParams(value) {
    return new _RpcPayload(value, "params");
  }
  // Create a payload from a value return from an RPC implementation by the app.
  //
  // Unlike fromAppParams(), in this case the payload takes ownership of all stubs in `value`, and
  // may hold onto `value` for an arbitrarily long time (e.g. to serve pipelined requests). It
  // will still avoid modifying `value` and will make a deep copy if it is delivered locally.
  static fromAppReturn(value) {
    return new _RpcPayload(value, "return");
  }
  // Combine an array of payloads into a single payload whose value is an array. Ownership of all
  // stubs is transferred from the inputs to the outputs, hence if the output is disposed, the
  // inputs should not be. (In case of exception, nothing is disposed, though.)
  static fromArray(array) {
    let hooks = [];
    let promises = [];
    let resultArray = [];
    for (let payload of array) {
      payload.ensureDeepCopied();
      for (let hook of payload.hooks) {
        hooks.push(hook);
      }
      for (let promise of payload.promises) {
        if (promise.parent === payload) {
          promise = {
            parent: resultArray,
            property: resultArray.length,
            promise: promise.promise
          };
        }
        promises.push(promise);
      }
      resultArray.push(payload.value);
    }
    return new _RpcPayload(resultArray, "owned", hooks, promises);
  }
  // Create a payload from a value parsed off the wire using Evaluator.evaluate().
  //
  // A payload is constructed with a null value and the given hooks and promises arrays. The value
  // is expected to be filled in by the evaluator, and the hooks and promises arrays are expected
  // to be extended with stubs found during parsing. (This weird usage model is necessary so that
  // if the root value turns out to be a promise, its `parent` in `promises` can be the payload
  // object itself.)
  //
  // When done, the payload takes ownership of the final value and all the stubs within. It may
  // modify the value in preparation for delivery, and may deliver the value directly to the app
  // without copying.
  static forEvaluate(hooks, promises) {
    return new _RpcPayload(null, "owned", hooks, promises);
  }
  // Deep-copy the given value, including dup()ing all stubs.
  //
  // If `value` is a function, it should be bound to `oldParent` as its `this`.
  //
  // If deep-copying from a branch of some other RpcPayload, it must be provided, to make sure
  // RpcTargets found within don't get duplicate stubs.
  static deepCopyFrom(value, oldParent, owner) {
    let result = new _RpcPayload(null, "owned", [], []);
    result.value = result.deepCopy(
      value,
      oldParent,
      "value",
      result,
      /*dupStubs=*/
      true,
      owner
    );
    return result;
  }
  // For `source === "return"` payloads only, this tracks any StubHooks created around RpcTargets
  // or WritableStreams found in the payload at the time that it is serialized (or deep-copied) for
  // return, so that we can make sure they are not disposed before the pipeline ends.
  //
  // This is initialized on first use.
  rpcTargets;
  // Get the StubHook representing the given RpcTarget found inside this payload.
  getHookForRpcTarget(target, parent, dupStubs = true) {
    if (this.source === "params") {
      if (dupStubs) {
        let dupable = target;
        if (typeof dupable.dup === "function") {
          target = dupable.dup();
        }
      }
      return TargetStubHook.create(target, parent);
    } else if (this.source === "return") {
      let hook = this.rpcTargets?.get(target);
      if (hook) {
        if (dupStubs) {
          return hook.dup();
        } else {
          this.rpcTargets?.delete(target);
          return hook;
        }
      } else {
        hook = TargetStubHook.create(target, parent);
        if (dupStubs) {
          if (!this.rpcTargets) {
            this.rpcTargets = /* @__PURE__ */ new Map();
          }
          this.rpcTargets.set(target, hook);
          return hook.dup();
        } else {
          return hook;
        }
      }
    } else {
      throw new Error("owned payload shouldn't contain raw RpcTargets");
    }
  }
  // Get the StubHook representing the given WritableStream found inside this payload.
  getHookForWritableStream(stream, parent, dupStubs = true) {
    if (this.source === "params") {
      return streamImpl.createWritableStreamHook(stream);
    } else if (this.source === "return") {
      let hook = this.rpcTargets?.get(stream);
      if (hook) {
        if (dupStubs) {
          return hook.dup();
        } else {
          this.rpcTargets?.delete(stream);
          return hook;
        }
      } else {
        hook = streamImpl.createWritableStreamHook(stream);
        if (dupStubs) {
          if (!this.rpcTargets) {
            this.rpcTargets = /* @__PURE__ */ new Map();
          }
          this.rpcTargets.set(stream, hook);
          return hook.dup();
        } else {
          return hook;
        }
      }
    } else {
      throw new Error("owned payload shouldn't contain raw WritableStreams");
    }
  }
  // Get the StubHook representing the given ReadableStream found inside this payload.
  getHookForReadableStream(stream, parent, dupStubs = true) {
    if (this.source === "params") {
      return streamImpl.createReadableStreamHook(stream);
    } else if (this.source === "return") {
      let hook = this.rpcTargets?.get(stream);
      if (hook) {
        if (dupStubs) {
          return hook.dup();
        } else {
          this.rpcTargets?.delete(stream);
          return hook;
        }
      } else {
        hook = streamImpl.createReadableStreamHook(stream);
        if (dupStubs) {
          if (!this.rpcTargets) {
            this.rpcTargets = /* @__PURE__ */ new Map();
          }
          this.rpcTargets.set(stream, hook);
          return hook.dup();
        } else {
          return hook;
        }
      }
    } else {
      throw new Error("owned payload shouldn't contain raw ReadableStreams");
    }
  }
  deepCopy(value, oldParent, property, parent, dupStubs, owner) {
    let kind = typeForRpc(value);
    switch (kind) {
      case "unsupported":
        return value;
      case "primitive":
      case "bigint":
      case "date":
      case "bytes":
      case "blob":
      case "error":
      case "undefined":
        return value;
      case "array": {
        let array = value;
        let len = array.length;
        let result = new Array(len);
        for (let i = 0; i < len; i++) {
          result[i] = this.deepCopy(array[i], array, i, result, dupStubs, owner);
        }
        return result;
      }
      case "object": {
        let result = {};
        let object = value;
        for (let i in object) {
          result[i] = this.deepCopy(object[i], object, i, result, dupStubs, owner);
        }
        return result;
      }
      case "stub":
      case "rpc-promise": {
        let stub = value;
        let hook;
        if (dupStubs) {
          hook = unwrapStubAndDup(stub);
        } else {
          hook = unwrapStubTakingOwnership(stub);
        }
        if (stub instanceof RpcPromise) {
          let promise = new RpcPromise(hook, []);
          this.promises.push({ parent, property, promise });
          return promise;
        } else {
          this.hooks.push(hook);
          return new RpcStub(hook);
        }
      }
      case "function":
      case "rpc-target": {
        let target = value;
        let hook;
        if (owner) {
          hook = owner.getHookForRpcTarget(target, oldParent, dupStubs);
        } else {
          hook = TargetStubHook.create(target, oldParent);
        }
        this.hooks.push(hook);
        return new RpcStub(hook);
      }
      case "rpc-thenable": {
        let target = value;
        let promise;
        if (owner) {
          promise = new RpcPromise(owner.getHookForRpcTarget(target, oldParent, dupStubs), []);
        } else {
          promise = new RpcPromise(TargetStubHook.create(target, oldParent), []);
        }
        this.promises.push({ parent, property, promise });
        return promise;
      }
      case "writable": {
        let stream = value;
        let hook;
        if (owner) {
          hook = owner.getHookForWritableStream(stream, oldParent, dupStubs);
        } else {
          hook = streamImpl.createWritableStreamHook(stream);
        }
        this.hooks.push(hook);
        return stream;
      }
      case "readable": {
        let stream = value;
        let hook;
        if (owner) {
          hook = owner.getHookForReadableStream(stream, oldParent, dupStubs);
        } else {
          hook = streamImpl.createReadableStreamHook(stream);
        }
        this.hooks.push(hook);
        return stream;
      }
      case "headers":
        return new Headers(value);
      case "request": {
        let req = value;
        if (req.body) {
          this.deepCopy(req.body, req, "body", req, dupStubs, owner);
        }
        return new Request(req);
      }
      case "response": {
        let resp = value;
        if (resp.body) {
          this.deepCopy(resp.body, resp, "body", resp, dupStubs, owner);
        }
        return new Response(resp.body, resp);
      }
      default:
        throw new Error("unreachable");
    }
  }
  // Ensures that if the value originally came from an unowned source, we have replaced it with a
  // deep copy.
  ensureDeepCopied() {
    if (this.source !== "owned") {
      let dupStubs = this.source === "params";
      this.hooks = [];
      this.promises = [];
      try {
        this.value = this.deepCopy(this.value, void 0, "value", this, dupStubs, this);
      } catch (err) {
        this.hooks = void 0;
        this.promises = void 0;
        throw err;
      }
      this.source = "owned";
      if (this.rpcTargets && this.rpcTargets.size > 0) {
        throw new Error("Not all rpcTargets were accounted for in deep-copy?");
      }
      this.rpcTargets = void 0;
    }
  }
  // Resolve all promises in this payload and then assign the final value into `parent[property]`.
  deliverTo(parent, property, promises) {
    this.ensureDeepCopied();
    if (this.value instanceof RpcPromise) {
      _RpcPayload.deliverRpcPromiseTo(this.value, parent, property, promises);
    } else {
      parent[property] = this.value;
      for (let record of this.promises) {
        _RpcPayload.deliverRpcPromiseTo(record.promise, record.parent, record.property, promises);
      }
    }
  }
  static deliverRpcPromiseTo(promise, parent, property, promises) {
    let hook = unwrapStubNoProperties(promise);
    if (!hook) {
      throw new Error("property promises should have been resolved earlier");
    }
    let inner = hook.pull();
    if (inner instanceof _RpcPayload) {
      inner.deliverTo(parent, property, promises);
    } else {
      promises.push(inner.then((payload) => {
        let subPromises = [];
        payload.deliverTo(parent, property, subPromises);
        if (subPromises.length > 0) {
          return Promise.all(subPromises);
        }
      }));
    }
  }
  // Call the given function with the payload as an argument. The call is made synchronously if
  // possible, in order to maintain e-order. However, if any RpcPromises exist in the payload,
  // they are awaited and substituted before calling the function. The result of the call is
  // wrapped into another payload.
  //
  // The payload is automatically disposed after the call completes. The caller should not call
  // dispose().
  async deliverCall(func, thisArg) {
    try {
      let promises = [];
      this.deliverTo(this, "value", promises);
      if (promises.length > 0) {
        await Promise.all(promises);
      }
      let result = Function.prototype.apply.call(func, thisArg, this.value);
      if (result instanceof RpcPromise) {
        return _RpcPayload.fromAppReturn(result);
      } else {
        return _RpcPayload.fromAppReturn(await result);
      }
    } finally {
      this.dispose();
    }
  }
  // Produce a promise for this payload for return to the application. Any RpcPromises in the
  // payload are awaited and substituted with their results first.
  //
  // The returned object will have a disposer which disposes the payload. The caller should not
  // separately dispose it.
  async deliverResolve() {
    try {
      let promises = [];
      this.deliverTo(this, "value", promises);
      if (promises.length > 0) {
        await Promise.all(promises);
      }
      let result = this.value;
      if (result instanceof Object) {
        if (!(Symbol.dispose in result)) {
          Object.defineProperty(result, Symbol.dispose, {
            // NOTE: Using `this.dispose.bind(this)` here causes Playwright's build of
            //   Chromium 140.0.7339.16 to fail when the object is assigned to a `using` variable,
            //   with the error:
            //       TypeError: Symbol(Symbol.dispose) is not a function
            //   I cannot reproduce this problem in Chrome 140.0.7339.127 nor in Node or workerd,
            //   so maybe it was a short-lived V8 bug or something. To be safe, though, we use
            //   `() => this.dispose()`, which seems to always work.
            value: /* @__PURE__ */ __name(() => this.dispose(), "value"),
            writable: true,
            enumerable: false,
            configurable: true
          });
        }
      }
      return result;
    } catch (err) {
      this.dispose();
      throw err;
    }
  }
  dispose() {
    if (this.source === "owned") {
      this.hooks.forEach((hook) => hook.dispose());
      this.promises.forEach((promise) => promise.promise[Symbol.dispose]());
    } else if (this.source === "return") {
      this.disposeImpl(this.value, void 0);
      if (this.rpcTargets && this.rpcTargets.size > 0) {
        throw new Error("Not all rpcTargets were accounted for in disposeImpl()?");
      }
    } else ;
    this.source = "owned";
    this.hooks = [];
    this.promises = [];
  }
  // Recursive dispose, called only when `source` is "return".
  disposeImpl(value, parent) {
    let kind = typeForRpc(value);
    switch (kind) {
      case "unsupported":
      case "primitive":
      case "bigint":
      case "bytes":
      case "blob":
      case "date":
      case "error":
      case "undefined":
        return;
      case "array": {
        let array = value;
        let len = array.length;
        for (let i = 0; i < len; i++) {
          this.disposeImpl(array[i], array);
        }
        return;
      }
      case "object": {
        let object = value;
        for (let i in object) {
          this.disposeImpl(object[i], object);
        }
        return;
      }
      case "stub":
      case "rpc-promise": {
        let stub = value;
        let hook = unwrapStubNoProperties(stub);
        if (hook) {
          hook.dispose();
        }
        return;
      }
      case "function":
      case "rpc-target": {
        let target = value;
        let hook = this.rpcTargets?.get(target);
        if (hook) {
          hook.dispose();
          this.rpcTargets.delete(target);
        } else {
          disposeRpcTarget(target);
        }
        return;
      }
      case "rpc-thenable":
        return;
      case "headers":
        return;
      case "request": {
        let req = value;
        if (req.body) this.disposeImpl(req.body, req);
        return;
      }
      case "response": {
        let resp = value;
        if (resp.body) this.disposeImpl(resp.body, resp);
        return;
      }
      case "writable": {
        let stream = value;
        let hook = this.rpcTargets?.get(stream);
        if (hook) {
          this.rpcTargets.delete(stream);
        } else {
          hook = streamImpl.createWritableStreamHook(stream);
        }
        hook.dispose();
        return;
      }
      case "readable": {
        let stream = value;
        let hook = this.rpcTargets?.get(stream);
        if (hook) {
          this.rpcTargets.delete(stream);
        } else {
          hook = streamImpl.createReadableStreamHook(stream);
        }
        hook.dispose();
        return;
      }
      default:
        return;
    }
  }
  // Ignore unhandled rejections in all promises in this payload -- that is, all promises that
  // *would* be awaited if this payload were to be delivered. See the similarly-named method of
  // StubHook for explanation.
  ignoreUnhandledRejections() {
    if (this.hooks) {
      this.hooks.forEach((hook) => {
        hook.ignoreUnhandledRejections();
      });
      this.promises.forEach(
        (promise) => unwrapStubOrParent(promise.promise).ignoreUnhandledRejections()
      );
    } else {
      this.ignoreUnhandledRejectionsImpl(this.value);
    }
  }
  ignoreUnhandledRejectionsImpl(value) {
    let kind = typeForRpc(value);
    switch (kind) {
      case "unsupported":
      case "primitive":
      case "bigint":
      case "bytes":
      case "blob":
      case "date":
      case "error":
      case "undefined":
      case "function":
      case "rpc-target":
      case "writable":
      case "readable":
      case "headers":
      case "request":
      case "response":
        return;
      case "array": {
        let array = value;
        let len = array.length;
        for (let i = 0; i < len; i++) {
          this.ignoreUnhandledRejectionsImpl(array[i]);
        }
        return;
      }
      case "object": {
        let object = value;
        for (let i in object) {
          this.ignoreUnhandledRejectionsImpl(object[i]);
        }
        return;
      }
      case "stub":
      case "rpc-promise":
        unwrapStubOrParent(value).ignoreUnhandledRejections();
        return;
      case "rpc-thenable":
        value.then((_) => {
        }, (_) => {
        });
        return;
      default:
        return;
    }
  }
};
function followPath(value, parent, path2, owner) {
  for (let i = 0; i < path2.length; i++) {
    parent = value;
    let part = path2[i];
    if (part in Object.prototype) {
      value = void 0;
      continue;
    }
    let kind = typeForRpc(value);
    switch (kind) {
      case "object":
      case "function":
        if (Object.hasOwn(value, part)) {
          value = value[part];
        } else {
          value = void 0;
        }
        break;
      case "array":
        if (Number.isInteger(part) && part >= 0) {
          value = value[part];
        } else {
          value = void 0;
        }
        break;
      case "rpc-target":
      case "rpc-thenable": {
        if (Object.hasOwn(value, part)) {
          throw new TypeError(
            `Attempted to access property '${part}', which is an instance property of the RpcTarget. To avoid leaking private internals, instance properties cannot be accessed over RPC. If you want to make this property available over RPC, define it as a method or getter on the class, instead of an instance property.`
          );
        } else {
          value = value[part];
        }
        owner = null;
        break;
      }
      case "stub":
      case "rpc-promise": {
        let { hook, pathIfPromise } = unwrapStubAndPath(value);
        return { hook, remainingPath: pathIfPromise ? pathIfPromise.concat(path2.slice(i)) : path2.slice(i) };
      }
      case "writable":
        value = void 0;
        break;
      case "readable":
        value = void 0;
        break;
      case "primitive":
      case "bigint":
      case "bytes":
      case "blob":
      case "date":
      case "error":
      case "headers":
      case "request":
      case "response":
        value = void 0;
        break;
      case "undefined":
        value = value[part];
        break;
      case "unsupported": {
        if (i === 0) {
          throw new TypeError(`RPC stub points at a non-serializable type.`);
        } else {
          let prefix = path2.slice(0, i).join(".");
          let remainder = path2.slice(0, i).join(".");
          throw new TypeError(
            `'${prefix}' is not a serializable type, so property ${remainder} cannot be accessed.`
          );
        }
      }
      default:
        throw new TypeError("unreachable");
    }
  }
  if (value instanceof RpcPromise) {
    let { hook, pathIfPromise } = unwrapStubAndPath(value);
    return { hook, remainingPath: pathIfPromise || [] };
  }
  return {
    value,
    parent,
    owner
  };
}
__name(followPath, "followPath");
var ValueStubHook = class extends StubHook {
  static {
    __name(this, "ValueStubHook");
  }
  call(path2, args) {
    try {
      let { value, owner } = this.getValue();
      let followResult = followPath(value, void 0, path2, owner);
      if (followResult.hook) {
        return followResult.hook.call(followResult.remainingPath, args);
      }
      if (typeof followResult.value != "function") {
        throw new TypeError(`'${path2.join(".")}' is not a function.`);
      }
      let promise = args.deliverCall(followResult.value, followResult.parent);
      return new PromiseStubHook(promise.then((payload) => {
        return new PayloadStubHook(payload);
      }));
    } catch (err) {
      return new ErrorStubHook(err);
    }
  }
  map(path2, captures, instructions) {
    try {
      let followResult;
      try {
        let { value, owner } = this.getValue();
        followResult = followPath(value, void 0, path2, owner);
        ;
      } catch (err) {
        for (let cap of captures) {
          cap.dispose();
        }
        throw err;
      }
      if (followResult.hook) {
        return followResult.hook.map(followResult.remainingPath, captures, instructions);
      }
      return mapImpl.applyMap(
        followResult.value,
        followResult.parent,
        followResult.owner,
        captures,
        instructions
      );
    } catch (err) {
      return new ErrorStubHook(err);
    }
  }
  get(path2) {
    try {
      let { value, owner } = this.getValue();
      if (path2.length === 0 && owner === null) {
        throw new Error("Can't dup an RpcTarget stub as a promise.");
      }
      let followResult = followPath(value, void 0, path2, owner);
      if (followResult.hook) {
        return followResult.hook.get(followResult.remainingPath);
      }
      return new PayloadStubHook(RpcPayload.deepCopyFrom(
        followResult.value,
        followResult.parent,
        followResult.owner
      ));
    } catch (err) {
      return new ErrorStubHook(err);
    }
  }
};
var PayloadStubHook = class _PayloadStubHook extends ValueStubHook {
  static {
    __name(this, "_PayloadStubHook");
  }
  constructor(payload) {
    super();
    this.payload = payload;
  }
  payload;
  // cleared when disposed
  getPayload() {
    if (this.payload) {
      return this.payload;
    } else {
      throw new Error("Attempted to use an RPC StubHook after it was disposed.");
    }
  }
  getValue() {
    let payload = this.getPayload();
    return { value: payload.value, owner: payload };
  }
  dup() {
    let thisPayload = this.getPayload();
    return new _PayloadStubHook(RpcPayload.deepCopyFrom(
      thisPayload.value,
      void 0,
      thisPayload
    ));
  }
  pull() {
    return this.getPayload();
  }
  ignoreUnhandledRejections() {
    if (this.payload) {
      this.payload.ignoreUnhandledRejections();
    }
  }
  dispose() {
    if (this.payload) {
      this.payload.dispose();
      this.payload = void 0;
    }
  }
  onBroken(callback) {
    if (this.payload) {
      if (this.payload.value instanceof RpcStub) {
        this.payload.value.onRpcBroken(callback);
      }
    }
  }
};
function disposeRpcTarget(target) {
  if (Symbol.dispose in target) {
    try {
      target[Symbol.dispose]();
    } catch (err) {
      Promise.reject(err);
    }
  }
}
__name(disposeRpcTarget, "disposeRpcTarget");
var TargetStubHook = class _TargetStubHook extends ValueStubHook {
  static {
    __name(this, "_TargetStubHook");
  }
  // Constructs a TargetStubHook that is not duplicated from an existing hook.
  //
  // If `value` is a function, `parent` is bound as its "this".
  static create(value, parent) {
    if (typeof value !== "function") {
      parent = void 0;
    }
    return new _TargetStubHook(value, parent);
  }
  constructor(target, parent, dupFrom) {
    super();
    this.target = target;
    this.parent = parent;
    if (dupFrom) {
      if (dupFrom.refcount) {
        this.refcount = dupFrom.refcount;
        ++this.refcount.count;
      }
    } else if (Symbol.dispose in target) {
      this.refcount = { count: 1 };
    }
  }
  target;
  // cleared when disposed
  parent;
  // `this` parameter when calling `target`
  refcount;
  // undefined if not needed (because target has no disposer)
  getTarget() {
    if (this.target) {
      return this.target;
    } else {
      throw new Error("Attempted to use an RPC StubHook after it was disposed.");
    }
  }
  getValue() {
    return { value: this.getTarget(), owner: null };
  }
  dup() {
    return new _TargetStubHook(this.getTarget(), this.parent, this);
  }
  pull() {
    let target = this.getTarget();
    if ("then" in target) {
      return Promise.resolve(target).then((resolution) => {
        return RpcPayload.fromAppReturn(resolution);
      });
    } else {
      return Promise.reject(new Error("Tried to resolve a non-promise stub."));
    }
  }
  ignoreUnhandledRejections() {
  }
  dispose() {
    if (this.target) {
      if (this.refcount) {
        if (--this.refcount.count == 0) {
          disposeRpcTarget(this.target);
        }
      }
      this.target = void 0;
    }
  }
  onBroken(callback) {
  }
};
var PromiseStubHook = class _PromiseStubHook extends StubHook {
  static {
    __name(this, "_PromiseStubHook");
  }
  promise;
  resolution;
  constructor(promise) {
    super();
    this.promise = promise.then((res) => {
      this.resolution = res;
      return res;
    });
  }
  call(path2, args) {
    args.ensureDeepCopied();
    return new _PromiseStubHook(this.promise.then((hook) => hook.call(path2, args)));
  }
  stream(path2, args) {
    args.ensureDeepCopied();
    let promise = this.promise.then((hook) => {
      let result = hook.stream(path2, args);
      return result.promise;
    });
    return { promise };
  }
  map(path2, captures, instructions) {
    return new _PromiseStubHook(this.promise.then(
      (hook) => hook.map(path2, captures, instructions),
      (err) => {
        for (let cap of captures) {
          cap.dispose();
        }
        throw err;
      }
    ));
  }
  get(path2) {
    return new _PromiseStubHook(this.promise.then((hook) => hook.get(path2)));
  }
  dup() {
    if (this.resolution) {
      return this.resolution.dup();
    } else {
      return new _PromiseStubHook(this.promise.then((hook) => hook.dup()));
    }
  }
  pull() {
    if (this.resolution) {
      return this.resolution.pull();
    } else {
      return this.promise.then((hook) => hook.pull());
    }
  }
  ignoreUnhandledRejections() {
    if (this.resolution) {
      this.resolution.ignoreUnhandledRejections();
    } else {
      this.promise.then((res) => {
        res.ignoreUnhandledRejections();
      }, (err) => {
      });
    }
  }
  dispose() {
    if (this.resolution) {
      this.resolution.dispose();
    } else {
      this.promise.then((hook) => {
        hook.dispose();
      }, (err) => {
      });
    }
  }
  onBroken(callback) {
    if (this.resolution) {
      this.resolution.onBroken(callback);
    } else {
      this.promise.then((hook) => {
        hook.onBroken(callback);
      }, callback);
    }
  }
};
var NullExporter = class {
  static {
    __name(this, "NullExporter");
  }
  exportStub(stub) {
    throw new Error("Cannot serialize RPC stubs without an RPC session.");
  }
  exportPromise(stub) {
    throw new Error("Cannot serialize RPC stubs without an RPC session.");
  }
  getImport(hook) {
    return void 0;
  }
  unexport(ids) {
  }
  createPipe(readable) {
    throw new Error("Cannot create pipes without an RPC session.");
  }
  onSendError(error) {
  }
};
var NULL_EXPORTER = new NullExporter();
async function streamToBlob(stream, type) {
  let b = await new Response(stream).blob();
  return b.type === type ? b : b.slice(0, b.size, type);
}
__name(streamToBlob, "streamToBlob");
var ERROR_TYPES = {
  Error,
  EvalError,
  RangeError,
  ReferenceError,
  SyntaxError,
  TypeError,
  URIError,
  AggregateError
  // TODO: DOMError? Others?
};
var Devaluator = class _Devaluator {
  static {
    __name(this, "_Devaluator");
  }
  constructor(exporter, source) {
    this.exporter = exporter;
    this.source = source;
  }
  // Devaluate the given value.
  // * value: The value to devaluate.
  // * parent: The value's parent object, which would be used as `this` if the value were called
  //     as a function.
  // * exporter: Callbacks to the RPC session for exporting capabilities found in this message.
  // * source: The RpcPayload which contains the value, and therefore owns stubs within.
  //
  // Returns: The devaluated value, ready to be JSON-serialized.
  static devaluate(value, parent, exporter = NULL_EXPORTER, source) {
    let devaluator = new _Devaluator(exporter, source);
    try {
      return devaluator.devaluateImpl(value, parent, 0);
    } catch (err) {
      if (devaluator.exports) {
        try {
          exporter.unexport(devaluator.exports);
        } catch (err2) {
        }
      }
      throw err;
    }
  }
  exports;
  devaluateImpl(value, parent, depth) {
    if (depth >= 64) {
      throw new Error(
        "Serialization exceeded maximum allowed depth. (Does the message contain cycles?)"
      );
    }
    let kind = typeForRpc(value);
    switch (kind) {
      case "unsupported": {
        let msg;
        try {
          msg = `Cannot serialize value: ${value}`;
        } catch (err) {
          msg = "Cannot serialize value: (couldn't stringify value)";
        }
        throw new TypeError(msg);
      }
      case "primitive":
        if (typeof value === "number" && !isFinite(value)) {
          if (value === Infinity) {
            return ["inf"];
          } else if (value === -Infinity) {
            return ["-inf"];
          } else {
            return ["nan"];
          }
        } else {
          return value;
        }
      case "object": {
        let object = value;
        let result = {};
        for (let key in object) {
          result[key] = this.devaluateImpl(object[key], object, depth + 1);
        }
        return result;
      }
      case "array": {
        let array = value;
        let len = array.length;
        let result = new Array(len);
        for (let i = 0; i < len; i++) {
          result[i] = this.devaluateImpl(array[i], array, depth + 1);
        }
        return [result];
      }
      case "bigint":
        return ["bigint", value.toString()];
      case "date": {
        const time = value.getTime();
        return ["date", Number.isNaN(time) ? null : time];
      }
      case "bytes": {
        let bytes = value;
        if (bytes.toBase64) {
          return ["bytes", bytes.toBase64({ omitPadding: true })];
        }
        let b64;
        if (typeof Buffer !== "undefined") {
          let buf = bytes instanceof Buffer ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
          b64 = buf.toString("base64");
        } else {
          let binary = "";
          for (let i = 0; i < bytes.length; i++) {
            binary += String.fromCharCode(bytes[i]);
          }
          b64 = btoa(binary);
        }
        return ["bytes", b64.replace(/=+$/, "")];
      }
      case "headers":
        return ["headers", [...value]];
      case "request": {
        let req = value;
        let init = {};
        if (req.method !== "GET") init.method = req.method;
        let headers = [...req.headers];
        if (headers.length > 0) {
          init.headers = headers;
        }
        if (req.body) {
          init.body = this.devaluateImpl(req.body, req, depth + 1);
          init.duplex = req.duplex || "half";
        } else if (req.body === void 0 && !["GET", "HEAD", "OPTIONS", "TRACE", "DELETE"].includes(req.method)) {
          let bodyPromise = req.arrayBuffer();
          let readable = new ReadableStream({
            async start(controller) {
              try {
                controller.enqueue(new Uint8Array(await bodyPromise));
                controller.close();
              } catch (err) {
                controller.error(err);
              }
            }
          });
          let hook = streamImpl.createReadableStreamHook(readable);
          let importId = this.exporter.createPipe(readable, hook);
          init.body = ["readable", importId];
          init.duplex = req.duplex || "half";
        }
        if (req.cache && req.cache !== "default") init.cache = req.cache;
        if (req.redirect !== "follow") init.redirect = req.redirect;
        if (req.integrity) init.integrity = req.integrity;
        if (req.mode && req.mode !== "cors") init.mode = req.mode;
        if (req.credentials && req.credentials !== "same-origin") {
          init.credentials = req.credentials;
        }
        if (req.referrer && req.referrer !== "about:client") init.referrer = req.referrer;
        if (req.referrerPolicy) init.referrerPolicy = req.referrerPolicy;
        if (req.keepalive) init.keepalive = req.keepalive;
        let cfReq = req;
        if (cfReq.cf) init.cf = cfReq.cf;
        if (cfReq.encodeResponseBody && cfReq.encodeResponseBody !== "automatic") {
          init.encodeResponseBody = cfReq.encodeResponseBody;
        }
        return ["request", req.url, init];
      }
      case "response": {
        let resp = value;
        let body = this.devaluateImpl(resp.body, resp, depth + 1);
        let init = {};
        if (resp.status !== 200) init.status = resp.status;
        if (resp.statusText) init.statusText = resp.statusText;
        let headers = [...resp.headers];
        if (headers.length > 0) {
          init.headers = headers;
        }
        let cfResp = resp;
        if (cfResp.cf) init.cf = cfResp.cf;
        if (cfResp.encodeBody && cfResp.encodeBody !== "automatic") {
          init.encodeBody = cfResp.encodeBody;
        }
        if (cfResp.webSocket) {
          throw new TypeError("Can't serialize a Response containing a webSocket.");
        }
        return ["response", body, init];
      }
      case "blob": {
        let blob = value;
        let readable = blob.stream();
        let hook = streamImpl.createReadableStreamHook(readable);
        let importId = this.exporter.createPipe(readable, hook);
        return ["blob", blob.type, ["readable", importId]];
      }
      case "error": {
        let e = value;
        let rewritten = this.exporter.onSendError(e);
        if (rewritten) {
          e = rewritten;
        }
        let anyE = e;
        let props;
        let captureProp = /* @__PURE__ */ __name((key, val) => {
          let exportsBefore = this.exports?.length ?? 0;
          try {
            let encoded = this.devaluateImpl(val, e, depth + 1);
            if (!props) props = {};
            props[key] = encoded;
          } catch (err) {
            if (this.exports && this.exports.length > exportsBefore) {
              let tail = this.exports.splice(exportsBefore);
              try {
                this.exporter.unexport(tail);
              } catch (err2) {
              }
            }
          }
        }, "captureProp");
        for (let key of Object.keys(e)) {
          if (key === "name" || key === "message" || key === "stack") continue;
          captureProp(key, anyE[key]);
        }
        if ("cause" in e) {
          captureProp("cause", anyE.cause);
        }
        if (e instanceof AggregateError) {
          captureProp("errors", e.errors);
        }
        let result = ["error", e.name, e.message];
        if (props) {
          result.push(rewritten && rewritten.stack ? rewritten.stack : null);
          result.push(props);
        } else if (rewritten && rewritten.stack) {
          result.push(rewritten.stack);
        }
        return result;
      }
      case "undefined":
        return ["undefined"];
      case "stub":
      case "rpc-promise": {
        if (!this.source) {
          throw new Error("Can't serialize RPC stubs in this context.");
        }
        let { hook, pathIfPromise } = unwrapStubAndPath(value);
        let importId = this.exporter.getImport(hook);
        if (importId !== void 0) {
          if (pathIfPromise) {
            if (pathIfPromise.length > 0) {
              return ["pipeline", importId, pathIfPromise];
            } else {
              return ["pipeline", importId];
            }
          } else {
            return ["import", importId];
          }
        }
        if (pathIfPromise) {
          hook = hook.get(pathIfPromise);
        } else {
          hook = hook.dup();
        }
        return this.devaluateHook(pathIfPromise ? "promise" : "export", hook);
      }
      case "function":
      case "rpc-target": {
        if (!this.source) {
          throw new Error("Can't serialize RPC stubs in this context.");
        }
        let hook = this.source.getHookForRpcTarget(value, parent);
        return this.devaluateHook("export", hook);
      }
      case "rpc-thenable": {
        if (!this.source) {
          throw new Error("Can't serialize RPC stubs in this context.");
        }
        let hook = this.source.getHookForRpcTarget(value, parent);
        return this.devaluateHook("promise", hook);
      }
      case "writable": {
        if (!this.source) {
          throw new Error("Can't serialize WritableStream in this context.");
        }
        let hook = this.source.getHookForWritableStream(value, parent);
        return this.devaluateHook("writable", hook);
      }
      case "readable": {
        if (!this.source) {
          throw new Error("Can't serialize ReadableStream in this context.");
        }
        let ws = value;
        let hook = this.source.getHookForReadableStream(ws, parent);
        let importId = this.exporter.createPipe(ws, hook);
        return ["readable", importId];
      }
      default:
        throw new Error("unreachable");
    }
  }
  devaluateHook(type, hook) {
    if (!this.exports) this.exports = [];
    let exportId = type === "promise" ? this.exporter.exportPromise(hook) : this.exporter.exportStub(hook);
    this.exports.push(exportId);
    return [type, exportId];
  }
};
var NullImporter = class {
  static {
    __name(this, "NullImporter");
  }
  importStub(idx) {
    throw new Error("Cannot deserialize RPC stubs without an RPC session.");
  }
  importPromise(idx) {
    throw new Error("Cannot deserialize RPC stubs without an RPC session.");
  }
  getExport(idx) {
    return void 0;
  }
  getPipeReadable(exportId) {
    throw new Error("Cannot retrieve pipe readable without an RPC session.");
  }
};
var NULL_IMPORTER = new NullImporter();
function fixBrokenRequestBody(request, body) {
  let promise = new Response(body).arrayBuffer().then((arrayBuffer) => {
    let bytes = new Uint8Array(arrayBuffer);
    let result = new Request(request, { body: bytes });
    return new PayloadStubHook(RpcPayload.fromAppReturn(result));
  });
  return new RpcPromise(new PromiseStubHook(promise), []);
}
__name(fixBrokenRequestBody, "fixBrokenRequestBody");
function streamToBlobPromise(stream, type) {
  let promise = streamToBlob(stream, type).then((blob) => {
    return new PayloadStubHook(RpcPayload.fromAppReturn(blob));
  });
  return new RpcPromise(new PromiseStubHook(promise), []);
}
__name(streamToBlobPromise, "streamToBlobPromise");
var Evaluator = class _Evaluator {
  static {
    __name(this, "_Evaluator");
  }
  constructor(importer) {
    this.importer = importer;
  }
  hooks = [];
  promises = [];
  evaluate(value) {
    let payload = RpcPayload.forEvaluate(this.hooks, this.promises);
    try {
      payload.value = this.evaluateImpl(value, payload, "value");
      return payload;
    } catch (err) {
      payload.dispose();
      throw err;
    }
  }
  // Evaluate the value without destroying it.
  evaluateCopy(value) {
    return this.evaluate(structuredClone(value));
  }
  evaluateImpl(value, parent, property) {
    if (value instanceof Array) {
      if (value.length == 1 && value[0] instanceof Array) {
        let result = value[0];
        for (let i = 0; i < result.length; i++) {
          result[i] = this.evaluateImpl(result[i], result, i);
        }
        return result;
      } else switch (value[0]) {
        case "bigint":
          if (typeof value[1] == "string") {
            return BigInt(value[1]);
          }
          break;
        case "date":
          if (value[1] === null) {
            return /* @__PURE__ */ new Date(NaN);
          }
          if (typeof value[1] == "number") {
            return new Date(value[1]);
          }
          break;
        case "bytes": {
          if (typeof value[1] == "string") {
            if (typeof Buffer !== "undefined") {
              return Buffer.from(value[1], "base64");
            } else if (Uint8Array.fromBase64) {
              return Uint8Array.fromBase64(value[1]);
            } else {
              let bs = atob(value[1]);
              let len = bs.length;
              let bytes = new Uint8Array(len);
              for (let i = 0; i < len; i++) {
                bytes[i] = bs.charCodeAt(i);
              }
              return bytes;
            }
          }
          break;
        }
        case "error":
          if (value.length >= 3 && typeof value[1] === "string" && typeof value[2] === "string") {
            let cls = ERROR_TYPES[value[1]] || Error;
            let result = cls === AggregateError ? new cls([], value[2]) : new cls(value[2]);
            if (typeof value[3] === "string") {
              result.stack = value[3];
            }
            if (value.length >= 5) {
              let props = value[4];
              if (!props || typeof props !== "object" || Array.isArray(props)) {
                break;
              }
              let anyResult = result;
              let propsObj = props;
              for (let key of Object.keys(propsObj)) {
                if (key === "name" || key === "message" || key === "stack") continue;
                anyResult[key] = this.evaluateImpl(propsObj[key], result, key);
              }
            }
            return result;
          }
          break;
        case "undefined":
          if (value.length === 1) {
            return void 0;
          }
          break;
        case "inf":
          return Infinity;
        case "-inf":
          return -Infinity;
        case "nan":
          return NaN;
        case "headers":
          if (value.length === 2 && value[1] instanceof Array) {
            return new Headers(value[1]);
          }
          break;
        case "request": {
          if (value.length !== 3 || typeof value[1] !== "string") break;
          let url = value[1];
          let init = value[2];
          if (typeof init !== "object" || init === null) break;
          if (init.body) {
            init.body = this.evaluateImpl(init.body, init, "body");
            if (init.body === null || typeof init.body === "string" || init.body instanceof Uint8Array || init.body instanceof ReadableStream) ;
            else {
              throw new TypeError("Request body must be of type ReadableStream.");
            }
          }
          if (init.signal) {
            init.signal = this.evaluateImpl(init.signal, init, "signal");
            if (!(init.signal instanceof AbortSignal)) {
              throw new TypeError("Request siganl must be of type AbortSignal.");
            }
          }
          if (init.headers && !(init.headers instanceof Array)) {
            throw new TypeError("Request headers must be serialized as an array of pairs.");
          }
          let result = new Request(url, init);
          if (init.body instanceof ReadableStream && result.body === void 0) {
            let promise = fixBrokenRequestBody(result, init.body);
            this.promises.push({ promise, parent, property });
            return promise;
          } else {
            return result;
          }
        }
        case "response": {
          if (value.length !== 3) break;
          let body = this.evaluateImpl(value[1], parent, property);
          if (body === null || typeof body === "string" || body instanceof Uint8Array || body instanceof ReadableStream) ;
          else {
            throw new TypeError("Response body must be of type ReadableStream.");
          }
          let init = value[2];
          if (typeof init !== "object" || init === null) break;
          if (init.webSocket) {
            throw new TypeError("Can't deserialize a Response containing a webSocket.");
          }
          if (init.headers && !(init.headers instanceof Array)) {
            throw new TypeError("Request headers must be serialized as an array of pairs.");
          }
          return new Response(body, init);
        }
        case "blob": {
          if (value.length !== 3 || typeof value[1] !== "string") break;
          let contentType = value[1];
          let content = this.evaluateImpl(value[2], parent, property);
          if (!(content instanceof ReadableStream)) {
            throw new TypeError("Blob content must be serialized as a ReadableStream.");
          }
          let promise = streamToBlobPromise(content, contentType);
          this.promises.push({ promise, parent, property });
          return promise;
        }
        case "import":
        case "pipeline": {
          if (value.length < 2 || value.length > 4) {
            break;
          }
          if (typeof value[1] != "number") {
            break;
          }
          let hook = this.importer.getExport(value[1]);
          if (!hook) {
            throw new Error(`no such entry on exports table: ${value[1]}`);
          }
          let isPromise = value[0] == "pipeline";
          let addStub = /* @__PURE__ */ __name((hook2) => {
            if (isPromise) {
              let promise = new RpcPromise(hook2, []);
              this.promises.push({ promise, parent, property });
              return promise;
            } else {
              this.hooks.push(hook2);
              return new RpcPromise(hook2, []);
            }
          }, "addStub");
          if (value.length == 2) {
            if (isPromise) {
              return addStub(hook.get([]));
            } else {
              return addStub(hook.dup());
            }
          }
          let path2 = value[2];
          if (!(path2 instanceof Array)) {
            break;
          }
          if (!path2.every(
            (part) => {
              return typeof part == "string" || typeof part == "number";
            }
          )) {
            break;
          }
          if (value.length == 3) {
            return addStub(hook.get(path2));
          }
          let args = value[3];
          if (!(args instanceof Array)) {
            break;
          }
          let subEval = new _Evaluator(this.importer);
          args = subEval.evaluate([args]);
          return addStub(hook.call(path2, args));
        }
        case "remap": {
          if (value.length !== 5 || typeof value[1] !== "number" || !(value[2] instanceof Array) || !(value[3] instanceof Array) || !(value[4] instanceof Array)) {
            break;
          }
          let hook = this.importer.getExport(value[1]);
          if (!hook) {
            throw new Error(`no such entry on exports table: ${value[1]}`);
          }
          let path2 = value[2];
          if (!path2.every(
            (part) => {
              return typeof part == "string" || typeof part == "number";
            }
          )) {
            break;
          }
          let captures = value[3].map((cap) => {
            if (!(cap instanceof Array) || cap.length !== 2 || cap[0] !== "import" && cap[0] !== "export" || typeof cap[1] !== "number") {
              throw new TypeError(`unknown map capture: ${JSON.stringify(cap)}`);
            }
            if (cap[0] === "export") {
              return this.importer.importStub(cap[1]);
            } else {
              let exp = this.importer.getExport(cap[1]);
              if (!exp) {
                throw new Error(`no such entry on exports table: ${cap[1]}`);
              }
              return exp.dup();
            }
          });
          let instructions = value[4];
          let resultHook = hook.map(path2, captures, instructions);
          let promise = new RpcPromise(resultHook, []);
          this.promises.push({ promise, parent, property });
          return promise;
        }
        case "export":
        case "promise":
          if (typeof value[1] == "number") {
            if (value[0] == "promise") {
              let hook = this.importer.importPromise(value[1]);
              let promise = new RpcPromise(hook, []);
              this.promises.push({ parent, property, promise });
              return promise;
            } else {
              let hook = this.importer.importStub(value[1]);
              this.hooks.push(hook);
              return new RpcStub(hook);
            }
          }
          break;
        case "writable":
          if (typeof value[1] == "number") {
            let hook = this.importer.importStub(value[1]);
            let stream = streamImpl.createWritableStreamFromHook(hook);
            this.hooks.push(hook);
            return stream;
          }
          break;
        case "readable":
          if (typeof value[1] == "number") {
            let stream = this.importer.getPipeReadable(value[1]);
            let hook = streamImpl.createReadableStreamHook(stream);
            this.hooks.push(hook);
            return stream;
          }
          break;
      }
      throw new TypeError(`unknown special value: ${JSON.stringify(value)}`);
    } else if (value instanceof Object) {
      let result = value;
      for (let key in result) {
        if (key in Object.prototype || key === "toJSON") {
          this.evaluateImpl(result[key], result, key);
          delete result[key];
        } else {
          result[key] = this.evaluateImpl(result[key], result, key);
        }
      }
      return result;
    } else {
      return value;
    }
  }
};
var ImportTableEntry = class {
  static {
    __name(this, "ImportTableEntry");
  }
  constructor(session, importId, pulling) {
    this.session = session;
    this.importId = importId;
    if (pulling) {
      this.activePull = Promise.withResolvers();
    }
  }
  localRefcount = 0;
  remoteRefcount = 1;
  activePull;
  resolution;
  // List of integer indexes into session.onBrokenCallbacks which are callbacks registered on
  // this import. Initialized on first use (so `undefined` is the same as an empty list).
  onBrokenRegistrations;
  resolve(resolution) {
    if (this.localRefcount == 0) {
      resolution.dispose();
      return;
    }
    this.resolution = resolution;
    this.sendRelease();
    if (this.onBrokenRegistrations) {
      for (let i of this.onBrokenRegistrations) {
        let callback = this.session.onBrokenCallbacks[i];
        let endIndex = this.session.onBrokenCallbacks.length;
        resolution.onBroken(callback);
        if (this.session.onBrokenCallbacks[endIndex] === callback) {
          delete this.session.onBrokenCallbacks[endIndex];
        } else {
          delete this.session.onBrokenCallbacks[i];
        }
      }
      this.onBrokenRegistrations = void 0;
    }
    if (this.activePull) {
      this.activePull.resolve();
      this.activePull = void 0;
    }
  }
  async awaitResolution() {
    if (!this.activePull) {
      this.session.sendPull(this.importId);
      this.activePull = Promise.withResolvers();
    }
    await this.activePull.promise;
    return this.resolution.pull();
  }
  dispose() {
    if (this.resolution) {
      this.resolution.dispose();
    } else {
      this.abort(new Error("RPC was canceled because the RpcPromise was disposed."));
      this.sendRelease();
    }
  }
  abort(error) {
    if (!this.resolution) {
      this.resolution = new ErrorStubHook(error);
      if (this.activePull) {
        this.activePull.reject(error);
        this.activePull = void 0;
      }
      this.onBrokenRegistrations = void 0;
    }
  }
  onBroken(callback) {
    if (this.resolution) {
      this.resolution.onBroken(callback);
    } else {
      let index = this.session.onBrokenCallbacks.length;
      this.session.onBrokenCallbacks.push(callback);
      if (!this.onBrokenRegistrations) this.onBrokenRegistrations = [];
      this.onBrokenRegistrations.push(index);
    }
  }
  sendRelease() {
    if (this.remoteRefcount > 0) {
      this.session.sendRelease(this.importId, this.remoteRefcount);
      this.remoteRefcount = 0;
    }
  }
};
var RpcImportHook = class _RpcImportHook extends StubHook {
  static {
    __name(this, "_RpcImportHook");
  }
  // undefined when we're disposed
  // `pulling` is true if we already expect that this import is going to be resolved later, and
  // null if this import is not allowed to be pulled (i.e. it's a stub not a promise).
  constructor(isPromise, entry) {
    super();
    this.isPromise = isPromise;
    ++entry.localRefcount;
    this.entry = entry;
  }
  entry;
  collectPath(path2) {
    return this;
  }
  getEntry() {
    if (this.entry) {
      return this.entry;
    } else {
      throw new Error("This RpcImportHook was already disposed.");
    }
  }
  // -------------------------------------------------------------------------------------
  // implements StubHook
  call(path2, args) {
    let entry = this.getEntry();
    if (entry.resolution) {
      return entry.resolution.call(path2, args);
    } else {
      return entry.session.sendCall(entry.importId, path2, args);
    }
  }
  stream(path2, args) {
    let entry = this.getEntry();
    if (entry.resolution) {
      return entry.resolution.stream(path2, args);
    } else {
      return entry.session.sendStream(entry.importId, path2, args);
    }
  }
  map(path2, captures, instructions) {
    let entry;
    try {
      entry = this.getEntry();
    } catch (err) {
      for (let cap of captures) {
        cap.dispose();
      }
      throw err;
    }
    if (entry.resolution) {
      return entry.resolution.map(path2, captures, instructions);
    } else {
      return entry.session.sendMap(entry.importId, path2, captures, instructions);
    }
  }
  get(path2) {
    let entry = this.getEntry();
    if (entry.resolution) {
      return entry.resolution.get(path2);
    } else {
      return entry.session.sendCall(entry.importId, path2);
    }
  }
  dup() {
    return new _RpcImportHook(false, this.getEntry());
  }
  pull() {
    let entry = this.getEntry();
    if (!this.isPromise) {
      throw new Error("Can't pull this hook because it's not a promise hook.");
    }
    if (entry.resolution) {
      return entry.resolution.pull();
    }
    return entry.awaitResolution();
  }
  ignoreUnhandledRejections() {
  }
  dispose() {
    let entry = this.entry;
    this.entry = void 0;
    if (entry) {
      if (--entry.localRefcount === 0) {
        entry.dispose();
      }
    }
  }
  onBroken(callback) {
    if (this.entry) {
      this.entry.onBroken(callback);
    }
  }
};
var RpcMainHook = class extends RpcImportHook {
  static {
    __name(this, "RpcMainHook");
  }
  session;
  constructor(entry) {
    super(false, entry);
    this.session = entry.session;
  }
  dispose() {
    if (this.session) {
      let session = this.session;
      this.session = void 0;
      session.shutdown();
    }
  }
};
var RpcSessionImpl = class {
  static {
    __name(this, "RpcSessionImpl");
  }
  constructor(transport, mainHook, options) {
    this.transport = transport;
    this.options = options;
    this.exports.push({ hook: mainHook, refcount: 1 });
    this.imports.push(new ImportTableEntry(this, 0, false));
    this.readLoop().catch((err) => this.abort(err));
  }
  exports = [];
  reverseExports = /* @__PURE__ */ new Map();
  imports = [];
  abortReason;
  cancelReadLoop;
  // We assign positive numbers to imports we initiate, and negative numbers to exports we
  // initiate. So the next import ID is just `imports.length`, but the next export ID needs
  // to be tracked explicitly.
  nextExportId = -1;
  // If set, call this when all incoming calls are complete.
  onBatchDone;
  // How many promises is our peer expecting us to resolve?
  pullCount = 0;
  // Sparse array of onBrokenCallback registrations. Items are strictly appended to the end but
  // may be deleted from the middle (hence leaving the array sparse).
  onBrokenCallbacks = [];
  // Should only be called once immediately after construction.
  getMainImport() {
    return new RpcMainHook(this.imports[0]);
  }
  shutdown() {
    this.abort(new Error("RPC session was shut down by disposing the main stub"), false);
  }
  exportStub(hook) {
    if (this.abortReason) throw this.abortReason;
    let existingExportId = this.reverseExports.get(hook);
    if (existingExportId !== void 0) {
      ++this.exports[existingExportId].refcount;
      return existingExportId;
    } else {
      let exportId = this.nextExportId--;
      this.exports[exportId] = { hook, refcount: 1 };
      this.reverseExports.set(hook, exportId);
      return exportId;
    }
  }
  exportPromise(hook) {
    if (this.abortReason) throw this.abortReason;
    let exportId = this.nextExportId--;
    this.exports[exportId] = { hook, refcount: 1 };
    this.reverseExports.set(hook, exportId);
    this.ensureResolvingExport(exportId);
    return exportId;
  }
  unexport(ids) {
    for (let id of ids) {
      this.releaseExport(id, 1);
    }
  }
  releaseExport(exportId, refcount) {
    let entry = this.exports[exportId];
    if (!entry) {
      throw new Error(`no such export ID: ${exportId}`);
    }
    if (entry.refcount < refcount) {
      throw new Error(`refcount would go negative: ${entry.refcount} < ${refcount}`);
    }
    entry.refcount -= refcount;
    if (entry.refcount === 0) {
      delete this.exports[exportId];
      this.reverseExports.delete(entry.hook);
      entry.hook.dispose();
    }
  }
  onSendError(error) {
    if (this.options.onSendError) {
      return this.options.onSendError(error);
    }
  }
  ensureResolvingExport(exportId) {
    let exp = this.exports[exportId];
    if (!exp) {
      throw new Error(`no such export ID: ${exportId}`);
    }
    if (!exp.pull) {
      let resolve = /* @__PURE__ */ __name(async () => {
        let hook = exp.hook;
        for (; ; ) {
          let payload = await hook.pull();
          if (payload.value instanceof RpcStub) {
            let { hook: inner, pathIfPromise } = unwrapStubAndPath(payload.value);
            if (pathIfPromise && pathIfPromise.length == 0) {
              if (this.getImport(hook) === void 0) {
                hook = inner;
                continue;
              }
            }
          }
          return payload;
        }
      }, "resolve");
      let autoRelease = exp.autoRelease;
      ++this.pullCount;
      exp.pull = resolve().then(
        (payload) => {
          let value = Devaluator.devaluate(payload.value, void 0, this, payload);
          this.send(["resolve", exportId, value]);
          if (autoRelease) this.releaseExport(exportId, 1);
        },
        (error) => {
          this.send(["reject", exportId, Devaluator.devaluate(error, void 0, this)]);
          if (autoRelease) this.releaseExport(exportId, 1);
        }
      ).catch(
        (error) => {
          try {
            this.send(["reject", exportId, Devaluator.devaluate(error, void 0, this)]);
            if (autoRelease) this.releaseExport(exportId, 1);
          } catch (error2) {
            this.abort(error2);
          }
        }
      ).finally(() => {
        if (--this.pullCount === 0) {
          if (this.onBatchDone) {
            this.onBatchDone.resolve();
          }
        }
      });
    }
  }
  getImport(hook) {
    if (hook instanceof RpcImportHook && hook.entry && hook.entry.session === this) {
      return hook.entry.importId;
    } else {
      return void 0;
    }
  }
  importStub(idx) {
    if (this.abortReason) throw this.abortReason;
    let entry = this.imports[idx];
    if (!entry) {
      entry = new ImportTableEntry(this, idx, false);
      this.imports[idx] = entry;
    }
    return new RpcImportHook(
      /*isPromise=*/
      false,
      entry
    );
  }
  importPromise(idx) {
    if (this.abortReason) throw this.abortReason;
    if (this.imports[idx]) {
      return new ErrorStubHook(new Error(
        "Bug in RPC system: The peer sent a promise reusing an existing export ID."
      ));
    }
    let entry = new ImportTableEntry(this, idx, true);
    this.imports[idx] = entry;
    return new RpcImportHook(
      /*isPromise=*/
      true,
      entry
    );
  }
  getExport(idx) {
    return this.exports[idx]?.hook;
  }
  getPipeReadable(exportId) {
    let entry = this.exports[exportId];
    if (!entry || !entry.pipeReadable) {
      throw new Error(`Export ${exportId} is not a pipe or its readable end was already consumed.`);
    }
    let readable = entry.pipeReadable;
    entry.pipeReadable = void 0;
    return readable;
  }
  createPipe(readable, readableHook) {
    if (this.abortReason) throw this.abortReason;
    this.send(["pipe"]);
    let importId = this.imports.length;
    let entry = new ImportTableEntry(this, importId, false);
    this.imports.push(entry);
    let hook = new RpcImportHook(
      /*isPromise=*/
      false,
      entry
    );
    let writable = streamImpl.createWritableStreamFromHook(hook);
    readable.pipeTo(writable).catch(() => {
    }).finally(() => readableHook.dispose());
    return importId;
  }
  // Serializes and sends a message. Returns the byte length of the serialized message.
  send(msg) {
    if (this.abortReason !== void 0) {
      return 0;
    }
    let msgText;
    try {
      msgText = JSON.stringify(msg);
    } catch (err) {
      try {
        this.abort(err);
      } catch (err2) {
      }
      throw err;
    }
    this.transport.send(msgText).catch((err) => this.abort(err, false));
    return msgText.length;
  }
  sendCall(id, path2, args) {
    if (this.abortReason) throw this.abortReason;
    let value = ["pipeline", id, path2];
    if (args) {
      let devalue = Devaluator.devaluate(args.value, void 0, this, args);
      value.push(devalue[0]);
    }
    this.send(["push", value]);
    let entry = new ImportTableEntry(this, this.imports.length, false);
    this.imports.push(entry);
    return new RpcImportHook(
      /*isPromise=*/
      true,
      entry
    );
  }
  sendStream(id, path2, args) {
    if (this.abortReason) throw this.abortReason;
    let value = ["pipeline", id, path2];
    let devalue = Devaluator.devaluate(args.value, void 0, this, args);
    value.push(devalue[0]);
    let size = this.send(["stream", value]);
    let importId = this.imports.length;
    let entry = new ImportTableEntry(
      this,
      importId,
      /*pulling=*/
      true
    );
    entry.remoteRefcount = 0;
    entry.localRefcount = 1;
    this.imports.push(entry);
    let promise = entry.awaitResolution().then(
      (p) => {
        p.dispose();
        delete this.imports[importId];
      },
      (err) => {
        delete this.imports[importId];
        throw err;
      }
    );
    return { promise, size };
  }
  sendMap(id, path2, captures, instructions) {
    if (this.abortReason) {
      for (let cap of captures) {
        cap.dispose();
      }
      throw this.abortReason;
    }
    let devaluedCaptures = captures.map((hook) => {
      let importId = this.getImport(hook);
      if (importId !== void 0) {
        return ["import", importId];
      } else {
        return ["export", this.exportStub(hook)];
      }
    });
    let value = ["remap", id, path2, devaluedCaptures, instructions];
    this.send(["push", value]);
    let entry = new ImportTableEntry(this, this.imports.length, false);
    this.imports.push(entry);
    return new RpcImportHook(
      /*isPromise=*/
      true,
      entry
    );
  }
  sendPull(id) {
    if (this.abortReason) throw this.abortReason;
    this.send(["pull", id]);
  }
  sendRelease(id, remoteRefcount) {
    if (this.abortReason) return;
    this.send(["release", id, remoteRefcount]);
    delete this.imports[id];
  }
  abort(error, trySendAbortMessage = true) {
    if (this.abortReason !== void 0) return;
    this.cancelReadLoop?.(error);
    this.cancelReadLoop = void 0;
    if (trySendAbortMessage) {
      try {
        this.transport.send(JSON.stringify(["abort", Devaluator.devaluate(error, void 0, this)])).catch((err) => {
        });
      } catch (err) {
      }
    }
    if (error === void 0) {
      error = "undefined";
    }
    this.abortReason = error;
    if (this.onBatchDone) {
      this.onBatchDone.reject(error);
    }
    if (this.transport.abort) {
      try {
        this.transport.abort(error);
      } catch (err) {
        Promise.resolve(err);
      }
    }
    for (let i in this.onBrokenCallbacks) {
      try {
        this.onBrokenCallbacks[i](error);
      } catch (err) {
        Promise.resolve(err);
      }
    }
    for (let i in this.imports) {
      this.imports[i].abort(error);
    }
    for (let i in this.exports) {
      this.exports[i].hook.dispose();
    }
  }
  async readLoop() {
    while (!this.abortReason) {
      let readCanceled = Promise.withResolvers();
      this.cancelReadLoop = readCanceled.reject;
      let msgText;
      try {
        msgText = await Promise.race([this.transport.receive(), readCanceled.promise]);
      } finally {
        if (this.cancelReadLoop === readCanceled.reject) {
          this.cancelReadLoop = void 0;
        }
      }
      let msg = JSON.parse(msgText);
      if (this.abortReason) break;
      if (msg instanceof Array) {
        switch (msg[0]) {
          case "push":
            if (msg.length > 1) {
              let payload = new Evaluator(this).evaluate(msg[1]);
              let hook = new PayloadStubHook(payload);
              hook.ignoreUnhandledRejections();
              this.exports.push({ hook, refcount: 1 });
              continue;
            }
            break;
          case "stream": {
            if (msg.length > 1) {
              let payload = new Evaluator(this).evaluate(msg[1]);
              let hook = new PayloadStubHook(payload);
              hook.ignoreUnhandledRejections();
              let exportId = this.exports.length;
              this.exports.push({ hook, refcount: 1, autoRelease: true });
              this.ensureResolvingExport(exportId);
              continue;
            }
            break;
          }
          case "pipe": {
            let { readable, writable } = new TransformStream();
            let hook = streamImpl.createWritableStreamHook(writable);
            this.exports.push({ hook, refcount: 1, pipeReadable: readable });
            continue;
          }
          case "pull": {
            let exportId = msg[1];
            if (typeof exportId == "number") {
              this.ensureResolvingExport(exportId);
              continue;
            }
            break;
          }
          case "resolve":
          // ["resolve", ExportId, Expression]
          case "reject": {
            let importId = msg[1];
            if (typeof importId == "number" && msg.length > 2) {
              let imp = this.imports[importId];
              if (imp) {
                if (msg[0] == "resolve") {
                  imp.resolve(new PayloadStubHook(new Evaluator(this).evaluate(msg[2])));
                } else {
                  let payload = new Evaluator(this).evaluate(msg[2]);
                  payload.dispose();
                  imp.resolve(new ErrorStubHook(payload.value));
                }
              } else {
                if (msg[0] == "resolve") {
                  new Evaluator(this).evaluate(msg[2]).dispose();
                }
              }
              continue;
            }
            break;
          }
          case "release": {
            let exportId = msg[1];
            let refcount = msg[2];
            if (typeof exportId == "number" && typeof refcount == "number") {
              this.releaseExport(exportId, refcount);
              continue;
            }
            break;
          }
          case "abort": {
            let payload = new Evaluator(this).evaluate(msg[1]);
            payload.dispose();
            this.abort(payload, false);
            break;
          }
        }
      }
      throw new Error(`bad RPC message: ${JSON.stringify(msg)}`);
    }
  }
  async drain() {
    if (this.abortReason) {
      throw this.abortReason;
    }
    if (this.pullCount > 0) {
      let { promise, resolve, reject } = Promise.withResolvers();
      this.onBatchDone = { resolve, reject };
      await promise;
    }
  }
  getStats() {
    let result = { imports: 0, exports: 0 };
    for (let i in this.imports) {
      ++result.imports;
    }
    for (let i in this.exports) {
      ++result.exports;
    }
    return result;
  }
};
var RpcSession = class {
  static {
    __name(this, "RpcSession");
  }
  #session;
  #mainStub;
  constructor(transport, localMain, options = {}) {
    let mainHook;
    if (localMain) {
      mainHook = new PayloadStubHook(RpcPayload.fromAppReturn(localMain));
    } else {
      mainHook = new ErrorStubHook(new Error("This connection has no main object."));
    }
    this.#session = new RpcSessionImpl(transport, mainHook, options);
    this.#mainStub = new RpcStub(this.#session.getMainImport());
  }
  getRemoteMain() {
    return this.#mainStub;
  }
  getStats() {
    return this.#session.getStats();
  }
  drain() {
    return this.#session.drain();
  }
};
var currentMapBuilder;
var MapBuilder = class {
  static {
    __name(this, "MapBuilder");
  }
  context;
  captureMap = /* @__PURE__ */ new Map();
  instructions = [];
  constructor(subject, path2) {
    if (currentMapBuilder) {
      this.context = {
        parent: currentMapBuilder,
        captures: [],
        subject: currentMapBuilder.capture(subject),
        path: path2
      };
    } else {
      this.context = {
        parent: void 0,
        captures: [],
        subject,
        path: path2
      };
    }
    currentMapBuilder = this;
  }
  unregister() {
    currentMapBuilder = this.context.parent;
  }
  makeInput() {
    return new MapVariableHook(this, 0);
  }
  makeOutput(result) {
    let devalued;
    try {
      devalued = Devaluator.devaluate(result.value, void 0, this, result);
    } finally {
      result.dispose();
    }
    this.instructions.push(devalued);
    if (this.context.parent) {
      this.context.parent.instructions.push(
        [
          "remap",
          this.context.subject,
          this.context.path,
          this.context.captures.map((cap) => ["import", cap]),
          this.instructions
        ]
      );
      return new MapVariableHook(this.context.parent, this.context.parent.instructions.length);
    } else {
      return this.context.subject.map(this.context.path, this.context.captures, this.instructions);
    }
  }
  pushCall(hook, path2, params) {
    let devalued = Devaluator.devaluate(params.value, void 0, this, params);
    devalued = devalued[0];
    let subject = this.capture(hook.dup());
    this.instructions.push(["pipeline", subject, path2, devalued]);
    return new MapVariableHook(this, this.instructions.length);
  }
  pushGet(hook, path2) {
    let subject = this.capture(hook.dup());
    this.instructions.push(["pipeline", subject, path2]);
    return new MapVariableHook(this, this.instructions.length);
  }
  capture(hook) {
    if (hook instanceof MapVariableHook && hook.mapper === this) {
      return hook.idx;
    }
    let result = this.captureMap.get(hook);
    if (result === void 0) {
      if (this.context.parent) {
        let parentIdx = this.context.parent.capture(hook);
        this.context.captures.push(parentIdx);
      } else {
        this.context.captures.push(hook);
      }
      result = -this.context.captures.length;
      this.captureMap.set(hook, result);
    }
    return result;
  }
  // ---------------------------------------------------------------------------
  // implements Exporter
  exportStub(hook) {
    throw new Error(
      "Can't construct an RpcTarget or RPC callback inside a mapper function. Try creating a new RpcStub outside the callback first, then using it inside the callback."
    );
  }
  exportPromise(hook) {
    return this.exportStub(hook);
  }
  getImport(hook) {
    return this.capture(hook);
  }
  unexport(ids) {
  }
  createPipe(readable) {
    throw new Error("Cannot send ReadableStream inside a mapper function.");
  }
  onSendError(error) {
  }
};
mapImpl.sendMap = (hook, path2, func) => {
  let builder = new MapBuilder(hook, path2);
  let result;
  try {
    result = RpcPayload.fromAppReturn(withCallInterceptor(builder.pushCall.bind(builder), () => {
      return func(new RpcPromise(builder.makeInput(), []));
    }));
  } finally {
    builder.unregister();
  }
  if (result instanceof Promise) {
    result.catch((err) => {
    });
    throw new Error("RPC map() callbacks cannot be async.");
  }
  return new RpcPromise(builder.makeOutput(result), []);
};
function throwMapperBuilderUseError() {
  throw new Error(
    "Attempted to use an abstract placeholder from a mapper function. Please make sure your map function has no side effects."
  );
}
__name(throwMapperBuilderUseError, "throwMapperBuilderUseError");
var MapVariableHook = class extends StubHook {
  static {
    __name(this, "MapVariableHook");
  }
  constructor(mapper, idx) {
    super();
    this.mapper = mapper;
    this.idx = idx;
  }
  // We don't have anything we actually need to dispose, so dup() can just return the same hook.
  dup() {
    return this;
  }
  dispose() {
  }
  get(path2) {
    if (path2.length == 0) {
      return this;
    } else if (currentMapBuilder) {
      return currentMapBuilder.pushGet(this, path2);
    } else {
      throwMapperBuilderUseError();
    }
  }
  // Other methods should never be called.
  call(path2, args) {
    throwMapperBuilderUseError();
  }
  map(path2, captures, instructions) {
    throwMapperBuilderUseError();
  }
  pull() {
    throwMapperBuilderUseError();
  }
  ignoreUnhandledRejections() {
  }
  onBroken(callback) {
    throwMapperBuilderUseError();
  }
};
var MapApplicator = class {
  static {
    __name(this, "MapApplicator");
  }
  constructor(captures, input) {
    this.captures = captures;
    this.variables = [input];
  }
  variables;
  dispose() {
    for (let variable of this.variables) {
      variable.dispose();
    }
  }
  apply(instructions) {
    try {
      if (instructions.length < 1) {
        throw new Error("Invalid empty mapper function.");
      }
      for (let instruction of instructions.slice(0, -1)) {
        let payload = new Evaluator(this).evaluateCopy(instruction);
        if (payload.value instanceof RpcStub) {
          let hook = unwrapStubNoProperties(payload.value);
          if (hook) {
            this.variables.push(hook);
            continue;
          }
        }
        this.variables.push(new PayloadStubHook(payload));
      }
      return new Evaluator(this).evaluateCopy(instructions[instructions.length - 1]);
    } finally {
      for (let variable of this.variables) {
        variable.dispose();
      }
    }
  }
  importStub(idx) {
    throw new Error("A mapper function cannot refer to exports.");
  }
  importPromise(idx) {
    return this.importStub(idx);
  }
  getExport(idx) {
    if (idx < 0) {
      return this.captures[-idx - 1];
    } else {
      return this.variables[idx];
    }
  }
  getPipeReadable(exportId) {
    throw new Error("A mapper function cannot use pipe readables.");
  }
};
function applyMapToElement(input, parent, owner, captures, instructions) {
  let inputHook = new PayloadStubHook(RpcPayload.deepCopyFrom(input, parent, owner));
  let mapper = new MapApplicator(captures, inputHook);
  try {
    return mapper.apply(instructions);
  } finally {
    mapper.dispose();
  }
}
__name(applyMapToElement, "applyMapToElement");
mapImpl.applyMap = (input, parent, owner, captures, instructions) => {
  try {
    let result;
    if (input instanceof RpcPromise) {
      throw new Error("applyMap() can't be called on RpcPromise");
    } else if (input instanceof Array) {
      let payloads = [];
      try {
        for (let elem of input) {
          payloads.push(applyMapToElement(elem, input, owner, captures, instructions));
        }
      } catch (err) {
        for (let payload of payloads) {
          payload.dispose();
        }
        throw err;
      }
      result = RpcPayload.fromArray(payloads);
    } else if (input === null || input === void 0) {
      result = RpcPayload.fromAppReturn(input);
    } else {
      result = applyMapToElement(input, parent, owner, captures, instructions);
    }
    return new PayloadStubHook(result);
  } finally {
    for (let cap of captures) {
      cap.dispose();
    }
  }
};
var WritableStreamStubHook = class _WritableStreamStubHook extends StubHook {
  static {
    __name(this, "_WritableStreamStubHook");
  }
  state;
  // undefined when disposed
  // Creates a new WritableStreamStubHook that is not duplicated from an existing hook.
  static create(stream) {
    let writer = stream.getWriter();
    return new _WritableStreamStubHook({ refcount: 1, writer, closed: false });
  }
  constructor(state, dupFrom) {
    super();
    this.state = state;
    if (dupFrom) {
      ++state.refcount;
    }
  }
  getState() {
    if (this.state) {
      return this.state;
    } else {
      throw new Error("Attempted to use a WritableStreamStubHook after it was disposed.");
    }
  }
  call(path2, args) {
    try {
      let state = this.getState();
      if (path2.length !== 1 || typeof path2[0] !== "string") {
        throw new Error("WritableStream stub only supports direct method calls");
      }
      const method = path2[0];
      if (method !== "write" && method !== "close" && method !== "abort") {
        args.dispose();
        throw new Error(`Unknown WritableStream method: ${method}`);
      }
      if (method === "close" || method === "abort") {
        state.closed = true;
      }
      let func = state.writer[method];
      let promise = args.deliverCall(func, state.writer);
      return new PromiseStubHook(promise.then((payload) => new PayloadStubHook(payload)));
    } catch (err) {
      return new ErrorStubHook(err);
    }
  }
  map(path2, captures, instructions) {
    for (let cap of captures) {
      cap.dispose();
    }
    return new ErrorStubHook(new Error("Cannot use map() on a WritableStream"));
  }
  get(path2) {
    return new ErrorStubHook(new Error("Cannot access properties on a WritableStream stub"));
  }
  dup() {
    let state = this.getState();
    return new _WritableStreamStubHook(state, this);
  }
  pull() {
    return Promise.reject(new Error("Cannot pull a WritableStream stub"));
  }
  ignoreUnhandledRejections() {
  }
  dispose() {
    let state = this.state;
    this.state = void 0;
    if (state) {
      if (--state.refcount === 0) {
        if (!state.closed) {
          state.writer.abort(new Error("WritableStream RPC stub was disposed without calling close()")).catch(() => {
          });
        }
        state.writer.releaseLock();
      }
    }
  }
  onBroken(callback) {
  }
};
var INITIAL_WINDOW = 256 * 1024;
var MAX_WINDOW = 1024 * 1024 * 1024;
var MIN_WINDOW = 64 * 1024;
var STARTUP_GROWTH_FACTOR = 2;
var STEADY_GROWTH_FACTOR = 1.25;
var DECAY_FACTOR = 0.9;
var STARTUP_EXIT_ROUNDS = 3;
var FlowController = class {
  static {
    __name(this, "FlowController");
  }
  constructor(now) {
    this.now = now;
  }
  // The current window size in bytes. The sender blocks when bytesInFlight >= window.
  window = INITIAL_WINDOW;
  // Total bytes currently in flight (sent but not yet acked).
  bytesInFlight = 0;
  // Whether we're still in the startup phase.
  inStartupPhase = true;
  // ----- BDP estimation state (private) -----
  // Total bytes acked so far.
  delivered = 0;
  // Time of most recent ack.
  deliveredTime = 0;
  // Time when the very first ack was received.
  firstAckTime = 0;
  firstAckDelivered = 0;
  // Global minimum RTT observed (milliseconds).
  minRtt = Infinity;
  // For startup exit: count of consecutive RTT rounds where the window didn't meaningfully grow.
  roundsWithoutIncrease = 0;
  // Window size at the start of the current round, for startup exit detection.
  lastRoundWindow = 0;
  // Time when the current round started.
  roundStartTime = 0;
  // Called when a write of `size` bytes is about to be sent. Returns a token that must be
  // passed to onAck() when the ack arrives, and whether the sender should block (window full).
  onSend(size) {
    this.bytesInFlight += size;
    let token = {
      sentTime: this.now(),
      size,
      deliveredAtSend: this.delivered,
      deliveredTimeAtSend: this.deliveredTime,
      windowAtSend: this.window,
      windowFullAtSend: this.bytesInFlight >= this.window
    };
    return { token, shouldBlock: token.windowFullAtSend };
  }
  // Called when a previously-sent write fails. Restores bytesInFlight without updating
  // any BDP estimates.
  onError(token) {
    this.bytesInFlight -= token.size;
  }
  // Called when an ack is received for a previously-sent write. Updates BDP estimates and
  // the window. Returns whether a blocked sender should now unblock.
  onAck(token) {
    let ackTime = this.now();
    this.delivered += token.size;
    this.deliveredTime = ackTime;
    this.bytesInFlight -= token.size;
    let rtt = ackTime - token.sentTime;
    this.minRtt = Math.min(this.minRtt, rtt);
    if (this.firstAckTime === 0) {
      this.firstAckTime = ackTime;
      this.firstAckDelivered = this.delivered;
    } else {
      let baseTime;
      let baseDelivered;
      if (token.deliveredTimeAtSend === 0) {
        baseTime = this.firstAckTime;
        baseDelivered = this.firstAckDelivered;
      } else {
        baseTime = token.deliveredTimeAtSend;
        baseDelivered = token.deliveredAtSend;
      }
      let interval = ackTime - baseTime;
      let bytes = this.delivered - baseDelivered;
      let bandwidth = bytes / interval;
      let growthFactor = this.inStartupPhase ? STARTUP_GROWTH_FACTOR : STEADY_GROWTH_FACTOR;
      let newWindow = bandwidth * this.minRtt * growthFactor;
      newWindow = Math.min(newWindow, token.windowAtSend * growthFactor);
      if (token.windowFullAtSend) {
        newWindow = Math.max(newWindow, token.windowAtSend * DECAY_FACTOR);
      } else {
        newWindow = Math.max(newWindow, this.window);
      }
      this.window = Math.max(Math.min(newWindow, MAX_WINDOW), MIN_WINDOW);
      if (this.inStartupPhase && token.sentTime >= this.roundStartTime) {
        if (this.window > this.lastRoundWindow * STEADY_GROWTH_FACTOR) {
          this.roundsWithoutIncrease = 0;
        } else {
          if (++this.roundsWithoutIncrease >= STARTUP_EXIT_ROUNDS) {
            this.inStartupPhase = false;
          }
        }
        this.roundStartTime = ackTime;
        this.lastRoundWindow = this.window;
      }
    }
    return this.bytesInFlight < this.window;
  }
};
function createWritableStreamFromHook(hook) {
  let pendingError = void 0;
  let hookDisposed = false;
  let fc = new FlowController(() => performance.now());
  let windowResolve;
  let windowReject;
  const disposeHook = /* @__PURE__ */ __name(() => {
    if (!hookDisposed) {
      hookDisposed = true;
      hook.dispose();
    }
  }, "disposeHook");
  return new WritableStream({
    write(chunk, controller) {
      if (pendingError !== void 0) {
        throw pendingError;
      }
      const payload = RpcPayload.fromAppParams([chunk]);
      const { promise, size } = hook.stream(["write"], payload);
      if (size === void 0) {
        return promise.catch((err) => {
          if (pendingError === void 0) {
            pendingError = err;
          }
          throw err;
        });
      } else {
        let { token, shouldBlock } = fc.onSend(size);
        promise.then(() => {
          let hasCapacity = fc.onAck(token);
          if (hasCapacity && windowResolve) {
            windowResolve();
            windowResolve = void 0;
            windowReject = void 0;
          }
        }, (err) => {
          fc.onError(token);
          if (pendingError === void 0) {
            pendingError = err;
            controller.error(err);
            disposeHook();
          }
          if (windowReject) {
            windowReject(err);
            windowResolve = void 0;
            windowReject = void 0;
          }
        });
        if (shouldBlock) {
          return new Promise((resolve, reject) => {
            windowResolve = resolve;
            windowReject = reject;
          });
        }
      }
    },
    async close() {
      if (pendingError !== void 0) {
        disposeHook();
        throw pendingError;
      }
      const { promise } = hook.stream(["close"], RpcPayload.fromAppParams([]));
      try {
        await promise;
      } catch (err) {
        throw pendingError ?? err;
      } finally {
        disposeHook();
      }
    },
    abort(reason) {
      if (pendingError !== void 0) {
        return;
      }
      pendingError = reason ?? new Error("WritableStream was aborted");
      if (windowReject) {
        windowReject(pendingError);
        windowResolve = void 0;
        windowReject = void 0;
      }
      const { promise } = hook.stream(["abort"], RpcPayload.fromAppParams([reason]));
      promise.then(() => disposeHook(), () => disposeHook());
    }
  });
}
__name(createWritableStreamFromHook, "createWritableStreamFromHook");
var ReadableStreamStubHook = class _ReadableStreamStubHook extends StubHook {
  static {
    __name(this, "_ReadableStreamStubHook");
  }
  state;
  // undefined when disposed
  // Creates a new ReadableStreamStubHook.
  static create(stream) {
    return new _ReadableStreamStubHook({ refcount: 1, stream, canceled: false });
  }
  constructor(state, dupFrom) {
    super();
    this.state = state;
    if (dupFrom) {
      ++state.refcount;
    }
  }
  call(path2, args) {
    args.dispose();
    return new ErrorStubHook(new Error("Cannot call methods on a ReadableStream stub"));
  }
  map(path2, captures, instructions) {
    for (let cap of captures) {
      cap.dispose();
    }
    return new ErrorStubHook(new Error("Cannot use map() on a ReadableStream"));
  }
  get(path2) {
    return new ErrorStubHook(new Error("Cannot access properties on a ReadableStream stub"));
  }
  dup() {
    let state = this.state;
    if (!state) {
      throw new Error("Attempted to dup a ReadableStreamStubHook after it was disposed.");
    }
    return new _ReadableStreamStubHook(state, this);
  }
  pull() {
    return Promise.reject(new Error("Cannot pull a ReadableStream stub"));
  }
  ignoreUnhandledRejections() {
  }
  dispose() {
    let state = this.state;
    this.state = void 0;
    if (state) {
      if (--state.refcount === 0) {
        if (!state.canceled) {
          state.canceled = true;
          if (!state.stream.locked) {
            state.stream.cancel(
              new Error("ReadableStream RPC stub was disposed without being consumed")
            ).catch(() => {
            });
          }
        }
      }
    }
  }
  onBroken(callback) {
  }
};
streamImpl.createWritableStreamHook = WritableStreamStubHook.create;
streamImpl.createWritableStreamFromHook = createWritableStreamFromHook;
streamImpl.createReadableStreamHook = ReadableStreamStubHook.create;
var RpcSession2 = RpcSession;
var RpcTarget4 = RpcTarget;

// ../node_modules/@cloudflare/sandbox/dist/sandbox-Co2NYKhX.js
import { RpcTarget as RpcTarget$1, tracing } from "cloudflare:workers";
import path from "node:path/posix";
var SandboxError = class extends Error {
  static {
    __name(this, "SandboxError");
  }
  constructor(errorResponse, options) {
    super(errorResponse.message, options);
    this.errorResponse = errorResponse;
    this.name = "SandboxError";
  }
  get code() {
    return this.errorResponse.code;
  }
  get context() {
    return this.errorResponse.context;
  }
  get httpStatus() {
    return this.errorResponse.httpStatus;
  }
  get operation() {
    return this.errorResponse.operation;
  }
  get suggestion() {
    return this.errorResponse.suggestion;
  }
  get timestamp() {
    return this.errorResponse.timestamp;
  }
  get documentation() {
    return this.errorResponse.documentation;
  }
  toJSON() {
    return {
      name: this.name,
      message: this.message,
      code: this.code,
      context: this.context,
      httpStatus: this.httpStatus,
      operation: this.operation,
      suggestion: this.suggestion,
      timestamp: this.timestamp,
      documentation: this.documentation,
      stack: this.stack
    };
  }
};
var FileNotFoundError = class extends SandboxError {
  static {
    __name(this, "FileNotFoundError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "FileNotFoundError";
  }
  get path() {
    return this.context.path;
  }
};
var FileExistsError = class extends SandboxError {
  static {
    __name(this, "FileExistsError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "FileExistsError";
  }
  get path() {
    return this.context.path;
  }
};
var FileTooLargeError = class extends SandboxError {
  static {
    __name(this, "FileTooLargeError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "FileTooLargeError";
  }
  get path() {
    return this.context.path;
  }
};
var FileSystemError = class extends SandboxError {
  static {
    __name(this, "FileSystemError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "FileSystemError";
  }
  get path() {
    return this.context.path;
  }
  get stderr() {
    return this.context.stderr;
  }
  get exitCode() {
    return this.context.exitCode;
  }
};
var PermissionDeniedError = class extends SandboxError {
  static {
    __name(this, "PermissionDeniedError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "PermissionDeniedError";
  }
  get path() {
    return this.context.path;
  }
};
var CommandNotFoundError = class extends SandboxError {
  static {
    __name(this, "CommandNotFoundError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "CommandNotFoundError";
  }
  get command() {
    return this.context.command;
  }
};
var CommandError = class extends SandboxError {
  static {
    __name(this, "CommandError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "CommandError";
  }
  get command() {
    return this.context.command;
  }
  get exitCode() {
    return this.context.exitCode;
  }
  get stdout() {
    return this.context.stdout;
  }
  get stderr() {
    return this.context.stderr;
  }
};
var ProcessNotFoundError = class extends SandboxError {
  static {
    __name(this, "ProcessNotFoundError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "ProcessNotFoundError";
  }
  get processId() {
    return this.context.processId;
  }
};
var ProcessError = class extends SandboxError {
  static {
    __name(this, "ProcessError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "ProcessError";
  }
  get processId() {
    return this.context.processId;
  }
  get pid() {
    return this.context.pid;
  }
  get exitCode() {
    return this.context.exitCode;
  }
  get stderr() {
    return this.context.stderr;
  }
};
var SessionAlreadyExistsError = class extends SandboxError {
  static {
    __name(this, "SessionAlreadyExistsError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "SessionAlreadyExistsError";
  }
  get sessionId() {
    return this.context.sessionId;
  }
  get containerPlacementId() {
    return this.context.containerPlacementId;
  }
};
var SessionDestroyedError = class extends SandboxError {
  static {
    __name(this, "SessionDestroyedError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "SessionDestroyedError";
  }
  get sessionId() {
    return this.context.sessionId;
  }
};
var SessionTerminatedError = class extends SandboxError {
  static {
    __name(this, "SessionTerminatedError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "SessionTerminatedError";
  }
  get sessionId() {
    return this.context.sessionId;
  }
  get exitCode() {
    return this.context.exitCode;
  }
};
var PortAlreadyExposedError = class extends SandboxError {
  static {
    __name(this, "PortAlreadyExposedError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "PortAlreadyExposedError";
  }
  get port() {
    return this.context.port;
  }
  get portName() {
    return this.context.portName;
  }
};
var PortNotExposedError = class extends SandboxError {
  static {
    __name(this, "PortNotExposedError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "PortNotExposedError";
  }
  get port() {
    return this.context.port;
  }
};
var InvalidPortError = class extends SandboxError {
  static {
    __name(this, "InvalidPortError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "InvalidPortError";
  }
  get port() {
    return this.context.port;
  }
  get reason() {
    return this.context.reason;
  }
};
var ServiceNotRespondingError = class extends SandboxError {
  static {
    __name(this, "ServiceNotRespondingError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "ServiceNotRespondingError";
  }
  get port() {
    return this.context.port;
  }
  get portName() {
    return this.context.portName;
  }
};
var PortInUseError = class extends SandboxError {
  static {
    __name(this, "PortInUseError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "PortInUseError";
  }
  get port() {
    return this.context.port;
  }
};
var PortError = class extends SandboxError {
  static {
    __name(this, "PortError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "PortError";
  }
  get port() {
    return this.context.port;
  }
  get portName() {
    return this.context.portName;
  }
  get stderr() {
    return this.context.stderr;
  }
};
var CustomDomainRequiredError = class extends SandboxError {
  static {
    __name(this, "CustomDomainRequiredError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "CustomDomainRequiredError";
  }
};
var GitRepositoryNotFoundError = class extends SandboxError {
  static {
    __name(this, "GitRepositoryNotFoundError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "GitRepositoryNotFoundError";
  }
  get repository() {
    return this.context.repository;
  }
};
var GitAuthenticationError = class extends SandboxError {
  static {
    __name(this, "GitAuthenticationError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "GitAuthenticationError";
  }
  get repository() {
    return this.context.repository;
  }
};
var GitBranchNotFoundError = class extends SandboxError {
  static {
    __name(this, "GitBranchNotFoundError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "GitBranchNotFoundError";
  }
  get branch() {
    return this.context.branch;
  }
  get repository() {
    return this.context.repository;
  }
};
var GitNetworkError = class extends SandboxError {
  static {
    __name(this, "GitNetworkError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "GitNetworkError";
  }
  get repository() {
    return this.context.repository;
  }
  get branch() {
    return this.context.branch;
  }
  get targetDir() {
    return this.context.targetDir;
  }
};
var GitCloneError = class extends SandboxError {
  static {
    __name(this, "GitCloneError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "GitCloneError";
  }
  get repository() {
    return this.context.repository;
  }
  get targetDir() {
    return this.context.targetDir;
  }
  get stderr() {
    return this.context.stderr;
  }
  get exitCode() {
    return this.context.exitCode;
  }
};
var GitCheckoutError = class extends SandboxError {
  static {
    __name(this, "GitCheckoutError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "GitCheckoutError";
  }
  get branch() {
    return this.context.branch;
  }
  get repository() {
    return this.context.repository;
  }
  get stderr() {
    return this.context.stderr;
  }
};
var InvalidGitUrlError = class extends SandboxError {
  static {
    __name(this, "InvalidGitUrlError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "InvalidGitUrlError";
  }
  get validationErrors() {
    return this.context.validationErrors;
  }
};
var GitError = class extends SandboxError {
  static {
    __name(this, "GitError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "GitError";
  }
  get repository() {
    return this.context.repository;
  }
  get branch() {
    return this.context.branch;
  }
  get targetDir() {
    return this.context.targetDir;
  }
  get stderr() {
    return this.context.stderr;
  }
  get exitCode() {
    return this.context.exitCode;
  }
};
var InterpreterNotReadyError = class extends SandboxError {
  static {
    __name(this, "InterpreterNotReadyError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "InterpreterNotReadyError";
  }
  get retryAfter() {
    return this.context.retryAfter;
  }
  get progress() {
    return this.context.progress;
  }
};
var ContextNotFoundError = class extends SandboxError {
  static {
    __name(this, "ContextNotFoundError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "ContextNotFoundError";
  }
  get contextId() {
    return this.context.contextId;
  }
};
var CodeExecutionError = class extends SandboxError {
  static {
    __name(this, "CodeExecutionError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "CodeExecutionError";
  }
  get contextId() {
    return this.context.contextId;
  }
  get ename() {
    return this.context.ename;
  }
  get evalue() {
    return this.context.evalue;
  }
  get traceback() {
    return this.context.traceback;
  }
};
var ValidationFailedError = class extends SandboxError {
  static {
    __name(this, "ValidationFailedError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "ValidationFailedError";
  }
  get validationErrors() {
    return this.context.validationErrors;
  }
};
var ProcessReadyTimeoutError = class extends SandboxError {
  static {
    __name(this, "ProcessReadyTimeoutError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "ProcessReadyTimeoutError";
  }
  get processId() {
    return this.context.processId;
  }
  get command() {
    return this.context.command;
  }
  get condition() {
    return this.context.condition;
  }
  get timeout() {
    return this.context.timeout;
  }
};
var ProcessExitedBeforeReadyError = class extends SandboxError {
  static {
    __name(this, "ProcessExitedBeforeReadyError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "ProcessExitedBeforeReadyError";
  }
  get processId() {
    return this.context.processId;
  }
  get command() {
    return this.context.command;
  }
  get condition() {
    return this.context.condition;
  }
  get exitCode() {
    return this.context.exitCode;
  }
};
var BackupNotFoundError = class extends SandboxError {
  static {
    __name(this, "BackupNotFoundError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "BackupNotFoundError";
  }
  get backupId() {
    return this.context.backupId;
  }
};
var BackupExpiredError = class extends SandboxError {
  static {
    __name(this, "BackupExpiredError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "BackupExpiredError";
  }
  get backupId() {
    return this.context.backupId;
  }
  get expiredAt() {
    return this.context.expiredAt;
  }
};
var InvalidBackupConfigError = class extends SandboxError {
  static {
    __name(this, "InvalidBackupConfigError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "InvalidBackupConfigError";
  }
  get reason() {
    return this.context.reason;
  }
};
var BackupCreateError = class extends SandboxError {
  static {
    __name(this, "BackupCreateError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "BackupCreateError";
  }
  get dir() {
    return this.context.dir;
  }
  get backupId() {
    return this.context.backupId;
  }
};
var BackupRestoreError = class extends SandboxError {
  static {
    __name(this, "BackupRestoreError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "BackupRestoreError";
  }
  get dir() {
    return this.context.dir;
  }
  get backupId() {
    return this.context.backupId;
  }
};
var ContainerUnavailableError = class extends SandboxError {
  static {
    __name(this, "ContainerUnavailableError");
  }
  constructor(errorResponse) {
    super(errorResponse);
    this.name = "ContainerUnavailableError";
  }
  get reason() {
    return this.context.reason;
  }
  get retryAfterMs() {
    return this.context.retryAfterMs;
  }
};
var RPCTransportError = class extends SandboxError {
  static {
    __name(this, "RPCTransportError");
  }
  constructor(errorResponse, options) {
    super(errorResponse, options);
    this.name = "RPCTransportError";
  }
  get kind() {
    return this.errorResponse.context.kind;
  }
  get originalMessage() {
    return this.errorResponse.context.originalMessage;
  }
};
var OperationInterruptedError = class extends SandboxError {
  static {
    __name(this, "OperationInterruptedError");
  }
  constructor(errorResponse, options) {
    super(errorResponse, options);
    this.name = "OperationInterruptedError";
  }
  get reason() {
    return this.context.reason;
  }
};
function createErrorFromResponse(errorResponse, options) {
  switch (errorResponse.code) {
    case ErrorCode.FILE_NOT_FOUND:
      return new FileNotFoundError(errorResponse);
    case ErrorCode.FILE_EXISTS:
      return new FileExistsError(errorResponse);
    case ErrorCode.FILE_TOO_LARGE:
      return new FileTooLargeError(errorResponse);
    case ErrorCode.PERMISSION_DENIED:
      return new PermissionDeniedError(errorResponse);
    case ErrorCode.IS_DIRECTORY:
    case ErrorCode.NOT_DIRECTORY:
    case ErrorCode.NO_SPACE:
    case ErrorCode.TOO_MANY_FILES:
    case ErrorCode.RESOURCE_BUSY:
    case ErrorCode.READ_ONLY:
    case ErrorCode.NAME_TOO_LONG:
    case ErrorCode.TOO_MANY_LINKS:
    case ErrorCode.FILESYSTEM_ERROR:
      return new FileSystemError(errorResponse);
    case ErrorCode.COMMAND_NOT_FOUND:
      return new CommandNotFoundError(errorResponse);
    case ErrorCode.COMMAND_PERMISSION_DENIED:
    case ErrorCode.COMMAND_EXECUTION_ERROR:
    case ErrorCode.INVALID_COMMAND:
    case ErrorCode.STREAM_START_ERROR:
      return new CommandError(errorResponse);
    case ErrorCode.PROCESS_NOT_FOUND:
      return new ProcessNotFoundError(errorResponse);
    case ErrorCode.PROCESS_PERMISSION_DENIED:
    case ErrorCode.PROCESS_ERROR:
      return new ProcessError(errorResponse);
    case ErrorCode.SESSION_ALREADY_EXISTS:
      return new SessionAlreadyExistsError(errorResponse);
    case ErrorCode.SESSION_DESTROYED:
      return new SessionDestroyedError(errorResponse);
    case ErrorCode.SESSION_TERMINATED:
      return new SessionTerminatedError(errorResponse);
    case ErrorCode.PORT_ALREADY_EXPOSED:
      return new PortAlreadyExposedError(errorResponse);
    case ErrorCode.PORT_NOT_EXPOSED:
      return new PortNotExposedError(errorResponse);
    case ErrorCode.INVALID_PORT_NUMBER:
    case ErrorCode.INVALID_PORT:
      return new InvalidPortError(errorResponse);
    case ErrorCode.SERVICE_NOT_RESPONDING:
      return new ServiceNotRespondingError(errorResponse);
    case ErrorCode.PORT_IN_USE:
      return new PortInUseError(errorResponse);
    case ErrorCode.PORT_OPERATION_ERROR:
      return new PortError(errorResponse);
    case ErrorCode.CUSTOM_DOMAIN_REQUIRED:
      return new CustomDomainRequiredError(errorResponse);
    case ErrorCode.GIT_REPOSITORY_NOT_FOUND:
      return new GitRepositoryNotFoundError(errorResponse);
    case ErrorCode.GIT_AUTH_FAILED:
      return new GitAuthenticationError(errorResponse);
    case ErrorCode.GIT_BRANCH_NOT_FOUND:
      return new GitBranchNotFoundError(errorResponse);
    case ErrorCode.GIT_NETWORK_ERROR:
      return new GitNetworkError(errorResponse);
    case ErrorCode.GIT_CLONE_FAILED:
      return new GitCloneError(errorResponse);
    case ErrorCode.GIT_CHECKOUT_FAILED:
      return new GitCheckoutError(errorResponse);
    case ErrorCode.INVALID_GIT_URL:
      return new InvalidGitUrlError(errorResponse);
    case ErrorCode.GIT_OPERATION_FAILED:
      return new GitError(errorResponse);
    case ErrorCode.BACKUP_NOT_FOUND:
      return new BackupNotFoundError(errorResponse);
    case ErrorCode.BACKUP_EXPIRED:
      return new BackupExpiredError(errorResponse);
    case ErrorCode.INVALID_BACKUP_CONFIG:
      return new InvalidBackupConfigError(errorResponse);
    case ErrorCode.BACKUP_CREATE_FAILED:
      return new BackupCreateError(errorResponse);
    case ErrorCode.BACKUP_RESTORE_FAILED:
      return new BackupRestoreError(errorResponse);
    case ErrorCode.INTERPRETER_NOT_READY:
      return new InterpreterNotReadyError(errorResponse);
    case ErrorCode.CONTEXT_NOT_FOUND:
      return new ContextNotFoundError(errorResponse);
    case ErrorCode.CODE_EXECUTION_ERROR:
      return new CodeExecutionError(errorResponse);
    case ErrorCode.OPERATION_INTERRUPTED:
      return new OperationInterruptedError(errorResponse, options);
    case ErrorCode.CONTAINER_UNAVAILABLE:
      return new ContainerUnavailableError(errorResponse);
    case ErrorCode.RPC_TRANSPORT_ERROR:
      return new RPCTransportError(errorResponse, options);
    case ErrorCode.VALIDATION_FAILED:
      return new ValidationFailedError(errorResponse);
    case ErrorCode.INVALID_JSON_RESPONSE:
    case ErrorCode.UNKNOWN_ERROR:
    case ErrorCode.INTERNAL_ERROR:
      return new SandboxError(errorResponse);
    default:
      return new SandboxError(errorResponse);
  }
}
__name(createErrorFromResponse, "createErrorFromResponse");
var DEFAULT_INITIAL_RETRY_DELAY_MS = 3e3;
var DEFAULT_MAX_RETRY_DELAY_MS = 3e4;
var RETRYABLE_WEBSOCKET_UPGRADE_STATUSES = /* @__PURE__ */ new Set([
  500,
  502,
  503,
  504
]);
function isRetryableWebSocketUpgradeResponse(response) {
  return RETRYABLE_WEBSOCKET_UPGRADE_STATUSES.has(response.status);
}
__name(isRetryableWebSocketUpgradeResponse, "isRetryableWebSocketUpgradeResponse");
function nextRetryDelayMs(attempt, remainingMs, minTimeForRetryMs) {
  const availableForDelay = remainingMs - minTimeForRetryMs;
  if (availableForDelay <= 0) return null;
  const computedDelay = Math.min(DEFAULT_INITIAL_RETRY_DELAY_MS * 2 ** attempt, DEFAULT_MAX_RETRY_DELAY_MS);
  return Math.min(computedDelay, availableForDelay);
}
__name(nextRetryDelayMs, "nextRetryDelayMs");
async function fetchWithResponseRetry(fetchResponse, options) {
  const startTime = Date.now();
  let attempt = 0;
  while (true) {
    let response;
    try {
      response = await fetchResponse();
    } catch (error) {
      if (!options.shouldRetryError?.(error)) throw error;
      const elapsed$1 = Date.now() - startTime;
      const remaining$1 = options.retryTimeoutMs - elapsed$1;
      const delay$1 = nextRetryDelayMs(attempt, remaining$1, options.minTimeForRetryMs);
      if (delay$1 === null) throw error;
      options.logger.info(options.retryLogMessage, {
        attempt: attempt + 1,
        delayMs: delay$1,
        remainingSec: Math.floor(remaining$1 / 1e3),
        error: error instanceof Error ? error.message : String(error)
      });
      await new Promise((resolve) => setTimeout(resolve, delay$1));
      attempt++;
      continue;
    }
    if (!options.shouldRetry(response)) return response;
    const elapsed = Date.now() - startTime;
    const remaining = options.retryTimeoutMs - elapsed;
    const delay = nextRetryDelayMs(attempt, remaining, options.minTimeForRetryMs);
    if (delay === null) {
      options.onRetryExhausted?.({
        attempts: attempt + 1,
        elapsedMs: elapsed,
        response
      });
      return response;
    }
    options.logger.info(options.retryLogMessage, {
      status: response.status,
      attempt: attempt + 1,
      delayMs: delay,
      remainingSec: Math.floor(remaining / 1e3),
      ...options.getRetryLogContext?.(response)
    });
    await new Promise((resolve) => setTimeout(resolve, delay));
    attempt++;
  }
}
__name(fetchWithResponseRetry, "fetchWithResponseRetry");
var DEFAULT_RETRY_TIMEOUT_MS$1 = 12e4;
var MIN_TIME_FOR_RETRY_MS$1 = 15e3;
var BaseTransport = class {
  static {
    __name(this, "BaseTransport");
  }
  config;
  logger;
  retryTimeoutMs;
  constructor(config) {
    this.config = config;
    this.logger = config.logger ?? createNoOpLogger();
    this.retryTimeoutMs = config.retryTimeoutMs ?? DEFAULT_RETRY_TIMEOUT_MS$1;
  }
  setRetryTimeoutMs(ms) {
    this.retryTimeoutMs = ms;
  }
  getRetryTimeoutMs() {
    return this.retryTimeoutMs;
  }
  /**
  * Fetch with automatic retry for 503 (container starting)
  *
  * This is the primary entry point for making requests. It wraps the
  * transport-specific doFetch() with retry logic for container startup.
  */
  async fetch(path$1, options) {
    return fetchWithResponseRetry(() => this.doFetch(path$1, options), {
      retryTimeoutMs: this.retryTimeoutMs,
      minTimeForRetryMs: MIN_TIME_FOR_RETRY_MS$1,
      logger: this.logger,
      retryLogMessage: "Container not ready, retrying",
      shouldRetry: /* @__PURE__ */ __name((response) => response.status === 503, "shouldRetry"),
      getRetryLogContext: /* @__PURE__ */ __name(() => ({ mode: this.getMode() }), "getRetryLogContext"),
      onRetryExhausted: /* @__PURE__ */ __name(({ attempts, elapsedMs }) => {
        this.logger.error("Container failed to become ready", /* @__PURE__ */ new Error(`Failed after ${attempts} attempts over ${Math.floor(elapsedMs / 1e3)}s`));
      }, "onRetryExhausted")
    });
  }
  /**
  * Build a URL targeting the container's HTTP server.
  */
  buildContainerUrl(path$1) {
    if (this.config.stub) return `http://localhost:${this.config.port || 3e3}${path$1}`;
    return `${this.config.baseUrl ?? `http://localhost:${this.config.port || 3e3}`}${path$1}`;
  }
  /**
  * Single HTTP request to the container — no WebSocket, no 503 retry.
  */
  httpFetch(path$1, options) {
    const url = this.buildContainerUrl(path$1);
    if (this.config.stub) return this.config.stub.containerFetch(url, options || {}, this.config.port);
    return globalThis.fetch(url, options);
  }
  /**
  * Streaming HTTP request to the container — no WebSocket, no 503 retry.
  */
  async httpFetchStream(path$1, body, method = "POST", headers) {
    const url = this.buildContainerUrl(path$1);
    const init = {
      method,
      headers: body && method === "POST" ? {
        ...headers,
        "Content-Type": "application/json"
      } : headers,
      body: body && method === "POST" ? JSON.stringify(body) : void 0
    };
    let response;
    if (this.config.stub) response = await this.config.stub.containerFetch(url, init, this.config.port);
    else response = await globalThis.fetch(url, init);
    if (!response.ok) {
      const errorBody = await response.text();
      throw new Error(`HTTP error! status: ${response.status} - ${errorBody}`);
    }
    if (!response.body) throw new Error("No response body for streaming");
    return response.body;
  }
};
var HttpTransport = class extends BaseTransport {
  static {
    __name(this, "HttpTransport");
  }
  getMode() {
    return "http";
  }
  async connect() {
  }
  disconnect() {
  }
  isConnected() {
    return true;
  }
  async doFetch(path$1, options) {
    return this.httpFetch(path$1, options);
  }
  async fetchStream(path$1, body, method = "POST", headers) {
    return this.httpFetchStream(path$1, body, method, headers);
  }
};
var DEFAULT_REQUEST_TIMEOUT_MS = 12e4;
var DEFAULT_STREAM_IDLE_TIMEOUT_MS = 3e5;
var DEFAULT_CONNECT_TIMEOUT_MS$1 = 3e4;
var DEFAULT_IDLE_DISCONNECT_MS$1 = 1e3;
var MIN_TIME_FOR_CONNECT_RETRY_MS = 15e3;
var WebSocketTransport = class extends BaseTransport {
  static {
    __name(this, "WebSocketTransport");
  }
  ws = null;
  state = "disconnected";
  pendingRequests = /* @__PURE__ */ new Map();
  connectPromise = null;
  idleDisconnectTimer = null;
  boundHandleMessage;
  boundHandleClose;
  constructor(config) {
    super(config);
    if (!config.wsUrl) throw new Error("wsUrl is required for WebSocket transport");
    this.boundHandleMessage = this.handleMessage.bind(this);
    this.boundHandleClose = this.handleClose.bind(this);
  }
  getMode() {
    return "websocket";
  }
  /**
  * Check if WebSocket is connected
  */
  isConnected() {
    return this.state === "connected" && this.ws?.readyState === WebSocket.OPEN;
  }
  /**
  * Connect to the WebSocket server
  *
  * The connection promise is assigned synchronously so concurrent
  * callers share the same connection attempt.
  */
  async connect() {
    this.clearIdleDisconnectTimer();
    if (this.isConnected()) return;
    if (this.connectPromise) return this.connectPromise;
    this.connectPromise = this.doConnect();
    try {
      await this.connectPromise;
    } finally {
      this.connectPromise = null;
    }
  }
  /**
  * Disconnect from the WebSocket server
  */
  disconnect() {
    this.cleanup();
  }
  /**
  * Whether a WebSocket connection is currently being established.
  *
  * When true, awaiting `connectPromise` from a nested call would deadlock:
  * the outer `connectViaFetch → stub.fetch → containerFetch →
  * startAndWaitForPorts → blockConcurrencyWhile(onStart)` chain may call
  * back into the SDK (e.g. `exec()`), which would await the same
  * `connectPromise` that cannot resolve until `onStart` returns.
  *
  * Callers use this to fall back to a direct HTTP request, which is safe
  * because `startAndWaitForPorts()` calls `setHealthy()` before invoking
  * `onStart()`, so `containerFetch()` routes directly to the container.
  */
  isWebSocketConnecting() {
    return this.state === "connecting";
  }
  /**
  * Transport-specific fetch implementation.
  * Converts WebSocket response to standard Response object.
  *
  * Falls back to HTTP while a WebSocket connection is being established
  * to avoid the re-entrant deadlock described in `isWebSocketConnecting()`.
  */
  async doFetch(path$1, options) {
    if (this.isWebSocketConnecting()) return this.httpFetch(path$1, options);
    await this.connect();
    const method = options?.method || "GET";
    const body = this.parseBody(options?.body);
    const headers = this.normalizeHeaders(options?.headers);
    const result = await this.request(method, path$1, body, headers, options?.requestTimeoutMs);
    return new Response(JSON.stringify(result.body), {
      status: result.status,
      headers: { "Content-Type": "application/json" }
    });
  }
  /**
  * Streaming fetch implementation.
  *
  * Delegates to `requestStream()`, which applies the re-entrancy guard.
  */
  async fetchStream(path$1, body, method = "POST", headers) {
    return this.requestStream(method, path$1, body, headers);
  }
  /**
  * Parse request body from RequestInit
  */
  parseBody(body) {
    if (!body) return;
    if (typeof body === "string") try {
      return JSON.parse(body);
    } catch (error) {
      throw new Error(`Request body must be valid JSON: ${error instanceof Error ? error.message : String(error)}`);
    }
    throw new Error(`WebSocket transport only supports string bodies. Got: ${typeof body}`);
  }
  /**
  * Normalize RequestInit headers into a plain object for WSRequest.
  */
  normalizeHeaders(headers) {
    if (!headers) return;
    const normalized = {};
    new Headers(headers).forEach((value, key) => {
      normalized[key] = value;
    });
    return Object.keys(normalized).length > 0 ? normalized : void 0;
  }
  /**
  * Internal connection logic
  */
  async doConnect() {
    this.state = "connecting";
    if (this.config.stub) await this.connectViaFetch();
    else await this.connectViaWebSocket();
  }
  async fetchUpgradeWithRetry(attemptUpgrade) {
    return fetchWithResponseRetry(attemptUpgrade, {
      retryTimeoutMs: this.getRetryTimeoutMs(),
      minTimeForRetryMs: MIN_TIME_FOR_CONNECT_RETRY_MS,
      logger: this.logger,
      retryLogMessage: "WebSocket upgrade returned retryable status, retrying",
      shouldRetry: isRetryableWebSocketUpgradeResponse
    });
  }
  /**
  * Connect using fetch-based WebSocket (Cloudflare Workers style)
  * This is required when running inside a Durable Object.
  *
  * Uses stub.fetch() which routes WebSocket upgrade requests through the
  * parent Container class that supports the WebSocket protocol.
  */
  async connectViaFetch() {
    const timeoutMs = this.config.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS$1;
    try {
      const wsPath = new URL(this.config.wsUrl).pathname;
      const httpUrl = `http://localhost:${this.config.port || 3e3}${wsPath}`;
      const response = await this.fetchUpgradeWithRetry(() => this.fetchUpgradeAttempt(httpUrl, timeoutMs));
      if (response.status !== 101) throw new Error(`WebSocket upgrade failed: ${response.status} ${response.statusText}`);
      const ws = response.webSocket;
      if (!ws) throw new Error("No WebSocket in upgrade response");
      ws.accept();
      this.ws = ws;
      this.state = "connected";
      this.ws.addEventListener("close", this.boundHandleClose);
      this.ws.addEventListener("message", this.boundHandleMessage);
      this.logger.debug("WebSocket connected via fetch", { url: this.config.wsUrl });
    } catch (error) {
      this.state = "error";
      this.logger.error("WebSocket fetch connection failed", error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
  }
  async fetchUpgradeAttempt(httpUrl, timeoutMs) {
    const controller = new AbortController();
    const timeout = setTimeout(() => controller.abort(), timeoutMs);
    try {
      const request = new Request(httpUrl, {
        headers: {
          Upgrade: "websocket",
          Connection: "Upgrade"
        },
        signal: controller.signal
      });
      return await this.config.stub.fetch(request);
    } finally {
      clearTimeout(timeout);
    }
  }
  /**
  * Connect using standard WebSocket API (browser/Node style)
  */
  connectViaWebSocket() {
    return new Promise((resolve, reject) => {
      const timeoutMs = this.config.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS$1;
      const timeout = setTimeout(() => {
        this.cleanup();
        reject(/* @__PURE__ */ new Error(`WebSocket connection timeout after ${timeoutMs}ms`));
      }, timeoutMs);
      try {
        this.ws = new WebSocket(this.config.wsUrl);
        const onOpen = /* @__PURE__ */ __name(() => {
          clearTimeout(timeout);
          this.ws?.removeEventListener("open", onOpen);
          this.ws?.removeEventListener("error", onConnectError);
          this.state = "connected";
          this.logger.debug("WebSocket connected", { url: this.config.wsUrl });
          resolve();
        }, "onOpen");
        const onConnectError = /* @__PURE__ */ __name(() => {
          clearTimeout(timeout);
          this.ws?.removeEventListener("open", onOpen);
          this.ws?.removeEventListener("error", onConnectError);
          this.state = "error";
          this.logger.error("WebSocket error", /* @__PURE__ */ new Error("WebSocket connection failed"));
          reject(/* @__PURE__ */ new Error("WebSocket connection failed"));
        }, "onConnectError");
        this.ws.addEventListener("open", onOpen);
        this.ws.addEventListener("error", onConnectError);
        this.ws.addEventListener("close", this.boundHandleClose);
        this.ws.addEventListener("message", this.boundHandleMessage);
      } catch (error) {
        clearTimeout(timeout);
        this.state = "error";
        reject(error);
      }
    });
  }
  /**
  * Send a request and wait for response.
  *
  * Only reachable from `doFetch()`, which already applies the re-entrancy
  * guard via `isWebSocketConnecting()`. The `connect()` call here handles
  * the case where the WebSocket was closed between `doFetch` and `request`
  * (idle disconnect).
  */
  async request(method, path$1, body, headers, requestTimeoutMs) {
    await this.connect();
    this.clearIdleDisconnectTimer();
    const id = generateRequestId();
    const request = {
      type: "request",
      id,
      method,
      path: path$1,
      body,
      headers
    };
    return new Promise((resolve, reject) => {
      const timeoutMs = requestTimeoutMs ?? this.config.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
      const timeoutId = setTimeout(() => {
        this.pendingRequests.delete(id);
        this.scheduleIdleDisconnect();
        reject(/* @__PURE__ */ new Error(`Request timeout after ${timeoutMs}ms: ${method} ${path$1}`));
      }, timeoutMs);
      this.pendingRequests.set(id, {
        resolve: /* @__PURE__ */ __name((response) => {
          clearTimeout(timeoutId);
          this.pendingRequests.delete(id);
          this.scheduleIdleDisconnect();
          resolve({
            status: response.status,
            body: response.body
          });
        }, "resolve"),
        reject: /* @__PURE__ */ __name((error) => {
          clearTimeout(timeoutId);
          this.pendingRequests.delete(id);
          this.scheduleIdleDisconnect();
          reject(error);
        }, "reject"),
        isStreaming: false,
        timeoutId
      });
      try {
        this.send(request);
      } catch (error) {
        clearTimeout(timeoutId);
        this.pendingRequests.delete(id);
        this.scheduleIdleDisconnect();
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }
  /**
  * Send a streaming request and return a ReadableStream.
  *
  * The stream will receive data chunks as they arrive over the WebSocket.
  * Format matches SSE for compatibility with existing streaming code.
  *
  * This method waits for the first message before returning. If the server
  * responds with an error (non-streaming response), it throws immediately
  * rather than returning a stream that will error later.
  *
  * Uses an inactivity timeout instead of a total-duration timeout so that
  * long-running streams (e.g. execStream from an agent) stay alive as long
  * as data is flowing. The timer resets on every chunk or response message.
  *
  * Falls back to HTTP while a WebSocket connection is being established
  * to avoid the re-entrant deadlock described in `isWebSocketConnecting()`.
  */
  async requestStream(method, path$1, body, headers) {
    if (this.isWebSocketConnecting()) return this.httpFetchStream(path$1, body, method, headers);
    await this.connect();
    this.clearIdleDisconnectTimer();
    const id = generateRequestId();
    const request = {
      type: "request",
      id,
      method,
      path: path$1,
      body,
      headers
    };
    const idleTimeoutMs = this.config.streamIdleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS;
    return new Promise((resolveStream, rejectStream) => {
      let streamController;
      let firstMessageReceived = false;
      const createIdleTimeout = /* @__PURE__ */ __name(() => {
        return setTimeout(() => {
          this.pendingRequests.delete(id);
          this.scheduleIdleDisconnect();
          const error = /* @__PURE__ */ new Error(`Stream idle timeout after ${idleTimeoutMs}ms: ${method} ${path$1}`);
          if (firstMessageReceived) try {
            streamController?.error(error);
          } catch {
          }
          else rejectStream(error);
        }, idleTimeoutMs);
      }, "createIdleTimeout");
      const timeoutId = createIdleTimeout();
      const stream = new ReadableStream({
        start: /* @__PURE__ */ __name((controller) => {
          streamController = controller;
        }, "start"),
        cancel: /* @__PURE__ */ __name(() => {
          const pending = this.pendingRequests.get(id);
          if (pending?.timeoutId) clearTimeout(pending.timeoutId);
          try {
            this.send({
              type: "cancel",
              id
            });
          } catch (error) {
            this.logger.debug("Failed to send stream cancel message", {
              id,
              error: error instanceof Error ? error.message : String(error)
            });
          }
          this.pendingRequests.delete(id);
          this.scheduleIdleDisconnect();
        }, "cancel")
      });
      this.pendingRequests.set(id, {
        resolve: /* @__PURE__ */ __name((response) => {
          const pending = this.pendingRequests.get(id);
          if (pending?.timeoutId) clearTimeout(pending.timeoutId);
          this.pendingRequests.delete(id);
          this.scheduleIdleDisconnect();
          if (!firstMessageReceived) {
            firstMessageReceived = true;
            if (response.status >= 400) rejectStream(/* @__PURE__ */ new Error(`Stream error: ${response.status} - ${JSON.stringify(response.body)}`));
            else {
              streamController?.close();
              resolveStream(stream);
            }
          } else if (response.status >= 400) try {
            streamController?.error(/* @__PURE__ */ new Error(`Stream error: ${response.status} - ${JSON.stringify(response.body)}`));
          } catch {
          }
          else streamController?.close();
        }, "resolve"),
        reject: /* @__PURE__ */ __name((error) => {
          const pending = this.pendingRequests.get(id);
          if (pending?.timeoutId) clearTimeout(pending.timeoutId);
          this.pendingRequests.delete(id);
          this.scheduleIdleDisconnect();
          if (firstMessageReceived) try {
            streamController?.error(error);
          } catch {
          }
          else rejectStream(error);
        }, "reject"),
        streamController: void 0,
        isStreaming: true,
        timeoutId,
        onFirstChunk: /* @__PURE__ */ __name(() => {
          if (!firstMessageReceived) {
            firstMessageReceived = true;
            const pending = this.pendingRequests.get(id);
            if (pending) {
              pending.streamController = streamController;
              if (pending.bufferedChunks) {
                try {
                  for (const buffered of pending.bufferedChunks) streamController.enqueue(buffered);
                } catch (error) {
                  this.logger.debug("Failed to flush buffered chunks, cleaning up", {
                    id,
                    error: error instanceof Error ? error.message : String(error)
                  });
                  if (pending.timeoutId) clearTimeout(pending.timeoutId);
                  this.pendingRequests.delete(id);
                  this.scheduleIdleDisconnect();
                }
                pending.bufferedChunks = void 0;
              }
            }
            resolveStream(stream);
          }
        }, "onFirstChunk")
      });
      try {
        this.send(request);
      } catch (error) {
        clearTimeout(timeoutId);
        this.pendingRequests.delete(id);
        this.scheduleIdleDisconnect();
        rejectStream(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }
  /**
  * Send a message over the WebSocket
  */
  send(message) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) throw new Error("WebSocket not connected");
    this.ws.send(JSON.stringify(message));
    this.logger.debug("WebSocket sent", {
      id: message.id,
      type: message.type,
      method: message.type === "request" ? message.method : void 0,
      path: message.type === "request" ? message.path : void 0
    });
  }
  /**
  * Handle incoming WebSocket messages
  */
  handleMessage(event) {
    try {
      const message = JSON.parse(event.data);
      if (isWSResponse(message)) this.handleResponse(message);
      else if (isWSStreamChunk(message)) this.handleStreamChunk(message);
      else if (isWSError(message)) this.handleError(message);
      else this.logger.warn("Unknown WebSocket message type", { message });
    } catch (error) {
      this.logger.error("Failed to parse WebSocket message", error instanceof Error ? error : new Error(String(error)));
    }
  }
  /**
  * Handle a response message
  */
  handleResponse(response) {
    const pending = this.pendingRequests.get(response.id);
    if (!pending) {
      this.logger.warn("Received response for unknown request", { id: response.id });
      return;
    }
    this.logger.debug("WebSocket response", {
      id: response.id,
      status: response.status,
      done: response.done
    });
    if (response.done) pending.resolve(response);
  }
  /**
  * Handle a stream chunk message
  *
  * Resets the idle timeout on every chunk so that long-running streams
  * with continuous output are not killed by the inactivity timer.
  */
  handleStreamChunk(chunk) {
    const pending = this.pendingRequests.get(chunk.id);
    if (!pending) {
      this.logger.warn("Received stream chunk for unknown request", { id: chunk.id });
      return;
    }
    if (pending.onFirstChunk) {
      pending.onFirstChunk();
      pending.onFirstChunk = void 0;
    }
    if (pending.isStreaming) this.resetStreamIdleTimeout(chunk.id, pending);
    if (!pending.streamController) {
      if (!pending.bufferedChunks) pending.bufferedChunks = [];
      const encoder$1 = new TextEncoder();
      let sseData$1;
      if (chunk.event) sseData$1 = `event: ${chunk.event}
data: ${chunk.data}

`;
      else sseData$1 = `data: ${chunk.data}

`;
      pending.bufferedChunks.push(encoder$1.encode(sseData$1));
      return;
    }
    const encoder2 = new TextEncoder();
    let sseData;
    if (chunk.event) sseData = `event: ${chunk.event}
data: ${chunk.data}

`;
    else sseData = `data: ${chunk.data}

`;
    try {
      pending.streamController.enqueue(encoder2.encode(sseData));
    } catch (error) {
      this.logger.debug("Failed to enqueue stream chunk, cleaning up", {
        id: chunk.id,
        error: error instanceof Error ? error.message : String(error)
      });
      if (pending.timeoutId) clearTimeout(pending.timeoutId);
      this.pendingRequests.delete(chunk.id);
      this.scheduleIdleDisconnect();
    }
  }
  /**
  * Reset the idle timeout for a streaming request.
  * Called on every incoming chunk to keep the stream alive while data flows.
  */
  resetStreamIdleTimeout(id, pending) {
    if (pending.timeoutId) clearTimeout(pending.timeoutId);
    const idleTimeoutMs = this.config.streamIdleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS;
    pending.timeoutId = setTimeout(() => {
      this.pendingRequests.delete(id);
      this.scheduleIdleDisconnect();
      if (pending.streamController) try {
        pending.streamController.error(/* @__PURE__ */ new Error(`Stream idle timeout after ${idleTimeoutMs}ms`));
      } catch {
      }
    }, idleTimeoutMs);
  }
  /**
  * Handle an error message
  */
  handleError(error) {
    if (error.id) {
      const pending = this.pendingRequests.get(error.id);
      if (pending) {
        pending.reject(/* @__PURE__ */ new Error(`${error.code}: ${error.message}`));
        return;
      }
    }
    this.logger.error("WebSocket error message", new Error(error.message), {
      code: error.code,
      status: error.status
    });
  }
  /**
  * Handle WebSocket close
  */
  handleClose(event) {
    this.state = "disconnected";
    this.ws = null;
    this.connectPromise = null;
    const closeError = /* @__PURE__ */ new Error(`WebSocket closed: ${event.code} ${event.reason || "No reason"}`);
    for (const [, pending] of this.pendingRequests) {
      if (pending.timeoutId) clearTimeout(pending.timeoutId);
      if (pending.streamController) try {
        pending.streamController.error(closeError);
      } catch {
      }
      pending.reject(closeError);
    }
    this.pendingRequests.clear();
  }
  /**
  * Cleanup resources
  */
  cleanup() {
    this.clearIdleDisconnectTimer();
    if (this.ws) {
      this.ws.removeEventListener("close", this.boundHandleClose);
      this.ws.removeEventListener("message", this.boundHandleMessage);
      this.ws.close();
      this.ws = null;
    }
    this.state = "disconnected";
    this.connectPromise = null;
    for (const pending of this.pendingRequests.values()) if (pending.timeoutId) clearTimeout(pending.timeoutId);
    this.pendingRequests.clear();
  }
  scheduleIdleDisconnect() {
    if (!this.isConnected() || this.pendingRequests.size > 0) return;
    this.clearIdleDisconnectTimer();
    this.idleDisconnectTimer = setTimeout(() => {
      this.idleDisconnectTimer = null;
      if (this.pendingRequests.size === 0 && this.isConnected()) {
        this.logger.debug("Disconnecting idle WebSocket transport");
        this.cleanup();
      }
    }, DEFAULT_IDLE_DISCONNECT_MS$1);
  }
  clearIdleDisconnectTimer() {
    if (this.idleDisconnectTimer) {
      clearTimeout(this.idleDisconnectTimer);
      this.idleDisconnectTimer = null;
    }
  }
};
function createTransport(options) {
  switch (options.mode) {
    case "http":
      return new HttpTransport(options);
    case "websocket":
      return new WebSocketTransport(options);
  }
}
__name(createTransport, "createTransport");
var BaseHttpClient = class {
  static {
    __name(this, "BaseHttpClient");
  }
  options;
  logger;
  transport;
  constructor(options = {}) {
    this.options = options;
    this.logger = options.logger ?? createNoOpLogger();
    if (options.transport) this.transport = options.transport;
    else this.transport = createTransport({
      mode: options.transportMode ?? "http",
      baseUrl: options.baseUrl ?? "http://localhost:3000",
      wsUrl: options.wsUrl,
      logger: this.logger,
      stub: options.stub,
      port: options.port,
      retryTimeoutMs: options.retryTimeoutMs
    });
  }
  /**
  * Update the transport's 503 retry budget
  */
  setRetryTimeoutMs(ms) {
    this.transport.setRetryTimeoutMs(ms);
  }
  /**
  * Check if using WebSocket transport
  */
  isWebSocketMode() {
    return this.transport.getMode() === "websocket";
  }
  /**
  * Core fetch method - delegates to Transport which handles retry logic
  */
  async doFetch(path$1, options) {
    const { defaultHeaders } = this.options;
    if (defaultHeaders) options = {
      ...options,
      headers: {
        ...defaultHeaders,
        ...options?.headers
      }
    };
    return this.transport.fetch(path$1, options);
  }
  /**
  * Make a POST request with JSON body
  */
  async post(endpoint, data, responseHandler, requestOptions) {
    const response = await this.doFetch(endpoint, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(data),
      ...requestOptions
    });
    return await this.handleResponse(response, responseHandler);
  }
  /**
  * Make a GET request
  */
  async get(endpoint, responseHandler) {
    const response = await this.doFetch(endpoint, { method: "GET" });
    return await this.handleResponse(response, responseHandler);
  }
  /**
  * Make a DELETE request
  */
  async delete(endpoint, responseHandler) {
    const response = await this.doFetch(endpoint, { method: "DELETE" });
    return await this.handleResponse(response, responseHandler);
  }
  /**
  * Handle HTTP response with error checking and parsing
  */
  async handleResponse(response, customHandler) {
    if (!response.ok) await this.handleErrorResponse(response);
    if (customHandler) return customHandler(response);
    try {
      return await response.json();
    } catch (error) {
      throw createErrorFromResponse({
        code: ErrorCode.INVALID_JSON_RESPONSE,
        message: `Invalid JSON response: ${error instanceof Error ? error.message : "Unknown parsing error"}`,
        context: {},
        httpStatus: response.status,
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
    }
  }
  /**
  * Handle error responses with consistent error throwing
  */
  async handleErrorResponse(response) {
    let errorData;
    try {
      errorData = await response.json();
    } catch {
      errorData = {
        code: ErrorCode.INTERNAL_ERROR,
        message: `HTTP error! status: ${response.status}`,
        context: { statusText: response.statusText },
        httpStatus: response.status,
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      };
    }
    const error = createErrorFromResponse(errorData);
    this.options.onError?.(errorData.message, void 0);
    throw error;
  }
  /**
  * Create a streaming response handler for Server-Sent Events
  */
  async handleStreamResponse(response) {
    if (!response.ok) await this.handleErrorResponse(response);
    if (!response.body) throw new Error("No response body for streaming");
    return response.body;
  }
  /**
  * Stream request handler
  *
  * HTTP mode uses doFetch + handleStreamResponse for typed error handling.
  * For WebSocket mode, uses Transport's streaming support.
  *
  * @param path - The API path to call
  * @param body - Optional request body (for POST requests)
  * @param method - HTTP method (default: POST, use GET for process logs)
  */
  async doStreamFetch(path$1, body, method = "POST") {
    const streamHeaders = method === "POST" ? {
      ...this.options.defaultHeaders,
      "Content-Type": "application/json"
    } : this.options.defaultHeaders;
    if (this.transport.getMode() === "websocket") return this.transport.fetchStream(path$1, body, method, streamHeaders);
    const response = await this.doFetch(path$1, {
      method,
      headers: { "Content-Type": "application/json" },
      body: body && method === "POST" ? JSON.stringify(body) : void 0
    });
    return await this.handleStreamResponse(response);
  }
};
var BackupClient = class extends BaseHttpClient {
  static {
    __name(this, "BackupClient");
  }
  /**
  * Tell the container to create a squashfs archive from a directory.
  * @param dir - Directory to back up
  * @param archivePath - Where the container should write the archive
  * @param sessionId - Session context
  */
  async createArchive(dir, archivePath, sessionId, options) {
    const data = {
      dir,
      archivePath,
      gitignore: options?.gitignore ?? false,
      excludes: options?.excludes ?? [],
      compression: options?.compression,
      sessionId
    };
    return await this.post("/api/backup/create", data);
  }
  /**
  * Tell the container to restore a squashfs archive into a directory.
  * @param dir - Target directory
  * @param archivePath - Path to the archive file in the container
  * @param sessionId - Session context
  */
  async restoreArchive(dir, archivePath, sessionId) {
    const data = {
      dir,
      archivePath,
      sessionId
    };
    return await this.post("/api/backup/restore", data);
  }
  async uploadParts(request, sessionId) {
    return this.post("/api/backup/upload-parts", {
      ...request,
      sessionId: sessionId ?? request.sessionId
    });
  }
};
var CommandClient = class extends BaseHttpClient {
  static {
    __name(this, "CommandClient");
  }
  /**
  * Execute a command and return the complete result
  * @param command - The command to execute
  * @param sessionId - The session ID for this command execution
  * @param timeoutMs - Optional timeout in milliseconds (unlimited by default)
  * @param env - Optional environment variables for this command
  * @param cwd - Optional working directory for this command
  */
  async execute(command, sessionId, options) {
    try {
      const data = {
        command,
        sessionId,
        ...options?.timeoutMs !== void 0 && { timeoutMs: options.timeoutMs },
        ...options?.env !== void 0 && { env: options.env },
        ...options?.cwd !== void 0 && { cwd: options.cwd },
        ...options?.origin !== void 0 && { origin: options.origin }
      };
      const response = await this.post("/api/execute", data);
      this.options.onCommandComplete?.(response.success, response.exitCode, response.stdout, response.stderr, response.command);
      return response;
    } catch (error) {
      this.options.onError?.(error instanceof Error ? error.message : String(error), command);
      throw error;
    }
  }
  /**
  * Execute a command and return a stream of events
  * @param command - The command to execute
  * @param sessionId - The session ID for this command execution
  * @param options - Optional per-command execution settings
  */
  async executeStream(command, sessionId, options) {
    try {
      const data = {
        command,
        sessionId,
        ...options?.timeoutMs !== void 0 && { timeoutMs: options.timeoutMs },
        ...options?.env !== void 0 && { env: options.env },
        ...options?.cwd !== void 0 && { cwd: options.cwd },
        ...options?.origin !== void 0 && { origin: options.origin }
      };
      return await this.doStreamFetch("/api/execute/stream", data);
    } catch (error) {
      this.options.onError?.(error instanceof Error ? error.message : String(error), command);
      throw error;
    }
  }
};
var FileClient = class extends BaseHttpClient {
  static {
    __name(this, "FileClient");
  }
  /**
  * Create a directory
  * @param path - Directory path to create
  * @param sessionId - The session ID for this operation
  * @param options - Optional settings (recursive)
  */
  async mkdir(path$1, sessionId, options) {
    const data = {
      path: path$1,
      sessionId,
      recursive: options?.recursive ?? false
    };
    return await this.post("/api/mkdir", data);
  }
  /**
  * Write content to a file
  * @param path - File path to write to
  * @param content - Content to write
  * @param sessionId - The session ID for this operation
  * @param options - Optional settings (encoding)
  */
  async writeFile(path$1, content, sessionId, options) {
    const data = {
      path: path$1,
      content,
      sessionId,
      encoding: options?.encoding
    };
    return await this.post("/api/write", data);
  }
  async readFile(path$1, sessionId, options) {
    if (options?.encoding === "none") throw new Error("readFile with encoding: 'none' requires the rpc transport. Set SANDBOX_TRANSPORT=rpc.");
    const data = {
      path: path$1,
      sessionId,
      encoding: options?.encoding
    };
    return await this.post("/api/read", data);
  }
  /**
  * Stream a file using Server-Sent Events
  * Returns a ReadableStream of SSE events containing metadata, chunks, and completion
  * @param path - File path to stream
  * @param sessionId - The session ID for this operation
  */
  async readFileStream(path$1, sessionId) {
    const data = {
      path: path$1,
      sessionId
    };
    return await this.doStreamFetch("/api/read/stream", data);
  }
  /**
  * Delete a file
  * @param path - File path to delete
  * @param sessionId - The session ID for this operation
  */
  async deleteFile(path$1, sessionId) {
    const data = {
      path: path$1,
      sessionId
    };
    return await this.post("/api/delete", data);
  }
  /**
  * Rename a file
  * @param path - Current file path
  * @param newPath - New file path
  * @param sessionId - The session ID for this operation
  */
  async renameFile(path$1, newPath, sessionId) {
    const data = {
      oldPath: path$1,
      newPath,
      sessionId
    };
    return await this.post("/api/rename", data);
  }
  /**
  * Move a file
  * @param path - Current file path
  * @param newPath - Destination file path
  * @param sessionId - The session ID for this operation
  */
  async moveFile(path$1, newPath, sessionId) {
    const data = {
      sourcePath: path$1,
      destinationPath: newPath,
      sessionId
    };
    return await this.post("/api/move", data);
  }
  /**
  * List files in a directory
  * @param path - Directory path to list
  * @param sessionId - The session ID for this operation
  * @param options - Optional settings (recursive, includeHidden)
  */
  async listFiles(path$1, sessionId, options) {
    const data = {
      path: path$1,
      sessionId,
      options: options || {}
    };
    return await this.post("/api/list-files", data);
  }
  /**
  * Check if a file or directory exists
  * @param path - Path to check
  * @param sessionId - The session ID for this operation
  */
  async exists(path$1, sessionId) {
    const data = {
      path: path$1,
      sessionId
    };
    return await this.post("/api/exists", data);
  }
  /**
  * Write a file via a raw binary stream over the RPC transport.
  * Throws on HTTP and WebSocket transports — use writeFile() with a string instead.
  */
  writeFileStream(_path, _content, _sessionId) {
    throw new Error("writeFileStream requires the rpc transport. Set SANDBOX_TRANSPORT=rpc.");
  }
};
var GitClient = class GitClient2 extends BaseHttpClient {
  static {
    __name(this, "GitClient");
  }
  static REQUEST_TIMEOUT_BUFFER_MS = 3e4;
  constructor(options = {}) {
    super(options);
    this.logger = new GitLogger(this.logger);
  }
  /**
  * Clone a Git repository
  * @param repoUrl - URL of the Git repository to clone
  * @param sessionId - The session ID for this operation
  * @param options - Optional settings (branch, targetDir, depth, timeoutMs)
  */
  async checkout(repoUrl, sessionId, options) {
    const timeoutMs = options?.timeoutMs ?? DEFAULT_GIT_CLONE_TIMEOUT_MS;
    let targetDir = options?.targetDir;
    if (!targetDir) targetDir = `/workspace/${extractRepoName(repoUrl)}`;
    const data = {
      repoUrl,
      sessionId,
      targetDir
    };
    if (options?.branch) data.branch = options.branch;
    if (options?.depth !== void 0) {
      if (!Number.isInteger(options.depth) || options.depth <= 0) throw new Error(`Invalid depth value: ${options.depth}. Must be a positive integer (e.g., 1, 5, 10).`);
      data.depth = options.depth;
    }
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) throw new Error(`Invalid timeout value: ${timeoutMs}. Must be a positive integer number of milliseconds.`);
    data.timeoutMs = timeoutMs;
    return await this.post("/api/git/checkout", data, void 0, { requestTimeoutMs: timeoutMs + GitClient2.REQUEST_TIMEOUT_BUFFER_MS });
  }
};
var InterpreterClient = class extends BaseHttpClient {
  static {
    __name(this, "InterpreterClient");
  }
  maxRetries = 3;
  retryDelayMs = 1e3;
  async createCodeContext(options = {}) {
    return this.executeWithRetry(async () => {
      const response = await this.doFetch("/api/contexts", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          language: options.language || "python",
          cwd: options.cwd || "/workspace",
          env_vars: options.envVars
        })
      });
      if (!response.ok) throw await this.parseErrorResponse(response);
      const data = await response.json();
      if (!data.success) throw new Error(`Failed to create context: ${JSON.stringify(data)}`);
      return {
        id: data.contextId,
        language: data.language,
        cwd: data.cwd || "/workspace",
        createdAt: new Date(data.timestamp),
        lastUsed: new Date(data.timestamp)
      };
    });
  }
  async runCodeStream(contextId, code, language, callbacks, timeoutMs) {
    return this.executeWithRetry(async () => {
      const stream = await this.doStreamFetch("/api/execute/code", {
        context_id: contextId,
        code,
        language,
        ...timeoutMs !== void 0 && { timeout_ms: timeoutMs }
      });
      for await (const chunk of this.readLines(stream)) await this.parseExecutionResult(chunk, callbacks);
    });
  }
  async listCodeContexts() {
    return this.executeWithRetry(async () => {
      const response = await this.doFetch("/api/contexts", {
        method: "GET",
        headers: { "Content-Type": "application/json" }
      });
      if (!response.ok) throw await this.parseErrorResponse(response);
      const data = await response.json();
      if (!data.success) throw new Error(`Failed to list contexts: ${JSON.stringify(data)}`);
      return data.contexts.map((ctx) => ({
        id: ctx.id,
        language: ctx.language,
        cwd: ctx.cwd || "/workspace",
        createdAt: new Date(data.timestamp),
        lastUsed: new Date(data.timestamp)
      }));
    });
  }
  async deleteCodeContext(contextId) {
    return this.executeWithRetry(async () => {
      const response = await this.doFetch(`/api/contexts/${contextId}`, {
        method: "DELETE",
        headers: { "Content-Type": "application/json" }
      });
      if (!response.ok) throw await this.parseErrorResponse(response);
    });
  }
  /**
  * Get a raw stream for code execution.
  * Used by CodeInterpreter.runCodeStreaming() for direct stream access.
  */
  async streamCode(contextId, code, language) {
    return this.doStreamFetch("/api/execute/code", {
      context_id: contextId,
      code,
      language
    });
  }
  /**
  * Execute an operation with automatic retry for transient errors
  */
  async executeWithRetry(operation) {
    let lastError;
    for (let attempt = 0; attempt < this.maxRetries; attempt++) try {
      return await operation();
    } catch (error) {
      lastError = error;
      if (this.isRetryableError(error)) {
        if (attempt < this.maxRetries - 1) {
          const delay = this.retryDelayMs * 2 ** attempt + Math.random() * 1e3;
          await new Promise((resolve) => setTimeout(resolve, delay));
          continue;
        }
      }
      throw error;
    }
    throw lastError || /* @__PURE__ */ new Error("Execution failed after retries");
  }
  isRetryableError(error) {
    if (error instanceof InterpreterNotReadyError) return true;
    if (error instanceof Error) return error.message.includes("not ready") || error.message.includes("initializing");
    return false;
  }
  async parseErrorResponse(response) {
    try {
      return createErrorFromResponse(await response.json());
    } catch {
      return createErrorFromResponse({
        code: ErrorCode.INTERNAL_ERROR,
        message: `HTTP ${response.status}: ${response.statusText}`,
        context: {},
        httpStatus: response.status,
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
    }
  }
  async *readLines(stream) {
    const reader = stream.getReader();
    let buffer = "";
    try {
      while (true) {
        const { done, value } = await reader.read();
        if (value) buffer += new TextDecoder().decode(value);
        if (done) break;
        let newlineIdx = buffer.indexOf("\n");
        while (newlineIdx !== -1) {
          yield buffer.slice(0, newlineIdx);
          buffer = buffer.slice(newlineIdx + 1);
          newlineIdx = buffer.indexOf("\n");
        }
      }
      if (buffer.length > 0) yield buffer;
    } finally {
      try {
        await reader.cancel();
      } catch {
      }
      reader.releaseLock();
    }
  }
  async parseExecutionResult(line, callbacks) {
    if (!line.trim()) return;
    if (!line.startsWith("data: ")) return;
    try {
      const jsonData = line.substring(6);
      const data = JSON.parse(jsonData);
      switch (data.type) {
        case "stdout":
          if (callbacks.onStdout && data.text) await callbacks.onStdout({
            text: data.text,
            timestamp: data.timestamp || Date.now()
          });
          break;
        case "stderr":
          if (callbacks.onStderr && data.text) await callbacks.onStderr({
            text: data.text,
            timestamp: data.timestamp || Date.now()
          });
          break;
        case "result":
          if (callbacks.onResult) {
            const result = new ResultImpl(data);
            await callbacks.onResult(result);
          }
          break;
        case "error":
          if (callbacks.onError) await callbacks.onError({
            name: data.ename || "Error",
            message: data.evalue || "Unknown error",
            traceback: data.traceback || []
          });
          break;
        case "execution_complete":
          break;
      }
    } catch {
    }
  }
};
var PortClient = class extends BaseHttpClient {
  static {
    __name(this, "PortClient");
  }
  /**
  * Watch a port for readiness via SSE stream
  * @param request - Port watch configuration
  * @returns SSE stream that emits PortWatchEvent objects
  */
  async watchPort(request) {
    return await this.doStreamFetch("/api/port-watch", request);
  }
};
var ProcessClient = class extends BaseHttpClient {
  static {
    __name(this, "ProcessClient");
  }
  /**
  * Start a background process
  * @param command - Command to execute as a background process
  * @param sessionId - The session ID for this operation
  * @param options - Optional settings (processId)
  */
  async startProcess(command, sessionId, options) {
    const data = {
      command,
      sessionId,
      ...options?.origin !== void 0 && { origin: options.origin },
      ...options?.processId !== void 0 && { processId: options.processId },
      ...options?.timeoutMs !== void 0 && { timeoutMs: options.timeoutMs },
      ...options?.env !== void 0 && { env: options.env },
      ...options?.cwd !== void 0 && { cwd: options.cwd },
      ...options?.encoding !== void 0 && { encoding: options.encoding },
      ...options?.autoCleanup !== void 0 && { autoCleanup: options.autoCleanup }
    };
    return await this.post("/api/process/start", data);
  }
  /**
  * List all processes (sandbox-scoped, not session-scoped)
  */
  async listProcesses() {
    return await this.get(`/api/process/list`);
  }
  /**
  * Get information about a specific process (sandbox-scoped, not session-scoped)
  * @param processId - ID of the process to retrieve
  */
  async getProcess(processId) {
    const url = `/api/process/${processId}`;
    return await this.get(url);
  }
  /**
  * Kill a specific process (sandbox-scoped, not session-scoped)
  * @param processId - ID of the process to kill
  */
  async killProcess(processId) {
    const url = `/api/process/${processId}`;
    return await this.delete(url);
  }
  /**
  * Kill all running processes (sandbox-scoped, not session-scoped)
  */
  async killAllProcesses() {
    return await this.delete(`/api/process/kill-all`);
  }
  /**
  * Get logs from a specific process (sandbox-scoped, not session-scoped)
  * @param processId - ID of the process to get logs from
  */
  async getProcessLogs(processId) {
    const url = `/api/process/${processId}/logs`;
    return await this.get(url);
  }
  /**
  * Stream logs from a specific process (sandbox-scoped, not session-scoped)
  * @param processId - ID of the process to stream logs from
  */
  async streamProcessLogs(processId) {
    const url = `/api/process/${processId}/stream`;
    return await this.doStreamFetch(url, void 0, "GET");
  }
};
var UtilityClient = class extends BaseHttpClient {
  static {
    __name(this, "UtilityClient");
  }
  /**
  * Ping the sandbox to check if it's responsive
  */
  async ping() {
    return (await this.get("/api/ping")).message;
  }
  /**
  * Get list of available commands in the sandbox environment
  */
  async getCommands() {
    return (await this.get("/api/commands")).availableCommands;
  }
  /**
  * Create a new execution session
  * @param options - Session configuration (id, env, cwd)
  */
  async createSession(options) {
    return await this.post("/api/session/create", options);
  }
  /**
  * Delete an execution session
  * @param sessionId - Session ID to delete
  */
  async deleteSession(sessionId) {
    return await this.post("/api/session/delete", { sessionId });
  }
  /**
  * Get the container version
  * Returns the version embedded in the Docker image during build
  */
  async getVersion() {
    try {
      return (await this.get("/api/version")).version;
    } catch (error) {
      this.logger.debug("Failed to get container version (may be old container)", { error });
      return "unknown";
    }
  }
  listSessions() {
    throw new Error("listSessions requires the RPC transport. Set SANDBOX_TRANSPORT=rpc.");
  }
};
var WatchClient = class extends BaseHttpClient {
  static {
    __name(this, "WatchClient");
  }
  /**
  * Check whether a path changed since a previously returned version.
  */
  async checkChanges(request) {
    return this.post("/api/watch/check", request);
  }
  /**
  * Start watching a directory for changes.
  * The returned promise resolves only after the watcher is established
  * on the filesystem (i.e. the `watching` SSE event has been received).
  * The returned stream still contains the `watching` event so consumers
  * using `parseSSEStream` will see the full event sequence.
  *
  * @param request - Watch request with path and options
  */
  async watch(request) {
    const stream = await this.doStreamFetch("/api/watch", request);
    return await this.waitForReadiness(stream);
  }
  /**
  * Read SSE chunks until the `watching` event appears, then return a
  * wrapper stream that replays the buffered chunks followed by the
  * remaining original stream data.
  */
  async waitForReadiness(stream) {
    const reader = stream.getReader();
    const bufferedChunks = [];
    const decoder = new TextDecoder();
    let buffer = "";
    let currentEvent = { data: [] };
    let watcherReady = false;
    const processEventData = /* @__PURE__ */ __name((eventData) => {
      let event;
      try {
        event = JSON.parse(eventData);
      } catch {
        return;
      }
      if (event.type === "watching") watcherReady = true;
      if (event.type === "error") throw new Error(event.error || "Watch failed to establish");
    }, "processEventData");
    try {
      while (!watcherReady) {
        const { done, value } = await reader.read();
        if (done) {
          const finalParsed = parseSSEFrames(`${buffer}

`, currentEvent);
          for (const frame of finalParsed.events) {
            processEventData(frame.data);
            if (watcherReady) break;
          }
          if (watcherReady) break;
          throw new Error("Watch stream ended before watcher was established");
        }
        bufferedChunks.push(value);
        buffer += decoder.decode(value, { stream: true });
        const parsed = parseSSEFrames(buffer, currentEvent);
        buffer = parsed.remaining;
        currentEvent = parsed.currentEvent;
        for (const frame of parsed.events) {
          processEventData(frame.data);
          if (watcherReady) break;
        }
      }
    } catch (error) {
      reader.cancel().catch(() => {
      });
      throw error;
    }
    let replayIndex = 0;
    return new ReadableStream({
      pull(controller) {
        if (replayIndex < bufferedChunks.length) {
          controller.enqueue(bufferedChunks[replayIndex++]);
          return;
        }
        return reader.read().then(({ done: d, value: v }) => {
          if (d) {
            controller.close();
            return;
          }
          controller.enqueue(v);
        });
      },
      cancel() {
        return reader.cancel();
      }
    });
  }
};
var SandboxClient = class {
  static {
    __name(this, "SandboxClient");
  }
  backup;
  commands;
  files;
  processes;
  ports;
  git;
  interpreter;
  utils;
  watch;
  /**
  * Tunnels are RPC-only — the route-based transport does not implement them.
  * This getter exists so the `PublicKeys<SandboxClient> satisfies
  * PublicKeys<SandboxAPI>` compile-time check holds. Calling any method on
  * the returned proxy throws a clear `RPC transport required` error.
  */
  tunnels = createTunnelsNotImplemented();
  transport = null;
  constructor(options) {
    if (options.transportMode === "websocket" && options.wsUrl) this.transport = createTransport({
      mode: options.transportMode,
      wsUrl: options.wsUrl,
      baseUrl: options.baseUrl,
      logger: options.logger,
      stub: options.stub,
      port: options.port,
      retryTimeoutMs: options.retryTimeoutMs
    });
    const clientOptions = {
      baseUrl: "http://localhost:3000",
      ...options,
      transport: this.transport ?? options.transport
    };
    this.backup = new BackupClient(clientOptions);
    this.commands = new CommandClient(clientOptions);
    this.files = new FileClient(clientOptions);
    this.processes = new ProcessClient(clientOptions);
    this.ports = new PortClient(clientOptions);
    this.git = new GitClient(clientOptions);
    this.interpreter = new InterpreterClient(clientOptions);
    this.utils = new UtilityClient(clientOptions);
    this.watch = new WatchClient(clientOptions);
  }
  /**
  * Update the transport retry budget without recreating the client.
  *
  * In WebSocket mode a single shared transport is used, so one update covers
  * every sub-client. In HTTP mode each sub-client owns its own transport, so
  * all of them are updated individually.
  */
  setRetryTimeoutMs(ms) {
    if (this.transport) this.transport.setRetryTimeoutMs(ms);
    else {
      this.backup.setRetryTimeoutMs(ms);
      this.commands.setRetryTimeoutMs(ms);
      this.files.setRetryTimeoutMs(ms);
      this.processes.setRetryTimeoutMs(ms);
      this.ports.setRetryTimeoutMs(ms);
      this.git.setRetryTimeoutMs(ms);
      this.interpreter.setRetryTimeoutMs(ms);
      this.utils.setRetryTimeoutMs(ms);
      this.watch.setRetryTimeoutMs(ms);
    }
  }
  /**
  * Get the current transport mode
  */
  getTransportMode() {
    return this.transport?.getMode() ?? "http";
  }
  /**
  * Check if WebSocket is connected (only relevant in WebSocket mode)
  */
  isWebSocketConnected() {
    return this.transport?.isConnected() ?? false;
  }
  /**
  * Connect WebSocket transport (no-op in HTTP mode)
  * Called automatically on first request, but can be called explicitly
  * to establish connection upfront.
  */
  async connect() {
    if (this.transport) await this.transport.connect();
  }
  /**
  * Disconnect WebSocket transport (no-op in HTTP mode)
  * Should be called when the sandbox is destroyed.
  */
  disconnect() {
    if (this.transport) this.transport.disconnect();
  }
};
function createTunnelsNotImplemented() {
  const message = 'sandbox.tunnels.* requires the RPC transport. Enable it with transport: "rpc" in sandbox options.';
  return new Proxy({}, { get() {
    return () => {
      throw new Error(message);
    };
  } });
}
__name(createTunnelsNotImplemented, "createTunnelsNotImplemented");
var SUPERSEDED_ISOLATE_PATTERN = /reset because its code was updated|this script has been upgraded/i;
var CONNECTION_LOST_PATTERN = /network connection lost/i;
var DO_STORAGE_STARTUP_RESET_PATTERN = /internal error while starting up durable object storage caused object to be reset/i;
function errorMessageOf(error) {
  return error instanceof Error ? error.message : typeof error === "string" ? error : "";
}
__name(errorMessageOf, "errorMessageOf");
function realmSafeMessageOf(error) {
  const message = error?.message;
  return typeof message === "string" ? message : String(error);
}
__name(realmSafeMessageOf, "realmSafeMessageOf");
var CONTAINER_UNAVAILABLE_SIGNATURES = [
  {
    substring: "there is no container instance that can be provided to this durable object",
    reason: "no_container_instance_available"
  },
  {
    substring: "there is no container instance available at this time",
    reason: "no_container_instance_available"
  },
  {
    substring: "maximum number of running container instances exceeded",
    reason: "max_container_instances_exceeded"
  }
];
function matchContainerUnavailable(error) {
  for (const candidate of selfAndCauses(error)) {
    const text = realmSafeMessageOf(candidate).toLowerCase();
    const match = CONTAINER_UNAVAILABLE_SIGNATURES.find((sig) => text.includes(sig.substring));
    if (match) return match.reason;
  }
  return null;
}
__name(matchContainerUnavailable, "matchContainerUnavailable");
function* selfAndCauses(error) {
  let current = error;
  for (let depth = 0; depth < 8 && current != null; depth += 1) {
    yield current;
    current = typeof current === "object" ? current.cause : void 0;
  }
}
__name(selfAndCauses, "selfAndCauses");
function isErrorRetryable(error) {
  if (typeof error !== "object" || error === null) return false;
  const message = String(error);
  const typed = error;
  return typed.retryable === true && typed.overloaded !== true && !message.includes("Durable Object is overloaded");
}
__name(isErrorRetryable, "isErrorRetryable");
function isPlatformTransientError(error) {
  for (const candidate of selfAndCauses(error)) {
    const message = errorMessageOf(candidate);
    if (SUPERSEDED_ISOLATE_PATTERN.test(message)) return true;
    if (CONNECTION_LOST_PATTERN.test(message)) return true;
    if (DO_STORAGE_STARTUP_RESET_PATTERN.test(message)) return true;
    if (isErrorRetryable(candidate)) return true;
  }
  return false;
}
__name(isPlatformTransientError, "isPlatformTransientError");
var BACKUP_ALLOWED_PREFIXES = [
  "/workspace",
  "/home",
  "/tmp",
  "/var/tmp",
  "/app"
];
function normalizeBackupExcludePattern(pattern) {
  let normalized = pattern;
  while (normalized.startsWith("**/")) normalized = normalized.slice(3);
  while (normalized.includes("/**/")) normalized = normalized.replace(/\/\*\*\//g, "/");
  if (normalized.endsWith("/**")) normalized = normalized.slice(0, -3);
  if (!normalized || normalized === "**") return null;
  return normalized;
}
__name(normalizeBackupExcludePattern, "normalizeBackupExcludePattern");
var DISABLE_SESSION_TOKEN = "__DISABLE_SESSION__";
var CURRENT_RUNTIME_IDENTITY_STORAGE_KEY = "currentRuntimeIdentity";
var RuntimeIdentityInactiveError = class extends Error {
  static {
    __name(this, "RuntimeIdentityInactiveError");
  }
  constructor() {
    super("Runtime identity is no longer active");
    this.name = "RuntimeIdentityInactiveError";
  }
};
var RuntimeIdentity = class {
  static {
    __name(this, "RuntimeIdentity");
  }
  id;
  constructor(record) {
    this.id = record.id;
  }
  owns(record) {
    return record.runtimeIdentityID === this.id;
  }
  scope(value) {
    return {
      ...value,
      runtimeIdentityID: this.id
    };
  }
};
var CurrentRuntimeIdentity = class {
  static {
    __name(this, "CurrentRuntimeIdentity");
  }
  /**
  * Runtime identity is stored in Durable Object storage so a reconstructed DO
  * can still recognize the live container runtime it owns. In-memory state is
  * only a cache and cannot define runtime-scoped correctness.
  */
  constructor(storage, getContainerState, isContainerRunning) {
    this.storage = storage;
    this.getContainerState = getContainerState;
    this.isContainerRunning = isContainerRunning;
  }
  async get() {
    const status = await this.getStatus();
    return status.status === "active" ? status.runtime : null;
  }
  async getStatus() {
    const state = await this.getContainerState();
    if (state.status !== "healthy") return {
      status: "inactive",
      reason: "runtime-not-healthy",
      containerStatus: state.status
    };
    if (!this.isContainerRunning()) return {
      status: "inactive",
      reason: "runtime-not-running",
      containerStatus: state.status
    };
    const runtime = await this.getStored();
    if (!runtime) return {
      status: "inactive",
      reason: "missing-runtime-id",
      containerStatus: state.status
    };
    return {
      status: "active",
      runtime,
      containerStatus: state.status
    };
  }
  async getStored(storage = this.storage) {
    const record = await storage.get(CURRENT_RUNTIME_IDENTITY_STORAGE_KEY) ?? null;
    return record ? new RuntimeIdentity(record) : null;
  }
  async markStarted() {
    const record = { id: crypto.randomUUID() };
    await this.storage.put(CURRENT_RUNTIME_IDENTITY_STORAGE_KEY, record);
    return new RuntimeIdentity(record);
  }
  async clear() {
    await this.storage.delete(CURRENT_RUNTIME_IDENTITY_STORAGE_KEY);
  }
  async isActive(runtime) {
    return (await this.get())?.id === runtime.id;
  }
  async assertActive(runtime) {
    if (!await this.isActive(runtime)) throw new RuntimeIdentityInactiveError();
  }
};
var SANDBOX_LIFETIME_STORAGE_KEY = "sandbox:lifetime";
var SandboxLifetimeChangedError = class extends Error {
  static {
    __name(this, "SandboxLifetimeChangedError");
  }
  constructor() {
    super("Sandbox lifetime is no longer current");
    this.name = "SandboxLifetimeChangedError";
  }
};
var SandboxLifetime = class {
  static {
    __name(this, "SandboxLifetime");
  }
  id;
  generation;
  createdAt;
  updatedAt;
  constructor(record) {
    this.record = record;
    this.id = record.id;
    this.generation = record.generation;
    this.createdAt = record.createdAt;
    this.updatedAt = record.updatedAt;
  }
  owns(record) {
    return record.sandboxLifetimeID === this.id;
  }
  scope(value) {
    return {
      ...value,
      sandboxLifetimeID: this.id
    };
  }
};
var CurrentSandboxLifetime = class {
  static {
    __name(this, "CurrentSandboxLifetime");
  }
  constructor(storage) {
    this.storage = storage;
  }
  async get() {
    const record = await this.storage.get(SANDBOX_LIFETIME_STORAGE_KEY) ?? null;
    return record ? new SandboxLifetime(record) : null;
  }
  /**
  * Returns the current lifetime if one exists, or creates and persists a new
  * one. The id is stable for the lifetime of the sandbox — it only changes
  * when `rotate()` is called (on `destroy()`).
  */
  async getOrCreate() {
    const existing = await this.get();
    if (existing) return existing;
    const now = (/* @__PURE__ */ new Date()).toISOString();
    const record = {
      id: crypto.randomUUID(),
      generation: 1,
      createdAt: now,
      updatedAt: now
    };
    await this.storage.put(SANDBOX_LIFETIME_STORAGE_KEY, record);
    return new SandboxLifetime(record);
  }
  /**
  * Creates and persists a new lifetime id, incrementing the generation
  * counter. Called during `sandbox.destroy()` before runtime state is
  * cleared so in-flight operations can detect the lifetime change.
  */
  async rotate() {
    const existing = await this.get();
    const now = (/* @__PURE__ */ new Date()).toISOString();
    const record = {
      id: crypto.randomUUID(),
      generation: (existing?.generation ?? 0) + 1,
      createdAt: now,
      updatedAt: now
    };
    await this.storage.put(SANDBOX_LIFETIME_STORAGE_KEY, record);
    return new SandboxLifetime(record);
  }
  async isCurrent(lifetime) {
    return (await this.get())?.id === lifetime.id;
  }
  /**
  * Throws `SandboxLifetimeChangedError` if the given lifetime is no longer
  * the current one. Used by operation runners to abort operations that
  * started before a `destroy()` call.
  */
  async assertCurrent(lifetime) {
    if (!await this.isCurrent(lifetime)) throw new SandboxLifetimeChangedError();
  }
};
var OPERATION_STORAGE_PREFIX = "operations:";
function backupRestoreOperationKey(backupId, dir) {
  return `restore:${backupId}:${dir}`;
}
__name(backupRestoreOperationKey, "backupRestoreOperationKey");
function createBackupRestoreOperationRecord(params) {
  return {
    operationKey: backupRestoreOperationKey(params.backupId, params.dir),
    kind: "backup.restore",
    sandboxLifetimeID: params.sandboxLifetimeID,
    phase: "validating",
    status: "running",
    payload: {
      backupId: params.backupId,
      dir: params.dir
    },
    createdAt: params.now,
    updatedAt: params.now
  };
}
__name(createBackupRestoreOperationRecord, "createBackupRestoreOperationRecord");
var BackupRestoreOperationStore = class {
  static {
    __name(this, "BackupRestoreOperationStore");
  }
  constructor(storage) {
    this.storage = storage;
  }
  async get(operationKey) {
    return await this.storage.get(this.storageKey(operationKey)) ?? null;
  }
  async put(record) {
    await this.storage.put(this.storageKey(record.operationKey), record);
  }
  storageKey(operationKey) {
    return `${OPERATION_STORAGE_PREFIX}${operationKey}`;
  }
};
var BACKUP_RESTORE_MAX_RECOVERY_ATTEMPTS = 2;
var RestoreLifecycleRunner = class {
  static {
    __name(this, "RestoreLifecycleRunner");
  }
  operationRecords;
  constructor(deps) {
    this.deps = deps;
    this.operationRecords = new BackupRestoreOperationStore(deps.storage);
  }
  async execute(params) {
    return await this.runWithRecovery(async () => {
      const { lifetime, operation } = await this.startOperation(params.backupId, params.dir);
      let currentOperation = operation;
      let runtime;
      const context = {
        lifetime,
        runtimeReady: /* @__PURE__ */ __name(async () => {
          try {
            runtime = await this.captureRuntime();
            await this.deps.currentLifetime.assertCurrent(lifetime);
          } catch (error) {
            throw await this.translateFenceError(error, currentOperation, "validating", "unknown") ?? error;
          }
          currentOperation = await this.markRuntimeReady(currentOperation, runtime);
          return {
            runtime,
            operation: currentOperation
          };
        }, "runtimeReady"),
        archiveReady: /* @__PURE__ */ __name(async (archiveSize) => {
          if (!runtime) throw new Error("Backup restore archiveReady requires runtimeReady()");
          try {
            await this.assertFences(runtime, lifetime);
          } catch (error) {
            throw await this.translateFenceError(error, currentOperation, currentOperation.phase, true) ?? error;
          }
          currentOperation = await this.markArchiveReady(currentOperation, runtime, archiveSize);
          return {
            runtime,
            operation: currentOperation
          };
        }, "archiveReady"),
        verify: /* @__PURE__ */ __name(async (result) => {
          if (!runtime) throw new Error("Backup restore verification requires runtimeReady()");
          try {
            await this.assertFences(runtime, lifetime);
          } catch (error) {
            throw await this.translateFenceError(error, currentOperation, "archive_ready", true) ?? error;
          }
          currentOperation = await this.markVerified(currentOperation, runtime, result);
          return currentOperation;
        }, "verify")
      };
      try {
        return await params.attempt(context);
      } catch (error) {
        const translatedRPC = await this.translateRPCError(error, currentOperation);
        if (translatedRPC) throw translatedRPC;
        const translatedFence = await this.translateFenceError(error, currentOperation, currentOperation.phase, "unknown");
        if (translatedFence) throw translatedFence;
        if (!(error instanceof OperationInterruptedError)) await this.markFailed(currentOperation, error);
        throw error;
      }
    });
  }
  async runWithRecovery(attempt) {
    let recoveryAttempts = 0;
    while (true) try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof OperationInterruptedError)) throw error;
      if (!error.context.retryable) throw error;
      if (recoveryAttempts >= BACKUP_RESTORE_MAX_RECOVERY_ATTEMPTS) throw this.createRecoveryExhaustedError(error, recoveryAttempts);
      recoveryAttempts++;
    }
  }
  async startOperation(backupId, dir) {
    const lifetime = await this.deps.currentLifetime.getOrCreate();
    const operation = createBackupRestoreOperationRecord({
      sandboxLifetimeID: lifetime.id,
      backupId,
      dir,
      now: (/* @__PURE__ */ new Date()).toISOString()
    });
    await this.operationRecords.put(operation);
    return {
      lifetime,
      operation
    };
  }
  async captureRuntime() {
    const runtime = await this.deps.currentRuntime.get() ?? await this.deps.currentRuntime.markStarted();
    await this.deps.currentRuntime.assertActive(runtime);
    return runtime;
  }
  async assertFences(runtime, lifetime) {
    await this.deps.currentRuntime.assertActive(runtime);
    await this.deps.currentLifetime.assertCurrent(lifetime);
  }
  async markRuntimeReady(operation, runtime) {
    const next = {
      ...operation,
      phase: "runtime_ready",
      runtimeIdentityID: runtime.id,
      updatedAt: (/* @__PURE__ */ new Date()).toISOString()
    };
    await this.operationRecords.put(next);
    return next;
  }
  async markArchiveReady(operation, runtime, archiveSize) {
    const next = {
      ...operation,
      phase: "archive_ready",
      runtimeIdentityID: runtime.id,
      payload: {
        ...operation.payload,
        ...archiveSize !== void 0 && { archiveSize }
      },
      updatedAt: (/* @__PURE__ */ new Date()).toISOString()
    };
    await this.operationRecords.put(next);
    return next;
  }
  async markVerified(operation, runtime, result) {
    const completedAt = (/* @__PURE__ */ new Date()).toISOString();
    const next = {
      ...operation,
      phase: "verified",
      status: "committed",
      runtimeIdentityID: runtime.id,
      result,
      completedAt,
      updatedAt: completedAt
    };
    await this.operationRecords.put(next);
    return next;
  }
  async markFailed(operation, error) {
    const completedAt = (/* @__PURE__ */ new Date()).toISOString();
    const message = error instanceof Error ? error.message : String(error);
    const code = error instanceof Error && "code" in error && typeof error.code === "string" ? error.code : "UNKNOWN";
    const next = {
      ...operation,
      phase: "failed",
      status: "failed",
      error: {
        code,
        message,
        retryable: false
      },
      completedAt,
      updatedAt: completedAt
    };
    await this.operationRecords.put(next);
    return next;
  }
  async markInterrupted(operation, message, retryable) {
    const next = {
      ...operation,
      phase: "interrupted",
      status: "interrupted",
      error: {
        code: ErrorCode.OPERATION_INTERRUPTED,
        message,
        retryable
      },
      updatedAt: (/* @__PURE__ */ new Date()).toISOString()
    };
    await this.operationRecords.put(next);
    return next;
  }
  async translateFenceError(error, operation, phase, admitted) {
    if (!(error instanceof RuntimeIdentityInactiveError || error instanceof SandboxLifetimeChangedError)) return null;
    const reason = error instanceof RuntimeIdentityInactiveError ? "runtime_replaced" : "sandbox_lifetime_changed";
    const retryable = reason !== "sandbox_lifetime_changed";
    const message = "Backup restore was interrupted before completion could be verified";
    const interrupted = await this.markInterrupted(operation, message, retryable);
    return this.createInterruptedError({
      reason,
      phase,
      admitted,
      retryable,
      message,
      operation: interrupted
    });
  }
  async translateRPCError(error, operation) {
    if (!(error instanceof RPCTransportError)) return null;
    const message = "Backup restore was interrupted before completion could be verified";
    const interruptedPhase = operation.phase;
    const interrupted = await this.markInterrupted(operation, message, true);
    return this.createInterruptedError({
      reason: "transport_disposed",
      phase: interruptedPhase,
      admitted: "unknown",
      retryable: true,
      message,
      operation: interrupted
    });
  }
  createInterruptedError(params) {
    return new OperationInterruptedError({
      message: params.message,
      code: ErrorCode.OPERATION_INTERRUPTED,
      httpStatus: 409,
      context: {
        reason: params.reason,
        operation: "backup.restore",
        phase: params.phase,
        admitted: params.admitted,
        retryable: params.retryable
      },
      timestamp: (/* @__PURE__ */ new Date()).toISOString(),
      suggestion: this.suggestionFor(params.retryable)
    });
  }
  createRecoveryExhaustedError(error, recoveryAttempts) {
    return new OperationInterruptedError({
      message: "Backup restore recovery attempts were exhausted",
      code: ErrorCode.OPERATION_INTERRUPTED,
      httpStatus: 409,
      context: {
        reason: "recovery_exhausted",
        operation: error.context.operation,
        phase: "interrupted",
        admitted: error.context.admitted,
        retryable: false,
        recoveryAttempts,
        maxRecoveryAttempts: BACKUP_RESTORE_MAX_RECOVERY_ATTEMPTS
      },
      timestamp: (/* @__PURE__ */ new Date()).toISOString(),
      suggestion: this.suggestionFor(false)
    });
  }
  suggestionFor(retryable) {
    return retryable ? "Retry restoreBackup() with the same backup handle so the SDK can reconcile the restore operation." : "Start a new restoreBackup() call only if restoring this backup is still desired for the current sandbox.";
  }
};
var MAX_CAUSE_DEPTH = 8;
function stringCode(value) {
  const code = value?.code;
  return typeof code === "string" ? code : void 0;
}
__name(stringCode, "stringCode");
function messageOf(value) {
  return value instanceof Error ? value.message : String(value);
}
__name(messageOf, "messageOf");
function computeErrorAttributes(error) {
  const attrs = {};
  if (error instanceof Error) {
    attrs.error = error.message;
    if (typeof error.stack === "string") attrs["error.stack"] = error.stack;
    const code = stringCode(error);
    if (code !== void 0) attrs["error.code"] = code;
  } else {
    attrs.error = String(error);
    return attrs;
  }
  const chain = [];
  const seen = /* @__PURE__ */ new Set([error]);
  let current = error.cause;
  let depth = 0;
  while (current !== void 0 && current !== null && depth < MAX_CAUSE_DEPTH) {
    if (seen.has(current)) break;
    seen.add(current);
    if (depth === 0) {
      attrs["error.cause"] = messageOf(current);
      const causeCode = stringCode(current);
      if (causeCode !== void 0) attrs["error.cause.code"] = causeCode;
    }
    chain.push(messageOf(current));
    current = current instanceof Error ? current.cause : void 0;
    depth++;
  }
  if (chain.length > 0) attrs["error.cause_chain"] = chain.join(" <- ");
  return attrs;
}
__name(computeErrorAttributes, "computeErrorAttributes");
function setErrorAttributes(span, error) {
  for (const [key, value] of Object.entries(computeErrorAttributes(error))) if (value !== void 0) span.setAttribute(key, value);
}
__name(setErrorAttributes, "setErrorAttributes");
async function withSpan(name, attributes, fn) {
  const enter = tracing?.enterSpan?.bind(tracing);
  if (typeof enter !== "function") return fn({ setAttribute: /* @__PURE__ */ __name(() => {
  }, "setAttribute") });
  return enter(name, async (span) => {
    for (const [key, value] of Object.entries(attributes)) if (value !== void 0) span.setAttribute(key, value);
    try {
      return await fn(span);
    } catch (error) {
      setErrorAttributes(span, error);
      throw error;
    }
  });
}
__name(withSpan, "withSpan");
function traceEvent(name, attributes) {
  const enter = tracing?.enterSpan?.bind(tracing);
  if (typeof enter !== "function") return;
  try {
    enter(name, (span) => {
      for (const [key, value] of Object.entries(attributes)) if (value !== void 0) span.setAttribute(key, value);
    });
  } catch {
  }
}
__name(traceEvent, "traceEvent");
async function tryParseContainerUnavailable(response) {
  if ((response.headers.get("content-type") ?? "").includes("application/json")) try {
    const body = await response.clone().json();
    if (body.code !== ErrorCode.CONTAINER_UNAVAILABLE) return null;
    const context = {
      reason: body.context?.reason === "container_starting" || body.context?.reason === "container_unhealthy" || body.context?.reason === "container_replaced" || body.context?.reason === "rpc_upgrade_failed" || body.context?.reason === "no_container_instance_available" || body.context?.reason === "max_container_instances_exceeded" ? body.context.reason : "container_replaced",
      retryable: true,
      ...typeof body.context?.retryAfterMs === "number" && { retryAfterMs: body.context.retryAfterMs },
      ...typeof body.context?.originalMessage === "string" && { originalMessage: body.context.originalMessage }
    };
    return createErrorFromResponse({
      code: ErrorCode.CONTAINER_UNAVAILABLE,
      message: body.message ?? "Container is unavailable",
      context,
      httpStatus: getHttpStatus(ErrorCode.CONTAINER_UNAVAILABLE),
      suggestion: getSuggestion(ErrorCode.CONTAINER_UNAVAILABLE, context),
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
  } catch {
    return null;
  }
  try {
    const text = await response.clone().text();
    const reason = matchContainerUnavailable(text);
    if (!reason) return null;
    return buildContainerUnavailableError(reason, text);
  } catch {
    return null;
  }
}
__name(tryParseContainerUnavailable, "tryParseContainerUnavailable");
function isPlatformUnavailableError(error) {
  return matchContainerUnavailable(error) !== null;
}
__name(isPlatformUnavailableError, "isPlatformUnavailableError");
function buildContainerUnavailableError(reason, originalMessage, cause) {
  const context = {
    reason,
    retryable: true,
    originalMessage
  };
  return createErrorFromResponse({
    code: ErrorCode.CONTAINER_UNAVAILABLE,
    message: originalMessage,
    context,
    httpStatus: getHttpStatus(ErrorCode.CONTAINER_UNAVAILABLE),
    suggestion: getSuggestion(ErrorCode.CONTAINER_UNAVAILABLE, context),
    timestamp: (/* @__PURE__ */ new Date()).toISOString()
  }, cause !== void 0 ? { cause } : void 0);
}
__name(buildContainerUnavailableError, "buildContainerUnavailableError");
function tryConvertPlatformUnavailable(error) {
  if (error instanceof SandboxError) return error;
  const reason = matchContainerUnavailable(error);
  if (!reason) return null;
  return buildContainerUnavailableError(reason, error instanceof Error ? error.message : String(error), error);
}
__name(tryConvertPlatformUnavailable, "tryConvertPlatformUnavailable");
var DEFAULT_CONNECT_TIMEOUT_MS = 3e4;
var DEFAULT_RETRY_TIMEOUT_MS = 12e4;
var MIN_TIME_FOR_RETRY_MS = 15e3;
var ContainerControlConnection = class {
  static {
    __name(this, "ContainerControlConnection");
  }
  stub;
  session;
  transport;
  ws = null;
  connected = false;
  connectPromise = null;
  containerStub;
  port;
  logger;
  retryTimeoutMs;
  onClose;
  onConnectionError;
  onConnected;
  startContainer;
  getSandboxInfo;
  constructor(options) {
    this.containerStub = options.stub;
    this.port = options.port ?? 3e3;
    this.logger = options.logger ?? createNoOpLogger();
    this.retryTimeoutMs = options.retryTimeoutMs ?? DEFAULT_RETRY_TIMEOUT_MS;
    this.onClose = options.onClose;
    this.onConnectionError = options.onConnectionError;
    this.onConnected = options.onConnected;
    this.startContainer = options.startContainer;
    this.getSandboxInfo = options.getSandboxInfo;
    this.transport = new DeferredTransport();
    this.session = new RpcSession2(this.transport, options.localMain);
    this.stub = this.session.getRemoteMain();
  }
  /**
  * Get the typed RPC stub.
  *
  * The stub is available immediately — calls made before connect()
  * completes are queued in the deferred transport and flushed once
  * the WebSocket is established.
  */
  rpc() {
    if (!this.connected && !this.connectPromise) this.connect().catch(() => {
    });
    return this.stub;
  }
  /**
  * Return capnweb session statistics. The `imports` and `exports` counts
  * reflect all in-flight RPC calls, streams, and peer-held references.
  * An idle session has imports <= 1 && exports <= 1 (the bootstrap stubs).
  */
  getStats() {
    return this.session.getStats();
  }
  isConnected() {
    return this.connected;
  }
  /**
  * True while a connection attempt is in progress (upgrade not yet
  * established and not yet failed). Owners use this to avoid tearing the
  * connection down mid-attempt.
  */
  isConnecting() {
    return this.connectPromise !== null;
  }
  /**
  * Resolve once any in-flight connection attempt settles (success or
  * failure). Resolves immediately when no attempt is in progress. Never
  * rejects — callers only care that the attempt is done.
  */
  async whenSettled() {
    const pending = this.connectPromise;
    if (!pending) return;
    await pending.catch(() => {
    });
  }
  async connect() {
    if (this.connected) return;
    if (this.connectPromise) return this.connectPromise;
    this.connectPromise = this.doConnect();
    try {
      await this.connectPromise;
    } finally {
      this.connectPromise = null;
    }
  }
  /**
  * Tear down the connection. `cause` (a lifecycle teardown reason from the
  * owning DO) is used only for the disconnect trace event here; the owner
  * is responsible for stamping it as a *weak* connection cause (one that
  * never overwrites an authoritative failure already captured from a
  * connection attempt), since a teardown is usually a downstream
  * consequence of that earlier failure rather than the root cause.
  */
  disconnect(cause) {
    if (cause !== void 0) traceEvent("sandbox.rpc.disconnect", {
      ...this.spanAttrs(),
      reason: cause instanceof Error ? cause.message : String(cause)
    });
    else traceEvent("sandbox.rpc.disconnect", this.spanAttrs());
    try {
      this.stub[Symbol.dispose]?.();
    } catch {
    }
    if (this.ws) {
      this.ws.removeEventListener("close", this.onWebSocketClose);
      this.ws.removeEventListener("error", this.onWebSocketError);
      try {
        this.ws.close();
      } catch {
      }
      this.ws = null;
    }
    this.connected = false;
    this.connectPromise = null;
  }
  /**
  * Update the upgrade retry budget without recreating the connection. Takes
  * effect on the next `connect()`; an in-flight connect uses the value
  * captured at start. Mirrors `WebSocketTransport.setRetryTimeoutMs`.
  */
  setRetryTimeoutMs(ms) {
    this.retryTimeoutMs = ms;
  }
  /**
  * Base span attributes for this connection: the container port plus the
  * sandbox identifiers (`sandbox.id` = DO id, `sandbox.name` = user name)
  * when available.
  */
  spanAttrs() {
    const info = this.getSandboxInfo?.();
    return {
      "sandbox.rpc.port": this.port,
      "sandbox.id": info?.id,
      "sandbox.name": info?.name
    };
  }
  /**
  * Run the owner-provided `onClose` callback exactly once per call,
  * swallowing any errors so a buggy listener can't keep the connection
  * object in a half-torn-down state.
  */
  fireOnClose() {
    if (!this.onClose) return;
    try {
      this.onClose();
    } catch (err) {
      this.logger.warn("ContainerControlConnection onClose handler threw", { error: err instanceof Error ? err.message : String(err) });
    }
  }
  /**
  * Run the owner-provided `onConnectionError` callback, swallowing any
  * listener errors.
  */
  fireConnectionError(error) {
    if (!this.onConnectionError) return;
    try {
      this.onConnectionError(error);
    } catch (err) {
      this.logger.warn("ContainerControlConnection onConnectionError handler threw", { error: err instanceof Error ? err.message : String(err) });
    }
  }
  /**
  * WebSocket `close` listener. Defined as a bound arrow field so the
  * same reference can be passed to both `addEventListener` and
  * `removeEventListener` — a fresh anonymous lambda would silently
  * fail to unbind.
  */
  onWebSocketClose = /* @__PURE__ */ __name(() => {
    const wasConnected = this.connected;
    this.connected = false;
    this.ws = null;
    this.logger.debug("ContainerControlConnection WebSocket closed");
    if (wasConnected) this.fireOnClose();
  }, "onWebSocketClose");
  /**
  * WebSocket `error` listener. Same field-form rationale as
  * {@link onWebSocketClose}.
  */
  onWebSocketError = /* @__PURE__ */ __name(() => {
    const wasConnected = this.connected;
    this.connected = false;
    this.ws = null;
    if (wasConnected) this.fireOnClose();
  }, "onWebSocketError");
  async doConnect() {
    return withSpan("sandbox.rpc.connect", this.spanAttrs(), () => this.doConnectInner());
  }
  async doConnectInner() {
    try {
      const response = await this.fetchUpgradeWithRetry();
      if (response.status !== 101) {
        const structured = await tryParseContainerUnavailable(response);
        if (structured) throw structured;
        if (isRetryableWebSocketUpgradeResponse(response)) throw createErrorFromResponse({
          code: ErrorCode.CONTAINER_UNAVAILABLE,
          message: `Container was unavailable after exhausting upgrade retry budget (status ${response.status})`,
          context: {
            reason: "rpc_upgrade_failed",
            retryable: true
          },
          httpStatus: getHttpStatus(ErrorCode.CONTAINER_UNAVAILABLE),
          suggestion: getSuggestion(ErrorCode.CONTAINER_UNAVAILABLE, {}),
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
        throw new Error(`WebSocket upgrade failed: ${response.status} ${response.statusText}`);
      }
      const ws = response.webSocket;
      if (!ws) throw new Error("No WebSocket in upgrade response");
      ws.accept();
      ws.addEventListener("close", this.onWebSocketClose);
      ws.addEventListener("error", this.onWebSocketError);
      this.ws = ws;
      this.transport.activate(ws);
      this.connected = true;
      try {
        this.onConnected?.();
      } catch (err) {
        this.logger.warn("ContainerControlConnection onConnected handler threw", { error: err instanceof Error ? err.message : String(err) });
      }
      this.logger.debug("ContainerControlConnection established", { port: this.port });
    } catch (error) {
      this.connected = false;
      const connectionError = tryConvertPlatformUnavailable(error) ?? error;
      this.fireConnectionError(connectionError);
      this.transport.abort(connectionError);
      this.fireOnClose();
      this.logger.error("ContainerControlConnection failed", connectionError instanceof Error ? connectionError : new Error(String(connectionError)));
      throw connectionError;
    }
  }
  /**
  * Issue WebSocket upgrade fetches, retrying transient control-plane
  * unavailability responses until either the upgrade succeeds, a
  * non-retryable status is returned, or the retry budget runs out.
  */
  async fetchUpgradeWithRetry() {
    return fetchWithResponseRetry(() => this.fetchUpgradeAttempt(), {
      retryTimeoutMs: this.retryTimeoutMs,
      minTimeForRetryMs: MIN_TIME_FOR_RETRY_MS,
      logger: this.logger,
      retryLogMessage: "ContainerControlConnection upgrade returned retryable status, retrying",
      shouldRetry: isRetryableWebSocketUpgradeResponse,
      shouldRetryError: isPlatformUnavailableError
    });
  }
  /**
  * Single WebSocket-upgrade fetch attempt.
  *
  * Container start and the upgrade fetch have deliberately separate timeout
  * scopes:
  *
  *   - `startContainer()` runs under the base `Container` class's own
  *     instance-get / port-ready budget. It must NOT be cut short by the
  *     per-attempt connect timeout: the base class only emits the
  *     classifiable `NO_CONTAINER_INSTANCE_ERROR` after its internal budget
  *     is exhausted, and it checks its abort signal *before* that throw
  *     (see @cloudflare/containers `doStartContainer`). Aborting it early
  *     yields a generic "Aborted waiting for container to start" error that
  *     we can't classify — which is what masked the real cause as
  *     OPERATION_INTERRUPTED. Letting it run its own budget means the
  *     platform capacity failure throws here, in our retry loop, where
  *     `shouldRetryError` retries it and `doConnect`'s catch converts it to
  *     a typed ContainerUnavailableError.
  *
  *   - The WebSocket upgrade fetch gets its own fresh AbortController so
  *     each retry has an independent connect timeout for the *upgrade only*.
  */
  async fetchUpgradeAttempt() {
    return withSpan("sandbox.rpc.connect.attempt", this.spanAttrs(), async () => {
      if (this.startContainer) try {
        await this.startContainer();
      } catch (error) {
        this.fireConnectionError(tryConvertPlatformUnavailable(error) ?? error);
        throw error;
      }
      const controller = new AbortController();
      const timeout = setTimeout(() => controller.abort(), DEFAULT_CONNECT_TIMEOUT_MS);
      try {
        const url = `http://localhost:${this.port}/rpc`;
        const request = new Request(url, {
          headers: {
            Upgrade: "websocket",
            Connection: "Upgrade"
          },
          signal: controller.signal
        });
        return await this.containerStub.fetch(request);
      } finally {
        clearTimeout(timeout);
      }
    });
  }
};
var DeferredTransport = class {
  static {
    __name(this, "DeferredTransport");
  }
  #ws = null;
  #sendQueue = [];
  #receiveQueue = [];
  #receiveResolver;
  #receiveRejecter;
  #error;
  activate(ws) {
    this.#ws = ws;
    ws.addEventListener("message", (event) => {
      if (this.#error) return;
      if (typeof event.data === "string") if (this.#receiveResolver) {
        this.#receiveResolver(event.data);
        this.#receiveResolver = void 0;
        this.#receiveRejecter = void 0;
      } else this.#receiveQueue.push(event.data);
      else this.#fail(/* @__PURE__ */ new TypeError("Received non-string message from WebSocket."));
    });
    ws.addEventListener("close", (event) => {
      this.#fail(/* @__PURE__ */ new Error(`Peer closed WebSocket: ${event.code} ${event.reason}`));
    });
    ws.addEventListener("error", () => {
      this.#fail(/* @__PURE__ */ new Error("WebSocket connection failed."));
    });
    for (const msg of this.#sendQueue) ws.send(msg);
    this.#sendQueue = [];
  }
  async send(message) {
    if (this.#ws) this.#ws.send(message);
    else this.#sendQueue.push(message);
  }
  async receive() {
    if (this.#receiveQueue.length > 0) return this.#receiveQueue.shift();
    if (this.#error) throw this.#error;
    return new Promise((resolve, reject) => {
      this.#receiveResolver = resolve;
      this.#receiveRejecter = reject;
    });
  }
  abort(reason) {
    this.#fail(reason instanceof Error ? reason : new Error(String(reason)));
    if (this.#ws) {
      const message = reason instanceof Error ? reason.message : String(reason);
      this.#ws.close(3e3, message);
    }
  }
  #fail(err) {
    if (this.#error) return;
    this.#error = err;
    this.#receiveRejecter?.(err);
    this.#receiveResolver = void 0;
    this.#receiveRejecter = void 0;
  }
};
var DEFAULT_IDLE_DISCONNECT_MS = 1e3;
var BUSY_POLL_INTERVAL_MS = 1e3;
var IDLE_IMPORT_THRESHOLD = 1;
var IDLE_EXPORT_THRESHOLD = 1;
function translateRPCError(error, context = {}) {
  if (error instanceof SandboxError) throw error;
  if (error instanceof Error) {
    const propagated = error;
    if (typeof propagated.code === "string" && Object.hasOwn(ErrorCode, propagated.code)) {
      const code = propagated.code;
      const context$1 = propagated.details && typeof propagated.details === "object" ? propagated.details : {};
      throw createErrorFromResponse({
        code,
        message: error.message,
        context: context$1,
        httpStatus: getHttpStatus(code),
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
    }
    let payload;
    try {
      payload = JSON.parse(error.message);
    } catch {
    }
    if (payload && typeof payload.code === "string" && typeof payload.message === "string") throw createErrorFromResponse({
      code: payload.code,
      message: payload.message,
      context: payload.context ?? {},
      httpStatus: getHttpStatus(payload.code),
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    const transportResponse = buildTransportErrorResponse(error);
    const captured = maybePreferConnectionError(transportResponse, context);
    if (captured) throw captured;
    if (context.sessionEstablished === false) throw createErrorFromResponse(buildNeverConnectedUnavailableResponse(transportResponse, context) ?? transportResponse, { cause: error });
    throw createErrorFromResponse(buildInterruptedOperationResponse(transportResponse, context) ?? transportResponse, { cause: error });
  }
  throw createErrorFromResponse(buildTransportErrorResponse(new Error(String(error))), { cause: error });
}
__name(translateRPCError, "translateRPCError");
function buildTransportErrorResponse(error) {
  const message = error.message;
  const errorName = error.name;
  let kind = "unknown";
  let closeCode;
  let closeReason;
  if (errorName === "TypeError") kind = "invalid_frame";
  else if (errorName === "SyntaxError") kind = "protocol_error";
  else {
    const peerCloseMatch = message.match(/^Peer closed WebSocket: (\d+) ?(.*)$/);
    if (peerCloseMatch) {
      kind = "peer_closed";
      closeCode = Number(peerCloseMatch[1]);
      closeReason = peerCloseMatch[2] || void 0;
    } else if (message === "WebSocket connection failed.") kind = "connection_failed";
    else if (message.startsWith("WebSocket upgrade failed")) kind = "upgrade_failed";
    else if (message === "No WebSocket in upgrade response") kind = "upgrade_failed";
    else if (message === "RPC session was shut down by disposing the main stub" || message === "RPC was canceled because the RpcPromise was disposed.") kind = "session_disposed";
  }
  const context = {
    kind,
    originalMessage: message,
    errorName,
    ...closeCode !== void 0 ? { closeCode } : {},
    ...closeReason !== void 0 ? { closeReason } : {}
  };
  return {
    code: ErrorCode.RPC_TRANSPORT_ERROR,
    message,
    context,
    httpStatus: getHttpStatus(ErrorCode.RPC_TRANSPORT_ERROR),
    suggestion: getSuggestion(ErrorCode.RPC_TRANSPORT_ERROR, context),
    timestamp: (/* @__PURE__ */ new Date()).toISOString()
  };
}
__name(buildTransportErrorResponse, "buildTransportErrorResponse");
function extractCapturedErrorShape(captured) {
  if (captured instanceof SandboxError) return {
    code: captured.code,
    message: captured.message,
    context: captured.context ?? {}
  };
  const shape = captured;
  if (!shape || typeof shape.code !== "string" || !Object.hasOwn(ErrorCode, shape.code)) return null;
  const code = shape.code;
  const structured = shape.context && typeof shape.context === "object" ? shape.context : shape.details && typeof shape.details === "object" ? shape.details : {};
  return {
    code,
    message: typeof shape.message === "string" ? shape.message : code,
    context: structured
  };
}
__name(extractCapturedErrorShape, "extractCapturedErrorShape");
var OPERATION_INTERRUPTED_REASONS = /* @__PURE__ */ new Set([
  "runtime_replaced",
  "transport_disposed",
  "sandbox_lifetime_changed",
  "recovery_exhausted"
]);
function asOperationInterruptedReason(value) {
  return typeof value === "string" && OPERATION_INTERRUPTED_REASONS.has(value) ? value : null;
}
__name(asOperationInterruptedReason, "asOperationInterruptedReason");
function asInterruptedAdmitted(value) {
  if (typeof value === "boolean" || value === "unknown") return value;
}
__name(asInterruptedAdmitted, "asInterruptedAdmitted");
function rebindInterruptedOperationContext(shape, context, cause) {
  if (shape.code !== ErrorCode.OPERATION_INTERRUPTED || typeof context.operation !== "string" || context.operation.length === 0) return createErrorFromResponse({
    code: shape.code,
    message: shape.message,
    context: shape.context,
    httpStatus: getHttpStatus(shape.code),
    suggestion: getSuggestion(shape.code, shape.context),
    timestamp: (/* @__PURE__ */ new Date()).toISOString()
  }, { cause });
  const reason = asOperationInterruptedReason(shape.context.reason) ?? "transport_disposed";
  const admitted = context.sessionEstablished === true ? true : context.sessionEstablished === false ? false : asInterruptedAdmitted(shape.context.admitted) ?? "unknown";
  const retryable = typeof shape.context.retryable === "boolean" ? shape.context.retryable : false;
  const interruptedContext = {
    reason,
    operation: context.operation,
    phase: "rpc_call",
    admitted,
    retryable,
    ...typeof shape.context.recoveryAttempts === "number" && { recoveryAttempts: shape.context.recoveryAttempts },
    ...typeof shape.context.maxRecoveryAttempts === "number" && { maxRecoveryAttempts: shape.context.maxRecoveryAttempts },
    ...typeof shape.context.containerExitCode === "number" && { containerExitCode: shape.context.containerExitCode },
    ...typeof shape.context.stopReason === "string" && { stopReason: shape.context.stopReason }
  };
  return new OperationInterruptedError({
    code: ErrorCode.OPERATION_INTERRUPTED,
    message: shape.message,
    context: interruptedContext,
    httpStatus: getHttpStatus(ErrorCode.OPERATION_INTERRUPTED),
    suggestion: getSuggestion(ErrorCode.OPERATION_INTERRUPTED, interruptedContext),
    timestamp: (/* @__PURE__ */ new Date()).toISOString()
  }, { cause });
}
__name(rebindInterruptedOperationContext, "rebindInterruptedOperationContext");
function maybePreferConnectionError(transportResponse, context) {
  const captured = context.connectionError;
  if (!captured) return null;
  const { kind } = transportResponse.context;
  if (kind !== "session_disposed" && kind !== "connection_failed" && kind !== "upgrade_failed" && kind !== "peer_closed") return null;
  const shape = extractCapturedErrorShape(captured);
  if (!shape) return null;
  return rebindInterruptedOperationContext(shape, context, captured);
}
__name(maybePreferConnectionError, "maybePreferConnectionError");
function buildNeverConnectedUnavailableResponse(transportResponse, context) {
  if (context.sessionEstablished !== false) return null;
  const { kind } = transportResponse.context;
  if (kind !== "session_disposed" && kind !== "connection_failed" && kind !== "peer_closed") return null;
  const ctx = {
    reason: "container_unreachable",
    retryable: true,
    originalMessage: transportResponse.context.originalMessage
  };
  return {
    code: ErrorCode.CONTAINER_UNAVAILABLE,
    message: "The sandbox container was unavailable: the connection was torn down before it became reachable. Retry the operation.",
    context: ctx,
    httpStatus: getHttpStatus(ErrorCode.CONTAINER_UNAVAILABLE),
    suggestion: getSuggestion(ErrorCode.CONTAINER_UNAVAILABLE, ctx),
    timestamp: (/* @__PURE__ */ new Date()).toISOString()
  };
}
__name(buildNeverConnectedUnavailableResponse, "buildNeverConnectedUnavailableResponse");
function buildInterruptedOperationResponse(transportResponse, context) {
  if (!context.operation) return null;
  const { kind } = transportResponse.context;
  if (kind !== "session_disposed" && kind !== "peer_closed" && kind !== "connection_failed") return null;
  const interruptedContext = {
    reason: kind === "session_disposed" ? "transport_disposed" : "runtime_replaced",
    operation: context.operation,
    phase: "rpc_call",
    admitted: context.sessionEstablished === true ? true : context.sessionEstablished === false ? false : "unknown",
    retryable: false
  };
  const action = kind === "session_disposed" ? "was closing" : "closed unexpectedly";
  return {
    code: ErrorCode.OPERATION_INTERRUPTED,
    message: `Sandbox operation ${context.operation} was interrupted while the runtime connection ${action}`,
    context: interruptedContext,
    httpStatus: getHttpStatus(ErrorCode.OPERATION_INTERRUPTED),
    suggestion: getSuggestion(ErrorCode.OPERATION_INTERRUPTED, interruptedContext),
    timestamp: (/* @__PURE__ */ new Date()).toISOString()
  };
}
__name(buildInterruptedOperationResponse, "buildInterruptedOperationResponse");
function wrapStub(stub, domain, onCallStarted, onCallSettled, getConnectionError, getSessionEstablished, getSpanAttrs) {
  return new Proxy(stub, { get(target, prop, receiver) {
    const value = Reflect.get(target, prop, receiver);
    if (typeof value !== "function") return value;
    return (...args) => {
      onCallStarted();
      const operation = typeof prop === "string" ? `${domain}.${prop}` : domain;
      try {
        const result = Reflect.apply(value, target, args);
        if (result != null && typeof result.then === "function") return withSpan(`sandbox.rpc.call ${operation}`, {
          ...getSpanAttrs(),
          operation
        }, () => result.catch((err) => translateRPCError(err, {
          operation,
          connectionError: getConnectionError(),
          sessionEstablished: getSessionEstablished()
        }))).finally(onCallSettled);
        onCallSettled();
        return result;
      } catch (err) {
        onCallSettled();
        translateRPCError(err, {
          operation,
          connectionError: getConnectionError(),
          sessionEstablished: getSessionEstablished()
        });
      }
    };
  } });
}
__name(wrapStub, "wrapStub");
var ContainerControlClient = class {
  static {
    __name(this, "ContainerControlClient");
  }
  connOptions;
  idleDisconnectMs;
  busyPollIntervalMs;
  logger;
  onActivity;
  onSessionBusy;
  onSessionIdle;
  conn = null;
  /**
  * Real cause captured by the connection during startup failure (e.g. a
  * platform container-allocation error). Preferred over the generic capnweb
  * disposal error when translating queued RPC rejections. Cleared each time a
  * fresh connection is created.
  */
  lastConnectionError = null;
  /**
  * Whether `lastConnectionError` was captured from an actual connection
  * attempt failure (authoritative root cause) rather than a lifecycle
  * teardown reason (weak). A weak teardown cause — e.g. `onStop` firing
  * `runtime_replaced` — is usually a downstream *consequence* of the real
  * failure, so it must not overwrite an authoritative cause already
  * captured from the connect attempt.
  */
  connectionErrorIsAuthoritative = false;
  /**
  * Whether the current connection ever established a live session to a
  * running container. Set true by the connection's `onConnected` callback,
  * reset when a fresh connection is created. Lets `translateRPCError`
  * distinguish a true interruption (established, then dropped) from a
  * never-connected failure (container never started).
  */
  sessionEstablished = false;
  idleTimer = null;
  busyPollTimer = null;
  /** Number of RPC method promises that have started but not settled. */
  activeCalls = 0;
  /** Tracks whether we currently believe the session is busy. */
  busy = false;
  constructor(options) {
    this.connOptions = {
      stub: options.stub,
      port: options.port,
      localMain: options.localMain,
      logger: options.logger,
      retryTimeoutMs: options.retryTimeoutMs,
      getSandboxInfo: options.getSandboxInfo,
      startContainer: options.startContainer,
      onConnected: /* @__PURE__ */ __name(() => {
        this.sessionEstablished = true;
        this.lastConnectionError = null;
        this.connectionErrorIsAuthoritative = false;
      }, "onConnected"),
      onClose: /* @__PURE__ */ __name(() => {
        if (this.conn) this.destroyConnection();
      }, "onClose"),
      onConnectionError: /* @__PURE__ */ __name((error) => {
        this.lastConnectionError = error;
        this.connectionErrorIsAuthoritative = true;
      }, "onConnectionError")
    };
    this.idleDisconnectMs = options.idleDisconnectMs ?? DEFAULT_IDLE_DISCONNECT_MS;
    this.busyPollIntervalMs = options.busyPollIntervalMs ?? BUSY_POLL_INTERVAL_MS;
    this.logger = options.logger ?? createNoOpLogger();
    this.onActivity = options.onActivity;
    this.onSessionBusy = options.onSessionBusy;
    this.onSessionIdle = options.onSessionIdle;
  }
  /**
  * Return the current connection, creating one when the client is disconnected.
  * Starts the busy-poll timer the first time a connection is materialized.
  */
  getConnection() {
    if (!this.conn) {
      this.lastConnectionError = null;
      this.connectionErrorIsAuthoritative = false;
      this.sessionEstablished = false;
      this.conn = new ContainerControlConnection(this.connOptions);
      this.startBusyPoll();
    }
    return this.conn;
  }
  /**
  * Stamp a *weak* connection cause (a lifecycle teardown reason). Only takes
  * effect if no authoritative connect-attempt failure has been captured, so
  * a teardown consequence never masks the real root cause.
  */
  stampWeakConnectionCause(cause) {
    if (cause === void 0) return;
    if (this.connectionErrorIsAuthoritative) return;
    this.lastConnectionError = cause;
  }
  fireUserCallback(name, callback) {
    if (!callback) return;
    try {
      callback();
    } catch (error) {
      this.logger.warn("ContainerControlClient callback threw", {
        callback: name,
        error: error instanceof Error ? error.message : String(error)
      });
    }
  }
  fireActivity() {
    this.fireUserCallback("onActivity", this.onActivity);
  }
  fireSessionBusy() {
    this.fireUserCallback("onSessionBusy", this.onSessionBusy);
  }
  fireSessionIdle() {
    this.fireUserCallback("onSessionIdle", this.onSessionIdle);
  }
  markBusy() {
    if (!this.busy) {
      this.busy = true;
      this.fireSessionBusy();
    }
    this.clearIdleTimer();
  }
  isSessionBusy(conn) {
    const { imports, exports } = conn.getStats();
    return this.activeCalls > 0 || imports > IDLE_IMPORT_THRESHOLD || exports > IDLE_EXPORT_THRESHOLD;
  }
  maybeTransitionIdle() {
    const conn = this.conn;
    if (!conn) return;
    if (!conn.isConnected()) return;
    this.transitionIdleIfReady(conn);
  }
  transitionIdleIfReady(conn) {
    if (this.isSessionBusy(conn)) {
      this.markBusy();
      return;
    }
    if (this.busy) {
      this.busy = false;
      this.fireSessionIdle();
      this.scheduleIdleDisconnect();
    } else if (!this.idleTimer) this.scheduleIdleDisconnect();
  }
  /**
  * Called synchronously at the start of each RPC method invocation.
  * Renews the DO activity timeout so the sleepAfter alarm is pushed
  * forward before the container processes the call, and pins the RPC
  * WebSocket as busy until the method's promise settles.
  */
  recordCallStarted = /* @__PURE__ */ __name(() => {
    this.activeCalls++;
    this.markBusy();
    this.fireActivity();
  }, "recordCallStarted");
  recordCallSettled = /* @__PURE__ */ __name(() => {
    this.activeCalls = Math.max(0, this.activeCalls - 1);
    this.maybeTransitionIdle();
  }, "recordCallSettled");
  /** Return the last connection-startup error captured, if any. */
  getLastConnectionError = /* @__PURE__ */ __name(() => this.lastConnectionError, "getLastConnectionError");
  /** Whether the current connection ever established a live session. */
  getSessionEstablished = /* @__PURE__ */ __name(() => this.sessionEstablished, "getSessionEstablished");
  /**
  * Base span attributes for RPC-call spans: sandbox identifiers plus the
  * container port. Mirrors the connection's `spanAttrs()` so all
  * `sandbox.rpc.*` spans share a consistent shape.
  */
  getSpanAttrs = /* @__PURE__ */ __name(() => {
    const info = this.connOptions.getSandboxInfo?.();
    return {
      "sandbox.id": info?.id,
      "sandbox.name": info?.name,
      "sandbox.rpc.port": this.connOptions.port !== void 0 ? String(this.connOptions.port) : void 0
    };
  }, "getSpanAttrs");
  /**
  * Sample `getStats()` and update busy/idle state. While busy, renews the
  * activity timeout each tick so an in-flight stream keeps pushing the
  * sleepAfter deadline forward. On the busy → idle edge, fires
  * `onSessionIdle` and schedules the WebSocket disconnect.
  *
  * If the WebSocket has dropped underneath us (container crash, network
  * blip) we tear the connection down here. `destroyConnection()` fires
  * `onSessionIdle` if we were busy, so the DO's inflight counter doesn't
  * stay pinned forever waiting for a peer that's never going to reply.
  */
  pollBusyState = /* @__PURE__ */ __name(() => {
    const conn = this.conn;
    if (!conn) return;
    if (!conn.isConnected()) return;
    if (this.isSessionBusy(conn)) {
      this.markBusy();
      this.fireActivity();
      return;
    }
    this.transitionIdleIfReady(conn);
  }, "pollBusyState");
  startBusyPoll() {
    if (this.busyPollTimer) return;
    this.busyPollTimer = setInterval(this.pollBusyState, this.busyPollIntervalMs);
  }
  stopBusyPoll() {
    if (this.busyPollTimer) {
      clearInterval(this.busyPollTimer);
      this.busyPollTimer = null;
    }
  }
  scheduleIdleDisconnect() {
    this.clearIdleTimer();
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      const conn = this.conn;
      if (!conn || !conn.isConnected()) return;
      if (!this.isSessionBusy(conn)) {
        this.logger.debug("Disconnecting idle RPC connection");
        this.destroyConnection();
      }
    }, this.idleDisconnectMs);
  }
  clearIdleTimer() {
    if (this.idleTimer) {
      clearTimeout(this.idleTimer);
      this.idleTimer = null;
    }
  }
  destroyConnection(cause) {
    this.stopBusyPoll();
    this.clearIdleTimer();
    this.activeCalls = 0;
    if (this.busy) {
      this.busy = false;
      this.fireSessionIdle();
    }
    if (this.conn) {
      this.stampWeakConnectionCause(cause);
      this.conn.disconnect(cause);
      this.conn = null;
    }
  }
  get commands() {
    return wrapStub(this.getConnection().rpc().commands, "commands", this.recordCallStarted, this.recordCallSettled, this.getLastConnectionError, this.getSessionEstablished, this.getSpanAttrs);
  }
  get files() {
    return wrapStub(this.getConnection().rpc().files, "files", this.recordCallStarted, this.recordCallSettled, this.getLastConnectionError, this.getSessionEstablished, this.getSpanAttrs);
  }
  get processes() {
    return wrapStub(this.getConnection().rpc().processes, "processes", this.recordCallStarted, this.recordCallSettled, this.getLastConnectionError, this.getSessionEstablished, this.getSpanAttrs);
  }
  get ports() {
    return wrapStub(this.getConnection().rpc().ports, "ports", this.recordCallStarted, this.recordCallSettled, this.getLastConnectionError, this.getSessionEstablished, this.getSpanAttrs);
  }
  get git() {
    return wrapStub(this.getConnection().rpc().git, "git", this.recordCallStarted, this.recordCallSettled, this.getLastConnectionError, this.getSessionEstablished, this.getSpanAttrs);
  }
  get utils() {
    return wrapStub(this.getConnection().rpc().utils, "utils", this.recordCallStarted, this.recordCallSettled, this.getLastConnectionError, this.getSessionEstablished, this.getSpanAttrs);
  }
  get backup() {
    return wrapStub(this.getConnection().rpc().backup, "backup", this.recordCallStarted, this.recordCallSettled, this.getLastConnectionError, this.getSessionEstablished, this.getSpanAttrs);
  }
  get watch() {
    return wrapStub(this.getConnection().rpc().watch, "watch", this.recordCallStarted, this.recordCallSettled, this.getLastConnectionError, this.getSessionEstablished, this.getSpanAttrs);
  }
  get tunnels() {
    return wrapStub(this.getConnection().rpc().tunnels, "tunnels", this.recordCallStarted, this.recordCallSettled, this.getLastConnectionError, this.getSessionEstablished, this.getSpanAttrs);
  }
  get interpreter() {
    return wrapStub(this.getConnection().rpc().interpreter, "interpreter", this.recordCallStarted, this.recordCallSettled, this.getLastConnectionError, this.getSessionEstablished, this.getSpanAttrs);
  }
  /**
  * Update the upgrade retry budget. Applies to the current connection
  * (if any) and is remembered for any future connections created after the
  * client is torn down and reconnected.
  */
  setRetryTimeoutMs(ms) {
    this.connOptions.retryTimeoutMs = ms;
    this.conn?.setRetryTimeoutMs(ms);
  }
  getTransportMode() {
    return "rpc";
  }
  isWebSocketConnected() {
    return this.conn?.isConnected() ?? false;
  }
  async connect() {
    await this.getConnection().connect();
  }
  /**
  * Tear down the active connection.
  *
  * When a connection attempt is still in progress, the teardown is deferred
  * until that attempt settles — so a lifecycle disconnect (e.g. the DO's
  * alarm firing `onStop`) cannot rip the transport out from under an
  * in-flight connect and reject queued calls with a generic disposal error.
  * The provided `cause` is stamped immediately so that if the attempt fails,
  * queued calls surface it; if the attempt succeeds, the (now-established)
  * connection is then torn down cleanly with the cause.
  *
  * During this deferral window `this.conn` still points at the connecting
  * transport so queued calls can keep their original connection context.
  * Container lifecycle code treats `disconnect()` as terminal and does not
  * issue more RPC calls after requesting it.
  *
  * `cause` should be a typed `SandboxError` describing why the connection is
  * being torn down (sandbox stopping, lifetime change, transport switch).
  */
  disconnect(cause) {
    const conn = this.conn;
    if (conn?.isConnecting()) {
      this.stopBusyPoll();
      this.clearIdleTimer();
      this.activeCalls = 0;
      if (this.busy) {
        this.busy = false;
        this.fireSessionIdle();
      }
      this.stampWeakConnectionCause(cause);
      conn.whenSettled().then(() => {
        if (this.conn === conn) this.destroyConnection(cause);
      });
      return;
    }
    this.destroyConnection(cause);
  }
};
async function* parseSSE(stream) {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let currentEvent = { data: [] };
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      const parsed = parseSSEFrames(buffer, currentEvent);
      buffer = parsed.remaining;
      currentEvent = parsed.currentEvent;
      for (const frame of parsed.events) try {
        yield JSON.parse(frame.data);
      } catch {
      }
    }
    const finalParsed = parseSSEFrames(`${buffer}

`, currentEvent);
    for (const frame of finalParsed.events) try {
      yield JSON.parse(frame.data);
    } catch {
    }
  } finally {
    try {
      await reader.cancel();
    } catch {
    }
    reader.releaseLock();
  }
}
__name(parseSSE, "parseSSE");
async function* streamFile(stream) {
  let metadata = null;
  for await (const event of parseSSE(stream)) switch (event.type) {
    case "metadata":
      metadata = {
        mimeType: event.mimeType,
        size: event.size,
        isBinary: event.isBinary,
        encoding: event.encoding
      };
      break;
    case "chunk":
      if (!metadata) throw new Error("Received chunk before metadata");
      if (metadata.isBinary && metadata.encoding === "base64") {
        const binaryString = atob(event.data);
        const bytes = new Uint8Array(binaryString.length);
        for (let i = 0; i < binaryString.length; i++) bytes[i] = binaryString.charCodeAt(i);
        yield bytes;
      } else yield event.data;
      break;
    case "complete":
      if (!metadata) throw new Error("Stream completed without metadata");
      return metadata;
    case "error":
      throw new Error(`File streaming error: ${event.error}`);
  }
  throw new Error("Stream ended unexpectedly");
}
__name(streamFile, "streamFile");
var SandboxSecurityError = class extends Error {
  static {
    __name(this, "SandboxSecurityError");
  }
  constructor(message, code) {
    super(message);
    this.code = code;
    this.name = "SandboxSecurityError";
  }
};
function validatePort(port) {
  if (!Number.isInteger(port)) return false;
  if (port < 1024 || port > 65535) return false;
  if ([3e3].includes(port)) return false;
  return true;
}
__name(validatePort, "validatePort");
function sanitizeSandboxId(id) {
  if (!id || id.length > 63) throw new SandboxSecurityError("Sandbox ID must be 1-63 characters long.", "INVALID_SANDBOX_ID_LENGTH");
  if (id.startsWith("-") || id.endsWith("-")) throw new SandboxSecurityError("Sandbox ID cannot start or end with hyphens (DNS requirement).", "INVALID_SANDBOX_ID_HYPHENS");
  const reservedNames = [
    "www",
    "api",
    "admin",
    "root",
    "system",
    "cloudflare",
    "workers"
  ];
  const lowerCaseId = id.toLowerCase();
  if (reservedNames.includes(lowerCaseId)) throw new SandboxSecurityError(`Reserved sandbox ID '${id}' is not allowed.`, "RESERVED_SANDBOX_ID");
  return id;
}
__name(sanitizeSandboxId, "sanitizeSandboxId");
function validateLanguage(language) {
  if (!language) return;
  const supportedLanguages = [
    "python",
    "python3",
    "javascript",
    "js",
    "node",
    "typescript",
    "ts"
  ];
  const normalized = language.toLowerCase();
  if (!supportedLanguages.includes(normalized)) throw new SandboxSecurityError(`Unsupported language '${language}'. Supported languages: python, javascript, typescript`, "INVALID_LANGUAGE");
}
__name(validateLanguage, "validateLanguage");
var TUNNEL_NAME_REGEX = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
function validateTunnelName(name) {
  if (typeof name !== "string") throw new SandboxSecurityError(`Tunnel name must be a string. Received: ${typeof name}`, "INVALID_TUNNEL_NAME");
  if (name.length === 0 || name.length > 63) throw new SandboxSecurityError(`Tunnel name '${name}' must be 1\u201363 characters long.`, "INVALID_TUNNEL_NAME_LENGTH");
  if (!TUNNEL_NAME_REGEX.test(name)) throw new SandboxSecurityError(`Tunnel name '${name}' is not a valid DNS label. Use lowercase letters, digits, and internal hyphens only (no dots, no leading/trailing hyphens).`, "INVALID_TUNNEL_NAME_FORMAT");
}
__name(validateTunnelName, "validateTunnelName");
var CodeInterpreter = class {
  static {
    __name(this, "CodeInterpreter");
  }
  getInterpreterClient;
  contexts = /* @__PURE__ */ new Map();
  constructor(interpreterClient) {
    this.getInterpreterClient = typeof interpreterClient === "function" ? interpreterClient : () => interpreterClient;
  }
  /**
  * Create a new code execution context
  */
  async createCodeContext(options = {}) {
    validateLanguage(options.language);
    const context = await this.getInterpreterClient().createCodeContext(options);
    this.contexts.set(context.id, context);
    return context;
  }
  /**
  * Run code with optional context
  */
  async runCode(code, options = {}) {
    let context = options.context;
    if (!context) {
      const language = options.language || "python";
      context = await this.getOrCreateDefaultContext(language);
    }
    const execution = new Execution(code, context);
    await this.getInterpreterClient().runCodeStream(context.id, code, options.language, {
      onStdout: /* @__PURE__ */ __name((output) => {
        execution.logs.stdout.push(output.text);
        if (options.onStdout) return options.onStdout(output);
      }, "onStdout"),
      onStderr: /* @__PURE__ */ __name((output) => {
        execution.logs.stderr.push(output.text);
        if (options.onStderr) return options.onStderr(output);
      }, "onStderr"),
      onResult: /* @__PURE__ */ __name(async (result) => {
        execution.results.push(new ResultImpl(result));
        if (options.onResult) return options.onResult(result);
      }, "onResult"),
      onError: /* @__PURE__ */ __name((error) => {
        execution.error = error;
        if (options.onError) return options.onError(error);
      }, "onError")
    });
    return execution;
  }
  /**
  * Run code and return a streaming response
  */
  async runCodeStream(code, options = {}) {
    let context = options.context;
    if (!context) {
      const language = options.language || "python";
      context = await this.getOrCreateDefaultContext(language);
    }
    return this.getInterpreterClient().streamCode(context.id, code, options.language);
  }
  /**
  * List all code contexts
  */
  async listCodeContexts() {
    const contexts = await this.getInterpreterClient().listCodeContexts();
    for (const context of contexts) this.contexts.set(context.id, context);
    return contexts;
  }
  /**
  * Delete a code context
  */
  async deleteCodeContext(contextId) {
    await this.getInterpreterClient().deleteCodeContext(contextId);
    this.contexts.delete(contextId);
  }
  async getOrCreateDefaultContext(language) {
    for (const context of this.contexts.values()) if (context.language === language) return context;
    return this.createCodeContext({ language });
  }
};
async function* parseSSEStream(stream, signal) {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let currentEvent = { data: [] };
  let isAborted = signal?.aborted ?? false;
  const emitEvent = /* @__PURE__ */ __name((data) => {
    if (data === "[DONE]" || data.trim() === "") return;
    try {
      return JSON.parse(data);
    } catch {
      return;
    }
  }, "emitEvent");
  const onAbort = /* @__PURE__ */ __name(() => {
    isAborted = true;
    reader.cancel().catch(() => {
    });
  }, "onAbort");
  if (signal && !signal.aborted) signal.addEventListener("abort", onAbort);
  try {
    while (true) {
      if (isAborted) throw new Error("Operation was aborted");
      const { done, value } = await reader.read();
      if (isAborted) throw new Error("Operation was aborted");
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      const parsed = parseSSEFrames(buffer, currentEvent);
      buffer = parsed.remaining;
      currentEvent = parsed.currentEvent;
      for (const frame of parsed.events) {
        const event = emitEvent(frame.data);
        if (event !== void 0) yield event;
      }
    }
    if (isAborted) throw new Error("Operation was aborted");
    const finalParsed = parseSSEFrames(`${buffer}

`, currentEvent);
    for (const frame of finalParsed.events) {
      const event = emitEvent(frame.data);
      if (event !== void 0) yield event;
    }
  } finally {
    if (signal) signal.removeEventListener("abort", onAbort);
    try {
      await reader.cancel();
    } catch {
    }
    reader.releaseLock();
  }
}
__name(parseSSEStream, "parseSSEStream");
var BucketMountError = class extends Error {
  static {
    __name(this, "BucketMountError");
  }
  code;
  constructor(message, code = ErrorCode.BUCKET_MOUNT_ERROR) {
    super(message);
    this.name = "BucketMountError";
    this.code = code;
  }
};
var S3FSMountError = class extends BucketMountError {
  static {
    __name(this, "S3FSMountError");
  }
  constructor(message) {
    super(message, ErrorCode.S3FS_MOUNT_ERROR);
    this.name = "S3FSMountError";
  }
};
var BucketUnmountError = class extends BucketMountError {
  static {
    __name(this, "BucketUnmountError");
  }
  constructor(message) {
    super(message, ErrorCode.BUCKET_UNMOUNT_ERROR);
    this.name = "BucketUnmountError";
  }
};
var MissingCredentialsError = class extends BucketMountError {
  static {
    __name(this, "MissingCredentialsError");
  }
  constructor(message) {
    super(message, ErrorCode.MISSING_CREDENTIALS);
    this.name = "MissingCredentialsError";
  }
};
var InvalidMountConfigError = class extends BucketMountError {
  static {
    __name(this, "InvalidMountConfigError");
  }
  constructor(message) {
    super(message, ErrorCode.INVALID_MOUNT_CONFIG);
    this.name = "InvalidMountConfigError";
  }
};
function detectCredentials(options, envVars) {
  if (options.credentials) return options.credentials;
  const awsAccessKeyId = envVars.AWS_ACCESS_KEY_ID;
  const awsSecretAccessKey = envVars.AWS_SECRET_ACCESS_KEY;
  if (awsAccessKeyId && awsSecretAccessKey) return {
    accessKeyId: awsAccessKeyId,
    secretAccessKey: awsSecretAccessKey
  };
  const r2AccessKeyId = envVars.R2_ACCESS_KEY_ID;
  const r2SecretAccessKey = envVars.R2_SECRET_ACCESS_KEY;
  if (r2AccessKeyId && r2SecretAccessKey) return {
    accessKeyId: r2AccessKeyId,
    secretAccessKey: r2SecretAccessKey
  };
  throw new MissingCredentialsError("No credentials found. Set R2_ACCESS_KEY_ID and R2_SECRET_ACCESS_KEY or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables, or pass explicit credentials in options.");
}
__name(detectCredentials, "detectCredentials");
function detectProviderFromUrl(endpoint) {
  try {
    const hostname = new URL(endpoint).hostname.toLowerCase();
    if (hostname.endsWith(".r2.cloudflarestorage.com")) return "r2";
    if (hostname.endsWith(".amazonaws.com") || hostname === "s3.amazonaws.com") return "s3";
    if (hostname === "storage.googleapis.com") return "gcs";
    return null;
  } catch {
    return null;
  }
}
__name(detectProviderFromUrl, "detectProviderFromUrl");
function getProviderFlags(provider) {
  if (!provider) return ["use_path_request_style"];
  switch (provider) {
    case "r2":
      return ["nomixupload"];
    case "s3":
      return [];
    case "gcs":
      return [];
    default:
      return ["use_path_request_style"];
  }
}
__name(getProviderFlags, "getProviderFlags");
function resolveS3fsOptions(provider, userOptions) {
  const providerFlags = getProviderFlags(provider);
  if (!userOptions || userOptions.length === 0) return providerFlags;
  const allFlags = [...providerFlags, ...userOptions];
  const flagMap = /* @__PURE__ */ new Map();
  for (const flag of allFlags) {
    const [flagName] = flag.split("=");
    flagMap.set(flagName, flag);
  }
  return Array.from(flagMap.values());
}
__name(resolveS3fsOptions, "resolveS3fsOptions");
function isR2Bucket(value) {
  return typeof value === "object" && value !== null && "put" in value && typeof value.put === "function" && "get" in value && typeof value.get === "function" && "head" in value && typeof value.head === "function" && "delete" in value && typeof value.delete === "function" && "list" in value && typeof value.list === "function";
}
__name(isR2Bucket, "isR2Bucket");
function validatePrefix(prefix) {
  if (!prefix.startsWith("/")) throw new InvalidMountConfigError(`Prefix must start with '/': "${prefix}"`);
}
__name(validatePrefix, "validatePrefix");
function validateBucketName(bucket, mountPath) {
  if (bucket.includes(":")) {
    const [bucketName, prefixPart] = bucket.split(":");
    throw new InvalidMountConfigError(`Bucket name cannot contain ':'. To mount a prefix, use the 'prefix' option:
  mountBucket('${bucketName}', '${mountPath}', { ...options, prefix: '${prefixPart}' })`);
  }
  if (!/^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$/.test(bucket)) throw new InvalidMountConfigError(`Invalid bucket name: "${bucket}". Bucket names must be 3-63 characters, lowercase alphanumeric, dots, or hyphens, and cannot start/end with dots or hyphens.`);
}
__name(validateBucketName, "validateBucketName");
function validateBucketBindingName(bucketBinding, mountPath) {
  if (bucketBinding.includes(":")) {
    const [bucketName, prefixPart] = bucketBinding.split(":");
    throw new InvalidMountConfigError(`Bucket name cannot contain ':'. To mount a prefix, use the 'prefix' option:
  mountBucket('${bucketName}', '${mountPath}', { ...options, prefix: '${prefixPart}' })`);
  }
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(bucketBinding)) throw new InvalidMountConfigError(`Invalid R2 binding name: "${bucketBinding}". Binding names must start with a letter or underscore and contain only letters, numbers, or underscores.`);
}
__name(validateBucketBindingName, "validateBucketBindingName");
function buildS3fsSource(bucket, prefix) {
  return prefix ? `${bucket}:${prefix}` : bucket;
}
__name(buildS3fsSource, "buildS3fsSource");
var DEFAULT_POLL_INTERVAL_MS = 1e3;
var DEFAULT_ECHO_SUPPRESS_TTL_MS = 2e3;
var MAX_BACKOFF_MS = 3e4;
var SYNC_CONCURRENCY = 5;
var LocalMountSyncManager = class {
  static {
    __name(this, "LocalMountSyncManager");
  }
  bucket;
  mountPath;
  prefix;
  readOnly;
  client;
  sessionId;
  logger;
  pollIntervalMs;
  echoSuppressTtlMs;
  snapshot = /* @__PURE__ */ new Map();
  echoSuppressSet = /* @__PURE__ */ new Set();
  pollTimer = null;
  watchReconnectTimer = null;
  watchAbortController = null;
  running = false;
  consecutivePollFailures = 0;
  consecutiveWatchFailures = 0;
  constructor(options) {
    this.bucket = options.bucket;
    this.mountPath = options.mountPath;
    if (options.prefix !== void 0) validatePrefix(options.prefix);
    this.prefix = options.prefix?.replace(/^\//, "") || void 0;
    this.readOnly = options.readOnly;
    this.client = options.client;
    this.sessionId = options.sessionId;
    this.logger = options.logger.child({ operation: "local-mount-sync" });
    this.pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.echoSuppressTtlMs = options.echoSuppressTtlMs ?? DEFAULT_ECHO_SUPPRESS_TTL_MS;
  }
  /**
  * Start bidirectional sync. Performs initial full sync, then starts
  * the R2 poll loop and (if not readOnly) the container watch loop.
  */
  async start() {
    this.running = true;
    await this.client.files.mkdir(this.mountPath, this.sessionId, { recursive: true });
    await this.fullSyncR2ToContainer();
    this.schedulePoll();
    if (!this.readOnly) this.startContainerWatch();
    this.logger.info("Local mount sync started", {
      mountPath: this.mountPath,
      prefix: this.prefix,
      readOnly: this.readOnly,
      pollIntervalMs: this.pollIntervalMs
    });
  }
  /**
  * Stop all sync activity and clean up resources.
  */
  async stop() {
    this.running = false;
    if (this.pollTimer) {
      clearTimeout(this.pollTimer);
      this.pollTimer = null;
    }
    if (this.watchReconnectTimer) {
      clearTimeout(this.watchReconnectTimer);
      this.watchReconnectTimer = null;
    }
    if (this.watchAbortController) {
      this.watchAbortController.abort();
      this.watchAbortController = null;
    }
    this.snapshot.clear();
    this.echoSuppressSet.clear();
    this.logger.info("Local mount sync stopped", { mountPath: this.mountPath });
  }
  async fullSyncR2ToContainer() {
    const objects = await this.listAllR2Objects();
    const newSnapshot = /* @__PURE__ */ new Map();
    for (let i = 0; i < objects.length; i += SYNC_CONCURRENCY) {
      const batch = objects.slice(i, i + SYNC_CONCURRENCY);
      await Promise.all(batch.map(async (obj) => {
        const containerPath = this.r2KeyToContainerPath(obj.key);
        newSnapshot.set(obj.key, {
          etag: obj.etag,
          size: obj.size
        });
        await this.ensureParentDir(containerPath);
        await this.transferR2ObjectToContainer(obj.key, containerPath);
      }));
    }
    this.snapshot = newSnapshot;
    this.logger.debug("Initial R2 -> Container sync complete", { objectCount: objects.length });
  }
  schedulePoll() {
    if (!this.running) return;
    const backoffMs = this.consecutivePollFailures > 0 ? Math.min(this.pollIntervalMs * 2 ** this.consecutivePollFailures, MAX_BACKOFF_MS) : this.pollIntervalMs;
    this.pollTimer = setTimeout(async () => {
      try {
        await this.pollR2ForChanges();
        this.consecutivePollFailures = 0;
      } catch (error) {
        this.consecutivePollFailures++;
        this.logger.error("R2 poll cycle failed", error instanceof Error ? error : new Error(String(error)));
      }
      this.schedulePoll();
    }, backoffMs);
  }
  async pollR2ForChanges() {
    const objects = await this.listAllR2Objects();
    const newSnapshot = /* @__PURE__ */ new Map();
    const changed = [];
    for (const obj of objects) {
      newSnapshot.set(obj.key, {
        etag: obj.etag,
        size: obj.size
      });
      const existing = this.snapshot.get(obj.key);
      if (!existing || existing.etag !== obj.etag) changed.push({
        key: obj.key,
        action: existing ? "modified" : "created"
      });
    }
    for (let i = 0; i < changed.length; i += SYNC_CONCURRENCY) {
      const batch = changed.slice(i, i + SYNC_CONCURRENCY);
      await Promise.all(batch.map(async ({ key, action }) => {
        try {
          const containerPath = this.r2KeyToContainerPath(key);
          await this.ensureParentDir(containerPath);
          this.suppressEcho(containerPath);
          await this.transferR2ObjectToContainer(key, containerPath);
          this.logger.debug("R2 -> Container: synced object", {
            key,
            action
          });
        } catch (error) {
          this.logger.error(`R2 -> Container: failed to sync object ${key}`, error instanceof Error ? error : new Error(String(error)));
        }
      }));
    }
    for (const [key] of this.snapshot) if (!newSnapshot.has(key)) {
      const containerPath = this.r2KeyToContainerPath(key);
      this.suppressEcho(containerPath);
      try {
        await this.client.files.deleteFile(containerPath, this.sessionId);
        this.logger.debug("R2 -> Container: deleted file", { key });
      } catch (error) {
        this.logger.error("R2 -> Container: failed to delete", error instanceof Error ? error : new Error(String(error)));
      }
    }
    this.snapshot = newSnapshot;
  }
  async listAllR2Objects() {
    const results = [];
    let cursor;
    do {
      const listResult = await this.bucket.list({
        ...this.prefix && { prefix: this.prefix },
        ...cursor && { cursor }
      });
      for (const obj of listResult.objects) results.push({
        key: obj.key,
        etag: obj.etag,
        size: obj.size
      });
      cursor = listResult.truncated ? listResult.cursor : void 0;
    } while (cursor);
    return results;
  }
  async transferR2ObjectToContainer(key, containerPath) {
    const obj = await this.bucket.get(key);
    if (!obj) return;
    const arrayBuffer = await obj.arrayBuffer();
    const base64 = uint8ArrayToBase64(new Uint8Array(arrayBuffer));
    await this.client.files.writeFile(containerPath, base64, this.sessionId, { encoding: "base64" });
  }
  async ensureParentDir(containerPath) {
    const parentDir = containerPath.substring(0, containerPath.lastIndexOf("/"));
    if (parentDir && parentDir !== this.mountPath) await this.client.files.mkdir(parentDir, this.sessionId, { recursive: true });
  }
  startContainerWatch() {
    this.watchAbortController = new AbortController();
    this.runWatchWithRetry();
  }
  runWatchWithRetry() {
    if (!this.running) return;
    this.runContainerWatchLoop().then(() => {
      this.consecutiveWatchFailures = 0;
      this.scheduleWatchReconnect();
    }).catch((error) => {
      if (!this.running) return;
      this.consecutiveWatchFailures++;
      this.logger.error("Container watch loop failed", error instanceof Error ? error : new Error(String(error)));
      this.scheduleWatchReconnect();
    });
  }
  scheduleWatchReconnect() {
    if (!this.running) return;
    const backoffMs = this.consecutiveWatchFailures > 0 ? Math.min(this.pollIntervalMs * 2 ** this.consecutiveWatchFailures, MAX_BACKOFF_MS) : this.pollIntervalMs;
    this.logger.debug("Reconnecting container watch", {
      backoffMs,
      failures: this.consecutiveWatchFailures
    });
    this.watchReconnectTimer = setTimeout(() => {
      this.watchReconnectTimer = null;
      if (!this.running) return;
      this.watchAbortController = new AbortController();
      this.runWatchWithRetry();
    }, backoffMs);
  }
  async runContainerWatchLoop() {
    const stream = await this.client.watch.watch({
      path: this.mountPath,
      recursive: true,
      sessionId: this.sessionId
    });
    for await (const event of parseSSEStream(stream, this.watchAbortController?.signal)) {
      if (!this.running) break;
      this.consecutiveWatchFailures = 0;
      if (event.type !== "event") continue;
      if (event.isDirectory) continue;
      const containerPath = event.path;
      if (this.echoSuppressSet.has(containerPath)) continue;
      const r2Key = this.containerPathToR2Key(containerPath);
      if (!r2Key) continue;
      try {
        switch (event.eventType) {
          case "create":
          case "modify":
          case "move_to":
            await this.uploadFileToR2(containerPath, r2Key);
            this.logger.debug("Container -> R2: synced file", {
              path: containerPath,
              key: r2Key,
              action: event.eventType
            });
            break;
          case "delete":
          case "move_from":
            await this.bucket.delete(r2Key);
            this.snapshot.delete(r2Key);
            this.logger.debug("Container -> R2: deleted object", {
              path: containerPath,
              key: r2Key
            });
            break;
        }
      } catch (error) {
        this.logger.error(`Container -> R2 sync failed for ${containerPath}`, error instanceof Error ? error : new Error(String(error)));
      }
    }
  }
  /**
  * Read a container file and upload it to R2, then update the local
  * snapshot so the next poll cycle doesn't echo the write back.
  */
  async uploadFileToR2(containerPath, r2Key) {
    const bytes = base64ToUint8Array((await this.client.files.readFile(containerPath, this.sessionId, { encoding: "base64" })).content);
    await this.bucket.put(r2Key, bytes);
    const head = await this.bucket.head(r2Key);
    if (head) this.snapshot.set(r2Key, {
      etag: head.etag,
      size: head.size
    });
  }
  suppressEcho(containerPath) {
    this.echoSuppressSet.add(containerPath);
    setTimeout(() => {
      this.echoSuppressSet.delete(containerPath);
    }, this.echoSuppressTtlMs);
  }
  r2KeyToContainerPath(key) {
    let relativePath = key;
    if (this.prefix) relativePath = key.startsWith(this.prefix) ? key.slice(this.prefix.length) : key;
    return path.join(this.mountPath, relativePath);
  }
  containerPathToR2Key(containerPath) {
    const resolved = path.resolve(containerPath);
    const mount = path.resolve(this.mountPath);
    if (!resolved.startsWith(mount)) return null;
    const relativePath = path.relative(mount, resolved);
    if (!relativePath || relativePath.startsWith("..")) return null;
    return this.prefix ? path.join(this.prefix, relativePath) : relativePath;
  }
};
function uint8ArrayToBase64(bytes) {
  return Buffer.from(bytes).toString("base64");
}
__name(uint8ArrayToBase64, "uint8ArrayToBase64");
function base64ToUint8Array(base64) {
  return new Uint8Array(Buffer.from(base64, "base64"));
}
__name(base64ToUint8Array, "base64ToUint8Array");
async function forwardPreviewRequest(tcpPort, request, lifecycle) {
  const containerURL = request.url.replace("https:", "http:");
  const settleForward = lifecycle.beginForward();
  try {
    const response = await tcpPort.fetch(containerURL, request);
    if (response.webSocket !== null) return {
      status: "response",
      response: bridgePreviewWebSocket(response, lifecycle, settleForward)
    };
    if (response.body !== null) {
      const { readable, writable } = new TransformStream();
      response.body.pipeTo(writable).finally(settleForward).catch(() => {
      });
      return {
        status: "response",
        response: new Response(readable, response)
      };
    }
    settleForward();
    return {
      status: "response",
      response
    };
  } catch (error) {
    settleForward();
    if (error instanceof Error && error.message.includes("Network connection lost.")) return { status: "network-lost" };
    throw error;
  }
}
__name(forwardPreviewRequest, "forwardPreviewRequest");
function bridgePreviewWebSocket(response, lifecycle, settleForward) {
  const containerWebSocket = response.webSocket;
  if (containerWebSocket === null) {
    settleForward();
    return response;
  }
  const [client, server] = Object.values(new WebSocketPair());
  let settled = false;
  const settle = /* @__PURE__ */ __name(() => {
    if (!settled) {
      settled = true;
      settleForward();
    }
  }, "settle");
  containerWebSocket.accept();
  server.accept();
  server.addEventListener("message", async (event) => {
    lifecycle.renewActivity();
    try {
      const data = event.data instanceof Blob ? await event.data.arrayBuffer() : event.data;
      containerWebSocket.send(data);
    } catch {
      server.close(1011, "Failed to forward message to container");
    }
  });
  containerWebSocket.addEventListener("message", async (event) => {
    lifecycle.renewActivity();
    try {
      const data = event.data instanceof Blob ? await event.data.arrayBuffer() : event.data;
      server.send(data);
    } catch {
      containerWebSocket.close(1011, "Failed to forward message to client");
    }
  });
  server.addEventListener("close", (event) => {
    settle();
    const code = event.code === 1005 || event.code === 1006 ? 1e3 : event.code;
    containerWebSocket.close(code, event.reason);
  });
  containerWebSocket.addEventListener("close", (event) => {
    settle();
    const code = event.code === 1005 || event.code === 1006 ? 1e3 : event.code;
    server.close(code, event.reason);
  });
  server.addEventListener("error", () => {
    settle();
    containerWebSocket.close(1011, "Client WebSocket error");
  });
  containerWebSocket.addEventListener("error", () => {
    settle();
    server.close(1011, "Container WebSocket error");
  });
  return new Response(null, {
    status: response.status,
    webSocket: client,
    headers: response.headers
  });
}
__name(bridgePreviewWebSocket, "bridgePreviewWebSocket");
var PREVIEW_PROXY_HEADER = "x-sandbox-preview-proxy";
var PREVIEW_PROXY_PORT_HEADER = "x-sandbox-preview-port";
var PREVIEW_PROXY_TOKEN_HEADER = "x-sandbox-preview-token";
var PREVIEW_PROXY_SANDBOX_ID_HEADER = "x-sandbox-preview-sandbox-id";
var PREVIEW_PROXY_HEADERS = [
  PREVIEW_PROXY_HEADER,
  PREVIEW_PROXY_PORT_HEADER,
  PREVIEW_PROXY_TOKEN_HEADER,
  PREVIEW_PROXY_SANDBOX_ID_HEADER
];
function isLocalhostPattern(hostname) {
  if (hostname.startsWith("[")) {
    if (hostname.includes("]:")) return hostname.substring(0, hostname.indexOf("]:") + 1) === "[::1]";
    return hostname === "[::1]";
  }
  if (hostname === "::1") return true;
  const hostPart = hostname.split(":")[0];
  return hostPart === "localhost" || hostPart === "127.0.0.1" || hostPart === "0.0.0.0";
}
__name(isLocalhostPattern, "isLocalhostPattern");
async function proxyTerminal(stub, sessionId, request, options) {
  if (!sessionId || typeof sessionId !== "string") throw new Error("sessionId is required for terminal access");
  if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") throw new Error("terminal() requires a WebSocket upgrade request");
  const params = new URLSearchParams({ sessionId });
  if (options?.cols) params.set("cols", String(options.cols));
  if (options?.rows) params.set("rows", String(options.rows));
  if (options?.shell) params.set("shell", options.shell);
  const ptyUrl = `http://localhost/ws/pty?${params}`;
  const ptyRequest = new Request(ptyUrl, request);
  return stub.fetch(switchPort(ptyRequest, 3e3));
}
__name(proxyTerminal, "proxyTerminal");
var SessionInitInvalidatedError = class extends Error {
  static {
    __name(this, "SessionInitInvalidatedError");
  }
  constructor() {
    super("Default session initialization was invalidated by a container stop");
    this.name = "SessionInitInvalidatedError";
  }
};
function isSessionInitInvalidated(error) {
  return error instanceof SessionInitInvalidatedError;
}
__name(isSessionInitInvalidated, "isSessionInitInvalidated");
var XML_NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"';
var XML_DECL = '<?xml version="1.0" encoding="UTF-8"?>\n';
function escapeXML(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
__name(escapeXML, "escapeXML");
function xmlResponse(body, status = 200) {
  return new Response(XML_DECL + body, {
    status,
    headers: { "Content-Type": "application/xml" }
  });
}
__name(xmlResponse, "xmlResponse");
function normalizeObjectKey(value) {
  return value.replace(/^\/+/, "");
}
__name(normalizeObjectKey, "normalizeObjectKey");
function decodeObjectKey(value) {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
__name(decodeObjectKey, "decodeObjectKey");
function trimTrailingSlashes(s) {
  let end = s.length;
  while (end > 0 && s[end - 1] === "/") end--;
  return s.slice(0, end);
}
__name(trimTrailingSlashes, "trimTrailingSlashes");
function normalizeMountPrefix(prefix) {
  if (!prefix) return void 0;
  return trimTrailingSlashes(normalizeObjectKey(prefix)) || void 0;
}
__name(normalizeMountPrefix, "normalizeMountPrefix");
function parsePath(pathname) {
  const stripped = pathname.startsWith("/") ? pathname.slice(1) : pathname;
  if (!stripped) return null;
  const slash = stripped.indexOf("/");
  if (slash === -1) return {
    bucket: stripped,
    key: ""
  };
  return {
    bucket: stripped.slice(0, slash),
    key: normalizeObjectKey(stripped.slice(slash + 1))
  };
}
__name(parsePath, "parsePath");
function resolveR2Bucket(env$1, name) {
  if (typeof env$1 !== "object" || env$1 === null) return null;
  const val = env$1[name];
  return isR2Bucket(val) ? val : null;
}
__name(resolveR2Bucket, "resolveR2Bucket");
function parseRange(header) {
  if (!header) return void 0;
  const m = header.match(/^bytes=(\d*)-(\d*)$/);
  if (!m) return void 0;
  const start = m[1] ? parseInt(m[1], 10) : void 0;
  const end = m[2] ? parseInt(m[2], 10) : void 0;
  if (start === void 0 && end !== void 0) return { suffix: end };
  if (start !== void 0 && end !== void 0) return {
    offset: start,
    length: end - start + 1
  };
  if (start !== void 0) return { offset: start };
}
__name(parseRange, "parseRange");
function buildListObjectsV2Xml(bucketName, prefix, delimiter, maxKeys, result) {
  const contents = result.objects.map((obj) => `<Contents><Key>${escapeXML(obj.key)}</Key><LastModified>${obj.uploaded.toISOString()}</LastModified><ETag>${escapeXML(obj.httpEtag)}</ETag><Size>${obj.size}</Size><StorageClass>STANDARD</StorageClass></Contents>`).join("");
  const commonPrefixes = result.delimitedPrefixes.map((p) => `<CommonPrefixes><Prefix>${escapeXML(p)}</Prefix></CommonPrefixes>`).join("");
  const nextToken = result.truncated && result.cursor ? `<NextContinuationToken>${escapeXML(result.cursor)}</NextContinuationToken>` : "";
  const keyCount = result.objects.length + result.delimitedPrefixes.length;
  return `<ListBucketResult ${XML_NS}><Name>${escapeXML(bucketName)}</Name><Prefix>${escapeXML(prefix)}</Prefix><KeyCount>${keyCount}</KeyCount><MaxKeys>${maxKeys}</MaxKeys>` + (delimiter ? `<Delimiter>${escapeXML(delimiter)}</Delimiter>` : "") + `<IsTruncated>${result.truncated}</IsTruncated>` + nextToken + contents + commonPrefixes + `</ListBucketResult>`;
}
__name(buildListObjectsV2Xml, "buildListObjectsV2Xml");
function buildLocationXml() {
  return `<LocationConstraint ${XML_NS}/>`;
}
__name(buildLocationXml, "buildLocationXml");
function buildInitiateMultipartUploadXml(bucketName, key, uploadId) {
  return `<InitiateMultipartUploadResult ${XML_NS}><Bucket>${escapeXML(bucketName)}</Bucket><Key>${escapeXML(key)}</Key><UploadId>${escapeXML(uploadId)}</UploadId></InitiateMultipartUploadResult>`;
}
__name(buildInitiateMultipartUploadXml, "buildInitiateMultipartUploadXml");
function buildCompleteMultipartUploadXml(bucketName, key, etag) {
  return `<CompleteMultipartUploadResult ${XML_NS}><Location>http://r2.internal/${escapeXML(bucketName)}/${escapeXML(key)}</Location><Bucket>${escapeXML(bucketName)}</Bucket><Key>${escapeXML(key)}</Key><ETag>${escapeXML(etag)}</ETag></CompleteMultipartUploadResult>`;
}
__name(buildCompleteMultipartUploadXml, "buildCompleteMultipartUploadXml");
function buildCopyObjectXml(etag, uploaded) {
  return `<CopyObjectResult ${XML_NS}><LastModified>${uploaded.toISOString()}</LastModified><ETag>${escapeXML(etag)}</ETag></CopyObjectResult>`;
}
__name(buildCopyObjectXml, "buildCopyObjectXml");
function extractXmlTagContent(segment, tagName) {
  const openTag = `<${tagName}>`;
  const closeTag = `</${tagName}>`;
  const start = segment.indexOf(openTag);
  if (start === -1) return null;
  const contentStart = start + openTag.length;
  const end = segment.indexOf(closeTag, contentStart);
  if (end === -1) return null;
  return segment.slice(contentStart, end);
}
__name(extractXmlTagContent, "extractXmlTagContent");
function parseCompleteMultipartUploadBody(body) {
  const parts = [];
  let pos = 0;
  while (pos < body.length) {
    const start = body.indexOf("<Part>", pos);
    if (start === -1) break;
    const end = body.indexOf("</Part>", start + 6);
    if (end === -1) break;
    const segment = body.slice(start, end + 7);
    pos = end + 7;
    const partNumberText = extractXmlTagContent(segment, "PartNumber");
    const etagText = extractXmlTagContent(segment, "ETag");
    const partNumber = partNumberText ? parseInt(partNumberText, 10) : NaN;
    if (Number.isFinite(partNumber) && etagText) parts.push({
      partNumber,
      etag: etagText.replace(/^"|"$/g, "")
    });
  }
  return parts;
}
__name(parseCompleteMultipartUploadBody, "parseCompleteMultipartUploadBody");
function buildResponseHeaders(obj) {
  const headers = new Headers();
  headers.set("ETag", obj.httpEtag);
  headers.set("Content-Length", String(obj.size));
  headers.set("Last-Modified", obj.uploaded.toUTCString());
  headers.set("Accept-Ranges", "bytes");
  if (obj.httpMetadata?.contentType) headers.set("Content-Type", obj.httpMetadata.contentType);
  if (obj.httpMetadata?.contentDisposition) headers.set("Content-Disposition", obj.httpMetadata.contentDisposition);
  if (obj.httpMetadata?.contentEncoding) headers.set("Content-Encoding", obj.httpMetadata.contentEncoding);
  if (obj.httpMetadata?.contentLanguage) headers.set("Content-Language", obj.httpMetadata.contentLanguage);
  if (obj.httpMetadata?.cacheControl) headers.set("Cache-Control", obj.httpMetadata.cacheControl);
  return headers;
}
__name(buildResponseHeaders, "buildResponseHeaders");
function buildContentRange(range, totalSize) {
  if ("suffix" in range) return `bytes ${Math.max(0, totalSize - range.suffix)}-${totalSize - 1}/${totalSize}`;
  const start = range.offset ?? 0;
  return `bytes ${start}-${range.length !== void 0 ? start + range.length - 1 : totalSize - 1}/${totalSize}`;
}
__name(buildContentRange, "buildContentRange");
function getRangeContentLength(range, totalSize) {
  if ("suffix" in range) return Math.min(range.suffix, totalSize);
  const start = range.offset ?? 0;
  if (start >= totalSize) return 0;
  const requestedLength = range.length !== void 0 ? range.length : totalSize - start;
  return Math.min(requestedLength, totalSize - start);
}
__name(getRangeContentLength, "getRangeContentLength");
function extractHttpMetadata(request) {
  const meta = {};
  const ct = request.headers.get("Content-Type");
  if (ct) meta.contentType = ct;
  const cd = request.headers.get("Content-Disposition");
  if (cd) meta.contentDisposition = cd;
  const ce = request.headers.get("Content-Encoding");
  if (ce) meta.contentEncoding = ce;
  const cl = request.headers.get("Content-Language");
  if (cl) meta.contentLanguage = cl;
  const cc = request.headers.get("Cache-Control");
  if (cc) meta.cacheControl = cc;
  return meta;
}
__name(extractHttpMetadata, "extractHttpMetadata");
function parseCopySource(header) {
  const sourcePath = header.split("?")[0] ?? "";
  if (!sourcePath) return null;
  const decoded = decodeURIComponent(sourcePath);
  const parsed = parsePath(decoded.startsWith("/") ? decoded : `/${decoded}`);
  return parsed ? {
    bucket: parsed.bucket,
    key: normalizeObjectKey(parsed.key)
  } : null;
}
__name(parseCopySource, "parseCopySource");
function normalizeStorageClass(storageClass) {
  if (storageClass === "Standard" || storageClass === "InfrequentAccess") return storageClass;
}
__name(normalizeStorageClass, "normalizeStorageClass");
async function putRequestBody(r2, key, request, options) {
  const contentLength = request.headers.get("Content-Length");
  const length = contentLength ? Number.parseInt(contentLength, 10) : NaN;
  if (!Number.isFinite(length) || length < 0) return new Response("Bad Request: missing or invalid Content-Length", { status: 400 });
  if (length === 0) return r2.put(key, new Uint8Array(0), options);
  if (!request.body) return new Response("Bad Request: missing request body", { status: 400 });
  const { readable, writable } = new FixedLengthStream(length);
  const pipe = request.body.pipeTo(writable);
  const result = await r2.put(key, readable, options);
  await pipe;
  return result;
}
__name(putRequestBody, "putRequestBody");
async function handleListObjects(r2, bucketName, url, mountPrefix) {
  const queryPrefix = normalizeObjectKey(url.searchParams.get("prefix") ?? "");
  const delimiter = url.searchParams.get("delimiter") ?? "";
  const maxKeys = Math.min(parseInt(url.searchParams.get("max-keys") ?? "1000", 10) || 1e3, 1e3);
  const continuationToken = url.searchParams.get("continuation-token") ?? void 0;
  const listOpts = {
    prefix: (mountPrefix ? `${mountPrefix}/${queryPrefix}` : queryPrefix) || void 0,
    delimiter: delimiter || void 0,
    limit: maxKeys,
    cursor: continuationToken
  };
  const result = await r2.list(listOpts);
  const stripKey = mountPrefix ? (k) => k.startsWith(`${mountPrefix}/`) ? k.slice(mountPrefix.length + 1) : k : (k) => k;
  return xmlResponse(buildListObjectsV2Xml(bucketName, queryPrefix, delimiter, maxKeys, {
    objects: result.objects.map((obj) => ({
      key: stripKey(obj.key),
      uploaded: obj.uploaded,
      httpEtag: obj.httpEtag,
      size: obj.size
    })),
    delimitedPrefixes: result.delimitedPrefixes.map(stripKey),
    truncated: result.truncated,
    cursor: result.truncated ? result.cursor : void 0
  }));
}
__name(handleListObjects, "handleListObjects");
async function handleHeadObject(r2, key) {
  const obj = await r2.head(key);
  if (!obj) return new Response(null, { status: 404 });
  return new Response(null, {
    status: 200,
    headers: buildResponseHeaders(obj)
  });
}
__name(handleHeadObject, "handleHeadObject");
async function handleGetObject(r2, key, request) {
  const range = parseRange(request.headers.get("Range"));
  if (!range) {
    const obj = await r2.get(key);
    if (!obj) return new Response(null, { status: 404 });
    return new Response(obj.body, {
      status: 200,
      headers: buildResponseHeaders(obj)
    });
  }
  const [headObj, rangeObj] = await Promise.all([r2.head(key), r2.get(key, { range })]);
  if (!headObj || !rangeObj) return new Response(null, { status: 404 });
  const headers = buildResponseHeaders(rangeObj);
  headers.set("Content-Range", buildContentRange(range, headObj.size));
  headers.set("Content-Length", String(getRangeContentLength(range, headObj.size)));
  return new Response(rangeObj.body, {
    status: 206,
    headers
  });
}
__name(handleGetObject, "handleGetObject");
async function handlePutObject(r2, bucketName, key, request, env$1, buckets) {
  const copySourceHeader = request.headers.get("x-amz-copy-source");
  if (copySourceHeader) {
    const copySource = parseCopySource(copySourceHeader);
    if (!copySource || !copySource.key) return new Response("Bad Request: invalid x-amz-copy-source", { status: 400 });
    if (!Object.hasOwn(buckets, copySource.bucket)) return new Response(`Access to R2 bucket "${copySource.bucket}" is not permitted. Call mountBucket() with this bucket before accessing it.`, { status: 403 });
    const sourceParams = buckets[copySource.bucket];
    const sourceBucket = copySource.bucket === bucketName ? r2 : resolveR2Bucket(env$1, copySource.bucket);
    if (!sourceBucket) return new Response(`R2 binding "${copySource.bucket}" not found in Worker env. Ensure the binding name matches the bucket name passed to mountBucket().`, { status: 500 });
    const sourcePrefix = normalizeMountPrefix(sourceParams.prefix);
    const sourceKey = sourcePrefix ? `${sourcePrefix}/${copySource.key}` : copySource.key;
    const sourceObject = await sourceBucket.get(sourceKey);
    if (!sourceObject) return new Response(null, { status: 404 });
    const httpMetadata = request.headers.get("x-amz-metadata-directive")?.toUpperCase() === "REPLACE" ? extractHttpMetadata(request) : sourceObject.httpMetadata;
    const result$1 = await r2.put(key, sourceObject.body, {
      httpMetadata,
      customMetadata: sourceObject.customMetadata,
      storageClass: normalizeStorageClass(sourceObject.storageClass)
    });
    return xmlResponse(buildCopyObjectXml(result$1.httpEtag, result$1.uploaded));
  }
  const result = await putRequestBody(r2, key, request, { httpMetadata: extractHttpMetadata(request) });
  if (result instanceof Response) return result;
  const headers = new Headers();
  headers.set("ETag", result.httpEtag);
  return new Response(null, {
    status: 200,
    headers
  });
}
__name(handlePutObject, "handlePutObject");
async function handleDeleteObject(r2, key) {
  await r2.delete(key);
  return new Response(null, { status: 204 });
}
__name(handleDeleteObject, "handleDeleteObject");
async function handleCreateMultipartUpload(r2, bucketName, key, request) {
  const httpMetadata = extractHttpMetadata(request);
  return xmlResponse(buildInitiateMultipartUploadXml(bucketName, key, (await r2.createMultipartUpload(key, { httpMetadata })).uploadId));
}
__name(handleCreateMultipartUpload, "handleCreateMultipartUpload");
async function handleUploadPart(r2, key, url, request) {
  const uploadId = url.searchParams.get("uploadId") ?? "";
  const partNumber = parseInt(url.searchParams.get("partNumber") ?? "0", 10);
  if (!uploadId || !partNumber) return new Response("Bad Request: missing uploadId or partNumber", { status: 400 });
  if (!request.body) return new Response("Bad Request: missing request body", { status: 400 });
  const contentLength = request.headers.get("Content-Length");
  const partLength = contentLength ? Number.parseInt(contentLength, 10) : NaN;
  if (!Number.isFinite(partLength) || partLength < 0) return new Response("Bad Request: missing or invalid Content-Length", { status: 400 });
  const upload = r2.resumeMultipartUpload(key, uploadId);
  let part;
  if (partLength === 0) part = await upload.uploadPart(partNumber, new Uint8Array(0));
  else {
    const { readable, writable } = new FixedLengthStream(partLength);
    const pipe = request.body.pipeTo(writable);
    part = await upload.uploadPart(partNumber, readable);
    await pipe;
  }
  const headers = new Headers();
  headers.set("ETag", `"${part.etag}"`);
  return new Response(null, {
    status: 200,
    headers
  });
}
__name(handleUploadPart, "handleUploadPart");
async function handleCompleteMultipartUpload(r2, bucketName, key, url, request) {
  const uploadId = url.searchParams.get("uploadId") ?? "";
  if (!uploadId) return new Response("Bad Request: missing uploadId", { status: 400 });
  const r2Parts = parseCompleteMultipartUploadBody(await request.text()).map((p) => ({
    partNumber: p.partNumber,
    etag: p.etag
  }));
  return xmlResponse(buildCompleteMultipartUploadXml(bucketName, key, (await r2.resumeMultipartUpload(key, uploadId).complete(r2Parts)).httpEtag));
}
__name(handleCompleteMultipartUpload, "handleCompleteMultipartUpload");
async function handleAbortMultipartUpload(r2, key, url) {
  const uploadId = url.searchParams.get("uploadId") ?? "";
  if (!uploadId) return new Response("Bad Request: missing uploadId", { status: 400 });
  await r2.resumeMultipartUpload(key, uploadId).abort();
  return new Response(null, { status: 204 });
}
__name(handleAbortMultipartUpload, "handleAbortMultipartUpload");
var r2EgressHandler = /* @__PURE__ */ __name(async (request, env$1, ctx) => {
  const url = new URL(request.url);
  const parsed = parsePath(url.pathname);
  if (!parsed) return new Response("Bad Request: empty path", { status: 400 });
  const { bucket: bucketName, key: encodedKey } = parsed;
  const key = decodeObjectKey(encodedKey);
  if (!ctx.params?.buckets || !(bucketName in ctx.params.buckets)) return new Response(`Access to R2 bucket "${bucketName}" is not permitted. Call mountBucket() with this bucket before accessing it.`, { status: 403 });
  const bucketParams = ctx.params.buckets[bucketName];
  const mountPrefix = normalizeMountPrefix(bucketParams.prefix);
  const readOnly = bucketParams.readOnly ?? false;
  const r2 = resolveR2Bucket(env$1, bucketName);
  if (!r2) return new Response(`R2 binding "${bucketName}" not found in Worker env. Ensure the binding name matches the bucket name passed to mountBucket().`, { status: 500 });
  const { method } = request;
  if (!key) {
    if (method === "GET" && url.searchParams.has("location")) return xmlResponse(buildLocationXml());
    if (method === "GET" && url.searchParams.get("list-type") === "2") return handleListObjects(r2, bucketName, url, mountPrefix);
    if (method === "GET") return handleListObjects(r2, bucketName, url, mountPrefix);
    return new Response("Method Not Allowed", { status: 405 });
  }
  const fullKey = mountPrefix ? `${mountPrefix}/${key}` : key;
  if (readOnly && (method === "PUT" || method === "DELETE" || method === "POST" && (url.searchParams.has("uploads") || url.searchParams.has("uploadId")))) return new Response("Forbidden: bucket mount is read-only", { status: 403 });
  if (method === "POST" && url.searchParams.has("uploads")) return handleCreateMultipartUpload(r2, bucketName, fullKey, request);
  if (method === "POST" && url.searchParams.has("uploadId")) return handleCompleteMultipartUpload(r2, bucketName, fullKey, url, request);
  if (method === "PUT" && url.searchParams.has("partNumber") && url.searchParams.has("uploadId")) return handleUploadPart(r2, fullKey, url, request);
  if (method === "DELETE" && url.searchParams.has("uploadId")) return handleAbortMultipartUpload(r2, fullKey, url);
  switch (method) {
    case "HEAD":
      return handleHeadObject(r2, fullKey);
    case "GET":
      return handleGetObject(r2, fullKey, request);
    case "PUT":
      return handlePutObject(r2, bucketName, fullKey, request, env$1, ctx.params.buckets);
    case "DELETE":
      return handleDeleteObject(r2, fullKey);
    default:
      return new Response("Method Not Allowed", { status: 405 });
  }
}, "r2EgressHandler");
var PER_MOUNT_SUFFIX = ".s3-credential-proxy.internal";
var SELF_TEST_PATH = "/__sandbox_credential_proxy_self_test__";
var DIAGNOSTICS_PATH = "/__sandbox_credential_proxy_diagnostics__";
var DEFAULT_SLOW_REQUEST_MS = 1e3;
var ERROR_RESPONSE_BODY_LIMIT = 2048;
var MAX_DIAGNOSTIC_EVENTS = 500;
var DUMMY_AUTH_HEADERS = /* @__PURE__ */ new Set([
  "authorization",
  "x-amz-date",
  "x-amz-content-sha256",
  "x-amz-security-token",
  "x-goog-date",
  "x-goog-content-sha256"
]);
var sigV4ClientCache = /* @__PURE__ */ new Map();
var directoryMarkerCache = /* @__PURE__ */ new Map();
var credentialProxyDiagnosticEvents = [];
var credentialProxyDiagnosticEventCount = 0;
function evictSigV4ClientCacheEntry(mountId) {
  sigV4ClientCache.delete(mountId);
}
__name(evictSigV4ClientCacheEntry, "evictSigV4ClientCacheEntry");
function evictDirectoryMarkerCacheForMount(mountId) {
  const prefix = `${mountId}:`;
  for (const key of directoryMarkerCache.keys()) if (key.startsWith(prefix)) directoryMarkerCache.delete(key);
}
__name(evictDirectoryMarkerCacheForMount, "evictDirectoryMarkerCacheForMount");
function toHex(buffer) {
  return Array.from(new Uint8Array(buffer)).map((b) => b.toString(16).padStart(2, "0")).join("");
}
__name(toHex, "toHex");
async function sha256Hex(data) {
  return toHex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(data)));
}
__name(sha256Hex, "sha256Hex");
async function hmacSHA256(key, data) {
  const cryptoKey = await crypto.subtle.importKey("raw", key, {
    name: "HMAC",
    hash: "SHA-256"
  }, false, ["sign"]);
  return crypto.subtle.sign("HMAC", cryptoKey, new TextEncoder().encode(data));
}
__name(hmacSHA256, "hmacSHA256");
function detectS3Region(provider, endpoint) {
  if (provider === "r2") return "auto";
  try {
    const host = new URL(endpoint).hostname;
    const m = host.match(/s3[.-]([a-z0-9-]+)\.amazonaws\.com/);
    if (m && m[1] !== "amazonaws") return m[1];
    if (host === "s3.amazonaws.com") return "us-east-1";
  } catch {
  }
  return "auto";
}
__name(detectS3Region, "detectS3Region");
function buildCleanHeaders(original) {
  const clean = new Headers();
  for (const [k, v] of original) {
    const lower = k.toLowerCase();
    if (!DUMMY_AUTH_HEADERS.has(lower) && lower !== "host") clean.set(k, v);
  }
  const contentSHA256 = original.get("x-amz-content-sha256");
  if (contentSHA256 && isValidContentSHA256(contentSHA256)) clean.set("x-amz-content-sha256", contentSHA256);
  return clean;
}
__name(buildCleanHeaders, "buildCleanHeaders");
function isValidContentSHA256(value) {
  return value === "UNSIGNED-PAYLOAD" || /^[a-fA-F0-9]{64}$/.test(value);
}
__name(isValidContentSHA256, "isValidContentSHA256");
function getCredentialProxyDebugConfig(env$1) {
  const envRecord = env$1;
  const enabled = envRecord.SANDBOX_CREDENTIAL_PROXY_DEBUG === "true";
  const diagnosticsEndpointEnabled = envRecord.SANDBOX_CREDENTIAL_PROXY_DIAGNOSTICS_ENDPOINT === "true";
  const configuredSlowRequestMs = Number(envRecord.SANDBOX_CREDENTIAL_PROXY_SLOW_REQUEST_MS);
  return {
    diagnosticsEndpointEnabled,
    enabled,
    slowRequestMs: Number.isFinite(configuredSlowRequestMs) && configuredSlowRequestMs >= 0 ? configuredSlowRequestMs : DEFAULT_SLOW_REQUEST_MS
  };
}
__name(getCredentialProxyDebugConfig, "getCredentialProxyDebugConfig");
function recordCredentialProxyDiagnosticEvent(event) {
  credentialProxyDiagnosticEvents.push(event);
  credentialProxyDiagnosticEventCount++;
  while (credentialProxyDiagnosticEvents.length > MAX_DIAGNOSTIC_EVENTS) credentialProxyDiagnosticEvents.shift();
}
__name(recordCredentialProxyDiagnosticEvent, "recordCredentialProxyDiagnosticEvent");
function getCredentialProxyDiagnosticsResponse(url, containerId) {
  const since = Number(url.searchParams.get("since") ?? "0");
  const bufferStartCount = credentialProxyDiagnosticEventCount - credentialProxyDiagnosticEvents.length;
  const events2 = credentialProxyDiagnosticEvents.filter((event, index) => {
    if (event.containerId !== containerId) return false;
    return !Number.isFinite(since) || bufferStartCount + index >= since;
  });
  return Response.json({
    nextCursor: credentialProxyDiagnosticEventCount,
    events: events2
  });
}
__name(getCredentialProxyDiagnosticsResponse, "getCredentialProxyDiagnosticsResponse");
async function withCredentialProxyDiagnostics(requestInfo, debugConfig, containerId, path$1, operation) {
  const started = Date.now();
  try {
    const response = await operation();
    const durationMs = Date.now() - started;
    if (debugConfig.enabled) recordCredentialProxyDiagnosticEvent({
      ...requestInfo,
      containerId,
      durationMs,
      ok: response.ok,
      path: path$1,
      status: response.status,
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    if (debugConfig.enabled || durationMs >= debugConfig.slowRequestMs) console.info("sandbox.s3_credential_proxy.request", {
      ...requestInfo,
      durationMs,
      ok: response.ok,
      status: response.status,
      responseContentLength: response.headers.get("content-length")
    });
    if (!response.ok) {
      const responseForLog = response.clone();
      const requestInfoSnapshot = { ...requestInfo };
      responseForLog.text().then((body) => {
        console.warn("sandbox.s3_credential_proxy.upstream_error", {
          ...requestInfoSnapshot,
          durationMs,
          status: response.status,
          statusText: response.statusText,
          errorBody: body.slice(0, ERROR_RESPONSE_BODY_LIMIT)
        });
      }).catch(() => {
      });
    }
    return response;
  } catch (error) {
    const durationMs = Date.now() - started;
    console.warn("sandbox.s3_credential_proxy.request_error", {
      ...requestInfo,
      durationMs,
      error: error instanceof Error ? error.message : String(error)
    });
    throw error;
  }
}
__name(withCredentialProxyDiagnostics, "withCredentialProxyDiagnostics");
function getSigV4Client(mountId, endpoint, provider, credentials, region) {
  const cached = sigV4ClientCache.get(mountId);
  if (cached && cached.accessKeyId === credentials.accessKeyId && cached.secretAccessKey === credentials.secretAccessKey && cached.endpoint === endpoint && cached.provider === provider && cached.region === region) return cached.client;
  const client = new AwsClient({
    accessKeyId: credentials.accessKeyId,
    secretAccessKey: credentials.secretAccessKey,
    service: "s3",
    region,
    retries: 0
  });
  sigV4ClientCache.set(mountId, {
    client,
    accessKeyId: credentials.accessKeyId,
    secretAccessKey: credentials.secretAccessKey,
    endpoint,
    provider,
    region
  });
  return client;
}
__name(getSigV4Client, "getSigV4Client");
function encodeCanonicalQueryPart(value) {
  return encodeURIComponent(value).replace(/[!'()*]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
}
__name(encodeCanonicalQueryPart, "encodeCanonicalQueryPart");
function getCanonicalURI(url) {
  return url.pathname.split("/").map((segment) => segment.split(/(%[0-9A-Fa-f]{2})/g).map((part) => /^%[0-9A-Fa-f]{2}$/.test(part) ? part.toUpperCase() : encodeCanonicalQueryPart(part)).join("")).join("/");
}
__name(getCanonicalURI, "getCanonicalURI");
function getCanonicalQueryString(url) {
  const query = url.search.startsWith("?") ? url.search.slice(1) : url.search;
  if (!query) return "";
  return query.split("&").map((part) => {
    const separatorIndex = part.indexOf("=");
    if (separatorIndex === -1) return [part, ""];
    return [part.slice(0, separatorIndex), part.slice(separatorIndex + 1)];
  }).map(([key, value]) => [encodeCanonicalQueryPart(decodeURIEncodedQueryPart(key)), encodeCanonicalQueryPart(decodeURIEncodedQueryPart(value))]).sort(([leftKey, leftValue], [rightKey, rightValue]) => {
    if (leftKey < rightKey) return -1;
    if (leftKey > rightKey) return 1;
    if (leftValue < rightValue) return -1;
    if (leftValue > rightValue) return 1;
    return 0;
  }).map(([key, value]) => `${key}=${value}`).join("&");
}
__name(getCanonicalQueryString, "getCanonicalQueryString");
function decodeURIEncodedQueryPart(value) {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
__name(decodeURIEncodedQueryPart, "decodeURIEncodedQueryPart");
function getSigV4PayloadHash(headers) {
  const existingHash = headers.get("x-amz-content-sha256");
  if (existingHash && existingHash !== "UNSIGNED-PAYLOAD") return {
    hash: existingHash,
    mode: "signed"
  };
  return {
    hash: "UNSIGNED-PAYLOAD",
    mode: "unsigned"
  };
}
__name(getSigV4PayloadHash, "getSigV4PayloadHash");
function isZeroLengthDirectoryMarkerPUT(request, realPath) {
  return request.method.toUpperCase() === "PUT" && request.headers.get("content-length") === "0" && realPath.endsWith("/");
}
__name(isZeroLengthDirectoryMarkerPUT, "isZeroLengthDirectoryMarkerPUT");
function isDirectoryMarkerHEAD(request) {
  return request.method.toUpperCase() === "HEAD";
}
__name(isDirectoryMarkerHEAD, "isDirectoryMarkerHEAD");
function getDirectoryMarkerCacheKey(mountId, realPath) {
  return `${mountId}:${realPath.replace(/\/+$/, "")}`;
}
__name(getDirectoryMarkerCacheKey, "getDirectoryMarkerCacheKey");
function getDirectoryMarkerResponseHeaders(request) {
  const headers = [
    ["Accept-Ranges", "bytes"],
    ["Content-Length", "0"],
    ["ETag", '"d41d8cd98f00b204e9800998ecf8427e"'],
    ["Last-Modified", (/* @__PURE__ */ new Date()).toUTCString()]
  ];
  const contentType = request.headers.get("content-type");
  if (contentType) headers.push(["Content-Type", contentType]);
  for (const [name, value] of request.headers) if (name.toLowerCase().startsWith("x-amz-meta-")) headers.push([name, value]);
  return headers;
}
__name(getDirectoryMarkerResponseHeaders, "getDirectoryMarkerResponseHeaders");
function normalizePrefix(prefix) {
  if (!prefix) return void 0;
  return prefix.replace(/^\/+/, "").replace(/\/+$/, "");
}
__name(normalizePrefix, "normalizePrefix");
function getObjectKeyForPath(realPath, bucket) {
  const pathSegments = realPath.split("/").filter(Boolean);
  if (pathSegments[0] !== bucket) return null;
  return pathSegments.slice(1).join("/");
}
__name(getObjectKeyForPath, "getObjectKeyForPath");
function isObjectKeyWithinPrefix(objectKey, prefix) {
  const normalizedPrefix = normalizePrefix(prefix);
  if (!normalizedPrefix) return true;
  return objectKey === normalizedPrefix || objectKey.startsWith(`${normalizedPrefix}/`);
}
__name(isObjectKeyWithinPrefix, "isObjectKeyWithinPrefix");
function parseCopySourceHeader(value) {
  const encodedPath = value.split("?", 1)[0];
  if (!encodedPath) return null;
  let decodedPath;
  try {
    decodedPath = decodeURIComponent(encodedPath);
  } catch {
    return null;
  }
  const path$1 = decodedPath.startsWith("/") ? decodedPath.slice(1) : decodedPath;
  const separatorIndex = path$1.indexOf("/");
  if (separatorIndex <= 0 || separatorIndex === path$1.length - 1) return null;
  return {
    bucket: path$1.slice(0, separatorIndex),
    objectKey: path$1.slice(separatorIndex + 1)
  };
}
__name(parseCopySourceHeader, "parseCopySourceHeader");
function validateCopySourceWithinMountScope(headers, bucket, prefix) {
  const copySources = [["x-amz-copy-source", headers.get("x-amz-copy-source")], ["x-goog-copy-source", headers.get("x-goog-copy-source")]].filter((entry) => entry[1] !== null);
  if (copySources.length > 1) return new Response("Bad Request: multiple copy source headers", { status: 400 });
  if (copySources.length === 0) return null;
  const [headerName, value] = copySources[0];
  const copySource = parseCopySourceHeader(value);
  if (!copySource) return new Response(`Bad Request: invalid ${headerName}`, { status: 400 });
  if (copySource.bucket !== bucket || !isObjectKeyWithinPrefix(copySource.objectKey, prefix)) return new Response("Forbidden: copy source is outside mounted scope", { status: 403 });
  return null;
}
__name(validateCopySourceWithinMountScope, "validateCopySourceWithinMountScope");
function isRequestWithinMountScope(realPath, url, bucket, prefix) {
  const objectKey = getObjectKeyForPath(realPath, bucket);
  if (objectKey === null) return false;
  const requestedPrefix = url.searchParams.get("prefix");
  if (objectKey !== "" && !isObjectKeyWithinPrefix(objectKey, prefix)) return false;
  if (objectKey === "" && normalizePrefix(prefix) !== void 0 && url.search !== "" && requestedPrefix === null) return false;
  if (requestedPrefix !== null) return isObjectKeyWithinPrefix(requestedPrefix, prefix);
  return true;
}
__name(isRequestWithinMountScope, "isRequestWithinMountScope");
function isBucketRootProbe(request, realPath, url, bucket) {
  const method = request.method.toUpperCase();
  return (method === "GET" || method === "HEAD") && url.search === "" && getObjectKeyForPath(realPath, bucket) === "";
}
__name(isBucketRootProbe, "isBucketRootProbe");
function isBucketRootMutation(request, realPath, bucket) {
  const method = request.method.toUpperCase();
  return method !== "GET" && method !== "HEAD" && method !== "OPTIONS" && getObjectKeyForPath(realPath, bucket) === "";
}
__name(isBucketRootMutation, "isBucketRootMutation");
function deleteDirectoryMarkerCacheEntry(mountId, realPath) {
  directoryMarkerCache.delete(getDirectoryMarkerCacheKey(mountId, realPath));
}
__name(deleteDirectoryMarkerCacheEntry, "deleteDirectoryMarkerCacheEntry");
function getContentLength(request) {
  const contentLength = request.headers.get("content-length");
  if (contentLength === null) return null;
  const parsed = Number(contentLength);
  if (!Number.isSafeInteger(parsed) || parsed < 0) return null;
  return parsed;
}
__name(getContentLength, "getContentLength");
function getSigV4ForwardInit(request) {
  const contentLength = getContentLength(request);
  if (contentLength === 0) return { body: new Uint8Array(0) };
  if (contentLength === null || request.body === null) return {};
  const { readable, writable } = new FixedLengthStream(contentLength);
  request.body.pipeTo(writable).catch((error) => {
    writable.abort(error).catch(() => {
    });
  });
  return { body: readable };
}
__name(getSigV4ForwardInit, "getSigV4ForwardInit");
function getGCSHeaders(request) {
  const headers = new Headers();
  for (const [k, v] of request.headers) {
    const lower = k.toLowerCase();
    if (DUMMY_AUTH_HEADERS.has(lower) || lower === "host" || lower === "content-length" || lower === "expect") continue;
    if (lower.startsWith("x-amz-meta-")) {
      headers.set(`x-goog-meta-${lower.slice(11)}`, v);
      continue;
    }
    if (lower.startsWith("x-amz-")) continue;
    headers.set(k, v);
  }
  return headers;
}
__name(getGCSHeaders, "getGCSHeaders");
async function signAndForwardSigV4(request, mountId, endpoint, provider, credentials, requestInfo) {
  const signingStarted = Date.now();
  const region = detectS3Region(provider, endpoint);
  const payload = getSigV4PayloadHash(request.headers);
  const client = getSigV4Client(mountId, endpoint, provider, credentials, region);
  requestInfo.payloadHashMode = payload.mode;
  requestInfo.clientSetupMs = Date.now() - signingStarted;
  const upstreamStarted = Date.now();
  const forwardInit = getSigV4ForwardInit(request);
  requestInfo.bodyPresent = forwardInit?.body !== void 0 || request.body !== null;
  const response = await client.fetch(request, forwardInit);
  requestInfo.upstreamMs = Date.now() - upstreamStarted;
  return response;
}
__name(signAndForwardSigV4, "signAndForwardSigV4");
async function signAndForwardGCS(request, credentials, requestInfo) {
  const url = new URL(request.url);
  const gcsHeaders = getGCSHeaders(request);
  const dateStr = `${(/* @__PURE__ */ new Date()).toISOString().replace(/[:-]/g, "").replace(/\.\d+Z$/, "")}Z`;
  const dateOnly = dateStr.slice(0, 8);
  const location = "auto";
  const service = "storage";
  const credentialScope = `${dateOnly}/${location}/${service}/goog4_request`;
  const bodyHash = "UNSIGNED-PAYLOAD";
  const headerEntries = [
    ["host", url.host],
    ["x-goog-content-sha256", bodyHash],
    ["x-goog-date", dateStr]
  ];
  for (const [k, v] of gcsHeaders) headerEntries.push([k.toLowerCase(), v.trim()]);
  headerEntries.sort((a, b) => a[0].localeCompare(b[0]));
  const signedHeaders = headerEntries.map(([k]) => k).join(";");
  const canonicalHeaders = headerEntries.map(([k, v]) => `${k}:${v}
`).join("");
  const stringToSign = [
    "GOOG4-HMAC-SHA256",
    dateStr,
    credentialScope,
    await sha256Hex([
      request.method,
      getCanonicalURI(url),
      getCanonicalQueryString(url),
      canonicalHeaders,
      signedHeaders,
      bodyHash
    ].join("\n"))
  ].join("\n");
  const signature = toHex(await hmacSHA256(await hmacSHA256(await hmacSHA256(await hmacSHA256(await hmacSHA256(new TextEncoder().encode(`GOOG4${credentials.secretAccessKey}`), dateOnly), location), service), "goog4_request"), stringToSign));
  const authorization = `GOOG4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${credentialScope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  const newHeaders = new Headers(gcsHeaders);
  newHeaders.set("x-goog-date", dateStr);
  newHeaders.set("x-goog-content-sha256", bodyHash);
  newHeaders.set("Authorization", authorization);
  const gcsBody = getContentLength(request) === 0 ? new Uint8Array(0) : request.body;
  const upstreamStarted = Date.now();
  const response = await fetch(new Request(request.url, {
    method: request.method,
    headers: newHeaders,
    body: gcsBody
  }));
  requestInfo.upstreamMs = Date.now() - upstreamStarted;
  return response;
}
__name(signAndForwardGCS, "signAndForwardGCS");
var s3CredentialProxyHandler = /* @__PURE__ */ __name(async (request, env$1, ctx) => {
  const url = new URL(request.url);
  if (url.pathname === SELF_TEST_PATH) return new Response("OK", { status: 200 });
  const debugConfig = getCredentialProxyDebugConfig(env$1);
  if (url.pathname === DIAGNOSTICS_PATH) {
    if (!debugConfig.enabled || !debugConfig.diagnosticsEndpointEnabled) return new Response("Not Found", { status: 404 });
    return getCredentialProxyDiagnosticsResponse(url, ctx.containerId);
  }
  const segments = url.pathname.split("/").filter(Boolean);
  const hostname = url.hostname;
  let mountId;
  let realPath;
  if (hostname.endsWith(PER_MOUNT_SUFFIX)) {
    mountId = hostname.slice(0, -29);
    realPath = url.pathname;
  } else {
    mountId = segments[0] ?? null;
    realPath = mountId ? url.pathname.slice(`/${mountId}`.length) || "/" : "/";
  }
  if (!mountId) return new Response("Bad Request: missing mount ID", { status: 400 });
  const mount = ctx.params?.mounts[mountId];
  if (!mount) return new Response(`Forbidden: unknown mount ID "${mountId}"`, { status: 403 });
  if (mount.readOnly) {
    const method = request.method.toUpperCase();
    if (method !== "GET" && method !== "HEAD" && method !== "OPTIONS") return new Response("Forbidden: bucket mount is read-only", { status: 403 });
  }
  const realUrl = new URL(realPath + (url.search || ""), mount.endpoint);
  if (isBucketRootProbe(request, realPath, url, mount.bucket)) return new Response(null, { status: 200 });
  if (isBucketRootMutation(request, realPath, mount.bucket)) return new Response("Method Not Allowed", { status: 405 });
  if (!isRequestWithinMountScope(realPath, url, mount.bucket, mount.prefix)) return new Response("Forbidden: request is outside mounted bucket scope", { status: 403 });
  const copySourceError = validateCopySourceWithinMountScope(request.headers, mount.bucket, mount.prefix);
  if (copySourceError) return copySourceError;
  const cleanHeaders = buildCleanHeaders(request.headers);
  const cleanRequest = new Request(realUrl.toString(), {
    method: request.method,
    headers: cleanHeaders,
    body: request.body
  });
  const requestInfo = {
    authStrategy: mount.authStrategy,
    bucket: mount.bucket,
    contentLength: request.headers.get("content-length"),
    method: request.method,
    mountId,
    query: [...url.searchParams.keys()].sort()
  };
  if (isZeroLengthDirectoryMarkerPUT(cleanRequest, realPath)) {
    const responseHeaders = getDirectoryMarkerResponseHeaders(cleanRequest);
    requestInfo.bodyPresent = request.body !== null;
    if (mount.authStrategy === "s3-sigv4") requestInfo.payloadHashMode = getSigV4PayloadHash(cleanRequest.headers).mode;
    return withCredentialProxyDiagnostics(requestInfo, debugConfig, ctx.containerId, realPath, async () => {
      const response = mount.authStrategy === "gcs" ? await signAndForwardGCS(cleanRequest, mount.credentials, requestInfo) : await signAndForwardSigV4(cleanRequest, mountId, mount.endpoint, mount.provider, mount.credentials, requestInfo);
      if (response.ok) directoryMarkerCache.set(getDirectoryMarkerCacheKey(mountId, realPath), responseHeaders);
      return response;
    });
  }
  if (isDirectoryMarkerHEAD(cleanRequest)) {
    const responseHeaders = directoryMarkerCache.get(getDirectoryMarkerCacheKey(mountId, realPath));
    if (responseHeaders) {
      requestInfo.bodyPresent = false;
      if (mount.authStrategy === "s3-sigv4") requestInfo.payloadHashMode = getSigV4PayloadHash(cleanRequest.headers).mode;
      return withCredentialProxyDiagnostics(requestInfo, debugConfig, ctx.containerId, realPath, () => Promise.resolve(new Response(null, {
        status: 200,
        headers: responseHeaders
      })));
    }
  }
  if (cleanRequest.method.toUpperCase() !== "HEAD") deleteDirectoryMarkerCacheEntry(mountId, realPath);
  if (mount.authStrategy === "gcs") return withCredentialProxyDiagnostics(requestInfo, debugConfig, ctx.containerId, realPath, () => signAndForwardGCS(cleanRequest, mount.credentials, requestInfo));
  return withCredentialProxyDiagnostics(requestInfo, debugConfig, ctx.containerId, realPath, () => signAndForwardSigV4(cleanRequest, mountId, mount.endpoint, mount.provider, mount.credentials, requestInfo));
}, "s3CredentialProxyHandler");
var TOKEN_VERIFY_URL = "https://api.cloudflare.com/client/v4/user/tokens/verify";
var ACCOUNTS_LIST_URL = "https://api.cloudflare.com/client/v4/accounts";
var CREDENTIALS_TIMEOUT_MS = 1e4;
async function fetchWithTimeout(fetcher, url, init, timeoutMs = CREDENTIALS_TIMEOUT_MS) {
  try {
    return await fetcher(url, {
      ...init,
      signal: AbortSignal.timeout(timeoutMs)
    });
  } catch (err) {
    if (err instanceof Error && err.name === "TimeoutError") throw new Error(`Cloudflare API request to ${url} timed out after ${timeoutMs}ms`);
    throw err;
  }
}
__name(fetchWithTimeout, "fetchWithTimeout");
var ACCOUNT_OWNED_TOKEN_CODE = 1e3;
async function resolveAccountId(env$1, options) {
  const override = getEnvString(env$1, options.overrideKey);
  if (override) return override;
  const generic = getEnvString(env$1, "CLOUDFLARE_ACCOUNT_ID");
  if (generic) return generic;
  const token = getEnvString(env$1, "CLOUDFLARE_API_TOKEN");
  if (!token) throw new Error(`Cloudflare account id could not be resolved. Set one of: ${options.overrideKey}, CLOUDFLARE_ACCOUNT_ID, or CLOUDFLARE_API_TOKEN (a token scoped to a single account).`);
  const fetcher = options.fetcher ?? fetch;
  const response = await fetchWithTimeout(fetcher, TOKEN_VERIFY_URL, {
    method: "GET",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json"
    }
  });
  let body;
  try {
    body = await response.json();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`Cloudflare token verification returned malformed JSON: ${message}`);
  }
  if (response.ok && body?.success) {
    const derived = body.result_info?.account?.id;
    if (!derived) throw new Error(`Cloudflare token is not scoped to a single account (ambiguous). Set ${options.overrideKey} or CLOUDFLARE_ACCOUNT_ID explicitly.`);
    return derived;
  }
  if (body?.errors?.some((e) => e.code === ACCOUNT_OWNED_TOKEN_CODE)) return await deriveAccountIdViaAccountToken(token, fetcher, options);
  throw new Error(`Cloudflare token verification failed with status ${response.status}. Check that CLOUDFLARE_API_TOKEN is valid or set ${options.overrideKey} / CLOUDFLARE_ACCOUNT_ID explicitly.`);
}
__name(resolveAccountId, "resolveAccountId");
async function deriveAccountIdViaAccountToken(token, fetcher, options) {
  const listResponse = await fetchWithTimeout(fetcher, `${ACCOUNTS_LIST_URL}?per_page=2`, {
    method: "GET",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json"
    }
  });
  let listBody;
  try {
    listBody = await listResponse.json();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`Cloudflare account-owned token: /accounts returned malformed JSON: ${message}`);
  }
  if (!listResponse.ok || !listBody?.success) throw new Error(`Cloudflare account-owned token (cfat-...) detected, but /accounts returned status ${listResponse.status}. The token may lack account:read scope. Set CLOUDFLARE_ACCOUNT_ID explicitly to skip introspection.`);
  const accounts = listBody.result ?? [];
  if (accounts.length === 0) throw new Error("Cloudflare account-owned token has access to no accounts. Set CLOUDFLARE_ACCOUNT_ID explicitly.");
  if (accounts.length > 1) throw new Error("Cloudflare account-owned token has access to multiple accounts (ambiguous). Set CLOUDFLARE_ACCOUNT_ID explicitly to disambiguate.");
  const accountId = accounts[0]?.id;
  if (!accountId) throw new Error("Cloudflare /accounts returned a result without an id field.");
  const verifyResponse = await fetchWithTimeout(fetcher, `${ACCOUNTS_LIST_URL}/${encodeURIComponent(accountId)}/tokens/verify`, {
    method: "GET",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json"
    }
  });
  let verifyBody;
  try {
    verifyBody = await verifyResponse.json();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`Cloudflare account token verify returned malformed JSON: ${message}`);
  }
  if (!verifyResponse.ok || !verifyBody?.success) {
    const detail = verifyBody?.errors?.map((e) => `${e.code}: ${e.message}`).join("; ") ?? `HTTP ${verifyResponse.status}`;
    throw new Error(`Cloudflare account token verify failed for account ${accountId}: ${detail}`);
  }
  return accountId;
}
__name(deriveAccountIdViaAccountToken, "deriveAccountIdViaAccountToken");
var ZONES_LIST_URL = "https://api.cloudflare.com/client/v4/zones";
async function resolveZoneId(env$1, options) {
  const envZone = getEnvString(env$1, "CLOUDFLARE_ZONE_ID");
  if (envZone) return envZone;
  const response = await fetchWithTimeout(options.fetcher ?? fetch, `${ZONES_LIST_URL}?account.id=${encodeURIComponent(options.accountId)}&per_page=2`, {
    method: "GET",
    headers: {
      authorization: `Bearer ${options.token}`,
      "content-type": "application/json"
    }
  });
  if (!response.ok) throw new Error(`Cloudflare zones lookup failed with status ${response.status}. Set CLOUDFLARE_ZONE_ID explicitly or grant the API token Zone:Read.`);
  let body;
  try {
    body = await response.json();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`Cloudflare zones lookup returned malformed JSON: ${message}`);
  }
  const zones = body.result ?? [];
  if (zones.length === 0) throw new Error(`Cloudflare API token has access to no zones in account ${options.accountId}. Set CLOUDFLARE_ZONE_ID explicitly or grant the token Zone:Read on the intended zone.`);
  if (zones.length > 1) throw new Error(`Cloudflare API token has access to multiple zones in account ${options.accountId} (ambiguous). Set CLOUDFLARE_ZONE_ID explicitly to disambiguate.`);
  const zoneId = zones[0]?.id;
  if (!zoneId) throw new Error("Cloudflare zones lookup returned a result without an id field.");
  return zoneId;
}
__name(resolveZoneId, "resolveZoneId");
var SandboxControlCallbackImpl = class extends RpcTarget4 {
  static {
    __name(this, "SandboxControlCallbackImpl");
  }
  constructor(getHandler, logger) {
    super();
    this.getHandler = getHandler;
    this.logger = logger;
  }
  async onTunnelExit(id, port, exitCode, runId) {
    const handler = this.getHandler();
    if (!handler) {
      this.logger.debug("onTunnelExit: no handler bound; ignoring", {
        id,
        port,
        exitCode,
        runId
      });
      return;
    }
    await handler(id, port, exitCode, runId);
  }
};
var API_BASE = "https://api.cloudflare.com/client/v4";
var DEFAULT_TIMEOUT_MS = 1e4;
async function cfRequest(url, token, fetcher, options = {}) {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const init = {
    method: options.method ?? "GET",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json"
    },
    signal: AbortSignal.timeout(timeoutMs)
  };
  if (options.body !== void 0) init.body = JSON.stringify(options.body);
  let response;
  try {
    response = await fetcher(url, init);
  } catch (err) {
    if (err instanceof Error && err.name === "TimeoutError") throw new Error(`Cloudflare API request to ${url} timed out after ${timeoutMs}ms`);
    throw err;
  }
  if (options.acceptStatuses?.includes(response.status)) return;
  let envelope;
  try {
    envelope = await response.json();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`Cloudflare API returned non-JSON response (status ${response.status}): ${message}`);
  }
  if (!response.ok || envelope.success === false) {
    const errs = envelope.errors ?? [];
    const summary = errs.length ? errs.map((e) => `${e.code ?? "???"}: ${e.message ?? "unknown"}`).join(", ") : `HTTP ${response.status}`;
    throw new Error(`Cloudflare API error: ${summary}`);
  }
  return envelope.result;
}
__name(cfRequest, "cfRequest");
function isEnterpriseOnlyTagError(error) {
  if (!(error instanceof Error)) return false;
  const msg = error.message.toLowerCase();
  if (msg.includes("9300") && msg.includes("tag")) return true;
  if (!msg.includes("tag")) return false;
  return msg.includes("quota") || msg.includes("enterprise") || msg.includes("not allowed") || msg.includes("not entitled") || msg.includes("not available") || msg.includes("not supported");
}
__name(isEnterpriseOnlyTagError, "isEnterpriseOnlyTagError");
function buildSandboxTags(sandboxId) {
  if (!sandboxId) return void 0;
  return [`sandboxId:${sandboxId}`];
}
__name(buildSandboxTags, "buildSandboxTags");
async function createWithTagFallback(sandboxId, send) {
  const tags = buildSandboxTags(sandboxId);
  if (!tags) return send(void 0);
  try {
    return await send(tags);
  } catch (err) {
    if (!isEnterpriseOnlyTagError(err)) throw err;
    return send(void 0);
  }
}
__name(createWithTagFallback, "createWithTagFallback");
async function createTunnel(args) {
  const fetcher = args.fetcher ?? fetch;
  const result = await createWithTagFallback(args.metadata.sandboxId, (tags) => cfRequest(`${API_BASE}/accounts/${encodeURIComponent(args.accountId)}/cfd_tunnel`, args.token, fetcher, {
    method: "POST",
    body: {
      name: args.tunnelName,
      config_src: "cloudflare",
      metadata: args.metadata,
      ...tags ? { tags } : {}
    }
  }));
  if (!result) throw new Error("Cloudflare tunnel create returned no result body");
  return {
    id: result.id,
    token: result.token
  };
}
__name(createTunnel, "createTunnel");
async function findTunnelByName(args) {
  const fetcher = args.fetcher ?? fetch;
  const result = await cfRequest(`${API_BASE}/accounts/${encodeURIComponent(args.accountId)}/cfd_tunnel?name=${encodeURIComponent(args.tunnelName)}&is_deleted=false`, args.token, fetcher);
  if (!result) return null;
  const live = result.find((t) => !t.deleted_at);
  if (!live) return null;
  if (args.expectedSandboxId !== void 0) {
    if (live.metadata?.sandboxId !== args.expectedSandboxId) return null;
  }
  return {
    id: live.id,
    name: live.name
  };
}
__name(findTunnelByName, "findTunnelByName");
async function deleteTunnel(args) {
  const fetcher = args.fetcher ?? fetch;
  await cfRequest(`${API_BASE}/accounts/${encodeURIComponent(args.accountId)}/cfd_tunnel/${encodeURIComponent(args.tunnelId)}`, args.token, fetcher, {
    method: "DELETE",
    acceptStatuses: [404]
  });
}
__name(deleteTunnel, "deleteTunnel");
async function getTunnelToken(args) {
  const fetcher = args.fetcher ?? fetch;
  const result = await cfRequest(`${API_BASE}/accounts/${encodeURIComponent(args.accountId)}/cfd_tunnel/${encodeURIComponent(args.tunnelId)}/token`, args.token, fetcher);
  if (typeof result !== "string" || result.length === 0) throw new Error(`Cloudflare did not return a token for tunnel ${args.tunnelId}`);
  return result;
}
__name(getTunnelToken, "getTunnelToken");
async function getZoneName(args) {
  const fetcher = args.fetcher ?? fetch;
  const result = await cfRequest(`${API_BASE}/zones/${encodeURIComponent(args.zoneId)}`, args.token, fetcher);
  if (!result?.name) throw new Error(`Cloudflare zone ${args.zoneId} did not return a name`);
  return result.name;
}
__name(getZoneName, "getZoneName");
async function upsertCNAME(args) {
  const fetcher = args.fetcher ?? fetch;
  const existing = (await cfRequest(`${API_BASE}/zones/${encodeURIComponent(args.zoneId)}/dns_records?type=CNAME&name=${encodeURIComponent(args.hostname)}`, args.token, fetcher) ?? []).find((r) => r.type === "CNAME" && r.name === args.hostname);
  if (existing) {
    if (existing.content === args.cnameTarget) return {
      recordId: existing.id,
      reused: true
    };
    throw new Error(`DNS record for ${args.hostname} already exists with different content (owned by you, not us): existing content="${existing.content}", existing comment="${existing.comment ?? ""}". Delete the record manually to allow the sandbox to manage it.`);
  }
  const createResult = await createWithTagFallback(args.sandboxId, (tags) => cfRequest(`${API_BASE}/zones/${encodeURIComponent(args.zoneId)}/dns_records`, args.token, fetcher, {
    method: "POST",
    body: {
      type: "CNAME",
      name: args.hostname,
      content: args.cnameTarget,
      proxied: true,
      comment: args.comment,
      ...tags ? { tags } : {}
    }
  }));
  if (!createResult) throw new Error("Cloudflare DNS create returned no result body");
  return {
    recordId: createResult.id,
    reused: false
  };
}
__name(upsertCNAME, "upsertCNAME");
async function deleteDNSRecord(args) {
  const fetcher = args.fetcher ?? fetch;
  await cfRequest(`${API_BASE}/zones/${encodeURIComponent(args.zoneId)}/dns_records/${encodeURIComponent(args.recordId)}`, args.token, fetcher, {
    method: "DELETE",
    acceptStatuses: [404]
  });
}
__name(deleteDNSRecord, "deleteDNSRecord");
var ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
function randomId(size = 20) {
  const bytes = new Uint8Array(size);
  crypto.getRandomValues(bytes);
  let id = "";
  for (let i = 0; i < size; i += 1) id += ID_ALPHABET[bytes[i] & 31];
  return id;
}
__name(randomId, "randomId");
var TUNNEL_GET_MAX_RECOVERY_ATTEMPTS = 2;
function runtimeRunId() {
  return `run-${randomId()}`;
}
__name(runtimeRunId, "runtimeRunId");
function createTunnelInterruptedError(params) {
  return new OperationInterruptedError({
    message: params.reason === "recovery_exhausted" ? "Tunnel recovery attempts were exhausted" : "Tunnel operation was interrupted by a sandbox runtime change",
    code: ErrorCode.OPERATION_INTERRUPTED,
    httpStatus: 409,
    context: {
      reason: params.reason,
      operation: "tunnel.get",
      phase: params.phase,
      admitted: params.admitted,
      retryable: params.retryable,
      ...params.recoveryAttempts !== void 0 && { recoveryAttempts: params.recoveryAttempts },
      ...params.maxRecoveryAttempts !== void 0 && { maxRecoveryAttempts: params.maxRecoveryAttempts }
    },
    timestamp: (/* @__PURE__ */ new Date()).toISOString(),
    suggestion: params.retryable ? "Retry tunnels.get() for the same port so the SDK can establish a fresh tunnel run." : "Start a new tunnels.get() call only if this tunnel is still desired for the current sandbox."
  });
}
__name(createTunnelInterruptedError, "createTunnelInterruptedError");
function translateTunnelInterruption(error, phase, admitted) {
  if (error instanceof OperationInterruptedError) return error;
  if (error instanceof RuntimeIdentityInactiveError) return createTunnelInterruptedError({
    reason: "runtime_replaced",
    phase,
    admitted,
    retryable: true
  });
  if (error instanceof SandboxLifetimeChangedError) return createTunnelInterruptedError({
    reason: "sandbox_lifetime_changed",
    phase,
    admitted,
    retryable: false
  });
  if (error instanceof RPCTransportError) return createTunnelInterruptedError({
    reason: "transport_disposed",
    phase,
    admitted: "unknown",
    retryable: true
  });
  return null;
}
__name(translateTunnelInterruption, "translateTunnelInterruption");
var STORAGE_KEY = "tunnels";
var META_STORAGE_KEY = "tunnels:meta";
async function readMap(storage) {
  return await storage.get(STORAGE_KEY) ?? {};
}
__name(readMap, "readMap");
async function readMetaMap(storage) {
  return await storage.get(META_STORAGE_KEY) ?? {};
}
__name(readMetaMap, "readMetaMap");
function computeOptionsHash(options) {
  if (!options || !options.name) return "v1:quick";
  return `v1:named:${options.name}`;
}
__name(computeOptionsHash, "computeOptionsHash");
function normaliseHash(hash2) {
  return hash2.startsWith("v1:") ? hash2.slice(3) : hash2;
}
__name(normaliseHash, "normaliseHash");
function optionsHashesEqual(a, b) {
  return normaliseHash(a) === normaliseHash(b);
}
__name(optionsHashesEqual, "optionsHashesEqual");
async function pruneTunnelsForRestart(storage) {
  await storage.transaction(async (txn) => {
    const map = await readMap(txn);
    const meta = await readMetaMap(txn);
    const nextMap = {};
    const nextMeta = {};
    for (const [portKey, info] of Object.entries(map)) if (info.name) {
      nextMap[portKey] = info;
      nextMeta[portKey] = {
        ...meta[portKey] ?? { optionsHash: `v1:named:${info.name}` },
        needsRespawn: true
      };
    }
    await txn.put(STORAGE_KEY, nextMap);
    await txn.put(META_STORAGE_KEY, nextMeta);
  });
}
__name(pruneTunnelsForRestart, "pruneTunnelsForRestart");
function validateTunnelPort(port) {
  if (!validatePort(port)) throw new SandboxSecurityError(`Invalid port number: ${port}. Must be 1024-65535, excluding reserved ports.`);
}
__name(validateTunnelPort, "validateTunnelPort");
function shortId() {
  const buf = new Uint8Array(4);
  crypto.getRandomValues(buf);
  return Array.from(buf).map((b) => b.toString(16).padStart(2, "0")).join("");
}
__name(shortId, "shortId");
function hasErrorCode(error, code) {
  if (!error || typeof error !== "object") return false;
  const e = error;
  if (e.code === code) return true;
  if (e.errorResponse?.code === code) return true;
  return false;
}
__name(hasErrorCode, "hasErrorCode");
function isTunnelNotFoundError(error) {
  return hasErrorCode(error, "TUNNEL_NOT_FOUND");
}
__name(isTunnelNotFoundError, "isTunnelNotFoundError");
function isTunnelAlreadyRunningError(error) {
  return hasErrorCode(error, "TUNNEL_ALREADY_RUNNING");
}
__name(isTunnelAlreadyRunningError, "isTunnelAlreadyRunningError");
var TunnelsRpcTarget = class extends RpcTarget$1 {
  static {
    __name(this, "TunnelsRpcTarget");
  }
  #host;
  #withPortLock;
  /**
  * Memoised zone name (e.g. `'example.com'`) for the configured
  * `CLOUDFLARE_ZONE_ID`. Filled in lazily on the first named-tunnel
  * `get()` so quick-tunnel callers never hit the zone-lookup endpoint.
  *
  * Only successful resolutions are cached: a rejected lookup clears
  * the slot so the next caller retries, instead of permanently
  * poisoning every subsequent named-tunnel `get()` on the DO with the
  * same transient error.
  */
  #zoneNamePromise = null;
  constructor(host, withPortLock) {
    super();
    this.#host = host;
    this.#withPortLock = withPortLock;
  }
  /**
  * Resolve the zone name for the configured zone id. Memoised for the
  * lifetime of this handler; the zone name doesn't change while a DO
  * is alive, and one extra GET on first use is cheaper than threading
  * the value through the host.
  *
  * On failure the cached promise is cleared so the next caller retries.
  * Without that, a transient 5xx on the first call would permanently
  * poison every subsequent named-tunnel `get()` until the DO restarts.
  */
  async #getZoneName(config) {
    if (!this.#zoneNamePromise) {
      const pending = getZoneName({
        token: config.token,
        zoneId: config.zoneId,
        fetcher: this.#host.fetcher
      });
      this.#zoneNamePromise = pending;
      pending.catch(() => {
        if (this.#zoneNamePromise === pending) this.#zoneNamePromise = null;
      });
    }
    return this.#zoneNamePromise;
  }
  async get(port, options) {
    const startTime = Date.now();
    let outcome = "error";
    let cacheState = "miss";
    let caughtError;
    try {
      validateTunnelPort(port);
      if (options?.name !== void 0) validateTunnelName(options.name);
      const requestedHash = computeOptionsHash(options);
      const info = await this.#withPortLock(port, () => this.#getWithRecovery(port, options, async (recovery) => {
        const existing = (await readMap(this.#host.storage))[port.toString()];
        if (existing) {
          const metaEntry = (await readMetaMap(this.#host.storage))[port.toString()];
          if (!optionsHashesEqual(metaEntry?.optionsHash ?? (existing.name ? `v1:named:${existing.name}` : "v1:quick"), requestedHash)) throw new Error(`Tunnel on port ${port} was created with different options. Call destroy(${port}) before changing tunnel options.`);
          if (!existing.name && await this.#quickTunnelRecordIsStale(metaEntry)) {
            await this.#stopStaleQuickTunnel(existing, metaEntry);
            return await this.#provisionQuickTunnel(port, recovery);
          }
          if (metaEntry?.needsRespawn && existing.name) return await this.#provisionNamedTunnel(port, existing.name);
          if (existing.name && this.#host.getNamedTunnelConfig) {
            const currentConfig = await this.#host.getNamedTunnelConfig();
            const storedAccountId = metaEntry?.accountId;
            const storedZoneId = metaEntry?.zoneId;
            if (storedAccountId !== void 0 && storedAccountId !== currentConfig.accountId || storedZoneId !== void 0 && storedZoneId !== currentConfig.zoneId) {
              this.#zoneNamePromise = null;
              return await this.#provisionNamedTunnel(port, existing.name);
            }
          }
          cacheState = "hit";
          return existing;
        }
        if (options?.name) return await this.#provisionNamedTunnel(port, options.name);
        return await this.#provisionQuickTunnel(port, recovery);
      }));
      outcome = "success";
      return info;
    } catch (error) {
      caughtError = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      logCanonicalEvent(this.#host.logger, {
        event: "tunnel.get",
        outcome,
        port,
        cacheState,
        durationMs: Date.now() - startTime,
        error: caughtError
      });
    }
  }
  async #getWithRecovery(port, options, run) {
    let recoveryAttempts = 0;
    const recovery = {};
    while (true) try {
      return await run(recovery);
    } catch (error) {
      const interrupted = translateTunnelInterruption(error, "provisioning", "unknown");
      if (!interrupted || options?.name || !interrupted.context.retryable) throw error;
      if (recoveryAttempts >= TUNNEL_GET_MAX_RECOVERY_ATTEMPTS) {
        await this.#clearQuickTunnelStorage(port);
        throw createTunnelInterruptedError({
          reason: "recovery_exhausted",
          phase: "interrupted",
          admitted: interrupted.context.admitted,
          retryable: false,
          recoveryAttempts,
          maxRecoveryAttempts: TUNNEL_GET_MAX_RECOVERY_ATTEMPTS
        });
      }
      recoveryAttempts++;
      if (interrupted.context.reason === "runtime_replaced") recovery.quickRun = void 0;
      await this.#clearQuickTunnelStorage(port);
    }
  }
  async #clearQuickTunnelStorage(port) {
    await this.#host.storage.transaction(async (txn) => {
      const map = await readMap(txn);
      delete map[port.toString()];
      await txn.put(STORAGE_KEY, map);
      const meta = await readMetaMap(txn);
      delete meta[port.toString()];
      await txn.put(META_STORAGE_KEY, meta);
    });
  }
  async #quickTunnelRecordIsStale(metaEntry) {
    if (!this.#host.currentRuntime || !this.#host.currentLifetime) return false;
    if (!metaEntry?.runtimeIdentityID || !metaEntry.sandboxLifetimeID) return true;
    const runtime = await this.#host.currentRuntime.get();
    const lifetime = await this.#host.currentLifetime.getOrCreate();
    return runtime?.id !== metaEntry.runtimeIdentityID || lifetime.id !== metaEntry.sandboxLifetimeID;
  }
  async #stopStaleQuickTunnel(existing, metaEntry) {
    try {
      if (metaEntry?.tunnelRunId) await this.#host.client.tunnels.stopTunnelRun({
        tunnelId: existing.id,
        runId: metaEntry.tunnelRunId
      });
      else await this.#host.client.tunnels.destroyTunnel(existing.id);
    } catch (error) {
      if (!isTunnelNotFoundError(error)) throw error;
    }
  }
  /**
  * Provision a fresh quick tunnel and persist it. Caller holds the
  * per-port lock.
  *
  * Quick-tunnel ids are minted from a 32-bit random source. Collisions
  * are astronomically unlikely, but if the container happens to already
  * have one running under the freshly-minted id it rejects with
  * TUNNEL_ALREADY_RUNNING. Mint a fresh id and try again rather than
  * surfacing the confusing error — the retry budget caps the loop so a
  * persistent failure still surfaces.
  */
  async #provisionQuickTunnel(port, recovery) {
    if (this.#host.currentRuntime && this.#host.currentLifetime) return await this.#provisionQuickTunnelRun(port, recovery);
    const MAX_ID_RETRIES = 3;
    let lastError;
    for (let attempt = 0; attempt < MAX_ID_RETRIES; attempt += 1) {
      const id = `quick-${shortId()}`;
      try {
        const spawned = await this.#host.client.tunnels.runQuickTunnel(id, port);
        await this.#host.storage.transaction(async (txn) => {
          const nextMap = await readMap(txn);
          nextMap[port.toString()] = spawned;
          await txn.put(STORAGE_KEY, nextMap);
          const nextMeta = await readMetaMap(txn);
          nextMeta[port.toString()] = { optionsHash: "v1:quick" };
          await txn.put(META_STORAGE_KEY, nextMeta);
        });
        return spawned;
      } catch (err) {
        if (!isTunnelAlreadyRunningError(err)) throw err;
        lastError = err;
      }
    }
    throw lastError ?? /* @__PURE__ */ new Error("Failed to mint a unique quick-tunnel id");
  }
  async #provisionQuickTunnelRun(port, recovery) {
    if (!this.#host.currentRuntime || !this.#host.currentLifetime) throw new Error("Quick tunnel runtime fences are not configured");
    const lifetime = await this.#host.currentLifetime.getOrCreate();
    const runtimeBeforeAdmission = await this.#host.currentRuntime.get();
    try {
      await this.#host.currentLifetime.assertCurrent(lifetime);
    } catch (error) {
      throw translateTunnelInterruption(error, "runtime_ready", "unknown") ?? error;
    }
    recovery.quickRun ??= {
      tunnelId: `quick-${randomId()}`,
      runId: runtimeRunId()
    };
    const { tunnelId, runId } = recovery.quickRun;
    let ensureResult;
    let runtime = runtimeBeforeAdmission;
    try {
      ensureResult = await this.#host.client.tunnels.ensureTunnelRun({
        tunnelId,
        runId,
        mode: "quick",
        port
      });
      runtime ??= await this.#host.currentRuntime.get() ?? await this.#host.currentRuntime.markStarted();
      await this.#host.currentRuntime.assertActive(runtime);
      await this.#host.currentLifetime.assertCurrent(lifetime);
    } catch (error) {
      throw translateTunnelInterruption(error, "runtime_ready", "unknown") ?? error;
    }
    const { run } = ensureResult;
    if (!run.url || !run.hostname) throw new Error("Quick tunnel run did not produce a public URL");
    const spawned = {
      id: run.tunnelId,
      port: run.port,
      url: run.url,
      hostname: run.hostname,
      createdAt: run.startedAt
    };
    await this.#host.storage.transaction(async (txn) => {
      const nextMap = await readMap(txn);
      nextMap[port.toString()] = spawned;
      await txn.put(STORAGE_KEY, nextMap);
      const nextMeta = await readMetaMap(txn);
      nextMeta[port.toString()] = {
        optionsHash: "v1:quick",
        runtimeIdentityID: runtime.id,
        sandboxLifetimeID: lifetime.id,
        tunnelRunId: run.runId
      };
      await txn.put(META_STORAGE_KEY, nextMeta);
    });
    try {
      await this.#host.currentRuntime.assertActive(runtime);
      await this.#host.currentLifetime.assertCurrent(lifetime);
    } catch (error) {
      throw translateTunnelInterruption(error, "storage_committed", true) ?? error;
    }
    return spawned;
  }
  /**
  * Provision a named tunnel end-to-end:
  *   1. resolve credentials + zone name
  *   2. reuse or create the Cloudflare tunnel resource
  *   3. upsert the proxied CNAME (or reuse a matching one)
  *   4. spawn cloudflared inside the container
  *   5. persist the record + meta
  *
  * Failure between (2) and (5) intentionally leaves the Cloudflare-side
  * resources in place so a retry can re-discover them via
  * `findTunnelByName` and the DNS reuse path. See
  * `.plans/09-named-tunnel-api.md § Retry-friendly failure model`.
  */
  async #provisionNamedTunnel(port, name) {
    if (!this.#host.sandboxId) throw new Error("Named tunnels require host.sandboxId on the tunnels handler.");
    if (!this.#host.getNamedTunnelConfig) throw new Error("Named tunnels require host.getNamedTunnelConfig on the tunnels handler.");
    const config = await this.#host.getNamedTunnelConfig();
    const hostname = `${name}.${await this.#getZoneName({
      token: config.token,
      zoneId: config.zoneId
    })}`;
    const sandboxId = this.#host.sandboxId;
    const tunnelName = `sandbox-${sandboxId}-${name}`;
    let tunnelId;
    let tunnelToken;
    const existingTunnel = await findTunnelByName({
      token: config.token,
      accountId: config.accountId,
      tunnelName,
      expectedSandboxId: sandboxId,
      fetcher: this.#host.fetcher
    });
    if (existingTunnel) {
      tunnelId = existingTunnel.id;
      tunnelToken = await getTunnelToken({
        token: config.token,
        accountId: config.accountId,
        tunnelId,
        fetcher: this.#host.fetcher
      });
    } else {
      const created = await createTunnel({
        token: config.token,
        accountId: config.accountId,
        tunnelName,
        metadata: {
          sandboxId,
          createdBy: "sandbox-sdk",
          name,
          port
        },
        fetcher: this.#host.fetcher
      });
      tunnelId = created.id;
      tunnelToken = created.token;
    }
    const dnsResult = await upsertCNAME({
      token: config.token,
      zoneId: config.zoneId,
      hostname,
      cnameTarget: `${tunnelId}.cfargotunnel.com`,
      comment: `sandbox-${sandboxId}`,
      sandboxId,
      fetcher: this.#host.fetcher
    });
    await this.#host.client.tunnels.runNamedTunnel(tunnelId, tunnelToken, port);
    const info = {
      id: tunnelId,
      port,
      name,
      hostname,
      url: `https://${hostname}`,
      createdAt: (/* @__PURE__ */ new Date()).toISOString()
    };
    await this.#host.storage.transaction(async (txn) => {
      const nextMap = await readMap(txn);
      nextMap[port.toString()] = info;
      await txn.put(STORAGE_KEY, nextMap);
      const nextMeta = await readMetaMap(txn);
      nextMeta[port.toString()] = {
        optionsHash: computeOptionsHash({ name }),
        dnsRecordId: dnsResult.recordId,
        accountId: config.accountId,
        zoneId: config.zoneId
      };
      await txn.put(META_STORAGE_KEY, nextMeta);
    });
    return info;
  }
  async destroy(portOrInfo) {
    const port = typeof portOrInfo === "number" ? portOrInfo : portOrInfo.port;
    const startTime = Date.now();
    let outcome = "error";
    let caughtError;
    let tunnelId;
    try {
      await this.#withPortLock(port, async () => {
        const existing = (await readMap(this.#host.storage))[port.toString()];
        if (!existing) return;
        tunnelId = existing.id;
        const metaBefore = (await readMetaMap(this.#host.storage))[port.toString()];
        await this.#host.storage.transaction(async (txn) => {
          const current = await readMap(txn);
          delete current[port.toString()];
          await txn.put(STORAGE_KEY, current);
          const currentMeta = await readMetaMap(txn);
          delete currentMeta[port.toString()];
          await txn.put(META_STORAGE_KEY, currentMeta);
        });
        try {
          if (metaBefore?.tunnelRunId) await this.#host.client.tunnels.stopTunnelRun({
            tunnelId: existing.id,
            runId: metaBefore.tunnelRunId
          });
          else await this.#host.client.tunnels.destroyTunnel(existing.id);
        } catch (error) {
          if (isTunnelNotFoundError(error)) {
          } else if (metaBefore?.dnsRecordId) this.#host.logger.warn("tunnel.destroy: container tunnel cleanup failed", {
            port,
            tunnelId,
            error: error instanceof Error ? error.message : String(error)
          });
          else throw error;
        }
        if (!metaBefore?.dnsRecordId) return;
        if (!this.#host.getNamedTunnelConfig) return;
        let config;
        try {
          config = await this.#host.getNamedTunnelConfig();
        } catch (err) {
          this.#host.logger.warn("tunnel.destroy: skipping CF cleanup, credentials unavailable", {
            port,
            tunnelId,
            dnsRecordId: metaBefore.dnsRecordId,
            error: err instanceof Error ? err.message : String(err)
          });
          return;
        }
        const fetcher = this.#host.fetcher;
        const accountId = metaBefore.accountId ?? config.accountId;
        const zoneId = metaBefore.zoneId ?? config.zoneId;
        await Promise.allSettled([metaBefore.dnsRecordId ? deleteDNSRecord({
          token: config.token,
          zoneId,
          recordId: metaBefore.dnsRecordId,
          fetcher
        }).catch((err) => {
          this.#host.logger.warn("tunnel.destroy: dns delete failed", {
            port,
            tunnelId,
            recordId: metaBefore.dnsRecordId,
            zoneId,
            error: err instanceof Error ? err.message : String(err)
          });
        }) : Promise.resolve(), deleteTunnel({
          token: config.token,
          accountId,
          tunnelId: existing.id,
          fetcher
        }).catch((err) => {
          this.#host.logger.warn("tunnel.destroy: tunnel delete failed", {
            port,
            tunnelId,
            accountId,
            error: err instanceof Error ? err.message : String(err)
          });
        })]);
      });
      outcome = "success";
    } catch (error) {
      caughtError = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      logCanonicalEvent(this.#host.logger, {
        event: "tunnel.destroy",
        outcome,
        port,
        tunnelId,
        durationMs: Date.now() - startTime,
        error: caughtError
      });
    }
  }
  async list() {
    const map = await readMap(this.#host.storage);
    return Object.values(map);
  }
};
function createTunnelsHandler(host) {
  const portLocks = /* @__PURE__ */ new Map();
  const withPortLock = /* @__PURE__ */ __name((port, fn) => {
    const next = (portLocks.get(port) ?? Promise.resolve()).then(fn, fn);
    portLocks.set(port, next.catch(() => void 0));
    return next;
  }, "withPortLock");
  const tunnels = new TunnelsRpcTarget(host, withPortLock);
  const handleTunnelExit = /* @__PURE__ */ __name(async (id, port, exitCode, runId) => {
    const startTime = Date.now();
    let outcome = "error";
    let caughtError;
    try {
      await withPortLock(port, async () => {
        await host.storage.transaction(async (txn) => {
          const map = await readMap(txn);
          const existing = map[port.toString()];
          if (existing?.id !== id) return;
          const meta = await readMetaMap(txn);
          const metaEntry = meta[port.toString()];
          if (runId && metaEntry?.tunnelRunId && metaEntry.tunnelRunId !== runId) return;
          if (existing.name) {
            meta[port.toString()] = {
              ...metaEntry,
              optionsHash: metaEntry?.optionsHash ?? `v1:named:${existing.name}`,
              needsRespawn: true
            };
            await txn.put(META_STORAGE_KEY, meta);
            return;
          }
          delete map[port.toString()];
          await txn.put(STORAGE_KEY, map);
          delete meta[port.toString()];
          await txn.put(META_STORAGE_KEY, meta);
        });
      });
      outcome = "success";
    } catch (error) {
      caughtError = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      logCanonicalEvent(host.logger, {
        event: "tunnel.exit",
        outcome,
        port,
        tunnelId: id,
        exitCode: exitCode ?? void 0,
        durationMs: Date.now() - startTime,
        error: caughtError
      });
    }
  }, "handleTunnelExit");
  const destroyAll = /* @__PURE__ */ __name(async () => {
    const map = await readMap(host.storage);
    const ports = Object.keys(map).map((p) => Number(p));
    for (const port of ports) try {
      await tunnels.destroy(port);
    } catch (err) {
      host.logger.warn("tunnels.destroyAll: destroy(port) failed", {
        port,
        error: err instanceof Error ? err.message : String(err)
      });
    }
  }, "destroyAll");
  return {
    tunnels,
    handleTunnelExit,
    destroyAll
  };
}
__name(createTunnelsHandler, "createTunnelsHandler");
var SDK_VERSION = "0.12.10";
var PORT_TOKENS_STORAGE_KEY = "portTokens";
var ACTIVE_PREVIEW_PORTS_STORAGE_KEY = "activePreviewPorts";
var CONTAINER_PROXY_CLASS_NAME = "ContainerProxy";
var S3_CREDENTIAL_PROXY_HOST = "s3-credential-proxy.internal";
var S3_CREDENTIAL_PROXY_DIAGNOSTIC_HOST = "s3-credential-proxy.sandbox.test";
var ContainerProxyOutboundTarget = class extends Container {
  static {
    __name(this, "ContainerProxyOutboundTarget");
  }
};
Object.defineProperty(ContainerProxyOutboundTarget, "name", { value: CONTAINER_PROXY_CLASS_NAME });
ContainerProxyOutboundTarget.outboundHandlers = {
  r2EgressMount: r2EgressHandler,
  s3CredentialProxyMount: s3CredentialProxyHandler
};
function isFetcher(value) {
  return typeof value === "object" && value !== null && "fetch" in value && typeof value.fetch === "function";
}
__name(isFetcher, "isFetcher");
var sandboxConfigurationCache = /* @__PURE__ */ new WeakMap();
var R2_DEFAULT_S3FS_OPTIONS = {
  stat_cache_expire: "60",
  enable_noobj_cache: true,
  multipart_size: "5"
};
var R2_DEFAULT_S3FS_OPTION_ENTRIES = Object.entries(R2_DEFAULT_S3FS_OPTIONS).map(([key, value]) => value === true ? key : `${key}=${value}`);
var S3FS_DISABLE_EXPECT_HEADER_CONFIG = " Expect:\n";
var BACKUP_DEFAULT_TTL_SECONDS = 259200;
var RPC_START_INSTANCE_GET_TIMEOUT_MS = 8e3;
var BACKUP_MAX_NAME_LENGTH = 256;
var BACKUP_CONTAINER_DIR = "/var/backups";
var BACKUP_STORAGE_PREFIX = "backups";
var BACKUP_ARCHIVE_OBJECT_NAME = "data.sqsh";
var BACKUP_METADATA_OBJECT_NAME = "meta.json";
var BACKUP_DEFAULT_COMPRESSION = "lz4";
var BACKUP_DEFAULT_COMPRESS_THREADS = 8;
var BACKUP_MULTIPART_MIN_SIZE = 10 * 1024 * 1024;
var BACKUP_MULTIPART_TARGET_PARTS = 16;
var BACKUP_MULTIPART_MIN_PART_SIZE = 5 * 1024 * 1024;
var BACKUP_MULTIPART_MAX_PARTS = 64;
var BACKUP_DOWNLOAD_PARALLEL_PARTS = 8;
var BACKUP_DOWNLOAD_PARALLEL_MIN_SIZE = 10 * 1024 * 1024;
var BACKUP_DOWNLOAD_MAX_PARTS = 64;
function calculatePartCount(sizeBytes, defaultParts, maxParts) {
  if (sizeBytes < 100 * 1024 * 1024) return defaultParts;
  if (sizeBytes < 1024 * 1024 * 1024) return Math.min(32, defaultParts * 2);
  return maxParts;
}
__name(calculatePartCount, "calculatePartCount");
function sh(strings, ...values) {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += shellEscape(String(values[i])) + strings[i + 1];
  return out;
}
__name(sh, "sh");
function randomHex(bytes) {
  const buf = new Uint8Array(bytes);
  crypto.getRandomValues(buf);
  return Array.from(buf, (b) => b.toString(16).padStart(2, "0")).join("");
}
__name(randomHex, "randomHex");
function parseS3fsOptions(entries) {
  const result = {};
  for (const entry of entries) {
    const eq = entry.indexOf("=");
    if (eq === -1) result[entry] = true;
    else result[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return result;
}
__name(parseS3fsOptions, "parseS3fsOptions");
function serializeS3fsOptions(options) {
  return Object.entries(options).filter(([, v]) => v !== false).map(([k, v]) => v === true ? k : `${k}=${v}`).join(",");
}
__name(serializeS3fsOptions, "serializeS3fsOptions");
function getNamespaceConfigurationCache(namespace) {
  const existing = sandboxConfigurationCache.get(namespace);
  if (existing) return existing;
  const created = /* @__PURE__ */ new Map();
  sandboxConfigurationCache.set(namespace, created);
  return created;
}
__name(getNamespaceConfigurationCache, "getNamespaceConfigurationCache");
function sameContainerTimeouts(left, right) {
  return left?.instanceGetTimeoutMS === right?.instanceGetTimeoutMS && left?.portReadyTimeoutMS === right?.portReadyTimeoutMS && left?.waitIntervalMS === right?.waitIntervalMS;
}
__name(sameContainerTimeouts, "sameContainerTimeouts");
function sameLabels(left, right) {
  if (left === right) return true;
  if (!left || !right) return false;
  const leftEntries = Object.entries(left);
  const rightEntries = Object.entries(right);
  if (leftEntries.length !== rightEntries.length) return false;
  for (const [key, value] of leftEntries) if (right[key] !== value) return false;
  return true;
}
__name(sameLabels, "sameLabels");
function cloneLabels(labels) {
  return { ...labels };
}
__name(cloneLabels, "cloneLabels");
function buildSandboxConfiguration(effectiveId, options, cached) {
  const configuration = {};
  if (cached?.sandboxName !== effectiveId || cached.normalizeId !== options?.normalizeId) configuration.sandboxName = {
    name: effectiveId,
    normalizeId: options?.normalizeId
  };
  if (options?.sleepAfter !== void 0 && cached?.sleepAfter !== options.sleepAfter) configuration.sleepAfter = options.sleepAfter;
  if (options?.keepAlive !== void 0 && cached?.keepAlive !== options.keepAlive) configuration.keepAlive = options.keepAlive;
  if (options?.containerTimeouts && !sameContainerTimeouts(cached?.containerTimeouts, options.containerTimeouts)) configuration.containerTimeouts = options.containerTimeouts;
  if (options?.transport !== void 0 && cached?.transport !== options.transport) configuration.transport = options.transport;
  if (options?.labels !== void 0 && !sameLabels(cached?.labels, options.labels)) configuration.labels = cloneLabels(options.labels);
  return configuration;
}
__name(buildSandboxConfiguration, "buildSandboxConfiguration");
function hasSandboxConfiguration(configuration) {
  return configuration.sandboxName !== void 0 || configuration.sleepAfter !== void 0 || configuration.keepAlive !== void 0 || configuration.containerTimeouts !== void 0 || configuration.transport !== void 0 || configuration.labels !== void 0;
}
__name(hasSandboxConfiguration, "hasSandboxConfiguration");
function mergeSandboxConfiguration(cached, configuration) {
  return {
    ...cached,
    ...configuration.sandboxName && {
      sandboxName: configuration.sandboxName.name,
      normalizeId: configuration.sandboxName.normalizeId
    },
    ...configuration.sleepAfter !== void 0 && { sleepAfter: configuration.sleepAfter },
    ...configuration.keepAlive !== void 0 && { keepAlive: configuration.keepAlive },
    ...configuration.containerTimeouts !== void 0 && { containerTimeouts: configuration.containerTimeouts },
    ...configuration.transport !== void 0 && { transport: configuration.transport },
    ...configuration.labels !== void 0 && { labels: cloneLabels(configuration.labels) }
  };
}
__name(mergeSandboxConfiguration, "mergeSandboxConfiguration");
function applySandboxConfiguration(stub, configuration) {
  if (stub.configure) return stub.configure(configuration);
  const operations = [];
  if (configuration.sandboxName) operations.push(stub.setSandboxName?.(configuration.sandboxName.name, configuration.sandboxName.normalizeId) ?? Promise.resolve());
  if (configuration.sleepAfter !== void 0) operations.push(stub.setSleepAfter?.(configuration.sleepAfter) ?? Promise.resolve());
  if (configuration.keepAlive !== void 0) operations.push(stub.setKeepAlive?.(configuration.keepAlive) ?? Promise.resolve());
  if (configuration.containerTimeouts !== void 0) operations.push(stub.setContainerTimeouts?.(configuration.containerTimeouts) ?? Promise.resolve());
  if (configuration.transport !== void 0) operations.push(stub.setTransport?.(configuration.transport) ?? Promise.resolve());
  if (configuration.labels !== void 0) operations.push(stub.setLabels?.(configuration.labels) ?? Promise.resolve());
  return Promise.all(operations).then(() => void 0);
}
__name(applySandboxConfiguration, "applySandboxConfiguration");
function createPlatformInterruptedError(error, operation) {
  if (!isPlatformTransientError(error)) return null;
  const context = {
    reason: "runtime_replaced",
    operation,
    phase: "durable_object_call",
    admitted: "unknown",
    retryable: false
  };
  return new OperationInterruptedError({
    code: ErrorCode.OPERATION_INTERRUPTED,
    message: `Sandbox operation ${operation} was interrupted while the platform was updating the sandbox runtime`,
    context,
    httpStatus: getHttpStatus(ErrorCode.OPERATION_INTERRUPTED),
    suggestion: getSuggestion(ErrorCode.OPERATION_INTERRUPTED, context),
    timestamp: (/* @__PURE__ */ new Date()).toISOString()
  }, { cause: error });
}
__name(createPlatformInterruptedError, "createPlatformInterruptedError");
function translatePlatformInterruption(error, operation) {
  throw createPlatformInterruptedError(error, operation) ?? error;
}
__name(translatePlatformInterruption, "translatePlatformInterruption");
function withSandboxOperationContext(operation, fn) {
  return (...args) => {
    try {
      const result = fn(...args);
      if (result != null && typeof result.then === "function") return result.catch((error) => translatePlatformInterruption(error, operation));
      return result;
    } catch (error) {
      translatePlatformInterruption(error, operation);
    }
  };
}
__name(withSandboxOperationContext, "withSandboxOperationContext");
function getSandbox(ns, id, options) {
  const sanitizedId = sanitizeSandboxId(id);
  const effectiveId = options?.normalizeId ? sanitizedId.toLowerCase() : sanitizedId;
  const hasUppercase = /[A-Z]/.test(sanitizedId);
  if (!options?.normalizeId && hasUppercase) createLogger({ component: "sandbox-do" }).warn(`Sandbox ID "${sanitizedId}" contains uppercase letters, which causes issues with preview URLs (hostnames are case-insensitive). normalizeId will default to true in a future version to prevent this. Use lowercase IDs or pass { normalizeId: true } to prepare.`);
  const stub = getContainer(ns, effectiveId);
  const namespaceCache = getNamespaceConfigurationCache(ns);
  const cachedConfiguration = namespaceCache.get(effectiveId);
  const configuration = buildSandboxConfiguration(effectiveId, options, cachedConfiguration);
  if (hasSandboxConfiguration(configuration)) {
    const nextConfiguration = mergeSandboxConfiguration(cachedConfiguration, configuration);
    namespaceCache.set(effectiveId, nextConfiguration);
    applySandboxConfiguration(stub, configuration).catch(() => {
      if (cachedConfiguration) {
        namespaceCache.set(effectiveId, cachedConfiguration);
        return;
      }
      namespaceCache.delete(effectiveId);
    });
  }
  const defaultSessionId = `sandbox-${effectiveId}`;
  const useDefaultSession = options?.enableDefaultSession !== false;
  const enhancedMethods = {
    fetch: /* @__PURE__ */ __name((request) => stub.fetch(request), "fetch"),
    exec: /* @__PURE__ */ __name((command, execOptions) => useDefaultSession ? stub.exec(command, execOptions) : stub.execWithSessionToken(command, DISABLE_SESSION_TOKEN, execOptions), "exec"),
    startProcess: /* @__PURE__ */ __name((command, processOptions) => useDefaultSession || processOptions?.sessionId !== void 0 ? stub.startProcess(command, processOptions) : stub.startProcess(command, {
      ...processOptions,
      sessionId: DISABLE_SESSION_TOKEN
    }), "startProcess"),
    listProcesses: /* @__PURE__ */ __name((sessionId) => useDefaultSession || sessionId !== void 0 ? stub.listProcesses(sessionId) : stub.listProcesses(DISABLE_SESSION_TOKEN), "listProcesses"),
    getProcess: /* @__PURE__ */ __name((id$1, sessionId) => useDefaultSession || sessionId !== void 0 ? stub.getProcess(id$1, sessionId) : stub.getProcess(id$1, DISABLE_SESSION_TOKEN), "getProcess"),
    execStream: /* @__PURE__ */ __name((command, streamOptions) => {
      if (useDefaultSession || streamOptions?.sessionId !== void 0) return stub.execStream(command, streamOptions);
      return stub.execStreamWithSessionToken(command, DISABLE_SESSION_TOKEN, streamOptions);
    }, "execStream"),
    writeFile: /* @__PURE__ */ __name((path$1, content, fileOptions = {}) => useDefaultSession || fileOptions.sessionId !== void 0 ? stub.writeFile(path$1, content, fileOptions) : stub.writeFile(path$1, content, {
      ...fileOptions,
      sessionId: DISABLE_SESSION_TOKEN
    }), "writeFile"),
    readFile: /* @__PURE__ */ __name((path$1, fileOptions = {}) => {
      const options$1 = useDefaultSession || fileOptions.sessionId !== void 0 ? fileOptions : {
        ...fileOptions,
        sessionId: DISABLE_SESSION_TOKEN
      };
      if (options$1.encoding === "none") return stub.readFile(path$1, options$1);
      return stub.readFile(path$1, options$1);
    }, "readFile"),
    readFileStream: /* @__PURE__ */ __name((path$1, fileOptions = {}) => useDefaultSession || fileOptions.sessionId !== void 0 ? stub.readFileStream(path$1, fileOptions) : stub.readFileStream(path$1, { sessionId: DISABLE_SESSION_TOKEN }), "readFileStream"),
    mkdir: /* @__PURE__ */ __name((path$1, mkdirOptions = {}) => useDefaultSession || mkdirOptions.sessionId !== void 0 ? stub.mkdir(path$1, mkdirOptions) : stub.mkdir(path$1, {
      ...mkdirOptions,
      sessionId: DISABLE_SESSION_TOKEN
    }), "mkdir"),
    deleteFile: /* @__PURE__ */ __name((path$1) => useDefaultSession ? stub.deleteFile(path$1) : stub.deleteFile(path$1, DISABLE_SESSION_TOKEN), "deleteFile"),
    renameFile: /* @__PURE__ */ __name((oldPath, newPath) => useDefaultSession ? stub.renameFile(oldPath, newPath) : stub.renameFile(oldPath, newPath, DISABLE_SESSION_TOKEN), "renameFile"),
    moveFile: /* @__PURE__ */ __name((sourcePath, destinationPath) => useDefaultSession ? stub.moveFile(sourcePath, destinationPath) : stub.moveFile(sourcePath, destinationPath, DISABLE_SESSION_TOKEN), "moveFile"),
    listFiles: /* @__PURE__ */ __name((path$1, listOptions) => useDefaultSession || listOptions?.sessionId !== void 0 ? stub.listFiles(path$1, listOptions) : stub.listFiles(path$1, {
      ...listOptions,
      sessionId: DISABLE_SESSION_TOKEN
    }), "listFiles"),
    exists: /* @__PURE__ */ __name((path$1, sessionId) => useDefaultSession || sessionId !== void 0 ? stub.exists(path$1, sessionId) : stub.exists(path$1, DISABLE_SESSION_TOKEN), "exists"),
    gitCheckout: /* @__PURE__ */ __name((repoUrl, gitOptions) => useDefaultSession || gitOptions?.sessionId !== void 0 ? stub.gitCheckout(repoUrl, gitOptions) : stub.gitCheckout(repoUrl, {
      ...gitOptions,
      sessionId: DISABLE_SESSION_TOKEN
    }), "gitCheckout"),
    createSession: /* @__PURE__ */ __name(async (opts) => {
      return enhanceSession(stub, await stub.createSession(opts));
    }, "createSession"),
    getSession: /* @__PURE__ */ __name(async (sessionId) => {
      return enhanceSession(stub, await stub.getSession(sessionId));
    }, "getSession"),
    watch: /* @__PURE__ */ __name((path$1, options$1 = {}) => useDefaultSession || options$1.sessionId !== void 0 ? stub.watch(path$1, options$1) : stub.watch(path$1, {
      ...options$1,
      sessionId: DISABLE_SESSION_TOKEN
    }), "watch"),
    checkChanges: /* @__PURE__ */ __name((path$1, options$1 = {}) => useDefaultSession || options$1.sessionId !== void 0 ? stub.checkChanges(path$1, options$1) : stub.checkChanges(path$1, {
      ...options$1,
      sessionId: DISABLE_SESSION_TOKEN
    }), "checkChanges"),
    terminal: /* @__PURE__ */ __name((request, opts) => proxyTerminal(stub, defaultSessionId, request, opts), "terminal"),
    wsConnect: connect(stub),
    tunnels: new Proxy({}, { get: /* @__PURE__ */ __name((_, method) => {
      if (typeof method !== "string" || method === "then") return void 0;
      return withSandboxOperationContext(`sandbox.tunnels.${method}`, (...args) => stub.callTunnels(method, args));
    }, "get") })
  };
  return new Proxy(stub, { get(target, prop) {
    if (typeof prop === "string" && prop in enhancedMethods) {
      const method = enhancedMethods[prop];
      if (typeof method === "function") return withSandboxOperationContext(`sandbox.${prop}`, method);
      return method;
    }
    return target[prop];
  } });
}
__name(getSandbox, "getSandbox");
function enhanceSession(stub, rpcSession) {
  return {
    ...rpcSession,
    terminal: /* @__PURE__ */ __name((request, opts) => proxyTerminal(stub, rpcSession.id, request, opts), "terminal")
  };
}
__name(enhanceSession, "enhanceSession");
function connect(stub) {
  return async (request, port) => {
    if (!validatePort(port)) throw new SandboxSecurityError(`Invalid port number: ${port}. Must be 1024-65535, excluding 3000 (sandbox control plane).`);
    const portSwitchedRequest = switchPort(request, port);
    return await stub.fetch(portSwitchedRequest);
  };
}
__name(connect, "connect");
var Sandbox = class Sandbox2 extends Container {
  static {
    __name(this, "Sandbox");
  }
  defaultPort = 3e3;
  sleepAfter = "10m";
  client;
  codeInterpreter;
  sandboxName = null;
  tunnelsHandler = null;
  tunnelExitHandler = null;
  destroyAllTunnels = null;
  controlCallback;
  normalizeId = false;
  defaultSession = null;
  containerGeneration = 0;
  defaultSessionInit = null;
  envVars = {};
  logger;
  keepAliveEnabled = false;
  activeMounts = /* @__PURE__ */ new Map();
  mountOperationQueue = Promise.resolve();
  currentRuntime;
  currentLifetime;
  transport = "http";
  /**
  * True once transport has been written to storage at least once (either
  * via setTransport or restored on cold start). Gates the idempotency
  * check so a first explicit call persists even when the requested value
  * already equals the env-derived in-memory default.
  */
  hasStoredTransport = false;
  backupBucket = null;
  /**
  * Serializes backup operations to prevent concurrent create/restore on the same sandbox.
  *
  * This is in-memory state — it resets if the Durable Object is evicted and
  * re-instantiated (e.g. after sleep). This is acceptable because the container
  * filesystem is also lost on eviction, so there is no archive to race on.
  */
  backupInProgress = Promise.resolve();
  /**
  * R2 presigned URL credentials for direct container-to-R2 transfers.
  * All four fields plus the R2 binding must be configured for backup to work.
  */
  r2AccessKeyId = null;
  r2SecretAccessKey = null;
  r2AccountId = null;
  backupBucketName = null;
  backupBucketEndpoint = null;
  r2Client = null;
  /**
  * Lazily-resolved Cloudflare account id for named-tunnel provisioning.
  * Resolved on first access via `tunnels/credentials.ts` and cached for
  * the lifetime of this DO instance. See the credentials helper for
  * the precedence chain.
  */
  tunnelAccountIdPromise = null;
  /**
  * Lazily-resolved Cloudflare zone id for named-tunnel provisioning.
  * Falls back to the single zone the token can see under the resolved
  * account id when `CLOUDFLARE_ZONE_ID` is not set. Cached for the
  * lifetime of this DO instance.
  */
  tunnelZoneIdPromise = null;
  /**
  * Default container startup timeouts (conservative for production)
  * Based on Cloudflare docs: "Containers take several minutes to provision"
  */
  DEFAULT_CONTAINER_TIMEOUTS = {
    instanceGetTimeoutMS: 3e4,
    portReadyTimeoutMS: 9e4,
    waitIntervalMS: 300
  };
  /**
  * Active container timeout configuration
  * Can be set via options, env vars, or defaults
  */
  containerTimeouts = { ...this.DEFAULT_CONTAINER_TIMEOUTS };
  /**
  * True once containerTimeouts has been written to storage at least once
  * (either via setContainerTimeouts or restored on cold start). Gates the
  * idempotency check in setContainerTimeouts so a first explicit call
  * persists even when the requested values already equal the in-memory
  * defaults, distinguishing "user intent recorded" from "running on
  * env/SDK defaults".
  */
  hasStoredContainerTimeouts = false;
  /**
  * Dispatch method for tunnel operations.
  * Called by the client-side proxy created in getSandbox() to provide
  * the `sandbox.tunnels` API without relying on RPC pipelining
  * through property getters which is broken when using vite-plugin.
  */
  async callTunnels(method, args) {
    if (![
      "get",
      "list",
      "destroy"
    ].includes(method)) throw new Error(`Unknown tunnels method: ${method}`);
    const client = this.tunnels;
    const fn = client[method];
    if (typeof fn !== "function") throw new Error(`sandbox.tunnels missing method: ${method}`);
    return fn.apply(client, args);
  }
  /**
  * Compute the transport retry budget from current container timeouts.
  *
  * The budget covers the full container startup window (instance provisioning
  * + port readiness) plus a 30s margin for the maximum single backoff delay
  * (capped at 30s in BaseTransport). The 120s floor preserves the previous
  * default for short timeout configurations.
  */
  computeRetryTimeoutMs() {
    const startupBudgetMs = this.containerTimeouts.instanceGetTimeoutMS + this.containerTimeouts.portReadyTimeoutMS;
    return Math.max(12e4, startupBudgetMs + 3e4);
  }
  /**
  * Create the route-based compatibility client with current HTTP/WebSocket
  * transport settings.
  */
  createSandboxClient() {
    return new SandboxClient({
      logger: this.logger,
      port: 3e3,
      stub: this,
      retryTimeoutMs: this.computeRetryTimeoutMs(),
      defaultHeaders: { "X-Sandbox-Id": this.ctx.id.toString() },
      ...this.transport === "websocket" && {
        transportMode: "websocket",
        wsUrl: "ws://localhost:3000/ws"
      }
    });
  }
  /**
  * Create the appropriate client for the configured control path.
  *
  * `rpc` currently selects the primary container-control client. `http` and
  * `websocket` select the route-based compatibility client.
  */
  createClientForTransport(transport) {
    if (transport === "rpc") {
      const self = this;
      return new ContainerControlClient({
        stub: this,
        port: 3e3,
        logger: this.logger,
        retryTimeoutMs: this.computeRetryTimeoutMs(),
        getSandboxInfo: /* @__PURE__ */ __name(() => ({
          id: this.ctx.id.toString(),
          name: this.sandboxName ?? void 0
        }), "getSandboxInfo"),
        startContainer: /* @__PURE__ */ __name(() => this.startContainerForRPC(), "startContainer"),
        localMain: this.controlCallback,
        onActivity: /* @__PURE__ */ __name(() => {
          this.renewActivityTimeout();
        }, "onActivity"),
        onSessionBusy: /* @__PURE__ */ __name(() => {
          self.inflightRequests++;
        }, "onSessionBusy"),
        onSessionIdle: /* @__PURE__ */ __name(() => {
          self.inflightRequests = Math.max(0, self.inflightRequests - 1);
          if (self.inflightRequests === 0) this.renewActivityTimeout();
        }, "onSessionIdle")
      });
    }
    return this.createSandboxClient();
  }
  constructor(ctx, env$1) {
    super(ctx, env$1);
    const envObj = env$1;
    ["SANDBOX_LOG_LEVEL", "SANDBOX_LOG_FORMAT"].forEach((key) => {
      if (envObj?.[key]) this.envVars[key] = String(envObj[key]);
    });
    this.containerTimeouts = this.getDefaultTimeouts(envObj);
    this.logger = createLogger({
      component: "sandbox-do",
      sandboxId: this.ctx.id.toString()
    });
    this.currentRuntime = new CurrentRuntimeIdentity(this.ctx.storage, () => this.getState(), () => this.ctx.container?.running === true);
    this.currentLifetime = new CurrentSandboxLifetime(this.ctx.storage);
    const transportEnv = envObj?.SANDBOX_TRANSPORT;
    if (transportEnv === "websocket" || transportEnv === "rpc") this.transport = transportEnv;
    else if (transportEnv != null && transportEnv !== "http") this.logger.warn(`Invalid SANDBOX_TRANSPORT value: "${transportEnv}". Must be "http", "websocket", or "rpc". Defaulting to "http".`);
    this.logger.info(`Using ${this.transport} transport`);
    const backupBucket = envObj?.BACKUP_BUCKET;
    if (isR2Bucket(backupBucket)) this.backupBucket = backupBucket;
    this.r2AccountId = getEnvString(envObj, "CLOUDFLARE_R2_ACCOUNT_ID") ?? getEnvString(envObj, "CLOUDFLARE_ACCOUNT_ID") ?? null;
    this.r2AccessKeyId = getEnvString(envObj, "R2_ACCESS_KEY_ID") ?? null;
    this.r2SecretAccessKey = getEnvString(envObj, "R2_SECRET_ACCESS_KEY") ?? null;
    this.backupBucketName = getEnvString(envObj, "BACKUP_BUCKET_NAME") ?? null;
    const rawEndpoint = getEnvString(envObj, "BACKUP_BUCKET_ENDPOINT") ?? null;
    if (rawEndpoint !== null) {
      let parsed;
      try {
        parsed = new URL(rawEndpoint);
      } catch {
        const msg = `BACKUP_BUCKET_ENDPOINT is not a valid URL: "${rawEndpoint}". Expected format: https://<account_id>.eu.r2.cloudflarestorage.com`;
        throw new InvalidBackupConfigError({
          message: msg,
          code: ErrorCode.INVALID_BACKUP_CONFIG,
          httpStatus: 400,
          context: { reason: msg },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
      }
      if (parsed.protocol !== "https:") {
        const msg = `BACKUP_BUCKET_ENDPOINT must use https://, got "${parsed.protocol.slice(0, -1)}://"`;
        throw new InvalidBackupConfigError({
          message: msg,
          code: ErrorCode.INVALID_BACKUP_CONFIG,
          httpStatus: 400,
          context: { reason: msg },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
      }
      if (parsed.pathname !== "/") {
        const msg = `BACKUP_BUCKET_ENDPOINT must not include a path (got "${parsed.pathname}"). Provide only the origin, e.g. https://<account_id>.eu.r2.cloudflarestorage.com`;
        throw new InvalidBackupConfigError({
          message: msg,
          code: ErrorCode.INVALID_BACKUP_CONFIG,
          httpStatus: 400,
          context: { reason: msg },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
      }
      if (parsed.search !== "" || parsed.hash !== "") {
        const msg = "BACKUP_BUCKET_ENDPOINT must not include query parameters or fragments. Provide only the origin, e.g. https://<account_id>.eu.r2.cloudflarestorage.com";
        throw new InvalidBackupConfigError({
          message: msg,
          code: ErrorCode.INVALID_BACKUP_CONFIG,
          httpStatus: 400,
          context: { reason: msg },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
      }
      this.backupBucketEndpoint = parsed.origin;
    } else this.backupBucketEndpoint = null;
    if (this.r2AccessKeyId && this.r2SecretAccessKey) this.r2Client = new AwsClient({
      accessKeyId: this.r2AccessKeyId,
      secretAccessKey: this.r2SecretAccessKey
    });
    this.controlCallback = new SandboxControlCallbackImpl(() => this.tunnelExitHandler, this.logger);
    this.client = this.createClientForTransport(this.transport);
    this.codeInterpreter = new CodeInterpreter(() => this.client.interpreter);
    this.ctx.blockConcurrencyWhile(async () => {
      this.sandboxName = await this.ctx.storage.get("sandboxName") ?? null;
      this.normalizeId = await this.ctx.storage.get("normalizeId") ?? false;
      this.defaultSession = await this.ctx.storage.get("defaultSession") ?? null;
      this.keepAliveEnabled = await this.ctx.storage.get("keepAliveEnabled") ?? false;
      const storedTimeouts = await this.ctx.storage.get("containerTimeouts");
      if (storedTimeouts) {
        this.containerTimeouts = {
          ...this.containerTimeouts,
          ...storedTimeouts
        };
        this.hasStoredContainerTimeouts = true;
        this.client.setRetryTimeoutMs(this.computeRetryTimeoutMs());
      }
      const storedSleepAfter = await this.ctx.storage.get("sleepAfter");
      if (storedSleepAfter !== void 0) {
        this.sleepAfter = storedSleepAfter;
        this.renewActivityTimeout();
      }
      const storedTransport = await this.ctx.storage.get("transport");
      if (storedTransport && storedTransport !== this.transport) {
        this.transport = storedTransport;
        const previousClient = this.client;
        this.client = this.createClientForTransport(storedTransport);
        this.codeInterpreter = new CodeInterpreter(() => this.client.interpreter);
        this.tunnelsHandler = null;
        this.tunnelExitHandler = null;
        this.destroyAllTunnels = null;
        previousClient.disconnect(this.buildDisconnectCause("runtime_replaced", "The sandbox transport was switched while the operation was pending."));
      }
      if (storedTransport) this.hasStoredTransport = true;
      const storedLabels = await this.ctx.storage.get("labels");
      if (storedLabels !== void 0 && storedLabels !== null) this.labels = cloneLabels(storedLabels);
      if (this.interceptHttps) this.envVars = {
        ...this.envVars,
        SANDBOX_INTERCEPT_HTTPS: "1"
      };
    });
  }
  async setSandboxName(name, normalizeId) {
    if (this.sandboxName !== null) return;
    const effectiveNormalizeId = normalizeId ?? false;
    await Promise.all([this.ctx.storage.put("sandboxName", name), this.ctx.storage.put("normalizeId", effectiveNormalizeId)]);
    this.sandboxName = name;
    this.normalizeId = effectiveNormalizeId;
  }
  async configure(configuration) {
    if (configuration.sandboxName) await this.setSandboxName(configuration.sandboxName.name, configuration.sandboxName.normalizeId);
    if (configuration.sleepAfter !== void 0) await this.setSleepAfter(configuration.sleepAfter);
    if (configuration.keepAlive !== void 0) await this.setKeepAlive(configuration.keepAlive);
    if (configuration.containerTimeouts !== void 0) await this.setContainerTimeouts(configuration.containerTimeouts);
    if (configuration.transport !== void 0) await this.setTransport(configuration.transport);
    if (configuration.labels !== void 0) await this.setLabels(configuration.labels);
  }
  async setSleepAfter(sleepAfter) {
    if (this.sleepAfter === sleepAfter) return;
    await this.ctx.storage.put("sleepAfter", sleepAfter);
    this.sleepAfter = sleepAfter;
    this.renewActivityTimeout();
  }
  async setKeepAlive(keepAlive) {
    if (this.keepAliveEnabled === keepAlive) return;
    await this.ctx.storage.put("keepAliveEnabled", keepAlive);
    this.keepAliveEnabled = keepAlive;
    if (!keepAlive) this.renewActivityTimeout();
  }
  async setEnvVars(envVars) {
    const { toSet, toUnset } = partitionEnvVars(envVars);
    for (const key of toUnset) delete this.envVars[key];
    this.envVars = {
      ...this.envVars,
      ...toSet
    };
    if (this.defaultSession) {
      for (const key of toUnset) {
        const unsetCommand = `unset ${key}`;
        const result = await this.client.commands.execute(unsetCommand, this.defaultSession, { origin: "internal" });
        if (result.exitCode !== 0) throw new Error(`Failed to unset ${key}: ${result.stderr || "Unknown error"}`);
      }
      for (const [key, value] of Object.entries(toSet)) {
        const exportCommand = `export ${key}=${shellEscape(value)}`;
        const result = await this.client.commands.execute(exportCommand, this.defaultSession, { origin: "internal" });
        if (result.exitCode !== 0) throw new Error(`Failed to set ${key}: ${result.stderr || "Unknown error"}`);
      }
    }
  }
  async setContainerTimeouts(timeouts) {
    const validated = { ...this.containerTimeouts };
    if (timeouts.instanceGetTimeoutMS !== void 0) validated.instanceGetTimeoutMS = this.validateTimeout(timeouts.instanceGetTimeoutMS, "instanceGetTimeoutMS", 5e3, 3e5);
    if (timeouts.portReadyTimeoutMS !== void 0) validated.portReadyTimeoutMS = this.validateTimeout(timeouts.portReadyTimeoutMS, "portReadyTimeoutMS", 1e4, 6e5);
    if (timeouts.waitIntervalMS !== void 0) validated.waitIntervalMS = this.validateTimeout(timeouts.waitIntervalMS, "waitIntervalMS", 100, 5e3);
    if (this.hasStoredContainerTimeouts && validated.instanceGetTimeoutMS === this.containerTimeouts.instanceGetTimeoutMS && validated.portReadyTimeoutMS === this.containerTimeouts.portReadyTimeoutMS && validated.waitIntervalMS === this.containerTimeouts.waitIntervalMS) return;
    await this.ctx.storage.put("containerTimeouts", validated);
    this.containerTimeouts = validated;
    this.hasStoredContainerTimeouts = true;
    this.client.setRetryTimeoutMs(this.computeRetryTimeoutMs());
    this.logger.debug("Container timeouts updated", this.containerTimeouts);
  }
  async setTransport(transport) {
    if (transport !== "http" && transport !== "websocket" && transport !== "rpc") {
      this.logger.warn(`Invalid transport value: "${transport}". Must be "http", "websocket", or "rpc". Ignoring.`);
      return;
    }
    if (this.hasStoredTransport && this.transport === transport) return;
    await this.ctx.storage.put("transport", transport);
    const previousClient = this.client;
    this.transport = transport;
    this.hasStoredTransport = true;
    this.client = this.createClientForTransport(transport);
    this.codeInterpreter = new CodeInterpreter(() => this.client.interpreter);
    this.tunnelsHandler = null;
    this.tunnelExitHandler = null;
    this.destroyAllTunnels = null;
    previousClient.disconnect(this.buildDisconnectCause("runtime_replaced", "The sandbox transport was switched while the operation was pending."));
    this.renewActivityTimeout();
    this.logger.debug("Transport updated", { transport });
  }
  async setLabels(labels) {
    const nextLabels = cloneLabels(labels);
    if (sameLabels(this.labels, nextLabels)) return;
    await this.ctx.storage.put("labels", nextLabels);
    this.labels = nextLabels;
    if (this.ctx.container?.running === true) this.logger.warn("Container labels updated while container is running; new labels apply on the next container start");
  }
  validateTimeout(value, name, min, max) {
    if (typeof value !== "number" || Number.isNaN(value) || !Number.isFinite(value)) throw new Error(`${name} must be a valid finite number, got ${value}`);
    if (value < min || value > max) throw new Error(`${name} must be between ${min}-${max}ms, got ${value}ms`);
    return value;
  }
  getDefaultTimeouts(env$1) {
    const parseAndValidate = /* @__PURE__ */ __name((envVar, name, min, max) => {
      const defaultValue = this.DEFAULT_CONTAINER_TIMEOUTS[name];
      if (envVar === void 0) return defaultValue;
      const parsed = parseInt(envVar, 10);
      if (Number.isNaN(parsed)) {
        this.logger.warn(`Invalid ${name}: "${envVar}" is not a number. Using default: ${defaultValue}ms`);
        return defaultValue;
      }
      if (parsed < min || parsed > max) {
        this.logger.warn(`Invalid ${name}: ${parsed}ms. Must be ${min}-${max}ms. Using default: ${defaultValue}ms`);
        return defaultValue;
      }
      return parsed;
    }, "parseAndValidate");
    return {
      instanceGetTimeoutMS: parseAndValidate(getEnvString(env$1, "SANDBOX_INSTANCE_TIMEOUT_MS"), "instanceGetTimeoutMS", 5e3, 3e5),
      portReadyTimeoutMS: parseAndValidate(getEnvString(env$1, "SANDBOX_PORT_TIMEOUT_MS"), "portReadyTimeoutMS", 1e4, 6e5),
      waitIntervalMS: parseAndValidate(getEnvString(env$1, "SANDBOX_POLL_INTERVAL_MS"), "waitIntervalMS", 100, 5e3)
    };
  }
  /**
  * Mount an S3-compatible bucket as a local directory.
  *
  * Requires explicit endpoint URL for production. Credentials are auto-detected from environment
  * variables or can be provided explicitly.
  *
  * @param bucket - Bucket name (or R2 binding name when localBucket is true)
  * @param mountPath - Absolute path in container to mount at
  * @param options - Mount configuration
  * @throws MissingCredentialsError if no credentials found in environment
  * @throws S3FSMountError if S3FS mount command fails
  * @throws InvalidMountConfigError if bucket name, mount path, or endpoint is invalid
  */
  async mountBucket(bucket, mountPath, options) {
    return this.runMountOperation(async () => {
      await this.mountBucketUnlocked(bucket, mountPath, options);
    });
  }
  async runMountOperation(operation) {
    const previous = this.mountOperationQueue;
    let release;
    this.mountOperationQueue = new Promise((resolve) => {
      release = resolve;
    });
    await previous.catch(() => {
    });
    try {
      await operation();
    } finally {
      release();
    }
  }
  async mountBucketUnlocked(bucket, mountPath, options) {
    if (options.prefix !== void 0) validatePrefix(options.prefix);
    if ("localBucket" in options && options.localBucket) {
      await this.mountBucketLocal(bucket, mountPath, options);
      return;
    }
    const remoteOptions = options;
    if (remoteOptions.endpoint === void 0) {
      const binding = this.env[bucket];
      if (isR2Bucket(binding)) {
        await this.mountBucketR2Egress(bucket, mountPath, options);
        return;
      }
      throw new InvalidMountConfigError(`R2 binding "${bucket}" not found in Worker env. Ensure the binding name matches the bucket binding configured in wrangler.jsonc.`);
    }
    await this.mountBucketFuse(bucket, mountPath, remoteOptions);
  }
  /**
  * Local dev mount: bidirectional sync via R2 binding + file/watch APIs
  */
  async mountBucketLocal(bucket, mountPath, options) {
    const mountStartTime = Date.now();
    let mountOutcome = "error";
    let mountError;
    try {
      const r2Binding = this.env[bucket];
      if (!r2Binding || !isR2Bucket(r2Binding)) throw new InvalidMountConfigError(`R2 binding "${bucket}" not found in env or is not an R2Bucket. Make sure the binding name matches your wrangler.jsonc R2 binding.`);
      if (!mountPath || !mountPath.startsWith("/")) throw new InvalidMountConfigError(`Invalid mount path: "${mountPath}". Must be an absolute path starting with /`);
      if (this.activeMounts.has(mountPath)) throw new InvalidMountConfigError(`Mount path already in use: ${mountPath}`);
      const sessionId = await this.ensureDefaultSession();
      const syncManager = new LocalMountSyncManager({
        bucket: r2Binding,
        mountPath,
        prefix: options.prefix,
        readOnly: options.readOnly ?? false,
        client: this.client,
        sessionId,
        logger: this.logger
      });
      const mountInfo = {
        mountId: crypto.randomUUID(),
        mountType: "local-sync",
        bucket,
        mountPath,
        syncManager,
        mounted: false
      };
      this.activeMounts.set(mountPath, mountInfo);
      try {
        await syncManager.start();
        mountInfo.mounted = true;
      } catch (error) {
        await syncManager.stop();
        this.activeMounts.delete(mountPath);
        throw error;
      }
      mountOutcome = "success";
    } catch (error) {
      mountError = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      logCanonicalEvent(this.logger, {
        event: "bucket.mount",
        outcome: mountOutcome,
        durationMs: Date.now() - mountStartTime,
        bucket,
        mountPath,
        provider: "local-sync",
        prefix: options.prefix,
        error: mountError
      });
    }
  }
  getR2EgressParams() {
    const buckets = {};
    for (const [, m] of this.activeMounts) if (m.mountType === "r2-egress") buckets[m.bucket] = {
      prefix: m.prefix,
      readOnly: m.readOnly
    };
    return { buckets };
  }
  validateProtectedS3fsOptions(options, mountLabel, extraProtected = []) {
    if (!options) return;
    const protectedOptions = /* @__PURE__ */ new Set([
      "passwd_file",
      "url",
      ...extraProtected
    ]);
    for (const option of options) {
      const [key] = option.split("=");
      if (protectedOptions.has(key)) throw new InvalidMountConfigError(`s3fs option "${key}" cannot be overridden for ${mountLabel} mounts`);
    }
  }
  getS3CredentialProxyParams(options) {
    const mounts = {};
    for (const [, m] of this.activeMounts) if (m.mountType === "fuse" && m.credentialProxy) {
      if (m.mountId === options?.excludeMountId) continue;
      mounts[m.mountId] = {
        endpoint: m.credentialProxy.endpoint,
        bucket: m.credentialProxy.bucket,
        ...m.credentialProxy.prefix !== void 0 ? { prefix: m.credentialProxy.prefix } : {},
        credentials: m.credentialProxy.credentials,
        readOnly: m.credentialProxy.readOnly,
        provider: m.credentialProxy.provider,
        authStrategy: m.credentialProxy.authStrategy
      };
    }
    return { mounts };
  }
  resolveCredentialProxyAuthStrategy(provider) {
    return provider === "gcs" ? "gcs" : "s3-sigv4";
  }
  /**
  * Credential-less R2 mount: egress interception routes s3fs requests to the
  * R2 binding. No S3 credentials are needed in the container or Worker env.
  */
  async mountBucketR2Egress(bucket, mountPath, options) {
    const mountStartTime = Date.now();
    const prefix = options.prefix;
    let mountOutcome = "error";
    let mountError;
    let passwordFilePath;
    let additionalHeaderFilePath;
    try {
      validateBucketBindingName(bucket, mountPath);
      this.validateMountPath(mountPath);
      this.validateProtectedS3fsOptions(options.s3fsOptions, "R2 binding");
      for (const [existingMountPath, mountInfo$1] of this.activeMounts) {
        if (mountInfo$1.mountType === "r2-egress" && mountInfo$1.bucket === bucket && mountInfo$1.prefix !== prefix) throw new InvalidMountConfigError(`R2 binding "${bucket}" is already mounted at ${existingMountPath} with a different prefix. Mount the same binding only once, or use the same prefix for additional mounts.`);
        if (mountInfo$1.mountType === "r2-egress" && mountInfo$1.bucket === bucket && mountInfo$1.readOnly !== (options.readOnly ?? false)) throw new InvalidMountConfigError(`R2 binding "${bucket}" is already mounted at ${existingMountPath} with a different readOnly setting. Mount the same binding only once, or use the same readOnly value for additional mounts.`);
      }
      passwordFilePath = this.generatePasswordFilePath();
      additionalHeaderFilePath = this.generateS3FSAdditionalHeaderFilePath();
      await this.createPasswordFile(passwordFilePath, bucket, {
        accessKeyId: "x",
        secretAccessKey: "x"
      });
      await this.createDisableExpectHeaderFile(additionalHeaderFilePath);
      const mountInfo = {
        mountId: crypto.randomUUID(),
        mountType: "r2-egress",
        bucket,
        mountPath,
        passwordFilePath,
        additionalHeaderFilePath,
        mounted: false,
        prefix,
        readOnly: options.readOnly ?? false
      };
      this.activeMounts.set(mountPath, mountInfo);
      await this.configureR2EgressOutbound(this.getR2EgressParams());
      await this.execInternal(`mkdir -p ${shellEscape(mountPath)}`);
      const s3fsSource = bucket;
      const optionsStr = shellEscape(serializeS3fsOptions({
        passwd_file: passwordFilePath,
        ...R2_DEFAULT_S3FS_OPTIONS,
        ...parseS3fsOptions(resolveS3fsOptions("r2", options.s3fsOptions)),
        use_path_request_style: true,
        url: "http://r2.internal",
        ahbe_conf: additionalHeaderFilePath,
        ...options.readOnly ? { ro: true } : {}
      }));
      const mountCmd = `s3fs ${shellEscape(s3fsSource)} ${shellEscape(mountPath)} -o ${optionsStr}`;
      this.logger.debug("r2-egress: running s3fs", { mountCmd });
      const result = await this.execInternal(mountCmd);
      this.logger.debug("r2-egress: s3fs exited", {
        exitCode: result.exitCode,
        stdout: result.stdout,
        stderr: result.stderr
      });
      if (result.exitCode !== 0) throw new S3FSMountError(`S3FS mount failed: ${result.stderr || result.stdout || "Unknown error"}`);
      const mountpointCheck = await this.execInternal(`mountpoint -q ${shellEscape(mountPath)} && echo 'FUSE_MOUNTED' || echo 'NOT_FUSE_MOUNTED'`);
      this.logger.debug("r2-egress: mountpoint check", {
        stdout: mountpointCheck.stdout.trim(),
        exitCode: mountpointCheck.exitCode
      });
      if (mountpointCheck.stdout.trim() !== "FUSE_MOUNTED") throw new S3FSMountError(`s3fs exited 0 but mount was not established at ${mountPath}`);
      mountInfo.mounted = true;
      mountOutcome = "success";
    } catch (error) {
      mountError = error instanceof Error ? error : new Error(String(error));
      const failedMount = this.activeMounts.get(mountPath);
      this.activeMounts.delete(mountPath);
      if (failedMount?.mountType === "r2-egress") {
        await this.deletePasswordFile(failedMount.passwordFilePath).catch(() => {
        });
        if (failedMount.additionalHeaderFilePath) await this.deleteAdditionalHeaderFile(failedMount.additionalHeaderFilePath).catch(() => {
        });
      } else {
        if (passwordFilePath) await this.deletePasswordFile(passwordFilePath).catch(() => {
        });
        if (additionalHeaderFilePath) await this.deleteAdditionalHeaderFile(additionalHeaderFilePath).catch(() => {
        });
      }
      const remainingParams = this.getR2EgressParams();
      await this.configureR2EgressOutbound(remainingParams).catch(() => {
      });
      throw error;
    } finally {
      logCanonicalEvent(this.logger, {
        event: "bucket.mount",
        outcome: mountOutcome,
        durationMs: Date.now() - mountStartTime,
        bucket,
        mountPath,
        provider: "r2",
        prefix,
        error: mountError
      });
    }
  }
  /**
  * Production mount: S3FS-FUSE inside the container
  */
  async mountBucketFuse(bucket, mountPath, options) {
    const mountStartTime = Date.now();
    const prefix = options.prefix;
    let mountOutcome = "error";
    let mountError;
    let passwordFilePath;
    let additionalHeaderFilePath;
    let provider = null;
    let dirExisted = true;
    try {
      this.validateMountOptions(bucket, mountPath, {
        ...options,
        prefix
      });
      const s3fsSource = buildS3fsSource(bucket, prefix);
      provider = options.provider || detectProviderFromUrl(options.endpoint);
      this.logger.debug(`Detected provider: ${provider || "unknown"}`, {
        explicitProvider: options.provider,
        prefix
      });
      const envObj = this.env;
      const credentials = detectCredentials(options, {
        AWS_ACCESS_KEY_ID: getEnvString(envObj, "AWS_ACCESS_KEY_ID"),
        AWS_SECRET_ACCESS_KEY: getEnvString(envObj, "AWS_SECRET_ACCESS_KEY"),
        R2_ACCESS_KEY_ID: this.r2AccessKeyId || void 0,
        R2_SECRET_ACCESS_KEY: this.r2SecretAccessKey || void 0,
        ...this.envVars
      });
      const credentialProxyEnabled = options.credentialProxy === true;
      if (credentialProxyEnabled) this.validateProtectedS3fsOptions(options.s3fsOptions, "credential proxy", ["ahbe_conf", "use_path_request_style"]);
      passwordFilePath = this.generatePasswordFilePath();
      if (credentialProxyEnabled) additionalHeaderFilePath = this.generateS3FSAdditionalHeaderFilePath();
      const mountId = crypto.randomUUID();
      const mountInfo = {
        mountId,
        mountType: "fuse",
        bucket: s3fsSource,
        mountPath,
        endpoint: options.endpoint,
        provider,
        passwordFilePath,
        ...additionalHeaderFilePath ? { additionalHeaderFilePath } : {},
        mounted: false,
        ...credentialProxyEnabled ? { credentialProxy: {
          endpoint: options.endpoint,
          bucket,
          ...prefix !== void 0 ? { prefix } : {},
          credentials,
          readOnly: options.readOnly ?? false,
          provider,
          authStrategy: this.resolveCredentialProxyAuthStrategy(provider)
        } } : {}
      };
      this.activeMounts.set(mountPath, mountInfo);
      await this.createPasswordFile(passwordFilePath, bucket, credentialProxyEnabled ? {
        accessKeyId: "x",
        secretAccessKey: "x"
      } : credentials);
      if (credentialProxyEnabled) {
        if (additionalHeaderFilePath) await this.createDisableExpectHeaderFile(additionalHeaderFilePath);
        await this.configureS3CredentialProxyOutbound(this.getS3CredentialProxyParams());
      }
      dirExisted = (await this.execInternal(`test -d ${shellEscape(mountPath)}`)).exitCode === 0;
      await this.execInternal(`mkdir -p ${shellEscape(mountPath)}`);
      const effectiveOptions = credentialProxyEnabled ? {
        ...options,
        endpoint: `http://${S3_CREDENTIAL_PROXY_HOST}/${mountId}`,
        s3fsOptions: [
          ...provider === "r2" ? R2_DEFAULT_S3FS_OPTION_ENTRIES : [],
          ...options.s3fsOptions ?? [],
          ...additionalHeaderFilePath ? [`ahbe_conf=${additionalHeaderFilePath}`] : [],
          "use_path_request_style"
        ]
      } : options;
      await this.executeS3FSMount(s3fsSource, mountPath, effectiveOptions, provider, passwordFilePath);
      mountInfo.mounted = true;
      mountOutcome = "success";
    } catch (error) {
      mountError = error instanceof Error ? error : new Error(String(error));
      try {
        await this.execInternal(`mountpoint -q ${shellEscape(mountPath)} && fusermount -u ${shellEscape(mountPath)}`);
      } catch {
      }
      if (passwordFilePath) await this.deletePasswordFile(passwordFilePath);
      if (additionalHeaderFilePath) await this.deleteAdditionalHeaderFile(additionalHeaderFilePath);
      if (!dirExisted) try {
        await this.execInternal(`rmdir ${shellEscape(mountPath)} 2>/dev/null`);
      } catch {
      }
      const failedMount = this.activeMounts.get(mountPath);
      if (failedMount?.mountType === "fuse" && failedMount.credentialProxy) try {
        await this.configureS3CredentialProxyOutbound(this.getS3CredentialProxyParams({ excludeMountId: failedMount.mountId }));
        this.activeMounts.delete(mountPath);
        evictSigV4ClientCacheEntry(failedMount.mountId);
        evictDirectoryMarkerCacheForMount(failedMount.mountId);
      } catch (cleanupError) {
        this.logger.warn("credential proxy cleanup failed", {
          mountPath,
          error: cleanupError instanceof Error ? cleanupError.message : String(cleanupError)
        });
        this.activeMounts.delete(mountPath);
        evictSigV4ClientCacheEntry(failedMount.mountId);
        evictDirectoryMarkerCacheForMount(failedMount.mountId);
      }
      else this.activeMounts.delete(mountPath);
      throw error;
    } finally {
      logCanonicalEvent(this.logger, {
        event: "bucket.mount",
        outcome: mountOutcome,
        durationMs: Date.now() - mountStartTime,
        bucket,
        mountPath,
        provider: provider || "unknown",
        prefix,
        error: mountError
      });
    }
  }
  /**
  * Manually unmount a bucket filesystem
  *
  * @param mountPath - Absolute path where the bucket is mounted
  * @throws InvalidMountConfigError if mount path doesn't exist or isn't mounted
  */
  async unmountBucket(mountPath) {
    return this.runMountOperation(async () => {
      await this.unmountBucketUnlocked(mountPath);
    });
  }
  async unmountBucketUnlocked(mountPath) {
    const unmountStartTime = Date.now();
    let unmountOutcome = "error";
    let unmountError;
    const mountInfo = this.activeMounts.get(mountPath);
    try {
      if (!mountInfo) throw new InvalidMountConfigError(`No active mount found at path: ${mountPath}`);
      if (mountInfo.mountType === "local-sync") {
        await mountInfo.syncManager.stop();
        mountInfo.mounted = false;
        this.activeMounts.delete(mountPath);
      } else if (mountInfo.mountType === "fuse" && mountInfo.credentialProxy && !mountInfo.mounted) {
        try {
          await this.configureS3CredentialProxyOutbound(this.getS3CredentialProxyParams({ excludeMountId: mountInfo.mountId }));
        } catch (cleanupError) {
          this.logger.warn("credential proxy outbound reconfiguration failed on unmount", {
            mountPath,
            error: cleanupError instanceof Error ? cleanupError.message : String(cleanupError)
          });
        }
        this.activeMounts.delete(mountPath);
        evictSigV4ClientCacheEntry(mountInfo.mountId);
        evictDirectoryMarkerCacheForMount(mountInfo.mountId);
      } else {
        let unmounted = false;
        try {
          const result = await this.execInternal(`fusermount -u ${shellEscape(mountPath)}`);
          if (result.exitCode !== 0) {
            const stderr = result.stderr || "unknown error";
            throw new BucketUnmountError(`fusermount -u failed (exit ${result.exitCode}): ${stderr}`);
          }
          unmounted = true;
          mountInfo.mounted = false;
          if (mountInfo.mountType === "r2-egress") {
            const remainingBuckets = {};
            for (const [, activeMount] of this.activeMounts) if (activeMount.mountType === "r2-egress" && activeMount.mountId !== mountInfo.mountId) remainingBuckets[activeMount.bucket] = {
              prefix: activeMount.prefix,
              readOnly: activeMount.readOnly
            };
            try {
              await this.configureR2EgressOutbound({ buckets: remainingBuckets });
            } catch (cleanupError) {
              this.logger.warn("r2 egress outbound reconfiguration failed on unmount", {
                mountPath,
                error: cleanupError instanceof Error ? cleanupError.message : String(cleanupError)
              });
            }
            this.activeMounts.delete(mountPath);
          } else if (mountInfo.mountType === "fuse" && mountInfo.credentialProxy) {
            try {
              await this.configureS3CredentialProxyOutbound(this.getS3CredentialProxyParams({ excludeMountId: mountInfo.mountId }));
            } catch (cleanupError) {
              this.logger.warn("credential proxy outbound reconfiguration failed on unmount", {
                mountPath,
                error: cleanupError instanceof Error ? cleanupError.message : String(cleanupError)
              });
            }
            this.activeMounts.delete(mountPath);
            evictSigV4ClientCacheEntry(mountInfo.mountId);
            evictDirectoryMarkerCacheForMount(mountInfo.mountId);
          } else this.activeMounts.delete(mountPath);
          try {
            const cleanup = await this.execInternal(`mountpoint -q ${shellEscape(mountPath)} || rmdir ${shellEscape(mountPath)}`);
            if (cleanup.exitCode !== 0) this.logger.warn("mount directory removal failed", {
              mountPath,
              exitCode: cleanup.exitCode,
              stderr: cleanup.stderr
            });
          } catch (err) {
            this.logger.warn("mount directory removal failed", {
              mountPath,
              error: err instanceof Error ? err.message : String(err)
            });
          }
        } finally {
          if (unmounted) {
            await this.deletePasswordFile(mountInfo.passwordFilePath);
            if (mountInfo.additionalHeaderFilePath) await this.deleteAdditionalHeaderFile(mountInfo.additionalHeaderFilePath);
          }
        }
      }
      unmountOutcome = "success";
    } catch (error) {
      unmountError = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      logCanonicalEvent(this.logger, {
        event: "bucket.unmount",
        outcome: unmountOutcome,
        durationMs: Date.now() - unmountStartTime,
        mountPath,
        bucket: mountInfo?.bucket,
        error: unmountError
      });
    }
  }
  /**
  * Shared validation for mount path (absolute, not already in use).
  */
  validateMountPath(mountPath) {
    if (!mountPath.startsWith("/")) throw new InvalidMountConfigError(`Mount path must be absolute (start with /): "${mountPath}"`);
    if (this.activeMounts.has(mountPath)) throw new InvalidMountConfigError(`Mount path "${mountPath}" is already in use by bucket "${this.activeMounts.get(mountPath)?.bucket}". Unmount the existing bucket first or use a different mount path.`);
  }
  /**
  * Validate mount options for remote (FUSE) mounts
  */
  validateMountOptions(bucket, mountPath, options) {
    try {
      new URL(options.endpoint);
    } catch (error) {
      throw new InvalidMountConfigError(`Invalid endpoint URL: "${options.endpoint}". Must be a valid HTTP(S) URL.`);
    }
    validateBucketName(bucket, mountPath);
    this.validateMountPath(mountPath);
  }
  /**
  * Generate unique password file path for s3fs credentials
  */
  generatePasswordFilePath() {
    return `/tmp/.passwd-s3fs-${crypto.randomUUID()}`;
  }
  /**
  * Generate unique ahbe_conf file path for s3fs additional header config
  */
  generateS3FSAdditionalHeaderFilePath() {
    return `/tmp/.s3fs-ahbe-${crypto.randomUUID()}.conf`;
  }
  /**
  * Create s3fs ahbe_conf file that suppresses the Expect: 100-continue header.
  * Restricted to 0600 so s3fs will accept it (same requirement as passwd files).
  */
  async createDisableExpectHeaderFile(headerFilePath) {
    await this.client.files.writeFile(headerFilePath, S3FS_DISABLE_EXPECT_HEADER_CONFIG, DISABLE_SESSION_TOKEN);
    await this.execInternal(`chmod 0600 ${shellEscape(headerFilePath)}`);
  }
  /**
  * Create password file with s3fs credentials
  * Format: bucket:accessKeyId:secretAccessKey
  */
  async createPasswordFile(passwordFilePath, bucket, credentials) {
    const content = `${bucket}:${credentials.accessKeyId}:${credentials.secretAccessKey}`;
    await this.client.files.writeFile(passwordFilePath, content, DISABLE_SESSION_TOKEN);
    await this.execInternal(`chmod 0600 ${shellEscape(passwordFilePath)}`);
  }
  /**
  * Delete password file
  */
  async deletePasswordFile(passwordFilePath) {
    try {
      await this.execInternal(`rm -f ${shellEscape(passwordFilePath)}`);
    } catch (error) {
      this.logger.warn("password file cleanup failed", {
        passwordFilePath,
        error: error instanceof Error ? error.message : String(error)
      });
    }
  }
  async deleteAdditionalHeaderFile(headerFilePath) {
    try {
      await this.execInternal(`rm -f ${shellEscape(headerFilePath)}`);
    } catch (error) {
      this.logger.warn("s3fs additional header file cleanup failed", {
        headerFilePath,
        error: error instanceof Error ? error.message : String(error)
      });
    }
  }
  /**
  * Execute S3FS mount command
  */
  async executeS3FSMount(bucket, mountPath, options, provider, passwordFilePath, sessionId) {
    const s3fsOptions = {
      logfile: `/tmp/.s3fs-log-${randomHex(4)}`,
      ...parseS3fsOptions(resolveS3fsOptions(provider)),
      ...parseS3fsOptions(options.s3fsOptions ?? []),
      passwd_file: passwordFilePath,
      url: options.endpoint,
      ...options.readOnly ? { ro: true } : {}
    };
    const logFile = s3fsOptions.logfile;
    const script = sh`(
      s3fs ${bucket} ${mountPath} -o ${serializeS3fsOptions(s3fsOptions)} >${logFile} 2>&1
      rc=$?
      if [ "$rc" -ne 0 ]; then tail -n 20 ${logFile} 2>/dev/null || true; exit 2; fi
      for _ in $(seq 1 60); do
        if mountpoint -q ${mountPath}; then exit 0; fi
        sleep 0.1
      done
      tail -n 20 ${logFile} 2>/dev/null || true
      exit 3
    )`;
    const result = await (sessionId ? (cmd) => this.execWithSession(cmd, sessionId, { origin: "internal" }) : (cmd) => this.execInternal(cmd))(script);
    if (result.exitCode === 0) return;
    const detail = result.stdout?.trim() || result.stderr?.trim() || "";
    if (result.exitCode === 2) throw new S3FSMountError(`S3FS mount failed: ${detail || "Unknown error"}`);
    throw new S3FSMountError(`S3FS mount failed: FUSE filesystem never appeared at ${mountPath}. ${detail ? `s3fs log: ${detail}` : "No s3fs log output captured. The s3fs daemon may have exited before writing logs."}`);
  }
  async unmountTrackedFuseMount(mountPath, mountInfo) {
    if (!mountInfo.mounted) return;
    this.logger.debug(`Unmounting bucket ${mountInfo.bucket} from ${mountPath}`);
    const result = await this.execInternal(`fusermount -u ${shellEscape(mountPath)}`);
    if (result.exitCode !== 0) throw new Error(`fusermount -u failed (exit ${result.exitCode}): ${result.stderr || "unknown error"}`);
    mountInfo.mounted = false;
  }
  /**
  * In-flight `destroy()` promise. While set, concurrent callers coalesce
  * onto the same teardown instead of triggering a second one. Cleared when
  * the underlying work settles, so a later call that genuinely needs to
  * recreate a destroyed sandbox still runs.
  *
  * If the underlying teardown hangs (e.g. `super.destroy()` never resolves
  * because the Containers control plane is unresponsive), every coalesced
  * caller hangs on the same promise until the Durable Object is evicted.
  * This is deliberate: a second concurrent teardown would not make a stuck
  * control plane unstuck, and spawning one would defeat the point of
  * coalescing. Callers that need bounded waits must apply their own
  * timeout around `destroy()`.
  */
  inflightDestroy = null;
  /**
  * Cleanup and destroy the sandbox container.
  *
  * Concurrent calls coalesce: if a previous `destroy()` is still in flight,
  * subsequent calls await the same underlying work instead of starting a
  * second teardown. A canonical `sandbox.destroy.coalesced` event is logged
  * per coalesced call so repeated destroy traffic is observable.
  */
  async destroy() {
    if (this.inflightDestroy) {
      logCanonicalEvent(this.logger, {
        event: "sandbox.destroy.coalesced",
        outcome: "success",
        durationMs: 0
      });
      return this.inflightDestroy;
    }
    const work = this.doDestroy();
    this.inflightDestroy = work;
    try {
      await work;
    } finally {
      if (this.inflightDestroy === work) this.inflightDestroy = null;
    }
  }
  async doDestroy() {
    const startTime = Date.now();
    let mountsProcessed = 0;
    let mountFailures = 0;
    let outcome = "error";
    let caughtError;
    try {
      await this.ctx.storage.delete(PORT_TOKENS_STORAGE_KEY);
      await this.clearActivePreviewPorts();
      await this.currentLifetime.rotate();
      await this.currentRuntime.clear();
      for (const [mountPath, mountInfo] of this.activeMounts.entries()) {
        mountsProcessed++;
        if (mountInfo.mountType === "local-sync") try {
          await mountInfo.syncManager.stop();
          mountInfo.mounted = false;
        } catch (error) {
          mountFailures++;
          const errorMsg = error instanceof Error ? error.message : String(error);
          this.logger.warn(`Failed to stop local sync for ${mountPath}: ${errorMsg}`);
        }
        else {
          try {
            await this.unmountTrackedFuseMount(mountPath, mountInfo);
          } catch (error) {
            mountFailures++;
            const errorMsg = error instanceof Error ? error.message : String(error);
            this.logger.warn(`Failed to unmount bucket ${mountInfo.bucket} from ${mountPath}: ${errorMsg}`);
          }
          await this.deletePasswordFile(mountInfo.passwordFilePath);
          if (mountInfo.additionalHeaderFilePath) await this.deleteAdditionalHeaderFile(mountInfo.additionalHeaderFilePath);
        }
      }
      try {
        this.ensureTunnelsBuilt();
        await this.destroyAllTunnels?.();
      } catch (error) {
        this.logger.warn("Failed to tear down tunnels during destroy()", { error: error instanceof Error ? error.message : String(error) });
      }
      await this.ctx.storage.delete("tunnels");
      await this.ctx.storage.delete("tunnels:meta");
      this.client.disconnect(this.buildDisconnectCause("sandbox_lifetime_changed", "The sandbox was destroyed while the operation was pending."));
      outcome = "success";
      try {
        await super.destroy();
      } catch (error) {
        if (!this.isNoInstanceError(error)) throw error;
        this.logger.debug("super.destroy() reported no container instance; treating as no-op");
      }
    } catch (error) {
      caughtError = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      logCanonicalEvent(this.logger, {
        event: "sandbox.destroy",
        outcome,
        durationMs: Date.now() - startTime,
        mountsProcessed,
        mountFailures,
        error: caughtError
      });
    }
  }
  async onStart() {
    this.logger.debug("Sandbox started");
    await this.currentRuntime.markStarted();
    this.checkVersionCompatibility().catch((error) => {
      this.logger.error("Version compatibility check failed", error instanceof Error ? error : new Error(String(error)));
    });
    try {
      await pruneTunnelsForRestart(this.ctx.storage);
    } catch (error) {
      this.logger.error("Failed to reconcile tunnel storage after container start", error instanceof Error ? error : new Error(String(error)));
    }
  }
  async stop(signal) {
    await this.currentRuntime.clear();
    await this.clearActivePreviewPorts();
    await super.stop(signal);
  }
  /**
  * Read the `portTokens` map from DO storage, normalizing the legacy
  * string-valued format (just a token) to the current object format
  * ({ token, name? }). The legacy format predates port-name persistence and
  * can appear on any DO whose storage was written before that change.
  */
  async readPortTokens(storage = this.ctx.storage) {
    const raw = await storage.get(PORT_TOKENS_STORAGE_KEY) ?? {};
    const normalized = {};
    for (const [port, value] of Object.entries(raw)) normalized[port] = typeof value === "string" ? { token: value } : value;
    return normalized;
  }
  async readActivePreviewPorts(storage = this.ctx.storage) {
    return await storage.get(ACTIVE_PREVIEW_PORTS_STORAGE_KEY) ?? {};
  }
  async writeActivePreviewPorts(activations, storage = this.ctx.storage) {
    if (Object.keys(activations).length === 0) {
      await storage.delete(ACTIVE_PREVIEW_PORTS_STORAGE_KEY);
      return;
    }
    await storage.put(ACTIVE_PREVIEW_PORTS_STORAGE_KEY, activations);
  }
  async readPreviewState(storage = this.ctx.storage) {
    const [tokens, activations] = await Promise.all([this.readPortTokens(storage), this.readActivePreviewPorts(storage)]);
    return {
      tokens,
      activations
    };
  }
  async clearActivePreviewPorts() {
    await this.ctx.storage.delete(ACTIVE_PREVIEW_PORTS_STORAGE_KEY);
  }
  /**
  * Check if the container version matches the SDK version
  * Logs a warning if there's a mismatch
  */
  async checkVersionCompatibility() {
    const sdkVersion = SDK_VERSION;
    let containerVersion;
    let outcome;
    try {
      containerVersion = await this.client.utils.getVersion();
      if (containerVersion === "unknown") outcome = "container_version_unknown";
      else if (containerVersion !== sdkVersion) outcome = "version_mismatch";
      else outcome = "compatible";
    } catch (error) {
      outcome = "check_failed";
      containerVersion = void 0;
    }
    const successLevel = outcome === "compatible" ? "debug" : outcome === "container_version_unknown" ? "info" : "warn";
    logCanonicalEvent(this.logger, {
      event: "version.check",
      outcome: "success",
      durationMs: 0,
      sdkVersion,
      containerVersion: containerVersion ?? "unknown",
      versionOutcome: outcome
    }, { successLevel });
  }
  async onStop(params) {
    this.logger.debug("Sandbox stopped", {
      exitCode: params?.exitCode,
      reason: params?.reason
    });
    this.containerGeneration++;
    this.defaultSession = null;
    this.defaultSessionInit = null;
    await this.currentRuntime.clear();
    await this.clearActivePreviewPorts();
    try {
      await pruneTunnelsForRestart(this.ctx.storage);
    } catch (error) {
      this.logger.error("Failed to reconcile tunnel storage after container stop", error instanceof Error ? error : new Error(String(error)));
    }
    this.client.disconnect(this.buildDisconnectCause("runtime_replaced", "The sandbox container stopped while the operation was pending.", params));
    let hadR2EgressMount = false;
    let hadCredentialProxyMount = false;
    for (const [, m] of this.activeMounts) if (m.mountType === "local-sync") await m.syncManager.stop().catch(() => {
    });
    else if (m.mountType === "r2-egress") hadR2EgressMount = true;
    else if (m.mountType === "fuse" && m.credentialProxy) {
      hadCredentialProxyMount = true;
      evictSigV4ClientCacheEntry(m.mountId);
      evictDirectoryMarkerCacheForMount(m.mountId);
    }
    if (hadR2EgressMount) await this.configureR2EgressOutbound({ buckets: {} }).catch(() => {
    });
    if (hadCredentialProxyMount) await this.configureS3CredentialProxyOutbound({ mounts: {} }).catch(() => {
    });
    this.activeMounts.clear();
    await this.ctx.storage.delete("defaultSession");
  }
  onError(error) {
    this.logger.error("Sandbox error", error instanceof Error ? error : new Error(String(error)));
  }
  /**
  * Override Container.containerFetch to use production-friendly timeouts
  * Automatically starts container with longer timeouts if not running
  */
  async containerFetch(requestOrUrl, portOrInit, portParam) {
    const { request, port } = this.parseContainerFetchArgs(requestOrUrl, portOrInit, portParam);
    const state = await this.getState();
    const containerRunning = this.ctx.container?.running;
    const staleStateDetected = state.status === "healthy" && containerRunning === false;
    if (state.status !== "healthy" || containerRunning === false) try {
      await this.startAndWaitForPorts({
        ports: port,
        cancellationOptions: {
          instanceGetTimeoutMS: this.containerTimeouts.instanceGetTimeoutMS,
          portReadyTimeoutMS: this.containerTimeouts.portReadyTimeoutMS,
          waitInterval: this.containerTimeouts.waitIntervalMS,
          abort: request.signal
        }
      });
    } catch (e) {
      const admissionReason = matchContainerUnavailable(e);
      if (admissionReason) {
        const originalMessage = e instanceof Error ? e.message : String(e);
        const context = {
          reason: admissionReason,
          retryable: true,
          originalMessage
        };
        const errorBody$1 = {
          code: ErrorCode.CONTAINER_UNAVAILABLE,
          message: originalMessage,
          context,
          httpStatus: 503,
          timestamp: (/* @__PURE__ */ new Date()).toISOString(),
          suggestion: getSuggestion(ErrorCode.CONTAINER_UNAVAILABLE, context)
        };
        return new Response(JSON.stringify(errorBody$1), {
          status: 503,
          headers: {
            "Content-Type": "application/json",
            "Retry-After": "10"
          }
        });
      }
      if (this.isPermanentStartupError(e)) {
        this.logger.error("Permanent container startup error, returning 500", e instanceof Error ? e : new Error(String(e)));
        const errorBody$1 = {
          code: ErrorCode.INTERNAL_ERROR,
          message: "Container failed to start due to a permanent error. Check your container configuration.",
          context: {
            phase: "startup",
            error: e instanceof Error ? e.message : String(e)
          },
          httpStatus: 500,
          timestamp: (/* @__PURE__ */ new Date()).toISOString(),
          suggestion: "This error will not resolve with retries. Check container logs, image name, and resource limits."
        };
        return new Response(JSON.stringify(errorBody$1), {
          status: 500,
          headers: { "Content-Type": "application/json" }
        });
      }
      if (this.isTransientStartupError(e)) {
        if (staleStateDetected) {
          this.logger.warn("container.startup", {
            outcome: "stale_state_abort",
            staleStateDetected: true,
            error: e instanceof Error ? e.message : String(e)
          });
          this.ctx.abort();
        } else this.logger.debug("container.startup", {
          outcome: "transient_error",
          staleStateDetected,
          error: e instanceof Error ? e.message : String(e)
        });
        const errorBody$1 = {
          code: ErrorCode.INTERNAL_ERROR,
          message: "Container is starting. Please retry in a moment.",
          context: {
            phase: "startup",
            error: e instanceof Error ? e.message : String(e)
          },
          httpStatus: 503,
          timestamp: (/* @__PURE__ */ new Date()).toISOString(),
          suggestion: "The container is booting. The SDK will retry automatically."
        };
        return new Response(JSON.stringify(errorBody$1), {
          status: 503,
          headers: {
            "Content-Type": "application/json",
            "Retry-After": "3"
          }
        });
      }
      this.logger.warn("container.startup", {
        outcome: "unrecognized_error",
        staleStateDetected,
        error: e instanceof Error ? e.message : String(e)
      });
      const errorBody = {
        code: ErrorCode.INTERNAL_ERROR,
        message: "Container is starting. Please retry in a moment.",
        context: {
          phase: "startup",
          error: e instanceof Error ? e.message : String(e)
        },
        httpStatus: 503,
        timestamp: (/* @__PURE__ */ new Date()).toISOString(),
        suggestion: "The SDK will retry automatically. If this persists, the container may need redeployment."
      };
      return new Response(JSON.stringify(errorBody), {
        status: 503,
        headers: {
          "Content-Type": "application/json",
          "Retry-After": "5"
        }
      });
    }
    return await super.containerFetch(requestOrUrl, portOrInit, portParam);
  }
  /**
  * Helper: Check if error is "no container instance available"
  * This indicates the container VM is still being provisioned.
  */
  isNoInstanceError(error) {
    return matchContainerUnavailable(error) !== null;
  }
  /**
  * Explicit container-start hook for the RPC transport.
  *
  * Runs `startAndWaitForPorts` under a short instance-get budget
  * ({@link RPC_START_INSTANCE_GET_TIMEOUT_MS}) so a single attempt fails fast
  * under capacity pressure — the base class throws the classifiable
  * `NO_CONTAINER_INSTANCE_ERROR` once that budget is exhausted, and the RPC
  * control connection's own retry loop (with backoff) owns cross-attempt
  * retries. Port readiness still uses the full `portReadyTimeoutMS` so a
  * genuinely-booting app isn't cut short once an instance exists.
  *
  * Always throws a typed `SandboxError` on failure so the control connection
  * never surfaces a raw capnweb/transport string to the caller:
  *   - container-admission/capacity failures → retryable
  *     `ContainerUnavailableError` (preserving the platform message so the
  *     connection's `shouldRetryError` still recognizes and retries it);
  *   - anything else (platform-transient DO reset, network loss, unexpected
  *     startup failure) → `INTERNAL_ERROR`-coded SandboxError carrying the
  *     original message.
  */
  async startContainerForRPC() {
    try {
      await this.startAndWaitForPorts({
        ports: 3e3,
        cancellationOptions: {
          instanceGetTimeoutMS: RPC_START_INSTANCE_GET_TIMEOUT_MS,
          portReadyTimeoutMS: this.containerTimeouts.portReadyTimeoutMS,
          waitInterval: this.containerTimeouts.waitIntervalMS
        }
      });
    } catch (error) {
      throw this.toContainerStartError(error);
    }
  }
  /**
  * Convert a container-start failure into a typed SandboxError. Preserves an
  * existing SandboxError as-is; maps platform admission/capacity failures to
  * a retryable ContainerUnavailableError; and wraps everything else as an
  * INTERNAL_ERROR carrying the original message (never a raw transport
  * string).
  */
  toContainerStartError(error) {
    if (error instanceof SandboxError) return error;
    const originalMessage = error instanceof Error ? error.message : String(error);
    const admissionReason = matchContainerUnavailable(error);
    if (admissionReason) {
      const context$1 = {
        reason: admissionReason,
        retryable: true,
        originalMessage
      };
      return createErrorFromResponse({
        code: ErrorCode.CONTAINER_UNAVAILABLE,
        message: originalMessage,
        context: context$1,
        httpStatus: getHttpStatus(ErrorCode.CONTAINER_UNAVAILABLE),
        suggestion: getSuggestion(ErrorCode.CONTAINER_UNAVAILABLE, context$1),
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      }, { cause: error });
    }
    const context = {
      phase: "startup",
      error: originalMessage
    };
    return createErrorFromResponse({
      code: ErrorCode.INTERNAL_ERROR,
      message: `Container failed to start: ${originalMessage}`,
      context,
      httpStatus: getHttpStatus(ErrorCode.INTERNAL_ERROR),
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    }, { cause: error });
  }
  /**
  * Build a typed lifecycle cause to stamp on the RPC transport when the DO
  * tears the connection down for its own reasons (container stopped, sandbox
  * destroyed, transport switched). Handed to `client.disconnect(cause)` so
  * any RPC calls queued on the transport reject with this actionable reason
  * instead of the generic capnweb "disposing the main stub" message.
  */
  buildDisconnectCause(reason, detail, stopParams) {
    const context = {
      reason,
      operation: "rpc.connect",
      phase: "connection",
      admitted: "unknown",
      retryable: reason === "runtime_replaced",
      ...stopParams?.exitCode !== void 0 && { containerExitCode: stopParams.exitCode },
      ...stopParams?.reason !== void 0 && { stopReason: stopParams.reason }
    };
    return new OperationInterruptedError({
      code: ErrorCode.OPERATION_INTERRUPTED,
      message: detail,
      context,
      httpStatus: getHttpStatus(ErrorCode.OPERATION_INTERRUPTED),
      suggestion: getSuggestion(ErrorCode.OPERATION_INTERRUPTED, context),
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
  }
  /**
  * Helper: Check if error is a transient startup error that should trigger retry
  *
  * These errors occur during normal container startup and are recoverable:
  * - Port not yet mapped (container starting, app not listening yet)
  * - Connection refused (port mapped but app not ready)
  * - Timeouts during startup (recoverable with retry)
  * - Network transients (temporary connectivity issues)
  *
  * Errors NOT included (permanent failures):
  * - "no such image" - missing Docker image
  * - "container already exists" - name collision
  * - Configuration errors
  */
  isTransientStartupError(error) {
    if (!(error instanceof Error)) return false;
    const msg = error.message.toLowerCase();
    return [
      "container port not found",
      "connection refused: container port",
      "the container is not listening",
      "failed to verify port",
      "container did not start",
      "network connection lost",
      "container suddenly disconnected",
      "monitor failed to find container",
      "container exited with unexpected exit code",
      "container exited before we could determine",
      "timed out",
      "timeout",
      "the operation was aborted"
    ].some((pattern) => msg.includes(pattern));
  }
  /**
  * Helper: Check if error is a permanent startup failure that will never recover
  *
  * These errors indicate resource exhaustion, misconfiguration, or missing images.
  * Retrying will never succeed, so the SDK should fail fast with HTTP 500.
  *
  * Error sources (traced from platform internals):
  *   - Container runtime: OOM, PID limit
  *   - Scheduling/provisioning: no matching app, no namespace configured
  *   - workerd container-client.c++: no such image
  *   - @cloudflare/containers: did not call start
  */
  isPermanentStartupError(error) {
    if (!(error instanceof Error)) return false;
    const msg = error.message.toLowerCase();
    return [
      "ran out of memory",
      "too many subprocesses",
      "no application that matches",
      "no container application assigned",
      "no such image",
      "did not call start"
    ].some((pattern) => msg.includes(pattern));
  }
  /**
  * Helper: Parse containerFetch arguments (supports multiple signatures)
  */
  parseContainerFetchArgs(requestOrUrl, portOrInit, portParam) {
    let request;
    let port;
    if (requestOrUrl instanceof Request) {
      request = requestOrUrl;
      port = typeof portOrInit === "number" ? portOrInit : void 0;
    } else {
      const url = typeof requestOrUrl === "string" ? requestOrUrl : requestOrUrl.toString();
      const init = typeof portOrInit === "number" ? {} : portOrInit || {};
      port = typeof portOrInit === "number" ? portOrInit : typeof portParam === "number" ? portParam : void 0;
      request = new Request(url, init);
    }
    port ??= this.defaultPort;
    if (port === void 0) throw new Error("No port specified for container fetch");
    return {
      request,
      port
    };
  }
  /**
  * Override onActivityExpired to prevent automatic shutdown when keepAlive is enabled
  * When keepAlive is disabled, calls parent implementation which stops the container
  */
  async onActivityExpired() {
    if (this.keepAliveEnabled) this.logger.debug("Activity expired but keepAlive is enabled - container will stay alive");
    else {
      this.logger.debug("Activity expired - stopping container");
      await super.onActivityExpired();
    }
  }
  isPreviewProxyRequest(request) {
    return request.headers.get(PREVIEW_PROXY_HEADER) === "1";
  }
  invalidPreviewTokenResponse() {
    return new Response(JSON.stringify({
      error: "Access denied: Invalid token or port not exposed",
      code: "INVALID_TOKEN"
    }), {
      status: 404,
      headers: { "Content-Type": "application/json" }
    });
  }
  stalePreviewURLResponse() {
    return new Response(JSON.stringify({
      error: "Preview URL is stale because the sandbox runtime is not active",
      code: "STALE_PREVIEW_URL"
    }), {
      status: 410,
      headers: { "Content-Type": "application/json" }
    });
  }
  getPreviewForwardingContainer() {
    return this.ctx.container;
  }
  beginPreviewForward() {
    const lifecycle = this;
    lifecycle.inflightRequests = (lifecycle.inflightRequests ?? 0) + 1;
    this.renewActivityTimeout();
    let settled = false;
    return () => {
      if (settled) return;
      settled = true;
      lifecycle.inflightRequests = Math.max(0, (lifecycle.inflightRequests ?? 0) - 1);
      if (lifecycle.inflightRequests === 0) this.renewActivityTimeout();
    };
  }
  async fetchPreviewIfRunning(request, port, runtime) {
    const container = this.getPreviewForwardingContainer();
    const state = await this.getState();
    if (!container?.running || state.status !== "healthy") return this.stalePreviewURLResponse();
    if (!await this.currentRuntime.isActive(runtime)) return this.stalePreviewURLResponse();
    const result = await forwardPreviewRequest(container.getTcpPort(port), request, {
      beginForward: /* @__PURE__ */ __name(() => this.beginPreviewForward(), "beginForward"),
      renewActivity: /* @__PURE__ */ __name(() => this.renewActivityTimeout(), "renewActivity")
    });
    if (result.status === "network-lost") {
      if (!await this.currentRuntime.isActive(runtime)) return this.stalePreviewURLResponse();
      return new Response("Container suddenly disconnected, try again", { status: 500 });
    }
    return result.response;
  }
  buildPreviewProxyRequest(request, port, sandboxId) {
    const url = new URL(request.url);
    const proxyUrl = `http://localhost:${port}${url.pathname}${url.search}`;
    const headers = new Headers(request.headers);
    for (const header of PREVIEW_PROXY_HEADERS) headers.delete(header);
    headers.set("X-Original-URL", request.url);
    headers.set("X-Forwarded-Host", url.hostname);
    headers.set("X-Forwarded-Proto", url.protocol.replace(":", ""));
    headers.set("X-Sandbox-Name", this.sandboxName ?? sandboxId);
    if (request.headers.get("Upgrade")?.toLowerCase() === "websocket") return new Request(request, {
      headers,
      redirect: "manual"
    });
    return new Request(proxyUrl, {
      method: request.method,
      headers,
      body: request.body,
      duplex: "half",
      redirect: "manual"
    });
  }
  async proxyPreviewRequest(request) {
    const portValue = request.headers.get(PREVIEW_PROXY_PORT_HEADER);
    const token = request.headers.get(PREVIEW_PROXY_TOKEN_HEADER);
    const sandboxId = request.headers.get(PREVIEW_PROXY_SANDBOX_ID_HEADER);
    const port = portValue === null ? NaN : Number.parseInt(portValue, 10);
    if (!Number.isFinite(port) || !validatePort(port) || !token || !sandboxId) return this.invalidPreviewTokenResponse();
    const proxyRequest = this.buildPreviewProxyRequest(request, port, sandboxId);
    const validation = await this.validatePreviewURLForRuntime(port, token);
    if (validation.status === "invalid") return this.invalidPreviewTokenResponse();
    if (validation.status === "stale") {
      this.logger.warn("Stale preview URL blocked", {
        port,
        sandboxId,
        containerStatus: validation.containerStatus,
        reason: validation.reason,
        method: request.method
      });
      return this.stalePreviewURLResponse();
    }
    return await this.fetchPreviewIfRunning(proxyRequest, port, validation.runtime);
  }
  async fetch(request) {
    const traceId = TraceContext.fromHeaders(request.headers) || TraceContext.generate();
    const requestLogger = this.logger.child({
      traceId,
      operation: "fetch"
    });
    const url = new URL(request.url);
    if (this.isPreviewProxyRequest(request)) return await this.proxyPreviewRequest(request);
    if (!this.sandboxName && request.headers.has("X-Sandbox-Name")) {
      const name = request.headers.get("X-Sandbox-Name");
      this.sandboxName = name;
      await this.ctx.storage.put("sandboxName", name);
    }
    const upgradeHeader = request.headers.get("Upgrade");
    const connectionHeader = request.headers.get("Connection");
    if (upgradeHeader?.toLowerCase() === "websocket" && connectionHeader?.toLowerCase().includes("upgrade")) try {
      requestLogger.debug("WebSocket upgrade requested", {
        path: url.pathname,
        port: this.determinePort(url)
      });
      return await super.fetch(request);
    } catch (error) {
      requestLogger.error("WebSocket connection failed", error instanceof Error ? error : new Error(String(error)), { path: url.pathname });
      throw error;
    }
    const port = this.determinePort(url);
    return await this.containerFetch(request, port);
  }
  wsConnect(request, port) {
    throw new Error("wsConnect must be called on the stub returned by getSandbox()");
  }
  determinePort(url) {
    const proxyMatch = url.pathname.match(/^\/proxy\/(\d+)/);
    if (proxyMatch) return parseInt(proxyMatch[1], 10);
    return 3e3;
  }
  /**
  * Return the default session id, lazily creating the container session
  * on first use. Called by every public method that needs a session.
  * Concurrent callers that target the same sessionId share one
  * in-flight initialization promise.
  */
  async ensureDefaultSession() {
    const sessionId = `sandbox-${this.sandboxName || "default"}`;
    if (this.defaultSession === sessionId) return this.defaultSession;
    const generation = this.containerGeneration;
    const pending = this.defaultSessionInit;
    if (pending?.sessionId === sessionId && pending.generation === generation) return pending.promise;
    const promise = this.initializeDefaultSession(sessionId, generation);
    const init = {
      sessionId,
      generation,
      promise
    };
    this.defaultSessionInit = init;
    try {
      return await promise;
    } catch (err) {
      if (isSessionInitInvalidated(err)) {
        if (this.defaultSession === sessionId) return this.defaultSession;
        const freshPending = this.defaultSessionInit;
        if (freshPending != null && freshPending !== init && freshPending.sessionId === sessionId && freshPending.generation === this.containerGeneration) return freshPending.promise;
        return await this.initializeDefaultSession(sessionId, this.containerGeneration);
      }
      throw err;
    } finally {
      if (this.defaultSessionInit === init) this.defaultSessionInit = null;
    }
  }
  async initializeDefaultSession(sessionId, generation) {
    let placementId;
    try {
      placementId = (await this.client.utils.createSession({
        id: sessionId,
        env: this.envVars || {},
        cwd: "/workspace"
      })).containerPlacementId;
    } catch (error) {
      if (!(error instanceof SessionAlreadyExistsError)) throw error;
      placementId = error.containerPlacementId;
      this.logger.debug("Session exists in container but not in DO state, syncing", { sessionId });
    }
    if (generation !== this.containerGeneration) throw new SessionInitInvalidatedError();
    await this.ctx.storage.put("defaultSession", sessionId);
    await this.capturePlacementId(placementId);
    this.defaultSession = sessionId;
    this.logger.debug("Default session initialized", { sessionId });
    return sessionId;
  }
  /**
  * Persist the container's placement ID in DO storage.
  *
  * Called from the session-create handshake so subsequent reads via
  * `getContainerPlacementId()` do not require a round-trip to the container. The value
  * is overwritten on every handshake so that container replacements (which
  * assign a new placement ID) are reflected on the next session-create.
  *
  * A value of `undefined` means the handshake response omitted the field
  * (older container, unexpected error shape) and the stored value is left
  * untouched. `null` means the env var is not set in the container and is
  * stored as-is so callers can distinguish "observed and absent" from "not
  * yet observed."
  */
  async capturePlacementId(containerPlacementId) {
    if (containerPlacementId === void 0) return;
    await this.ctx.storage.put("containerPlacementId", containerPlacementId);
  }
  async resolveExecution(explicitSessionId) {
    if (explicitSessionId !== void 0) {
      this.validateExplicitSessionId(explicitSessionId);
      if (explicitSessionId === DISABLE_SESSION_TOKEN) return { kind: "sessionless" };
      return {
        kind: "session",
        sessionId: explicitSessionId
      };
    }
    return {
      kind: "session",
      sessionId: await this.ensureDefaultSession()
    };
  }
  validateExplicitSessionId(sessionId) {
    if (sessionId.trim().length === 0) throw new Error("sessionId must not be empty or whitespace");
  }
  serializeExecutionContext(context) {
    if (context.kind === "sessionless") return DISABLE_SESSION_TOKEN;
    return context.sessionId;
  }
  getPublicExecutionSessionId(sessionId) {
    return sessionId === DISABLE_SESSION_TOKEN ? void 0 : sessionId;
  }
  /**
  * Resolves the session ID to annotate returned Process objects.
  *
  * Unlike `resolveExecution`, this is synchronous and never creates a
  * session. When the default session hasn't been established yet, it returns
  * `undefined` rather than triggering session creation. The resolved value is
  * only used to populate `Process.sessionId` on the returned object — it is
  * never sent to the container API.
  */
  getProcessSessionBinding(explicitSessionId) {
    if (explicitSessionId !== void 0) {
      this.validateExplicitSessionId(explicitSessionId);
      if (explicitSessionId === DISABLE_SESSION_TOKEN) return;
      return explicitSessionId;
    }
    return this.defaultSession ?? void 0;
  }
  resolveExecutionEnv(sessionId, env$1) {
    if (sessionId === DISABLE_SESSION_TOKEN) {
      const mergedEnv = filterEnvVars({
        ...this.envVars,
        ...env$1 ?? {}
      });
      return Object.keys(mergedEnv).length > 0 ? mergedEnv : void 0;
    }
    if (env$1 === void 0) return;
    const filteredEnv = filterEnvVars(env$1);
    return Object.keys(filteredEnv).length > 0 ? filteredEnv : void 0;
  }
  buildExecutionRequestOptions(sessionId, options) {
    const env$1 = this.resolveExecutionEnv(sessionId, options?.env);
    if (options?.timeout === void 0 && env$1 === void 0 && options?.cwd === void 0 && options?.origin === void 0) return;
    return {
      ...options?.timeout !== void 0 && { timeoutMs: options.timeout },
      ...env$1 !== void 0 && { env: env$1 },
      ...options?.cwd !== void 0 && { cwd: options.cwd },
      ...options?.origin !== void 0 && { origin: options.origin }
    };
  }
  async exec(command, options) {
    const context = await this.resolveExecution();
    const session = this.serializeExecutionContext(context);
    return this.execWithSession(command, session, options);
  }
  async execWithSessionToken(command, sessionId, options) {
    this.validateExplicitSessionId(sessionId);
    return this.execWithSession(command, sessionId, options);
  }
  /**
  * Execute an infrastructure command (backup, mount, env setup, etc.)
  * tagged with origin: 'internal' so logging demotes it to debug level.
  */
  async execInternal(command) {
    const session = await this.ensureDefaultSession();
    return this.execWithSession(command, session, { origin: "internal" });
  }
  /**
  * Internal session-aware exec implementation
  * Used by both public exec() and session wrappers
  */
  async execWithSession(command, sessionId, options) {
    const startTime = Date.now();
    const timestamp = (/* @__PURE__ */ new Date()).toISOString();
    let execOutcome;
    let execError;
    try {
      if (options?.signal?.aborted) throw new Error("Operation was aborted");
      let result;
      if (options?.stream && options?.onOutput) result = await this.executeWithStreaming(command, sessionId, options, startTime, timestamp);
      else {
        const commandOptions = this.buildExecutionRequestOptions(sessionId, options);
        const response = await this.client.commands.execute(command, sessionId, commandOptions);
        const duration = Date.now() - startTime;
        const publicSessionId = this.getPublicExecutionSessionId(sessionId);
        result = this.mapExecuteResponseToExecResult(response, duration, publicSessionId);
      }
      execOutcome = {
        exitCode: result.exitCode,
        success: result.success
      };
      if (options?.onComplete) options.onComplete(result);
      return result;
    } catch (error) {
      execError = error instanceof Error ? error : new Error(String(error));
      if (options?.onError && error instanceof Error) options.onError(error);
      throw error;
    } finally {
      logCanonicalEvent(this.logger, {
        event: "sandbox.exec",
        outcome: execError ? "error" : "success",
        command,
        exitCode: execOutcome?.exitCode,
        durationMs: Date.now() - startTime,
        sessionId: this.getPublicExecutionSessionId(sessionId),
        origin: options?.origin ?? "user",
        error: execError ?? void 0,
        errorMessage: execError?.message
      });
    }
  }
  async executeWithStreaming(command, sessionId, options, startTime, timestamp) {
    let stdout = "";
    let stderr = "";
    try {
      const commandOptions = this.buildExecutionRequestOptions(sessionId, options);
      const stream = await this.client.commands.executeStream(command, sessionId, commandOptions);
      for await (const event of parseSSEStream(stream)) {
        if (options.signal?.aborted) throw new Error("Operation was aborted");
        switch (event.type) {
          case "stdout":
          case "stderr":
            if (event.data) {
              if (event.type === "stdout") stdout += event.data;
              if (event.type === "stderr") stderr += event.data;
              if (options.onOutput) options.onOutput(event.type, event.data);
            }
            break;
          case "complete": {
            const duration = Date.now() - startTime;
            return {
              success: (event.exitCode ?? 0) === 0,
              exitCode: event.exitCode ?? 0,
              stdout,
              stderr,
              command,
              duration,
              timestamp,
              sessionId: this.getPublicExecutionSessionId(sessionId)
            };
          }
          case "error":
            throw new Error(event.data || "Command execution failed");
        }
      }
      throw new Error("Stream ended without completion event");
    } catch (error) {
      if (options.signal?.aborted) throw new Error("Operation was aborted");
      throw error;
    }
  }
  mapExecuteResponseToExecResult(response, duration, sessionId) {
    return {
      success: response.success,
      exitCode: response.exitCode,
      stdout: response.stdout,
      stderr: response.stderr,
      command: response.command,
      duration,
      timestamp: response.timestamp,
      sessionId
    };
  }
  /**
  * Create a Process domain object from HTTP client DTO
  * Centralizes process object creation with bound methods
  * This eliminates duplication across startProcess, listProcesses, getProcess, and session wrappers
  */
  createProcessFromDTO(data, sessionId) {
    return {
      id: data.id,
      pid: data.pid,
      command: data.command,
      status: data.status,
      startTime: typeof data.startTime === "string" ? new Date(data.startTime) : data.startTime,
      endTime: data.endTime ? typeof data.endTime === "string" ? new Date(data.endTime) : data.endTime : void 0,
      exitCode: data.exitCode,
      sessionId,
      kill: /* @__PURE__ */ __name(async (signal) => {
        await this.killProcess(data.id, signal);
      }, "kill"),
      getStatus: /* @__PURE__ */ __name(async () => {
        return (await this.getProcess(data.id))?.status || "error";
      }, "getStatus"),
      getLogs: /* @__PURE__ */ __name(async () => {
        const logs = await this.getProcessLogs(data.id);
        return {
          stdout: logs.stdout,
          stderr: logs.stderr
        };
      }, "getLogs"),
      waitForLog: /* @__PURE__ */ __name(async (pattern, timeout) => {
        return this.waitForLogPattern(data.id, data.command, pattern, timeout);
      }, "waitForLog"),
      waitForPort: /* @__PURE__ */ __name(async (port, options) => {
        await this.waitForPortReady(data.id, data.command, port, options);
      }, "waitForPort"),
      waitForExit: /* @__PURE__ */ __name(async (timeout) => {
        return this.waitForProcessExit(data.id, data.command, timeout);
      }, "waitForExit")
    };
  }
  /**
  * Wait for a log pattern to appear in process output
  */
  async waitForLogPattern(processId, command, pattern, timeout) {
    const startTime = Date.now();
    const conditionStr = this.conditionToString(pattern);
    let collectedStdout = "";
    let collectedStderr = "";
    try {
      const existingLogs = await this.getProcessLogs(processId);
      collectedStdout = existingLogs.stdout;
      if (collectedStdout && !collectedStdout.endsWith("\n")) collectedStdout += "\n";
      collectedStderr = existingLogs.stderr;
      if (collectedStderr && !collectedStderr.endsWith("\n")) collectedStderr += "\n";
      const stdoutResult = this.matchPattern(existingLogs.stdout, pattern);
      if (stdoutResult) return stdoutResult;
      const stderrResult = this.matchPattern(existingLogs.stderr, pattern);
      if (stderrResult) return stderrResult;
    } catch (error) {
      this.logger.debug("Could not get existing logs, will stream", {
        processId,
        error: error instanceof Error ? error.message : String(error)
      });
    }
    const stream = await this.streamProcessLogs(processId);
    let timeoutId;
    let timeoutPromise;
    if (timeout !== void 0) {
      const remainingTime = timeout - (Date.now() - startTime);
      if (remainingTime <= 0) throw this.createReadyTimeoutError(processId, command, conditionStr, timeout);
      timeoutPromise = new Promise((_, reject) => {
        timeoutId = setTimeout(() => {
          reject(this.createReadyTimeoutError(processId, command, conditionStr, timeout));
        }, remainingTime);
      });
    }
    try {
      const streamProcessor = /* @__PURE__ */ __name(async () => {
        const checkPattern = /* @__PURE__ */ __name(() => {
          const stdoutResult = this.matchPattern(collectedStdout, pattern);
          if (stdoutResult) return stdoutResult;
          const stderrResult = this.matchPattern(collectedStderr, pattern);
          if (stderrResult) return stderrResult;
          return null;
        }, "checkPattern");
        for await (const event of parseSSEStream(stream)) {
          if (event.type === "stdout" || event.type === "stderr") {
            const data = event.data || "";
            if (event.type === "stdout") collectedStdout += data;
            else collectedStderr += data;
            const result = checkPattern();
            if (result) return result;
          }
          if (event.type === "exit") {
            const result = checkPattern();
            if (result) return result;
            throw this.createExitedBeforeReadyError(processId, command, conditionStr, event.exitCode ?? 1);
          }
        }
        const finalResult = checkPattern();
        if (finalResult) return finalResult;
        throw this.createExitedBeforeReadyError(processId, command, conditionStr, 0);
      }, "streamProcessor");
      if (timeoutPromise) return await Promise.race([streamProcessor(), timeoutPromise]);
      return await streamProcessor();
    } finally {
      if (timeoutId) clearTimeout(timeoutId);
    }
  }
  /**
  * Wait for a port to become available (for process readiness checking)
  */
  async waitForPortReady(processId, command, port, options) {
    const { mode = "http", path: path$1 = "/", status = {
      min: 200,
      max: 399
    }, timeout, interval = 500 } = options ?? {};
    const conditionStr = mode === "http" ? `port ${port} (HTTP ${path$1})` : `port ${port} (TCP)`;
    const statusMin = typeof status === "number" ? status : status.min;
    const statusMax = typeof status === "number" ? status : status.max;
    const stream = await this.client.ports.watchPort({
      port,
      mode,
      path: path$1,
      statusMin,
      statusMax,
      processId,
      interval
    });
    let timeoutId;
    let timeoutPromise;
    if (timeout !== void 0) timeoutPromise = new Promise((_, reject) => {
      timeoutId = setTimeout(() => {
        reject(this.createReadyTimeoutError(processId, command, conditionStr, timeout));
      }, timeout);
    });
    try {
      const streamProcessor = /* @__PURE__ */ __name(async () => {
        for await (const event of parseSSEStream(stream)) switch (event.type) {
          case "ready":
            return;
          case "process_exited":
            throw this.createExitedBeforeReadyError(processId, command, conditionStr, event.exitCode ?? 1);
          case "error":
            throw new Error(event.error || "Port watch failed");
        }
        throw new Error("Port watch stream ended unexpectedly");
      }, "streamProcessor");
      if (timeoutPromise) await Promise.race([streamProcessor(), timeoutPromise]);
      else await streamProcessor();
    } finally {
      if (timeoutId) clearTimeout(timeoutId);
      try {
        await stream.cancel();
      } catch {
      }
    }
  }
  /**
  * Wait for a process to exit
  * Returns the exit code
  */
  async waitForProcessExit(processId, command, timeout) {
    const stream = await this.streamProcessLogs(processId);
    let timeoutId;
    let timeoutPromise;
    if (timeout !== void 0) timeoutPromise = new Promise((_, reject) => {
      timeoutId = setTimeout(() => {
        reject(this.createReadyTimeoutError(processId, command, "process exit", timeout));
      }, timeout);
    });
    try {
      const streamProcessor = /* @__PURE__ */ __name(async () => {
        for await (const event of parseSSEStream(stream)) if (event.type === "exit") return { exitCode: event.exitCode ?? 1 };
        throw new Error(`Process ${processId} stream ended unexpectedly without exit event`);
      }, "streamProcessor");
      if (timeoutPromise) return await Promise.race([streamProcessor(), timeoutPromise]);
      return await streamProcessor();
    } finally {
      if (timeoutId) clearTimeout(timeoutId);
    }
  }
  /**
  * Match a pattern against text
  */
  matchPattern(text, pattern) {
    if (typeof pattern === "string") {
      if (text.includes(pattern)) {
        const lines = text.split("\n");
        for (const line of lines) if (line.includes(pattern)) return { line };
        return { line: pattern };
      }
    } else {
      const safePattern = new RegExp(pattern.source, pattern.flags.replace("g", ""));
      const match = text.match(safePattern);
      if (match) {
        const lines = text.split("\n");
        for (const line of lines) {
          const lineMatch = line.match(safePattern);
          if (lineMatch) return {
            line,
            match: lineMatch
          };
        }
        return {
          line: match[0],
          match
        };
      }
    }
    return null;
  }
  /**
  * Convert a log pattern to a human-readable string
  */
  conditionToString(pattern) {
    if (typeof pattern === "string") return `"${pattern}"`;
    return pattern.toString();
  }
  /**
  * Create a ProcessReadyTimeoutError
  */
  createReadyTimeoutError(processId, command, condition, timeout) {
    return new ProcessReadyTimeoutError({
      code: ErrorCode.PROCESS_READY_TIMEOUT,
      message: `Process did not become ready within ${timeout}ms. Waiting for: ${condition}`,
      context: {
        processId,
        command,
        condition,
        timeout
      },
      httpStatus: 408,
      timestamp: (/* @__PURE__ */ new Date()).toISOString(),
      suggestion: `Check if your process outputs ${condition}. You can increase the timeout parameter.`
    });
  }
  /**
  * Create a ProcessExitedBeforeReadyError
  */
  createExitedBeforeReadyError(processId, command, condition, exitCode) {
    return new ProcessExitedBeforeReadyError({
      code: ErrorCode.PROCESS_EXITED_BEFORE_READY,
      message: `Process exited with code ${exitCode} before becoming ready. Waiting for: ${condition}`,
      context: {
        processId,
        command,
        condition,
        exitCode
      },
      httpStatus: 500,
      timestamp: (/* @__PURE__ */ new Date()).toISOString(),
      suggestion: "Check process logs with getLogs() for error messages"
    });
  }
  async startProcess(command, options, sessionId) {
    try {
      const execution = await this.resolveExecution(sessionId);
      const session = this.serializeExecutionContext(execution);
      const processSession = this.getProcessSessionBinding(session);
      const requestOptions = {
        ...this.buildExecutionRequestOptions(session, {
          timeout: options?.timeout,
          env: options?.env,
          cwd: options?.cwd
        }),
        ...options?.processId !== void 0 && { processId: options.processId },
        ...options?.encoding !== void 0 && { encoding: options.encoding },
        ...options?.autoCleanup !== void 0 && { autoCleanup: options.autoCleanup }
      };
      const response = await this.client.processes.startProcess(command, session, requestOptions);
      const processObj = this.createProcessFromDTO({
        id: response.processId,
        pid: response.pid,
        command: response.command,
        status: "running",
        startTime: /* @__PURE__ */ new Date(),
        endTime: void 0,
        exitCode: void 0
      }, processSession);
      if (options?.onStart) options.onStart(processObj);
      if (options?.onOutput || options?.onExit) this.startProcessCallbackStream(response.processId, options).catch(() => {
      });
      return processObj;
    } catch (error) {
      if (options?.onError && error instanceof Error) options.onError(error);
      throw error;
    }
  }
  /**
  * Start background streaming for process callbacks
  * Opens SSE stream to container and routes events to callbacks
  */
  async startProcessCallbackStream(processId, options) {
    try {
      const stream = await this.client.processes.streamProcessLogs(processId);
      for await (const event of parseSSEStream(stream)) switch (event.type) {
        case "stdout":
          if (event.data && options.onOutput) options.onOutput("stdout", event.data);
          break;
        case "stderr":
          if (event.data && options.onOutput) options.onOutput("stderr", event.data);
          break;
        case "exit":
        case "complete":
          if (options.onExit) options.onExit(event.exitCode ?? null);
          return;
      }
      throw new Error("Stream ended without completion event");
    } catch (error) {
      if (options.onError && error instanceof Error) options.onError(error);
      this.logger.error("Background process streaming failed", error instanceof Error ? error : new Error(String(error)), { processId });
    }
  }
  async listProcesses(sessionId) {
    const session = this.getProcessSessionBinding(sessionId);
    return (await this.client.processes.listProcesses()).processes.map((processData) => this.createProcessFromDTO({
      id: processData.id,
      pid: processData.pid,
      command: processData.command,
      status: processData.status,
      startTime: processData.startTime,
      endTime: processData.endTime,
      exitCode: processData.exitCode
    }, session));
  }
  async getProcess(id, sessionId) {
    const session = this.getProcessSessionBinding(sessionId);
    try {
      const response = await this.client.processes.getProcess(id);
      if (!response.process) return null;
      const processData = response.process;
      return this.createProcessFromDTO({
        id: processData.id,
        pid: processData.pid,
        command: processData.command,
        status: processData.status,
        startTime: processData.startTime,
        endTime: processData.endTime,
        exitCode: processData.exitCode
      }, session);
    } catch (error) {
      if (error instanceof ProcessNotFoundError) return null;
      throw error;
    }
  }
  async killProcess(id, signal, sessionId) {
    await this.client.processes.killProcess(id);
  }
  async killAllProcesses(sessionId) {
    return (await this.client.processes.killAllProcesses()).cleanedCount;
  }
  async cleanupCompletedProcesses(sessionId) {
    return 0;
  }
  async getProcessLogs(id, sessionId) {
    const response = await this.client.processes.getProcessLogs(id);
    return {
      stdout: response.stdout,
      stderr: response.stderr,
      processId: response.processId
    };
  }
  async execStream(command, options) {
    if (options?.signal?.aborted) throw new Error("Operation was aborted");
    const context = await this.resolveExecution(options?.sessionId);
    const session = this.serializeExecutionContext(context);
    const executionOptions = this.buildExecutionRequestOptions(session, {
      timeout: options?.timeout,
      env: options?.env,
      cwd: options?.cwd
    });
    return this.client.commands.executeStream(command, session, executionOptions);
  }
  async execStreamWithSessionToken(command, sessionId, options) {
    this.validateExplicitSessionId(sessionId);
    return this.execStreamWithSession(command, sessionId, options);
  }
  /**
  * Internal session-aware execStream implementation
  */
  async execStreamWithSession(command, sessionId, options) {
    if (options?.signal?.aborted) throw new Error("Operation was aborted");
    return this.client.commands.executeStream(command, sessionId, this.buildExecutionRequestOptions(sessionId, {
      timeout: options?.timeout,
      env: options?.env,
      cwd: options?.cwd
    }));
  }
  /**
  * Stream logs from a background process as a ReadableStream.
  */
  async streamProcessLogs(processId, options) {
    if (options?.signal?.aborted) throw new Error("Operation was aborted");
    return this.client.processes.streamProcessLogs(processId);
  }
  async gitCheckout(repoUrl, options) {
    const execution = await this.resolveExecution(options?.sessionId);
    const session = this.serializeExecutionContext(execution);
    return this.client.git.checkout(repoUrl, session, {
      branch: options?.branch,
      targetDir: options?.targetDir,
      depth: options?.depth,
      timeoutMs: options?.cloneTimeoutMs
    });
  }
  async mkdir(path$1, options = {}) {
    const execution = await this.resolveExecution(options.sessionId);
    const session = this.serializeExecutionContext(execution);
    return this.client.files.mkdir(path$1, session, { recursive: options.recursive });
  }
  async writeFile(path$1, content, options = {}) {
    const execution = await this.resolveExecution(options.sessionId);
    const session = this.serializeExecutionContext(execution);
    if (content instanceof ReadableStream) return this.client.files.writeFileStream(path$1, content, session);
    return this.client.files.writeFile(path$1, content, session, { encoding: options.encoding });
  }
  async deleteFile(path$1, sessionId) {
    const execution = await this.resolveExecution(sessionId);
    const session = this.serializeExecutionContext(execution);
    return this.client.files.deleteFile(path$1, session);
  }
  async renameFile(oldPath, newPath, sessionId) {
    const execution = await this.resolveExecution(sessionId);
    const session = this.serializeExecutionContext(execution);
    return this.client.files.renameFile(oldPath, newPath, session);
  }
  async moveFile(sourcePath, destinationPath, sessionId) {
    const execution = await this.resolveExecution(sessionId);
    const session = this.serializeExecutionContext(execution);
    return this.client.files.moveFile(sourcePath, destinationPath, session);
  }
  async readFile(path$1, options = {}) {
    const execution = await this.resolveExecution(options.sessionId);
    const session = this.serializeExecutionContext(execution);
    if (options.encoding === "none") return this.client.files.readFile(path$1, session, { encoding: "none" });
    return this.client.files.readFile(path$1, session, { encoding: options.encoding });
  }
  /**
  * Stream a file from the sandbox using Server-Sent Events
  * Returns a ReadableStream that can be consumed with streamFile() or collectFile() utilities
  * @param path - Path to the file to stream
  * @param options - Optional session ID
  */
  async readFileStream(path$1, options = {}) {
    const execution = await this.resolveExecution(options.sessionId);
    const session = this.serializeExecutionContext(execution);
    return this.client.files.readFileStream(path$1, session);
  }
  async listFiles(path$1, options) {
    const context = await this.resolveExecution(options?.sessionId);
    const session = this.serializeExecutionContext(context);
    return this.client.files.listFiles(path$1, session, options);
  }
  async exists(path$1, sessionId) {
    const execution = await this.resolveExecution(sessionId);
    const session = this.serializeExecutionContext(execution);
    return this.client.files.exists(path$1, session);
  }
  /**
  * Watch a directory for file system changes using native inotify.
  *
  * The returned promise resolves only after the watcher is established on the
  * filesystem, so callers can immediately perform actions that depend on the
  * watch being active. The returned stream contains the full event sequence
  * starting with the `watching` event.
  *
  * Consume the stream with `parseSSEStream<FileWatchSSEEvent>(stream)`.
  *
  * @param path - Path to watch (absolute or relative to /workspace)
  * @param options - Watch options
  */
  async watch(path$1, options = {}) {
    const execution = await this.resolveExecution(options.sessionId);
    const sessionId = this.serializeExecutionContext(execution);
    return this.client.watch.watch({
      path: path$1,
      recursive: options.recursive,
      include: options.include,
      exclude: options.exclude,
      sessionId
    });
  }
  /**
  * Check whether a path changed while this caller was disconnected.
  *
  * Pass the `version` returned from a prior call in `options.since` to learn
  * whether the path is unchanged, changed, or needs a full resync because the
  * retained change state was reset.
  *
  * @param path - Path to check (absolute or relative to /workspace)
  * @param options - Change-check options
  */
  async checkChanges(path$1, options = {}) {
    const execution = await this.resolveExecution(options.sessionId);
    const sessionId = this.serializeExecutionContext(execution);
    return this.client.watch.checkChanges({
      path: path$1,
      recursive: options.recursive,
      include: options.include,
      exclude: options.exclude,
      since: options.since,
      sessionId
    });
  }
  /**
  * Expose a port and get a preview URL for accessing services running in the sandbox
  *
  * Preview URL authorization survives transient container restarts, but
  * forwarding is active only for the runtime where `exposePort()` was last
  * called. Call `exposePort()` again after a restart to reactivate an
  * existing URL for the current runtime.
  *
  * @param port - Port number to expose (1024-65535)
  * @param options - Configuration options
  * @param options.hostname - Your Worker's domain name (required for preview URL construction)
  * @param options.name - Optional friendly name for the port
  * @param options.token - Optional custom token for the preview URL (1-16 characters: lowercase letters, numbers, underscores)
  *                       If not provided, a random 16-character token will be generated automatically
  * @returns Preview URL information including the full URL, port number, and optional name
  *
  * @example
  * // With auto-generated token
  * const { url } = await sandbox.exposePort(8080, { hostname: 'example.com' });
  * // url: https://8080-sandbox-id-abc123random4567.example.com
  *
  * @example
  * // With custom token for stable URLs across deployments
  * const { url } = await sandbox.exposePort(8080, {
  *   hostname: 'example.com',
  *   token: 'my_token_v1'
  * });
  * // url: https://8080-sandbox-id-my_token_v1.example.com
  */
  async exposePort(port, options) {
    const exposeStartTime = Date.now();
    let outcome = "error";
    let caughtError;
    try {
      if (!validatePort(port)) throw new SandboxSecurityError(`Invalid port number: ${port}. Must be 1024-65535, excluding 3000 (sandbox control plane).`);
      if (options.hostname.endsWith(".workers.dev")) throw new CustomDomainRequiredError({
        code: ErrorCode.CUSTOM_DOMAIN_REQUIRED,
        message: `Port exposure requires a custom domain. .workers.dev domains do not support wildcard subdomains required for port proxying.`,
        context: { originalError: options.hostname },
        httpStatus: 400,
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      if (!this.sandboxName) throw new Error("Sandbox name not available. Ensure sandbox is accessed through getSandbox()");
      if (options.token !== void 0) this.validateCustomToken(options.token);
      await this.ensureDefaultSession();
      let runtime = await this.currentRuntime.get();
      runtime = runtime ?? await this.currentRuntime.markStarted();
      await this.currentRuntime.assertActive(runtime);
      const token = await this.ctx.storage.transaction(async (txn) => {
        const tokens = await this.readPortTokens(txn);
        const existingEntry = tokens[port.toString()];
        const nextToken = options.token ?? existingEntry?.token ?? this.generatePortToken();
        const existingPort = Object.entries(tokens).find(([p, entry]) => entry.token === nextToken && p !== port.toString());
        if (existingPort) throw new SandboxSecurityError(`Token '${nextToken}' is already in use by port ${existingPort[0]}. Please use a different token.`);
        const activations = await this.readActivePreviewPorts(txn);
        tokens[port.toString()] = {
          token: nextToken,
          name: options.name
        };
        activations[port.toString()] = runtime.scope({ token: nextToken });
        await Promise.all([txn.put(PORT_TOKENS_STORAGE_KEY, tokens), this.writeActivePreviewPorts(activations, txn)]);
        return nextToken;
      });
      await this.currentRuntime.assertActive(runtime);
      const url = this.constructPreviewUrl(port, this.sandboxName, options.hostname, token);
      outcome = "success";
      return {
        url,
        port,
        name: options.name
      };
    } catch (error) {
      caughtError = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      logCanonicalEvent(this.logger, {
        event: "port.expose",
        outcome,
        port,
        durationMs: Date.now() - exposeStartTime,
        name: options.name,
        hostname: options.hostname,
        error: caughtError
      });
    }
  }
  /**
  * Revoke preview URL authorization and current-runtime activation for a port.
  *
  * Revocation is idempotent: calling this for a port with no preview state is
  * still successful. The operation clears Durable Object-owned preview state
  * only and does not contact, probe, wake, or clean up the container runtime.
  */
  async unexposePort(port) {
    const unexposeStartTime = Date.now();
    let outcome = "error";
    let caughtError;
    try {
      if (!validatePort(port)) throw new SandboxSecurityError(`Invalid port number: ${port}. Must be 1024-65535, excluding 3000 (sandbox control plane).`);
      await this.ctx.storage.transaction(async (txn) => {
        const tokens = await this.readPortTokens(txn);
        if (tokens[port.toString()]) {
          delete tokens[port.toString()];
          await txn.put(PORT_TOKENS_STORAGE_KEY, tokens);
        }
        const activations = await this.readActivePreviewPorts(txn);
        if (activations[port.toString()]) {
          delete activations[port.toString()];
          await this.writeActivePreviewPorts(activations, txn);
        }
      });
      outcome = "success";
    } catch (error) {
      caughtError = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      logCanonicalEvent(this.logger, {
        event: "port.unexpose",
        outcome,
        port,
        durationMs: Date.now() - unexposeStartTime,
        error: caughtError
      });
    }
  }
  /**
  * Returns preview URLs that are currently forwardable in the active runtime.
  * Durable authorization without current-runtime activation is omitted.
  */
  async getExposedPorts(hostname) {
    if (!this.sandboxName) throw new Error("Sandbox name not available. Ensure sandbox is accessed through getSandbox()");
    return (await this.getCurrentPreviewPorts()).map(({ port, entry }) => ({
      url: this.constructPreviewUrl(port, this.sandboxName, hostname, entry.token),
      port,
      status: "active"
    }));
  }
  /**
  * Namespaced tunnel API. Quick tunnels are zero-config preview URLs
  * backed by Cloudflare's trycloudflare service.
  *
  * - `tunnels.get(port)` — idempotent. Returns the cached tunnel for
  *   `port` if one exists in DO storage, otherwise spawns a fresh
  *   cloudflared process and persists the record.
  * - `tunnels.list()` — records currently known to this sandbox, from
  *   DO storage.
  * - `tunnels.destroy(portOrInfo)` — tear down by port number or by
  *   the record returned from `get()`.
  *
  * Storage is cleared on container restart (`onStart`), so URLs do
  * not survive a container restart — the next `get(port)` call will
  * spawn a fresh tunnel with a new URL.
  *
  * Requires the RPC transport. Calling this on a route-based transport
  * throws "RPC transport required".
  */
  get tunnels() {
    this.ensureTunnelsBuilt();
    return this.tunnelsHandler;
  }
  /**
  * Lazily construct both the public tunnels handler and its sibling
  * exit-handler callback. Called from the `tunnels` getter on first
  * access and on every access after a transport swap clears both
  * fields.
  */
  ensureTunnelsBuilt() {
    if (this.tunnelsHandler) return;
    const built = createTunnelsHandler({
      client: this.client,
      storage: this.ctx.storage,
      logger: this.logger,
      sandboxId: this.ctx.id.toString(),
      currentRuntime: this.currentRuntime,
      currentLifetime: this.currentLifetime,
      getNamedTunnelConfig: /* @__PURE__ */ __name(async () => {
        const envObj = this.env;
        const token = getEnvString(envObj, "CLOUDFLARE_API_TOKEN");
        if (!token) throw new Error("Named tunnels require CLOUDFLARE_API_TOKEN. Set it as a secret in your wrangler.jsonc.");
        const accountId = await this.getTunnelAccountId();
        return {
          token,
          accountId,
          zoneId: await this.getTunnelZoneId(token, accountId)
        };
      }, "getNamedTunnelConfig")
    });
    this.tunnelsHandler = built.tunnels;
    this.tunnelExitHandler = built.handleTunnelExit;
    this.destroyAllTunnels = built.destroyAll;
  }
  /**
  * Resolve the Cloudflare account id used for named-tunnel provisioning.
  *
  * Memoised for the lifetime of this DO instance. The first call may hit
  * `GET /user/tokens/verify` to derive the account id from the configured
  * `CLOUDFLARE_API_TOKEN`; subsequent calls return the cached promise.
  *
  * Only successful resolutions are cached: a rejected lookup clears the
  * slot so the next caller retries. Otherwise a transient failure on
  * first use would permanently poison every later named-tunnel `get()`
  * on this DO instance.
  */
  getTunnelAccountId() {
    if (!this.tunnelAccountIdPromise) {
      const pending = resolveAccountId(this.env, { overrideKey: "CLOUDFLARE_TUNNEL_ACCOUNT_ID" });
      this.tunnelAccountIdPromise = pending;
      pending.catch(() => {
        if (this.tunnelAccountIdPromise === pending) this.tunnelAccountIdPromise = null;
      });
    }
    return this.tunnelAccountIdPromise;
  }
  /**
  * Resolve the Cloudflare zone id used for named-tunnel provisioning.
  *
  * Memoised for the lifetime of this DO instance. Falls back to the
  * single zone the token can see under `accountId` via `GET /zones`
  * when `CLOUDFLARE_ZONE_ID` is not set. Failed lookups clear the cache
  * so the next caller retries — see `getTunnelAccountId` for the
  * rationale.
  */
  getTunnelZoneId(token, accountId) {
    if (!this.tunnelZoneIdPromise) {
      const pending = resolveZoneId(this.env, {
        token,
        accountId
      });
      this.tunnelZoneIdPromise = pending;
      pending.catch(() => {
        if (this.tunnelZoneIdPromise === pending) this.tunnelZoneIdPromise = null;
      });
    }
    return this.tunnelZoneIdPromise;
  }
  /**
  * Returns whether a port is currently preview-forwardable.
  * This checks Durable Object-owned auth and runtime activation without
  * contacting or waking the container.
  */
  async isPortExposed(port) {
    if (!validatePort(port)) return false;
    return (await this.getCurrentPreviewPorts()).some((activePort) => activePort.port === port);
  }
  /**
  * Checks durable preview URL authorization for a port/token pair.
  *
  * This does not check whether the port is activated for the current runtime
  * and is not sufficient to decide whether preview traffic may forward.
  */
  async validatePortToken(port, token) {
    const entry = (await this.readPortTokens())[port.toString()];
    if (!entry) return false;
    return this.previewTokensMatch(entry.token, token);
  }
  async validatePreviewURLForRuntime(port, token) {
    const containerState = await this.getState();
    const containerRunning = this.ctx.container?.running === true;
    const { tokens, activations, runtime } = await this.ctx.storage.transaction(async (txn) => {
      const [previewState, runtime$1] = await Promise.all([this.readPreviewState(txn), this.currentRuntime.getStored(txn)]);
      return {
        ...previewState,
        runtime: runtime$1
      };
    });
    const entry = tokens[port.toString()];
    if (!entry) return { status: "invalid" };
    if (!this.previewTokensMatch(entry.token, token)) return { status: "invalid" };
    if (containerState.status !== "healthy") return {
      status: "stale",
      reason: "runtime-not-healthy",
      containerStatus: containerState.status
    };
    if (!containerRunning) return {
      status: "stale",
      reason: "runtime-not-running",
      containerStatus: containerState.status
    };
    if (!runtime) return {
      status: "stale",
      reason: "missing-runtime-id",
      containerStatus: containerState.status
    };
    const activation = activations[port.toString()];
    if (!activation) return {
      status: "stale",
      reason: "missing-activation",
      containerStatus: containerState.status
    };
    if (!runtime.owns(activation)) return {
      status: "stale",
      reason: "runtime-mismatch",
      containerStatus: containerState.status
    };
    if (!this.previewTokensMatch(activation.token, token)) {
      this.logger.warn("Preview URL activation token mismatch", {
        port,
        runtimeIdentityID: runtime.id
      });
      return {
        status: "stale",
        reason: "token-mismatch",
        containerStatus: containerState.status
      };
    }
    return {
      status: "active",
      runtime
    };
  }
  async getCurrentPreviewPorts() {
    const containerState = await this.getState();
    const containerRunning = this.ctx.container?.running === true;
    const { tokens, activations, runtime } = await this.ctx.storage.transaction(async (txn) => {
      const [previewState, runtime$1] = await Promise.all([this.readPreviewState(txn), this.currentRuntime.getStored(txn)]);
      return {
        ...previewState,
        runtime: runtime$1
      };
    });
    if (containerState.status !== "healthy" || !containerRunning || !runtime) return [];
    const activePorts = [];
    for (const [portKey, activation] of Object.entries(activations)) {
      const port = Number.parseInt(portKey, 10);
      const entry = tokens[portKey];
      if (!entry || !Number.isInteger(port) || !validatePort(port)) continue;
      if (!runtime.owns(activation)) continue;
      if (!this.previewTokensMatch(entry.token, activation.token)) continue;
      activePorts.push({
        port,
        entry
      });
    }
    return activePorts.sort((a, b) => a.port - b.port);
  }
  previewTokensMatch(expected, actual) {
    const encoder2 = new TextEncoder();
    const a = encoder2.encode(expected);
    const b = encoder2.encode(actual);
    try {
      return crypto.subtle.timingSafeEqual(a, b);
    } catch {
      return false;
    }
  }
  validateCustomToken(token) {
    if (token.length === 0) throw new SandboxSecurityError(`Custom token cannot be empty.`);
    if (token.length > 16) throw new SandboxSecurityError(`Custom token too long. Maximum 16 characters allowed. Received: ${token.length} characters.`);
    if (!/^[a-z0-9_]+$/.test(token)) throw new SandboxSecurityError(`Custom token must contain only lowercase letters (a-z), numbers (0-9), and underscores (_). Invalid token provided.`);
  }
  generatePortToken() {
    const array = new Uint8Array(12);
    crypto.getRandomValues(array);
    return btoa(String.fromCharCode(...array)).replace(/\+/g, "_").replace(/\//g, "_").replace(/=/g, "").toLowerCase();
  }
  constructPreviewUrl(port, sandboxId, hostname, token) {
    if (!validatePort(port)) throw new SandboxSecurityError(`Invalid port number: ${port}. Must be 1024-65535, excluding 3000 (sandbox control plane).`);
    const effectiveId = this.sandboxName || sandboxId;
    const hasUppercase = /[A-Z]/.test(effectiveId);
    if (!this.normalizeId && hasUppercase) throw new SandboxSecurityError(`Preview URLs require lowercase sandbox IDs. Your ID "${effectiveId}" contains uppercase letters.

To fix this:
1. Create a new sandbox with: getSandbox(ns, "${effectiveId}", { normalizeId: true })
2. This will create a sandbox with ID: "${effectiveId.toLowerCase()}"

Note: Due to DNS case-insensitivity, IDs with uppercase letters cannot be used with preview URLs.`);
    const sanitizedSandboxId = sanitizeSandboxId(sandboxId).toLowerCase();
    if (isLocalhostPattern(hostname)) {
      const [host, portStr] = hostname.split(":");
      const mainPort = portStr || "80";
      try {
        const baseUrl = new URL(`http://${host}:${mainPort}`);
        baseUrl.hostname = `${port}-${sanitizedSandboxId}-${token}.${host}`;
        return baseUrl.toString();
      } catch (error) {
        throw new SandboxSecurityError(`Failed to construct preview URL: ${error instanceof Error ? error.message : "Unknown error"}`);
      }
    }
    try {
      const baseUrl = new URL(`https://${hostname}`);
      baseUrl.hostname = `${port}-${sanitizedSandboxId}-${token}.${hostname}`;
      return baseUrl.toString();
    } catch (error) {
      throw new SandboxSecurityError(`Failed to construct preview URL: ${error instanceof Error ? error.message : "Unknown error"}`);
    }
  }
  /**
  * Create isolated execution session for advanced use cases
  * Returns ExecutionSession with full sandbox API bound to specific session
  */
  async createSession(options) {
    const sessionId = options?.id || `session-${Date.now()}`;
    if (sessionId === DISABLE_SESSION_TOKEN) throw new Error(`Session ID '${DISABLE_SESSION_TOKEN}' is reserved for internal use`);
    const filteredEnv = filterEnvVars({
      ...this.envVars,
      ...options?.env ?? {}
    });
    const envPayload = Object.keys(filteredEnv).length > 0 ? filteredEnv : void 0;
    const response = await this.client.utils.createSession({
      id: sessionId,
      ...envPayload && { env: envPayload },
      ...options?.cwd && { cwd: options.cwd },
      ...options?.commandTimeoutMs !== void 0 && { commandTimeoutMs: options.commandTimeoutMs }
    });
    await this.capturePlacementId(response.containerPlacementId);
    return this.getSessionWrapper(sessionId);
  }
  /**
  * Get an existing session by ID
  * Returns ExecutionSession wrapper bound to the specified session
  *
  * This is useful for retrieving sessions across different requests/contexts
  * without storing the ExecutionSession object (which has RPC lifecycle limitations)
  *
  * @param sessionId - The ID of an existing session
  * @returns ExecutionSession wrapper bound to the session
  */
  async getSession(sessionId) {
    return this.getSessionWrapper(sessionId);
  }
  /**
  * Delete an execution session
  * Cleans up session resources and removes it from the container
  * Note: Cannot delete the default session. To reset the default session,
  * use sandbox.destroy() to terminate the entire sandbox.
  *
  * @param sessionId - The ID of the session to delete
  * @returns Result with success status, sessionId, and timestamp
  * @throws Error if attempting to delete the default session
  */
  async deleteSession(sessionId) {
    if (this.defaultSession && sessionId === this.defaultSession) throw new Error(`Cannot delete default session '${sessionId}'. Use sandbox.destroy() to terminate the sandbox.`);
    const response = await this.client.utils.deleteSession(sessionId);
    return {
      success: response.success,
      sessionId: response.sessionId,
      timestamp: response.timestamp
    };
  }
  /**
  * Get the Cloudflare placement ID observed for the underlying container.
  *
  * The placement ID is captured during the first session-create handshake
  * after a container start and stored in Durable Object storage, so this
  * method returns the cached value without contacting the container. A new
  * placement ID is captured on each subsequent session-create handshake,
  * which occurs whenever the container has been replaced.
  *
  * Returns `null` when a handshake has completed but the container's
  * `CLOUDFLARE_PLACEMENT_ID` environment variable is not set (for example,
  * in local development).
  *
  * Returns `undefined` when no handshake has been observed yet on this
  * sandbox. Call any method that triggers session creation (such as
  * `exec()`) to populate the value.
  */
  async getContainerPlacementId() {
    return this.ctx.storage.get("containerPlacementId");
  }
  getSessionWrapper(sessionId) {
    return {
      id: sessionId,
      terminal: null,
      exec: /* @__PURE__ */ __name((command, options) => this.execWithSession(command, sessionId, options), "exec"),
      execStream: /* @__PURE__ */ __name((command, options) => this.execStreamWithSession(command, sessionId, options), "execStream"),
      startProcess: /* @__PURE__ */ __name((command, options) => this.startProcess(command, options, sessionId), "startProcess"),
      listProcesses: /* @__PURE__ */ __name(() => this.listProcesses(sessionId), "listProcesses"),
      getProcess: /* @__PURE__ */ __name((id) => this.getProcess(id, sessionId), "getProcess"),
      killProcess: /* @__PURE__ */ __name((id, signal) => this.killProcess(id, signal), "killProcess"),
      killAllProcesses: /* @__PURE__ */ __name(() => this.killAllProcesses(), "killAllProcesses"),
      cleanupCompletedProcesses: /* @__PURE__ */ __name(() => this.cleanupCompletedProcesses(), "cleanupCompletedProcesses"),
      getProcessLogs: /* @__PURE__ */ __name((id) => this.getProcessLogs(id), "getProcessLogs"),
      streamProcessLogs: /* @__PURE__ */ __name((processId, options) => this.streamProcessLogs(processId, options), "streamProcessLogs"),
      writeFile: /* @__PURE__ */ __name((path$1, content, options) => this.writeFile(path$1, content, {
        ...options,
        sessionId
      }), "writeFile"),
      readFile: /* @__PURE__ */ __name(((path$1, options) => {
        const encoding = options?.encoding;
        if (encoding === "none") return this.readFile(path$1, {
          encoding: "none",
          sessionId
        });
        return this.readFile(path$1, {
          encoding,
          sessionId
        });
      }), "readFile"),
      readFileStream: /* @__PURE__ */ __name((path$1) => this.readFileStream(path$1, { sessionId }), "readFileStream"),
      watch: /* @__PURE__ */ __name((path$1, options) => this.watch(path$1, {
        ...options,
        sessionId
      }), "watch"),
      checkChanges: /* @__PURE__ */ __name((path$1, options) => this.checkChanges(path$1, {
        ...options,
        sessionId
      }), "checkChanges"),
      mkdir: /* @__PURE__ */ __name((path$1, options) => this.mkdir(path$1, {
        ...options,
        sessionId
      }), "mkdir"),
      deleteFile: /* @__PURE__ */ __name((path$1) => this.deleteFile(path$1, sessionId), "deleteFile"),
      renameFile: /* @__PURE__ */ __name((oldPath, newPath) => this.renameFile(oldPath, newPath, sessionId), "renameFile"),
      moveFile: /* @__PURE__ */ __name((sourcePath, destPath) => this.moveFile(sourcePath, destPath, sessionId), "moveFile"),
      listFiles: /* @__PURE__ */ __name((path$1, options) => this.client.files.listFiles(path$1, sessionId, options), "listFiles"),
      exists: /* @__PURE__ */ __name((path$1) => this.exists(path$1, sessionId), "exists"),
      gitCheckout: /* @__PURE__ */ __name((repoUrl, options) => this.gitCheckout(repoUrl, {
        ...options,
        sessionId
      }), "gitCheckout"),
      setEnvVars: /* @__PURE__ */ __name(async (envVars) => {
        const { toSet, toUnset } = partitionEnvVars(envVars);
        try {
          for (const key of toUnset) {
            const unsetCommand = `unset ${key}`;
            const result = await this.client.commands.execute(unsetCommand, sessionId, { origin: "internal" });
            if (result.exitCode !== 0) throw new Error(`Failed to unset ${key}: ${result.stderr || "Unknown error"}`);
          }
          for (const [key, value] of Object.entries(toSet)) {
            const exportCommand = `export ${key}=${shellEscape(value)}`;
            const result = await this.client.commands.execute(exportCommand, sessionId, { origin: "internal" });
            if (result.exitCode !== 0) throw new Error(`Failed to set ${key}: ${result.stderr || "Unknown error"}`);
          }
        } catch (error) {
          this.logger.error("Failed to set environment variables", error instanceof Error ? error : new Error(String(error)), { sessionId });
          throw error;
        }
      }, "setEnvVars"),
      createCodeContext: /* @__PURE__ */ __name((options) => this.codeInterpreter.createCodeContext(options), "createCodeContext"),
      runCode: /* @__PURE__ */ __name(async (code, options) => {
        return (await this.codeInterpreter.runCode(code, options)).toJSON();
      }, "runCode"),
      runCodeStream: /* @__PURE__ */ __name((code, options) => this.codeInterpreter.runCodeStream(code, options), "runCodeStream"),
      listCodeContexts: /* @__PURE__ */ __name(() => this.codeInterpreter.listCodeContexts(), "listCodeContexts"),
      deleteCodeContext: /* @__PURE__ */ __name((contextId) => this.codeInterpreter.deleteCodeContext(contextId), "deleteCodeContext"),
      mountBucket: /* @__PURE__ */ __name((bucket, mountPath, options) => this.mountBucket(bucket, mountPath, options), "mountBucket"),
      unmountBucket: /* @__PURE__ */ __name((mountPath) => this.unmountBucket(mountPath), "unmountBucket"),
      createBackup: /* @__PURE__ */ __name((options) => this.createBackup(options), "createBackup"),
      restoreBackup: /* @__PURE__ */ __name((backup) => this.restoreBackup(backup), "restoreBackup")
    };
  }
  async createCodeContext(options) {
    return this.codeInterpreter.createCodeContext(options);
  }
  async runCode(code, options) {
    return (await this.codeInterpreter.runCode(code, options)).toJSON();
  }
  async runCodeStream(code, options) {
    return this.codeInterpreter.runCodeStream(code, options);
  }
  async listCodeContexts() {
    return this.codeInterpreter.listCodeContexts();
  }
  async deleteCodeContext(contextId) {
    return this.codeInterpreter.deleteCodeContext(contextId);
  }
  /** UUID v4 format validator for backup IDs */
  static UUID_REGEX = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
  /**
  * Validate that a directory path is safe for backup operations.
  * Rejects empty, relative, traversal, null-byte, and unsupported-root paths.
  */
  static validateBackupDir(dir, label) {
    if (!dir || !dir.startsWith("/")) throw new InvalidBackupConfigError({
      message: `${label} must be an absolute path`,
      code: ErrorCode.INVALID_BACKUP_CONFIG,
      httpStatus: 400,
      context: { reason: `${label} must be an absolute path` },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    if (dir.includes("\0")) throw new InvalidBackupConfigError({
      message: `${label} must not contain null bytes`,
      code: ErrorCode.INVALID_BACKUP_CONFIG,
      httpStatus: 400,
      context: { reason: `${label} must not contain null bytes` },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    if (dir.split("/").includes("..")) throw new InvalidBackupConfigError({
      message: `${label} must not contain ".." path segments`,
      code: ErrorCode.INVALID_BACKUP_CONFIG,
      httpStatus: 400,
      context: { reason: `${label} must not contain ".." path segments` },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    if (!BACKUP_ALLOWED_PREFIXES.some((prefix) => dir === prefix || dir.startsWith(`${prefix}/`))) throw new InvalidBackupConfigError({
      message: `${label} must be inside one of the supported backup roots (${BACKUP_ALLOWED_PREFIXES.join(", ")})`,
      code: ErrorCode.INVALID_BACKUP_CONFIG,
      httpStatus: 400,
      context: { reason: `${label} must be inside one of the supported backup roots` },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
  }
  /**
  * Returns the R2 bucket or throws if backup is not configured.
  */
  requireBackupBucket() {
    if (!this.backupBucket) throw new InvalidBackupConfigError({
      message: "Backup not configured. Add a BACKUP_BUCKET R2 binding to your wrangler.jsonc.",
      code: ErrorCode.INVALID_BACKUP_CONFIG,
      httpStatus: 400,
      context: { reason: "Missing BACKUP_BUCKET R2 binding" },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    return this.backupBucket;
  }
  normalizeBackupExcludes(excludes) {
    const normalizedExcludes = [];
    for (const pattern of excludes) {
      const normalized = normalizeBackupExcludePattern(pattern);
      if (normalized === null) {
        this.logger.warn("Exclude pattern reduced to empty after globstar normalization; skipping", { original: pattern });
        continue;
      }
      if (normalized !== pattern) this.logger.warn("Exclude pattern contained ** (globstar) which mksquashfs does not support; normalized automatically", {
        original: pattern,
        normalized
      });
      normalizedExcludes.push(normalized);
    }
    return normalizedExcludes;
  }
  resolveBackupCompression(compression) {
    if (compression !== void 0) {
      if (typeof compression !== "object" || compression === null) throw new InvalidBackupConfigError({
        message: "BackupOptions.compression must be an object",
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: "compression must be an object" },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
    }
    const compressionOptions = compression;
    const format = compressionOptions?.format ?? BACKUP_DEFAULT_COMPRESSION;
    const threads = compressionOptions?.threads ?? BACKUP_DEFAULT_COMPRESS_THREADS;
    if (typeof format !== "string" || ![
      "gzip",
      "lz4",
      "zstd"
    ].includes(format)) throw new InvalidBackupConfigError({
      message: "BackupOptions.compression.format must be one of: gzip, lz4, zstd",
      code: ErrorCode.INVALID_BACKUP_CONFIG,
      httpStatus: 400,
      context: { reason: "compression.format must be one of: gzip, lz4, zstd" },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    if (typeof threads !== "number" || !Number.isInteger(threads) || threads < 1) throw new InvalidBackupConfigError({
      message: "BackupOptions.compression.threads must be a positive integer",
      code: ErrorCode.INVALID_BACKUP_CONFIG,
      httpStatus: 400,
      context: { reason: "compression.threads must be a positive integer" },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    return {
      format,
      threads
    };
  }
  static PRESIGNED_URL_EXPIRY_SECONDS = 3600;
  /**
  * Create a unique, dedicated session for a single backup operation.
  * Each call produces a fresh session ID so concurrent or sequential
  * operations never share shell state. Callers must destroy the session
  * in a finally block via `client.utils.deleteSession()`.
  */
  async ensureBackupSession() {
    const sessionId = `__sandbox_backup_${crypto.randomUUID()}`;
    await this.client.utils.createSession({
      id: sessionId,
      cwd: "/"
    });
    return sessionId;
  }
  /**
  * Returns validated presigned URL configuration or throws if not configured.
  * All credential fields plus the R2 binding are required for backup to work.
  */
  requirePresignedURLSupport() {
    if (!this.r2Client || !this.r2AccountId || !this.backupBucketName) {
      const missing = [];
      if (!this.r2AccountId) missing.push("CLOUDFLARE_R2_ACCOUNT_ID or CLOUDFLARE_ACCOUNT_ID");
      if (!this.r2AccessKeyId) missing.push("R2_ACCESS_KEY_ID");
      if (!this.r2SecretAccessKey) missing.push("R2_SECRET_ACCESS_KEY");
      if (!this.backupBucketName) missing.push("BACKUP_BUCKET_NAME");
      throw new InvalidBackupConfigError({
        message: `Backup requires R2 presigned URL credentials. Missing: ${missing.join(", ")}. Set these as environment variables or secrets in your wrangler.jsonc.`,
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: `Missing env vars: ${missing.join(", ")}` },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
    }
    return {
      client: this.r2Client,
      accountId: this.r2AccountId,
      bucketName: this.backupBucketName
    };
  }
  getBackupBucketEndpoint(accountId) {
    return this.backupBucketEndpoint ?? `https://${accountId}.r2.cloudflarestorage.com`;
  }
  getBackupObjectURL(accountId, bucketName, r2Key) {
    const encodedBucket = encodeURIComponent(bucketName);
    const encodedKey = r2Key.split("/").map((seg) => encodeURIComponent(seg)).join("/");
    return new URL(`${this.getBackupBucketEndpoint(accountId)}/${encodedBucket}/${encodedKey}`);
  }
  /**
  * Generate a presigned GET URL for downloading an object from R2.
  * The container can curl this URL directly without credentials.
  */
  async generatePresignedGetURL(r2Key) {
    const { client, accountId, bucketName } = this.requirePresignedURLSupport();
    const url = this.getBackupObjectURL(accountId, bucketName, r2Key);
    url.searchParams.set("X-Amz-Expires", String(Sandbox2.PRESIGNED_URL_EXPIRY_SECONDS));
    return (await client.sign(new Request(url), { aws: { signQuery: true } })).url;
  }
  /**
  * Generate a presigned PUT URL for uploading an object to R2.
  * The container can curl PUT to this URL directly without credentials.
  */
  async generatePresignedPutURL(r2Key) {
    const { client, accountId, bucketName } = this.requirePresignedURLSupport();
    const url = this.getBackupObjectURL(accountId, bucketName, r2Key);
    url.searchParams.set("X-Amz-Expires", String(Sandbox2.PRESIGNED_URL_EXPIRY_SECONDS));
    return (await client.sign(new Request(url, { method: "PUT" }), { aws: { signQuery: true } })).url;
  }
  /**
  * Upload a backup archive via presigned PUT URL.
  * The container curls the archive directly to R2, bypassing the DO.
  * ~24 MB/s throughput vs ~0.6 MB/s for base64 readFile.
  */
  async uploadBackupPresigned(archivePath, r2Key, archiveSize, backupId, dir, backupSession) {
    const presignedURL = await this.generatePresignedPutURL(r2Key);
    const curlCmd = [
      "curl -sSf",
      "-X PUT",
      "-H 'Content-Type: application/octet-stream'",
      "--connect-timeout 10",
      "--max-time 1800",
      "--retry 2",
      "--retry-max-time 60",
      `-T ${shellEscape(archivePath)}`,
      shellEscape(presignedURL)
    ].join(" ");
    const result = await this.execWithSession(curlCmd, backupSession, {
      timeout: 181e4,
      origin: "internal"
    });
    if (result.exitCode !== 0) throw new BackupCreateError({
      message: `Presigned URL upload failed (exit code ${result.exitCode}): ${result.stderr}`,
      code: ErrorCode.BACKUP_CREATE_FAILED,
      httpStatus: 500,
      context: {
        dir,
        backupId
      },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    const head = await this.requireBackupBucket().head(r2Key);
    if (!head || head.size !== archiveSize) {
      const actualSize = head?.size ?? 0;
      throw new BackupCreateError({
        message: `Upload verification failed: expected ${archiveSize} bytes, got ${actualSize}.${result.exitCode === 0 && actualSize === 0 ? ' This usually means the BACKUP_BUCKET R2 binding is using local storage while presigned URLs upload to remote R2. Add `"remote": true` to your BACKUP_BUCKET R2 binding in wrangler.jsonc to fix this.' : ""}`,
        code: ErrorCode.BACKUP_CREATE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
    }
  }
  /**
  * Generate a presigned PUT URL for a single part in a multipart upload.
  */
  async generatePresignedPartURL(r2Key, uploadId, partNumber) {
    const { client, accountId, bucketName } = this.requirePresignedURLSupport();
    const url = this.getBackupObjectURL(accountId, bucketName, r2Key);
    url.searchParams.set("X-Amz-Expires", String(Sandbox2.PRESIGNED_URL_EXPIRY_SECONDS));
    url.searchParams.set("partNumber", String(partNumber));
    url.searchParams.set("uploadId", uploadId);
    return (await client.sign(new Request(url, { method: "PUT" }), { aws: { signQuery: true } })).url;
  }
  /**
  * Upload a backup archive to R2 using parallel multipart upload.
  * Uses the S3-compatible API exclusively for create/complete/abort so that
  * the uploadId is in the same namespace as the presigned part PUT URLs.
  */
  async uploadBackupMultipart(archivePath, r2Key, sizeBytes, backupId, dir, backupSession) {
    const targetParts = calculatePartCount(sizeBytes, BACKUP_MULTIPART_TARGET_PARTS, BACKUP_MULTIPART_MAX_PARTS);
    const numParts = Math.min(targetParts, Math.floor(sizeBytes / BACKUP_MULTIPART_MIN_PART_SIZE));
    if (numParts <= 1) return this.uploadBackupPresigned(archivePath, r2Key, sizeBytes, backupId, dir, backupSession);
    const { client, accountId, bucketName } = this.requirePresignedURLSupport();
    const objectURL = this.getBackupObjectURL(accountId, bucketName, r2Key).toString();
    const createResp = await client.fetch(`${objectURL}?uploads`, { method: "POST" });
    if (!createResp.ok) throw new BackupCreateError({
      message: `Failed to initiate multipart upload: HTTP ${createResp.status}`,
      code: ErrorCode.BACKUP_CREATE_FAILED,
      httpStatus: 500,
      context: {
        dir,
        backupId
      },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    const uploadId = (await createResp.text()).match(/<UploadId>([^<]+)<\/UploadId>/)?.[1];
    if (!uploadId) throw new BackupCreateError({
      message: "Multipart upload response did not contain an UploadId",
      code: ErrorCode.BACKUP_CREATE_FAILED,
      httpStatus: 500,
      context: {
        dir,
        backupId
      },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    const abortMultipart = /* @__PURE__ */ __name(async () => {
      await client.fetch(`${objectURL}?uploadId=${encodeURIComponent(uploadId)}`, { method: "DELETE" }).catch(() => {
      });
    }, "abortMultipart");
    try {
      const partSize = Math.ceil(sizeBytes / numParts);
      const parts = await Promise.all(Array.from({ length: numParts }, (_, i) => ({
        partNumber: i + 1,
        url: "",
        offset: i * partSize,
        size: i === numParts - 1 ? sizeBytes - i * partSize : partSize
      })).map(async (part) => ({
        ...part,
        url: await this.generatePresignedPartURL(r2Key, uploadId, part.partNumber)
      })));
      let uploadResult;
      try {
        uploadResult = await this.client.backup.uploadParts({
          archivePath,
          parts,
          sessionId: backupSession
        });
      } catch (err) {
        if (err instanceof SandboxError && err.errorResponse.httpStatus === 404) {
          await abortMultipart();
          return this.uploadBackupPresigned(archivePath, r2Key, sizeBytes, backupId, dir, backupSession);
        }
        throw err;
      }
      if (!uploadResult.success || uploadResult.parts.length !== numParts) throw new BackupCreateError({
        message: `Multipart upload returned ${uploadResult.parts.length} of ${numParts} parts`,
        code: ErrorCode.BACKUP_CREATE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const completeXml = [
        "<CompleteMultipartUpload>",
        ...uploadResult.parts.map((p) => `<Part><PartNumber>${p.partNumber}</PartNumber><ETag>${p.etag}</ETag></Part>`),
        "</CompleteMultipartUpload>"
      ].join("");
      const completeResp = await client.fetch(`${objectURL}?uploadId=${encodeURIComponent(uploadId)}`, {
        method: "POST",
        headers: { "Content-Type": "application/xml" },
        body: completeXml
      });
      if (!completeResp.ok) {
        const body = await completeResp.text().catch(() => "");
        throw new BackupCreateError({
          message: `Multipart upload completion failed: HTTP ${completeResp.status} ${body}`,
          code: ErrorCode.BACKUP_CREATE_FAILED,
          httpStatus: 500,
          context: {
            dir,
            backupId
          },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
      }
      const head = await this.requireBackupBucket().head(r2Key);
      if (!head || head.size !== sizeBytes) throw new BackupCreateError({
        message: `Multipart upload verification failed: expected ${sizeBytes} bytes, got ${head?.size ?? 0}`,
        code: ErrorCode.BACKUP_CREATE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
    } catch (error) {
      await abortMultipart();
      throw error;
    }
  }
  /**
  * Download a backup archive from R2 via presigned GET URL.
  * For archives >= BACKUP_DOWNLOAD_PARALLEL_MIN_SIZE, uses BACKUP_DOWNLOAD_PARALLEL_PARTS
  * concurrent curl processes (each downloading a byte-range) to maximise both
  * network and disk-write throughput. Parts are written into a pre-sized file
  * with dd using byte offsets, then atomically moved to the final path.
  */
  async downloadBackupParallel(archivePath, r2Key, expectedSize, backupId, dir, backupSession) {
    const presignedURL = await this.generatePresignedGetURL(r2Key);
    await this.execWithSession(`mkdir -p ${BACKUP_CONTAINER_DIR}`, backupSession, { origin: "internal" });
    const tmpPath = `${archivePath}.tmp`;
    if (expectedSize < BACKUP_DOWNLOAD_PARALLEL_MIN_SIZE) {
      const curlCmd = [
        "curl -sSf",
        "--connect-timeout 10",
        "--max-time 1800",
        "--retry 2",
        "--retry-max-time 60",
        `-o ${shellEscape(tmpPath)}`,
        shellEscape(presignedURL)
      ].join(" ");
      const result = await this.execWithSession(curlCmd, backupSession, {
        timeout: 181e4,
        origin: "internal"
      });
      if (result.exitCode !== 0) {
        await this.execWithSession(`rm -f ${shellEscape(tmpPath)}`, backupSession, { origin: "internal" }).catch(() => {
        });
        throw new BackupRestoreError({
          message: `Presigned URL download failed (exit code ${result.exitCode}): ${result.stderr}`,
          code: ErrorCode.BACKUP_RESTORE_FAILED,
          httpStatus: 500,
          context: {
            dir,
            backupId
          },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
      }
    } else {
      const numParts = calculatePartCount(expectedSize, BACKUP_DOWNLOAD_PARALLEL_PARTS, BACKUP_DOWNLOAD_MAX_PARTS);
      const partSize = Math.floor(expectedSize / numParts);
      const startLines = Array.from({ length: numParts }, (_, i) => {
        const start = i * partSize;
        return {
          start,
          range: `${start}-${i < numParts - 1 ? start + partSize - 1 : expectedSize - 1}`
        };
      }).map(({ start, range }) => [
        "curl -sSf",
        "--connect-timeout 10",
        "--max-time 1800",
        `-H ${shellEscape(`Range: bytes=${range}`)}`,
        shellEscape(presignedURL),
        "|",
        "dd",
        `of=${shellEscape(tmpPath)}`,
        "oflag=seek_bytes",
        `seek=${start}`,
        "conv=notrunc",
        "2>/dev/null"
      ].join(" ")).map((cmd, i) => `(set -o pipefail; ${cmd}) & J${i}=$!`);
      const waitLines = Array.from({ length: numParts }, (_, i) => `wait $J${i}; E${i}=$?`);
      const exitVars = Array.from({ length: numParts }, (_, i) => `$E${i}`);
      const script = [
        `rm -f ${shellEscape(tmpPath)}`,
        `truncate -s ${expectedSize} ${shellEscape(tmpPath)}`,
        ...startLines,
        ...waitLines,
        `FAILED=$(( ${exitVars.join(" + ")} ))`,
        `if [ "$FAILED" -ne 0 ]; then rm -f ${shellEscape(tmpPath)}; exit 1; fi`
      ].join("; ");
      const result = await this.execWithSession(script, backupSession, {
        timeout: 181e4,
        origin: "internal"
      });
      if (result.exitCode !== 0) {
        await this.execWithSession(`rm -f ${shellEscape(tmpPath)}`, backupSession, { origin: "internal" }).catch(() => {
        });
        throw new BackupRestoreError({
          message: `Parallel download failed (exit code ${result.exitCode}): ${result.stderr}`,
          code: ErrorCode.BACKUP_RESTORE_FAILED,
          httpStatus: 500,
          context: {
            dir,
            backupId
          },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
      }
    }
    const sizeCheck = await this.execWithSession(`stat -c %s ${shellEscape(tmpPath)}`, backupSession, { origin: "internal" });
    const actualSize = parseInt(sizeCheck.stdout.trim(), 10);
    if (actualSize !== expectedSize) {
      await this.execWithSession(`rm -f ${shellEscape(tmpPath)}`, backupSession, { origin: "internal" }).catch(() => {
      });
      throw new BackupRestoreError({
        message: `Downloaded archive size mismatch: expected ${expectedSize}, got ${actualSize}`,
        code: ErrorCode.BACKUP_RESTORE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
    }
    const mvResult = await this.execWithSession(`mv ${shellEscape(tmpPath)} ${shellEscape(archivePath)}`, backupSession, { origin: "internal" });
    if (mvResult.exitCode !== 0) {
      await this.execWithSession(`rm -f ${shellEscape(tmpPath)}`, backupSession, { origin: "internal" }).catch(() => {
      });
      throw new BackupRestoreError({
        message: `Failed to finalize downloaded archive: ${mvResult.stderr}`,
        code: ErrorCode.BACKUP_RESTORE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
    }
  }
  /**
  * Serialize backup operations on this sandbox instance.
  * Concurrent backup/restore calls are queued so the multi-step
  * create-archive → read → upload (or mount → extract) flow
  * is not interleaved with another backup operation on the same directory.
  */
  async enqueueBackupOp(fn) {
    try {
      await this.backupInProgress;
    } catch {
    }
    const next = fn();
    this.backupInProgress = next.catch(() => {
    });
    return await next;
  }
  /**
  * Create a backup of a directory and upload it to R2.
  *
  * Flow:
  *   1. Container creates squashfs archive from the directory
  *   2. Container uploads the archive directly to R2 via presigned URL
  *   3. DO writes metadata to R2
  *   4. Container cleans up the local archive
  *
  * The returned DirectoryBackup handle is serializable. Store it anywhere
  * (KV, D1, DO storage) and pass it to restoreBackup() later.
  *
  * Concurrent backup/restore calls on the same sandbox are serialized.
  *
  * Partially-written files in the target directory may not be captured
  * consistently. Completed writes are captured.
  *
  * NOTE: Expired backups are not automatically deleted from R2. Configure
  * R2 lifecycle rules on the BACKUP_BUCKET to garbage-collect objects
  * under the `backups/` prefix after the desired retention period.
  */
  async createBackup(options) {
    if (options.localBucket) return await this.enqueueBackupOp(() => this.doCreateBackupLocal(options));
    this.requireBackupBucket();
    return await this.enqueueBackupOp(() => this.doCreateBackup(options));
  }
  async doCreateBackup(options) {
    const bucket = this.requireBackupBucket();
    this.requirePresignedURLSupport();
    const { dir, name, ttl = BACKUP_DEFAULT_TTL_SECONDS, gitignore = false, excludes = [], compression, multipart = true } = options;
    const backupStartTime = Date.now();
    let backupId;
    let sizeBytes;
    let outcome = "error";
    let caughtError;
    let backupSession;
    try {
      Sandbox2.validateBackupDir(dir, "BackupOptions.dir");
      if (name !== void 0) {
        if (typeof name !== "string" || name.length > BACKUP_MAX_NAME_LENGTH) throw new InvalidBackupConfigError({
          message: `BackupOptions.name must be a string of at most ${BACKUP_MAX_NAME_LENGTH} characters`,
          code: ErrorCode.INVALID_BACKUP_CONFIG,
          httpStatus: 400,
          context: { reason: `name must be a string of at most ${BACKUP_MAX_NAME_LENGTH} characters` },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
        if (/[\u0000-\u001f\u007f]/.test(name)) throw new InvalidBackupConfigError({
          message: "BackupOptions.name must not contain control characters",
          code: ErrorCode.INVALID_BACKUP_CONFIG,
          httpStatus: 400,
          context: { reason: "name must not contain control characters" },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
      }
      if (ttl <= 0) throw new InvalidBackupConfigError({
        message: "BackupOptions.ttl must be a positive number of seconds",
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: "ttl must be a positive number of seconds" },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      if (typeof gitignore !== "boolean") throw new InvalidBackupConfigError({
        message: "BackupOptions.gitignore must be a boolean",
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: "gitignore must be a boolean" },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      if (!Array.isArray(excludes) || !excludes.every((e) => typeof e === "string")) throw new InvalidBackupConfigError({
        message: "BackupOptions.excludes must be an array of strings",
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: "excludes must be an array of strings" },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const resolvedCompression = this.resolveBackupCompression(compression);
      const normalizedExcludes = this.normalizeBackupExcludes(excludes);
      backupSession = await this.ensureBackupSession();
      backupId = crypto.randomUUID();
      const archivePath = `${BACKUP_CONTAINER_DIR}/${backupId}.sqsh`;
      const createResult = await this.client.backup.createArchive(dir, archivePath, backupSession, {
        gitignore,
        excludes: normalizedExcludes,
        compression: resolvedCompression
      });
      if (!createResult.success) throw new BackupCreateError({
        message: "Container failed to create backup archive",
        code: ErrorCode.BACKUP_CREATE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      sizeBytes = createResult.sizeBytes;
      const r2Key = `${BACKUP_STORAGE_PREFIX}/${backupId}/${BACKUP_ARCHIVE_OBJECT_NAME}`;
      const metaKey = `${BACKUP_STORAGE_PREFIX}/${backupId}/${BACKUP_METADATA_OBJECT_NAME}`;
      if (multipart && createResult.sizeBytes >= BACKUP_MULTIPART_MIN_SIZE) await this.uploadBackupMultipart(archivePath, r2Key, createResult.sizeBytes, backupId, dir, backupSession);
      else await this.uploadBackupPresigned(archivePath, r2Key, createResult.sizeBytes, backupId, dir, backupSession);
      const metadata = {
        id: backupId,
        dir,
        name: name || null,
        sizeBytes: createResult.sizeBytes,
        ttl,
        createdAt: (/* @__PURE__ */ new Date()).toISOString()
      };
      await bucket.put(metaKey, JSON.stringify(metadata));
      outcome = "success";
      await this.execWithSession(`rm -f ${shellEscape(archivePath)}`, backupSession, { origin: "internal" }).catch(() => {
      });
      return {
        id: backupId,
        dir
      };
    } catch (error) {
      caughtError = error instanceof Error ? error : new Error(String(error));
      if (backupId && backupSession) {
        const archivePath = `${BACKUP_CONTAINER_DIR}/${backupId}.sqsh`;
        const r2Key = `${BACKUP_STORAGE_PREFIX}/${backupId}/${BACKUP_ARCHIVE_OBJECT_NAME}`;
        const metaKey = `${BACKUP_STORAGE_PREFIX}/${backupId}/${BACKUP_METADATA_OBJECT_NAME}`;
        await this.execWithSession(`rm -f ${shellEscape(archivePath)}`, backupSession, { origin: "internal" }).catch(() => {
        });
        await bucket.delete(r2Key).catch(() => {
        });
        await bucket.delete(metaKey).catch(() => {
        });
      }
      throw error;
    } finally {
      if (backupSession) await this.client.utils.deleteSession(backupSession).catch(() => {
      });
      logCanonicalEvent(this.logger, {
        event: "backup.create",
        outcome,
        durationMs: Date.now() - backupStartTime,
        backupId,
        dir,
        name,
        sizeBytes,
        error: caughtError
      });
    }
  }
  /**
  * Local-dev implementation of createBackup.
  * Uses the R2 binding directly instead of presigned URLs.
  * Archive format is identical to production (squashfs + meta.json).
  */
  async doCreateBackupLocal(options) {
    const { dir, name, ttl = BACKUP_DEFAULT_TTL_SECONDS, gitignore = false, excludes = [], compression } = options;
    const backupStartTime = Date.now();
    let backupId;
    let sizeBytes;
    let outcome = "error";
    let caughtError;
    let backupSession;
    const bucket = this.env.BACKUP_BUCKET;
    if (!bucket || !isR2Bucket(bucket)) throw new InvalidBackupConfigError({
      message: "BACKUP_BUCKET R2 binding not found in env. Add a BACKUP_BUCKET R2 binding to your wrangler.jsonc for local backup support.",
      code: ErrorCode.INVALID_BACKUP_CONFIG,
      httpStatus: 400,
      context: { reason: "Missing BACKUP_BUCKET R2 binding" },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    try {
      Sandbox2.validateBackupDir(dir, "BackupOptions.dir");
      if (name !== void 0) {
        if (typeof name !== "string" || name.length > BACKUP_MAX_NAME_LENGTH) throw new InvalidBackupConfigError({
          message: `BackupOptions.name must be a string of at most ${BACKUP_MAX_NAME_LENGTH} characters`,
          code: ErrorCode.INVALID_BACKUP_CONFIG,
          httpStatus: 400,
          context: { reason: `name must be a string of at most ${BACKUP_MAX_NAME_LENGTH} characters` },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
        if (/[\u0000-\u001f\u007f]/.test(name)) throw new InvalidBackupConfigError({
          message: "BackupOptions.name must not contain control characters",
          code: ErrorCode.INVALID_BACKUP_CONFIG,
          httpStatus: 400,
          context: { reason: "name must not contain control characters" },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
      }
      if (ttl <= 0) throw new InvalidBackupConfigError({
        message: "BackupOptions.ttl must be a positive number of seconds",
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: "ttl must be a positive number of seconds" },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      if (typeof gitignore !== "boolean") throw new InvalidBackupConfigError({
        message: "BackupOptions.gitignore must be a boolean",
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: "gitignore must be a boolean" },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      if (!Array.isArray(excludes) || !excludes.every((e) => typeof e === "string")) throw new InvalidBackupConfigError({
        message: "BackupOptions.excludes must be an array of strings",
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: "excludes must be an array of strings" },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const resolvedCompression = this.resolveBackupCompression(compression);
      const normalizedExcludes = this.normalizeBackupExcludes(excludes);
      backupSession = await this.ensureBackupSession();
      backupId = crypto.randomUUID();
      const archivePath = `${BACKUP_CONTAINER_DIR}/${backupId}.sqsh`;
      const createResult = await this.client.backup.createArchive(dir, archivePath, backupSession, {
        gitignore,
        excludes: normalizedExcludes,
        compression: resolvedCompression
      });
      if (!createResult.success) throw new BackupCreateError({
        message: "Container failed to create backup archive",
        code: ErrorCode.BACKUP_CREATE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      sizeBytes = createResult.sizeBytes;
      const r2Key = `${BACKUP_STORAGE_PREFIX}/${backupId}/${BACKUP_ARCHIVE_OBJECT_NAME}`;
      const metaKey = `${BACKUP_STORAGE_PREFIX}/${backupId}/${BACKUP_METADATA_OBJECT_NAME}`;
      const archiveStream = await this.client.files.readFileStream(archivePath, backupSession);
      const sseDecoded = new ReadableStream({ async start(controller) {
        try {
          for await (const chunk of streamFile(archiveStream)) if (chunk instanceof Uint8Array) controller.enqueue(chunk);
          controller.close();
        } catch (err) {
          controller.error(err);
        }
      } });
      const fixedStream = new FixedLengthStream(createResult.sizeBytes);
      sseDecoded.pipeTo(fixedStream.writable).catch(() => {
      });
      await bucket.put(r2Key, fixedStream.readable);
      const head = await bucket.head(r2Key);
      if (!head || head.size !== createResult.sizeBytes) throw new BackupCreateError({
        message: `Upload verification failed: expected ${createResult.sizeBytes} bytes, got ${head?.size ?? 0}`,
        code: ErrorCode.BACKUP_CREATE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const metadata = {
        id: backupId,
        dir,
        name: name || null,
        sizeBytes: createResult.sizeBytes,
        ttl,
        createdAt: (/* @__PURE__ */ new Date()).toISOString()
      };
      await bucket.put(metaKey, JSON.stringify(metadata));
      outcome = "success";
      await this.execWithSession(`rm -f ${shellEscape(archivePath)}`, backupSession, { origin: "internal" }).catch(() => {
      });
      return {
        id: backupId,
        dir,
        localBucket: true
      };
    } catch (error) {
      caughtError = error instanceof Error ? error : new Error(String(error));
      if (backupId && backupSession) {
        const archivePath = `${BACKUP_CONTAINER_DIR}/${backupId}.sqsh`;
        const r2Key = `${BACKUP_STORAGE_PREFIX}/${backupId}/${BACKUP_ARCHIVE_OBJECT_NAME}`;
        const metaKey = `${BACKUP_STORAGE_PREFIX}/${backupId}/${BACKUP_METADATA_OBJECT_NAME}`;
        await this.execWithSession(`rm -f ${shellEscape(archivePath)}`, backupSession, { origin: "internal" }).catch(() => {
        });
        await bucket.delete(r2Key).catch(() => {
        });
        await bucket.delete(metaKey).catch(() => {
        });
      }
      throw error;
    } finally {
      if (backupSession) await this.client.utils.deleteSession(backupSession).catch(() => {
      });
      logCanonicalEvent(this.logger, {
        event: "backup.create",
        outcome,
        durationMs: Date.now() - backupStartTime,
        backupId,
        dir,
        name,
        sizeBytes,
        provider: "local-binding",
        error: caughtError
      });
    }
  }
  /**
  * Restore a backup from R2 into a directory.
  *
  * **Production flow** (`localBucket` not set):
  *   1. DO reads metadata from R2 and checks TTL
  *   2. Container mounts the backup archive from R2 via s3fs
  *   3. Container mounts the squashfs archive with FUSE overlayfs
  *
  * The target directory becomes an overlay mount with the backup as a
  * read-only lower layer and a writable upper layer for copy-on-write.
  * Any processes writing to the directory should be stopped first.
  *
  * **Mount Lifecycle**: The FUSE overlay mount persists only while the
  * container is running. When the sandbox sleeps or the container restarts,
  * the mount is lost and the directory becomes empty. Re-restore from the
  * backup handle to recover. This is an ephemeral restore, not a persistent
  * extraction.
  *
  * **Local-dev flow** (`localBucket: true` on the originating `createBackup` call):
  *   1. DO reads metadata and checks TTL via R2 binding
  *   2. DO downloads the archive from R2 and writes it to the container
  *   3. Container extracts the archive with `unsquashfs` (no FUSE needed)
  *
  * The backup is restored into `backup.dir`. This may differ from the
  * directory that was originally backed up, allowing cross-directory restore.
  *
  * Overlapping backups are independent: restoring a parent directory
  * overwrites everything inside it, including subdirectories that were
  * backed up separately. When restoring both, restore the parent first.
  *
  * Concurrent backup/restore calls on the same sandbox are serialized.
  */
  async restoreBackup(backup) {
    if (!backup.localBucket) this.requireBackupBucket();
    return await this.enqueueBackupOp(() => this.doRestoreBackupWithRecovery(backup));
  }
  async doRestoreBackupWithRecovery(backup) {
    return await new RestoreLifecycleRunner({
      storage: this.ctx.storage,
      currentRuntime: this.currentRuntime,
      currentLifetime: this.currentLifetime
    }).execute({
      backupId: backup.id,
      dir: backup.dir,
      attempt: /* @__PURE__ */ __name(async (lifecycle) => {
        if (backup.localBucket) return await this.doRestoreBackupLocal(backup, lifecycle);
        return await this.doRestoreBackup(backup, lifecycle);
      }, "attempt")
    });
  }
  async doRestoreBackup(backup, lifecycle) {
    const restoreStartTime = Date.now();
    const bucket = this.requireBackupBucket();
    this.requirePresignedURLSupport();
    const { id, dir } = backup;
    let outcome = "error";
    let caughtError;
    let backupSession;
    try {
      if (!id || typeof id !== "string") throw new InvalidBackupConfigError({
        message: "Invalid backup: missing or invalid id",
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: "missing or invalid id" },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      if (!Sandbox2.UUID_REGEX.test(id)) throw new InvalidBackupConfigError({
        message: "Invalid backup: id must be a valid UUID (e.g. from createBackup)",
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: "id must be a valid UUID" },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      Sandbox2.validateBackupDir(dir, "Invalid backup: dir");
      const metaKey = `${BACKUP_STORAGE_PREFIX}/${id}/${BACKUP_METADATA_OBJECT_NAME}`;
      const metaObject = await bucket.get(metaKey);
      if (!metaObject) throw new BackupNotFoundError({
        message: `Backup not found: ${id}. Verify the backup ID is correct and the backup has not been deleted.`,
        code: ErrorCode.BACKUP_NOT_FOUND,
        httpStatus: 404,
        context: { backupId: id },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const metadata = await metaObject.json();
      const TTL_BUFFER_MS = 60 * 1e3;
      const createdAt = new Date(metadata.createdAt).getTime();
      if (Number.isNaN(createdAt)) throw new BackupRestoreError({
        message: `Backup metadata has invalid createdAt timestamp: ${metadata.createdAt}`,
        code: ErrorCode.BACKUP_RESTORE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId: id
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const expiresAt = createdAt + metadata.ttl * 1e3;
      if (Date.now() + TTL_BUFFER_MS > expiresAt) throw new BackupExpiredError({
        message: `Backup ${id} has expired (created: ${metadata.createdAt}, TTL: ${metadata.ttl}s). Create a new backup.`,
        code: ErrorCode.BACKUP_EXPIRED,
        httpStatus: 400,
        context: {
          backupId: id,
          expiredAt: new Date(expiresAt).toISOString()
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const r2Key = `${BACKUP_STORAGE_PREFIX}/${id}/${BACKUP_ARCHIVE_OBJECT_NAME}`;
      const archiveHead = await bucket.head(r2Key);
      if (!archiveHead) throw new BackupNotFoundError({
        message: `Backup archive not found in R2: ${id}. The archive may have been deleted by R2 lifecycle rules.`,
        code: ErrorCode.BACKUP_NOT_FOUND,
        httpStatus: 404,
        context: { backupId: id },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      backupSession = await this.ensureBackupSession();
      await lifecycle.runtimeReady();
      const archivePath = `${BACKUP_CONTAINER_DIR}/${id}.sqsh`;
      const mountGlob = `${BACKUP_CONTAINER_DIR}/mounts/${id}`;
      await this.execWithSession(`/usr/bin/fusermount3 -uz ${shellEscape(dir)} 2>/dev/null || true`, backupSession, { origin: "internal" }).catch(() => {
      });
      await this.execWithSession(`for d in ${shellEscape(mountGlob)}_*/lower ${shellEscape(mountGlob)}/lower; do [ -d "$d" ] && /usr/bin/fusermount3 -uz "$d" 2>/dev/null; done; true`, backupSession, { origin: "internal" }).catch(() => {
      });
      const sizeCheck = await this.execWithSession(`stat -c %s ${shellEscape(archivePath)} 2>/dev/null || echo 0`, backupSession, { origin: "internal" }).catch(() => ({ stdout: "0" }));
      if (Number.parseInt((sizeCheck.stdout ?? "0").trim(), 10) !== archiveHead.size) await this.downloadBackupParallel(archivePath, r2Key, archiveHead.size, id, dir, backupSession);
      await lifecycle.archiveReady(archiveHead.size);
      if (!(await this.client.backup.restoreArchive(dir, archivePath, backupSession)).success) throw new BackupRestoreError({
        message: "Container failed to restore backup archive",
        code: ErrorCode.BACKUP_RESTORE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId: id
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const result = {
        success: true,
        dir,
        id
      };
      await lifecycle.verify(result);
      outcome = "success";
      return result;
    } catch (error) {
      caughtError = error instanceof Error ? error : new Error(String(error));
      if (id && backupSession) {
        const cleanupPath = `${BACKUP_CONTAINER_DIR}/${id}.sqsh`;
        await this.execWithSession(`rm -f ${shellEscape(cleanupPath)}`, backupSession, { origin: "internal" }).catch(() => {
        });
      }
      throw error;
    } finally {
      if (backupSession) await this.client.utils.deleteSession(backupSession).catch(() => {
      });
      logCanonicalEvent(this.logger, {
        event: "backup.restore",
        outcome,
        durationMs: Date.now() - restoreStartTime,
        backupId: id,
        dir,
        error: caughtError
      });
    }
  }
  /**
  * Local-dev implementation of restoreBackup.
  * Uses the R2 binding directly instead of presigned URLs, and
  * unsquashfs for extraction instead of squashfuse + fuse-overlayfs.
  */
  async doRestoreBackupLocal(backup, lifecycle) {
    const restoreStartTime = Date.now();
    const { id, dir } = backup;
    let outcome = "error";
    let caughtError;
    let backupSession;
    const bucket = this.env.BACKUP_BUCKET;
    if (!bucket || !isR2Bucket(bucket)) throw new InvalidBackupConfigError({
      message: "BACKUP_BUCKET R2 binding not found in env. Add a BACKUP_BUCKET R2 binding to your wrangler.jsonc for local backup support.",
      code: ErrorCode.INVALID_BACKUP_CONFIG,
      httpStatus: 400,
      context: { reason: "Missing BACKUP_BUCKET R2 binding" },
      timestamp: (/* @__PURE__ */ new Date()).toISOString()
    });
    try {
      if (!id || typeof id !== "string") throw new InvalidBackupConfigError({
        message: "Invalid backup: missing or invalid id",
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: "missing or invalid id" },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      if (!Sandbox2.UUID_REGEX.test(id)) throw new InvalidBackupConfigError({
        message: "Invalid backup: id must be a valid UUID (e.g. from createBackup)",
        code: ErrorCode.INVALID_BACKUP_CONFIG,
        httpStatus: 400,
        context: { reason: "id must be a valid UUID" },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      Sandbox2.validateBackupDir(dir, "Invalid backup: dir");
      const metaKey = `${BACKUP_STORAGE_PREFIX}/${id}/${BACKUP_METADATA_OBJECT_NAME}`;
      const metaObject = await bucket.get(metaKey);
      if (!metaObject) throw new BackupNotFoundError({
        message: `Backup not found: ${id}. Verify the backup ID is correct and the backup has not been deleted.`,
        code: ErrorCode.BACKUP_NOT_FOUND,
        httpStatus: 404,
        context: { backupId: id },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const metadata = await metaObject.json();
      const TTL_BUFFER_MS = 60 * 1e3;
      const createdAt = new Date(metadata.createdAt).getTime();
      if (Number.isNaN(createdAt)) throw new BackupRestoreError({
        message: `Backup metadata has invalid createdAt timestamp: ${metadata.createdAt}`,
        code: ErrorCode.BACKUP_RESTORE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId: id
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const expiresAt = createdAt + metadata.ttl * 1e3;
      if (Date.now() + TTL_BUFFER_MS > expiresAt) throw new BackupExpiredError({
        message: `Backup ${id} has expired (created: ${metadata.createdAt}, TTL: ${metadata.ttl}s). Create a new backup.`,
        code: ErrorCode.BACKUP_EXPIRED,
        httpStatus: 400,
        context: {
          backupId: id,
          expiredAt: new Date(expiresAt).toISOString()
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const r2Key = `${BACKUP_STORAGE_PREFIX}/${id}/${BACKUP_ARCHIVE_OBJECT_NAME}`;
      const archiveObject = await bucket.get(r2Key);
      if (!archiveObject) throw new BackupNotFoundError({
        message: `Backup archive not found in R2: ${id}. The archive may have been deleted by R2 lifecycle rules.`,
        code: ErrorCode.BACKUP_NOT_FOUND,
        httpStatus: 404,
        context: { backupId: id },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const archiveSize = metadata.sizeBytes;
      backupSession = await this.ensureBackupSession();
      await lifecycle.runtimeReady();
      const archivePath = `${BACKUP_CONTAINER_DIR}/${id}.sqsh`;
      await this.execWithSession(`mkdir -p ${BACKUP_CONTAINER_DIR}`, backupSession, { origin: "internal" });
      if (this.transport === "rpc") {
        const body = archiveObject.body;
        if (!body) throw new BackupRestoreError({
          message: `R2 archive object has no body stream for backup ${id}`,
          code: ErrorCode.BACKUP_RESTORE_FAILED,
          httpStatus: 500,
          context: {
            dir,
            backupId: id
          },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
        await this.client.files.writeFileStream(archivePath, body, backupSession);
      } else {
        const archiveBuffer = await archiveObject.arrayBuffer();
        const base64Content = Buffer.from(archiveBuffer).toString("base64");
        const writeResult = await this.client.files.writeFile(archivePath, base64Content, backupSession, { encoding: "base64" });
        if (!writeResult.success) throw new BackupRestoreError({
          message: `Failed to write backup archive to ${archivePath}: ${"error" in writeResult && typeof writeResult.error === "object" && writeResult.error !== null && "message" in writeResult.error && typeof writeResult.error.message === "string" ? writeResult.error.message : `File write returned success: false for '${archivePath}'`}`,
          code: ErrorCode.BACKUP_RESTORE_FAILED,
          httpStatus: 500,
          context: {
            dir,
            backupId: id
          },
          timestamp: (/* @__PURE__ */ new Date()).toISOString()
        });
      }
      await lifecycle.archiveReady(archiveSize);
      const extractResult = await this.execWithSession(`/usr/bin/unsquashfs -f -d ${shellEscape(dir)} ${shellEscape(archivePath)}`, backupSession, { origin: "internal" });
      if (extractResult.exitCode !== 0) throw new BackupRestoreError({
        message: `unsquashfs extraction failed (exit code ${extractResult.exitCode}): ${extractResult.stderr}`,
        code: ErrorCode.BACKUP_RESTORE_FAILED,
        httpStatus: 500,
        context: {
          dir,
          backupId: id
        },
        timestamp: (/* @__PURE__ */ new Date()).toISOString()
      });
      const result = {
        success: true,
        dir,
        id
      };
      await lifecycle.verify(result);
      await this.execWithSession(`rm -f ${shellEscape(archivePath)}`, backupSession, { origin: "internal" }).catch(() => {
      });
      outcome = "success";
      return result;
    } catch (error) {
      caughtError = error instanceof Error ? error : new Error(String(error));
      if (id && backupSession) {
        const archivePath = `${BACKUP_CONTAINER_DIR}/${id}.sqsh`;
        await this.execWithSession(`rm -f ${shellEscape(archivePath)}`, backupSession, { origin: "internal" }).catch(() => {
        });
      }
      throw error;
    } finally {
      if (backupSession) await this.client.utils.deleteSession(backupSession).catch(() => {
      });
      logCanonicalEvent(this.logger, {
        event: "backup.restore",
        outcome,
        durationMs: Date.now() - restoreStartTime,
        backupId: id,
        dir,
        provider: "local-binding",
        error: caughtError
      });
    }
  }
  async configureR2EgressOutbound(params) {
    const ctx = this.ctx;
    if (!ctx.container?.interceptOutboundHttp) throw new InvalidMountConfigError("R2 binding mounts require container outbound interception support");
    if (!ctx.exports?.ContainerProxy) throw new InvalidMountConfigError("R2 binding mounts require exporting ContainerProxy from the Worker entrypoint");
    this.constructor.outboundHandlers = { r2EgressMount: r2EgressHandler };
    if (Object.keys(params.buckets).length > 0) await this.setOutboundByHost("r2.internal", "r2EgressMount", params);
    else await this.removeOutboundByHost("r2.internal");
    this.logger.debug("r2 egress: registering host interception", {
      host: "r2.internal",
      method: "r2EgressMount",
      targetClassName: CONTAINER_PROXY_CLASS_NAME
    });
    const fetcher = ctx.exports.ContainerProxy({ props: {
      enableInternet: this.enableInternet,
      containerId: this.ctx.id.toString(),
      className: CONTAINER_PROXY_CLASS_NAME,
      outboundByHostOverrides: { "r2.internal": {
        method: "r2EgressMount",
        params
      } }
    } });
    if (!isFetcher(fetcher)) throw new InvalidMountConfigError("R2 binding mounts require ContainerProxy to return a valid Fetcher");
    await ctx.container.interceptOutboundHttp("r2.internal", fetcher);
  }
  async configureS3CredentialProxyOutbound(params) {
    const ctx = this.ctx;
    if (!ctx.container?.interceptOutboundHttp) throw new InvalidMountConfigError("Credential proxy bucket mounts require container outbound interception support");
    if (!ctx.exports?.ContainerProxy) throw new InvalidMountConfigError("Credential proxy bucket mounts require exporting ContainerProxy from the Worker entrypoint");
    const hosts = [S3_CREDENTIAL_PROXY_HOST, S3_CREDENTIAL_PROXY_DIAGNOSTIC_HOST];
    this.constructor.outboundHandlers = { s3CredentialProxyMount: s3CredentialProxyHandler };
    if (Object.keys(params.mounts).length > 0) for (const host of hosts) await this.setOutboundByHost(host, "s3CredentialProxyMount", params);
    else for (const host of hosts) await this.removeOutboundByHost(host);
    const hostOverrides = {};
    for (const host of hosts) hostOverrides[host] = {
      method: "s3CredentialProxyMount",
      params
    };
    this.logger.debug("s3 credential proxy: registering host interception", {
      hosts,
      method: "s3CredentialProxyMount",
      targetClassName: CONTAINER_PROXY_CLASS_NAME
    });
    const fetcher = ctx.exports.ContainerProxy({ props: {
      enableInternet: this.enableInternet,
      containerId: this.ctx.id.toString(),
      className: CONTAINER_PROXY_CLASS_NAME,
      outboundByHostOverrides: hostOverrides
    } });
    if (!isFetcher(fetcher)) throw new InvalidMountConfigError("Credential proxy bucket mounts require ContainerProxy to return a valid Fetcher");
    try {
      const selfTest = await fetcher.fetch(new Request(`http://${S3_CREDENTIAL_PROXY_HOST}${SELF_TEST_PATH}`));
      await selfTest.text();
      this.logger.debug("s3 credential proxy: fetcher self-test complete", { status: selfTest.status });
    } catch (error) {
      this.logger.warn("s3 credential proxy: fetcher self-test failed", { error: error instanceof Error ? error.message : String(error) });
    }
    for (const host of hosts) await ctx.container.interceptOutboundHttp(host, fetcher);
  }
};

// ../node_modules/@cloudflare/sandbox/dist/index.js
function createProxyLogger(request) {
  return createLogger({
    component: "sandbox-do",
    traceId: TraceContext.fromHeaders(request.headers) || TraceContext.generate(),
    operation: "proxy"
  });
}
__name(createProxyLogger, "createProxyLogger");
async function proxyToSandbox(request, env) {
  try {
    const routeInfo = extractSandboxRoute(new URL(request.url));
    if (!routeInfo) return null;
    const { sandboxId, port, token } = routeInfo;
    const sandbox = getSandbox(env.Sandbox, sandboxId, { normalizeId: true });
    const headers = new Headers(request.headers);
    for (const header of PREVIEW_PROXY_HEADERS) headers.delete(header);
    headers.set(PREVIEW_PROXY_HEADER, "1");
    headers.set(PREVIEW_PROXY_PORT_HEADER, port.toString());
    headers.set(PREVIEW_PROXY_TOKEN_HEADER, token);
    headers.set(PREVIEW_PROXY_SANDBOX_ID_HEADER, sandboxId);
    const previewRequest = new Request(request, { headers });
    return await sandbox.fetch(previewRequest);
  } catch (error) {
    createProxyLogger(request).error("Proxy routing error", error instanceof Error ? error : new Error(String(error)));
    return new Response("Proxy routing error", { status: 500 });
  }
}
__name(proxyToSandbox, "proxyToSandbox");
function extractSandboxRoute(url) {
  const dotIndex = url.hostname.indexOf(".");
  if (dotIndex === -1) return null;
  const subdomain = url.hostname.slice(0, dotIndex);
  const firstHyphen = subdomain.indexOf("-");
  if (firstHyphen === -1) return null;
  const portStr = subdomain.slice(0, firstHyphen);
  if (!/^\d{4,5}$/.test(portStr)) return null;
  const port = parseInt(portStr, 10);
  if (!validatePort(port)) return null;
  const rest = subdomain.slice(firstHyphen + 1);
  const lastHyphen = rest.lastIndexOf("-");
  if (lastHyphen === -1) return null;
  const sandboxId = rest.slice(0, lastHyphen);
  const token = rest.slice(lastHyphen + 1);
  if (!/^[a-z0-9_]+$/.test(token) || token.length === 0 || token.length > 63) return null;
  if (sandboxId.length === 0 || sandboxId.length > 63) return null;
  let sanitizedSandboxId;
  try {
    sanitizedSandboxId = sanitizeSandboxId(sandboxId);
  } catch {
    return null;
  }
  return {
    port,
    sandboxId: sanitizedSandboxId,
    token
  };
}
__name(extractSandboxRoute, "extractSandboxRoute");

// index.mjs
var index_default = {
  async fetch(request, env) {
    const preview = await proxyToSandbox(request, env);
    if (preview) return preview;
    const url = new URL(request.url);
    const id = url.searchParams.get("id") ?? "official";
    const transport = url.searchParams.get("transport") ?? "http";
    const sandbox = getSandbox(env.Sandbox, id, { transport });
    switch (url.pathname) {
      case "/drive":
        return Response.json(await drive(sandbox, url.searchParams.get("hostname") ?? ""));
      case "/terminal":
        return sandbox.terminal(request);
      case "/destroy":
        await sandbox.destroy();
        return Response.json({ success: true });
      default:
        return new Response("not found", { status: 404 });
    }
  }
};
async function events(stream) {
  const text = await new Response(stream).text();
  return text.split("\n\n").map((block) => block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trim()).join("")).filter((data) => data.length > 0).map((data) => JSON.parse(data));
}
__name(events, "events");
async function drive(sandbox, hostname) {
  const report = [];
  const check = /* @__PURE__ */ __name(async (method, body) => {
    const started = Date.now();
    try {
      const detail = await body();
      report.push({ method, ok: true, ms: Date.now() - started, detail: detail ?? null });
    } catch (error) {
      report.push({ method, ok: false, ms: Date.now() - started, detail: String(error?.stack ?? error) });
    }
  }, "check");
  const dir = "/workspace/official";
  await check("exec", async () => {
    const result = await sandbox.exec("printf 'a\\nb\\n'; echo err >&2; sh -c 'exit 3'");
    return { stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode };
  });
  await check("execStream", async () => {
    const stream = await sandbox.execStream("echo one; echo two");
    const seen = await events(stream);
    return {
      stdout: seen.filter((e) => e.type === "stdout").map((e) => e.data).join(""),
      exitCode: seen.find((e) => e.type === "complete")?.exitCode
    };
  });
  await check("mkdir", async () => (await sandbox.mkdir(`${dir}/sub`, { recursive: true })).success);
  await check("writeFile", async () => (await sandbox.writeFile(`${dir}/sub/hello.txt`, "hello\n")).success);
  await check("readFile", async () => (await sandbox.readFile(`${dir}/sub/hello.txt`)).content);
  await check("exists", async () => (await sandbox.exists(`${dir}/sub/hello.txt`)).exists);
  await check(
    "listFiles",
    async () => (await sandbox.listFiles(dir, { recursive: true })).files.map((f) => f.relativePath).sort()
  );
  await check("startProcess", async () => {
    const process2 = await sandbox.startProcess("python3 -m http.server 8080", { processId: "web", cwd: dir });
    await process2.waitForPort(8080, { timeout: 3e4 });
    return process2.id;
  });
  await check("getProcessLogs", async () => {
    const logs = await sandbox.getProcessLogs("web");
    return typeof logs.stdout === "string" && typeof logs.stderr === "string";
  });
  await check("exposePort", async () => (await sandbox.exposePort(8080, { hostname })).url);
  await check("killProcess", async () => {
    const sleeper = await sandbox.startProcess("sleep 600", { processId: "sleeper" });
    await sandbox.killProcess(sleeper.id);
    const deadline = Date.now() + 1e4;
    while (Date.now() < deadline) {
      const status = (await sandbox.getProcess(sleeper.id))?.status;
      if (status && status !== "running" && status !== "starting") return status;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error("the killed process is still running");
  });
  await check("watch", async () => {
    const stream = await sandbox.watch(dir, { recursive: true });
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    let text = "";
    const seen = /* @__PURE__ */ __name((needle) => text.includes(needle), "seen");
    const read = /* @__PURE__ */ __name(async (until) => {
      const deadline = Date.now() + 1e4;
      while (!until() && Date.now() < deadline) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    }, "read");
    await read(() => seen('"type":"watching"'));
    await sandbox.writeFile(`${dir}/watched.txt`, "x");
    await read(() => seen("watched.txt"));
    await reader.cancel();
    return seen("watched.txt");
  });
  await check("createSession", async () => {
    const session = await sandbox.createSession({ id: "custom", env: { GREETING: "hi" }, cwd: dir });
    const result = await session.exec('echo "$GREETING $(pwd)"');
    return result.stdout;
  });
  await check("runCode", async () => {
    const context = await sandbox.createCodeContext({ language: "python" });
    const result = await sandbox.runCode("1 + 41", { context });
    return result.results.map((r) => r.text);
  });
  await check("gitCheckout", async () => {
    await sandbox.exec(
      `rm -rf /tmp/origin && git init -q -b main /tmp/origin && cd /tmp/origin && echo readme > README && git add README && git -c user.name=t -c user.email=t@t commit -q -m init`
    );
    const result = await sandbox.gitCheckout("file:///tmp/origin", { targetDir: `${dir}/clone` });
    const read = await sandbox.readFile(`${dir}/clone/README`);
    return { success: result.success, readme: read.content };
  });
  await check("createBackup", async () => {
    await sandbox.writeFile("/workspace/backed/keep.txt", "kept\n");
    const backup = await sandbox.createBackup({ dir: "/workspace/backed", localBucket: true });
    await sandbox.writeFile("/workspace/backed/keep.txt", "changed\n");
    await sandbox.restoreBackup(backup);
    return (await sandbox.readFile("/workspace/backed/keep.txt")).content;
  });
  return report;
}
__name(drive, "drive");

// ../node_modules/wrangler/templates/middleware/middleware-ensure-req-body-drained.ts
var drainBody = /* @__PURE__ */ __name(async (request, env, _ctx, middlewareCtx) => {
  try {
    return await middlewareCtx.next(request, env);
  } finally {
    try {
      if (request.body !== null && !request.bodyUsed) {
        const reader = request.body.getReader();
        while (!(await reader.read()).done) {
        }
      }
    } catch (e) {
      console.error("Failed to drain the unused request body.", e);
    }
  }
}, "drainBody");
var middleware_ensure_req_body_drained_default = drainBody;

// ../node_modules/wrangler/templates/middleware/middleware-miniflare3-json-error.ts
function reduceError(e) {
  return {
    name: e?.name,
    message: e?.message ?? String(e),
    stack: e?.stack,
    cause: e?.cause === void 0 ? void 0 : reduceError(e.cause)
  };
}
__name(reduceError, "reduceError");
var jsonError = /* @__PURE__ */ __name(async (request, env, _ctx, middlewareCtx) => {
  try {
    return await middlewareCtx.next(request, env);
  } catch (e) {
    const error = reduceError(e);
    const body = JSON.stringify(error);
    const headers = {
      "Content-Type": "application/json",
      "MF-Experimental-Error-Stack": "true"
    };
    const encoded = encodeURIComponent(body);
    if (encoded.length <= 8192) {
      headers["MF-Experimental-Error-Stack-Payload"] = encoded;
    }
    return new Response(body, { status: 500, headers });
  }
}, "jsonError");
var middleware_miniflare3_json_error_default = jsonError;

// .wrangler/tmp/bundle-Ve9V1U/middleware-insertion-facade.js
var __INTERNAL_WRANGLER_MIDDLEWARE__ = [
  middleware_ensure_req_body_drained_default,
  middleware_miniflare3_json_error_default
];
var middleware_insertion_facade_default = index_default;

// ../node_modules/wrangler/templates/middleware/common.ts
var __facade_middleware__ = [];
function __facade_register__(...args) {
  __facade_middleware__.push(...args.flat());
}
__name(__facade_register__, "__facade_register__");
function __facade_invokeChain__(request, env, ctx, dispatch, middlewareChain) {
  const [head, ...tail] = middlewareChain;
  const middlewareCtx = {
    dispatch,
    next(newRequest, newEnv) {
      return __facade_invokeChain__(newRequest, newEnv, ctx, dispatch, tail);
    }
  };
  return head(request, env, ctx, middlewareCtx);
}
__name(__facade_invokeChain__, "__facade_invokeChain__");
function __facade_invoke__(request, env, ctx, dispatch, finalMiddleware) {
  return __facade_invokeChain__(request, env, ctx, dispatch, [
    ...__facade_middleware__,
    finalMiddleware
  ]);
}
__name(__facade_invoke__, "__facade_invoke__");

// .wrangler/tmp/bundle-Ve9V1U/middleware-loader.entry.ts
var __Facade_ScheduledController__ = class ___Facade_ScheduledController__ {
  constructor(scheduledTime, cron, noRetry) {
    this.scheduledTime = scheduledTime;
    this.cron = cron;
    this.#noRetry = noRetry;
  }
  scheduledTime;
  cron;
  static {
    __name(this, "__Facade_ScheduledController__");
  }
  #noRetry;
  noRetry() {
    if (!(this instanceof ___Facade_ScheduledController__)) {
      throw new TypeError("Illegal invocation");
    }
    this.#noRetry();
  }
};
function wrapExportedHandler(worker) {
  if (__INTERNAL_WRANGLER_MIDDLEWARE__ === void 0 || __INTERNAL_WRANGLER_MIDDLEWARE__.length === 0) {
    return worker;
  }
  for (const middleware of __INTERNAL_WRANGLER_MIDDLEWARE__) {
    __facade_register__(middleware);
  }
  const fetchDispatcher = /* @__PURE__ */ __name(function(request, env, ctx) {
    if (worker.fetch === void 0) {
      throw new Error("Handler does not export a fetch() function.");
    }
    return worker.fetch(request, env, ctx);
  }, "fetchDispatcher");
  return {
    ...worker,
    fetch(request, env, ctx) {
      const dispatcher = /* @__PURE__ */ __name(function(type, init) {
        if (type === "scheduled" && worker.scheduled !== void 0) {
          const controller = new __Facade_ScheduledController__(
            Date.now(),
            init.cron ?? "",
            () => {
            }
          );
          return worker.scheduled(controller, env, ctx);
        }
      }, "dispatcher");
      return __facade_invoke__(request, env, ctx, dispatcher, fetchDispatcher);
    }
  };
}
__name(wrapExportedHandler, "wrapExportedHandler");
function wrapWorkerEntrypoint(klass) {
  if (__INTERNAL_WRANGLER_MIDDLEWARE__ === void 0 || __INTERNAL_WRANGLER_MIDDLEWARE__.length === 0) {
    return klass;
  }
  for (const middleware of __INTERNAL_WRANGLER_MIDDLEWARE__) {
    __facade_register__(middleware);
  }
  return class extends klass {
    #fetchDispatcher = /* @__PURE__ */ __name((request, env, ctx) => {
      this.env = env;
      this.ctx = ctx;
      if (super.fetch === void 0) {
        throw new Error("Entrypoint class does not define a fetch() function.");
      }
      return super.fetch(request);
    }, "#fetchDispatcher");
    #dispatcher = /* @__PURE__ */ __name((type, init) => {
      if (type === "scheduled" && super.scheduled !== void 0) {
        const controller = new __Facade_ScheduledController__(
          Date.now(),
          init.cron ?? "",
          () => {
          }
        );
        return super.scheduled(controller);
      }
    }, "#dispatcher");
    fetch(request) {
      return __facade_invoke__(
        request,
        this.env,
        this.ctx,
        this.#dispatcher,
        this.#fetchDispatcher
      );
    }
  };
}
__name(wrapWorkerEntrypoint, "wrapWorkerEntrypoint");
var WRAPPED_ENTRY;
if (typeof middleware_insertion_facade_default === "object") {
  WRAPPED_ENTRY = wrapExportedHandler(middleware_insertion_facade_default);
} else if (typeof middleware_insertion_facade_default === "function") {
  WRAPPED_ENTRY = wrapWorkerEntrypoint(middleware_insertion_facade_default);
}
var middleware_loader_entry_default = WRAPPED_ENTRY;
export {
  Sandbox,
  __INTERNAL_WRANGLER_MIDDLEWARE__,
  middleware_loader_entry_default as default
};
/*! Bundled license information:

aws4fetch/dist/aws4fetch.esm.mjs:
  (**
   * @license MIT <https://opensource.org/licenses/MIT>
   * @copyright Michael Hart 2024
   *)
*/
//# sourceMappingURL=index.js.map
