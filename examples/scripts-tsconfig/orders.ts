// Orders API of one app, written in TypeScript. The host strips the types before running it;
// `APIContext`, `platform` and the other names below are the sandbox globals declared by
// scriptable-api/types (see tsconfig.json), so there is nothing to import.

interface Order {
  id: number;
  item: string;
  qty: number;
  createdAt: Date; // sent as a ms timestamp by the JSON return type
}

// Module state lives per worker and is reset when the script changes: keep real data in your own
// services (reached through platform.http.request), not here.
const ORDERS: Order[] = [
  { id: 1, item: 'pen', qty: 2, createdAt: new Date(Date.UTC(2026, 0, 5)) },
  { id: 2, item: 'ink', qty: 1, createdAt: new Date(Date.UTC(2026, 0, 6)) },
];

/** Execute before calling: bearer token or `?token=`, account kept for the later scripts. */
export const authenticate: BeforeHook = (ctx) => {
  const fromQuery = ctx.query.token; // string, or string[] when repeated
  const token = (Array.isArray(fromQuery) ? fromQuery[0] : fromQuery) ?? ctx.request.getHeader('authorization')?.replace(/^Bearer /, '');
  if (!token) platform.app.abort('token missing', 401);
  const account = platform.system.getAccountByToken(token);
  if (!account || account.valid === false) platform.app.abort('token expired or invalid', 401);
  ctx.request.setAttribute('account', account); // later scripts receive a JSON copy
};

/** GET orders/list?item=pen — return type JSON. */
export function list(ctx: APIContext): { owner: string | null; orders: Order[] } {
  const account: Account | null = ctx.request.getAttribute('account');
  const item = ctx.request.getParameter('item');
  return {
    owner: account?.name ?? null,
    orders: item === null ? ORDERS : ORDERS.filter((o) => o.item === item),
  };
}

/** POST orders/create with a JSON body — return type JSON. */
export async function create(ctx: APIContext): Promise<Order> {
  const input = JSON.parse(ctx.body || '{}') as Partial<Pick<Order, 'item' | 'qty'>>;
  if (typeof input.item !== 'string' || !(typeof input.qty === 'number' && input.qty > 0)) {
    // A numeric `code` on the thrown error becomes the `code` of the error body.
    throw Object.assign(new Error('item and a positive qty are required'), { code: 4001 });
  }
  const stock = platform.http.request({ url: `https://stock.example.com/items/${encodeURIComponent(input.item)}` });
  if (stock.status === 404) platform.app.abort(`unknown item ${input.item}`, 400);
  const order: Order = { id: ORDERS.length + 1, item: input.item, qty: input.qty, createdAt: new Date() };
  console.info('order created', order.id, 'by', ctx.request.getRemoteAddr());
  return order;
}

/** POST orders/attachments (multipart) — saves each uploaded file in the app's sandbox. */
export function attach(ctx: APIContext): SavedFile[] {
  const saved: SavedFile[] = [];
  for (const part of ctx.getParts()) saved.push(part.save(`orders/${part.submittedFileName ?? part.name}`));
  return saved;
}

/** GET orders/report — return type File. */
export function report(ctx: APIContext): FileResult {
  const inline = ctx.query.view === 'inline';
  return { path: 'report.csv', name: 'orders-report.csv', contentDisposition: inline ? 'inline' : 'attachment' };
}

/** Execute after calling error: status 200 with the APIError as JSON. */
export const handle: ErrorHook = (ctx, error) => {
  ctx.response.setStatus(200);
  ctx.response.setContentType('application/json;charset=UTF-8');
  ctx.response.getWriter().write(platform.utils.toJSON({ success: false, error }));
};
