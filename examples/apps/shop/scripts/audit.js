// Execute after calling: auditing. Returns nothing, so the call's result is sent unchanged.
export function audit(ctx, result) {
  var account = ctx.request.getAttribute('account');
  console.info(ctx.method + ' ' + ctx.path + ' by ' + account.userName);
  ctx.response.setHeader('X-Audited-By', account.userName);
}
