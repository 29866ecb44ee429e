// The mod's wiring, run by `claude plugin test hooks/`: $.process.run has no implementation
// under test, so each case stubs it and checks the argv, the stdin document and how the answer
// maps back. The Python side itself is covered by tests/test_hook_entry.py and the e2e suite.
import { expect, mock, test } from 'claude-code/testing'

const PREPARING =
  'fast-jev-compaction is preparing its Python environment; this compaction uses the built-in summary'

const MESSAGES = [
  { role: 'user', text: 'do the thing', toolUses: [], handle: 'h-0' },
  {
    role: 'assistant',
    text: '',
    toolUses: [{ tool_use_id: 'toolu_1', tool: 'Bash', input: { command: 'seq 1 9' }, text: '1\n2' }],
    handle: 'h-1',
  },
  { role: 'user', text: '', toolUses: [], toolResults: [{ tool_use_id: 'toolu_1', text: '1\n2', isError: false }], handle: 'h-2' },
  { role: 'assistant', text: 'Done.', toolUses: [], handle: 'h-3' },
] as const

const SUMMARY = { messages: [{ role: 'user', text: 'CORE SUMMARY', toolUses: [] }] }

type Run = { argv: readonly string[]; init: { stdin?: string; timeoutMs?: number; env?: Record<string, string> } }

// The world beneath the plugin: a python answer (or a failure), a recorded UI, a core summary.
function world(
  on: any,
  answer: unknown,
  opts: { exitCode?: number; reject?: string; ready?: boolean; throwingUi?: boolean; python?: string } = {},
) {
  const seen = { runs: [] as Run[], toasts: [] as string[], logs: [] as string[], core: 0, spills: [] as { path: string; text: string }[] }
  mock.env(on, opts.ready === false ? {} : { FAST_JEV_PYTHON: opts.python ?? '/usr/bin/python3' })
  on('process.hookEnv', async () => ({ value: { CLAUDE_PLUGIN_DATA: '/plugin-data', CLAUDE_PLUGIN_ROOT: '/root' } }))
  on('fs.exists', async () => ({ value: false }))
  on('fs.write', async (_: unknown, e: { path: string; text: string }) => {
    seen.spills.push(e)
    return { value: undefined }
  })
  on('process.run', async (_: unknown, e: Run) => {
    seen.runs.push(e)
    // A refused call rejects in the mod, as a timed-out child does in a session.
    if (opts.reject !== undefined) return { deny: opts.reject }
    const stdout = typeof answer === 'string' ? answer : JSON.stringify(answer)
    return { value: { exitCode: opts.exitCode ?? 0, stdout, stderr: '', isStdoutTruncated: false, isStderrTruncated: false } }
  })
  on('ui.toast', async (_: unknown, e: { text: string }) => {
    seen.toasts.push(e.text)
    if (opts.throwingUi) throw new Error('toast broke')
    return { value: undefined }
  })
  on('ui.log', async (_: unknown, e: { text: string }) => {
    seen.logs.push(e.text)
    if (opts.throwingUi) throw new Error('log broke')
    return { value: undefined }
  })
  on('session.compact', async () => {
    seen.core += 1
    return SUMMARY
  })
  return seen
}

const REPLACE = {
  action: 'replace',
  messages: [
    { handle: 'h-0' },
    { role: 'assistant', text: '', toolUses: [{ tool_use_id: 'toolu_1', tool: 'Bash', input: { command: 'seq 1 9' }, text: '1\n[truncated]' }] },
    { role: 'user', text: '', toolUses: [], toolResults: [{ tool_use_id: 'toolu_1', text: '1\n[truncated]', isError: false }] },
    { ...MESSAGES[3] },
  ],
  toast: 'kept 4/4 messages, no summary (50.0% reduction; 1 truncated)',
  log: ['decisions: t1:Bash:truncate/call=0.80/result=0.10'],
}

test('replace: runs the entry with one JSON document and hands back the pruned history', async ($, on) => {
  const seen = world(on, REPLACE)
  const result = await $.session.compact({ trigger: 'manual', instructions: 'keep the numbers', messages: MESSAGES })

  expect(seen.runs.length).toBe(1)
  const [run] = seen.runs
  expect(run.argv[0]).toBe('/usr/bin/python3')
  expect(run.argv[1]).toBe('-I')
  expect(run.argv[2].endsWith('/hooks/fast_jev_hook.py')).toBe(true)
  expect(run.init.timeoutMs).toBe(120000)
  expect(run.init.env?.CLAUDE_PLUGIN_DATA).toBe('/plugin-data')
  const sent = JSON.parse(run.init.stdin ?? '{}')
  expect(sent.event).toBe('session.compact')
  expect(sent.trigger).toBe('manual')
  expect(sent.instructions).toBe('keep the numbers')
  expect(sent.pluginData).toBe('/plugin-data')
  expect(sent.options.compactAtPercent).toBe(60)
  expect(sent.options.minReductionRatio).toBe(0)
  expect(sent.messages).toEqual(MESSAGES)

  expect(result.messages?.length).toBe(4)
  expect(result.messages?.[0]).toEqual(MESSAGES[0])
  expect(result.messages?.[1].handle).toBeUndefined()
  expect(result.messages?.[2].toolResults?.[0].text).toBe('1\n[truncated]')
  expect(seen.core).toBe(0)
  expect(seen.toasts).toEqual([REPLACE.toast])
  expect(seen.logs).toContain(REPLACE.log[0])
})

test('fallback: the built-in summary runs once, with the toast from Python', async ($, on) => {
  const reason = 'below 25% minimum: 3.0% reduction; no tool calls'
  const seen = world(on, { action: 'fallback', reason, toast: `fallback to built-in summary (${reason})`, log: ['decisions: (none)'] })
  const result = await $.session.compact({ trigger: 'manual', messages: MESSAGES })
  expect(result).toEqual(SUMMARY)
  expect(seen.core).toBe(1)
  expect(seen.toasts).toEqual([`fallback to built-in summary (${reason})`])
})

test('skip: the veto reaches the engine and nothing is summarised', async ($, on) => {
  const seen = world(on, { action: 'skip', reason: 'nothing to compact', log: [] })
  const result = await $.session.compact({ trigger: 'manual', messages: MESSAGES })
  expect(result).toEqual({ skip: 'nothing to compact' })
  expect(seen.core).toBe(0)
})

// The decision-log row of an outcome only the mod sees, as spilled beside decisions.sqlite.
function spilled(seen: { spills: { path: string; text: string }[] }) {
  expect(seen.spills.length).toBe(1)
  const [spill] = seen.spills
  expect(/^\/plugin-data\/decisions\.sqlite\.spill-\d+-[a-z0-9]+\.json$/.test(spill.path)).toBe(true)
  const entry = JSON.parse(spill.text)
  expect(entry.decisions).toEqual([])
  expect(entry.compaction.outcome).toBe('fallback')
  expect(entry.compaction.messages_before).toBe(MESSAGES.length)
  return entry.compaction
}

// The built-in summary ran once, and one toast says why.
function expectOneFallback(seen, result, why) {
  expect(result).toEqual(SUMMARY)
  expect(seen.core).toBe(1)
  expect(seen.toasts.length).toBe(1)
  expect(seen.toasts[0].startsWith('fallback to built-in summary (')).toBe(true)
  expect(seen.toasts[0].includes(why)).toBe(true)
}

for (const [name, answer, opts, why, broken] of [
  ['a non-zero exit', REPLACE, { exitCode: 1 }, 'the Python hook exited with code 1', true],
  ['output that is not JSON', 'Traceback (most recent call last):', {}, 'JSON', true],
  ['a timeout', REPLACE, { reject: 'process.run: timed out after 120000 ms' }, 'timed out', true],
  ['an unknown handle', { ...REPLACE, messages: [{ handle: 'h-404' }] }, {}, 'unknown handle h-404', false],
  ['an empty message list', { ...REPLACE, messages: [] }, {}, 'the answer has no messages', false],
] as const) {
  test(`any failure falls back exactly once: ${name}`, async ($, on) => {
    const seen = world(on, answer, opts)
    expectOneFallback(seen, await $.session.compact({ trigger: 'manual', messages: MESSAGES }), why)
    // A broken interpreter wrote no row of its own, so the mod leaves one; a bad answer was logged by Python.
    if (broken) {
      const row = spilled(seen)
      expect(row.fallback_reason).toBe('broken-interpreter')
      expect(row.reason.includes(why)).toBe(true)
      expect(row.trigger).toBe('manual')
    } else {
      expect(seen.spills).toEqual([])
    }
  })
}

// An answer too large for stdout: its messages in a file the answer names ------------------------

const ANSWER_PATH = '/plugin-data/answers/answer-1700000000000-42-0a1b2c3d.json'
const READ_BYTES = 4 * 1024 * 1024
// Over one read's 4 MiB: the mod reads it in two ranges.
const LONG_REPLY = { role: 'assistant', text: 'kept verbatim. '.repeat(300000), toolUses: [] }
const FILE_TEXT = JSON.stringify([...REPLACE.messages.slice(0, 3), LONG_REPLY])

function fileWorld(on: any, stdout: unknown, file: { text?: string; size?: number; short?: boolean } = {}) {
  const reads = [] as { path: string; offset?: number; length?: number }[]
  // The same object world() counts on, not a copy: its counters move after this returns.
  const seen = Object.assign(world(on, stdout), { reads })
  const text = file.text ?? FILE_TEXT
  on('fs.stat', async () => ({ value: { kind: 'file', size: file.size ?? text.length, mtimeMs: 0, isSymlink: false } }))
  on('fs.read', async (_: unknown, e: { path: string; offset?: number; length?: number }) => {
    reads.push({ path: e.path, offset: e.offset, length: e.length })
    const start = e.offset ?? 0
    const end = file.short ? start + 10 : start + (e.length ?? text.length)
    return { value: text.slice(start, end) }
  })
  return seen
}

const FILE_ANSWER = {
  action: 'replace',
  messagesFile: { path: ANSWER_PATH, bytes: FILE_TEXT.length },
  toast: REPLACE.toast,
  log: REPLACE.log,
}

test('replace from a file: read by ranges, mapped as from stdout, then emptied', async ($, on) => {
  const seen = fileWorld(on, FILE_ANSWER)
  const result = await $.session.compact({ trigger: 'manual', messages: MESSAGES })
  expect(seen.reads).toEqual([
    { path: ANSWER_PATH, offset: 0, length: READ_BYTES },
    { path: ANSWER_PATH, offset: READ_BYTES, length: FILE_TEXT.length - READ_BYTES },
  ])
  expect(result.messages?.length).toBe(4)
  expect(result.messages?.[0]).toEqual(MESSAGES[0])
  expect(result.messages?.[3].text).toBe(LONG_REPLY.text)
  expect(seen.core).toBe(0)
  expect(seen.toasts).toEqual([REPLACE.toast])
  expect(seen.spills).toEqual([{ path: ANSWER_PATH, text: '' }])
})

for (const [name, stdout, file, why, emptied] of [
  ['a size on disk other than announced', FILE_ANSWER, { size: FILE_TEXT.length + 1 }, 'not', true],
  ['a read cut short', FILE_ANSWER, { short: true }, 'cut short', true],
  ['a file that is not JSON', { ...FILE_ANSWER, messagesFile: { path: ANSWER_PATH, bytes: 9 } }, { text: '[{"role":' }, 'JSON', true],
  ['a path outside the answers folder', { ...FILE_ANSWER, messagesFile: { path: '/etc/passwd', bytes: 10 } }, {}, 'outside the plugin data folder', false],
  ['a path that climbs out', { ...FILE_ANSWER, messagesFile: { path: '/plugin-data/answers/../hook.log', bytes: 10 } }, {}, 'outside', false],
  ['no size', { ...FILE_ANSWER, messagesFile: { path: ANSWER_PATH } }, {}, 'valid size', false],
] as const) {
  test(`an answer file that cannot be read falls back once: ${name}`, async ($, on) => {
    const seen = fileWorld(on, stdout, file)
    expectOneFallback(seen, await $.session.compact({ trigger: 'manual', messages: MESSAGES }), why)
    // Python logged its row; the mod only empties a file it was allowed to read.
    expect(seen.spills).toEqual(emptied ? [{ path: ANSWER_PATH, text: '' }] : [])
    if (!emptied) expect(seen.reads).toEqual([])
  })
}

test('a throwing UI never changes the answer', async ($, on) => {
  const seen = world(on, REPLACE, { throwingUi: true })
  const result = await $.session.compact({ trigger: 'manual', messages: MESSAGES })
  expect(result.messages?.length).toBe(4)
  expect(seen.core).toBe(0)
})

test('precompute is quiet: it logs and never toasts', async ($, on) => {
  const seen = world(on, REPLACE)
  const result = await $.session.compact({ trigger: 'precompute', messages: MESSAGES })
  expect(result.messages?.length).toBe(4)
  expect(seen.toasts).toEqual([])
  expect(seen.logs).toContain(REPLACE.toast)
})

test('without a Python environment: a clear toast, the bootstrap starts, the built-in summary runs', async ($, on) => {
  const seen = world(on, { ok: true }, { ready: false })
  const result = await $.session.compact({ trigger: 'auto', messages: MESSAGES })
  expect(result).toEqual(SUMMARY)
  expect(seen.core).toBe(1)
  expect(seen.toasts).toEqual([PREPARING])
  expect(seen.runs.length).toBe(1)
  expect(seen.runs[0].argv[0]).toBe('python3')
  expect(seen.runs[0].argv[1]).toBe('-I')
  expect(seen.runs[0].argv[2].endsWith('/hooks/bootstrap.py')).toBe(true)
  expect(seen.runs[0].init.env?.CLAUDE_PLUGIN_DATA).toBe('/plugin-data')
  const row = spilled(seen)
  expect(row.fallback_reason).toBe('python-not-ready')
  expect(row.reason).toBe('Python environment not ready')
  expect(row.trigger).toBe('auto')
})

test('the python option wins over the environment', { options: { python: '/opt/venv/bin/python', timeoutSeconds: 5 } }, async ($, on) => {
  const seen = world(on, REPLACE)
  await $.session.compact({ trigger: 'manual', messages: MESSAGES })
  expect(seen.runs[0].argv[0]).toBe('/opt/venv/bin/python')
  expect(seen.runs[0].init.timeoutMs).toBe(5000)
})

test('pythonFor refuses a relative FAST_JEV_PYTHON: the built-in summary runs and says why', async ($, on) => {
  const seen = world(on, REPLACE, { python: 'venv/bin/python' })
  const result = await $.session.compact({ trigger: 'manual', messages: MESSAGES })
  expect(result).toEqual(SUMMARY)
  expect(seen.runs).toEqual([])
  const why = 'FAST_JEV_PYTHON is a relative path (venv/bin/python); give an absolute path or a command name on PATH'
  expect(seen.toasts).toEqual([`fallback to built-in summary (${why})`])
  const row = spilled(seen)
  expect(row.fallback_reason).toBe('broken-interpreter')
  expect(row.reason).toBe(why)
})

test('pythonFor refuses a relative python option too', { options: { python: './bin/python' } }, async ($, on) => {
  const seen = world(on, REPLACE)
  const result = await $.session.compact({ trigger: 'manual', messages: MESSAGES })
  expect(result).toEqual(SUMMARY)
  expect(seen.runs).toEqual([])
  expect(spilled(seen).reason).toBe('the python option is a relative path (./bin/python); give an absolute path or a command name on PATH')
})

test('pythonFor takes a command name on PATH as it is', async ($, on) => {
  const seen = world(on, REPLACE, { python: 'python3' })
  await $.session.compact({ trigger: 'manual', messages: MESSAGES })
  expect(seen.runs[0].argv[0]).toBe('python3')
})

// turn.complete -------------------------------------------------------------------------------

const TURN = { answer: 'Done.', durationMs: 10, isAborted: false, turnId: 't-1', reason: 'answer' } as const

function turnWorld(on: any, percent: number | undefined | (number | undefined)[], compactFails = false,
                   figures: { tokens: number; window: number } = { tokens: 1, window: 100 }) {
  const seen = { usage: 0, compactions: 0, next: 0, logs: [] as string[] }
  const percents = Array.isArray(percent) ? percent : undefined
  on('session.usage', async () => {
    seen.usage += 1
    const now = percents ? percents[Math.min(seen.usage - 1, percents.length - 1)] : percent
    return { value: { startedAt: 0, context: { ...figures, percent: now }, rateLimits: [] } }
  })
  on('session.compact', async () => {
    seen.compactions += 1
    if (compactFails) throw new Error('not available in a headless (-p / SDK) session yet')
    return { skip: 'stand-in' }
  })
  on('turn.complete', async (_: unknown, e: { answer: string }) => {
    seen.next += 1
    return { text: e.answer }
  })
  on('ui.log', async (_: unknown, e: { text: string }) => {
    seen.logs.push(e.text)
    return { value: undefined }
  })
  return seen
}

test('turn.complete compacts at the threshold and passes the turn on', async ($, on) => {
  const seen = turnWorld(on, 60)
  const result = await $.turn.complete(TURN)
  expect(result.text).toBe('Done.')
  expect(seen.compactions).toBe(1)
  expect(seen.next).toBe(1)
})

test('turn.complete below the threshold does not compact', async ($, on) => {
  const seen = turnWorld(on, 59)
  await $.turn.complete(TURN)
  expect(seen.usage).toBe(1)
  expect(seen.compactions).toBe(0)
  expect(seen.next).toBe(1)
})

test("the trigger counts the turn's last reply, which the usage leaves out", async ($, on) => {
  // 55,000 of 100,000 measured: the request's input; its reply of 6,000 tokens brings it to 61 %.
  const seen = turnWorld(on, 55, false, { tokens: 55000, window: 100000 })
  const reply = { input_tokens: 4, cache_creation_input_tokens: 996, cache_read_input_tokens: 54000, output_tokens: 6000 }
  await $.turn.complete({ ...TURN, usage: reply })
  expect(seen.compactions).toBe(1)
})

test("a turn's usage of another request leaves the measured percent as it is", async ($, on) => {
  const seen = turnWorld(on, 55, false, { tokens: 55000, window: 100000 })
  await $.turn.complete({ ...TURN, usage: { input_tokens: 4, cache_read_input_tokens: 40000, output_tokens: 6000 } })
  await $.turn.complete({ ...TURN, turnId: 't-2' })
  expect(seen.compactions).toBe(0)
})

test('turn.complete honours compactAtPercent', { options: { compactAtPercent: 90 } }, async ($, on) => {
  const seen = turnWorld(on, 89)
  await $.turn.complete(TURN)
  expect(seen.compactions).toBe(0)
})

test('the trigger fires once per upward crossing, again only after usage grows 10 points', async ($, on) => {
  // 75: crossing; 76, 77: still above, no re-fire; 86: grew 11 points; 50: back under; 65: new crossing.
  const seen = turnWorld(on, [75, 76, 77, 86, 50, 65, undefined, 66])
  for (let turn = 0; turn < 8; turn++) await $.turn.complete({ ...TURN, turnId: `t-${turn}` })
  expect(seen.usage).toBe(8)
  expect(seen.compactions).toBe(3)
  expect(seen.next).toBe(8)
})

test('a subagent turn never compacts and never reads usage', async ($, on) => {
  const seen = turnWorld(on, 99)
  await $.turn.complete({ ...TURN, agentId: 'agent-1' })
  expect(seen.usage).toBe(0)
  expect(seen.compactions).toBe(0)
  expect(seen.next).toBe(1)
})

test('two racing turns compact once; both pass on', async ($, on) => {
  const seen = turnWorld(on, 75)
  await Promise.all([$.turn.complete(TURN), $.turn.complete({ ...TURN, turnId: 't-2' })])
  expect(seen.usage).toBe(1)
  expect(seen.compactions).toBe(1)
  expect(seen.next).toBe(2)
})

test('a refused compaction is logged and the turn still passes on', async ($, on) => {
  const seen = turnWorld(on, 80, true)
  const result = await $.turn.complete(TURN)
  expect(result.text).toBe('Done.')
  expect(seen.next).toBe(1)
  expect(seen.logs.some(line => line.startsWith('auto-compact skipped ('))).toBe(true)
})

// The figures the gate reads -------------------------------------------------------------------

const BREAKDOWN = { totalTokens: 70300, rawMaxTokens: 100000, autoCompactThreshold: 67000, isAutoCompactEnabled: true, gridRows: [[]] }

function figuresWorld(on: any, percents: (number | undefined)[] = [64]) {
  const seen = { asked: [] as unknown[], sent: [] as any[], fired: 0, core: 0 }
  mock.env(on, { FAST_JEV_PYTHON: '/usr/bin/python3' })
  on('process.hookEnv', async () => ({ value: { CLAUDE_PLUGIN_DATA: '/plugin-data' } }))
  on('session.usage', async (_: unknown, e: { breakdown?: string } | undefined) => {
    seen.asked.push(e?.breakdown)
    const percent = percents[Math.min(seen.asked.length - 1, percents.length - 1)]
    const context: Record<string, unknown> = { tokens: 64000, window: 1000000, percent }
    if (e?.breakdown) context.breakdown = BREAKDOWN
    return { value: { startedAt: 0, context, rateLimits: [] } }
  })
  on('process.run', async (_: unknown, e: Run) => {
    seen.sent.push(JSON.parse(e.init.stdin ?? '{}'))
    return { value: { exitCode: 0, stdout: JSON.stringify(REPLACE), stderr: '', isStdoutTruncated: false, isStderrTruncated: false } }
  })
  on('ui.log', async (_: unknown, e: { text: string }) => {
    if (e.text.endsWith('compacting')) seen.fired += 1
    return { value: undefined }
  })
  on('ui.toast', async () => ({ value: undefined }))
  on('session.compact', async () => {
    seen.core += 1
    return { skip: 'stand-in' }
  })
  on('turn.complete', async (_: unknown, e: { answer: string }) => ({ text: e.answer }))
  return seen
}

test("the engine's own compaction sends its threshold and compaction window from the breakdown", async ($, on) => {
  const seen = figuresWorld(on)
  await $.session.compact({ trigger: 'auto', messages: MESSAGES })
  expect(seen.asked).toEqual(['summary'])
  expect(seen.sent[0].context).toEqual({
    tokens: 64000, window: 1000000, percent: 64, compaction: { tokens: 70300, window: 100000, threshold: 67000 },
  })
})

test('/compact and a subagent compaction send the plain figures and ask for no breakdown', async ($, on) => {
  const seen = figuresWorld(on)
  await $.session.compact({ trigger: 'manual', messages: MESSAGES })
  await $.session.compact({ trigger: 'auto', agentId: 'agent-1', messages: MESSAGES })
  expect(seen.asked).toEqual([undefined, undefined])
  expect(seen.sent.map(doc => doc.context)).toEqual([
    { tokens: 64000, window: 1000000, percent: 64 },
    { tokens: 64000, window: 1000000, percent: 64 },
  ])
})

// That the trigger's own pass does not re-arm it is seen in the real binary only (the engine
// runs a mod's session.compact on its own $.session.compact() there, not under test):
// tests/e2e/test_repeated_compaction.py, the trigger case.
test('a compaction the trigger did not start re-arms it', async ($, on) => {
  // 75: crossing; 76: still above, no re-fire; /compact replaces the history; 76: fires again;
  // 77: nothing changed since, no re-fire.
  const seen = figuresWorld(on, [75, 76, 64, 76, 77])
  await $.turn.complete(TURN)
  await $.turn.complete({ ...TURN, turnId: 't-2' })
  await $.session.compact({ trigger: 'manual', messages: MESSAGES })
  await $.turn.complete({ ...TURN, turnId: 't-3' })
  await $.turn.complete({ ...TURN, turnId: 't-4' })
  expect(seen.fired).toBe(2)
})
