/** JSON: the result serialized (in the sandbox, Dates as ms timestamps), `application/json;charset=UTF-8`. */
import type { ReturnTypeHandler } from './index';
import { contentTypeOf, JSON_TYPE } from '../response/apply';

export const sendJson: ReturnTypeHandler<'JSON'> = (output, { res, state }) => {
  const body = Buffer.from(output.json);
  res.statusCode = state.status;
  res.setHeader('Content-Type', contentTypeOf(state) ?? JSON_TYPE);
  res.setHeader('Content-Length', body.length);
  res.end(body);
};
