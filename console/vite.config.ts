import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// Reproducible: no timestamps or absolute paths in the output; file names are content hashes.
export default defineConfig({
  root: import.meta.dirname,
  base: "/console/",
  plugins: [react()],
  logLevel: "warn",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    chunkSizeWarningLimit: 1200,
  },
});
