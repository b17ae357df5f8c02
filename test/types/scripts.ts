/*
 * Type tests for the script-author declarations in types/ (run by `tsc -p test/types`).
 *
 * Realistic scripts that use every ctx member, every request and response method, Part, the
 * platform helpers and the hook signatures, plus `@ts-expect-error` lines proving that wrong
 * usage and Node/DOM globals are rejected. Nothing here is executed.
 */

// -------------------------------------------------------------------------------------------------
// Exact-type assertions: `assertType<Equal<A, B>>(true)` fails to compile unless A and B are identical.
// -------------------------------------------------------------------------------------------------
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<T extends true>(_ok: T): void {}

// -------------------------------------------------------------------------------------------------
// ctx members
// -------------------------------------------------------------------------------------------------
assertType<Equal<APIContext['headers'], Record<string, string>>>(true);
assertType<Equal<APIContext['cookies'], Record<string, string>>>(true);
assertType<Equal<APIContext['query'], Record<string, string | string[]>>>(true);
assertType<Equal<APIContext['body'], string>>(true);
assertType<Equal<APIContext['url'], string>>(true);
assertType<Equal<APIContext['appId'], string>>(true);
assertType<Equal<APIContext['path'], string>>(true);
assertType<Equal<APIContext['method'], string>>(true);
assertType<Equal<ReturnType<APIContext['getParts']>, Part[]>>(true);
assertType<Equal<APIContext['request'], PlatformHttpRequest>>(true);
assertType<Equal<APIContext['response'], PlatformHttpResponse>>(true);

// request
assertType<Equal<ReturnType<PlatformHttpRequest['getAttribute']>, any>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['getParameter']>, string | null>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['getParameterValues']>, string[] | null>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['getParameterMap']>, Record<string, string[]>>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['getServerPort']>, number>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['getRemotePort']>, number>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['isSecure']>, boolean>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['getCookies']>, Cookie[] | null>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['getHeader']>, string | null>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['getHeaders']>, Enumeration<string>>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['getQueryString']>, string | null>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['getUserPrincipal']>, Principal | null>>(true);
assertType<Equal<ReturnType<PlatformHttpRequest['getPart']>, Part | null>>(true);

// response
assertType<Equal<ReturnType<PlatformHttpResponse['getHeaders']>, string[]>>(true);
assertType<Equal<ReturnType<PlatformHttpResponse['getHeaderNames']>, string[]>>(true);
assertType<Equal<ReturnType<PlatformHttpResponse['getStatus']>, number>>(true);
assertType<Equal<ReturnType<PlatformHttpResponse['getOutputStream']>, ServletOutputStream>>(true);
assertType<Equal<ReturnType<PlatformHttpResponse['getWriter']>, PrintWriter>>(true);
assertType<Equal<ReturnType<PrintWriter['append']>, PrintWriter>>(true);

// Part, APIError, FileResult, platform
assertType<Equal<Part['submittedFileName'], string | null>>(true);
assertType<Equal<ReturnType<Part['save']>, SavedFile>>(true);
assertType<Equal<ReturnType<Part['saveStorage']>, SavedFile>>(true);
assertType<Equal<ReturnType<Part['saveAttachment']>, TableAttachment>>(true);
assertType<Equal<SavedFile, { path: string; size: number }>>(true);
assertType<Equal<APIError, { requestId: string; message: string; code: number }>>(true);
assertType<Equal<FileResult['contentDisposition'], 'inline' | 'attachment' | undefined>>(true);
assertType<Equal<ReturnType<typeof platform.app.abort>, never>>(true);
assertType<Equal<ReturnType<typeof platform.system.getAccountByToken>, Account | null>>(true);
assertType<Equal<ReturnType<typeof platform.utils.toJSON>, string>>(true);
assertType<Equal<ReturnType<typeof platform.utils.stringToBytes>, number[]>>(true);
assertType<Equal<ReturnType<PlatformHttpResponseData['saveBodyAsFile']>, SavedFile>>(true);
assertType<Equal<Account['id'], string>>(true);
assertType<Equal<Account['isValid'], boolean | undefined>>(true);
assertType<Equal<Account['valid'], boolean | undefined>>(true);
assertType<Equal<Account['createTime'], number | undefined>>(true);
assertType<Equal<Account['departmentId'], unknown>>(true); // extra fields of the host's account service
assertType<Equal<Parameters<ErrorHook>, [ctx: APIContext, error: APIError]>>(true);
assertType<Equal<Parameters<AfterHook>, [ctx: APIContext, result: any]>>(true);
assertType<Equal<Parameters<AutomationStepFunction>, [ctx: APIContext, state: AutomationState]>>(true);
// an automation's script step: (ctx, state), its return value the step's result
export const price: AutomationStepFunction = (ctx, state) => ({ unit: 2.5, qty: state.vars.qty as number, last: state.steps.fetch, of: state.result, app: ctx.appId });
// @ts-expect-error state has steps, vars and result only
export const wrongState: AutomationStepFunction = (ctx, state) => state.variables;

// -------------------------------------------------------------------------------------------------
// Preprocessing hook: authentication (the spec's example). abort() returns never, so `account`
// is narrowed to Account after the check.
// -------------------------------------------------------------------------------------------------
export const authenticate: BeforeHook = (ctx) => {
  const raw = ctx.query.token;
  const token = (typeof raw === 'string' ? raw : raw?.[0]) ?? ctx.request.getHeader('authorization')?.replace(/^Bearer /, '');
  if (!token) {
    platform.app.abort('token missing', 401);
  }
  const account = platform.system.getAccountByToken(token);
  if (account == null) {
    platform.app.abort('token expired or invalid');
  }
  const id: string = account.id;
  const name: string = account.name ?? account.userName ?? id;
  if (account.isValid === false || account.valid === false) platform.app.abort(`account ${name} disabled`, 403);
  const created: number | undefined = account.createTime;
  const fields: Array<string | boolean | number | undefined> = [
    account.avatar,
    account.companyId,
    account.email,
    account.mobileNo,
    account.updateTime,
    created,
  ];
  console.debug('authenticated', id, fields.length);
  ctx.request.setAttribute('account', account);
  ctx.request.setAttribute('since', new Date()); // later scripts get a ms timestamp
  return undefined; // let the call run
};

// Returning early answers the request directly.
export async function cacheGate(ctx: APIContext): Promise<{ cached: true } | undefined> {
  if (ctx.headers['if-none-match'] === '"v1"') return { cached: true };
  return undefined;
}

// -------------------------------------------------------------------------------------------------
// API functions: every ctx member and every request method
// -------------------------------------------------------------------------------------------------
interface Order {
  id: string;
  total: number;
  createdAt: Date;
}

export function list(ctx: APIContext): { orders: Order[]; page: number; tags: string[] } {
  const account = ctx.request.getAttribute('account') as Account | null;
  const pageParam = ctx.query.page;
  const page = Number(Array.isArray(pageParam) ? pageParam[0] : pageParam ?? '1');
  const tagParam = ctx.query.tag;
  const tags: string[] = tagParam === undefined ? [] : Array.isArray(tagParam) ? tagParam : [tagParam];
  const session: string | undefined = ctx.cookies.session;
  const agent: string | undefined = ctx.headers['user-agent'];
  console.log(ctx.method, ctx.url, ctx.appId, ctx.path, ctx.body.length, session, agent, account?.id);
  return { orders: [{ id: 'o-1', total: 12.5, createdAt: new Date(0) }], page, tags };
}

export function describeRequest(ctx: APIContext): Record<string, unknown> {
  const req = ctx.request;

  // attributes
  req.setAttribute('step', 1);
  const step: number = req.getAttribute('step');
  const attrNames: string[] = [];
  const names = req.getAttributeNames();
  while (names.hasMoreElements()) attrNames.push(names.nextElement());
  req.removeAttribute('step');

  // parameters
  const q: string | null = req.getParameter('q');
  const paramNames = [...req.getParameterNames()];
  const ids: string[] = req.getParameterValues('id') ?? [];
  const map: Record<string, string[]> = req.getParameterMap();

  // connection and server
  const conn = {
    charset: req.getCharacterEncoding(),
    protocol: req.getProtocol(),
    scheme: req.getScheme(),
    server: `${req.getServerName()}:${req.getServerPort()}`,
    remote: `${req.getRemoteAddr()} ${req.getRemoteHost()}:${req.getRemotePort().toFixed(0)}`,
    secure: req.isSecure(),
  };

  // request data
  const cookies = (req.getCookies() ?? []).map((c) => `${c.getName()}=${c.getValue()} (${c.name}=${c.value})`);
  const accept: string[] = [];
  for (const v of req.getHeaders('accept')) accept.push(v);
  const headerNames = Array.from(req.getHeaderNames());
  const it: IterableIterator<string> = req.getHeaderNames().asIterator();
  const principal = req.getUserPrincipal();
  const data = {
    contentType: req.getContentType(),
    authType: req.getAuthType(),
    host: req.getHeader('host'),
    method: req.getMethod(),
    pathInfo: req.getPathInfo(),
    contextPath: req.getContextPath(),
    queryString: req.getQueryString(),
    remoteUser: req.getRemoteUser(),
    principal: principal === null ? null : principal.getName(),
    uri: req.getRequestURI(),
    url: req.getRequestURL(),
    servletPath: req.getServletPath(),
    parts: req.getParts().length,
    avatar: req.getPart('avatar')?.getSubmittedFileName() ?? null,
    firstHeader: it.next().value,
  };
  return { step, attrNames, q, paramNames, ids, map, conn, cookies, accept, headerNames, data };
}

// -------------------------------------------------------------------------------------------------
// Uploads: Part
// -------------------------------------------------------------------------------------------------
export function upload(ctx: APIContext): { saved: SavedFile[]; attachment: TableAttachment | null } {
  const saved: SavedFile[] = [];
  let attachment: TableAttachment | null = null;
  for (const part of ctx.getParts()) {
    const fileName = part.submittedFileName ?? part.getSubmittedFileName() ?? `${part.name}.bin`;
    if (part.size > 5 * 1024 * 1024 || part.getSize() === 0) continue;
    console.info(part.getName(), part.contentType, part.getContentType());
    saved.push(part.save(`uploads/${fileName}`));
    saved.push(part.saveStorage(`shared/${fileName}`));
    if (part.name === 'avatar') attachment = part.saveAttachment('tbl_users', 'fld_avatar');
  }
  const total: number = saved.reduce((n, f) => n + f.size, 0);
  console.log(total, saved.map((f) => f.path));
  return { saved, attachment };
}

// -------------------------------------------------------------------------------------------------
// File and Redirect results
// -------------------------------------------------------------------------------------------------
export function download(ctx: APIContext): FileResult {
  const name = ctx.request.getParameter('name') ?? 'report.csv';
  if (ctx.query.shared !== undefined) return { storagePath: `exports/${name}`, name, contentDisposition: 'attachment' };
  return { path: `reports/${name}`, name, contentDisposition: 'inline' };
}

export function goHome(ctx: APIContext): string {
  return ctx.response.encodeRedirectURL(`https://example.com/${encodeURIComponent(ctx.appId)}`);
}

// -------------------------------------------------------------------------------------------------
// The response: every method
// -------------------------------------------------------------------------------------------------
export function csv(ctx: APIContext): void {
  const res = ctx.response;
  res.setBufferSize(64 * 1024);
  const size: number = res.getBufferSize();
  res.setStatus(200);
  res.setContentType('text/csv; charset=UTF-8');
  res.setCharacterEncoding('UTF-8');
  const charset: string = res.getCharacterEncoding();
  const type: string | null = res.getContentType();
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Removed', null);
  res.addHeader('Vary', 'Accept');
  res.addHeader('Vary', 'Cookie');
  res.setDateHeader('Last-Modified', Date.now());
  res.addDateHeader('X-Seen', new Date(0).getTime());
  res.setIntHeader('X-Count', 2);
  res.addIntHeader('X-Count', 3);
  const has: boolean = res.containsHeader('vary');
  const vary: string[] = res.getHeaders('vary');
  const first: string | null = res.getHeader('cache-control');
  const names: string[] = res.getHeaderNames();
  const link: string = res.encodeURL('/next') + res.encodeUrl('/a') + res.encodeRedirectUrl('/b');
  console.warn(size, charset, type, has, vary, first, names, link, res.getStatus());

  const w = res.getWriter();
  w.write('id,total\n');
  w.write(65);
  w.write(['o', 45, '1']);
  w.write('xx,1\n', 3, 2);
  w.print(1);
  w.println(',12.5');
  w.println();
  w.append('a').append(1).append(null).println();
  w.printf('%s,%.2f%n', 'o-2', 3).format('%d%%', 50);
  const failed: boolean = w.checkError();
  w.flush();
  if (!res.isCommitted() || failed) w.close();

  const out = res.getOutputStream();
  out.write([0xef, 0xbb, 0xbf]);
  out.write(new Uint8Array([1, 2, 3]), 1, 2);
  out.write(new Uint8Array(4).buffer);
  out.write(0x0a);
  out.write('utf-8 text');
  out.write(platform.utils.stringToBytes('é', 'ISO-8859-1'));
  out.print('x');
  out.println(42);
  out.println();
  if (out.isReady()) out.flush();
  out.close();
  res.flushBuffer();
}

export function resets(ctx: APIContext): void {
  const res = ctx.response;
  res.setContentLength(3);
  res.setContentLengthLong(3);
  res.getWriter().write('abc');
  res.resetBuffer();
  res.reset();
  if (ctx.method !== 'GET') {
    res.sendError(405);
    return;
  }
  if (ctx.query.old !== undefined) {
    res.sendRedirect('/new');
    return;
  }
  res.sendError(404, 'nothing here');
}

// -------------------------------------------------------------------------------------------------
// Post-processing and error hooks
// -------------------------------------------------------------------------------------------------
export const audit: AfterHook = (ctx, result) => {
  const account: Account | null = ctx.request.getAttribute('account');
  const since: number | null = ctx.request.getAttribute('since');
  console.info('audit', ctx.appId, ctx.path, account?.id, since, platform.utils.toJSON(result));
  return undefined; // keep the result
};

export async function wrap(ctx: APIContext, result: unknown): Promise<{ data: unknown; at: Date }> {
  return { data: result, at: new Date() };
}

export const handle: ErrorHook = (ctx, error) => {
  const code: number = error.code;
  ctx.response.setStatus(code === 270001 ? 401 : 200);
  ctx.response.setContentType('application/json;charset=UTF-8');
  ctx.response.getWriter().write(platform.utils.toJSON({ ...error, requestId: error.requestId, message: error.message }));
};

// Plain function declarations fit the hook types too.
export function handleAsync(ctx: APIContext, error: APIError): Promise<APIError> {
  return Promise.resolve({ ...error, message: `${ctx.path}: ${error.message}` });
}
const hooks: [BeforeHook, ApiFunction, AfterHook, ErrorHook, ErrorHook] = [cacheGate, list, wrap, handle, handleAsync];
console.log(hooks.length);

// Errors with a numeric code become the error body's code.
export function create(ctx: APIContext): ApiFunction {
  if (ctx.body === '') throw Object.assign(new Error('empty body'), { code: 400100 });
  return list;
}

// -------------------------------------------------------------------------------------------------
// Outbound HTTP, sync or awaited
// -------------------------------------------------------------------------------------------------
interface Rate {
  currency: string;
  rate: number;
}

export async function rates(ctx: APIContext): Promise<Rate[]> {
  const res = platform.http.request({
    url: 'https://api.example.com/rates',
    method: 'POST',
    headers: { authorization: `Bearer ${ctx.request.getHeader('x-upstream-token') ?? ''}` },
    body: { base: 'EUR', at: new Date() },
    timeoutMs: 2000,
  });
  const status: number = res.status;
  const type: string | undefined = res.headers['content-type'];
  const finalUrl: string = res.url;
  if (status !== 200) platform.app.abort(`upstream ${status} from ${finalUrl} (${type}): ${res.body.slice(0, 100)}`, 502);
  const awaited = await platform.http.request('https://api.example.com/ping');
  const text: string = awaited.text();
  const file: SavedFile = (await platform.http.request({ url: 'https://example.com/a.pdf' })).saveBodyAsFile('cache/a.pdf');
  console.error(text, file.size, platform.http.request({ url: 'https://example.com', body: 'raw' }).json<{ ok: boolean }>().ok);
  const any = res.json();
  return res.json<Rate[]>().concat(any);
}

export async function awaitHelpers(): Promise<number> {
  const account = await platform.system.getAccountByToken('t');
  const json = await platform.utils.toJSON({ a: 1 });
  const bytes = await platform.utils.stringToBytes('abc');
  return (account?.createTime ?? 0) + json.length + bytes.length;
}

// -------------------------------------------------------------------------------------------------
// Wrong usage is rejected
// -------------------------------------------------------------------------------------------------
export function wrong(ctx: APIContext): void {
  // @ts-expect-error a query value may be a string[] (repeated key)
  ctx.query.x.toUpperCase();
  // @ts-expect-error a query value is a string or string[], never a nested object
  console.log(ctx.query.filter.status);
  // @ts-expect-error headers are strings
  const n: number = ctx.headers['content-length'];
  // @ts-expect-error getParameter may return null
  ctx.request.getParameter('q').trim();
  // @ts-expect-error getParameterValues may return null
  ctx.request.getParameterValues('id').length;
  // @ts-expect-error getCookies returns null when there are none
  ctx.request.getCookies().length;
  // @ts-expect-error getPart may return null
  ctx.request.getPart('file').save('x');
  // @ts-expect-error an Enumeration is not an array
  ctx.request.getHeaderNames().length;
  // @ts-expect-error the status is a number
  ctx.response.setStatus('200');
  // @ts-expect-error sendError needs a status code
  ctx.response.sendError('Not found');
  // @ts-expect-error date headers take ms since the epoch
  ctx.response.setDateHeader('Expires', 'tomorrow');
  // @ts-expect-error setHeader needs a value
  ctx.response.setHeader('X-A');
  // @ts-expect-error PrintWriter.flush returns nothing to chain
  ctx.response.getWriter().flush().close();
  // @ts-expect-error write takes bytes, a byte or a string
  ctx.response.getOutputStream().write({ bytes: [1] });
  // @ts-expect-error the Part's size is a number
  const s: string = ctx.getParts()[0].size;
  // @ts-expect-error Part properties are read-only
  ctx.getParts()[0].name = 'other';
  // @ts-expect-error saveAttachment needs a table and a field
  ctx.getParts()[0].saveAttachment('tbl');
  // @ts-expect-error the message is a string
  platform.app.abort(1);
  // @ts-expect-error the token is a string
  platform.system.getAccountByToken(42);
  // @ts-expect-error getAccountByToken may return null
  platform.system.getAccountByToken('t').id;
  // @ts-expect-error a request needs a url
  platform.http.request({ method: 'GET' });
  // @ts-expect-error the response status is a number
  const st: string = platform.http.request('https://example.com').status;
  // @ts-expect-error platform is frozen
  platform.app = { abort: () => undefined as never };
  // @ts-expect-error no such helper
  platform.http.get('https://example.com');
  console.log(n, s, st);
}

export const badFile = (): FileResult => ({
  path: 'a.txt',
  // @ts-expect-error inline or attachment only
  contentDisposition: 'download',
});

// @ts-expect-error an error hook's second parameter is an APIError, not a string
export const badHook: ErrorHook = (ctx: APIContext, error: string) => error;

// -------------------------------------------------------------------------------------------------
// Node and DOM globals do not exist in the sandbox
// -------------------------------------------------------------------------------------------------
export function noNodeNoDom(): void {
  // @ts-expect-error no CommonJS
  require('fs');
  // @ts-expect-error no process
  console.log(process.env.SECRET);
  // @ts-expect-error no Buffer
  Buffer.from('x');
  // @ts-expect-error no timers
  setTimeout(() => undefined, 10);
  // @ts-expect-error no fetch: use platform.http.request
  fetch('https://example.com');
  // @ts-expect-error no URL
  new URL('https://example.com');
  // @ts-expect-error no TextEncoder: use platform.utils.stringToBytes
  new TextEncoder();
  // @ts-expect-error no DOM
  document.title;
  // @ts-expect-error no window
  window.alert('x');
  // @ts-expect-error the sandbox console has no table()
  console.table([]);
}
