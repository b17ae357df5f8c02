/**
 * Two export forms that sucrase's `imports` transform (vm2's ES module → CommonJS step) lowers
 * into code that fails, rewritten first into forms it lowers right (alangpierce/sucrase#455, #671):
 *
 * - `export const a = 1, b = 2;` became `const a = 1; exports.a = a, b = 2;` (`b` is never
 *   declared: a ReferenceError in strict code). Each declarator gets its own `export const`.
 * - `export { handler };` before `const handler = ...` became `exports.handler = handler;` where it
 *   stood, before the declaration ran (a ReferenceError; `undefined` for a `var`). Such a list
 *   moves to the end of the module, where every binding it names is set (an export list may
 *   stand anywhere in a module).
 *
 * And one it lowers off-column: `export function f` / `export class C` lose their `export ` (the
 * rest of the line moved 6 columns left, so an error's column pointed elsewhere). The keyword is
 * blanked here and the name exported at the end (a function is hoisted; a class is set by then).
 *
 * Every line keeps its number (error locations name the script's own lines). Source that does
 * not parse is returned unchanged: sucrase then reports the syntax error.
 */
import { parseModule, type Node } from '../rewrite/ast';

/** The statements this looks at; without them the source is not parsed. */
const CANDIDATE = /\bexport\s*(?:\{|(?:const|let|var|function|async|class)\b)/;

/** `text` with everything but its line breaks turned into spaces (same lines, same columns). */
function blank(text: string): string {
  return text.replace(/[^\r\n\u2028\u2029]/g, ' ');
}

export function fixExportsForCommonJs(source: string): string {
  if (!CANDIDATE.test(source)) return source;
  let root: Node;
  try {
    root = parseModule(source);
  } catch {
    return source;
  }
  const edits: Array<{ start: number; end: number; text: string }> = [];
  const moved: string[] = [];
  for (const statement of root.body as Node[]) {
    if (statement.type !== 'ExportNamedDeclaration') continue;
    const declaration = statement.declaration as Node | null;
    if (declaration?.type === 'VariableDeclaration' && declaration.declarations.length > 1) {
      const declarators = declaration.declarations as Node[];
      for (let i = 1; i < declarators.length; i++) {
        // (the comma between two declarators: only whitespace and comments can stand beside it)
        const gap = source.slice(declarators[i - 1].end, declarators[i].start);
        const comma = commaIn(gap);
        if (comma < 0) return source;
        const at = declarators[i - 1].end + comma;
        edits.push({ start: at, end: at + 1, text: `; export ${declaration.kind as string} ` });
      }
    } else if ((declaration?.type === 'FunctionDeclaration' || declaration?.type === 'ClassDeclaration') && declaration.id) {
      edits.push({ start: statement.start, end: declaration.start, text: blank(source.slice(statement.start, declaration.start)) });
      moved.push(`export { ${(declaration.id as Node).name as string} };`);
    } else if (declaration === null && statement.source === null) {
      edits.push({ start: statement.start, end: statement.end, text: blank(source.slice(statement.start, statement.end)) });
      moved.push(source.slice(statement.start, statement.end));
    }
  }
  if (edits.length === 0) return source;
  // (the text between the edits and the edits, joined once: splicing each edit into the whole
  // text took time growing with the square of the exports, seconds for a few thousand)
  const parts: string[] = [];
  let at = 0;
  for (const e of edits.sort((a, b) => a.start - b.start)) {
    parts.push(source.slice(at, e.start), e.text);
    at = e.end;
  }
  parts.push(source.slice(at));
  const out = parts.join('');
  return moved.length === 0 ? out : `${out}\n;${moved.join('\n')}`;
}

/** The offset of the comma in the text between two declarators (skipping comments), or -1. */
function commaIn(gap: string): number {
  let i = 0;
  while (i < gap.length) {
    if (gap.startsWith('//', i)) {
      const nl = gap.slice(i).search(/[\r\n\u2028\u2029]/);
      i = nl < 0 ? gap.length : i + nl;
    } else if (gap.startsWith('/*', i)) {
      const close = gap.indexOf('*/', i + 2);
      i = close < 0 ? gap.length : close + 2;
    } else if (gap[i] === ',') {
      return i;
    } else {
      i++;
    }
  }
  return -1;
}
