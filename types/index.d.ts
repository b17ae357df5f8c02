/*
 * scriptable-api — ambient types for SCRIPT AUTHORS: the sandbox globals (`platform`, `console`)
 * and the `ctx` (APIContext) a script function receives. This is not the host (Express) API, which
 * is `import ... from 'scriptable-api'`.
 *
 * In a scripts folder, load only these types and no Node or DOM types:
 *   {
 *     "compilerOptions": {
 *       "strict": true, "noEmit": true, "target": "ES2022", "lib": ["ES2022"],
 *       "types": ["scriptable-api/types/index.d.ts"],
 *       "module": "ES2022", "moduleResolution": "bundler", "isolatedModules": true
 *     },
 *     "include": ["*.ts"]
 *   }
 * or start a script with `/// <reference types="scriptable-api/types/index.d.ts" />`.
 * See examples/scripts-tsconfig in the repository.
 */

/// <reference path="./api-context.d.ts" />
/// <reference path="./platform.d.ts" />
