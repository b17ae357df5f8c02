// Execute before calling: authentication. Ends the call with platform.app.abort when the token
// is missing or invalid; otherwise stores the account for the later scripts.
export function authenticate(ctx) {
  var token = ctx.query.token || (ctx.request.getHeader('authorization') || '').replace(/^Bearer /, '');
  if (!token) {
    platform.app.abort('token missing', 401);
  }
  var account = platform.system.getAccountByToken(token);
  if (account == null) {
    platform.app.abort('token expired or invalid', 401);
  }
  ctx.request.setAttribute('account', account);
}
