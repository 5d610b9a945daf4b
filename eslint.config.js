import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/**", ".wharf/**", "dist/**", "console/dist/**", "**/.wharf/**", ".scratch*/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: "readonly", console: "readonly", Buffer: "readonly", setTimeout: "readonly", clearTimeout: "readonly", setInterval: "readonly", clearInterval: "readonly", URL: "readonly", fetch: "readonly", performance: "readonly" } },
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-empty": ["error", { allowEmptyCatch: true }],
    },
  },
  {
    // An error is either handled, logged with context, or expected for a reason a comment gives.
    files: ["src/{config,crypto,secrets,store,platform,identity,log,http,connections}/**/*.ts"],
    rules: { "no-empty": ["error", { allowEmptyCatch: false }], "@typescript-eslint/no-empty-function": "error" },
  },
);
