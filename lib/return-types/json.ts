/** JSON: the result serialized (in the sandbox, Dates as ms timestamps), `application/json;charset=UTF-8`. */
import type { ReturnTypeHandler } from './index';
import { JSON_TYPE, sendBody } from '../response/apply';

export const sendJson: ReturnTypeHandler<'JSON'> = (output, { res, state }) => sendBody(res, state, output.json, JSON_TYPE);
