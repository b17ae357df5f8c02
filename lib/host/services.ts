/**
 * The host side of a request's host calls: accounts, outbound HTTP, uploaded parts, automations
 * and console output. One HostServices per request; `dispose()` drops unread outbound bodies.
 */
import { ApiError } from '../errors';
import type { UploadedPart } from '../context/body';
import type { HostBridge } from '../runtime/engine';
import type { OutboundClient, OutboundResponse } from '../outbound/client';
import { resolveAppPath } from '../files/sandbox-path';
import { attachmentFileOf, saveAttachmentTo, savePart } from '../files/part-files';
import type { FileStorage } from '../files/storage';
import type { ApiRouterOptions, Logger } from '../types';

/** What the router shares with every request's host services. */
export interface HostShared {
  options: ApiRouterOptions;
  outbound: OutboundClient;
  logger: Logger | undefined;
  /** The apps' local sandboxes (`sandboxDir`) and shared storage (`storage` / `storageDir`). */
  files: { sandbox?: FileStorage; storage?: FileStorage };
}

export interface RequestInfo {
  appId: string;
  apiPath: string;
  requestId: string;
  parts: UploadedPart[];
}

const MAX_OPEN_RESPONSES = 32;
/** Console lines one request may log; the rest are counted and reported in one line. */
export const MAX_LOG_LINES = 200;

function str(v: unknown, field: string): string {
  if (typeof v !== 'string' || v === '') throw new ApiError('SCRIPT_ERROR', `${field} must be a non-empty string`);
  return v;
}

export class HostServices implements HostBridge {
  private readonly responses = new Map<string, OutboundResponse>();
  private nextId = 1;
  private logLines = 0;

  constructor(
    private readonly shared: HostShared,
    private readonly info: RequestInfo,
  ) {}

  async call(op: string, args: Record<string, unknown>): Promise<unknown> {
    const { options } = this.shared;
    const { appId } = this.info;
    switch (op) {
      case 'console':
        this.log(String(args.level ?? 'log'), String(args.message ?? ''), String(args.script ?? ''));
        return null;
      case 'system.getAccountByToken': {
        if (!options.accounts) return null;
        if (args.token == null || args.token === '') return null;
        try {
          return (await options.accounts.getAccountByToken(String(args.token))) ?? null;
        } catch (e) {
          this.shared.logger?.error(`scriptable-api: accounts.getAccountByToken failed: ${(e as Error)?.message}`, { appId });
          throw new ApiError('HOST_ERROR', 'Account lookup failed');
        }
      }
      case 'http.request': {
        if (this.responses.size >= MAX_OPEN_RESPONSES) throw new ApiError('OUTBOUND_FAILED', `At most ${MAX_OPEN_RESPONSES} outbound responses per call`);
        const res = await this.shared.outbound.request({
          url: str(args.url, 'url'),
          method: typeof args.method === 'string' ? args.method : undefined,
          headers: args.headers && typeof args.headers === 'object' ? (args.headers as Record<string, string>) : undefined,
          body: args.body == null ? undefined : typeof args.body === 'string' ? args.body : JSON.stringify(args.body),
          timeoutMs: typeof args.timeoutMs === 'number' ? args.timeoutMs : undefined,
        });
        const id = String(this.nextId++);
        this.responses.set(id, res);
        return { id, status: res.status, headers: res.headers, url: res.url };
      }
      case 'http.body':
        return this.response(args.id).text();
      case 'http.saveBodyAsFile': {
        const target = str(args.path, 'path');
        const abs = await resolveAppPath(options.sandboxDir, appId, target, { forWrite: true });
        const size = await this.response(args.id).saveTo(abs);
        return { path: target, size };
      }
      case 'part.save':
      case 'part.saveStorage': {
        const part = this.part(args.id);
        const target = op === 'part.save' ? this.shared.files.sandbox : this.shared.files.storage;
        const saved = await this.storing(op, savePart(target, appId, str(args.path, 'path'), part));
        return { path: saved.path, size: saved.size };
      }
      case 'part.saveAttachment': {
        const part = this.part(args.id);
        const tableId = str(args.tableId, 'tableId');
        const fieldId = str(args.fieldId, 'fieldId');
        if (!options.attachments) return this.storing(op, saveAttachmentTo(this.shared.files.storage, appId, tableId, fieldId, part));
        return (await options.attachments.save(appId, tableId, fieldId, attachmentFileOf(part))) ?? null;
      }
      case 'automation.run':
        return this.runAutomation(args);
      default:
        throw new ApiError('SCRIPT_ERROR', `Unknown host operation '${op}'`);
    }
  }

  private async runAutomation(args: Record<string, unknown>): Promise<unknown> {
    const { options } = this.shared;
    const id = str(args.automation, 'automation');
    const def = options.registry.getAutomation ? await options.registry.getAutomation(this.info.appId, id) : undefined;
    if (!def) throw new ApiError('AUTOMATION_UNAVAILABLE', `Automation '${id}' not found in app '${this.info.appId}'`);
    if (!options.automations) throw new ApiError('AUTOMATION_UNAVAILABLE', 'This router has no `automations` runner');
    const input = args.input as { request: Record<string, unknown>; attributes: Record<string, unknown>; result?: unknown };
    return options.automations.run({
      appId: this.info.appId,
      requestId: this.info.requestId,
      automation: def,
      stage: args.stage === 'after' ? 'after' : 'call',
      input,
    });
  }

  /** A storage's own failure is logged and reaches the script as a host error, without its details. */
  private async storing<T>(op: string, work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (e) {
      if (e instanceof ApiError) throw e;
      this.shared.logger?.error(`scriptable-api: ${op} failed in storage: ${(e as Error)?.stack ?? String(e)}`, { appId: this.info.appId, requestId: this.info.requestId });
      throw new ApiError('HOST_ERROR', 'The file could not be stored');
    }
  }

  private response(id: unknown): OutboundResponse {
    const res = this.responses.get(String(id));
    if (!res) throw new ApiError('OUTBOUND_FAILED', 'That response body is no longer available');
    return res;
  }

  private part(id: unknown): UploadedPart {
    const part = this.info.parts[Number(id)];
    if (!part) throw new ApiError('SCRIPT_ERROR', 'Unknown part');
    return part;
  }

  private log(level: string, message: string, script: string): void {
    const logger = this.shared.logger;
    if (!logger || ++this.logLines > MAX_LOG_LINES) return;
    const meta = { appId: this.info.appId, script, requestId: this.info.requestId };
    const line = `[${this.info.appId}/${script}] ${message}`;
    if (level === 'error') logger.error(line, meta);
    else if (level === 'warn') logger.warn(line, meta);
    else if (level === 'debug') (logger.debug ?? logger.info).call(logger, line, meta);
    else logger.info(line, meta);
  }

  /** Drops outbound bodies the script never read. */
  dispose(): void {
    if (this.logLines > MAX_LOG_LINES) {
      this.shared.logger?.warn(`[${this.info.appId}] ${this.logLines - MAX_LOG_LINES} more console lines of request ${this.info.requestId} were dropped`, {
        appId: this.info.appId,
        requestId: this.info.requestId,
      });
    }
    for (const r of this.responses.values()) r.discard();
    this.responses.clear();
  }
}

