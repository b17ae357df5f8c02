// Execute after calling error: a custom error body with status 200.
export function handle(ctx, error) {
  ctx.response.setStatus(200);
  ctx.response.setContentType('application/json;charset=UTF-8');
  ctx.response.getWriter().write(platform.utils.toJSON({ success: false, error: error }));
}
