// fast-jev-compaction: the Claude Code mod. JavaScript only where the mod surface forces it:
// it forwards session.compact to the Python entry (hooks/fast_jev_hook.py) as one JSON document
// on stdin and maps the answer back (from a file the answer names when it is too large for
// stdout); turn.complete asks for a compaction past compactAtPercent.
// Every failure ends in next(e), the engine's built-in summary, with the conversation untouched.

const TOAST_MS = 15000
const BOOTSTRAP_TIMEOUT_MS = 20000
const DEFAULT_TIMEOUT_SECONDS = 120
const DEFAULT_COMPACT_AT_PERCENT = 60
const REARM_POINTS = 10
const READY_MARKER = 'venv/.fast-jev-ready'
const PREPARING =
  'fast-jev-compaction is preparing its Python environment; this compaction uses the built-in summary'
const INTERRUPTED = 'fast-jev-compaction: interrupted'
// Beside decisions.sqlite: the Python side replays these into the decision log (audit/spill.py).
const SPILL_PREFIX = 'decisions.sqlite.spill-'

function numberOption(value, fallback, isValid) {
  return typeof value === 'number' && Number.isFinite(value) && isValid(value) ? value : fallback
}

function stringOption(value) {
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined
}

function reasonOf(error) {
  const text = error && typeof error.message === 'string' ? error.message : String(error)
  return text.length > 300 ? `${text.slice(0, 297)}...` : text
}

// UI calls are best-effort: a throwing log or toast never changes what the hook answers.
function log($, text) {
  try {
    $.ui.log(text)
  } catch {}
}

function notify($, text, quiet) {
  log($, text)
  if (quiet) return
  try {
    $.ui.toast(text, { timeoutMs: TOAST_MS })
  } catch {}
}

async function hookEnvOf($) {
  try {
    const env = await $.process.hookEnv()
    return env && typeof env === 'object' ? env : {}
  } catch {
    return {}
  }
}

// A relative path would be resolved against whatever folder the host runs in (the session's
// project, where anyone's files may sit): only an absolute path or a command name on PATH runs.
function interpreter(source, value) {
  if (value.startsWith('/') || !value.includes('/')) return value
  throw new Error(`${source} is a relative path (${value}); give an absolute path or a command name on PATH`)
}

// The interpreter: the python option, then FAST_JEV_PYTHON, then the environment bootstrap.py
// made under the plugin data folder once its ready marker exists; undefined while it is not.
async function pythonFor($, options, pluginData) {
  const fromOption = stringOption(options.python)
  if (fromOption) return interpreter('the python option', fromOption)
  let fromEnv
  try {
    fromEnv = stringOption(await $.env.get('FAST_JEV_PYTHON'))
  } catch {}
  if (fromEnv) return interpreter('FAST_JEV_PYTHON', fromEnv)
  if (!pluginData) return undefined
  try {
    if (await $.fs.exists(`${pluginData}/${READY_MARKER}`)) return `${pluginData}/venv/bin/python`
  } catch {}
  return undefined
}

// Python runs isolated (-I): neither the session's cwd nor PYTHONPATH is on sys.path, so a
// venv.py, pip.py or sitecustomize.py planted in the project is never imported.
const ISOLATED = '-I'

// bootstrap.py forks the slow part (venv + pip) and returns at once, so this never blocks long.
async function startBootstrap($, env) {
  try {
    const run = await $.process.run(['python3', ISOLATED, `${$.plugin.root}/hooks/bootstrap.py`], {
      env,
      timeoutMs: BOOTSTRAP_TIMEOUT_MS,
    })
    log($, `environment bootstrap started (exit ${run.exitCode})`)
  } catch (error) {
    log($, `environment bootstrap could not start (${reasonOf(error)})`)
  }
}

// Outcomes only the mod sees still leave a decision-log row: one small file per event, since
// $.fs.write replaces a whole file. Best-effort: a failing write never changes the answer.
async function spillRow($, pluginData, category, reason, e, sessionId, startedAt) {
  if (!pluginData) return
  const compaction = {
    created_at: new Date().toISOString(),
    session_id: typeof sessionId === 'string' ? sessionId : '',
    agent_id: typeof e.agentId === 'string' ? e.agentId : null,
    trigger: typeof e.trigger === 'string' ? e.trigger : '',
    outcome: 'fallback',
    reason: reason.slice(0, 300),
    fallback_reason: category,
    judge: 'none',
    messages_before: Array.isArray(e.messages) ? e.messages.length : 0,
    messages_after: Array.isArray(e.messages) ? e.messages.length : 0,
    duration_ms: Math.max(0, Date.now() - startedAt),
  }
  const name = `${SPILL_PREFIX}${Date.now()}-${Math.random().toString(36).slice(2, 10)}.json`
  try {
    await $.fs.write(`${pluginData}/${name}`, JSON.stringify({ compaction, decisions: [] }))
  } catch {}
}

// A replace answer too large for the hook's stdout (capped at 4 MiB) names a file of ASCII-only
// JSON under the plugin data folder instead (hook/answer_file.py): one byte per character, so
// $.fs.read's byte ranges (4 MiB at most each) never cut one. Read whole and at the size
// announced, or not at all; then emptied, as $.fs has no delete (the hook removes old files).
const ANSWERS_DIR = 'answers'
const ANSWER_FILE_NAME = /^answer-[0-9a-f-]+\.json$/
const READ_BYTES = 4 * 1024 * 1024

async function messagesFromFile($, file, pluginData) {
  const path = file && typeof file.path === 'string' ? file.path : ''
  const size = file ? file.bytes : undefined
  const folder = typeof pluginData === 'string' ? `${pluginData.replace(/\/+$/, '')}/${ANSWERS_DIR}/` : undefined
  if (!folder || !path.startsWith(folder) || !ANSWER_FILE_NAME.test(path.slice(folder.length))) {
    throw new Error('the answer names a file outside the plugin data folder')
  }
  if (!Number.isSafeInteger(size) || size < 2) throw new Error('the answer names a file without a valid size')
  try {
    const { size: onDisk } = await $.fs.stat(path)
    if (onDisk !== size) throw new Error(`the answer file holds ${onDisk} bytes, not ${size}`)
    const parts = []
    for (let offset = 0; offset < size; offset += READ_BYTES) {
      const length = Math.min(READ_BYTES, size - offset)
      const part = await $.fs.read(path, { offset, length })
      if (typeof part !== 'string' || part.length !== length) throw new Error('the answer file was cut short')
      parts.push(part)
    }
    return JSON.parse(parts.join(''))
  } finally {
    try {
      await $.fs.write(path, '')
    } catch {}
  }
}

// A replace answer refers to untouched messages by handle; those become the engine's own objects.
function mapMessages(answered, input) {
  if (!Array.isArray(answered) || answered.length === 0) throw new Error('the answer has no messages')
  const byHandle = new Map()
  for (const message of input) if (typeof message.handle === 'string') byHandle.set(message.handle, message)
  return answered.map(message => {
    if (!message || typeof message !== 'object') throw new Error('the answer holds a non-object message')
    if (typeof message.handle === 'string') {
      const own = byHandle.get(message.handle)
      if (!own) throw new Error(`the answer names an unknown handle ${message.handle}`)
      return own
    }
    if (message.role !== 'user' && message.role !== 'assistant') throw new Error('the answer holds a message without a role')
    if (typeof message.text !== 'string' || !Array.isArray(message.toolUses)) {
      throw new Error('the answer holds a malformed message')
    }
    return message
  })
}

// The engine's own compactions (auto, precompute) fire at its autoCompactThreshold, in a
// compaction window that may be smaller than the model's.
const ENGINE_TRIGGERS = new Set(['auto', 'precompute'])

// How full the window is: the Python side's gate speaks in points of it. The plain figures
// (absent right after a compaction, until the engine has measured again) are the model's window;
// for the engine's own compaction of the main conversation the usage breakdown adds what made it
// fire: its estimate of the context with the output that crossed, its window and its threshold
// (`summary` estimates locally and sends no request).
async function contextOf($, e) {
  const engine = ENGINE_TRIGGERS.has(e.trigger) && e.agentId === undefined
  let context
  try {
    const usage = await $.session.usage(engine ? { breakdown: 'summary' } : undefined)
    const plain = usage && usage.context
    if (!plain || typeof plain !== 'object') return undefined
    context = { tokens: plain.tokens, window: plain.window, percent: plain.percent }
    const b = plain.breakdown
    if (engine && b && typeof b === 'object' && b.isAutoCompactEnabled) {
      context.compaction = { tokens: b.totalTokens, window: b.rawMaxTokens, threshold: b.autoCompactThreshold }
    }
  } catch {}
  return context
}

async function askPython($, e, options, quiet) {
  const startedAt = Date.now()
  const env = await hookEnvOf($)
  const pluginData = env.CLAUDE_PLUGIN_DATA
  let sessionId
  let cwd
  try {
    sessionId = await $.session.id()
  } catch {}
  let python
  try {
    python = await pythonFor($, options, pluginData)
  } catch (error) {
    await spillRow($, pluginData, 'broken-interpreter', reasonOf(error), e, sessionId, startedAt)
    throw error
  }
  if (!python) {
    notify($, PREPARING, quiet)
    await startBootstrap($, env)
    const reason = 'Python environment not ready'
    await spillRow($, pluginData, 'python-not-ready', reason, e, sessionId, startedAt)
    return { action: 'fallback', reason, toasted: true }
  }
  try {
    cwd = await $.session.cwd()
  } catch {}
  const context = await contextOf($, e)
  const document = {
    event: 'session.compact',
    trigger: e.trigger,
    instructions: e.instructions,
    agentId: e.agentId,
    sessionId,
    pluginRoot: $.plugin.root,
    pluginData,
    cwd,
    options,
    context,
    messages: e.messages,
  }
  const timeoutSeconds = numberOption(options.timeoutSeconds, DEFAULT_TIMEOUT_SECONDS, v => v >= 1 && v <= 600)
  let answer
  try {
    const run = await $.process.run([python, ISOLATED, `${$.plugin.root}/hooks/fast_jev_hook.py`], {
      stdin: JSON.stringify(document),
      timeoutMs: Math.round(timeoutSeconds * 1000),
      env,
    })
    if (run.exitCode !== 0) throw new Error(`the Python hook exited with code ${run.exitCode}`)
    if (run.isStdoutTruncated) throw new Error('the Python hook answer was cut short')
    answer = JSON.parse(run.stdout)
    if (!answer || typeof answer !== 'object') throw new Error('the Python hook answered no object')
  } catch (error) {
    // The interpreter exited, timed out or answered garbage: its own row was never written.
    await spillRow($, pluginData, 'broken-interpreter', reasonOf(error), e, sessionId, startedAt)
    throw error
  }
  // Past the try: the hook wrote its row, and a file that cannot be read fails like an answer
  // that cannot be mapped.
  if (answer.action === 'replace' && answer.messagesFile !== undefined) {
    answer.messages = await messagesFromFile($, answer.messagesFile, pluginData)
  }
  return answer
}

// One compaction through the Python side; whatever fails, next(e): the built-in summary.
async function compactWith($, e, next, config) {
  // precompute runs ahead of time, unseen: it logs but never toasts.
  const quiet = e.trigger === 'precompute'
  let result
  try {
    const answer = await askPython($, e, config, quiet)
    for (const line of Array.isArray(answer.log) ? answer.log : []) if (typeof line === 'string') log($, line)
    if (next.signal && next.signal.aborted) {
      log($, 'compaction interrupted; nothing changed')
      return { skip: INTERRUPTED }
    }
    if (answer.action === 'replace') {
      result = { messages: mapMessages(answer.messages, e.messages) }
      notify($, typeof answer.toast === 'string' ? answer.toast : 'kept the conversation verbatim, no summary', quiet)
    } else if (answer.action === 'skip') {
      result = { skip: typeof answer.reason === 'string' ? answer.reason : 'nothing to compact' }
      log($, `compaction skipped (${result.skip})`)
    } else if (!answer.toasted) {
      const reason = typeof answer.reason === 'string' ? answer.reason : 'no reason given'
      notify($, typeof answer.toast === 'string' ? answer.toast : `fallback to built-in summary (${reason})`, quiet)
    }
  } catch (error) {
    result = undefined
    notify($, `fallback to built-in summary (${reasonOf(error)})`, quiet)
  }
  if (result !== undefined) return result
  // Outside the try: a failure of the built-in summary is the engine's own to report.
  return next(e)
}

export const register = (on, options) => {
  const config = options && typeof options === 'object' ? options : {}
  const compactAtPercent = numberOption(config.compactAtPercent, DEFAULT_COMPACT_AT_PERCENT, v => v > 0 && v <= 100)
  let compacting = false
  // Set when a compaction the trigger did not start (/compact, the engine's own) changed the
  // history: the trigger may fire again above the threshold (the hysteresis).
  let changedByOthers = false

  on('session.compact', async ($, e, next) => {
    // A precompute installs nothing; a subagent's compaction changes its own transcript only.
    const counts = !(compacting && e.trigger === 'plugin') && e.trigger !== 'precompute' && e.agentId === undefined
    const result = await compactWith($, e, next, config)
    if (counts && result && Array.isArray(result.messages)) changedByOthers = true
    return result
  }).catch(($, e, next) => next(e))

  // The usage counts the last request's input, not the reply to it, which the context holds too
  // (a long reply is tens of points of a window). The turn's own usage names that reply's
  // output when its input side is the request the usage measured; otherwise the percent stands.
  function percentWithReply(context, turnUsage) {
    const percent = context ? context.percent : undefined
    if (typeof percent !== 'number' || !turnUsage || typeof turnUsage !== 'object') return percent
    const { tokens, window } = context
    const sides = [turnUsage.input_tokens, turnUsage.cache_creation_input_tokens, turnUsage.cache_read_input_tokens]
    const input = sides.reduce((sum, side) => sum + (Number.isFinite(side) ? side : 0), 0)
    const output = turnUsage.output_tokens
    if (!Number.isFinite(tokens) || !Number.isFinite(window) || window <= 0 || input !== tokens) return percent
    if (!Number.isFinite(output) || output <= 0) return percent
    return Math.round((100 * (tokens + output)) / window)
  }

  // The 60 % trigger fires when usage crosses compactAtPercent upward, once per crossing. While
  // usage stays above (its own pass skipped or could not reach its target), it fires again only
  // after usage grew by REARM_POINTS or another compaction changed the history: never on every turn.
  let firedAt
  on('turn.complete', async ($, e, next) => {
    // The guard is taken before the first await so two racing turns compact once.
    if (compacting || e.agentId !== undefined) return next(e)
    compacting = true
    try {
      const usage = await $.session.usage()
      const percent = percentWithReply(usage ? usage.context : undefined, e.usage)
      if (changedByOthers || (typeof percent === 'number' && percent < compactAtPercent)) firedAt = undefined
      changedByOthers = false
      if (typeof percent === 'number' && percent >= compactAtPercent && (firedAt === undefined || percent >= firedAt + REARM_POINTS)) {
        firedAt = percent
        log($, `context at ${percent}% (threshold ${compactAtPercent}%): compacting`)
        await $.session.compact()
      }
    } catch (error) {
      log($, `auto-compact skipped (${reasonOf(error)})`)
    } finally {
      compacting = false
    }
    return next(e)
  }).catch(($, e, next) => next(e))
}
