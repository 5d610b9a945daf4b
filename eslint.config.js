import js from "@eslint/js";
import tseslint from "typescript-eslint";

// Features (and the confinement layer) are used through their index.ts only: an import of another
// one's internals fails lint. Generated per folder depth, since import specifiers are relative.
const SURFACED = ["agent-server", "confinement", "config", "console", "deployments", "egress", "metrics", "sandboxes"];
const boundaryBlocks = [];
const BOUNDARY_EXCEPTIONS = [
  // Both load only what they name before anything else starts (the CLI's error classes without zod,
  // the supervisor's one setting): the config index would load every declaration and the docs.
  "src/cli/main.ts",
  "src/platform/supervisor.ts",
];
for (const own of [
  "agent-server",
  "cli",
  "config",
  "confinement",
  "connections",
  "console",
  "crypto",
  "deployments",
  "egress",
  "http",
  "identity",
  "log",
  "metrics",
  "platform",
  "sandboxes",
  "secrets",
  "store",
]) {
  const others = SURFACED.filter((f) => f !== own);
  for (let depth = 1; depth <= 5; depth++) {
    const up = "\\.\\./".repeat(depth);
    boundaryBlocks.push({
      files: [`src/${own}/${"*/".repeat(depth - 1)}*.ts`],
      rules: {
        "no-restricted-imports": [
          "error",
          {
            patterns: [
              {
                regex: `^${up}(${others.join("|")})/(?!index\\.ts$)`,
                message: "import another feature through its index.ts",
              },
            ],
          },
        ],
      },
    });
  }
}

export default tseslint.config(
  { ignores: ["node_modules/**", ".wharf/**", "dist/**", "console/dist/**", "**/.wharf/**", ".scratch*/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        Buffer: "readonly",
        setTimeout: "readonly",
        clearTimeout: "readonly",
        setInterval: "readonly",
        clearInterval: "readonly",
        URL: "readonly",
        fetch: "readonly",
        performance: "readonly",
      },
    },
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-empty": ["error", { allowEmptyCatch: true }],
    },
  },
  {
    // An error is either handled, logged with context, or expected for a reason a comment gives:
    // everywhere in src/ (an empty catch or handler needs a comment saying why).
    files: ["src/**/*.ts"],
    rules: { "no-empty": ["error", { allowEmptyCatch: false }], "@typescript-eslint/no-empty-function": "error" },
  },
  {
    // An error thrown from a catch keeps the one it replaces as its `cause` (the stack says where it
    // began). A catch without a parameter is a deliberate drop (a parse error that would echo a secret).
    files: ["src/**/*.ts"],
    rules: { "preserve-caught-error": "error" },
  },
  {
    // Type-aware checks on the platform's code: a promise nobody awaits loses its error, and a
    // switch over a union says what it does with every member (a default counts). Their program is
    // src/ alone (tsconfig.lint.json): the whole tsconfig.json would also parse the tests, benches and
    // examples that no typed rule looks at (about a fifth of the lint's time).
    files: ["src/**/*.ts"],
    languageOptions: { parserOptions: { project: "./tsconfig.lint.json", tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/switch-exhaustiveness-check": ["error", { considerDefaultExhaustiveForUnions: true }],
    },
  },
  {
    // A file over 400 lines or a function over 80 is split by concern; where a long function is
    // right (a table, a migration), a disable comment above it says why.
    files: ["src/**/*.ts"],
    rules: {
      "max-lines": ["error", { max: 400, skipBlankLines: true, skipComments: true }],
      "max-lines-per-function": ["error", { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  ...boundaryBlocks,
  {
    // Imports of another feature's internals kept on purpose (see BOUNDARY_EXCEPTIONS).
    files: BOUNDARY_EXCEPTIONS,
    rules: { "no-restricted-imports": "off" },
  },
);
