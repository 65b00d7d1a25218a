// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** The rules that matter here (docs/development.md, "Lint and format"); formatting itself is Prettier's. */
export default tseslint.config(
  { ignores: ['node_modules/**', '**/migrations/.snapshot*.json', 'clients/**/dist/**', 'dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test runs what describe and it register; their promises are its to await.
        { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite'] }] },
      ],
      'max-lines': ['error', { max: 600 }],
      // A variable a callback reads before its one assignment (a slot released on close) stays a let.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    // The plain JavaScript the package starts with (bin/): node's globals.
    files: ['bin/*.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
  {
    // Generated from the registry (npm run client:generate): one type per operation's params and result.
    files: ['clients/typescript/src/operations.ts'],
    rules: { 'max-lines': 'off' },
  },
  {
    // Tests read answers as the loose JSON they are, and so do plugins' tests (plugins/<id>/test/) through core/cli/testing.ts.
    files: ['test/**/*.ts', 'plugins/*/test/**/*.ts', 'core/cli/testing.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
