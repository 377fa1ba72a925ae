import tseslint from 'typescript-eslint';

export default tseslint.config({ ignores: ['dist/', 'node_modules/', 'bench/results/', 'runtime/'] }, ...tseslint.configs.recommended, {
  rules: {
    '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
    '@typescript-eslint/consistent-type-imports': 'error',
  },
});
