/**
 * Entry of the `scriptable-api` command (bin/scriptable-api.js). Exit codes: 0 after a clean
 * shutdown, 1 when the server cannot start (port taken, invalid options), 2 for a bad command line.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ConfigError } from '../errors';
import { parseCli, USAGE, UsageError } from './args';
import { ConfigFileError, consoleLogger, resolveConfig } from './config';
import { startServer, type RunningServer } from './serve';

function version(): string {
  const pkg = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as { version: string };
  return pkg.version;
}

/** Runs the command line; resolves to the exit code once the command is over. */
export async function main(argv: string[]): Promise<number> {
  const logger = consoleLogger();
  let args;
  try {
    args = parseCli(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`scriptable-api: ${e.message}\n\n${USAGE}`);
    return 2;
  }
  if (args.command === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (args.command === 'version') {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  // The signals are the command's from the start: one that comes while the server starts, or just
  // as its line is printed (a supervisor waiting for that line), stops it once started (Node.js's
  // default would end the process by the signal, without a clean stop or exit code 0).
  let exit!: (code: number) => void;
  const exited = new Promise<number>((resolve) => (exit = resolve));
  let signalled: NodeJS.Signals | undefined;
  let server: RunningServer | undefined;
  const stop = (running: RunningServer, signal: NodeJS.Signals) => {
    // (shutdown stops listening before it returns: the line is true once printed)
    const stopped = running.shutdown();
    logger.info(`scriptable-api: ${signal}: no new connections; finishing the requests in flight`);
    stopped.then(
      () => {
        logger.info('scriptable-api: stopped');
        exit(0);
      },
      (e: unknown) => {
        process.stderr.write(`scriptable-api: error while stopping: ${(e as Error)?.message ?? e}\n`);
        exit(1);
      },
    );
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled !== undefined) {
      process.stderr.write(`scriptable-api: ${signal} again: exiting now\n`);
      exit(130);
      return;
    }
    signalled = signal;
    if (server !== undefined) stop(server, signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const starting = (async () => {
      const config = await resolveConfig(args);
      if (!fs.existsSync(config.root)) throw new ConfigFileError(`the apps folder ${config.root} does not exist`);
      if (!fs.statSync(config.root).isDirectory()) throw new ConfigFileError(`the apps folder ${config.root} is not a folder`);
      const running = await startServer(config, logger);
      const apps = running.registry.listApps();
      logger.info(`scriptable-api ${version()} serving ${apps.length} app(s) from ${config.root} on ${running.url}`);
      return running;
    })();
    // (a second signal while it starts exits at once, as it does while it stops)
    const started = await Promise.race([starting, exited.then(() => undefined)]);
    if (started === undefined) return exited;
    server = started;
  } catch (e) {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    const message = e instanceof ConfigError ? e.message.replace(/^scriptable-api: /, '') : (e as Error)?.message ?? String(e);
    process.stderr.write(`scriptable-api: ${message}\n`);
    return 1;
  }
  if (signalled !== undefined) stop(server, signalled);
  return exited;
}

/** For the bin script: runs main and exits with its code. */
export function run(): void {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`scriptable-api: ${(e as Error)?.stack ?? e}\n`);
      process.exit(1);
    },
  );
}
