/**
 * Checks of the router options for running in production: logging style, error locations, CORS,
 * fall-through, preview and metrics. Each failure is a ConfigError naming the field.
 */
import { ConfigError } from './errors';
import { validateCors } from './cors';
import { validateMetrics } from './metrics';
import { validatePreview } from './preview';

function bool(o: Record<string, unknown>, field: string): void {
  if (o[field] !== undefined && typeof o[field] !== 'boolean') throw new ConfigError(field, `must be a boolean, got ${JSON.stringify(o[field])}`);
}

export function validateProductionOptions(o: Record<string, unknown>): void {
  if (o.loggerStyle !== undefined && o.loggerStyle !== 'message-first' && o.loggerStyle !== 'meta-first') {
    throw new ConfigError('loggerStyle', `must be 'message-first' (console, winston) or 'meta-first' (pino, bunyan), got ${JSON.stringify(o.loggerStyle)}`);
  }
  // (it tells how to call a logger of one's own: without one it did nothing)
  if (o.loggerStyle !== undefined && (o.logger === undefined || o.logger === false)) {
    throw new ConfigError('loggerStyle', `says how to call a logger of your own: give it with \`logger\`${o.logger === false ? ' (false turns logging off)' : ''}`);
  }
  bool(o, 'exposeErrorLocation');
  bool(o, 'fallthrough');
  if (o.cors !== undefined) validateCors(o.cors, 'cors', false);
  validatePreview(o.preview);
  validateMetrics(o.metrics);
}
