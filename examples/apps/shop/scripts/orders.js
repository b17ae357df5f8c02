// The calls. Module state lives per worker and is reset when the script changes: keep real data
// in your own services (reached through platform.http.request) rather than in module variables.
const ORDERS = [
  { id: 1, item: 'pen', qty: 2, createdAt: new Date(Date.UTC(2026, 0, 5)) },
  { id: 2, item: 'ink', qty: 1, createdAt: new Date(Date.UTC(2026, 0, 6)) },
];

export function list(ctx) {
  var account = ctx.request.getAttribute('account');
  return { owner: account.name, orders: ORDERS };
}

export async function create(ctx) {
  var input = JSON.parse(ctx.body || '{}');
  if (!input.item || !(input.qty > 0)) {
    var error = new Error('item and a positive qty are required');
    error.code = 4001;
    throw error;
  }
  return { id: ORDERS.length + 1, item: input.item, qty: input.qty, createdAt: new Date() };
}

// A script step of the order-summary automation: called with (ctx, state); its return value is
// the step's result (state.steps.orders for the steps after it).
export function all(ctx, state) {
  return ORDERS;
}

// orders/get?id=1 (its after hook, the envelope automation, wraps the result)
export function get(ctx) {
  var id = Number(ctx.query.id);
  var order = ORDERS.find(function (o) { return o.id === id; });
  if (!order) platform.app.abort('no order ' + ctx.query.id, 404);
  return order;
}

export function report(ctx) {
  return { path: 'report.csv', name: 'orders-report.csv', contentDisposition: 'attachment' };
}
