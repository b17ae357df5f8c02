/** Redirect: a 302 to the returned URL string (http(s) or relative only; see response/framing.ts). */
import type { ReturnTypeHandler } from './index';
import { locationHeader } from '../response/framing';

export const sendRedirect: ReturnTypeHandler<'Redirect'> = (output, { res }) => {
  const location = locationHeader(output.location);
  res.statusCode = 302;
  res.setHeader('Location', location);
  res.setHeader('Content-Length', 0);
  res.end();
};
