'use strict';
// Automation definitions are refused when validated, naming the automation, the step and why:
// interactive and unknown step types, bad expressions, unknown fields. From a custom registry,
// an invalid definition answers 500 INVALID_AUTOMATION (validated once per object).
const request = require('supertest');
const { MemoryRegistry, ConfigError, validateAutomation } = require('..');
const { makeApp } = require('./helpers/app');

function refusal(def) {
  try {
    new MemoryRegistry().putAutomation('app', def);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e.message;
  }
  throw new Error('accepted: ' + JSON.stringify(def));
}

describe('interactive steps are refused (an API runs its automation unattended)', () => {
  test.each(['form', 'confirm', 'approval', 'message', 'openPage', 'input'])('type %s', (type) => {
    const message = refusal({ id: 'approve', steps: [{ id: 'first', type: 'set', vars: { a: '1' } }, { id: 'ask', type }] });
    expect(message).toBe(
      `scriptable-api: invalid automation 'approve' step 'ask': '${type}' is an interactive step (it waits for a person): an automation run by an API must not contain interactive steps`,
    );
  });

  test('any step marked interactive: true, also nested, named by its position when it has no id', () => {
    expect(refusal({ id: 'a', steps: [{ id: 's', type: 'script', script: 'x.js', function: 'f', interactive: true }] })).toMatch(
      /automation 'a' step 's': is marked interactive: true \(it waits for a person\)/,
    );
    expect(refusal({ id: 'a', steps: [{ type: 'if', condition: 'true', then: [{ type: 'forEach', items: '[]', steps: [{ type: 'confirm' }] }] }] })).toMatch(
      /automation 'a'\.steps\[0\]\.then\[0\]\.steps\[0\]: 'confirm' is an interactive step/,
    );
  });

  test('an interactive field that is not a boolean is refused for what it is, not said to be true', () => {
    for (const [v, shown] of [['yes', '"yes"'], [1, '1'], [null, 'null']]) {
      // (before: "interactive: is true: the step waits for a person", whatever it held)
      expect(refusal({ id: 'a', steps: [{ id: 's', type: 'set', vars: { n: 1 }, interactive: v }] })).toBe(
        `scriptable-api: invalid automation 'a' step 's'.interactive: must be false or left out (a step marked interactive waits for a person, and an automation run by an API must not contain interactive steps), got ${shown}`,
      );
    }
    expect(() => validateAutomation({ id: 'a', steps: [{ type: 'set', vars: { n: 1 }, interactive: false }] })).not.toThrow();
  });

  test('validateAutomation (exported) refuses the same', () => {
    expect(() => validateAutomation({ id: 'a', steps: [{ id: 'x', type: 'approval' }] })).toThrow(/automation 'a' step 'x': 'approval' is an interactive step/);
    expect(() => validateAutomation({ id: 'a', steps: [] })).not.toThrow();
  });

  test('validateAutomation checks an object as it is now: one changed since an earlier check is not passed on that check (an editor validating its object on each save)', () => {
    const def = { id: 'a', steps: [{ type: 'return', value: '1' }] };
    expect(() => validateAutomation(def)).not.toThrow();
    def.steps.push({ id: 'ask', type: 'confirm' });
    expect(() => validateAutomation(def)).toThrow(/automation 'a' step 'ask': 'confirm' is an interactive step/);
    def.steps.pop();
    def.steps.push({ id: 'total', type: 'set', vars: { sum: 'state.vars.price *' } });
    expect(() => validateAutomation(def)).toThrow(/automation 'a' step 'total'\.vars\.sum: bad expression/);
    def.steps.pop();
    expect(() => validateAutomation(def)).not.toThrow();
    // (and the other way round: one that was invalid and is fixed passes)
    const fixed = { id: 'b', steps: [{ id: 'ask', type: 'confirm' }] };
    expect(() => validateAutomation(fixed)).toThrow(/interactive step/);
    fixed.steps[0] = { type: 'return', value: '2' };
    expect(() => validateAutomation(fixed)).not.toThrow();
  });
});

test('an unknown step type names the types (and the one meant)', () => {
  expect(refusal({ id: 'a', steps: [{ id: 'loop', type: 'foreach', items: '[]', steps: [] }] })).toBe(
    "scriptable-api: invalid automation 'a' step 'loop': unknown step type 'foreach' (did you mean 'forEach'?); the step types are script, http, set, if, forEach, return, abort",
  );
  expect(refusal({ id: 'a', steps: [{ type: 'sendEmail' }] })).toMatch(/automation 'a'\.steps\[0\]: unknown step type 'sendEmail'; the step types are/);
});

describe('bad expressions are refused with the field and why', () => {
  test.each([
    [{ type: 'set', id: 'v', vars: { total: 'state.vars.price *' } }, /automation 'a' step 'v'\.vars\.total: bad expression "state\.vars\.price \*": Unexpected token: EOF at column 19$/],
    [{ type: 'abort', id: 'no', message: 'not found' }, /step 'no'\.message: bad expression "not found": .* \(a text is written in quotes inside the expression: "'not found'"\)/],
    [{ type: 'if', id: 'c', condition: 'request.ok', then: [] }, /step 'c'\.condition: bad expression "request\.ok": Unknown variable: request/],
    [{ type: 'return', id: 'r', value: '"a" + 1' }, /step 'r'\.value: bad expression "\\"a\\" \+ 1": no such overload: string \+ int/],
    [{ type: 'http', id: 'h', url: "'https://x.test/' + item" }, /step 'h'\.url: bad expression .*Unknown variable: item/], // `item` only inside forEach
    [{ type: 'http', id: 'h', url: "'https://x.test'", headers: { auth: "'Bearer ' +" } }, /step 'h'\.headers\.auth: bad expression/],
  ])('%j', (step, message) => {
    expect(refusal({ id: 'a', steps: [step] })).toMatch(message);
  });
});

test('shape errors name the field: unknown keys, missing fields, bad ids, duplicate ids', () => {
  expect(refusal({ id: 'a', steps: [{ id: 'h', type: 'http', url: "'https://x.test'", methd: 'POST' }] })).toBe("scriptable-api: invalid automation 'a' step 'h'.methd: is not a field (did you mean 'method'?)");
  expect(refusal({ id: 'a', stpes: [] })).toBe("scriptable-api: invalid automation 'a'.stpes: is not a field (did you mean 'steps'?)");
  expect(refusal({ id: 'a', steps: [{ id: 'h', type: 'http' }] })).toBe("scriptable-api: invalid automation 'a' step 'h'.url: is required");
  expect(refusal({ id: 'a', steps: [{ id: 'h', type: 'http', url: "'u'", method: 'GET /x' }] })).toMatch(/step 'h'\.method: must be an HTTP method such as "POST"/);
  expect(refusal({ id: 'a', steps: [{ id: 'two words', type: 'return' }] })).toMatch(/step 'two words'\.id: must be a name of letters, digits and '_'/);
  expect(refusal({ id: 'a', steps: [{ id: 'x', type: 'return' }, { type: 'if', condition: 'true', then: [{ id: 'x', type: 'return' }] }] })).toMatch(/step 'x': the step id 'x' is used twice/);
  expect(refusal({ id: 'a', steps: [{ id: 's', type: 'set', vars: { 'a-b': '1' } }] })).toMatch(/step 's'\.vars\.a-b: is not a variable name/);
  expect(refusal({ id: 'a', steps: [{ id: 'f', type: 'forEach', items: '[]', as: 'state', steps: [] }] })).toMatch(/step 'f'\.as: must be a variable name/);
  expect(refusal({ id: '', steps: [] })).toMatch(/automation ''\.id: must be a non-empty string/);
  expect(refusal({ steps: [] })).toMatch(/automation\.id: must be a non-empty string, got undefined/);
  expect(refusal('x')).toMatch(/automation: must be an object/);
});

test("an http step's header names and method are checked as the outbound client sends them: refused when registered, naming the field", () => {
  const http = (extra) => ({ id: 'a', steps: [{ id: 'h', type: 'http', url: "'https://x.test'", ...extra }] });
  expect(refusal(http({ headers: { 'bad name': "'v'" } }))).toBe(
    "scriptable-api: invalid automation 'a' step 'h'.headers.bad name: is not an HTTP header name (letters, digits and !#$%&'*+.^_`|~-)",
  );
  expect(refusal(http({ headers: { 'x-ok': "'v'", 'x-bad\r\nx-injected': "'v'" } }))).toMatch(/step 'h'\.headers\.x-bad\r\nx-injected: is not an HTTP header name/);
  expect(refusal(http({ headers: { '': "'v'" } }))).toMatch(/step 'h'\.headers\.: is not an HTTP header name/);
  expect(refusal(http({ method: 'CONNECT' }))).toMatch(/step 'h'\.method: must be an HTTP method such as "POST" \(a literal, not an expression; not CONNECT\), got "CONNECT"/);
  expect(refusal(http({ method: 'connect' }))).toMatch(/step 'h'\.method: must be an HTTP method/);
  expect(() => validateAutomation(http({ method: 'CONNECTION', headers: { 'x-trace-id': "'1'", "a!#$%&'*+.^_`|~b": 1 } }))).not.toThrow();
});

describe("a forEach's `as` that CEL cannot declare is refused naming `as` (not the first expression inside, nor accepted when none uses it)", () => {
  test.each([
    ['int', /already registered/],
    ['optional', /already registered/],
    ['__proto__', /reserved/],
    ['var', /reserved/],
    ['in', /keyword/],
    ['true', /keyword/],
  ])('%s', (as, why) => {
    for (const steps of [[], [{ type: 'return', value: "'x'" }]]) {
      const message = refusal({ id: 'a', steps: [{ id: 'f', type: 'forEach', items: '[1]', as, steps }] });
      expect(message).toMatch(new RegExp(`^scriptable-api: invalid automation 'a' step 'f'\\.as: `));
      expect(message).toMatch(why);
    }
  });
  test('an ordinary name is fine', () => {
    expect(() => validateAutomation({ id: 'a', steps: [{ type: 'forEach', items: '[1]', as: 'line', steps: [{ type: 'return', value: 'line' }] }] })).not.toThrow();
  });
});

test('a literal url, condition or items that could never work is refused when registered, naming the field', () => {
  const one = (step) => refusal({ id: 'a', steps: [{ id: 's', ...step }] });
  expect(one({ type: 'http', url: 5 })).toBe("scriptable-api: invalid automation 'a' step 's'.url: must be an expression (a string) giving the URL, got 5");
  expect(one({ type: 'http', url: null })).toMatch(/step 's'\.url: must be an expression \(a string\) giving the URL, got null$/);
  expect(one({ type: 'if', condition: 1, then: [] })).toBe("scriptable-api: invalid automation 'a' step 's'.condition: must be an expression (a string) or a boolean, got 1");
  expect(one({ type: 'if', condition: null, then: [] })).toMatch(/step 's'\.condition: must be an expression \(a string\) or a boolean, got null$/);
  expect(one({ type: 'forEach', items: { a: 1 }, steps: [] })).toBe('scriptable-api: invalid automation \'a\' step \'s\'.items: must be an expression (a string) or a list, got {"a":1}');
  expect(one({ type: 'forEach', items: 3, steps: [] })).toMatch(/step 's'\.items: must be an expression \(a string\) or a list, got 3$/);
  // the literals that can work are still literals
  expect(() => validateAutomation({ id: 'a', steps: [{ type: 'if', condition: false, then: [] }, { type: 'forEach', items: [1, 2], steps: [] }] })).not.toThrow();
});

test("'constructor' as a variable name or a step id is refused naming it (CEL could no longer read state.vars / state.steps)", () => {
  expect(refusal({ id: 'a', steps: [{ id: 's', type: 'set', vars: { a: '1', constructor: '2' } }] })).toBe(
    "scriptable-api: invalid automation 'a' step 's'.vars.constructor: cannot be a variable name: expressions could no longer read state.vars",
  );
  expect(refusal({ id: 'a', steps: [{ id: 'constructor', type: 'set', vars: { a: '1' } }] })).toBe(
    "scriptable-api: invalid automation 'a' step 'constructor'.id: cannot be 'constructor': expressions could no longer read state.steps",
  );
  expect(refusal({ id: 'a', steps: [{ id: 'constructor', type: 'http', url: "'https://x.test'" }] })).toMatch(/step 'constructor'\.id: cannot be 'constructor'/);
  expect(() => validateAutomation({ id: 'a', steps: [{ id: 'Constructor', type: 'set', vars: { constructed: '1' } }] })).not.toThrow();
});

/** An automation whose steps are `if` steps nested `levels` deep, a `return` of 'deep' at the bottom. */
function nested(id, levels) {
  let step = { type: 'return', value: "'deep'" };
  for (let i = 0; i < levels; i++) step = { type: 'if', condition: true, then: [step] };
  return { id, steps: [step] };
}

test('step lists nested past 50 levels are refused naming where (not a stack overflow); 50 levels are fine', () => {
  expect(() => validateAutomation(nested('ok', 49))).not.toThrow();
  const at = "automation 'a'.steps[0]" + '.then[0]'.repeat(49) + '.then';
  expect(refusal(nested('a', 50))).toBe(`scriptable-api: invalid automation ${at.slice('automation '.length)}: steps are nested more than 50 levels deep`);
  expect(refusal(nested('a', 1500))).toMatch(/: steps are nested more than 50 levels deep$/);
});

test('expressions past the documented limits are refused naming the field (README: 10,000 characters, 2,000 nodes, 50 levels, 1,000 list items or map entries, 32 arguments)', () => {
  const value = (v) => refusal({ id: 'a', steps: [{ type: 'return', value: v }] });
  const ok = (v) => expect(() => validateAutomation({ id: 'a', steps: [{ type: 'return', value: v }] })).not.toThrow();
  expect(value("'" + 'x'.repeat(9999) + "'")).toBe("scriptable-api: invalid automation 'a'.steps[0].value: the expression is longer than 10000 characters");
  ok("'" + 'x'.repeat(9998) + "'");
  expect(value('1' + '+1'.repeat(1500))).toMatch(/^scriptable-api: invalid automation 'a'\.steps\[0\]\.value: bad expression .*Exceeded maxAstNodes \(2000\)/);
  ok('1' + '+1'.repeat(900));
  expect(value('('.repeat(51) + '1' + ')'.repeat(51))).toMatch(/Exceeded maxDepth \(50\)/);
  ok('('.repeat(45) + '1' + ')'.repeat(45));
  expect(value('[' + Array(1001).fill(1).join(',') + ']')).toMatch(/Exceeded maxListElements \(1000\)/);
  ok('[' + Array(1000).fill(1).join(',') + ']');
  expect(value('{' + Array.from({ length: 1001 }, (_, i) => `'k${i}': 1`).join(',') + '}')).toMatch(/Exceeded max(MapEntries \(1000\)|AstNodes \(2000\))/);
  expect(value('f(' + Array(33).fill(1).join(',') + ')')).toMatch(/Exceeded maxCallArguments \(32\)/);
});

describe('an automation as a whole is bounded (its compiled form is held on the host and in every worker)', () => {
  // a 2,000-node expression: its parsed form takes about half a MiB wherever it is compiled
  const big = Array(1000).fill('1').join('-');
  const sets = (n, expr = big) => ({ id: 'a', steps: Array.from({ length: n }, (_, i) => ({ id: `s${i}`, type: 'set', vars: { v: expr } })) });
  const returns = (n) => ({ id: 'a', steps: [{ type: 'forEach', items: '[1]', steps: Array.from({ length: n - 1 }, () => ({ type: 'return' })) }] });

  test('expressions past 10,000 syntax nodes together are refused naming the one that passes them; 10,000 are fine', () => {
    expect(() => validateAutomation(sets(5))).not.toThrow();
    expect(refusal(sets(6))).toBe("scriptable-api: invalid automation 'a' step 's5'.vars.v: the automation's expressions have more than 10000 syntax nodes together");
  });

  test('more than 1,000 steps (nested ones counted) are refused naming the one past them; 1,000 are fine', () => {
    expect(() => validateAutomation(returns(1000))).not.toThrow();
    expect(refusal(returns(1001))).toBe("scriptable-api: invalid automation 'a'.steps[0].steps[999]: the automation has more than 1000 steps (nested ones counted)");
  });

  test('the host keeps what it validated, not its compiled form (workers compile what they run)', () => {
    const v8 = require('node:v8');
    v8.setFlagsFromString('--expose-gc');
    const gc = require('node:vm').runInNewContext('gc');
    // the flag stays set for the rest of this jest worker: contexts created later (other suites'
    // sandboxes) would get a `gc` global too
    v8.setFlagsFromString('--no-expose-gc');
    const registry = new MemoryRegistry();
    gc();
    const before = process.memoryUsage().heapUsed;
    // 20 definitions at the limit (about 0.5 MB of JSON in all): 3 MiB each compiled
    for (let i = 0; i < 20; i++) registry.putAutomation('app', { ...sets(5, Array(1000).fill(String(i)).join('-')), id: `a${i}` });
    gc();
    expect((process.memoryUsage().heapUsed - before) / (1024 * 1024)).toBeLessThan(20);
  }, 60_000);

  test('a definition far past them is refused at once, not compiled whole first', () => {
    const started = Date.now();
    expect(refusal(sets(1000))).toMatch(/step 's5'\.vars\.v: the automation's expressions have more than 10000 syntax nodes together$/);
    expect(refusal({ id: 'a', steps: Array.from({ length: 200_000 }, () => ({ type: 'return' })) })).toMatch(/'a'\.steps\[1000\]: the automation has more than 1000 steps/);
    // (compiled whole: 1,000 such expressions held about 500 MiB and took 10-40 s on the host's thread)
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe('from a custom registry', () => {
  let reads = 0;
  const invalid = { id: 'bad', steps: [{ id: 'ask', type: 'confirm' }] };
  const deep = nested('deep', 3000);
  const counted = new Proxy(invalid, {
    get(target, key) {
      if (key === 'steps') reads++;
      return target[key];
    },
  });
  const errors = [];
  const { app, router } = makeApp({
    registry: {
      getApi: (appId, path) => ({ path, call: { automation: path }, returnType: 'JSON' }),
      getScript: () => undefined,
      getAutomation: (appId, id) => (id === 'bad' ? counted : id === 'text' ? 'not an object' : id === 'deep' ? deep : id === 'nested' ? nested('nested', 49) : undefined),
    },
    router: { logger: { info() {}, warn() {}, error: (m) => errors.push(m) } },
  });
  afterAll(() => router.close());

  test('an invalid definition answers 500 INVALID_AUTOMATION naming it, validated once per object', async () => {
    const res = await request(app).get('/web0/api/x/bad');
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ code: 270604, message: expect.stringContaining("automation 'bad' step 'ask': 'confirm' is an interactive step") });
    expect(errors.join('\n')).toMatch(/'confirm' is an interactive step/);
    const after = reads;
    expect((await request(app).get('/web0/api/x/bad')).body.code).toBe(270604);
    expect(reads).toBe(after);
    const text = await request(app).get('/web0/api/x/text');
    expect(text.body).toMatchObject({ code: 270604, message: expect.stringMatching(/getAutomation returned a string, not an object/) });
  });

  test('steps nested too deep answer INVALID_AUTOMATION (not a host failure); 50 levels run', async () => {
    const res = await request(app).get('/web0/api/x/deep');
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ code: 270604, message: expect.stringMatching(/^scriptable-api: invalid automation 'deep'\.steps\[0\](\.then\[0\])+\.then: steps are nested more than 50 levels deep$/) });
    const ok = await request(app).get('/web0/api/x/nested');
    expect(ok.status).toBe(200);
    expect(ok.body).toBe('deep');
  });

  test('an automation the registry does not have is not found in the app', async () => {
    const res = await request(app).get('/web0/api/x/none');
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ code: 270603, message: "Automation 'none' not found in app 'x'" });
  });
});

test('MemoryRegistry keeps a frozen copy of what it validated', () => {
  const reg = new MemoryRegistry();
  const def = { id: 'a', steps: [{ type: 'return', value: "'one'" }] };
  reg.putAutomation('app', def);
  def.steps.push({ type: 'confirm' });
  const stored = reg.getAutomation('app', 'a');
  expect(stored.steps).toHaveLength(1);
  expect(Object.isFrozen(stored.steps[0])).toBe(true);
});
