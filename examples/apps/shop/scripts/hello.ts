// A TypeScript script: types are stripped before it runs.
interface Greeting {
  toString(): string;
}

export default function hello(ctx: APIContext): Greeting {
  const name: string = typeof ctx.query.name === 'string' ? ctx.query.name : 'world';
  return { toString: () => `Hello, ${name}!` };
}

export function docs(ctx: APIContext): string {
  return 'https://example.com/docs/' + encodeURIComponent(ctx.appId);
}
