/** Text: the result's string form (toString; null/undefined give ''), `text/plain;charset=UTF-8`. */
import type { ReturnTypeHandler } from './index';
import { contentTypeOf } from '../response/apply';

export const TEXT_TYPE = 'text/plain;charset=UTF-8';

export const sendText: ReturnTypeHandler<'Text'> = (output, { res, state }) => {
  const body = Buffer.from(output.text);
  res.statusCode = state.status;
  res.setHeader('Content-Type', contentTypeOf(state) ?? TEXT_TYPE);
  res.setHeader('Content-Length', body.length);
  res.end(body);
};
