/** Text: the result's string form (toString; null/undefined give ''), `text/plain;charset=UTF-8`. */
import type { ReturnTypeHandler } from './index';
import { sendBody } from '../response/apply';

export const TEXT_TYPE = 'text/plain;charset=UTF-8';

export const sendText: ReturnTypeHandler<'Text'> = (output, { res, state }) => sendBody(res, state, output.text, TEXT_TYPE);
