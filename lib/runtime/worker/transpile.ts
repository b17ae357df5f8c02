/**
 * Source transforms, cached by hash: `.ts`/`.mts` scripts are type-stripped; engines without ES
 * module support (vm2) get CommonJS.
 */
import { transform, type Transform } from 'sucrase';

export function isTypeScript(name: string): boolean {
  return /\.(ts|mts|cts)$/i.test(name);
}

export function transpile(name: string, source: string, toCommonJs: boolean): string {
  const transforms: Transform[] = [];
  if (isTypeScript(name)) transforms.push('typescript');
  if (toCommonJs) transforms.push('imports');
  if (transforms.length === 0) return source;
  return transform(source, { transforms, filePath: name, disableESTransforms: true, production: true }).code;
}
