/** Redirect: a 302 to the returned URL string. */
import type { ReturnTypeHandler } from './index';

export const sendRedirect: ReturnTypeHandler<'Redirect'> = (output, { res }) => {
  res.statusCode = 302;
  res.setHeader('Location', encodeURI(decodeURISafe(output.location)));
  res.setHeader('Content-Length', 0);
  res.end();
};

/** Keeps already-encoded URLs as they are while encoding raw spaces and non-ASCII characters. */
function decodeURISafe(url: string): string {
  try {
    return decodeURI(url);
  } catch {
    return url;
  }
}
